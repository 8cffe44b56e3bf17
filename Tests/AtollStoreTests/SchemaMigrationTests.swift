import AtollStore
import CSQLite
import Foundation
import XCTest

/// The schema stored in the file: kept across opens, extended by additions, refused otherwise.
final class SchemaMigrationTests: XCTestCase {
    let v1 = Schema([ObjectSchema(name: "Person", primaryKey: "id", properties: [
        .int("id"), .string("name"), .int("age", optional: true),
    ])])

    /// A file with the `v1` schema at `version` and two people in it.
    private func makeFile(version: UInt64 = 0) throws -> String {
        let path = temporaryRealmPath()
        let store = try Store(Configuration(path: path, schema: v1, schemaVersion: version))
        try store.write {
            try store.create("Person", ["id": .int(1), "name": .string("Ann"), "age": .int(30)])
            try store.create("Person", ["id": .int(2), "name": .string("Bob")])
        }
        store.close()
        return path
    }

    // MARK: - The stored schema

    func testEveryKindOfPropertySurvivesReopening() throws {
        let date = Timestamp(milliseconds: 1_767_225_600_123)
        let schema = Schema([
            ObjectSchema(name: "Thing", primaryKey: "id", properties: [
                .string("id"),
                Property(name: "b", type: .bool, defaultValue: .bool(true)),
                .int("i", indexed: true, default: .int(7)),
                Property(name: "f", type: .float, defaultValue: .float(1.5)),
                Property(name: "d", type: .double, isOptional: true),
                .string("s", default: .string("x")),
                Property(name: "bin", type: .data, defaultValue: .data([1, 2])),
                Property(name: "when", type: .date, defaultValue: .date(date)),
                Property(name: "oid", type: .objectId, isOptional: true, isIndexed: true),
                Property(name: "u", type: .uuid, isOptional: true),
                Property(name: "dec", type: .decimal128, defaultValue: .decimal(Decimal128("2.5")!)),
                .list("tags", .string),
                .list("nums", .int, optional: true),
                .link("pal", "Thing"),
                .links("pals", "Thing"),
                Property(name: "addr", type: .object, objectType: "Address"),
                .links("addrs", "Address"),
            ]),
            ObjectSchema(name: "Address", isEmbedded: true, properties: [.string("city"), .string("zip", optional: true)]),
            ObjectSchema(name: "Note", properties: [.string("text")]),
        ])
        let path = temporaryRealmPath()
        let first = try Store(Configuration(path: path, schema: schema, schemaVersion: 3))
        XCTAssertEqual(first.schema, schema)
        first.close()

        let reopened = try open(path, nil)
        XCTAssertEqual(reopened.schema, schema)
        XCTAssertEqual(reopened.schemaVersion, 3)
        reopened.close()

        // Opening again with the same schema and version changes nothing.
        let again = try open(path, schema, schemaVersion: 3)
        XCTAssertEqual(again.schema, schema)
        XCTAssertEqual(again.schemaVersion, 3)
        // Defaults apply to new objects.
        try again.write { try again.create("Thing", ["id": .string("t")]) }
        let t = try XCTUnwrap(again.object("Thing", primaryKey: .string("t")))
        XCTAssertEqual(t["b"], .bool(true))
        XCTAssertEqual(t["i"], .int(7))
        XCTAssertEqual(t["f"], .float(1.5))
        XCTAssertEqual(t["d"], .null)
        XCTAssertEqual(t["s"], .string("x"))
        XCTAssertEqual(t["bin"], .data([1, 2]))
        XCTAssertEqual(t["when"], .date(date))
        XCTAssertEqual(t["dec"], .decimal(Decimal128("2.5")!))
        XCTAssertEqual(t["tags"], .list([]))
        XCTAssertEqual(t["addr"], .null)
    }

    func testOpeningWithoutASchemaUsesTheStoredOne() throws {
        let path = try makeFile()
        let store = try open(path, nil)
        XCTAssertEqual(store.schema, v1)
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1))?["name"], .string("Ann"))
        XCTAssertEqual(try store.intKeys("Person", "age == nil"), [2])
        try store.write { try store.create("Person", ["id": .int(3), "name": .string("Cy")]) }
        XCTAssertEqual(try store.objects("Person").count(), 3)
    }

    func testANewFileOpenedWithoutASchemaIsEmptyAndUsable() throws {
        let store = try openTemporaryStore(nil)
        XCTAssertEqual(store.schema, Schema())
        XCTAssertEqual(try store.version(), 0)
        assertAtollError(try store.objects("Person"), .noSuchClass, "no class named 'Person'")
    }

    // MARK: - Additive changes

    private var v2: Schema {
        Schema([
            ObjectSchema(name: "Person", primaryKey: "id", properties: [
                .int("id"), .string("name", indexed: true), .int("age", optional: true),
                .int("score", default: .int(5)),
                .string("nick", optional: true, default: .string("n/a")),
                .string("motto"),
                .list("tags", .string),
                .link("pet", "Pet"),
            ]),
            ObjectSchema(name: "Pet", primaryKey: "id", properties: [.string("id"), .string("name")]),
        ])
    }

    private func checkAdditions(_ store: Store, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(store.schema, v2, file: file, line: line)
        let ann = try XCTUnwrap(store.object("Person", primaryKey: .int(1)), file: file, line: line)
        XCTAssertEqual(ann["name"], .string("Ann"), file: file, line: line)
        XCTAssertEqual(ann["age"], .int(30), file: file, line: line)
        XCTAssertEqual(ann["score"], .int(5), "a new required property takes its default", file: file, line: line)
        XCTAssertEqual(ann["motto"], .string(""), "without a default, the type's zero", file: file, line: line)
        XCTAssertEqual(ann["tags"], .list([]), file: file, line: line)
        XCTAssertEqual(ann["pet"], .null, file: file, line: line)
        XCTAssertEqual(try store.intKeys("Person", "score == 5"), [1, 2], file: file, line: line)
        XCTAssertEqual(try store.intKeys("Person", "name == 'Bob'"), [2], "the new index answers", file: file, line: line)

        try store.write {
            try store.create("Pet", ["id": .string("rex"), "name": .string("Rex")])
            try store.create("Person", ["id": .int(3), "name": .string("Cy"), "pet": .string("rex"),
                                        "tags": .list([.string("new")])])
        }
        let cy = try XCTUnwrap(store.object("Person", primaryKey: .int(3)), file: file, line: line)
        XCTAssertEqual(cy["score"], .int(5), file: file, line: line)
        XCTAssertEqual(cy["nick"], .string("n/a"), file: file, line: line)
        XCTAssertEqual(cy["pet"], .string("rex"), file: file, line: line)
        XCTAssertEqual(cy["tags"], .list([.string("new")]), file: file, line: line)
    }

    func testAdditionsWithoutAVersionBump() throws {
        let path = try makeFile(version: 4)
        let store = try open(path, v2, schemaVersion: 4)
        XCTAssertEqual(store.schemaVersion, 4)
        try checkAdditions(store)
        store.close()

        let reopened = try open(path, nil)
        XCTAssertEqual(reopened.schema, v2)
        XCTAssertEqual(reopened.schemaVersion, 4)
        XCTAssertEqual(reopened.schema["Person"]?[property: "name"]?.isIndexed, true)
        XCTAssertEqual(try reopened.objects("Person").count(), 3)
    }

    func testAdditionsWithAVersionBump() throws {
        let path = try makeFile(version: 1)
        let store = try open(path, v2, schemaVersion: 2)
        XCTAssertEqual(store.schemaVersion, 2)
        try checkAdditions(store)
        store.close()
        XCTAssertEqual(try open(path, nil).schemaVersion, 2)
        // The file is now at version 2: version 1 is a downgrade.
        assertAtollError(try Store(Configuration(path: path, schema: v2, schemaVersion: 1)), .schemaMismatch,
                         "schema version 1 is lower than the file's version 2")
    }

    /// Existing objects get a new property's default, also when the property is optional.
    func testANewOptionalPropertyWithADefaultIsFilledInExistingObjects() throws {
        let path = try makeFile()
        let store = try open(path, v2)
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1))?["nick"], .string("n/a"))
        XCTAssertEqual(try store.intKeys("Person", "nick == 'n/a'"), [1, 2])
    }

    /// New required properties of every type, with and without defaults, in existing objects.
    func testNewPropertiesOfEveryTypeAreFilledInExistingObjects() throws {
        let path = try makeFile()
        let when = Timestamp(milliseconds: -86_400_000)
        let oid = ObjectId(hex: "0123456789abcdef01234567")!
        let uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        let additions: [(Property, Value)] = [
            (Property(name: "b", type: .bool, defaultValue: .bool(true)), .bool(true)),
            (Property(name: "i", type: .int, defaultValue: .int(-7)), .int(-7)),
            (Property(name: "f", type: .float, defaultValue: .float(0.1)), .float(0.1)),
            (Property(name: "d", type: .double, defaultValue: .double(-2.5)), .double(-2.5)),
            (Property(name: "dInf", type: .double, defaultValue: .double(.infinity)), .double(.infinity)),
            (Property(name: "s", type: .string, defaultValue: .string("it's \"x\" é")), .string("it's \"x\" é")),
            (Property(name: "bin", type: .data, defaultValue: .data([0, 1, 255])), .data([0, 1, 255])),
            (Property(name: "when", type: .date, defaultValue: .date(when)), .date(when)),
            (Property(name: "oid", type: .objectId, defaultValue: .objectId(oid)), .objectId(oid)),
            (Property(name: "u", type: .uuid, defaultValue: .uuid(uuid)), .uuid(uuid)),
            (Property(name: "dec", type: .decimal128, defaultValue: .decimal(Decimal128("-1.25")!)), .decimal(Decimal128("-1.25")!)),
            (Property(name: "bin0", type: .data), .data([])),
            (Property(name: "oid0", type: .objectId), .objectId(ObjectId(hex: "000000000000000000000000")!)),
            (Property(name: "dec0", type: .decimal128), .decimal(.zero)),
            (Property(name: "when0", type: .date), .date(Timestamp(milliseconds: 0))),
            (Property(name: "ints", type: .int, collection: .list), .list([])),
        ]
        var schema = v1
        schema.classes[0].properties += additions.map(\.0)
        let store = try open(path, schema)
        for id in [1, 2] as [Int64] {
            let doc = try XCTUnwrap(store.object("Person", primaryKey: .int(id)))
            for (p, value) in additions { XCTAssertEqual(doc[p.name], value, "\(p.name) of \(id)") }
        }
        XCTAssertEqual(try store.intKeys("Person", "dec < 0 AND when < 1970-01-01@00:00:00 AND s ENDSWITH 'é'"), [1, 2])
    }

    func testAVersionBumpAloneIsRecorded() throws {
        let path = try makeFile(version: 0)
        XCTAssertEqual(try open(path, v1, schemaVersion: 7).schemaVersion, 7)
        XCTAssertEqual(try open(path, nil).schemaVersion, 7)
    }

    func testAddingAndRemovingAnIndex() throws {
        let path = try makeFile()
        var indexed = v1
        indexed.classes[0].properties[1].isIndexed = true
        let a = try open(path, indexed)
        XCTAssertEqual(try a.intKeys("Person", "name == 'Ann'"), [1])
        a.close()
        XCTAssertEqual(try open(path, nil).schema["Person"]?[property: "name"]?.isIndexed, true)

        let b = try open(path, v1)
        XCTAssertEqual(try b.intKeys("Person", "name == 'Ann'"), [1])
        b.close()
        XCTAssertEqual(try open(path, nil).schema["Person"]?[property: "name"]?.isIndexed, false)
    }

    func testClassesLeftOutOfTheConfigurationStayUsable() throws {
        let path = temporaryRealmPath()
        let both = try open(path, v2)
        try both.write { try both.create("Pet", ["id": .string("rex"), "name": .string("Rex")]) }
        both.close()

        let onlyPets = Schema([ObjectSchema(name: "Pet", primaryKey: "id", properties: [.string("id"), .string("name")])])
        let store = try open(path, onlyPets)
        XCTAssertNotNil(store.schema["Person"])
        try store.write { try store.create("Person", ["id": .int(9), "name": .string("Zed")]) }
        XCTAssertEqual(try store.intKeys("Person"), [9])
        XCTAssertEqual(try store.stringKeys("Pet"), ["rex"])
    }

    // MARK: - Changes that need a migration

    private func assertMismatch(_ schema: Schema, version: UInt64 = 0, fileVersion: UInt64 = 0, _ substrings: String...,
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let path = try makeFile(version: fileVersion)
        let error = assertAtollError(try Store(Configuration(path: path, schema: schema, schemaVersion: version)),
                                     .schemaMismatch, file: file, line: line)
        for s in substrings {
            XCTAssertTrue(error?.message.contains(s) ?? false, "'\(error?.message ?? "")' lacks '\(s)'", file: file, line: line)
        }
        // The file is left as it was.
        let store = try open(path, nil)
        XCTAssertEqual(store.schema, v1, file: file, line: line)
        XCTAssertEqual(store.schemaVersion, fileVersion, file: file, line: line)
        XCTAssertEqual(try store.intKeys("Person"), [1, 2], file: file, line: line)
    }

    func testTypeChange() throws {
        var s = v1
        s.classes[0].properties[2] = .string("age", optional: true)
        try assertMismatch(s, "the schema needs a migration: property 'Person.age' changed type from int? to string?")
    }

    func testOptionalityChange() throws {
        var s = v1
        s.classes[0].properties[2] = .int("age")
        try assertMismatch(s, "property 'Person.age' changed type from int? to int")
    }

    func testSingleToListChange() throws {
        var s = v1
        s.classes[0].properties[2] = .list("age", .int, optional: true)
        try assertMismatch(s, "property 'Person.age' changed type from int? to int?[]")
    }

    func testRemovedProperty() throws {
        var s = v1
        s.classes[0].properties.remove(at: 2)
        try assertMismatch(s, "property 'Person.age' was removed")
    }

    func testPrimaryKeyChange() throws {
        var s = v1
        s.classes[0].primaryKey = "name"
        try assertMismatch(s, "primary key of 'Person' changed from 'id' to 'name'")
        var none = v1
        none.classes[0].primaryKey = nil
        try assertMismatch(none, "primary key of 'Person' changed from 'id' to 'none'")
    }

    func testEmbeddedChange() throws {
        let path = temporaryRealmPath()
        let notes = Schema([ObjectSchema(name: "Note", properties: [.string("text")])])
        try open(path, notes).close()
        var embedded = notes
        embedded.classes[0].isEmbedded = true
        assertAtollError(try Store(Configuration(path: path, schema: embedded)), .schemaMismatch,
                         "class 'Note' changed from top-level to embedded")
    }

    func testDowngrade() throws {
        try assertMismatch(v1, version: 1, fileVersion: 2,
                           "schema version 1 is lower than the file's version 2; downgrades are not supported")
    }

    func testEveryDifferenceIsNamed() throws {
        var s = v1
        s.classes[0].properties[1] = .int("name")
        s.classes[0].properties.remove(at: 2)
        s.classes[0].properties.append(.string("email"))
        try assertMismatch(s, "property 'Person.name' changed type from string to int",
                           "; property 'Person.age' was removed")
    }

    // MARK: - Read-only

    func testReadOnlyOpenReadsButCannotWrite() throws {
        let path = try makeFile()
        let store = try open(path, nil, readOnly: true)
        XCTAssertEqual(store.schema, v1)
        XCTAssertEqual(try store.intKeys("Person", "age > 20"), [1])
        assertAtollError(try store.beginWrite(), .readOnly, "read-only")
        assertAtollError(try store.write { try store.create("Person", ["id": .int(5), "name": .string("E")]) },
                         .readOnly)
        XCTAssertFalse(store.isInWrite)
        XCTAssertEqual(try store.objects("Person").count(), 2)
    }

    func testReadOnlyOpenWithTheSameSchemaWorks() throws {
        let path = try makeFile()
        let store = try open(path, v1, readOnly: true)
        XCTAssertEqual(try store.object("Person", primaryKey: .int(2))?["name"], .string("Bob"))
    }

    func testReadOnlyOpenCannotAddToTheSchema() throws {
        let path = try makeFile()
        assertAtollError(try Store(Configuration(path: path, schema: v2, readOnly: true)), .schemaMismatch,
                         "read-only", "class 'Pet' added")
    }

    func testReadOnlyOpenOfAMissingFileFails() {
        let path = temporaryRealmPath("missing.realm")
        assertAtollError(try Store(Configuration(path: path, readOnly: true)), .file, "does not exist")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
    }

    func testReadOnlySeesAnotherHandlesCommits() throws {
        let path = try makeFile()
        let writer = try open(path, v1)
        let reader = try open(path, nil, readOnly: true)
        try writer.write { try writer.create("Person", ["id": .int(3), "name": .string("Cy")]) }
        XCTAssertEqual(try reader.intKeys("Person"), [1, 2], "as of its open")
        try reader.refresh()
        XCTAssertEqual(try reader.intKeys("Person"), [1, 2, 3])
    }

    // MARK: - Configuration

    func testConfigurationErrors() {
        assertAtollError(try Store(Configuration()), .invalidArgument, "needs a \"path\"")
        assertAtollError(try Store(Configuration(path: "")), .invalidArgument, "needs a \"path\"")
        assertAtollError(try Store(Configuration(path: temporaryRealmPath(), writeTimeoutMilliseconds: -5)),
                         .invalidArgument, "writeTimeoutMs")
        assertAtollError(try Store(Configuration(path: "/nonexistent-dir-\(UUID().uuidString)/x.realm", schema: v1)),
                         .file, "cannot open")
    }

    func testInMemoryStoresShareByName() throws {
        let name = "mem-\(UUID().uuidString)"
        let a = try Store(Configuration(path: name, inMemory: true, schema: v1))
        defer { a.close() }
        try a.write { try a.create("Person", ["id": .int(1), "name": .string("Ann")]) }
        let b = try Store(Configuration(path: name, inMemory: true))
        defer { b.close() }
        XCTAssertEqual(try b.intKeys("Person"), [1])
        XCTAssertFalse(FileManager.default.fileExists(atPath: name))

        let anonymous = try Store(Configuration(inMemory: true, schema: v1))
        defer { anonymous.close() }
        XCTAssertEqual(try anonymous.objects("Person").count(), 0)
    }
}

/// A stored schema that something else damaged is refused at open, not trusted.
final class DamagedSchemaTests: XCTestCase {
    func testADamagedStoredSchemaIsRefused() throws {
        let path = temporaryRealmPath()
        let schema = Schema([
            ObjectSchema(name: "Dog", primaryKey: "id", properties: [.int("id"), .link("owner", "Person")]),
            ObjectSchema(name: "Person", primaryKey: "id", properties: [.int("id")]),
        ])
        try Store(Configuration(path: path, schema: schema)).close()
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "UPDATE _atoll_properties SET object_type = NULL WHERE name = 'owner'", nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
        assertAtollError(try Store(Configuration(path: path)), .file, "the schema stored in the file is invalid")
    }
}
