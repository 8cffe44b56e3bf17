import AtollStore
import Foundation
import XCTest

/// `Store.statistics()`, `isRealm()` and `readSnapshot(_:)`.
final class StatisticsTests: XCTestCase {
    static let schema = Schema([ObjectSchema(name: "Item", primaryKey: "id", properties: [.int("id"), .string("text")])])

    func testStatisticsCountPagesAndTheChangeLog() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        let fresh = try store.statistics()
        XCTAssertGreaterThan(fresh.pageSize, 0)
        XCTAssertGreaterThan(fresh.pageCount, 0)
        XCTAssertEqual(fresh.changeLogEntries, 0)
        XCTAssertEqual(fresh.changeLogChunks, 0)
        XCTAssertEqual(fresh.changeLogBytes, 0)
        XCTAssertEqual(fresh.version, 0)
        XCTAssertEqual(fresh.totalBytes, fresh.pageCount * fresh.pageSize)

        let text = String(repeating: "x", count: 2000)
        try store.write {
            try store.createMany("Item", (0..<500).map { ["id": .int(Int64($0)), "text": .string(text)] })
        }
        try store.write { try store.objects("Item", where: "id >= 10").deleteAll() }
        let after = try store.statistics()
        XCTAssertEqual(after.changeLogEntries, 2)
        XCTAssertGreaterThanOrEqual(after.changeLogChunks, 2)
        XCTAssertGreaterThan(after.changeLogBytes, 500 * 2000, "the creates carry the text")
        XCTAssertEqual(after.version, 2)
        XCTAssertGreaterThan(after.pageCount, fresh.pageCount)
        XCTAssertGreaterThan(after.freePageCount, 0, "deleted rows leave free pages")
        XCTAssertEqual(after.freeBytes, after.freePageCount * after.pageSize)
        XCTAssertEqual(after.usedBytes, after.totalBytes - after.freeBytes)
    }

    func testAFileWithoutAtollTablesIsNotARealm() throws {
        let path = temporaryRealmPath()
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data()))
        let store = try open(path, nil, readOnly: true)
        XCTAssertFalse(try store.isRealm())
        XCTAssertEqual(try store.statistics().changeLogEntries, 0)
        XCTAssertTrue(try openTemporaryStore(nil, changeLogValues: true).isRealm())
    }

    func testReadSnapshotSeesOneMoment() throws {
        let path = temporaryRealmPath()
        let reader = try open(path, Self.schema, changeLogValues: true)
        let writer = try open(path, Self.schema, changeLogValues: true)
        try writer.write { try writer.create("Item", ["id": .int(1)]) }
        try reader.refresh()
        let (before, inside) = try reader.readSnapshot {
            let before = try reader.objects("Item").count()
            try writer.write { try writer.create("Item", ["id": .int(2)]) }
            return (before, try reader.objects("Item").count())
        }
        XCTAssertEqual(before, 1)
        XCTAssertEqual(inside, 1, "another handle's commit is not seen inside the snapshot")
        XCTAssertEqual(try reader.objects("Item").count(), 1, "nor after it, until a refresh")
        try reader.refresh()
        XCTAssertEqual(try reader.objects("Item").count(), 2, "and is seen after the refresh")
        // Inside a write transaction, the snapshot is that transaction's.
        try reader.write {
            try reader.create("Item", ["id": .int(3)])
            XCTAssertEqual(try reader.readSnapshot { try reader.objects("Item").count() }, 3)
        }
    }
}
