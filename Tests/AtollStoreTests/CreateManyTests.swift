import AtollStore
import XCTest

/// `createMany` of objects that are one row each, which goes many rows to an `INSERT`: the same
/// objects, change log and errors as creating them one at a time.
final class CreateManyTests: XCTestCase {
    static let schema = Schema([
        ObjectSchema(name: "Item", primaryKey: "id", properties: [
            .int("id"), .string("name"), .int("age", optional: true), .int("score", default: .int(7)),
        ]),
        ObjectSchema(name: "Tag", primaryKey: "id", properties: [.string("id"), .string("note", optional: true)]),
        ObjectSchema(name: "Wide", primaryKey: "id", properties: [.int("id")] + (0..<700).map { .int("c\($0)", optional: true) }),
    ])

    /// More than two statements' worth, with a part-filled last one.
    static let count = 64 * 3 + 5

    private func items(_ range: Range<Int>) -> [Document] {
        range.map { i in
            var doc: Document = ["id": .int(Int64(i)), "name": .string("item-\(i)")]
            if i % 3 == 0 { doc["age"] = .int(Int64(i % 90)) }
            return doc
        }
    }

    func testObjectsAndChangeLogAreThoseOfOneCreateEach() throws {
        let many = try openTemporaryStore(Self.schema, changeLogValues: true)
        let single = try openTemporaryStore(Self.schema, changeLogValues: true)
        let objects = items(0..<Self.count)
        XCTAssertEqual(try many.write { try many.createMany("Item", objects) }, Self.count)
        try single.write { for o in objects { try single.create("Item", o) } }

        XCTAssertEqual(try many.objects("Item").documents(), try single.objects("Item").documents())
        XCTAssertEqual(try many.objects("Item").count(), Self.count)
        XCTAssertEqual(try many.object("Item", primaryKey: .int(3)), ["id": .int(3), "name": .string("item-3"), "age": .int(3), "score": .int(7)])
        XCTAssertEqual(try many.object("Item", primaryKey: .int(4))?["age"], .null)
        let logged = try many.changes(after: 0).flatMap(\.instructions)
        XCTAssertEqual(logged, try single.changes(after: 0).flatMap(\.instructions))
        XCTAssertEqual(logged.filter { $0.op == .create }.map(\.primaryKey), objects.compactMap { $0["id"] })
    }

    func testDuplicateInsideABatchNamesTheObjectAndKeepsNothing() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.write { try store.create("Item", ["id": .int(1_000), "name": .string("before")]) }
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        var objects = items(0..<Self.count)
        objects[70]["id"] = .int(3)
        assertAtollError(try store.createMany("Item", objects), .duplicatePrimaryKey,
                         "object 70:", "an object of class 'Item' with primary key 3 exists already")
        XCTAssertEqual(try store.intKeys("Item"), [1_000], "nothing of the failed call is kept")
        // The transaction is still usable, and the call works without the duplicate.
        objects[70]["id"] = .int(5_000)
        XCTAssertEqual(try store.createMany("Item", objects), Self.count)
        try store.commit()
        XCTAssertEqual(try store.objects("Item").count(), Self.count + 1)
        // The failed call's statement had kept objects 64...69 (OR FAIL) and recorded them; none
        // of that is in the log: one create per object of the second call.
        let creates = try store.changes(after: 1).flatMap(\.instructions).filter { $0.op == .create }
        XCTAssertEqual(creates.map(\.primaryKey), objects.map { $0["id"]! })
    }

    func testTwoObjectsOfOneKeyInOneStatement() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        var objects = items(0..<Self.count)
        objects[40]["id"] = .int(10)   // both in the first statement's 64 rows
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.createMany("Item", objects), .duplicatePrimaryKey,
                         "object 40:", "an object of class 'Item' with primary key 10 exists already")
        XCTAssertEqual(try store.objects("Item").count(), 0)
    }

    func testDuplicateOfAStoredObjectInTheLastPartialStatement() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.write { try store.create("Item", ["id": .int(9_999), "name": .string("stored")]) }
        var objects = items(0..<Self.count)
        objects[Self.count - 2]["id"] = .int(9_999)
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.createMany("Item", objects), .duplicatePrimaryKey,
                         "object \(Self.count - 2):", "primary key 9999")
        XCTAssertEqual(try store.intKeys("Item"), [9_999])
    }

    func testTheFirstBadObjectIsNamedEvenWhenALaterOneFailsFirst() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.write { try store.create("Item", ["id": .int(10), "name": .string("stored")]) }
        var objects = items(100..<300)
        // Object 5 duplicates a stored key (found when its statement runs); object 40, in the same
        // statement, cannot even be read.
        objects[5]["id"] = .int(10)
        objects[40]["name"] = .int(1)
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.createMany("Item", objects), .duplicatePrimaryKey, "object 5:")
        objects[5]["id"] = .int(5)
        assertAtollError(try store.createMany("Item", objects), .typeMismatch,
                         "object 40: property 'Item.name' is string; got int 1")
        objects[40]["nmae"] = .string("typo")
        objects[40]["name"] = .string("fixed")
        assertAtollError(try store.createMany("Item", objects), .noSuchProperty, "object 40:", "no property 'nmae'")
        objects[40]["nmae"] = nil
        objects[41]["id"] = nil
        assertAtollError(try store.createMany("Item", objects), .missingValue, "object 41:", "primary key 'Item.id' is missing")
        XCTAssertEqual(try store.intKeys("Item"), [10])
    }

    func testStringPrimaryKeys() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        let tags: [Document] = (0..<150).map { ["id": .string("tag-\($0)")] }
        try store.write { _ = try store.createMany("Tag", tags) }
        XCTAssertEqual(try store.objects("Tag").count(), 150)
        XCTAssertEqual(try store.object("Tag", primaryKey: .string("tag-149")), ["id": .string("tag-149"), "note": .null])
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.createMany("Tag", (0..<100).map { ["id": .string("new-\($0 % 90)")] }),
                         .duplicatePrimaryKey, "object 90:", "primary key 'new-0'")
    }

    func testAClassTooWideForManyRowsAStatement() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        let objects: [Document] = (0..<120).map { i in ["id": .int(Int64(i)), "c\(i)": .int(Int64(i))] }
        try store.write { _ = try store.createMany("Wide", objects) }
        XCTAssertEqual(try store.objects("Wide").count(), 120)
        XCTAssertEqual(try store.object("Wide", primaryKey: .int(119))?["c119"], .int(119))
        XCTAssertEqual(try store.object("Wide", primaryKey: .int(119))?["c0"], .null)
    }
}
