import AtollJSON
import CJansson
import AtollProtocol
@testable import AtollServer
import AtollStore
import AtollTestSupport
import XCTest

/// The server's integration function alone (no network): each merge rule (docs/protocol.md), and every pair
/// of concurrent instruction kinds converging whatever order they arrive in.
final class IntegratorTests: XCTestCase {
    static let schemaJSON = """
    [{"name": "Task", "primaryKey": "_id", "properties": {"_id": "string", "name": "string?", "done": "bool",
      "owner": "string?", "count": "int", "tags": "string[]", "labels": "string<>", "attrs": "string{}", "address": "Address?",
      "assignee": "Person?"}},
     {"name": "Address", "embedded": true, "properties": {"city": "string?", "zip": "string?"}},
     {"name": "Person", "primaryKey": "_id", "properties": {"_id": "string", "name": "string?"}}]
    """

    func makeStore() throws -> Store {
        let json = try EJSON.load(Self.schemaJSON)
        defer { json_decref(json) }
        let store = try Store(Configuration(inMemory: true, schema: try SchemaJSON.schema(json)))
        try ServerSyncTables.create(store)
        return store
    }

    func clock(_ ms: Int64, _ node: Int64 = 1) -> Clock { Clock(milliseconds: ms, counter: 0, node: node) }
    func el(_ ms: Int64, _ node: Int64, _ n: Int64 = 0) -> ElementID { ElementID(clock(ms, node), n) }

    let key = Value.string("t1")

    func ins(_ op: SyncOp, _ path: [String] = [], _ value: Value? = nil, element: ElementID? = nil, after: ElementID? = nil,
             cls: String = "Task", key: Value = .string("t1")) -> SyncInstruction {
        SyncInstruction(op, cls, key, path: path.map { .key($0) }, value: value, element: element, after: after)
    }

    @discardableResult
    func integrate(_ store: Store, _ clock: Clock, _ instructions: [SyncInstruction],
                   mayWrite: @escaping (ObjectID, Document?) throws -> String? = { _, _ in nil }) throws -> Integration {
        try store.write {
            try Integrator(store: store, mayWriteObject: mayWrite).integrate(SyncChangeset(clock: clock, instructions: instructions))
        }
    }

    /// The task, with its set's elements sorted (a set's order is the order elements arrived in,
    /// which replicas need not share).
    func task(_ store: Store) throws -> Document? {
        guard var doc = try store.object("Task", primaryKey: key) else { return nil }
        if case .list(let labels)? = doc["labels"] {
            doc["labels"] = .list(labels.sorted { "\($0)" < "\($1)" })
        }
        return doc
    }

    /// Creates t1 at clock 1 with a name, tags a, b and a label.
    func seed(_ store: Store) throws {
        try integrate(store, clock(1, 9), [
            ins(.create), ins(.set, ["name"], .string("seed")),
            ins(.listInsert, ["tags"], .string("a"), element: el(1, 9, 0)),
            ins(.listInsert, ["tags"], .string("b"), element: el(1, 9, 1), after: el(1, 9, 0)),
            ins(.setInsert, ["labels"], .string("x")),
            ins(.dictionarySet, ["attrs", "k"], .string("v0")),
        ])
    }

    // MARK: - Objects

    /// Two primary keys whose strings are canonically equivalent but not the same bytes (a
    /// precomposed "é", and "e" with a combining accent) are two objects, in SQLite and in
    /// Realm: the integration keeps their states apart.
    func testCanonicallyEquivalentKeysAreTwoObjects() throws {
        let store = try makeStore()
        let composed = Value.string("caf\u{E9}"), decomposed = Value.string("cafe\u{301}")
        try integrate(store, clock(1, 1), [ins(.create, key: composed), ins(.set, ["name"], .string("one"), key: composed),
                                           ins(.create, key: decomposed), ins(.set, ["name"], .string("two"), key: decomposed)])
        try integrate(store, clock(2, 2), [ins(.set, ["count"], .int(7), key: decomposed)])
        XCTAssertEqual(try store.object("Task", primaryKey: composed)?["name"], .string("one"))
        XCTAssertEqual(try store.object("Task", primaryKey: composed)?["count"], .int(0))
        XCTAssertEqual(try store.object("Task", primaryKey: decomposed)?["name"], .string("two"))
        XCTAssertEqual(try store.object("Task", primaryKey: decomposed)?["count"], .int(7))
        XCTAssertNotEqual(composed, decomposed)
        XCTAssertEqual(Set([composed, decomposed, composed]).count, 2)
    }

    func testCreateMergesAndEraseWins() throws {
        let store = try makeStore()
        let first = try integrate(store, clock(10), [ins(.create), ins(.set, ["name"], .string("A"))])
        XCTAssertEqual(first.effects.map(\.op), [.create, .set])
        // The same key created by another client: the creates merge, the later field write wins;
        // the object travels whole (a newer create gives every field it does not set its default).
        let second = try integrate(store, clock(12, 2), [ins(.create), ins(.set, ["name"], .string("B"))])
        XCTAssertEqual(second.effects.map(\.op), [.upsert])
        XCTAssertEqual(second.effects.first?.object?["name"], .string("B"))
        XCTAssertEqual(second.corrections, [ObjectID("Task", key)])
        XCTAssertEqual(try task(store)?["name"], .string("B"))
        // A delete wins over a concurrent write that arrives after it (even with a later clock).
        try integrate(store, clock(20, 3), [ins(.erase)])
        let late = try integrate(store, clock(25, 2), [ins(.set, ["name"], .string("late"))])
        XCTAssertTrue(late.effects.isEmpty)
        XCTAssertNil(try task(store))
        // A create older than the erase stays out; a newer one brings the object back.
        XCTAssertTrue(try integrate(store, clock(15, 4), [ins(.create)]).effects.isEmpty)
        XCTAssertNil(try task(store))
        // It comes back whole: writes kept with it while it was erased (the late name, newer than
        // the erase) come back too.
        let back = try integrate(store, clock(30, 4), [ins(.create)])
        XCTAssertEqual(back.effects.map(\.op), [.upsert])
        XCTAssertEqual(back.effects.first?.erasedAt, clock(20, 3))
        XCTAssertEqual(try task(store)?["name"], .null, "the create at 30 is newer than the kept write at 25: its default wins")
    }

    func testWritesNewerThanAnEraseComeBackWithTheObject() throws {
        let store = try makeStore()
        try integrate(store, clock(10), [ins(.create), ins(.set, ["name"], .string("A"))])
        try integrate(store, clock(20), [ins(.erase)])
        // A write by a client that had not seen the erase, newer than it: kept with the object.
        let kept = try integrate(store, clock(40, 2), [ins(.set, ["name"], .string("newer")), ins(.addInteger, ["count"], .int(3))])
        XCTAssertTrue(kept.effects.isEmpty)
        XCTAssertEqual(kept.corrections, [ObjectID("Task", key)])
        XCTAssertNil(try task(store))
        // A create older than the write brings the object back with it.
        try integrate(store, clock(30, 3), [ins(.create)])
        XCTAssertEqual(try task(store)?["name"], .string("newer"))
        XCTAssertEqual(try task(store)?["count"], .int(3))
    }

    func testEraseOlderThanARevivingCreateIsDropped() throws {
        let store = try makeStore()
        try integrate(store, clock(10), [ins(.create)])
        try integrate(store, clock(20), [ins(.erase)])
        try integrate(store, clock(30), [ins(.create)])
        // An erase from a client that had not seen the re-create, older than it: the object stays,
        // and travels whole with the erase's clock (writes older than it are gone everywhere).
        let late = try integrate(store, clock(25, 2), [ins(.erase)])
        XCTAssertEqual(late.effects.map(\.op), [.upsert])
        XCTAssertEqual(late.effects.first?.erasedAt, clock(25, 2))
        XCTAssertNotNil(try task(store))
    }

    // MARK: - Fields

    func testFieldLastWriterWinsByClockNotArrival() throws {
        let store = try makeStore()
        try seed(store)
        try integrate(store, clock(100, 1), [ins(.set, ["name"], .string("this morning"))])
        // Written offline last week, arriving now: loses.
        let old = try integrate(store, clock(50, 2), [ins(.set, ["name"], .string("last week"))])
        XCTAssertTrue(old.effects.isEmpty)
        XCTAssertEqual(try task(store)?["name"], .string("this morning"))
        // Another field of the same object is independent.
        try integrate(store, clock(60, 2), [ins(.set, ["done"], .bool(true))])
        XCTAssertEqual(try task(store)?["done"], .bool(true))
    }

    func testEmbeddedPaths() throws {
        let store = try makeStore()
        try seed(store)
        try integrate(store, clock(10), [ins(.set, ["address"], .object(["city": .string("Oslo"), "zip": .string("0150")]))])
        try integrate(store, clock(12), [SyncInstruction(.set, "Task", key, path: [.key("address"), .key("city")], value: .string("Bergen"))])
        guard case .object(let a)? = try task(store)?["address"] else { return XCTFail("no address") }
        XCTAssertEqual(a["city"], .string("Bergen"))
        XCTAssertEqual(a["zip"], .string("0150"))
        // A write into the embedded object older than the whole object's write loses.
        let older = try integrate(store, clock(9, 2), [SyncInstruction(.set, "Task", key, path: [.key("address"), .key("zip")], value: .string("9999"))])
        XCTAssertTrue(older.effects.isEmpty)
        // A newer write of the whole object replaces the field writes inside it.
        try integrate(store, clock(20), [ins(.set, ["address"], .object(["city": .string("Tromsø")]))])
        guard case .object(let b)? = try task(store)?["address"] else { return XCTFail("no address") }
        XCTAssertEqual(b["city"], .string("Tromsø"))
        XCTAssertEqual(b["zip"], .null)
    }

    // MARK: - Lists

    func tags(_ store: Store) throws -> [Value] {
        guard case .list(let items)? = try task(store)?["tags"] else { return [] }
        return items
    }

    func testConcurrentListInsertsAllSurviveInIdentityOrder() throws {
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0]] {
            let store = try makeStore()
            try seed(store)
            // Three clients insert after "a" at once.
            let uploads: [(Clock, SyncInstruction)] = [
                (clock(10, 1), ins(.listInsert, ["tags"], .string("one"), element: el(10, 1), after: el(1, 9, 0))),
                (clock(10, 2), ins(.listInsert, ["tags"], .string("two"), element: el(10, 2), after: el(1, 9, 0))),
                (clock(11, 3), ins(.listInsert, ["tags"], .string("three"), element: el(11, 3), after: el(1, 9, 0))),
            ]
            for i in order { try integrate(store, uploads[i].0, [uploads[i].1]) }
            XCTAssertEqual(try tags(store), ["a", "three", "two", "one", "b"].map { .string($0) }, "arrival order \(order)")
        }
    }

    func testListEraseAndSetAddressElements() throws {
        let store = try makeStore()
        try seed(store)
        // One client erases "a" while another inserts after it: the insert still finds its place.
        try integrate(store, clock(10, 1), [ins(.listErase, ["tags"], element: el(1, 9, 0))])
        try integrate(store, clock(9, 2), [ins(.listInsert, ["tags"], .string("after-a"), element: el(9, 2), after: el(1, 9, 0))])
        XCTAssertEqual(try tags(store), [.string("after-a"), .string("b")])
        // Erasing it again does nothing; a set of an erased element does nothing.
        XCTAssertTrue(try integrate(store, clock(11, 3), [ins(.listErase, ["tags"], element: el(1, 9, 0))]).effects.isEmpty)
        XCTAssertTrue(try integrate(store, clock(12, 3), [ins(.listSet, ["tags"], .string("z"), element: el(1, 9, 0))]).effects.isEmpty)
        // Sets of one element: the later clock wins, whatever the arrival order.
        try integrate(store, clock(20, 1), [ins(.listSet, ["tags"], .string("B20"), element: el(1, 9, 1))])
        try integrate(store, clock(15, 2), [ins(.listSet, ["tags"], .string("B15"), element: el(1, 9, 1))])
        XCTAssertEqual(try tags(store), [.string("after-a"), .string("B20")])
        // A clear erases what it saw (older elements), not a newer concurrent insert.
        try integrate(store, clock(40, 2), [ins(.listInsert, ["tags"], .string("new"), element: el(40, 2), after: nil)])
        try integrate(store, clock(30, 1), [ins(.listClear, ["tags"])])
        XCTAssertEqual(try tags(store), [.string("new")])
        // A duplicate insert (a re-sent upload) is not applied twice.
        XCTAssertTrue(try integrate(store, clock(40, 2), [ins(.listInsert, ["tags"], .string("new"), element: el(40, 2), after: nil)]).effects.isEmpty)
    }

    // MARK: - Sets and dictionaries

    func testSetsMergeAndDictionariesArePerKey() throws {
        let store = try makeStore()
        try seed(store)
        try integrate(store, clock(10, 1), [ins(.setInsert, ["labels"], .string("y"))])
        try integrate(store, clock(10, 2), [ins(.setInsert, ["labels"], .string("z"))])
        // A remove older than the add it races loses; a newer one wins; equal clocks: the add wins.
        XCTAssertTrue(try integrate(store, clock(5, 3), [ins(.setErase, ["labels"], .string("y"))]).effects.isEmpty)
        try integrate(store, clock(12, 3), [ins(.setErase, ["labels"], .string("z"))])
        XCTAssertTrue(try integrate(store, clock(12, 3), [ins(.setErase, ["labels"], .string("x"))]).effects.count == 1)
        XCTAssertEqual(try integrate(store, clock(12, 3), [ins(.setInsert, ["labels"], .string("x"))]).effects.count, 1)
        guard case .list(let labels)? = try task(store)?["labels"] else { return XCTFail("no labels") }
        XCTAssertEqual(Set(labels), [.string("x"), .string("y")])
        // A clear keeps a newer concurrent add.
        try integrate(store, clock(50, 1), [ins(.setInsert, ["labels"], .string("w"))])
        try integrate(store, clock(40, 2), [ins(.setClear, ["labels"])])
        XCTAssertEqual(try task(store)?["labels"], .list([.string("w")]))

        try integrate(store, clock(20, 1), [ins(.dictionarySet, ["attrs", "k"], .string("v20"))])
        try integrate(store, clock(15, 2), [ins(.dictionarySet, ["attrs", "k"], .string("v15"))])
        try integrate(store, clock(15, 2), [ins(.dictionarySet, ["attrs", "j"], .string("j15"))])
        XCTAssertEqual(try task(store)?["attrs"], .object(["j": .string("j15"), "k": .string("v20")]))
        XCTAssertTrue(try integrate(store, clock(18, 3), [ins(.dictionaryErase, ["attrs", "k"])]).effects.isEmpty)
        try integrate(store, clock(30, 3), [ins(.dictionaryClear, ["attrs"])])
        XCTAssertEqual(try task(store)?["attrs"], .object([:]))
    }

    // MARK: - Counters

    func testCountersAddUpAndANewerSetKeepsNewerAdds() throws {
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 3, 0, 2]] {
            let store = try makeStore()
            try seed(store)
            let uploads: [(Clock, SyncInstruction)] = [
                (clock(10, 1), ins(.addInteger, ["count"], .int(5))),
                (clock(11, 2), ins(.addInteger, ["count"], .int(7))),
                (clock(20, 3), ins(.set, ["count"], .int(100))),        // absorbs the adds before it
                (clock(30, 4), ins(.addInteger, ["count"], .int(1))),   // stays on top of the set
            ]
            for i in order { try integrate(store, uploads[i].0, [uploads[i].1]) }
            XCTAssertEqual(try task(store)?["count"], .int(101), "arrival order \(order)")
        }
        let store = try makeStore()
        try seed(store)
        try integrate(store, clock(10, 1), [ins(.addInteger, ["count"], .int(5))])
        try integrate(store, clock(10, 2), [ins(.addInteger, ["count"], .int(-2))])
        XCTAssertEqual(try task(store)?["count"], .int(3))
        // Not an int property: refused, nothing stored.
        let bad = try integrate(store, clock(11, 1), [ins(.addInteger, ["name"], .int(1))])
        XCTAssertEqual(bad.rejected.count, 1)
    }

    // MARK: - Every pair of concurrent instruction kinds

    /// One instruction of each kind, as a client that had seen the seed state would write it.
    func kinds(node: Int64, ms: Int64) -> [(String, [SyncInstruction])] {
        let v = Value.string("n\(node)")
        return [
            ("create", [ins(.create)]),
            ("erase", [ins(.erase)]),
            ("set", [ins(.set, ["name"], v)]),
            ("setEmbedded", [SyncInstruction(.set, "Task", key, path: [.key("address")], value: .object(["city": v]))]),
            ("listInsert", [ins(.listInsert, ["tags"], v, element: el(ms, node), after: el(1, 9, 0))]),
            ("listInsertFront", [ins(.listInsert, ["tags"], v, element: el(ms, node), after: nil)]),
            ("listErase", [ins(.listErase, ["tags"], element: el(1, 9, 0))]),
            ("listSet", [ins(.listSet, ["tags"], v, element: el(1, 9, 1))]),
            ("listClear", [ins(.listClear, ["tags"])]),
            ("setInsert", [ins(.setInsert, ["labels"], .string("x"))]),
            ("setInsertNew", [ins(.setInsert, ["labels"], v)]),
            ("setErase", [ins(.setErase, ["labels"], .string("x"))]),
            ("setClear", [ins(.setClear, ["labels"])]),
            ("dictionarySet", [ins(.dictionarySet, ["attrs", "k"], v)]),
            ("dictionaryErase", [ins(.dictionaryErase, ["attrs", "k"])]),
            ("dictionaryClear", [ins(.dictionaryClear, ["attrs"])]),
            ("addInteger", [ins(.addInteger, ["count"], .int(node))]),
            ("setCount", [ins(.set, ["count"], .int(100 * node))]),
        ]
    }

    func testEveryPairOfConcurrentKindsConvergesInEitherOrder() throws {
        let a = kinds(node: 1, ms: 100)
        let b = kinds(node: 2, ms: 100)
        var pairs = 0
        for (nameA, insA) in a {
            for (nameB, insB) in b {
                let one = try makeStore(), two = try makeStore()
                try seed(one)
                try seed(two)
                let ca = clock(100, 1), cb = clock(100, 2)
                try integrate(one, ca, insA)
                try integrate(one, cb, insB)
                try integrate(two, cb, insB)
                try integrate(two, ca, insA)
                XCTAssertEqual(try task(one), try task(two), "\(nameA) ∥ \(nameB) diverged")
                pairs += 1
            }
        }
        XCTAssertEqual(pairs, 324)
    }

    func testTriplesConverge() throws {
        // Three clients, every kind for the first two and a fixed third (a set with the newest
        // clock), in all six orders.
        let a = kinds(node: 1, ms: 100), b = kinds(node: 2, ms: 100)
        let third = (clock(101, 3), [ins(.set, ["name"], .string("n3")), ins(.listInsert, ["tags"], .string("n3"), element: el(101, 3), after: el(1, 9, 1))])
        let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
        for (nameA, insA) in a {
            for (nameB, insB) in b {
                var results = [Document?]()
                for order in orders {
                    let store = try makeStore()
                    try seed(store)
                    let uploads = [(clock(100, 1), insA), (clock(100, 2), insB), third]
                    for i in order { try integrate(store, uploads[i].0, uploads[i].1) }
                    results.append(try task(store))
                }
                XCTAssertEqual(Set(results.map { "\(String(describing: $0))" }).count, 1, "\(nameA) ∥ \(nameB) ∥ set diverged")
            }
        }
    }

    /// Random triples of concurrent instructions, each kind from three clients with random
    /// clocks (ties broken by the node), integrated in all six orders, must converge.
    /// `ATOLL_TRIPLES` sets how many (default 100; `all` runs every triple of kinds,
    /// 18 x 18 x 18, for `make stress`), `ATOLL_TRIPLES_SEED` the seed.
    func testRandomTriplesOfConcurrentKindsConverge() throws {
        let env = ProcessInfo.processInfo.environment
        var random = SplitMix64(seed: UInt64(env["ATOLL_TRIPLES_SEED"] ?? "") ?? 7)
        let count = kinds(node: 1, ms: 100).count
        var triples = [(Int, Int, Int)]()
        if env["ATOLL_TRIPLES"] == "all" {
            for i in 0..<count { for j in 0..<count { for k in 0..<count { triples.append((i, j, k)) } } }
        } else {
            for _ in 0..<(Int(env["ATOLL_TRIPLES"] ?? "") ?? 100) {
                triples.append((Int.random(in: 0..<count, using: &random), Int.random(in: 0..<count, using: &random),
                                Int.random(in: 0..<count, using: &random)))
            }
        }
        let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
        var checked = 0, diverged = 0
        for (i, j, k) in triples {
            let ms = (0..<3).map { _ in Int64.random(in: 100...102, using: &random) }
            let picks = [(i, 1), (j, 2), (k, 3)].enumerated().map { n, pick in
                let (name, instructions) = kinds(node: Int64(pick.1), ms: ms[n])[pick.0]
                return (name: name, clock: clock(ms[n], Int64(pick.1)), instructions: instructions)
            }
            var results = Set<String>()
            for order in orders {
                let store = try makeStore()
                try seed(store)
                for n in order { try integrate(store, picks[n].clock, picks[n].instructions) }
                results.insert(String(describing: try task(store)))
            }
            if results.count != 1 { diverged += 1 }
            XCTAssertEqual(results.count, 1, picks.map { "\($0.name)@\($0.clock)" }.joined(separator: " ∥ ") + " diverged:\n"
                           + results.sorted().joined(separator: "\n"))
            checked += 1
        }
        XCTAssertEqual(checked, triples.count)
        stressReport(suite: "triples", rounds: checked, operations: checked * orders.count * 3, faults: 0, lost: diverged,
                     figures: "\(checked) triples of \(count) kinds in 6 orders")
    }

    // MARK: - Rules and bad input

    func testRefusedWritesAreNeverStored() throws {
        let store = try makeStore()
        try seed(store)
        let before = try task(store)
        // Only objects owned by "me" may be written.
        let rule: (ObjectID, Document?) throws -> String? = { _, doc in
            doc?["owner"] == .string("me") ? nil : "owner_id must be the user"
        }
        let result = try integrate(store, clock(10), [
            ins(.set, ["name"], .string("hijack")),
            ins(.create, key: .string("mine")), ins(.set, ["owner"], .string("me"), key: .string("mine")),
            ins(.create, key: .string("theirs")), ins(.set, ["owner"], .string("them"), key: .string("theirs")),
        ], mayWrite: rule)
        XCTAssertEqual(result.rejected.map(\.primaryKey), [.string("t1"), .string("theirs")])
        XCTAssertEqual(result.rejected.first?.reason, "owner_id must be the user")
        XCTAssertEqual(try task(store), before)
        XCTAssertNil(try store.object("Task", primaryKey: .string("theirs")))
        XCTAssertEqual(try store.object("Task", primaryKey: .string("mine"))?["owner"], .string("me"))
        XCTAssertEqual(result.effects.map(\.primaryKey), [.string("mine"), .string("mine")])
    }

    /// A newer create gives the members the older create wrote a clock of their own (the older
    /// create's): one canonically equivalent to a member with its own row is not taken for it.
    func testANewerCreateKeepsTheOlderCreatesMemberBesideALookalike() throws {
        let store = try makeStore()
        let composed = "\u{E9}", decomposed = "e\u{301}"
        try integrate(store, clock(1, 1), [ins(.create), ins(.setInsert, ["labels"], .string(decomposed))])
        try integrate(store, clock(2, 2), [ins(.setInsert, ["labels"], .string(composed))])
        try integrate(store, clock(5, 3), [ins(.create)])
        // An erase of the older create's member, newer than that create, older than the newer one.
        try integrate(store, clock(3, 4), [ins(.setErase, ["labels"], .string(decomposed))])
        XCTAssertEqual(try task(store)?["labels"], .list([.string(composed)]))
    }

    /// A write rule decides each of two canonically equivalent keys on its own: allowing one
    /// must not let the other through, nor refusing one refuse the other.
    func testWriteRulesTellCanonicallyEquivalentKeysApart() throws {
        let store = try makeStore()
        let mine = Value.string("caf\u{E9}"), theirs = Value.string("cafe\u{301}")
        try integrate(store, clock(1, 1), [ins(.create, key: mine), ins(.set, ["owner"], .string("me"), key: mine),
                                           ins(.create, key: theirs), ins(.set, ["owner"], .string("them"), key: theirs)])
        let rule: (ObjectID, Document?) throws -> String? = { _, doc in
            doc == nil || doc?["owner"] == .string("me") ? nil : "owner_id must be the user"
        }
        let result = try integrate(store, clock(2, 2), [ins(.set, ["name"], .string("mine now"), key: mine),
                                                        ins(.set, ["name"], .string("hijack"), key: theirs)], mayWrite: rule)
        XCTAssertEqual(result.rejected.map(\.primaryKey), [theirs])
        XCTAssertEqual(try store.object("Task", primaryKey: mine)?["name"], .string("mine now"))
        XCTAssertEqual(try store.object("Task", primaryKey: theirs)?["name"], .null)
    }

    /// Set members and dictionary keys that are canonically equivalent are two, in one changeset
    /// (which is normalised first) and across changesets.
    func testCanonicallyEquivalentMembersAndKeysAreTwo() throws {
        let store = try makeStore()
        let composed = "\u{E9}", decomposed = "e\u{301}"
        try integrate(store, clock(1, 1), [ins(.create), ins(.setInsert, ["labels"], .string(composed)),
                                           ins(.setInsert, ["labels"], .string(decomposed)),
                                           ins(.dictionarySet, ["attrs", composed], .string("A")),
                                           ins(.dictionarySet, ["attrs", decomposed], .string("B"))])
        XCTAssertEqual(try task(store)?["labels"]?.listValue?.count, 2)
        XCTAssertEqual(try task(store)?["attrs"]?.documentValue?.count, 2)
        // Removing one leaves the other, and a create older than a member's add keeps it.
        try integrate(store, clock(3, 2), [ins(.setErase, ["labels"], .string(decomposed)),
                                           ins(.dictionaryErase, ["attrs", composed])])
        try integrate(store, clock(2, 3), [ins(.create), ins(.setInsert, ["labels"], .string(decomposed))])
        XCTAssertEqual(try task(store)?["labels"], .list([.string(composed)]))
        XCTAssertEqual(try task(store)?["attrs"], .object([decomposed: .string("B")]))
    }

    func testInstructionsThatCannotApplyAreRefusedAlone() throws {
        let store = try makeStore()
        let result = try integrate(store, clock(10), [
            ins(.create), ins(.set, ["name"], .string("fine")),
            ins(.create, cls: "Nope", key: .int(1)),
            ins(.create, key: .string("t2")), ins(.set, ["done"], .string("not a bool"), key: .string("t2")),
        ])
        XCTAssertEqual(Set(result.rejected.map(\.primaryKey)), [.int(1), .string("t2")])
        XCTAssertTrue(result.rejected.allSatisfy { $0.reason.contains("could not be applied") })
        XCTAssertEqual(try task(store)?["name"], .string("fine"))
        XCTAssertNil(try store.object("Task", primaryKey: .string("t2")))
    }

    func testAWriteToThePrimaryKeyIsRefusedAndWritesNoOtherObject() throws {
        let store = try makeStore()
        _ = try integrate(store, clock(10), [ins(.create, key: .string("mine"))])
        // On a new object (as a folded create or a group would bring it) and on one that exists.
        let result = try integrate(store, clock(11), [
            ins(.create), ins(.set, ["_id"], .string("other")),
            ins(.set, ["_id"], .string("another"), key: .string("mine")),
        ])
        XCTAssertEqual(Set(result.rejected.map(\.primaryKey)), [.string("t1"), .string("mine")])
        XCTAssertTrue(result.rejected.allSatisfy { $0.reason.contains("primary key") }, "\(result.rejected)")
        XCTAssertNil(try task(store))
        XCTAssertNotNil(try store.object("Task", primaryKey: .string("mine")))
        for other in ["other", "another"] { XCTAssertNil(try store.object("Task", primaryKey: .string(other)), other) }
    }

    func testAnUploadedUpsertIsRefusedAsTheServersOwn() throws {
        let store = try makeStore()
        var upsert = ins(.upsert, key: .string("t2"))
        upsert.object = ["_id": .string("t2"), "name": .string("forged")]
        upsert.clock = clock(10)
        let result = try integrate(store, clock(10), [ins(.create), upsert, ins(.evict)])
        XCTAssertEqual(Set(result.rejected.map(\.primaryKey)), [.string("t2"), .string("t1")])
        XCTAssertTrue(result.rejected.allSatisfy { $0.reason.contains("is sent by the server only") }, "\(result.rejected)")
        XCTAssertNil(try store.object("Task", primaryKey: .string("t2")))
        XCTAssertNil(try task(store), "t1's create went with its refused evict")
    }

    func testWireRoundTrip() throws {
        let cs = SyncChangeset(clientVersion: 3, lastServerVersion: 7, clock: clock(5, 4), instructions: [
            ins(.create), ins(.set, ["name"], .string("x")),
            ins(.listInsert, ["tags"], .string("t"), element: el(5, 4, 2), after: nil),
            ins(.listInsert, ["tags"], .string("u"), element: el(5, 4, 3), after: el(5, 4, 2)),
            ins(.dictionarySet, ["attrs", "k"], .int(3)),
        ])
        let text = Wire.encode(cs.wireValue)
        let back = try SyncChangeset(wire: try EJSON.parse(text))
        XCTAssertEqual(back, cs)
        for bad in ["{}", #"{"clock": [1, 2]}"#, #"{"clock": [1,0,1], "instructions": [{"op": "fly", "class": "A", "primaryKey": 1}]}"#,
                    #"{"clock": [1,0,1], "instructions": [{"op": "listInsert", "class": "A", "primaryKey": 1, "path": ["x"], "value": 1}]}"#,
                    #"{"clock": [1,0,1], "instructions": [{"op": "set", "class": "A", "primaryKey": 1}]}"#] {
            XCTAssertThrowsError(try SyncChangeset(wire: try EJSON.parse(bad)), bad)
        }
    }

    // MARK: - Encoded effects (the history's text and the downloads)

    func testEffectsAreGroupedByObjectAndEncodedInPiecesAndAlone() throws {
        func set(_ pk: Int64, _ name: String, _ value: Value) -> SyncInstruction {
            SyncInstruction(.set, "Task", .int(pk), path: [.key(name)], value: value)
        }
        let t1 = [SyncInstruction(.create, "Task", .int(1)), set(1, "name", .string("a"))]
        let t2 = [set(2, "name", .string("b"))]
        let t1Later = [set(1, "done", .bool(true))]
        let news = (3...8).flatMap { [SyncInstruction(.create, "Task", .int($0)), set($0, "name", .string("n\($0)"))] }
        let effects = t1 + t2 + t1Later + news     // the first object's instructions interleaved with the second's
        let byObject = t1 + t1Later + t2 + news
        let clock = Clock(milliseconds: 1_764_489_600_000, node: 3)
        func decoded(_ instructionTexts: [String]) throws -> [SyncInstruction] {
            try SyncChangeset(wire: EJSON.parse(#"{"clock": [1, 0, 1], "instructions": ["# + instructionTexts.joined(separator: ",") + "]}"))
                .instructions
        }
        for pieceBytes in [1 << 18, 60] {
            let encoded = ServerApp.EncodedEffects(effects, serverVersion: 7, clock: clock, pieceBytes: pieceBytes)
            XCTAssertEqual(encoded.order.map(\.primaryKey), (1...8).map { .int(Int64($0)) })
            XCTAssertEqual((0..<8).map { encoded.createdObject(at: $0) }, [true, false, true, true, true, true, true, true])
            XCTAssertEqual(try decoded(encoded.texts(ofObjectAt: 0)), t1 + t1Later)
            XCTAssertEqual(try decoded(encoded.texts(ofObjectAt: 1)), t2)
            XCTAssertEqual(try decoded(encoded.pieces), byObject)
            let history = try encoded.changeset.decode().changeset
            XCTAssertEqual(history.instructions, byObject)
            XCTAssertEqual(history.serverVersion, 7)
            XCTAssertEqual(encoded.bytes, encoded.pieces.reduce(0) { $0 + $1.utf8.count + 1 })
            if pieceBytes == 60 {
                XCTAssertGreaterThan(encoded.pieces.count, 2, "small pieces: the objects are split among them")
            } else {
                XCTAssertEqual(encoded.pieces.count, 1)
                XCTAssertTrue(encoded.changeset.text.contains(#""op":"creates""#), "the new objects travel as a group")
            }
        }
    }
}

