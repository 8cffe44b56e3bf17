import AtollStore
import Foundation
import XCTest

/// Element operations on lists, sets and dictionaries: positions, embedded elements, errors
/// that change nothing, their instructions, and the exact list changes observers get from them.
final class CollectionOperationsTests: XCTestCase {
    static let schema = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            .int("id"), .list("numbers", .int), .links("dogs", "Dog"),
            Property(name: "addresses", type: .object, objectType: "Address", collection: .list),
            Property(name: "tags", type: .string, collection: .set),
            Property(name: "pack", type: .object, objectType: "Dog", collection: .set),
            Property(name: "scores", type: .int, collection: .dictionary),
            Property(name: "homes", type: .object, objectType: "Address", collection: .dictionary),
            Property(name: "anything", type: .mixed, collection: .list),
        ]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [.int("id"), .string("name", optional: true)]),
        ObjectSchema(name: "Address", isEmbedded: true, properties: [.string("city")]),
    ])

    func store(changeLogValues: Bool = false) throws -> Store {
        var config = Configuration(path: temporaryRealmPath(), schema: Self.schema, changeLogValues: changeLogValues)
        config.notificationDelivery = .host
        let store = try Store(config)
        addTeardownBlock { store.close() }
        try store.write { try store.create("Person", ["id": .int(1), "numbers": .list([.int(1), .int(2), .int(3)])]) }
        return store
    }

    func numbers(_ store: Store) throws -> [Int64] {
        try store.value("Person", primaryKey: .int(1), property: "numbers")?.listValue?.compactMap(\.intValue) ?? []
    }

    func testListInsertSetEraseMove() throws {
        let store = try store(changeLogValues: true)
        try store.write {
            try store.listInsert("Person", primaryKey: .int(1), property: "numbers", .int(0), at: 0)   // 0 1 2 3
            try store.listInsert("Person", primaryKey: .int(1), property: "numbers", .int(9), at: 4)   // 0 1 2 3 9
            try store.listInsert("Person", primaryKey: .int(1), property: "numbers", .int(5), at: 2)   // 0 1 5 2 3 9
            try store.listSet("Person", primaryKey: .int(1), property: "numbers", .int(50), at: 2)     // 0 1 50 2 3 9
            try store.listErase("Person", primaryKey: .int(1), property: "numbers", at: 0)             // 1 50 2 3 9
            try store.listMove("Person", primaryKey: .int(1), property: "numbers", from: 4, to: 0)     // 9 1 50 2 3
            try store.listMove("Person", primaryKey: .int(1), property: "numbers", from: 1, to: 3)     // 9 50 2 1 3
        }
        XCTAssertEqual(try numbers(store), [9, 50, 2, 1, 3])
        let log = try store.changes(after: 1).flatMap(\.instructions)
        XCTAssertEqual(log.map(\.op), [.listInsert, .listInsert, .listInsert, .listSet, .listErase, .listMove, .listMove])
        XCTAssertEqual(log[5].index, 4)
        XCTAssertEqual(log[5].toIndex, 0)
        XCTAssertEqual(log[3].value, .int(50))
        XCTAssertEqual(try store.objects("Person", where: "numbers[FIRST] == 9 AND numbers.@count == 5").count(), 1)
    }

    func testErrorsChangeNothing() throws {
        let store = try store()
        assertAtollError(try store.listInsert("Person", primaryKey: .int(1), property: "numbers", .int(1), at: 0), .notInWrite)
        try store.beginWrite()
        assertAtollError(try store.listInsert("Person", primaryKey: .int(1), property: "numbers", .int(1), at: 4), .invalidArgument, "out of range", "0...3")
        assertAtollError(try store.listErase("Person", primaryKey: .int(1), property: "numbers", at: -1), .invalidArgument, "out of range")
        assertAtollError(try store.listMove("Person", primaryKey: .int(1), property: "numbers", from: 0, to: 3), .invalidArgument)
        assertAtollError(try store.listInsert("Person", primaryKey: .int(1), property: "numbers", .string("x"), at: 0), .typeMismatch)
        assertAtollError(try store.listInsert("Person", primaryKey: .int(1), property: "tags", .string("x"), at: 0), .invalidArgument, "not a list")
        assertAtollError(try store.listInsert("Person", primaryKey: .int(2), property: "numbers", .int(1), at: 0), .notFound)
        assertAtollError(try store.listInsert("Person", primaryKey: .int(1), property: "nope", .int(1), at: 0), .noSuchProperty)
        assertAtollError(try store.listInsert("Person", primaryKey: .int(1), property: "dogs", .int(7), at: 0), .notFound, "Dog")
        assertAtollError(try store.dictionarySet("Person", primaryKey: .int(1), property: "scores", key: "a.b", .int(1)), .invalidArgument)
        try store.commit()
        XCTAssertEqual(try numbers(store), [1, 2, 3])
        XCTAssertEqual(try store.version(), 1, "nothing was recorded")
        let empty = try store.value("Person", primaryKey: .int(1), property: "dogs")?.listValue
        XCTAssertEqual(empty, [])
        try store.beginWrite()
        assertAtollError(try store.listErase("Person", primaryKey: .int(1), property: "dogs", at: 0), .invalidArgument, "it is empty")
        try store.cancelWrite()
    }

    func testEmbeddedElementsAreOwned() throws {
        let store = try store()
        try store.write {
            try store.listInsert("Person", primaryKey: .int(1), property: "addresses", .object(["city": .string("Oslo")]), at: 0)
            try store.listInsert("Person", primaryKey: .int(1), property: "addresses", .object(["city": .string("Rome")]), at: 1)
            try store.listSet("Person", primaryKey: .int(1), property: "addresses", .object(["city": .string("Bern")]), at: 0)
            try store.dictionarySet("Person", primaryKey: .int(1), property: "homes", key: "h", .object(["city": .string("Kyiv")]))
            try store.dictionarySet("Person", primaryKey: .int(1), property: "homes", key: "h", .object(["city": .string("Lima")]))
        }
        XCTAssertEqual(try store.objects("Address").count(), 3, "replaced embedded objects are gone")
        try store.write {
            try store.listErase("Person", primaryKey: .int(1), property: "addresses", at: 1)
            XCTAssertTrue(try store.dictionaryErase("Person", primaryKey: .int(1), property: "homes", key: "h"))
            XCTAssertFalse(try store.dictionaryErase("Person", primaryKey: .int(1), property: "homes", key: "h"))
        }
        XCTAssertEqual(try store.objects("Address").count(), 1)
        XCTAssertEqual(try store.value("Person", primaryKey: .int(1), property: "addresses"), .list([.object(["city": .string("Bern")])]))
    }

    func testSetsAndDictionariesAndMixed() throws {
        let store = try store(changeLogValues: true)
        try store.write {
            try store.create("Dog", ["id": .int(5)])
            XCTAssertTrue(try store.setInsert("Person", primaryKey: .int(1), property: "tags", .string("a")))
            XCTAssertTrue(try store.setInsert("Person", primaryKey: .int(1), property: "tags", .string("b")))
            XCTAssertFalse(try store.setInsert("Person", primaryKey: .int(1), property: "tags", .string("a")))
            XCTAssertTrue(try store.setErase("Person", primaryKey: .int(1), property: "tags", .string("a")))
            XCTAssertFalse(try store.setErase("Person", primaryKey: .int(1), property: "tags", .string("zz")))
            XCTAssertTrue(try store.setInsert("Person", primaryKey: .int(1), property: "tags", .string("c")))
            try store.dictionarySet("Person", primaryKey: .int(1), property: "scores", key: "x", .int(1))
            try store.dictionarySet("Person", primaryKey: .int(1), property: "scores", key: "x", .int(2))
            try store.listInsert("Person", primaryKey: .int(1), property: "anything", .link(ObjectLink(className: "Dog", primaryKey: .int(5))), at: 0)
            try store.listInsert("Person", primaryKey: .int(1), property: "anything", .list([.int(1), .string("two")]), at: 1)
            try store.listInsert("Person", primaryKey: .int(1), property: "dogs", .object(["id": .int(6), "name": .string("new")]), at: 0)
        }
        XCTAssertEqual(try store.value("Person", primaryKey: .int(1), property: "tags"), .list([.string("b"), .string("c")]))
        XCTAssertEqual(try store.value("Person", primaryKey: .int(1), property: "scores"), .object(["x": .int(2)]))
        XCTAssertEqual(try store.value("Person", primaryKey: .int(1), property: "anything"),
                       .list([.link(ObjectLink(className: "Dog", primaryKey: .int(5))), .list([.int(1), .string("two")])]))
        XCTAssertEqual(try store.object("Dog", primaryKey: .int(6))?["name"], .string("new"), "a linked object given whole is created")
        let ops = try store.changes(after: 1).flatMap(\.instructions).filter { $0.className == "Person" }.map(\.op)
        XCTAssertEqual(ops, [.setInsert, .setInsert, .setErase, .setInsert, .dictionarySet, .dictionarySet, .listInsert, .listInsert, .listInsert])
        try store.beginWrite()
        assertAtollError(try store.listInsert("Person", primaryKey: .int(1), property: "dogs", .object(["id": .int(6)]), at: 0), .duplicatePrimaryKey)
        assertAtollError(try store.dictionaryErase("Person", primaryKey: .int(1), property: "scores", key: "a.b"), .invalidArgument)
        try store.cancelWrite()
        try store.write {
            try store.create("Person", ["id": .int(2), "pack": .list([.int(5)])])
            XCTAssertFalse(try store.setErase("Person", primaryKey: .int(2), property: "pack", .object(["id": .int(9)])))
            XCTAssertTrue(try store.setErase("Person", primaryKey: .int(2), property: "pack", .object(["id": .int(5), "name": .null])))
        }
        XCTAssertNil(try store.object("Dog", primaryKey: .int(9)), "erasing never creates")
    }

    func testListObserversGetTheElementsThatMovedAndWereSet() throws {
        let store = try store()
        let inbox = NotificationTests.Inbox<CollectionChange>()
        let token = try store.observeCollection("Person", primaryKey: .int(1), property: "numbers") { inbox.add($0) }
        defer { token.invalidate() }
        try store.deliverNotifications()
        _ = inbox.take()
        try store.write {
            try store.listSet("Person", primaryKey: .int(1), property: "numbers", .int(2), at: 1)     // 1 2 3, set at 1
            try store.listMove("Person", primaryKey: .int(1), property: "numbers", from: 2, to: 0)    // 3 1 2
            try store.listInsert("Person", primaryKey: .int(1), property: "numbers", .int(7), at: 3)  // 3 1 2 7
            try store.listErase("Person", primaryKey: .int(1), property: "numbers", at: 1)            // 3 2 7
        }
        try store.deliverNotifications()
        let change = try XCTUnwrap(inbox.take().first)
        // old 1 2 3: 1 erased, 3 moved from 2 to 0, 2 set (now at 1), 7 inserted at 2.
        XCTAssertEqual(change.deletions, [0, 2])
        XCTAssertEqual(change.insertions, [0, 2])
        XCTAssertEqual(change.moves, [Move(from: 2, to: 0)])
        XCTAssertEqual(change.modifications, [1], "the element set in place is a modification, not a deletion and insertion")
        XCTAssertEqual(change.deletedKeys, [.int(1)])
        XCTAssertEqual(change.insertedKeys, [.int(7)])
        XCTAssertEqual(change.modifiedKeys, [.int(2)])
    }

    /// Random element operations: each list change, applied to the old list, gives the new one.
    func testRandomListOperationsGiveChangesThatRebuildTheList() throws {
        let store = try store()
        var rng = SplitMix64(seed: 4242)
        let inbox = NotificationTests.Inbox<CollectionChange>()
        let token = try store.observeCollection("Person", primaryKey: .int(1), property: "numbers") { inbox.add($0) }
        defer { token.invalidate() }
        try store.deliverNotifications()
        _ = inbox.take()
        var old = try numbers(store)
        var next: Int64 = 100
        for round in 0..<80 {
            try store.write {
                for _ in 0..<Int.random(in: 1...5, using: &rng) {
                    let count = try numbers(store).count
                    switch Int.random(in: 0..<4, using: &rng) {
                    case 0:
                        next += 1
                        try store.listInsert("Person", primaryKey: .int(1), property: "numbers", .int(next), at: Int.random(in: 0...count, using: &rng))
                    case 1 where count > 0:
                        try store.listErase("Person", primaryKey: .int(1), property: "numbers", at: Int.random(in: 0..<count, using: &rng))
                    case 2 where count > 0:
                        try store.listMove("Person", primaryKey: .int(1), property: "numbers",
                                           from: Int.random(in: 0..<count, using: &rng), to: Int.random(in: 0..<count, using: &rng))
                    case 3 where count > 0:
                        next += 1
                        try store.listSet("Person", primaryKey: .int(1), property: "numbers", .int(next), at: Int.random(in: 0..<count, using: &rng))
                    default:
                        next += 1
                        try store.listInsert("Person", primaryKey: .int(1), property: "numbers", .int(next), at: 0)
                    }
                }
            }
            try store.deliverNotifications()
            let now = try numbers(store)
            var rebuilt = old
            for change in inbox.take() {
                for d in change.deletions.reversed() { rebuilt.remove(at: d) }
                for j in change.insertions { rebuilt.insert(now[j], at: j) }
                for j in change.modifications { rebuilt[j] = now[j] }
            }
            XCTAssertEqual(rebuilt, now, "round \(round)")
            old = now
        }
    }
}
