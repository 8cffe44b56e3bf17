import AtollStore
import Foundation
import XCTest

/// Every property type written and read back exactly.
final class ObjectTypesTests: XCTestCase {
    static let types: [(String, PropertyType)] = [
        ("b", .bool), ("i", .int), ("f", .float), ("d", .double), ("s", .string), ("bin", .data), ("when", .date),
        ("oid", .objectId), ("u", .uuid), ("dec", .decimal128),
    ]

    /// One required and one optional (`o`-prefixed) property of every type, and lists of each.
    static let schema = Schema([ObjectSchema(name: "All", primaryKey: "id", properties:
        [.int("id")]
        + types.map { Property(name: $0.0, type: $0.1) }
        + types.map { Property(name: "o" + $0.0, type: $0.1, isOptional: true) }
        + types.map { Property(name: $0.0 + "s", type: $0.1, collection: .list) }
    )])

    let oid = ObjectId(hex: "65a1b2c3d4e5f60718293a4b")!
    let uuid = UUID(uuidString: "2F1C7E4A-9B3D-4C5E-8F6A-1B2C3D4E5F60")!

    private var values: Document {
        [
            "b": .bool(true),
            "i": .int(Int64.min),
            "f": .float(0.1),
            "d": .double(0.1),
            "s": .string("héllo wörld ✓ 🌍 日本語"),
            "bin": .data(Array(0...255)),
            "when": .date(Timestamp(milliseconds: 1_767_225_600_123)),
            "oid": .objectId(oid),
            "u": .uuid(uuid),
            "dec": .decimal(Decimal128("-1234567890.123456789012345678901234")!),
        ]
    }

    func testEveryTypeRoundTrips() throws {
        let store = try openTemporaryStore(Self.schema)
        var doc = values
        doc["id"] = .int(1)
        for (name, value) in values { doc["o" + name] = value }
        try store.write { try store.create("All", doc) }

        let read = try XCTUnwrap(store.object("All", primaryKey: .int(1)))
        for (name, value) in doc {
            XCTAssertEqual(read[name], value, name)
        }
        // And through a query, after reopening.
        let path = store.configuration.path!
        store.close()
        let reopened = try open(path, nil)
        let viaQuery = try reopened.objects("All").documents()
        XCTAssertEqual(viaQuery.count, 1)
        for (name, value) in doc {
            XCTAssertEqual(viaQuery[0][name], value, name)
        }
    }

    func testFloatKeepsThirtyTwoBits() throws {
        let store = try openTemporaryStore(Self.schema)
        try store.write {
            try store.create("All", ["id": .int(1), "f": .float(0.1), "d": .double(0.1)])
            // A double written to a float property is rounded to 32 bits.
            try store.create("All", ["id": .int(2), "f": .double(0.1), "of": .float(Float.greatestFiniteMagnitude)])
        }
        XCTAssertEqual(try store.value("All", primaryKey: .int(1), property: "f"), .float(Float(0.1)))
        XCTAssertEqual(try store.value("All", primaryKey: .int(1), property: "d"), .double(0.1))
        XCTAssertEqual(try store.value("All", primaryKey: .int(2), property: "f"), .float(Float(0.1)))
        XCTAssertEqual(try store.value("All", primaryKey: .int(2), property: "of"), .float(.greatestFiniteMagnitude))
    }

    func testExtremeNumbers() throws {
        let store = try openTemporaryStore(Self.schema)
        try store.write {
            try store.create("All", ["id": .int(Int64.max), "i": .int(Int64.max), "d": .double(-0.0),
                                     "od": .double(.infinity)])
            try store.create("All", ["id": .int(Int64.min), "i": .int(Int64.min), "d": .double(.leastNonzeroMagnitude),
                                     "od": .double(-.infinity)])
        }
        let max = try XCTUnwrap(store.object("All", primaryKey: .int(Int64.max)))
        XCTAssertEqual(max["i"], .int(Int64.max))
        XCTAssertEqual(max["od"], .double(.infinity))
        let min = try XCTUnwrap(store.object("All", primaryKey: .int(Int64.min)))
        XCTAssertEqual(min["i"], .int(Int64.min))
        XCTAssertEqual(min["d"], .double(.leastNonzeroMagnitude))
        XCTAssertEqual(min["od"], .double(-.infinity))
        XCTAssertEqual(try store.intKeys("All", "SORT(id ASC)"), [Int64.min, Int64.max])
    }

    func testEmptyDataIsNotNull() throws {
        let store = try openTemporaryStore(Self.schema)
        try store.write {
            try store.create("All", ["id": .int(1), "bin": .data([]), "obin": .data([])])
            try store.create("All", ["id": .int(2), "obin": .null])
        }
        XCTAssertEqual(try store.value("All", primaryKey: .int(1), property: "bin"), .data([]))
        XCTAssertEqual(try store.value("All", primaryKey: .int(1), property: "obin"), .data([]))
        XCTAssertEqual(try store.value("All", primaryKey: .int(2), property: "obin"), .null)
        XCTAssertEqual(try store.intKeys("All", "obin == nil"), [2])
        XCTAssertEqual(try store.intKeys("All", "obin != nil"), [1])
    }

    func testEmptyAndUnicodeStrings() throws {
        let store = try openTemporaryStore(Self.schema)
        let strings = ["", "é", "e\u{301}", "👩‍👩‍👧‍👦", "'quoted' \"double\"", "tab\tnew\nline", String(repeating: "x", count: 100_000)]
        try store.write {
            for (i, s) in strings.enumerated() { try store.create("All", ["id": .int(Int64(i)), "s": .string(s)]) }
        }
        for (i, s) in strings.enumerated() {
            XCTAssertEqual(try store.value("All", primaryKey: .int(Int64(i)), property: "s"), .string(s), "string \(i)")
        }
    }

    /// Strings may hold U+0000 (Realm's and JSON's strings do).
    func testStringsWithANulCharacterRoundTrip() throws {
        let store = try openTemporaryStore(Self.schema)
        try store.write { try store.create("All", ["id": .int(1), "s": .string("a\u{0}b")]) }
        XCTAssertEqual(try store.value("All", primaryKey: .int(1), property: "s"), .string("a\u{0}b"))
    }

    func testOptionalsReadBackAsNullAndRequiredOnesDefaultToZero() throws {
        let store = try openTemporaryStore(Self.schema)
        var explicitNulls: Document = ["id": .int(1)]
        for (name, _) in Self.types { explicitNulls["o" + name] = .null }
        try store.write {
            try store.create("All", explicitNulls)
            try store.create("All", ["id": .int(2)])
        }
        for id in [1, 2] as [Int64] {
            let doc = try XCTUnwrap(store.object("All", primaryKey: .int(id)))
            for (name, _) in Self.types { XCTAssertEqual(doc["o" + name], .null, "o\(name)") }
            XCTAssertEqual(doc["b"], .bool(false))
            XCTAssertEqual(doc["i"], .int(0))
            XCTAssertEqual(doc["f"], .float(0))
            XCTAssertEqual(doc["d"], .double(0))
            XCTAssertEqual(doc["s"], .string(""))
            XCTAssertEqual(doc["bin"], .data([]))
            XCTAssertEqual(doc["when"], .date(Timestamp(milliseconds: 0)))
            XCTAssertEqual(doc["oid"], .objectId(ObjectId(hex: "000000000000000000000000")!))
            XCTAssertEqual(doc["u"], .uuid(UUID(uuidString: "00000000-0000-0000-0000-000000000000")!))
            XCTAssertEqual(doc["dec"], .decimal(.zero))
            for (name, _) in Self.types { XCTAssertEqual(doc[name + "s"], .list([]), name + "s") }
        }
    }

    func testListsOfEveryType() throws {
        let store = try openTemporaryStore(Self.schema)
        var doc: Document = ["id": .int(1)]
        for (name, value) in values { doc[name + "s"] = .list([value, value]) }
        doc["is"] = .list([.int(3), .int(1), .int(3), .int(2)])
        try store.write { try store.create("All", doc) }
        let read = try XCTUnwrap(store.object("All", primaryKey: .int(1)))
        for (name, _) in Self.types { XCTAssertEqual(read[name + "s"], doc[name + "s"], name + "s") }
    }

    func testReadsGiveTheSchemaOrder() throws {
        let schema = Schema([ObjectSchema(name: "A", primaryKey: "id", properties: [
            .int("id"), .list("tags", .string), .string("name"), .links("pals", "A"), .int("age"),
        ])])
        let store = try openTemporaryStore(schema)
        try store.write { try store.create("A", ["age": .int(3), "name": .string("x"), "id": .int(1)]) }
        XCTAssertEqual(try store.object("A", primaryKey: .int(1))?.keys, ["id", "tags", "name", "pals", "age"])
    }

    func testNumbersAreCoercedToThePropertysType() throws {
        let store = try openTemporaryStore(Self.schema)
        try store.write {
            try store.create("All", ["id": .double(1), "i": .double(42), "d": .int(7), "f": .int(3),
                                     "dec": .double(0.25), "odec": .int(-12)])
        }
        let doc = try XCTUnwrap(store.object("All", primaryKey: .int(1)))
        XCTAssertEqual(doc["i"], .int(42))
        XCTAssertEqual(doc["d"], .double(7))
        XCTAssertEqual(doc["f"], .float(3))
        XCTAssertEqual(doc["dec"], .decimal(Decimal128("0.25")!))
        XCTAssertEqual(doc["odec"], .decimal(Decimal128(Int64(-12))))
    }

    func testWrongTypesAreRejected() throws {
        let store = try openTemporaryStore(Self.schema)
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.create("All", ["id": .int(1), "i": .string("x")]), .typeMismatch,
                         "property 'All.i' is int; got string 'x'")
        assertAtollError(try store.create("All", ["id": .int(1), "i": .double(2.5)]), .typeMismatch,
                         "property 'All.i' is int; got double 2.5")
        assertAtollError(try store.create("All", ["id": .int(1), "b": .int(1)]), .typeMismatch, "'All.b' is bool")
        assertAtollError(try store.create("All", ["id": .int(1), "s": .int(1)]), .typeMismatch, "'All.s' is string")
        assertAtollError(try store.create("All", ["id": .int(1), "oid": .string("65a1b2c3d4e5f60718293a4b")]),
                         .typeMismatch, "'All.oid' is objectId")
        assertAtollError(try store.create("All", ["id": .int(1), "ss": .string("x")]), .typeMismatch,
                         "property 'All.ss' is a list (string[]); got string 'x'")
        assertAtollError(try store.create("All", ["id": .int(1), "is": .list([.int(1), .string("two")])]), .typeMismatch,
                         "element 1", "'All.is' is int")
        assertAtollError(try store.create("All", ["id": .int(1), "is": .list([.list([.int(1)])])]), .typeMismatch,
                         "a list cannot be an element")
        assertAtollError(try store.create("All", ["id": .string("1")]), .typeMismatch, "'All.id' is int")
        XCTAssertEqual(try store.objects("All").count(), 0)
    }

    func testNullForARequiredProperty() throws {
        let store = try openTemporaryStore(Self.schema)
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.create("All", ["id": .int(1), "s": .null]), .missingValue,
                         "property 'All.s' is required (string) and cannot be null")
        assertAtollError(try store.create("All", ["id": .int(1), "is": .list([.int(1), .null])]), .missingValue,
                         "element 1")
        assertAtollError(try store.create("All", ["s": .string("no key")]), .missingValue,
                         "primary key 'All.id' is missing")
        assertAtollError(try store.create("All", ["id": .null]), .missingValue, "primary key 'All.id' is missing")
        XCTAssertEqual(try store.objects("All").count(), 0)
    }

    func testUnknownClassAndProperty() throws {
        let store = try openTemporaryStore(Self.schema)
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.create("Nope", ["id": .int(1)]), .noSuchClass, "no class named 'Nope' in the schema")
        assertAtollError(try store.create("All", ["id": .int(1), "nope": .int(1)]), .noSuchProperty,
                         "class 'All' has no property 'nope'")
        assertAtollError(try store.object("Nope", primaryKey: .int(1)), .noSuchClass, "'Nope'")
        assertAtollError(try store.value("All", primaryKey: .int(1), property: "nope"), .noSuchProperty,
                         "class 'All' has no property 'nope'")
        assertAtollError(try store.object("All", primaryKey: .string("x")), .typeMismatch, "primary key of 'All' is int")
    }

    func testLookupsOfMissingObjects() throws {
        let store = try openTemporaryStore(Self.schema)
        XCTAssertNil(try store.object("All", primaryKey: .int(1)))
        XCTAssertNil(try store.value("All", primaryKey: .int(1), property: "s"))
        XCTAssertNil(try store.object("All", key: ObjectKey(1)))
    }

    func testObjectKeys() throws {
        let store = try openTemporaryStore(Self.schema)
        let key = try store.write { try store.create("All", ["id": .int(77), "s": .string("x")]) }
        XCTAssertEqual(key, ObjectKey(77), "an int primary key is the row key")
        XCTAssertEqual(try store.object("All", key: key)?["s"], .string("x"))
        XCTAssertEqual(try store.objects("All").keys(), [key])
    }
}
