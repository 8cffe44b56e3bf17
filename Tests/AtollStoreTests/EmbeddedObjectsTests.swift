import AtollStore
import XCTest

/// Embedded objects: written inside their owner, read back whole, replaced on update, deleted
/// with the owner. Their class's row count is read with `objects(<embedded class>).count()`.
final class EmbeddedObjectsTests: XCTestCase {
    static let schema = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            .string("id"), .string("name"),
            Property(name: "address", type: .object, objectType: "Address"),
            .links("addresses", "Address"),
        ]),
        ObjectSchema(name: "Address", isEmbedded: true, properties: [
            .string("city"), .string("zip", optional: true), .link("geo", "Geo"),
        ]),
        ObjectSchema(name: "Geo", isEmbedded: true, properties: [
            Property(name: "lat", type: .double), Property(name: "lon", type: .double),
        ]),
    ])

    let oslo: Value = .object(["city": .string("Oslo"), "zip": .string("0150"),
                               "geo": .object(["lat": .double(59.9), "lon": .double(10.7)])])
    let bergen: Value = .object(["city": .string("Bergen")])
    let tromso: Value = .object(["city": .string("Tromsø"), "geo": .object(["lat": .double(69.6), "lon": .double(18.9)])])

    private func counts(_ store: Store, file: StaticString = #filePath, line: UInt = #line) throws -> [Int] {
        [try store.objects("Address").count(), try store.objects("Geo").count()]
    }

    private func makeStore() throws -> Store {
        let store = try openTemporaryStore(Self.schema)
        try store.write {
            try store.create("Person", ["id": .string("p1"), "name": .string("Ann"), "address": oslo,
                                        "addresses": .list([bergen, tromso])])
        }
        return store
    }

    func testEmbeddedObjectsAreReadBackWhole() throws {
        let store = try makeStore()
        let ann = try XCTUnwrap(store.object("Person", primaryKey: .string("p1")))
        XCTAssertEqual(ann["address"], .object(["city": .string("Oslo"), "zip": .string("0150"),
                                                "geo": .object(["lat": .double(59.9), "lon": .double(10.7)])]))
        XCTAssertEqual(ann["addresses"], .list([
            .object(["city": .string("Bergen"), "zip": .null, "geo": .null]),
            .object(["city": .string("Tromsø"), "zip": .null,
                     "geo": .object(["lat": .double(69.6), "lon": .double(18.9)])]),
        ]))
        XCTAssertEqual(try counts(store), [3, 2])
        XCTAssertEqual(try store.stringKeys("Person", "address.geo.lat > 59"), ["p1"])
        XCTAssertEqual(try store.stringKeys("Person", "ANY addresses.city == 'Tromsø'"), ["p1"])
    }

    func testReplacedOnUpdate() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .string("p1"), "address": bergen, "addresses": .list([oslo])], update: .modified)
        }
        let ann = try XCTUnwrap(store.object("Person", primaryKey: .string("p1")))
        XCTAssertEqual(ann["address"], .object(["city": .string("Bergen"), "zip": .null, "geo": .null]))
        XCTAssertEqual(ann["addresses"]?.listValue?.count, 1)
        XCTAssertEqual(ann["addresses"]?.listValue?.first?.documentValue?["city"], .string("Oslo"))
        XCTAssertEqual(ann["name"], .string("Ann"))
        // The old embedded objects are gone: one address in `address`, one in `addresses`.
        XCTAssertEqual(try counts(store), [2, 1])

        try store.write { try store.create("Person", ["id": .string("p1"), "address": oslo], update: .all) }
        XCTAssertEqual(try counts(store), [2, 2])
    }

    func testSettingToNullDeletesTheEmbeddedObject() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .string("p1"), "address": .null, "addresses": .list([])], update: .modified)
        }
        XCTAssertEqual(try store.value("Person", primaryKey: .string("p1"), property: "address"), .null)
        XCTAssertEqual(try store.value("Person", primaryKey: .string("p1"), property: "addresses"), .list([]))
        XCTAssertEqual(try counts(store), [0, 0])
    }

    func testAnUnchangedEmbeddedObjectIsNotRewritten() throws {
        let store = try makeStore()
        let version = try store.version()
        try store.write {
            try store.create("Person", ["id": .string("p1"), "address": oslo, "addresses": .list([bergen, tromso])],
                             update: .modified)
        }
        XCTAssertEqual(try store.version(), version, "nothing changed, so no change-log entry")
        XCTAssertEqual(try counts(store), [3, 2])
        XCTAssertEqual(try store.value("Person", primaryKey: .string("p1"), property: "address")?.documentValue?["city"],
                       .string("Oslo"))
    }

    func testDeletedWithTheOwner() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .string("p2"), "address": bergen])
        }
        XCTAssertEqual(try counts(store), [4, 2])
        try store.write { try store.delete("Person", primaryKey: .string("p1")) }
        XCTAssertEqual(try counts(store), [1, 0])
        XCTAssertEqual(try store.objects("Address").documents(), [["city": .string("Bergen"), "zip": .null, "geo": .null]])
        try store.write { try store.objects("Person").deleteAll() }
        XCTAssertEqual(try counts(store), [0, 0])
    }

    func testEmbeddedObjectErrors() throws {
        let store = try makeStore()
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.create("Address", ["city": .string("Oslo")]), .invalidArgument,
                         "'Address' is an embedded class: create its objects inside their owner")
        assertAtollError(try store.create("Person", ["id": .string("p3"), "address": .string("Oslo")]), .typeMismatch,
                         "property 'Person.address' holds an embedded Address; give it as an object")
        assertAtollError(try store.create("Person", ["id": .string("p3"), "address": .object(["town": .string("x")])]),
                         .noSuchProperty, "class 'Address' has no property 'town'")
        assertAtollError(try store.create("Person", ["id": .string("p3"),
                                                     "addresses": .list([bergen, .object(["city": .int(5)])])]),
                         .typeMismatch, "element 1", "property 'Address.city' is string")
        XCTAssertEqual(try counts(store), [3, 2], "failed creates leave no embedded objects behind")
    }
}
