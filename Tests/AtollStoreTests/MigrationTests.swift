import AtollStore
import Foundation
import XCTest

/// Migrations with a callback: renames, type and optionality changes, primary key changes,
/// added and removed classes, failures that leave the file as it was.
final class MigrationTests: XCTestCase {
    static let v0 = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            .int("id"), .string("name"), .string("age", optional: true),
            Property(name: "nicknames", type: .string, collection: .list),
            Property(name: "scores", type: .int, collection: .dictionary),
        ]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [
            .int("id"), .link("owner", "Person"), .links("friends", "Person"),
        ]),
        ObjectSchema(name: "Old", properties: [.string("text")]),
    ])

    /// v1: name → fullName (renamed), age string? → int (retyped), nicknames kept,
    /// scores dictionary of int → of string (retyped), Old removed, Toy added.
    static let v1 = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            .int("id"), .string("fullName"), .int("age"),
            Property(name: "nicknames", type: .string, collection: .list),
            Property(name: "scores", type: .string, collection: .dictionary),
        ]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [
            .int("id"), .link("owner", "Person"), .links("friends", "Person"),
        ]),
        ObjectSchema(name: "Toy", primaryKey: "id", properties: [.string("id")]),
    ])

    private func seed(_ path: String) throws {
        let store = try Store(Configuration(path: path, schema: Self.v0, changeLogValues: true))
        defer { store.close() }
        try store.write {
            try store.create("Person", ["id": .int(1), "name": .string("Ann"), "age": .string("31"),
                                        "nicknames": .list([.string("A")]), "scores": .object(["m": .int(5)])])
            try store.create("Person", ["id": .int(2), "name": .string("Bob"), "age": .null])
            try store.create("Dog", ["id": .int(1), "owner": .int(1), "friends": .list([.int(2), .int(1)])])
            try store.create("Old", ["text": .string("bye")])
        }
    }

    private func migrate(_ path: String, _ schema: Schema, version: UInt64 = 1,
                         _ body: (@Sendable (Migration) throws -> Void)?) throws -> Store {
        let store = try Store(Configuration(path: path, schema: schema, schemaVersion: version, migration: body))
        addTeardownBlock { store.close() }
        return store
    }

    func testRenameAndRetypeKeepTheData() throws {
        let path = temporaryRealmPath()
        try seed(path)
        let store = try migrate(path, Self.v1) { m in
            XCTAssertEqual(m.oldSchemaVersion, 0)
            XCTAssertEqual(m.newSchemaVersion, 1)
            try m.renameProperty("Person", from: "name", to: "fullName")
            try m.enumerateObjects("Person") { key, old in
                let age = Int64(old["age"]?.stringValue ?? "") ?? -1
                let scores = old["scores"]?.documentValue.map { doc in
                    Document(doc.map { ($0.0, Value.string(String($0.1.intValue ?? 0))) })
                } ?? Document()
                try m.set("Person", key: key, ["age": .int(age), "scores": .object(scores)])
            }
        }
        XCTAssertEqual(store.schemaVersion, 1)
        let ann = try XCTUnwrap(store.object("Person", primaryKey: .int(1)))
        XCTAssertEqual(ann["fullName"], .string("Ann"))
        XCTAssertEqual(ann["age"], .int(31))
        XCTAssertEqual(ann["nicknames"], .list([.string("A")]))
        XCTAssertEqual(ann["scores"], .object(["m": .string("5")]))
        XCTAssertEqual(try store.object("Person", primaryKey: .int(2))?["age"], .int(-1))
        // Links to migrated objects still hold.
        XCTAssertEqual(try store.object("Dog", primaryKey: .int(1))?["owner"], .int(1))
        XCTAssertEqual(try store.object("Dog", primaryKey: .int(1))?["friends"], .list([.int(2), .int(1)]))
        XCTAssertEqual(try store.intKeys("Dog", "owner.fullName == 'Ann'"), [1])
        // A class left out stays in the file; a new one is there.
        XCTAssertEqual(try store.objects("Old").count(), 1)
        // The migration's writes are one change-log entry.
        let last = try XCTUnwrap(store.changes(after: 0).last)
        XCTAssertTrue(last.instructions.contains { $0.path == [.key("age")] && $0.value == .int(31) }, "\(last.instructions)")
        try store.write { try store.create("Toy", ["id": .string("ball")]) }
        // Reopening with the new schema needs nothing more.
        store.close()
        let again = try Store(Configuration(path: path, schema: Self.v1, schemaVersion: 1))
        XCTAssertEqual(try again.object("Person", primaryKey: .int(1))?["fullName"], .string("Ann"))
        again.close()
    }

    func testWithoutCallbackChangesApplyWithDefaults() throws {
        let path = temporaryRealmPath()
        try seed(path)
        let store = try migrate(path, Self.v1, nil)
        let ann = try XCTUnwrap(store.object("Person", primaryKey: .int(1)))
        XCTAssertEqual(ann["fullName"], .string(""))
        XCTAssertEqual(ann["age"], .int(0))
        XCTAssertEqual(ann["scores"], .object([:]))
        XCTAssertEqual(ann["nicknames"], .list([.string("A")]))
    }

    func testOptionalityChanges() throws {
        let path = temporaryRealmPath()
        try seed(path)
        var schema = Self.v0
        schema.classes[0].properties[2] = .string("age")              // string? → string
        schema.classes[0].properties[1] = .string("name", optional: true)  // string → string?
        let store = try migrate(path, schema, nil)
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1))?["age"], .string("31"))
        XCTAssertEqual(try store.object("Person", primaryKey: .int(2))?["age"], .string(""))
        XCTAssertEqual(try store.object("Person", primaryKey: .int(2))?["name"], .string("Bob"))
        try store.write { try store.create("Person", ["id": .int(3), "name": .null]) }
    }

    func testCollectionsThatBecomeRequiredKeepTheirValues() throws {
        let path = temporaryRealmPath()
        let v0 = Schema([ObjectSchema(name: "Bag", primaryKey: "id", properties: [
            .int("id"), Property(name: "items", type: .string, collection: .list, isOptional: true),
            Property(name: "counts", type: .int, collection: .dictionary, isOptional: true),
        ])])
        do {
            let store = try Store(Configuration(path: path, schema: v0))
            try store.write {
                try store.create("Bag", ["id": .int(1), "items": .list([.string("a"), .null, .string("b")]),
                                         "counts": .object(["x": .int(1), "y": .null])])
            }
            store.close()
        }
        var v1 = v0
        v1.classes[0].properties[1].isOptional = false
        v1.classes[0].properties[2].isOptional = false
        let store = try migrate(path, v1, nil)
        XCTAssertEqual(try store.object("Bag", primaryKey: .int(1))?["items"], .list([.string("a"), .string("b")]))
        XCTAssertEqual(try store.object("Bag", primaryKey: .int(1))?["counts"], .object(["x": .int(1)]))
    }

    func testAFailedMigrationLeavesTheFileAsItWas() throws {
        let path = temporaryRealmPath()
        try seed(path)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        struct Boom: Error {}
        assertAtollError(try migrate(path, Self.v1) { m in
            try m.renameProperty("Person", from: "name", to: "fullName")
            try m.set("Person", key: ObjectKey(1), ["age": .int(5)])
            throw AtollError(.invalidArgument, "stop here")
        }, .migration, "stop here")
        assertAtollError(try migrate(path, Self.v1) { _ in throw Boom() }, .migration)
        // A callback error from the store keeps its own words.
        assertAtollError(try migrate(path, Self.v1) { m in try m.renameProperty("Person", from: "nope", to: "fullName") },
                         .migration, "has no property 'nope'")
        // Reopened with the old schema, everything is there, at version 0.
        let store = try Store(Configuration(path: path, schema: Self.v0))
        defer { store.close() }
        XCTAssertEqual(store.schemaVersion, 0)
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1))?["name"], .string("Ann"))
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1))?["age"], .string("31"))
        XCTAssertEqual(try store.objects("Dog", where: "owner.name == 'Ann'").count(), 1)
        store.close()
        // Byte for byte, once the WAL is folded back in.
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(before.count, after.count)
    }

    func testChangingThePrimaryKeyMovesObjectsAndLinksFollow() throws {
        let path = temporaryRealmPath()
        do {
            let store = try Store(Configuration(path: path, schema: Schema([
                ObjectSchema(name: "Item", primaryKey: "code", properties: [.string("code"), .int("number")]),
                ObjectSchema(name: "Box", primaryKey: "id", properties: [.int("id"), .link("item", "Item"), .links("items", "Item")]),
            ])))
            try store.write {
                try store.create("Item", ["code": .string("a"), "number": .int(100)])
                try store.create("Item", ["code": .string("b"), "number": .int(200)])
                try store.create("Box", ["id": .int(1), "item": .string("b"), "items": .list([.string("a"), .string("b")])])
            }
            store.close()
        }
        let v1 = Schema([
            ObjectSchema(name: "Item", primaryKey: "number", properties: [.string("code"), .int("number")]),
            ObjectSchema(name: "Box", primaryKey: "id", properties: [.int("id"), .link("item", "Item"), .links("items", "Item")]),
        ])
        let store = try migrate(path, v1, nil)
        XCTAssertEqual(try store.object("Box", primaryKey: .int(1))?["item"], .int(200))
        XCTAssertEqual(try store.object("Box", primaryKey: .int(1))?["items"], .list([.int(100), .int(200)]))
        XCTAssertEqual(try store.object("Item", primaryKey: .int(100))?["code"], .string("a"))
        // And to a new string key that the callback fills; duplicates fail the migration.
        store.close()
        let v2 = Schema([
            ObjectSchema(name: "Item", primaryKey: "tag", properties: [.string("tag"), .string("code"), .int("number")]),
            ObjectSchema(name: "Box", primaryKey: "id", properties: [.int("id"), .link("item", "Item"), .links("items", "Item")]),
        ])
        assertAtollError(try migrate(path, v2, version: 2, nil), .duplicatePrimaryKey, "not unique")
        let migrated = try migrate(path, v2, version: 2) { m in
            try m.enumerateObjects("Item") { key, old in
                try m.set("Item", key: key, ["tag": .string("t-" + (old["code"]?.stringValue ?? ""))])
            }
        }
        XCTAssertEqual(try migrated.object("Item", primaryKey: .string("t-b"))?["number"], .int(200))
        XCTAssertEqual(try migrated.object("Box", primaryKey: .int(1))?["item"], .string("t-b"))
    }

    func testSettingAnIntPrimaryKeyMovesTheObject() throws {
        let path = temporaryRealmPath()
        do {
            let store = try Store(Configuration(path: path, schema: Schema([
                ObjectSchema(name: "Item", primaryKey: "code", properties: [.string("code")]),
                ObjectSchema(name: "Box", primaryKey: "id", properties: [.int("id"), .link("item", "Item")]),
            ])))
            try store.write {
                try store.create("Item", ["code": .string("7")])
                try store.create("Box", ["id": .int(1), "item": .string("7")])
            }
            store.close()
        }
        let store = try migrate(path, Schema([
            ObjectSchema(name: "Item", primaryKey: "id", properties: [.int("id")]),
            ObjectSchema(name: "Box", primaryKey: "id", properties: [.int("id"), .link("item", "Item")]),
        ])) { m in
            for (key, old) in try m.oldObjects("Item") {
                try m.set("Item", key: key, ["id": .int(Int64(old["code"]?.stringValue ?? "") ?? 0)])
            }
        }
        XCTAssertEqual(try store.object("Box", primaryKey: .int(1))?["item"], .int(7))
        XCTAssertNotNil(try store.object("Item", primaryKey: .int(7)))
    }

    func testDeleteDataAndObjectsCreatedInTheCallback() throws {
        let path = temporaryRealmPath()
        try seed(path)
        let store = try migrate(path, Self.v1) { m in
            try m.deleteData("Old")
            try m.realm.create("Toy", ["id": .string("made in migration")])
            try m.realm.delete("Person", primaryKey: .int(2))
        }
        XCTAssertNil(store.schema["Old"])
        XCTAssertEqual(try store.objects("Toy").count(), 1)
        XCTAssertEqual(try store.object("Dog", primaryKey: .int(1))?["friends"], .list([.int(1)]))
        store.close()
        // Gone from the file too.
        let reopened = try Store(Configuration(path: path))
        defer { reopened.close() }
        XCTAssertNil(reopened.schema["Old"])
    }

    func testDowngradesAndMismatchesWithoutAVersionBump() throws {
        let path = temporaryRealmPath()
        try seed(path)
        assertAtollError(try migrate(path, Self.v1, version: 0, nil), .schemaMismatch, "needs a migration")
        _ = try migrate(path, Self.v0, version: 3, nil)
        assertAtollError(try migrate(path, Self.v0, version: 2, nil), .schemaMismatch, "downgrades are not supported")
    }

    func testDeleteRealmIfMigrationNeeded() throws {
        let path = temporaryRealmPath()
        try seed(path)
        let store = try Store(Configuration(path: path, schema: Self.v1, deleteRealmIfMigrationNeeded: true))
        defer { store.close() }
        XCTAssertEqual(try store.objects("Person").count(), 0)
        XCTAssertNil(store.schema["Old"])
        try store.write { try store.create("Person", ["id": .int(1), "fullName": .string("New")]) }
        XCTAssertEqual(try store.statistics().changeLogEntries, 1, "the change log starts again")
    }

    func testEnumerateRefusesUnknownClassesAndRenameChecksTypes() throws {
        let path = temporaryRealmPath()
        try seed(path)
        assertAtollError(try migrate(path, Self.v1) { m in _ = try m.oldObjects("Toy") }, .migration, "old schema has no class")
        var v1 = Self.v1
        v1.classes[0].properties[1] = .int("fullName")
        assertAtollError(try migrate(path, v1) { m in try m.renameProperty("Person", from: "name", to: "fullName") },
                         .migration, "is string but 'fullName' is int")
    }
}
