import AtollStore
import Foundation
import XCTest

/// Sets, dictionaries, mixed values and backlinks: schema, writes, reads, deletes, change log.
final class CollectionTypesTests: XCTestCase {
    static let schema = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            .int("id"), .string("name"),
            Property(name: "dogs", type: .object, objectType: "Dog", collection: .list),
            Property(name: "favorites", type: .object, objectType: "Dog", collection: .set),
            Property(name: "tags", type: .string, collection: .set),
            Property(name: "scores", type: .int, collection: .dictionary),
            Property(name: "pets", type: .object, objectType: "Dog", collection: .dictionary),
            Property(name: "notes", type: .string, collection: .dictionary, isOptional: true),
            Property(name: "places", type: .object, objectType: "Place", collection: .dictionary),
            Property(name: "anything", type: .mixed),
            Property(name: "mixedList", type: .mixed, collection: .list),
            Property(name: "mixedMap", type: .mixed, collection: .dictionary),
        ]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [
            .int("id"), .string("name"), .link("owner", "Person"),
            Property(name: "owners", type: .linkingObjects, objectType: "Person", linkOriginProperty: "dogs"),
            Property(name: "fans", type: .linkingObjects, objectType: "Person", linkOriginProperty: "favorites"),
        ]),
        ObjectSchema(name: "Place", isEmbedded: true, properties: [.string("city")]),
        ObjectSchema(name: "Note", properties: [.string("text")]),
    ])

    private func store() throws -> Store {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.write {
            for (id, name) in [(1, "Rex"), (2, "Fido"), (3, "Ace")] {
                try store.create("Dog", ["id": .int(Int64(id)), "name": .string(name)])
            }
        }
        return store
    }

    func testSetsKeepDistinctElementsInOrderGiven() throws {
        let store = try store()
        try store.write {
            try store.create("Person", ["id": .int(1), "tags": .list([.string("b"), .string("a"), .string("b")]),
                                        "favorites": .list([.int(2), .int(1), .int(2)])])
        }
        let p = try XCTUnwrap(store.object("Person", primaryKey: .int(1)))
        XCTAssertEqual(p["tags"], .list([.string("b"), .string("a")]))
        XCTAssertEqual(p["favorites"], .list([.int(2), .int(1)]))
        assertAtollError(try store.write { try store.create("Person", ["id": .int(2), "favorites": .list([.null])]) },
                         .missingValue, "cannot hold null")
        assertAtollError(try store.write { try store.create("Person", ["id": .int(2), "tags": .string("x")]) },
                         .typeMismatch, "is a set")
    }

    func testLongCollectionsKeepEveryElementInOrder() throws {
        let store = try store()
        // Longer than one INSERT's batch of rows, and not a multiple of it.
        let many = (0..<100).map { Value.string("t\($0)") }
        let entries = (0..<70).map { (String(format: "k%03d", $0), Value.int(Int64($0))) }
        let mixed = (0..<33).map { $0 % 2 == 0 ? Value.int(Int64($0)) : .string("\($0)") }
        try store.write {
            try store.create("Person", ["id": .int(1), "tags": .list(many), "scores": .object(Document(uniqueKeys: entries)),
                                        "mixedList": .list(mixed)])
        }
        let p = try XCTUnwrap(store.object("Person", primaryKey: .int(1)))
        XCTAssertEqual(p["tags"], .list(many))
        XCTAssertEqual(p["scores"], .object(Document(uniqueKeys: entries)))
        XCTAssertEqual(p["mixedList"], .list(mixed))
    }

    func testDictionariesReadInKeyOrderAndCheckKeys() throws {
        let store = try store()
        try store.write {
            try store.create("Person", ["id": .int(1),
                                        "scores": .object(["math": .int(5), "art": .int(3)]),
                                        "pets": .object(["b": .int(2), "a": .null]),
                                        "notes": .object(["x": .null]),
                                        "places": .object(["home": .object(["city": .string("Oslo")])])])
        }
        let p = try XCTUnwrap(store.object("Person", primaryKey: .int(1)))
        XCTAssertEqual(p["scores"], .object(Document([("art", .int(3)), ("math", .int(5))])))
        XCTAssertEqual(p["pets"], .object(Document([("a", .null), ("b", .int(2))])))
        XCTAssertEqual(p["notes"], .object(["x": .null]))
        XCTAssertEqual(p["places"], .object(["home": .object(["city": .string("Oslo")])]))
        for bad in ["", "a.b", "$x"] {
            assertAtollError(try store.write { try store.create("Person", ["id": .int(2), "scores": .object([bad: .int(1)])]) },
                             .invalidArgument, "is not allowed")
        }
        assertAtollError(try store.write { try store.create("Person", ["id": .int(2), "scores": .object(["a": .null])]) },
                         .missingValue)
        assertAtollError(try store.write { try store.create("Person", ["id": .int(2), "scores": .list([])]) },
                         .typeMismatch, "is a dictionary")
        XCTAssertNil(try store.object("Person", primaryKey: .int(2)), "failed writes leave nothing")
        // Replacing the dictionary frees its embedded objects.
        try store.write {
            try store.create("Person", ["id": .int(1), "places": .object(["work": .object(["city": .string("Rome")])])], update: .modified)
        }
        XCTAssertEqual(try store.objects("Place").count(), 1)
    }

    func testMixedHoldsEveryKindOfValue() throws {
        let store = try store()
        let oid = try XCTUnwrap(ObjectId(hex: "0123456789abcdef01234567"))
        let values: [Value] = [
            .null, .bool(true), .int(-7), .float(1.5), .double(.nan), .string("s"), .data([0, 1]),
            .date(Timestamp(milliseconds: 86_400_001)), .objectId(oid), .uuid(UUID()), .decimal(Decimal128("1.25")!),
            .link(ObjectLink(className: "Dog", primaryKey: .int(2))),
            .list([.int(1), .string("x"), .list([.bool(false)]), .object(["k": .int(2)])]),
            .object(Document([("z", .int(1)), ("a", .link(ObjectLink(className: "Dog", primaryKey: .int(3))))])),
        ]
        for (i, v) in values.enumerated() {
            try store.write { try store.create("Person", ["id": .int(Int64(i)), "anything": v]) }
            let read = try XCTUnwrap(store.object("Person", primaryKey: .int(Int64(i)))?["anything"])
            if case .double(let d) = v, d.isNaN {
                guard case .double(let r) = read, r.isNaN else { return XCTFail("NaN read back as \(read)") }
                continue
            }
            if case .object(let doc) = v {
                // Dictionaries read in key order.
                XCTAssertEqual(read, .object(Document(doc.sorted { $0.0 < $1.0 }.map { ($0.0, $0.1) })))
                continue
            }
            XCTAssertEqual(read, v, "value \(i)")
        }
        // A bool is not an int, an int not a double: the type is kept.
        try store.write { try store.create("Person", ["id": .int(100), "anything": .int(1)]) }
        XCTAssertEqual(try store.object("Person", primaryKey: .int(100))?["anything"], .int(1))
        assertAtollError(try store.write {
            try store.create("Person", ["id": .int(101), "anything": .link(ObjectLink(className: "Dog", primaryKey: .int(99)))])
        }, .notFound)
        assertAtollError(try store.write {
            try store.create("Person", ["id": .int(101), "anything": .link(ObjectLink(className: "Place", primaryKey: .int(1)))])
        }, .typeMismatch, "embedded")
        try store.write {
            try store.create("Person", ["id": .int(102), "mixedList": .list([.int(1), .null, .string("a"), .int(1)]),
                                        "mixedMap": .object(["k": .link(ObjectLink(className: "Dog", primaryKey: .int(1)))])])
        }
        let p = try XCTUnwrap(store.object("Person", primaryKey: .int(102)))
        XCTAssertEqual(p["mixedList"], .list([.int(1), .null, .string("a"), .int(1)]))
        XCTAssertEqual(p["mixedMap"], .object(["k": .link(ObjectLink(className: "Dog", primaryKey: .int(1)))]))
    }

    func testDeletingATargetNullsOrDropsEveryKindOfLink() throws {
        let store = try store()
        try store.write {
            try store.create("Person", ["id": .int(1), "dogs": .list([.int(1), .int(2)]), "favorites": .list([.int(1)]),
                                        "pets": .object(["a": .int(1), "b": .int(2)]),
                                        "anything": .link(ObjectLink(className: "Dog", primaryKey: .int(1))),
                                        "mixedList": .list([.link(ObjectLink(className: "Dog", primaryKey: .int(1))), .int(5)])])
            try store.delete("Dog", primaryKey: .int(1))
        }
        let p = try XCTUnwrap(store.object("Person", primaryKey: .int(1)))
        XCTAssertEqual(p["dogs"], .list([.int(2)]))
        XCTAssertEqual(p["favorites"], .list([]))
        XCTAssertEqual(p["pets"], .object(Document([("a", .null), ("b", .int(2))])))
        XCTAssertEqual(p["anything"], .null)
        XCTAssertEqual(p["mixedList"], .list([.null, .int(5)]))
    }

    func testBacklinksAreComputedAndCannotBeWritten() throws {
        let store = try store()
        try store.write {
            try store.create("Person", ["id": .int(1), "dogs": .list([.int(1), .int(2)])])
            try store.create("Person", ["id": .int(2), "dogs": .list([.int(1), .int(1)]), "favorites": .list([.int(3)])])
        }
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "owners"), .list([.int(1), .int(2)]))
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(3), property: "owners"), .list([]))
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(3), property: "fans"), .list([.int(2)]))
        let dog = try XCTUnwrap(store.object("Dog", primaryKey: .int(1)))
        XCTAssertNil(dog["owners"], "backlinks are not part of the object")
        assertAtollError(try store.write { try store.create("Dog", ["id": .int(9), "owners": .list([])]) },
                         .invalidArgument, "linkingObjects")
        // A backlink to a missing property or a non-link is refused.
        var bad = Self.schema
        bad.classes[1].properties[3].linkOriginProperty = "name"
        assertAtollError(try bad.validate(), .schema, "not a link to 'Dog'")
    }

    /// Random values of every kind for every property: each create works or throws an
    /// AtollError, and a failed one leaves the realm as it was.
    func testRandomValuesFailCleanly() throws {
        let store = try store()
        var seed = UInt64(7)
        func next(_ n: Int) -> Int {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return Int((seed >> 33) % UInt64(n))
        }
        func value(_ depth: Int) -> Value {
            switch next(depth > 2 ? 9 : 12) {
            case 0: return .null
            case 1: return .int(Int64(next(5)))
            case 2: return .string(["a", "", "x.y", "$k", "é"][next(5)])
            case 3: return .double([0.5, .nan, -0.0][next(3)])
            case 4: return .bool(next(2) == 0)
            case 5: return .link(ObjectLink(className: ["Dog", "Person", "Place", "Nope"][next(4)], primaryKey: .int(Int64(next(4)))))
            case 6: return .date(Timestamp(milliseconds: Int64(next(1000))))
            case 7: return .data([UInt8(next(256))])
            case 8: return .decimal(Decimal128(Int64(next(9))))
            case 9: return .list((0..<next(4)).map { _ in value(depth + 1) })
            case 10: return .object(Document(uniqueKeys: (0..<next(3)).map { ("k\($0)" + ["", ".", "$"][next(3)], value(depth + 1)) }))
            default: return .object(["city": value(depth + 1)])
            }
        }
        let properties = Self.schema["Person"]!.properties.map(\.name).filter { $0 != "id" }
        var created = 0
        for i in 0..<3000 {
            var doc: Document = ["id": .int(Int64(1000 + i))]
            for _ in 0..<(1 + next(3)) { doc[properties[next(properties.count)]] = value(0) }
            let before = try store.objects("Person").count()
            do {
                try store.write { try store.create("Person", doc) }
                created += 1
                XCTAssertNotNil(try store.object("Person", primaryKey: .int(Int64(1000 + i))))
            } catch is AtollError {
                XCTAssertEqual(try store.objects("Person").count(), before)
            }
            if i % 100 == 0 {
                // No embedded object is left without its owner.
                let held = try store.objects("Person").documents().reduce(0) { sum, person in
                    sum + (person["places"]?.documentValue?.values.filter { !$0.isNull }.count ?? 0)
                }
                XCTAssertEqual(try store.objects("Place").count(), held)
            }
        }
        XCTAssertGreaterThan(created, 100)
    }

    func testObjectsWithoutPrimaryKeyAreNamedByTheirKey() throws {
        let store = try openTemporaryStore(Schema([
            ObjectSchema(name: "Note", properties: [.string("text")]),
            ObjectSchema(name: "Box", primaryKey: "id", properties: [.int("id"), .link("note", "Note"), .links("notes", "Note")]),
        ]))
        try store.write {
            try store.create("Note", ["_atoll_key": .int(40), "text": .string("forty")])
            try store.create("Box", ["id": .int(1), "note": .int(40), "notes": .list([.int(40)])])
        }
        XCTAssertEqual(try store.object("Box", primaryKey: .int(1))?["note"], .int(40))
        assertAtollError(try store.write { try store.create("Note", ["_atoll_key": .int(40)]) }, .duplicatePrimaryKey)
        try store.write { try store.create("Note", ["_atoll_key": .int(40), "text": .string("forty!")], update: .modified) }
        XCTAssertEqual(try store.object("Note", key: ObjectKey(40))?["text"], .string("forty!"))
        assertAtollError(try store.write { try store.create("Box", ["id": .int(2), "note": .int(41)]) }, .notFound)
        assertAtollError(try store.write { try store.create("Note", ["_atoll_key": .string("x")]) }, .typeMismatch)
    }

    func testChangeLogRecordsSetAndDictionaryInstructions() throws {
        let store = try store()
        try store.write {
            try store.create("Person", ["id": .int(1), "tags": .list([.string("a")]), "scores": .object(["m": .int(1)])])
        }
        try store.write {
            try store.create("Person", ["id": .int(1), "tags": .list([.string("a")]), "scores": .object(["m": .int(2)])], update: .modified)
        }
        let changes = try store.changes(after: store.version() - 2)
        let first = changes[0].instructions.filter { $0.path.first == .key("tags") || $0.path.first == .key("scores") }
        XCTAssertEqual(first.map(\.op), [.setInsert, .dictionarySet])
        XCTAssertEqual(first[1].path, [.key("scores"), .key("m")])
        // Unchanged set skipped with .modified; the dictionary cleared and refilled.
        XCTAssertEqual(changes[1].instructions.map(\.op), [.dictionaryClear, .dictionarySet])
    }

    func testSchemaStoresEveryNewTypeAndReopens() throws {
        let path = temporaryRealmPath()
        do {
            let store = try open(path, Self.schema, changeLogValues: true)
            try store.write { try store.create("Person", ["id": .int(1), "anything": .string("x")]) }
            store.close()
        }
        let reopened = try open(path, nil, changeLogValues: true)
        XCTAssertEqual(reopened.schema[ "Dog"]?[property: "owners"], Self.schema["Dog"]?[property: "owners"])
        XCTAssertEqual(reopened.schema["Person"], Self.schema["Person"])
        XCTAssertEqual(try reopened.object("Person", primaryKey: .int(1))?["anything"], .string("x"))
        // Adding a backlink needs no migration.
        var more = Self.schema
        more.classes[1].properties.append(Property(name: "petOf", type: .linkingObjects, objectType: "Person", linkOriginProperty: "pets"))
        reopened.close()
        XCTAssertNoThrow(try open(path, more, changeLogValues: true))
    }
}

/// Enums are stored as their raw values and read back as the enum.
final class EnumValueTests: XCTestCase {
    enum Size: String { case small, large }
    enum Level: Int { case low = 1, high = 9 }

    func testEnumsRoundTripThroughTheirRawValues() throws {
        let store = try openTemporaryStore(Schema([
            ObjectSchema(name: "Shirt", primaryKey: "id", properties: [.int("id"), .string("size"), .int("level")]),
        ]))
        try store.write { try store.create("Shirt", ["id": .int(1), "size": Value(Size.large), "level": Value(Level.high)]) }
        let shirt = try XCTUnwrap(store.object("Shirt", primaryKey: .int(1)))
        XCTAssertEqual(shirt["size"], .string("large"))
        XCTAssertEqual(shirt["size"]?.enumValue(Size.self), .large)
        XCTAssertEqual(shirt["level"]?.enumValue(Level.self), .high)
        XCTAssertNil(Value.string("medium").enumValue(Size.self))
        XCTAssertEqual(try store.objects("Shirt", where: "size == $0", [Value(Size.large)]).count(), 1)
    }
}
