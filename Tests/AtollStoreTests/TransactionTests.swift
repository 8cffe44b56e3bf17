@testable import AtollStore
import AtollTestSupport
import XCTest

final class TransactionTests: XCTestCase {
    static let schema = Schema([ObjectSchema(name: "Item", primaryKey: "id", properties: [.int("id"), .string("name")])])

    func testWritesOutsideATransactionFail() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        assertAtollError(try store.create("Item", ["id": .int(1)]), .notInWrite,
                         "create: the realm is not in a write transaction (call beginWrite first)")
        assertAtollError(try store.commit(), .notInWrite, "commit: the realm is not in a write transaction")
        assertAtollError(try store.cancelWrite(), .notInWrite, "cancel: the realm is not in a write transaction")
        assertAtollError(try store.objects("Item").deleteAll(), .notInWrite, "deleteAll")
        XCTAssertEqual(try store.objects("Item").count(), 0)
    }

    func testBeginTwice() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.beginWrite()
        XCTAssertTrue(store.isInWrite)
        assertAtollError(try store.beginWrite(), .alreadyInWrite, "already in a write transaction")
        XCTAssertTrue(store.isInWrite, "the first transaction is still open")
        try store.create("Item", ["id": .int(1)])
        try store.commit()
        XCTAssertFalse(store.isInWrite)
        XCTAssertEqual(try store.intKeys("Item"), [1])
    }

    func testCancelDiscards() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.write { try store.create("Item", ["id": .int(1), "name": .string("kept")]) }
        try store.beginWrite()
        try store.create("Item", ["id": .int(2)])
        try store.create("Item", ["id": .int(1), "name": .string("changed")], update: .all)
        try store.delete("Item", primaryKey: .int(1))
        XCTAssertEqual(try store.intKeys("Item"), [2], "the transaction sees its own writes")
        try store.cancelWrite()
        XCTAssertFalse(store.isInWrite)
        XCTAssertEqual(try store.objects("Item").documents(), [["id": .int(1), "name": .string("kept")]])
        XCTAssertEqual(try store.version(), 1)
    }

    func testWriteBlockCancelsWhenItThrows() throws {
        struct Stop: Error {}
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        XCTAssertThrowsError(try store.write {
            try store.create("Item", ["id": .int(1)])
            throw Stop()
        }) { XCTAssertTrue($0 is Stop) }
        XCTAssertFalse(store.isInWrite)
        XCTAssertEqual(try store.objects("Item").count(), 0)
        XCTAssertEqual(try store.version(), 0)
    }

    func testWriteBlockReturnsItsValue() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        let key = try store.write { try store.create("Item", ["id": .int(5)]) }
        XCTAssertEqual(key.rawValue, 5)
    }

    func testCloseWithAnOpenTransactionDiscardsIt() throws {
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema, changeLogValues: true)
        try store.write { try store.create("Item", ["id": .int(1)]) }
        try store.beginWrite()
        try store.create("Item", ["id": .int(2)])
        store.close()
        XCTAssertTrue(store.isClosed)
        XCTAssertFalse(store.isInWrite)

        let reopened = try open(path, nil, changeLogValues: true)
        XCTAssertEqual(try reopened.intKeys("Item"), [1])
        XCTAssertEqual(try reopened.version(), 1)
        // And the file is not left locked.
        try reopened.write { try reopened.create("Item", ["id": .int(3)]) }
        XCTAssertEqual(try reopened.intKeys("Item"), [1, 3])
    }

    func testAFailedOperationLeavesTheTransactionUsable() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.beginWrite()
        try store.create("Item", ["id": .int(1)])
        assertAtollError(try store.create("Item", ["id": .int(1)]), .duplicatePrimaryKey)
        assertAtollError(try store.create("Item", ["id": .int(2), "name": .int(3)]), .typeMismatch)
        try store.create("Item", ["id": .int(2)])
        try store.commit()
        XCTAssertEqual(try store.intKeys("Item"), [1, 2])
        let instructions = try store.changes(after: 0).flatMap(\.instructions)
        XCTAssertEqual(instructions.filter { $0.op == .create }.map(\.primaryKey), [.int(1), .int(2)])
        XCTAssertEqual(instructions.count, 4)
    }

    func testUseAfterClose() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        let results = try store.objects("Item")
        store.close()
        store.close()  // a second close is harmless
        XCTAssertTrue(store.isClosed)
        assertAtollError(try store.beginWrite(), .closed, "the realm is closed")
        assertAtollError(try store.create("Item", ["id": .int(1)]), .closed)
        assertAtollError(try store.object("Item", primaryKey: .int(1)), .closed)
        assertAtollError(try store.objects("Item"), .closed)
        assertAtollError(try store.version(), .closed)
        assertAtollError(try store.changes(after: 0), .closed)
        assertAtollError(try results.count(), .closed)
        assertAtollError(try results.documents(), .closed)
        assertAtollError(try store.withLock { 1 }, .closed)
    }
}

/// `Configuration.durability`: what a commit waits for before it returns.
final class DurabilityTests: XCTestCase {
    /// SQLite's `synchronous` of the store's connection (2: FULL, 1: NORMAL).
    private func synchronous(_ durability: Durability?) throws -> Int64? {
        var configuration = Configuration(path: temporaryRealmPath(), schema: TransactionTests.schema)
        if let durability { configuration.durability = durability }
        let store = try Store(configuration)
        defer { store.close() }
        try store.write { _ = try store.create("Item", ["id": .int(1)]) }
        return try store.withMetadata { try $0.rows("PRAGMA synchronous").first?.first?.intValue }
    }

    /// A commit with another durability than the configuration's leaves the connection's as
    /// it was, committed or not.
    func testAOneCommitDurabilityLeavesTheConfigurationsInPlace() throws {
        let store = try Store(Configuration(path: temporaryRealmPath(), schema: TransactionTests.schema))
        defer { store.close() }
        func synchronous() throws -> Int64? { try store.withMetadata { try $0.rows("PRAGMA synchronous").first?.first?.intValue } }
        try store.write(durability: .normal) {
            _ = try store.create("Item", ["id": .int(1)])
            XCTAssertEqual(try synchronous(), 1)
        }
        XCTAssertEqual(try synchronous(), 2)
        XCTAssertThrowsError(try store.write(durability: .normal) { _ = try store.create("Item", ["id": .int(1)]) })
        XCTAssertEqual(try synchronous(), 2)
        XCTAssertEqual(try store.objects("Item").count(), 1)
    }

    func testFullByDefaultAndNormalWhenAskedFor() throws {
        XCTAssertEqual(try synchronous(nil), 2)
        XCTAssertEqual(try synchronous(.full), 2)
        XCTAssertEqual(try synchronous(.normal), 1)
    }
}
