import AtollStore
import XCTest

/// `create` on an existing primary key: `.error`, `.modified`, `.all`; and `createMany`.
final class UpdatePolicyTests: XCTestCase {
    static let schema = Schema([ObjectSchema(name: "Person", primaryKey: "id", properties: [
        .int("id"), .string("name"), .int("age", optional: true), .list("tags", .string),
    ])])

    private func makeStore() throws -> Store {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.write {
            try store.create("Person", ["id": .int(1), "name": .string("Ann"), "age": .int(30),
                                        "tags": .list([.string("a")])])
        }
        return store
    }

    /// The instructions of the newest change-log entry.
    private func lastInstructions(_ store: Store) throws -> [Instruction] {
        try store.changes(after: store.version() - 1).last?.instructions ?? []
    }

    private func set(_ name: String, _ value: Value) -> Instruction {
        Instruction(.set, "Person", .int(1), path: [.key(name)], value: value)
    }

    func testErrorPolicyRefusesAnExistingKey() throws {
        let store = try makeStore()
        try store.beginWrite()
        assertAtollError(try store.create("Person", ["id": .int(1), "name": .string("Bob")]), .duplicatePrimaryKey,
                         "an object of class 'Person' with primary key 1 exists already")
        assertAtollError(try store.create("Person", ["id": .int(1), "name": .string("Bob")], update: .error),
                         .duplicatePrimaryKey)
        try store.commit()
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1))?["name"], .string("Ann"))
        XCTAssertEqual(try store.version(), 1, "the failed creates recorded nothing")
    }

    func testModifiedRecordsOnlyChangedProperties() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .int(1), "name": .string("Ann"), "age": .int(31), "tags": .list([.string("a")])],
                             update: .modified)
        }
        XCTAssertEqual(try store.version(), 2)
        XCTAssertEqual(try lastInstructions(store), [set("age", .int(31))])
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1))?["age"], .int(31))
    }

    func testModifiedWithNothingChangedAddsNoVersion() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .int(1), "name": .string("Ann"), "tags": .list([.string("a")])],
                             update: .modified)
        }
        XCTAssertEqual(try store.version(), 1)
    }

    func testModifiedListChangeIsAClearAndInserts() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .int(1), "tags": .list([.string("a"), .string("b")])], update: .modified)
        }
        XCTAssertEqual(try lastInstructions(store), [
            Instruction(.listClear, "Person", .int(1), path: [.key("tags")]),
            Instruction(.listInsert, "Person", .int(1), path: [.key("tags")], value: .string("a"), index: 0),
            Instruction(.listInsert, "Person", .int(1), path: [.key("tags")], value: .string("b"), index: 1),
        ])
    }

    func testAllRecordsEveryGivenProperty() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .int(1), "name": .string("Ann"), "age": .int(31), "tags": .list([.string("a")])],
                             update: .all)
        }
        XCTAssertEqual(try lastInstructions(store), [
            set("name", .string("Ann")),
            set("age", .int(31)),
            Instruction(.listClear, "Person", .int(1), path: [.key("tags")]),
            Instruction(.listInsert, "Person", .int(1), path: [.key("tags")], value: .string("a"), index: 0),
        ])
    }

    func testAllWithNothingChangedStillRecords() throws {
        let store = try makeStore()
        try store.write { try store.create("Person", ["id": .int(1), "name": .string("Ann")], update: .all) }
        XCTAssertEqual(try store.version(), 2)
        XCTAssertEqual(try lastInstructions(store), [set("name", .string("Ann"))])
    }

    func testUpdateLeavesPropertiesNotGivenAlone() throws {
        let store = try makeStore()
        try store.write { try store.create("Person", ["id": .int(1), "age": .null], update: .modified) }
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1)),
                       ["id": .int(1), "name": .string("Ann"), "age": .null, "tags": .list([.string("a")])])
        XCTAssertEqual(try lastInstructions(store), [set("age", .null)])
    }

    func testUpdatePoliciesCreateMissingObjects() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .int(2), "name": .string("Bo")], update: .modified)
            try store.create("Person", ["id": .int(3), "name": .string("Cy")], update: .all)
        }
        XCTAssertEqual(try store.intKeys("Person"), [1, 2, 3])
    }

    // MARK: - createMany

    func testCreateManyWritesAll() throws {
        let store = try makeStore()
        let n = try store.write {
            try store.createMany("Person", (2...5).map { ["id": .int(Int64($0)), "name": .string("P\($0)")] })
        }
        XCTAssertEqual(n, 4)
        XCTAssertEqual(try store.intKeys("Person"), [1, 2, 3, 4, 5])
    }

    func testCreateManyIsAllOrNothing() throws {
        let store = try makeStore()
        try store.beginWrite()
        try store.create("Person", ["id": .int(10), "name": .string("kept: before the call")])
        let objects: [Document] = [
            ["id": .int(20), "name": .string("first")],
            ["id": .int(21), "name": .string("second")],
            ["id": .int(22), "name": .int(5)],
            ["id": .int(23), "name": .string("fourth")],
        ]
        assertAtollError(try store.createMany("Person", objects), .typeMismatch,
                         "object 2: property 'Person.name' is string; got int 5")
        XCTAssertEqual(try store.intKeys("Person"), [1, 10], "nothing of the failed call is kept")
        try store.commit()
        XCTAssertEqual(try store.intKeys("Person"), [1, 10])
        let last = try lastInstructions(store)
        XCTAssertEqual(last.map(\.op), [.create, .set, .set], "only the create of object 10 was recorded")
        XCTAssertEqual(last.first?.primaryKey, .int(10))
    }

    func testCreateManyDuplicateInTheMiddle() throws {
        let store = try makeStore()
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.createMany("Person", [["id": .int(5)], ["id": .int(6)], ["id": .int(5)]]),
                         .duplicatePrimaryKey, "object 2:", "primary key 5")
        XCTAssertEqual(try store.intKeys("Person"), [1])
        // The transaction is still usable.
        try store.create("Person", ["id": .int(5)])
        XCTAssertEqual(try store.intKeys("Person"), [1, 5])
    }

    func testCreateManyOutsideATransaction() throws {
        let store = try makeStore()
        assertAtollError(try store.createMany("Person", [["id": .int(9)]]), .notInWrite, "createMany")
    }
}
