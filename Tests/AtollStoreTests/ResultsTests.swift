import AtollStore
import XCTest

/// `Results`: counts, paging, keys, live re-evaluation and deleteAll.
final class ResultsTests: QueryTestCase {
    private func ids(_ docs: [Document]) -> [Int64] { docs.map { $0["id"]?.intValue ?? -1 } }

    func testPaging() throws {
        let results = try store.objects("Person", where: "age != nil SORT(age ASC)")
        XCTAssertEqual(try results.count(), 18)
        XCTAssertEqual(ids(try results.documents(offset: 0, limit: 3)), [7, 17, 5])
        XCTAssertEqual(ids(try results.documents(offset: 5, limit: 5)), [12, 13, 1, 9, 11])
        XCTAssertEqual(ids(try results.documents(offset: 15, limit: 10)), [6, 16, 8])
        XCTAssertEqual(ids(try results.documents(offset: 15)), [6, 16, 8])
        XCTAssertEqual(ids(try results.documents(offset: 18)), [])
        XCTAssertEqual(ids(try results.documents(offset: 0, limit: 0)), [])
        XCTAssertEqual(try results.keys(offset: 5, limit: 2), [ObjectKey(12), ObjectKey(13)])
    }

    func testPagingWithinALimit() throws {
        let results = try store.objects("Person", where: "SORT(age ASC) LIMIT(4)")
        XCTAssertEqual(try results.count(), 4)
        XCTAssertEqual(ids(try results.documents()), [19, 20, 7, 17])
        XCTAssertEqual(ids(try results.documents(offset: 2)), [7, 17])
        XCTAssertEqual(ids(try results.documents(offset: 3, limit: 5)), [17])
        XCTAssertEqual(ids(try results.documents(offset: 1, limit: 2)), [20, 7])
        XCTAssertEqual(ids(try results.documents(offset: 4)), [])
        XCTAssertEqual(try results.keys().count, 4)
    }

    /// Reading page after page continues from the last row (not re-skipping rows); a change
    /// between pages, by this store or another, falls back to counting the offset afresh.
    func testSequentialPagesStayExactWhenTheDataChanges() throws {
        let unsorted = try store.objects("Person", where: "id > 2")
        XCTAssertEqual(ids(try unsorted.documents(offset: 0, limit: 5)), [3, 4, 5, 6, 7])
        XCTAssertEqual(ids(try unsorted.documents(offset: 5, limit: 5)), [8, 9, 10, 11, 12])
        try store.write { try store.delete("Person", primaryKey: .int(4)) }
        // Offset 10 of the data as it is now: 3 5 6 7 8 9 10 11 12 13 | 14 ...
        XCTAssertEqual(ids(try unsorted.documents(offset: 10, limit: 3)), [14, 15, 16])
        XCTAssertEqual(ids(try unsorted.documents(offset: 13, limit: 3)), [17, 18, 19])
        let other = try Store(Configuration(path: store.configuration.path))
        defer { other.close() }
        try other.write { try other.delete("Person", primaryKey: .int(3)) }
        XCTAssertEqual(ids(try unsorted.documents(offset: 15, limit: 5)), [19, 20], "before a refresh: the snapshot, with 3")
        try store.refresh()
        // Another connection's commit: 5 6 7 8 9 10 11 12 13 14 15 16 17 18 | 19 20
        XCTAssertEqual(ids(try unsorted.documents(offset: 14, limit: 5)), [19, 20])
        XCTAssertEqual(ids(try unsorted.documents(offset: 0, limit: 2)), [5, 6])
    }

    func testDocumentsAreWhole() throws {
        let alice = try XCTUnwrap(store.objects("Person", where: "id == 1").documents().first)
        XCTAssertEqual(alice["tags"], .list([.string("red"), .string("blue")]))
        XCTAssertEqual(alice["toys"], .list([.string("ball"), .string("bone")]))
        XCTAssertEqual(alice["pet"], .string("d1"))
        XCTAssertEqual(alice["address"], .object(["city": .string("Oslo")]))
        XCTAssertEqual(alice["balance"], .decimal(Decimal128("10.5")!))
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1)), alice)
    }

    func testResultsAreReevaluatedOnEachRead() throws {
        let young = try store.objects("Person", where: "age < $0", [.int(20)])
        XCTAssertEqual(try young.count(), 2)
        try store.beginWrite()
        try store.create("Person", ["id": .int(21), "name": .string("Kid"), "age": .int(5)])
        XCTAssertEqual(try young.count(), 3, "a write transaction sees its own writes")
        XCTAssertEqual(ids(try young.documents()), [7, 17, 21])
        try store.cancelWrite()
        XCTAssertEqual(try young.count(), 2)
        try store.write { try store.create("Person", ["id": .int(1), "age": .int(12)], update: .modified) }
        XCTAssertEqual(ids(try young.documents()), [1, 7, 17])
    }

    func testDeleteAll() throws {
        // Another handle makes the file keep values: this handle's next commit keeps them.
        _ = try open(try XCTUnwrap(store.configuration.path), nil, changeLogValues: true)
        let version = try store.version()
        let deleted = try store.write { try store.objects("Person", where: "age < 20").deleteAll() }
        XCTAssertEqual(deleted, 2)
        XCTAssertEqual(try store.objects("Person").count(), 18)
        XCTAssertEqual(try store.objects("Person", where: "age < 20").count(), 0)
        XCTAssertEqual(try store.changes(after: version).first?.instructions, [
            Instruction(.erase, "Person", .int(7)), Instruction(.erase, "Person", .int(17)),
        ])
        // Their embedded addresses went with them; the dogs and toys stay.
        XCTAssertEqual(try store.objects("Address").count(), 9)
        XCTAssertEqual(try store.objects("Dog").count(), 5)
        XCTAssertEqual(try store.objects("Toy").count(), 3)
    }

    func testDeleteAllHonoursLimitAndSort() throws {
        let deleted = try store.write { try store.objects("Person", where: "SORT(age DESC) LIMIT(2)").deleteAll() }
        XCTAssertEqual(deleted, 2)
        XCTAssertEqual(try store.intKeys("Person", "age >= 55"), [])
        XCTAssertEqual(try store.objects("Person").count(), 18)
    }

    func testDeleteAllOfAClassThatOthersLinkTo() throws {
        try store.write { try store.objects("Dog", where: "vet.city == 'Oslo'").deleteAll() }
        XCTAssertEqual(try store.stringKeys("Dog"), ["d2", "d3"])
        check("pet != nil", [2, 4, 9, 11])
    }
}
