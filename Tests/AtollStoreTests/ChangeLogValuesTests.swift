import AtollStore
import Foundation
import XCTest

/// What the change log keeps: only what changed, unless the file was asked to keep values
/// (`Configuration.changeLogValues`); and notifications the same either way.
final class ChangeLogValuesTests: XCTestCase {
    static let schema = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            .int("id"), .string("name"), .int("age", optional: true), .list("numbers", .int),
            .link("friend", "Person"), Property(name: "address", type: .object, objectType: "Address"),
        ]),
        ObjectSchema(name: "Address", isEmbedded: true, properties: [.string("city")]),
    ])

    func testAFileKeepsNoValuesUntilAHandleAsks() throws {
        let path = temporaryRealmPath()
        let plain = try open(path, Self.schema)
        XCTAssertFalse(try plain.changeLogKeepsValues())
        try plain.write { try plain.create("Person", ["id": .int(1), "name": .string("Ann")]) }
        assertAtollError(try plain.changes(after: 0), .invalidArgument, "change-log entry 1 was recorded without values")

        // Another handle asks: from the next commit on, every handle records values.
        let asking = try open(path, nil, changeLogValues: true)
        XCTAssertFalse(try plain.changeLogKeepsValues(), "a handle reads its snapshot")
        // A write reads the newest state: this one keeps values without a refresh first.
        try plain.write { try plain.create("Person", ["id": .int(1), "name": .string("Bo")], update: .modified) }
        XCTAssertTrue(try plain.changeLogKeepsValues())
        try asking.refresh()
        XCTAssertEqual(try asking.changes(after: 1).first?.instructions,
                       [Instruction(.set, "Person", .int(1), path: [.key("name")], value: .string("Bo"))])
        assertAtollError(try asking.changes(after: 0), .invalidArgument, "entry 1")
        XCTAssertEqual(try asking.changes(after: 0, skipping: [1]).map(\.version), [1, 2], "a skipped entry is not read")
        asking.close()
        plain.close()

        // A handle that does not ask does not undo it.
        let again = try open(path, nil)
        XCTAssertTrue(try again.changeLogKeepsValues())
        try again.write { try again.delete("Person", primaryKey: .int(1)) }
        XCTAssertEqual(try again.changes(after: 2).first?.instructions, [Instruction(.erase, "Person", .int(1))])
    }

    func testAReadOnlyHandleCannotTurnValuesOn() throws {
        let path = temporaryRealmPath()
        try open(path, Self.schema).close()
        assertAtollError(try open(path, nil, readOnly: true, changeLogValues: true), .readOnly, "changeLogValues")
        try open(path, nil, changeLogValues: true).close()
        XCTAssertTrue(try open(path, nil, readOnly: true, changeLogValues: true).changeLogKeepsValues())
    }

    func testTheLogWithoutValuesCostsAFewBytesPerObject() throws {
        let count = 10_000
        var sizes = [Int64]()
        for values in [false, true] {
            let store = try openTemporaryStore(Self.schema, changeLogValues: values)
            try store.write {
                try store.createMany("Person", (0..<count).map {
                    ["id": .int(Int64($0)), "name": .string("person number \($0)"), "age": .int(Int64($0 % 90))]
                })
            }
            sizes.append(try store.statistics().changeLogBytes)
        }
        XCTAssertLessThanOrEqual(sizes[0], Int64(count * 6), "without values: the class, the key, the op")
        XCTAssertGreaterThan(sizes[1], Int64(count * 20), "with values: the name and the age besides")
    }

    /// The same random writes on a file without values and on one with them: every observer
    /// gets the same deliveries (observers read which objects and paths changed, never values).
    func testObserversGetTheSameChangesWithAndWithoutValues() throws {
        struct Observed {
            let store: Store
            let results = NotificationTests.Inbox<ResultsChange>()
            let sorted = NotificationTests.Inbox<ResultsChange>()
            let object = NotificationTests.Inbox<ObjectChange>()
            let list = NotificationTests.Inbox<CollectionChange>()
            var tokens: [NotificationToken] = []
        }
        var sides = [Observed]()
        for values in [false, true] {
            var config = Configuration(path: temporaryRealmPath(), schema: Self.schema, changeLogValues: values)
            config.notificationDelivery = .host
            let store = try Store(config)
            addTeardownBlock { store.close() }
            try store.write {
                for id in 0..<6 as Range<Int64> {
                    try store.create("Person", ["id": .int(id), "name": .string("p\(id)"), "numbers": .list([.int(1), .int(2), .int(3)])])
                }
            }
            var side = Observed(store: store)
            let (results, sorted, object, list) = (side.results, side.sorted, side.object, side.list)
            side.tokens.append(try store.objects("Person").observe { results.add($0) })
            side.tokens.append(try store.objects("Person", where: "age > 20 SORT(name ASC)").observe(keyPaths: ["age", "friend.name"]) { sorted.add($0) })
            side.tokens.append(try store.observeObject("Person", primaryKey: .int(0)) { object.add($0) })
            side.tokens.append(try store.observeCollection("Person", primaryKey: .int(1), property: "numbers") { list.add($0) })
            try store.deliverNotifications()
            sides.append(side)
        }
        defer { for side in sides { side.tokens.forEach { $0.invalidate() } } }

        var rng = SplitMix64(seed: 2026_12_08)
        var delivered = [0, 0, 0, 0]
        for round in 0..<120 {
            var operations = [(Store) throws -> Void]()
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let id = Int64.random(in: 0..<8, using: &rng)
                let other = Int64.random(in: 0..<8, using: &rng)
                let n = Int64.random(in: 0..<100, using: &rng)
                let at = Int.random(in: 0..<4, using: &rng)
                switch Int.random(in: 0..<8, using: &rng) {
                case 0: operations.append { s in _ = try s.create("Person", ["id": .int(id), "name": .string("n\(n)")], update: .modified) }
                case 1: operations.append { s in _ = try s.create("Person", ["id": .int(id), "age": .int(n)], update: .modified) }
                case 2: operations.append { s in try? s.delete("Person", primaryKey: .int(id)) }
                case 3: operations.append { s in _ = try? s.create("Person", ["id": .int(id), "friend": .int(other)], update: .modified) }
                case 4: operations.append { s in _ = try s.create("Person", ["id": .int(id), "address": .object(["city": .string("c\(n)")])], update: .modified) }
                case 5: operations.append { s in
                    let count = try s.value("Person", primaryKey: .int(id), property: "numbers")?.listValue?.count ?? -1
                    if count >= 0 { try s.listInsert("Person", primaryKey: .int(id), property: "numbers", .int(n), at: min(at, count)) }
                }
                case 6: operations.append { s in
                    let count = try s.value("Person", primaryKey: .int(id), property: "numbers")?.listValue?.count ?? 0
                    if count > 0 { try s.listMove("Person", primaryKey: .int(id), property: "numbers", from: at % count, to: (at + 1) % count) }
                }
                default: operations.append { s in
                    let count = try s.value("Person", primaryKey: .int(id), property: "numbers")?.listValue?.count ?? 0
                    if count > 0 { try s.listErase("Person", primaryKey: .int(id), property: "numbers", at: at % count) }
                }
                }
            }
            for side in sides {
                try side.store.write { for operation in operations { try operation(side.store) } }
                try side.store.deliverNotifications()
            }
            let results = sides[0].results.take(), sorted = sides[0].sorted.take()
            let object = sides[0].object.take(), list = sides[0].list.take()
            XCTAssertEqual(results, sides[1].results.take(), "round \(round): results")
            XCTAssertEqual(sorted, sides[1].sorted.take(), "round \(round): sorted with key paths")
            XCTAssertEqual(object, sides[1].object.take(), "round \(round): object")
            XCTAssertEqual(list, sides[1].list.take(), "round \(round): list")
            for (i, n) in [results.count, sorted.count, object.count, list.count].enumerated() { delivered[i] += n }
        }
        // Every kind of observer had changes to compare (the object observer until its object went).
        XCTAssertTrue(delivered.allSatisfy { $0 > 3 }, "deliveries: \(delivered)")
        XCTAssertEqual(try sides[0].store.objects("Person").documents(), try sides[1].store.objects("Person").documents())
    }
}
