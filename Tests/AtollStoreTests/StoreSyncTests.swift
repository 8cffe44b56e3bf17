import AtollStore
import AtollTestSupport
import XCTest

/// What the sync engines ask of a store beyond objects (Store+Sync.swift).
final class StoreSyncTests: XCTestCase {
    func testPrimaryKeysAmongFewOrManyKeysAreTheExistingOnes() throws {
        let schema = Schema([ObjectSchema(name: "Item", primaryKey: "_id", properties: [Property(name: "_id", type: .int)]),
                             ObjectSchema(name: "Tag", primaryKey: "_id", properties: [Property(name: "_id", type: .string)])])
        let store = try Store(Configuration(path: temporaryRealmPath(), schema: schema))
        defer { store.close() }
        try store.write {
            _ = try store.createMany("Item", (0..<3_000).map { ["_id": .int(Int64($0 * 2))] })
            _ = try store.createMany("Tag", ["a", "b"].map { ["_id": .string($0)] })
        }
        // Few keys: looked up one by one; many (against a table not much larger): one pass.
        XCTAssertEqual(try store.primaryKeys("Item", among: [.int(0), .int(1), .int(4)]), [.int(0), .int(4)])
        let many = (0..<4_000).map { Value.int(Int64($0)) }
        XCTAssertEqual(Set(try store.primaryKeys("Item", among: many)), Set((0..<2_000).map { Value.int(Int64($0 * 2)) }))
        // Keys of another type match nothing, whether few or many.
        XCTAssertEqual(try store.primaryKeys("Item", among: [.string("2")]), [])
        XCTAssertEqual(try store.primaryKeys("Item", among: (0..<2_500).map { Value.string("\($0)") }), [])
        // Whole doubles coerce to integer keys, whether few or many.
        XCTAssertEqual(try store.primaryKeys("Item", among: [.double(4), .double(5)]), [.int(4)])
        XCTAssertEqual(Set(try store.primaryKeys("Item", among: (0..<2_500).map { Value.double(Double($0)) })),
                       Set((0..<1_250).map { Value.int(Int64($0 * 2)) }))
        XCTAssertEqual(Set(try store.primaryKeys("Tag", among: (0..<2_000).map { .string("k\($0)") } + [.string("b")])), [.string("b")])
        XCTAssertEqual(try store.primaryKeys("Tag").count, 2)
    }

    func testPrimaryKeysAmongKeysLeaveNothingBehindForTheNextLookUp() throws {
        let schema = Schema([ObjectSchema(name: "Item", primaryKey: "_id", properties: [Property(name: "_id", type: .int)])])
        let store = try Store(Configuration(path: temporaryRealmPath(), schema: schema))
        defer { store.close() }
        try store.write { _ = try store.createMany("Item", (0..<3_000).map { ["_id": .int(Int64($0 * 2))] }) }
        // Each count in turn, around the sizes of the prepared look-ups (8, 64, 500 keys a
        // statement): a key of one look-up must not match in the next.
        for count in [1, 8, 9, 64, 65, 500, 501, 1_000, 3, 1] {
            let keys = (0..<count).map { Value.int(Int64(1 + 2 * $0)) }          // odd: none exist
            XCTAssertEqual(try store.primaryKeys("Item", among: keys), [], "\(count) odd keys")
            let even = (0..<count).map { Value.int(Int64(2 * $0)) }
            XCTAssertEqual(try store.primaryKeys("Item", among: even), even, "\(count) even keys")
        }
        XCTAssertEqual(try store.primaryKeys("Item", among: [.int(2), .int(2), .int(3)]), [.int(2)], "a key named twice comes once")
    }

    func testInsertManyWritesEveryRowWhateverTheCount() throws {
        let store = try Store(Configuration(path: temporaryRealmPath(), schema: Schema([])))
        defer { store.close() }
        try store.write { try store.withMetadata { try $0.execute("CREATE TABLE _atoll_test_rows (k TEXT PRIMARY KEY, n INTEGER, z ANY) STRICT") } }
        // Around the rows of one statement (4 here): none, fewer, exactly, more with a rest.
        var written = 0
        for count in [0, 1, 3, 4, 5, 8, 11] {
            let rows: [[Value]] = (0..<count).map { i in [.string("r\(written + i)"), .int(Int64(written + i)), .null] }
            try store.write { try store.withMetadata { try $0.insertMany("INSERT INTO _atoll_test_rows", rows, perStatement: 4) } }
            written += count
            let stored = try store.withMetadata { try $0.rows("SELECT k, n, z FROM _atoll_test_rows ORDER BY n") }
            XCTAssertEqual(stored.count, written, "after \(count) rows")
            XCTAssertEqual(stored.last ?? [], written == 0 ? [] : [.string("r\(written - 1)"), .int(Int64(written - 1)), .null])
        }
        // A duplicate fails the call; rows of different widths fail it before anything is written.
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        XCTAssertThrowsError(try store.withMetadata { try $0.insertMany("INSERT INTO _atoll_test_rows", (0..<6).map { _ in [.string("r0"), .int(0), .null] }, perStatement: 4) })
        assertAtollError(try store.withMetadata { try $0.insertMany("INSERT INTO _atoll_test_rows", [[.string("x"), .int(1), .null], [.string("y")]]) },
                         .invalidArgument, "different widths")
        XCTAssertEqual(try store.withMetadata { try $0.rows("SELECT count(*) FROM _atoll_test_rows") }.first?.first, .int(Int64(written)))
    }
}
