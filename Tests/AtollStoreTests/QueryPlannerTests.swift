import AtollStore
import XCTest

/// The planner hides an index from SQLite when a range selects much of the table (see
/// docs/query-language.md). Only correctness is asserted: the same answers either way.
final class QueryPlannerTests: XCTestCase {
    static let schema = Schema([ObjectSchema(name: "Row", primaryKey: "id", properties: [
        .int("id"), .int("age", indexed: true), .string("owner"),
        Property(name: "score", type: .double, isIndexed: true),
    ])])

    static let n = 30_000

    private func makeStore() throws -> Store {
        let store = try openTemporaryStore(Self.schema)
        var rows = [Document]()
        rows.reserveCapacity(Self.n)
        for i in 0..<Self.n {
            let owner = i % 7 == 0 ? "x" : "y"
            let score = Double(i % 1000) / 10
            let row: Document = ["id": .int(Int64(i)), "age": .int(Int64(i % 100)), "owner": .string(owner),
                                 "score": .double(score)]
            rows.append(row)
        }
        try store.write { try store.createMany("Row", rows) }
        return store
    }

    /// How many rows of the fixture satisfy `predicate`, counted in Swift.
    private func expected(_ predicate: (_ i: Int, _ age: Int, _ owner: String) -> Bool) -> Int {
        (0..<Self.n).filter { predicate($0, $0 % 100, $0 % 7 == 0 ? "x" : "y") }.count
    }

    func testWideRangeAndEquality() throws {
        let store = try makeStore()
        let want = expected { _, age, owner in age > 50 && owner == "x" }
        XCTAssertEqual(want, 2100)
        XCTAssertEqual(try store.objects("Row", where: "age > 50 AND owner == 'x'").count(), want)
        XCTAssertEqual(try store.objects("Row", where: "owner == 'x' AND age > 50").count(), want)
        XCTAssertEqual(try store.objects("Row", where: "age > $0 AND owner == $1", [.int(50), .string("x")]).count(), want)
        XCTAssertEqual(try store.objects("Row", where: "age > 50.5 AND owner == 'x'").count(), want)
        XCTAssertEqual(try store.objects("Row", where: "age > 50").count(), 14_700)
        XCTAssertEqual(try store.objects("Row", where: "NOT (age > 50)").count(), 15_300)
        XCTAssertEqual(try store.objects("Row", where: "age > 50 OR owner == 'x'").count(),
                       expected { _, age, owner in age > 50 || owner == "x" })
    }

    func testNarrowRangesStillUseTheirAnswer() throws {
        let store = try makeStore()
        XCTAssertEqual(try store.objects("Row", where: "age >= 99").count(), 300)
        XCTAssertEqual(try store.objects("Row", where: "age BETWEEN {10, 19}").count(), 3000)
        XCTAssertEqual(try store.objects("Row", where: "age BETWEEN {10, 19} AND owner == 'x'").count(),
                       expected { _, age, owner in (10...19).contains(age) && owner == "x" })
        XCTAssertEqual(try store.objects("Row", where: "age < 0").count(), 0)
        XCTAssertEqual(try store.objects("Row", where: "score > 99.5").count(), expected { i, _, _ in Double(i % 1000) / 10 > 99.5 })
        XCTAssertEqual(try store.objects("Row", where: "score < 50 AND owner == 'x'").count(),
                       expected { i, _, owner in Double(i % 1000) / 10 < 50 && owner == "x" })
    }

    func testOrderAndPagingOverAWideRange() throws {
        let store = try makeStore()
        let results = try store.objects("Row", where: "age > 50 AND owner == 'x' SORT(id DESC)")
        let first = try results.documents(limit: 3).map { $0["id"]?.intValue ?? -1 }
        let matching: [Int64] = (0..<Int64(Self.n)).filter { (i: Int64) -> Bool in i % 100 > 50 && i % 7 == 0 }
        XCTAssertEqual(first, Array(matching.reversed().prefix(3)))

        let youngest = try store.objects("Row", where: "age > 50 AND owner == 'x' SORT(age ASC, id ASC) LIMIT(2)")
            .documents().map { $0["id"]?.intValue ?? -1 }
        let aged51: [Int64] = matching.filter { (i: Int64) -> Bool in i % 100 == 51 }
        XCTAssertEqual(youngest, Array(aged51.prefix(2)))
    }

    /// The same answers inside a write transaction (the row count is then not cached) and after
    /// the table changed.
    func testAnswersFollowWrites() throws {
        let store = try makeStore()
        try store.beginWrite()
        try store.createMany("Row", (Self.n..<(Self.n + 700)).map { i in
            ["id": .int(Int64(i)), "age": .int(99), "owner": .string("x")]
        })
        let want = expected { _, age, owner in age > 50 && owner == "x" } + 700
        XCTAssertEqual(try store.objects("Row", where: "age > 50 AND owner == 'x'").count(), want)
        try store.commit()
        XCTAssertEqual(try store.objects("Row", where: "age > 50 AND owner == 'x'").count(), want)
        try store.write { _ = try store.objects("Row", where: "age > 50").deleteAll() }
        XCTAssertEqual(try store.objects("Row", where: "age > 50 AND owner == 'x'").count(), 0)
        XCTAssertEqual(try store.objects("Row").count(), 15_300)
    }
}
