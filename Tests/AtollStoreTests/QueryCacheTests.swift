@testable import AtollStore
import AtollTestSupport
import XCTest

/// The same query on unchanged data is neither compiled nor counted again (`QueryCache`); any
/// change, through any path, is seen. The oracle is a model of the rows kept beside the stores,
/// not the stores' own reads.
final class QueryCacheTests: XCTestCase {
    private let schema = Schema([ObjectSchema(name: "Item", primaryKey: "id", properties: [
        Property(name: "id", type: .int), Property(name: "age", type: .int, isIndexed: true), Property(name: "tag", type: .string),
    ])])

    /// The queries counted at each step, with what the model says they count.
    private let queries: [(query: String, arguments: [Value], matches: (Int64, String) -> Bool)] = [
        ("age == $0", [.int(3)], { age, _ in age == 3 }),
        ("age > $0 AND tag == $1", [.int(4), .string("b")], { age, tag in age > 4 && tag == "b" }),
        ("", [], { _, _ in true }),
        ("tag BEGINSWITH 'a' LIMIT(3)", [], { _, tag in tag.hasPrefix("a") }),
    ]

    private func count(_ store: Store, _ q: (query: String, arguments: [Value], matches: (Int64, String) -> Bool),
                       _ model: [Int64: (Int64, String)], limit: Int? = nil) throws -> (Int, Int) {
        var expected = model.values.filter { q.matches($0.0, $0.1) }.count
        if q.query.contains("LIMIT(3)") { expected = min(expected, 3) }
        return (try store.objects("Item", where: q.query, q.arguments).count(), expected)
    }

    func testCountsFollowEveryKindOfChange() throws {
        let path = temporaryRealmPath()
        let a = try Store(Configuration(path: path, schema: schema))
        let b = try Store(Configuration(path: path, schema: schema))
        defer { a.close(); b.close() }
        var model = [Int64: (Int64, String)]()
        var random = SystemRandomNumberGenerator()
        func randomRow() -> (Int64, Document) {
            let id = Int64.random(in: 0..<40, using: &random)
            let age = Int64.random(in: 0..<8, using: &random)
            let tag = ["a", "b", "ab", "c"].randomElement(using: &random) ?? "a"
            return (id, ["id": .int(id), "age": .int(age), "tag": .string(tag)])
        }
        for step in 0..<300 {
            switch Int.random(in: 0..<6, using: &random) {
            case 0, 1:
                // A commit through one store or the other.
                let writer = Bool.random(using: &random) ? a : b
                let (id, row) = randomRow()
                try writer.write { _ = try writer.create("Item", row, update: .all) }
                model[id] = (row["age"]?.intValue ?? 0, row["tag"]?.stringValue ?? "")
                // The other store reads from its snapshot until it refreshes.
                _ = try a.refresh()
                _ = try b.refresh()
            case 2:
                guard let id = model.keys.randomElement(using: &random) else { break }
                try a.write { _ = try a.delete("Item", primaryKey: .int(id)) }
                model[id] = nil
                _ = try b.refresh()
            case 3:
                // Inside a write transaction the counts see its writes, and after a cancel the
                // data as it was.
                let (id, row) = randomRow()
                try a.beginWrite()
                _ = try a.create("Item", row, update: .all)
                var inside = model
                inside[id] = (row["age"]?.intValue ?? 0, row["tag"]?.stringValue ?? "")
                for q in queries {
                    let (got, expected) = try count(a, q, inside)
                    XCTAssertEqual(got, expected, "step \(step), in a write: \(q.query)")
                }
                try a.cancelWrite()
            default:
                break
            }
            // Each count twice: the second from the cache.
            for store in [a, b] {
                for q in queries {
                    for _ in 0..<2 {
                        let (got, expected) = try count(store, q, model)
                        XCTAssertEqual(got, expected, "step \(step): \(q.query)")
                    }
                }
            }
        }
        XCTAssertGreaterThan(a.queryCache.hits, 300, "the cache answered the repeated counts")
    }

    func testASnapshotKeepsItsCountUntilTheRefreshThenCountsAgain() throws {
        let path = temporaryRealmPath()
        let reader = try Store(Configuration(path: path, schema: schema))
        let writer = try Store(Configuration(path: path, schema: schema))
        defer { reader.close(); writer.close() }
        let all = try reader.objects("Item")
        XCTAssertEqual(try all.count(), 0)
        try writer.write { _ = try writer.create("Item", ["id": .int(1), "age": .int(1), "tag": .string("a")]) }
        XCTAssertEqual(try all.count(), 0, "the reader's snapshot is as of its last refresh")
        XCTAssertEqual(try reader.objects("Item").count(), 0)
        XCTAssertTrue(try reader.refresh())
        XCTAssertEqual(try all.count(), 1, "a refresh is a new snapshot: counted again")
        XCTAssertEqual(try reader.objects("Item").count(), 1)
    }

    func testInMemoryStoresOfOneIdentifierSeeEachOthersCommits() throws {
        let name = "query-cache-\(UUID().uuidString)"
        let a = try Store(Configuration(path: name, inMemory: true, schema: schema))
        let b = try Store(Configuration(path: name, inMemory: true, schema: schema))
        defer { a.close(); b.close() }
        XCTAssertEqual(try a.objects("Item").count(), 0)
        XCTAssertEqual(try a.objects("Item").count(), 0)
        try b.write { _ = try b.create("Item", ["id": .int(1), "age": .int(1), "tag": .string("a")]) }
        _ = try a.refresh()
        XCTAssertEqual(try a.objects("Item").count(), 1)
    }

    /// Swift's strings are equal when they are canonically equivalent; SQLite's, and a query's,
    /// only when their bytes are. A query remembered for one must not answer for the other.
    func testCanonicallyEquivalentTextsAreDifferentQueries() throws {
        let store = try Store(Configuration(path: temporaryRealmPath(), schema: schema))
        defer { store.close() }
        let composed = "\u{E9}cole", decomposed = "e\u{301}cole"
        XCTAssertEqual(composed, decomposed, "Swift calls them equal")
        try store.write { _ = try store.create("Item", ["id": .int(1), "age": .int(1), "tag": .string(composed)]) }
        for _ in 0..<2 {
            XCTAssertEqual(try store.objects("Item", where: "tag == '\(composed)'").count(), 1)
            XCTAssertEqual(try store.objects("Item", where: "tag == '\(decomposed)'").count(), 0)
            XCTAssertEqual(try store.objects("Item", where: "tag == $0", [.string(composed)]).count(), 1)
            XCTAssertEqual(try store.objects("Item", where: "tag == $0", [.string(decomposed)]).count(), 0)
            XCTAssertEqual(try store.objects("Item", where: "tag IN $0", [.list([.string(decomposed)])]).count(), 0)
            XCTAssertEqual(try store.objects("Item", where: "tag IN $0", [.list([.string(composed)])]).count(), 1)
        }
    }

    func testTheSameTextWithOtherArgumentsIsAnotherQuery() throws {
        let store = try Store(Configuration(path: temporaryRealmPath(), schema: schema))
        defer { store.close() }
        try store.write {
            for i in 0..<10 { _ = try store.create("Item", ["id": .int(Int64(i)), "age": .int(Int64(i % 3)), "tag": .string("t")]) }
        }
        let counts = try (0..<3).map { try store.objects("Item", where: "age == $0", [.int(Int64($0))]).count() }
        XCTAssertEqual(counts, [4, 3, 3])
        XCTAssertEqual(try store.objects("Item", where: "age == $0", [.int(1)]).count(), 3)
    }
}
