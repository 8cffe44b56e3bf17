import AtollStore
import CSQLite
import Foundation
import XCTest

final class ChangeLogTests: XCTestCase {
    static let schema = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [.string("id"), .string("name"), .int("age", optional: true)]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [
            .int("id"), .string("name"), .link("owner", "Person"), .list("tags", .string),
            Property(name: "address", type: .object, objectType: "Address"),
        ]),
        ObjectSchema(name: "Address", isEmbedded: true, properties: [.string("city")]),
        ObjectSchema(name: "Note", properties: [.string("text")]),
    ])

    private func ins(_ op: Instruction.Op, _ cls: String, _ pk: Value, _ key: String? = nil, _ value: Value? = nil,
                     index: Int? = nil) -> Instruction {
        Instruction(op, cls, pk, path: key.map { [.key($0)] } ?? [], value: value, index: index)
    }

    func testExactInstructionsOfSeveralTransactions() throws {
        let start = Timestamp(Date()).milliseconds
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        XCTAssertEqual(try store.version(), 0)
        XCTAssertEqual(try store.changes(after: 0), [])

        try store.write { try store.create("Person", ["id": .string("p1"), "name": .string("Ann")]) }
        try store.write {
            try store.create("Dog", ["id": .int(1), "name": .string("Rex"), "owner": .string("p1"),
                                     "tags": .list([.string("a"), .string("b")]), "address": .object(["city": .string("Oslo")])])
        }
        try store.write { try store.create("Dog", ["id": .int(1), "tags": .list([])], update: .modified) }
        try store.write {
            try store.create("Person", ["id": .string("p1"), "age": .int(40)], update: .modified)
            try store.delete("Dog", primaryKey: .int(1))
        }
        let end = Timestamp(Date()).milliseconds

        let sets = try store.changes(after: 0)
        XCTAssertEqual(sets.map(\.version), [1, 2, 3, 4])
        XCTAssertEqual(try store.version(), 4)
        XCTAssertEqual(sets[0].instructions, [
            ins(.create, "Person", .string("p1")),
            ins(.set, "Person", .string("p1"), "name", .string("Ann")),
            ins(.set, "Person", .string("p1"), "age", .null),
        ])
        XCTAssertEqual(sets[1].instructions, [
            ins(.create, "Dog", .int(1)),
            ins(.set, "Dog", .int(1), "name", .string("Rex")),
            ins(.set, "Dog", .int(1), "owner", .link(ObjectLink(className: "Person", primaryKey: .string("p1")))),
            ins(.set, "Dog", .int(1), "address", .object(["city": .string("Oslo")])),
            ins(.listInsert, "Dog", .int(1), "tags", .string("a"), index: 0),
            ins(.listInsert, "Dog", .int(1), "tags", .string("b"), index: 1),
        ])
        XCTAssertEqual(sets[2].instructions, [ins(.listClear, "Dog", .int(1), "tags")])
        XCTAssertEqual(sets[3].instructions, [
            ins(.set, "Person", .string("p1"), "age", .int(40)),
            ins(.erase, "Dog", .int(1)),
        ])
        for set in sets {
            XCTAssertTrue((start...end).contains(set.timestamp.milliseconds), "\(set.timestamp)")
        }
        XCTAssertEqual(sets.map(\.timestamp), sets.map(\.timestamp).sorted())
    }

    func testInlineLinkedObjectsComeFirst() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.write {
            try store.create("Dog", ["id": .int(7), "owner": .object(["id": .string("p2"), "name": .string("Bo")])])
        }
        XCTAssertEqual(try store.changes(after: 0).first?.instructions, [
            ins(.create, "Person", .string("p2")),
            ins(.set, "Person", .string("p2"), "name", .string("Bo")),
            ins(.set, "Person", .string("p2"), "age", .null),
            ins(.create, "Dog", .int(7)),
            ins(.set, "Dog", .int(7), "name", .string("")),
            ins(.set, "Dog", .int(7), "owner", .link(ObjectLink(className: "Person", primaryKey: .string("p2")))),
            ins(.set, "Dog", .int(7), "address", .null),
        ])
    }

    func testObjectsWithoutPrimaryKeyAreNamedByRowKey() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        let key = try store.write { try store.create("Note", ["text": .string("hello")]) }
        try store.write { try store.objects("Note").deleteAll() }
        let sets = try store.changes(after: 0)
        XCTAssertEqual(sets.map(\.instructions), [
            [ins(.create, "Note", .int(key.rawValue)), ins(.set, "Note", .int(key.rawValue), "text", .string("hello"))],
            [ins(.erase, "Note", .int(key.rawValue))],
        ])
    }

    func testEmptyAndCancelledTransactionsAddNoVersion() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.write { try store.create("Person", ["id": .string("p1")]) }
        try store.beginWrite()
        try store.commit()
        try store.write {}
        try store.beginWrite()
        try store.create("Person", ["id": .string("p2")])
        try store.cancelWrite()
        XCTAssertEqual(try store.version(), 1)
        XCTAssertEqual(try store.changes(after: 0).count, 1)

        // The next change gets the next version: none were skipped.
        try store.write { try store.create("Person", ["id": .string("p3")]) }
        XCTAssertEqual(try store.changes(after: 0).map(\.version), [1, 2])
        XCTAssertEqual(try store.changes(after: 1).first?.instructions.first, ins(.create, "Person", .string("p3")))
    }

    func testChangesAfterAndLimit() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        for i in 1...5 {
            try store.write { try store.create("Person", ["id": .string("p\(i)")]) }
        }
        XCTAssertEqual(try store.changes(after: 2).map(\.version), [3, 4, 5])
        XCTAssertEqual(try store.changes(after: 0, limit: 2).map(\.version), [1, 2])
        XCTAssertEqual(try store.changes(after: 3, limit: 10).map(\.version), [4, 5])
        XCTAssertEqual(try store.changes(after: 1, limit: 0), [])
        XCTAssertEqual(try store.changes(after: 5), [])
        XCTAssertEqual(try store.changes(after: 99), [])
        XCTAssertEqual(try store.changes(after: 3, limit: 1).first?.instructions.first,
                       ins(.create, "Person", .string("p4")))
    }

    func testTheLogSurvivesReopening() throws {
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema, changeLogValues: true)
        try store.write { try store.create("Person", ["id": .string("p1"), "name": .string("Ann")]) }
        try store.write { try store.delete("Person", primaryKey: .string("p1")) }
        let before = try store.changes(after: 0)
        store.close()

        // The file keeps values: a handle that does not ask records them too.
        let reopened = try open(path, nil)
        XCTAssertEqual(try reopened.changes(after: 0), before)
        XCTAssertEqual(try reopened.version(), 2)
        try reopened.write { try reopened.create("Person", ["id": .string("p2")]) }
        XCTAssertEqual(try reopened.changes(after: 0).map(\.version), [1, 2, 3])
    }

    func testValuesOfEveryTypeInTheLog() throws {
        let schema = Schema([ObjectSchema(name: "T", primaryKey: "id", properties: [
            Property(name: "id", type: .objectId), Property(name: "f", type: .float), Property(name: "d", type: .double),
            Property(name: "bin", type: .data), Property(name: "when", type: .date), Property(name: "u", type: .uuid),
            Property(name: "dec", type: .decimal128), Property(name: "b", type: .bool),
        ])])
        let store = try openTemporaryStore(schema, changeLogValues: true)
        let oid = ObjectId(hex: "0123456789abcdef01234567")!
        let values: [(String, Value)] = [
            ("f", .float(0.1)), ("d", .double(-2.5e300)), ("bin", .data([0, 255])), ("when", .date(Timestamp(milliseconds: -5))),
            ("u", .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!)), ("dec", .decimal(Decimal128("-1E+40")!)),
            ("b", .bool(true)),
        ]
        try store.write { try store.create("T", Document([("id", .objectId(oid))] + values)) }
        XCTAssertEqual(try store.changes(after: 0).first?.instructions,
                       [ins(.create, "T", .objectId(oid))] + values.map { ins(.set, "T", .objectId(oid), $0.0, $0.1) })
    }

    /// 200,000 creates in one transaction: the log is written in chunks of about 4 MB and reads
    /// back whole and in order.
    func testALargeTransactionIsChunkedAndReadsBackInOrder() throws {
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema, changeLogValues: true)
        let n = 200_000
        let padding = String(repeating: "x", count: 24)
        try store.write {
            for i in 0..<n {
                try store.create("Person", ["id": .string("person-\(i)"), "name": .string("\(padding)-\(i)")])
            }
        }
        let sets = try store.changes(after: 0)
        XCTAssertEqual(sets.map(\.version), [1])
        let instructions = sets[0].instructions
        XCTAssertEqual(instructions.count, 3 * n)
        var misplaced = 0
        for i in 0..<n where instructions[3 * i] != ins(.create, "Person", .string("person-\(i)"))
            || instructions[3 * i + 1] != ins(.set, "Person", .string("person-\(i)"), "name", .string("\(padding)-\(i)")) {
            misplaced += 1
        }
        XCTAssertEqual(misplaced, 0)
        XCTAssertEqual(try store.objects("Person").count(), n)
        store.close()

        // The test is only meaningful if the log was in fact chunked.
        XCTAssertGreaterThan(try rawCount(path, "SELECT count(*) FROM _atoll_changes WHERE version = 1"), 1)
        XCTAssertEqual(try rawCount(path, "SELECT instruction_count FROM _atoll_versions WHERE version = 1"), 3 * n)
    }

    /// A cancelled transaction leaves nothing, also when its log had been written out in chunks.
    func testACancelledLargeTransactionLeavesNoChunks() throws {
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema, changeLogValues: true)
        let padding = String(repeating: "y", count: 64)
        try store.beginWrite()
        for i in 0..<60_000 {
            try store.create("Person", ["id": .string("p\(i)"), "name": .string(padding)])
        }
        try store.cancelWrite()
        XCTAssertEqual(try store.version(), 0)
        XCTAssertEqual(try store.changes(after: 0), [])
        try store.write { try store.create("Person", ["id": .string("only")]) }
        XCTAssertEqual(try store.changes(after: 0).map(\.instructions.count), [3])
        store.close()
        XCTAssertEqual(try rawCount(path, "SELECT count(*) FROM _atoll_changes"), 1)
    }

    /// Runs a query returning one integer directly on the file.
    private func rawCount(_ path: String, _ sql: String) throws -> Int {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else {
            sqlite3_close(db)
            throw XCTSkip("cannot open \(path) with SQLite")
        }
        defer { sqlite3_close(db) }
        var stmt: OpaquePointer?
        XCTAssertEqual(sqlite3_prepare_v2(db, sql, -1, &stmt, nil), SQLITE_OK)
        defer { sqlite3_finalize(stmt) }
        XCTAssertEqual(sqlite3_step(stmt), SQLITE_ROW)
        return Int(sqlite3_column_int64(stmt, 0))
    }
}
