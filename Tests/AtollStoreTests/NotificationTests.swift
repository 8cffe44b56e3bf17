import AtollStore
import Foundation
import XCTest

/// Change notifications: exact change sets for results, objects, collections and realms, key-path
/// filters, both delivery modes, other handles and other processes, snapshots and pruning.
/// Exactness is checked in host delivery (deliveries happen when the test calls for them); the
/// notifier thread and other processes are checked by waiting for the expected change.
final class NotificationTests: XCTestCase {
    static let schema = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            .int("id"), .string("name"), .int("age"), .link("dog", "Dog"), .links("dogs", "Dog"),
            Property(name: "addresses", type: .object, objectType: "Address", collection: .list),
            Property(name: "tags", type: .string, collection: .set),
            Property(name: "scores", type: .int, collection: .dictionary),
            .list("numbers", .int),
        ]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [
            .int("id"), .string("name"), .int("age"),
            Property(name: "owners", type: .linkingObjects, objectType: "Person", linkOriginProperty: "dogs"),
        ]),
        ObjectSchema(name: "Address", isEmbedded: true, properties: [.string("city"), .string("street")]),
        ObjectSchema(name: "Tag", primaryKey: "name", properties: [.string("name"), .int("weight")]),
    ])

    /// Collects the changes a callback receives (from any thread).
    final class Inbox<T: Sendable>: @unchecked Sendable {
        private let condition = NSCondition()
        private var items: [T] = []
        func add(_ item: T) { condition.lock(); items.append(item); condition.broadcast(); condition.unlock() }
        var all: [T] { condition.lock(); defer { condition.unlock() }; return items }
        /// Takes what arrived; with `waitFor`, first waits (up to 20 s) until that many arrived.
        func take(waitFor count: Int = 0) -> [T] {
            condition.lock()
            defer { condition.unlock() }
            let deadline = Date().addingTimeInterval(20)
            while items.count < count, condition.wait(until: deadline) {}
            let taken = items
            items = []
            return taken
        }
    }

    func hostStore(_ path: String? = nil) throws -> Store {
        var config = Configuration(path: path ?? temporaryRealmPath(), schema: Self.schema)
        config.notificationDelivery = .host
        let store = try Store(config)
        addTeardownBlock { store.close() }
        return store
    }

    func people(_ store: Store, _ ids: ClosedRange<Int64>) throws {
        try store.write {
            for i in ids { try store.create("Person", ["id": .int(i), "name": .string("p\(i)"), "age": .int(i)]) }
        }
    }

    // MARK: - Results

    func testResultsInitialInsertDeleteModifyWithKeys() throws {
        let store = try hostStore()
        try people(store, 1...5)
        let inbox = Inbox<ResultsChange>()
        let token = try store.objects("Person", where: "age >= 2").observe { inbox.add($0) }
        defer { token.invalidate() }
        XCTAssertEqual(inbox.all.count, 0, "nothing is delivered before the host asks")
        try store.deliverNotifications()
        var initial = ResultsChange(initial: true)
        initial.count = 4
        XCTAssertEqual(inbox.take(), [initial])

        try store.write {
            try store.create("Person", ["id": .int(6), "name": .string("p6"), "age": .int(6)])
            try store.delete("Person", primaryKey: .int(3))
            try store.create("Person", ["id": .int(4), "age": .int(40)], update: .modified)
            try store.create("Person", ["id": .int(1), "age": .int(10)], update: .modified)  // enters the results
        }
        try store.deliverNotifications()
        let change = try XCTUnwrap(inbox.take().first)
        // old: 2 3 4 5; new: 1 2 4 5 6
        XCTAssertFalse(change.initial)
        XCTAssertEqual(change.deletions, [1])
        XCTAssertEqual(change.insertions, [0, 4])
        XCTAssertEqual(change.modifications, [2])
        XCTAssertEqual(change.moves, [])
        XCTAssertEqual(change.deletedKeys, [.int(3)])
        XCTAssertEqual(change.insertedKeys, [.int(1), .int(6)])
        XCTAssertEqual(change.modifiedKeys, [.int(4)])
        XCTAssertEqual(change.count, 5)

        try store.write { try store.create("Tag", ["name": .string("x")]) }
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take(), [], "a commit that does not touch the results delivers nothing")
    }

    func testSortedResultsReportMoves() throws {
        let store = try hostStore()
        try people(store, 1...5)
        let inbox = Inbox<ResultsChange>()
        let token = try store.objects("Person", where: "TRUEPREDICATE SORT(age ASC)").observe { inbox.add($0) }
        defer { token.invalidate() }
        try store.deliverNotifications()
        _ = inbox.take()
        // 1 2 3 4 5 → 2 3 4 5 1 (1 moves to the end), and 3 changes its name only.
        try store.write {
            try store.create("Person", ["id": .int(1), "age": .int(99)], update: .modified)
            try store.create("Person", ["id": .int(3), "name": .string("three")], update: .modified)
        }
        try store.deliverNotifications()
        let change = try XCTUnwrap(inbox.take().first)
        XCTAssertEqual(change.moves, [Move(from: 0, to: 4)])
        XCTAssertEqual(change.deletions, [0], "a moved object is a deletion at its old index…")
        XCTAssertEqual(change.insertions, [4], "…and an insertion at its new one")
        XCTAssertEqual(change.modifications, [1, 4])
        XCTAssertEqual(change.modifiedKeys, [.int(3), .int(1)])
        XCTAssertEqual(change.deletedKeys, [], "moved objects were not deleted")
        XCTAssertEqual(change.insertedKeys, [])
    }

    func testDeletedKeysOfAStringPrimaryKey() throws {
        let store = try hostStore()
        try store.write {
            for n in ["a", "b", "c"] { try store.create("Tag", ["name": .string(n), "weight": .int(1)]) }
        }
        let inbox = Inbox<ResultsChange>()
        let token = try store.objects("Tag").observe { inbox.add($0) }
        defer { token.invalidate() }
        try store.deliverNotifications()
        _ = inbox.take()
        try store.write {
            try store.delete("Tag", primaryKey: .string("b"))
            try store.create("Tag", ["name": .string("c"), "weight": .int(2)], update: .modified)
            try store.create("Tag", ["name": .string("d")])
        }
        try store.deliverNotifications()
        let change = try XCTUnwrap(inbox.take().first)
        XCTAssertEqual(change.deletions, [1])
        XCTAssertEqual(change.deletedKeys, [.string("b")])
        XCTAssertEqual(change.modifiedKeys, [.string("c")])
        XCTAssertEqual(change.insertedKeys, [.string("d")])
        XCTAssertEqual(change.insertions, [2])
        XCTAssertEqual(change.modifications, [1])
    }

    // MARK: - Key paths

    func testKeyPathFiltersThroughLinksListsAndEmbeddedLists() throws {
        let store = try hostStore()
        try store.write {
            try store.create("Dog", ["id": .int(10), "name": .string("Rex"), "age": .int(3)])
            try store.create("Dog", ["id": .int(11), "name": .string("Fido"), "age": .int(4)])
            try store.create("Person", ["id": .int(1), "name": .string("Ann"), "dogs": .list([.int(10)]),
                                        "addresses": .list([.object(["city": .string("Oslo"), "street": .string("A")])])])
            try store.create("Person", ["id": .int(2), "name": .string("Bob"), "dogs": .list([.int(11)])])
        }
        let all = Inbox<ResultsChange>(), names = Inbox<ResultsChange>(), dogNames = Inbox<ResultsChange>()
        let cities = Inbox<ResultsChange>()
        let results = try store.objects("Person", where: "TRUEPREDICATE SORT(id ASC)")
        let tokens = [
            try results.observe { all.add($0) },
            try results.observe(keyPaths: ["name"]) { names.add($0) },
            try results.observe(keyPaths: ["name", "dogs.name"]) { dogNames.add($0) },
            try results.observe(keyPaths: ["addresses.city"]) { cities.add($0) },
        ]
        defer { tokens.forEach { $0.invalidate() } }
        try store.deliverNotifications()
        for inbox in [all, names, dogNames, cities] { XCTAssertEqual(inbox.take().count, 1) }

        // A dog's age: only the observer without key paths sees Ann change.
        try store.write { try store.create("Dog", ["id": .int(10), "age": .int(5)], update: .modified) }
        try store.deliverNotifications()
        XCTAssertEqual(all.take().map(\.modifiedKeys), [[.int(1)]])
        XCTAssertEqual(names.take(), [])
        XCTAssertEqual(dogNames.take(), [])
        XCTAssertEqual(cities.take(), [])

        // A dog's name: "dogs.name" counts it (Bob's dog).
        try store.write { try store.create("Dog", ["id": .int(11), "name": .string("Max")], update: .modified) }
        try store.deliverNotifications()
        XCTAssertEqual(all.take().map(\.modifiedKeys), [[.int(2)]])
        XCTAssertEqual(names.take(), [])
        XCTAssertEqual(dogNames.take().map(\.modifiedKeys), [[.int(2)]])

        // A street in an embedded list: not the city (realm-swift #8387).
        try store.write {
            try store.create("Person", ["id": .int(1), "addresses": .list([.object(["city": .string("Oslo"), "street": .string("B")])])],
                             update: .modified)
        }
        try store.deliverNotifications()
        XCTAssertEqual(all.take().map(\.modifiedKeys), [[.int(1)]])
        XCTAssertEqual(cities.take().count, 1, "replacing the list is a change of the list itself")

        try store.write { try store.create("Person", ["id": .int(2), "name": .string("Bo")], update: .modified) }
        try store.deliverNotifications()
        XCTAssertEqual(names.take().map(\.modifiedKeys), [[.int(2)]])
        XCTAssertEqual(dogNames.take().map(\.modifiedKeys), [[.int(2)]])
        XCTAssertEqual(cities.take(), [])
        XCTAssertEqual(all.take().count, 1)

        assertAtollError(try results.observe(keyPaths: ["nope"]) { _ in }, .invalidArgument, "no property 'nope'")
        assertAtollError(try results.observe(keyPaths: ["name.x"]) { _ in }, .invalidArgument, "not a link")
    }

    // MARK: - Objects

    func testObjectChangesWithOldAndNewValuesAndDeletion() throws {
        let store = try hostStore()
        try store.write {
            try store.create("Dog", ["id": .int(10), "name": .string("Rex")])
            try store.create("Person", ["id": .int(1), "name": .string("Ann"), "age": .int(30), "dog": .int(10)])
        }
        let inbox = Inbox<ObjectChange>(), filtered = Inbox<ObjectChange>()
        let token = try store.observeObject("Person", primaryKey: .int(1)) { inbox.add($0) }
        let ageOnly = try store.observeObject("Person", primaryKey: .int(1), keyPaths: ["age"]) { filtered.add($0) }
        defer { token.invalidate(); ageOnly.invalidate() }

        try store.write { try store.create("Person", ["id": .int(1), "name": .string("Anna"), "age": .int(31)], update: .modified) }
        try store.deliverNotifications()
        let change = try XCTUnwrap(inbox.take().first)
        XCTAssertFalse(change.deleted)
        XCTAssertEqual(change.changedProperties, ["name", "age"])
        XCTAssertEqual(change.old, ["name": .string("Ann"), "age": .int(30)])
        XCTAssertEqual(change.new, ["name": .string("Anna"), "age": .int(31)])
        XCTAssertEqual(filtered.take().map(\.changedProperties), [["age"]])

        // A change of the linked dog counts as a change of `dog`; deleting the dog nulls the link.
        try store.write { try store.create("Dog", ["id": .int(10), "name": .string("Max")], update: .modified) }
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take().map(\.changedProperties), [["dog"]])
        try store.write { try store.delete("Dog", primaryKey: .int(10)) }
        try store.deliverNotifications()
        let nulled = try XCTUnwrap(inbox.take().first)
        XCTAssertEqual(nulled.changedProperties, ["dog"])
        XCTAssertEqual(nulled.old, ["dog": .int(10)])
        XCTAssertEqual(nulled.new, ["dog": .null])
        XCTAssertEqual(filtered.take(), [])

        try store.write { try store.delete("Person", primaryKey: .int(1)) }
        try store.deliverNotifications()
        let deleted = try XCTUnwrap(inbox.take().first)
        XCTAssertTrue(deleted.deleted)
        XCTAssertEqual(deleted.old["name"], .string("Anna"))
        XCTAssertEqual(filtered.take().map(\.deleted), [true])
        try store.write { try store.create("Person", ["id": .int(1)]) }
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take(), [], "nothing after the deletion")

        assertAtollError(try store.observeObject("Person", primaryKey: .int(99)) { _ in }, .notFound)
        assertAtollError(try store.observeObject("Nope", primaryKey: .int(1)) { _ in }, .noSuchClass)
    }

    // MARK: - Collections

    func testListSetAndDictionaryChanges() throws {
        let store = try hostStore()
        try store.write {
            try store.create("Person", ["id": .int(1), "numbers": .list([.int(1), .int(2), .int(3), .int(4)]),
                                        "tags": .list([.string("a"), .string("b")]),
                                        "scores": .object(["x": .int(1), "y": .int(2)])])
        }
        let list = Inbox<CollectionChange>(), set = Inbox<CollectionChange>(), dict = Inbox<CollectionChange>()
        let tokens = [
            try store.observeCollection("Person", primaryKey: .int(1), property: "numbers") { list.add($0) },
            try store.observeCollection("Person", primaryKey: .int(1), property: "tags") { set.add($0) },
            try store.observeCollection("Person", primaryKey: .int(1), property: "scores") { dict.add($0) },
        ]
        defer { tokens.forEach { $0.invalidate() } }
        try store.deliverNotifications()
        XCTAssertEqual(list.take().map(\.count), [4])
        XCTAssertEqual(set.take().map(\.initial), [true])
        XCTAssertEqual(dict.take().map(\.count), [2])

        try store.write {
            try store.create("Person", ["id": .int(1), "numbers": .list([.int(9), .int(4), .int(1), .int(33)]),
                                        "tags": .list([.string("b"), .string("c")]),
                                        "scores": .object(["y": .int(20), "z": .int(3)])], update: .modified)
        }
        try store.deliverNotifications()
        let l = try XCTUnwrap(list.take().first)
        // old 1 2 3 4 → new 9 4 1 33: 2 and 3 deleted, 9 and 33 inserted, 1 moved from 0 to 2.
        XCTAssertEqual(l.deletions, [0, 1, 2])
        XCTAssertEqual(l.insertions, [0, 2, 3])
        XCTAssertEqual(l.moves, [Move(from: 0, to: 2)])
        XCTAssertEqual(l.modifications, [])
        XCTAssertEqual(l.deletedKeys, [.int(2), .int(3)])
        XCTAssertEqual(l.insertedKeys, [.int(9), .int(33)])
        XCTAssertEqual(l.count, 4)
        let s = try XCTUnwrap(set.take().first)
        XCTAssertEqual(s.deletions, [0])
        XCTAssertEqual(s.insertions, [1])
        XCTAssertEqual(s.deletedKeys, [.string("a")])
        XCTAssertEqual(s.insertedKeys, [.string("c")])
        let d = try XCTUnwrap(dict.take().first)
        XCTAssertEqual(d.deletedKeys, [.string("x")])
        XCTAssertEqual(d.insertedKeys, [.string("z")])
        XCTAssertEqual(d.modifiedKeys, [.string("y")])
        XCTAssertEqual(d.deletions, [0])
        XCTAssertEqual(d.insertions, [1])
        XCTAssertEqual(d.modifications, [0])
    }

    func testAListOfLinksReportsChangedTargets() throws {
        let store = try hostStore()
        try store.write {
            try store.create("Dog", ["id": .int(10), "name": .string("Rex")])
            try store.create("Dog", ["id": .int(11), "name": .string("Fido")])
            try store.create("Person", ["id": .int(1), "dogs": .list([.int(10), .int(11)])])
        }
        let inbox = Inbox<CollectionChange>()
        let token = try store.observeCollection("Person", primaryKey: .int(1), property: "dogs") { inbox.add($0) }
        defer { token.invalidate() }
        try store.deliverNotifications()
        _ = inbox.take()
        try store.write { try store.create("Dog", ["id": .int(11), "age": .int(2)], update: .modified) }
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take().map(\.modifications), [[1]])
        try store.write { try store.delete("Dog", primaryKey: .int(10)) }
        try store.deliverNotifications()
        let change = try XCTUnwrap(inbox.take().first)
        XCTAssertEqual(change.deletions, [0])
        XCTAssertEqual(change.deletedKeys, [.int(10)])
        XCTAssertEqual(change.count, 1)
    }

    // MARK: - Delivery

    func testNotifierThreadDeliversCommitsOfAnotherHandle() throws {
        let path = temporaryRealmPath()
        let writer = try open(path, Self.schema)
        let reader = try open(path, nil)
        let realm = Inbox<RealmChange>(), results = Inbox<ResultsChange>()
        let tokens = [try reader.observe { realm.add($0) },
                      try reader.objects("Person").observe { results.add($0) }]
        defer { tokens.forEach { $0.invalidate() } }
        XCTAssertEqual(results.take(waitFor: 1).map(\.initial), [true])
        try people(writer, 1...2)
        let change = try XCTUnwrap(realm.take(waitFor: 1).first)
        XCTAssertEqual(change.version, 1)
        XCTAssertEqual(change.classes, ["Person"])
        XCTAssertEqual(results.take(waitFor: 1).map(\.insertedKeys), [[.int(1), .int(2)]])
        XCTAssertEqual(try reader.objects("Person").count(), 2, "the delivery refreshed the reader")
    }

    func testAnotherProcessesCommitsAreDelivered() throws {
        let environment = ProcessInfo.processInfo.environment
        if environment["ATOLL_TEST_ROLE"] == "notification-writer", let path = environment["ATOLL_TEST_PATH"] {
            let store = try Store(Configuration(path: path))
            defer { store.close() }
            for i in 1...3 as ClosedRange<Int64> {
                try store.write { try store.create("Person", ["id": .int(i), "name": .string("child")]) }
            }
            return
        }
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema)
        let inbox = Inbox<ResultsChange>()
        let token = try store.objects("Person").observe { inbox.add($0) }
        defer { token.invalidate() }
        XCTAssertEqual(inbox.take(waitFor: 1).count, 1)
        let name = String(reflecting: type(of: self)) + "/testAnotherProcessesCommitsAreDelivered"
        let child = try TestProcess(name, environment: ["ATOLL_TEST_ROLE": "notification-writer", "ATOLL_TEST_PATH": path])
        let (passed, output) = child.finish()
        XCTAssertTrue(passed, output)
        var inserted = [Value]()
        let deadline = Date().addingTimeInterval(20)
        while inserted.count < 3, Date() < deadline {
            inserted += inbox.take(waitFor: 1).flatMap(\.insertedKeys)
        }
        XCTAssertEqual(inserted, [.int(1), .int(2), .int(3)])
    }

    func testInvalidatingInsideTheCallbackAndAfterwards() throws {
        let store = try hostStore()
        final class Box: @unchecked Sendable { var token: NotificationToken?; var calls = 0 }
        let box = Box(), other = Inbox<ResultsChange>()
        box.token = try store.objects("Person").observe { _ in
            box.calls += 1
            box.token?.invalidate()
        }
        let token = try store.objects("Person").observe { other.add($0) }
        try store.deliverNotifications()
        try people(store, 1...1)
        try store.deliverNotifications()
        XCTAssertEqual(box.calls, 1, "invalidated inside its first call")
        XCTAssertEqual(other.take().count, 2, "the other observer still gets both")
        token.invalidate()
        try people(store, 2...2)
        try store.deliverNotifications()
        XCTAssertEqual(other.take(), [])
    }

    func testFreeUserdataRunsOnceAfterTheLastCall() throws {
        let store = try hostStore()
        let token = try store.observe { _ in }
        final class Count: @unchecked Sendable { var n = 0 }
        let count = Count()
        token.whenInvalidated { count.n += 1 }
        token.invalidate()
        token.invalidate()
        XCTAssertEqual(count.n, 1)
    }

    func testCommitObserversAreToldTheVersionOnly() throws {
        let path = temporaryRealmPath()
        let store = try hostStore(path)
        let writer = try open(path, nil)
        let commits = Inbox<UInt64>(), realm = Inbox<RealmChange>()
        let token = try store.observeCommits { commits.add($0) }
        let realmToken = try store.observe { realm.add($0) }
        defer { realmToken.invalidate() }
        try store.deliverNotifications()
        XCTAssertEqual(commits.take(), [], "nothing before a commit")
        try people(store, 1...2)
        try people(writer, 3...3)
        try store.deliverNotifications()
        XCTAssertEqual(commits.take(), [2], "one call per delivery, with the version reached")
        XCTAssertEqual(realm.take().map(\.classes), [["Person"]], "other observers still get their changes")
        token.invalidate()
        try people(store, 4...4)
        try store.deliverNotifications()
        XCTAssertEqual(commits.take(), [])
        XCTAssertEqual(realm.take().map(\.version), [3])
    }

    // MARK: - Snapshots

    func testReadsSeeTheSnapshotUntilRefresh() throws {
        let path = temporaryRealmPath()
        let writer = try open(path, Self.schema)
        let reader = try open(path, nil)
        XCTAssertEqual(try reader.objects("Person").count(), 0)
        try people(writer, 1...3)
        XCTAssertEqual(try reader.objects("Person").count(), 0, "the reader's snapshot holds")
        XCTAssertTrue(try reader.refresh())
        XCTAssertEqual(try reader.objects("Person").count(), 3)
        XCTAssertFalse(try reader.refresh(), "nothing newer")
        try people(writer, 4...4)
        try reader.beginWrite()
        XCTAssertEqual(try reader.objects("Person").count(), 4, "beginWrite refreshes")
        try reader.cancelWrite()
    }

    // MARK: - The change log over time

    func testTheChangeLogIsPrunedBehindItsObservers() throws {
        let store = try hostStore()
        let inbox = Inbox<ResultsChange>()
        let token = try store.objects("Person").observe { inbox.add($0) }
        defer { token.invalidate() }
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take().map(\.initial), [true])
        try people(store, 1...1)
        // 300 commits while the observer lags: nothing it needs is pruned.
        for i in 0..<300 as Range<Int64> {
            try store.write { try store.create("Person", ["id": .int(1), "age": .int(i)], update: .modified) }
        }
        XCTAssertEqual(try store.statistics().changeLogEntries, 301, "the observer at version 0 holds the whole log")
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take().map(\.insertedKeys), [[.int(1)]])
        // Once delivered, later commits prune what nobody needs.
        for i in 0..<300 as Range<Int64> {
            try store.write { try store.create("Person", ["id": .int(1), "age": .int(i)], update: .modified) }
            if i % 10 == 0 { try store.deliverNotifications() }
        }
        let kept = try store.statistics().changeLogEntries
        XCTAssertLessThanOrEqual(kept, 2 * 64, "entries older than the observer and the newest 64 are gone")
        XCTAssertGreaterThanOrEqual(kept, 64)
    }

    // MARK: - More delivery cases

    func testAsyncSequenceOfResultsChanges() async throws {
        let path = temporaryRealmPath()
        let store = try Store(Configuration(path: path, schema: Self.schema))
        defer { store.close() }
        let writer = try Store(Configuration(path: path))
        defer { writer.close() }
        var seen = [ResultsChange]()
        for try await change in try store.objects("Person", where: "age > 1").changes() {
            seen.append(change)
            if change.initial {
                try people(writer, 1...3)
            } else if change.insertedKeys.count + seen.dropFirst().dropLast().map(\.insertedKeys.count).reduce(0, +) == 2 {
                break
            }
        }
        XCTAssertEqual(seen.first?.initial, true)
        XCTAssertEqual(seen.dropFirst().flatMap(\.insertedKeys), [.int(2), .int(3)])
    }

    func testFrozenResultsNeverChange() throws {
        let store = try hostStore()
        try people(store, 1...3)
        let frozen = try store.objects("Person", where: "TRUEPREDICATE SORT(id DESC)").freeze()
        try store.write { try store.delete("Person", primaryKey: .int(2)) }
        try people(store, 4...5)
        XCTAssertEqual(frozen.count(), 3)
        XCTAssertEqual(frozen.documents(offset: 1).map { $0["id"] }, [.int(2), .int(1)])
        store.close()
        let fromAnotherThread = DispatchQueue.global().sync { frozen.documents(offset: 0, limit: 1).first?["name"] }
        XCTAssertEqual(fromAnotherThread, .string("p3"))
    }

    func testInvalidateWaitsForARunningCallback() throws {
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema)
        let entered = DispatchSemaphore(value: 0)
        final class Flag: @unchecked Sendable {
            private let lock = NSLock()
            private var value = false
            var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
            func set() { lock.lock(); value = true; lock.unlock() }
        }
        let finished = Flag(), calledAfter = Flag(), invalidated = Flag()
        let token = try store.observe { _ in
            if invalidated.isSet { calledAfter.set() }
            entered.signal()
            usleep(100_000)
            finished.set()
        }
        try people(store, 1...1)
        XCTAssertEqual(entered.wait(timeout: .now() + 20), .success)
        token.invalidate()
        invalidated.set()
        XCTAssertTrue(finished.isSet, "invalidate() returned only after the running callback did")
        try people(store, 2...2)
        usleep(200_000)  // not needed for the assertion: a call would only make it fail
        XCTAssertFalse(calledAfter.isSet)
    }

    func testObservingInsideAWriteOrWithTheWrongDeliveryIsRefused() throws {
        let store = try openTemporaryStore(Self.schema)
        try store.beginWrite()
        assertAtollError(try store.observe { _ in }, .alreadyInWrite)
        try store.cancelWrite()
        assertAtollError(try store.notificationDescriptor(), .invalidArgument, "own thread")
        let host = try hostStore()
        XCTAssertGreaterThanOrEqual(try host.notificationDescriptor(), 0)
        assertAtollError(try host.observeCollection("Person", primaryKey: .int(1), property: "tags") { _ in }, .notFound)
        try people(host, 1...1)
        assertAtollError(try host.observeCollection("Person", primaryKey: .int(1), property: "name") { _ in }, .invalidArgument)
        assertAtollError(try host.observeObject("Address", primaryKey: .int(1)) { _ in }, .invalidArgument, "embedded")
        assertAtollError(try host.observeObject("Person", primaryKey: .string("x")) { _ in }, .typeMismatch)
    }

    func testACallbackMayCloseTheStoreOnTheNotifierThread() throws {
        let path = temporaryRealmPath()
        let store = try Store(Configuration(path: path, schema: Self.schema))
        let writer = try open(path, nil)
        let done = DispatchSemaphore(value: 0)
        let token = try store.observe { _ in
            store.close()
            done.signal()
        }
        defer { token.invalidate() }
        try people(writer, 1...1)
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        XCTAssertTrue(store.isClosed)
    }

    func testInMemoryRealmsNotifyTheirHandles() throws {
        var config = Configuration(path: "notify-\(UUID().uuidString)", inMemory: true, schema: Self.schema)
        config.notificationDelivery = .host
        let a = try Store(config), b = try Store(config)
        defer { a.close(); b.close() }
        let inbox = Inbox<ResultsChange>()
        let token = try b.objects("Person").observe { inbox.add($0) }
        defer { token.invalidate() }
        try b.deliverNotifications()
        try people(a, 1...2)
        try b.deliverNotifications()
        XCTAssertEqual(inbox.take().map(\.insertedKeys), [[], [.int(1), .int(2)]])
    }

    func testAThousandObserversAllGetTheirChange() throws {
        let store = try hostStore()
        try people(store, 1...100)
        let inbox = Inbox<Int>()
        var tokens = [NotificationToken]()
        for i in 0..<1000 {
            let results = try store.objects("Person", where: "age == $0", [.int(Int64(i % 100 + 1))])
            tokens.append(try results.observe { change in if !change.initial { inbox.add(i) } })
        }
        defer { tokens.forEach { $0.invalidate() } }
        try store.deliverNotifications()
        try store.write { try store.create("Person", ["id": .int(7), "name": .string("seven")], update: .modified) }
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take().sorted(), (0..<1000).filter { $0 % 100 == 6 })
    }

    func testObjectKeyPathsThroughEmbeddedObjectsAndBacklinks() throws {
        let store = try hostStore()
        try store.write {
            try store.create("Dog", ["id": .int(10), "name": .string("Rex")])
            try store.create("Person", ["id": .int(1), "name": .string("Ann"), "dogs": .list([.int(10)]),
                                        "addresses": .list([.object(["city": .string("Oslo")])])])
        }
        let owners = Inbox<ObjectChange>(), cities = Inbox<ObjectChange>()
        let tokens = [
            try store.observeObject("Dog", primaryKey: .int(10), keyPaths: ["owners.name"]) { owners.add($0) },
            try store.observeObject("Person", primaryKey: .int(1), keyPaths: ["addresses.city"]) { cities.add($0) },
        ]
        defer { tokens.forEach { $0.invalidate() } }
        try store.write { try store.create("Person", ["id": .int(1), "name": .string("Anna")], update: .modified) }
        try store.deliverNotifications()
        XCTAssertEqual(owners.take().map(\.changedProperties), [["owners"]], "an owner's name is watched through the backlink")
        XCTAssertEqual(cities.take(), [])
        try store.write { try store.create("Person", ["id": .int(2), "name": .string("Bob"), "dogs": .list([.int(10)])]) }
        try store.deliverNotifications()
        XCTAssertEqual(owners.take().map(\.changedProperties), [["owners"]], "a new owner")
    }

    func testAnObjectDeletedAndCreatedAgainInOneTransaction() throws {
        let store = try hostStore()
        try people(store, 1...2)
        let object = Inbox<ObjectChange>(), results = Inbox<ResultsChange>()
        let tokens = [try store.observeObject("Person", primaryKey: .int(1)) { object.add($0) },
                      try store.objects("Person").observe { results.add($0) }]
        defer { tokens.forEach { $0.invalidate() } }
        try store.deliverNotifications()
        _ = results.take()
        try store.write {
            try store.delete("Person", primaryKey: .int(1))
            try store.create("Person", ["id": .int(1), "name": .string("again")])
        }
        try store.deliverNotifications()
        XCTAssertEqual(object.take().map(\.deleted), [true], "the object observed is gone")
        XCTAssertEqual(results.take().map(\.modifiedKeys), [[.int(1)]], "the results hold one with its key")
    }

    func testCancellingAWriteDeliversWhatArrivedDuringIt() throws {
        let path = temporaryRealmPath()
        let store = try hostStore(path)
        let writer = try open(path, nil)
        let inbox = Inbox<RealmChange>()
        let token = try store.observe { inbox.add($0) }
        defer { token.invalidate() }
        try people(writer, 1...1)
        try store.beginWrite()
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take(), [], "nothing is delivered inside a write transaction")
        try store.cancelWrite()
        var descriptor = pollfd(fd: try store.notificationDescriptor(), events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&descriptor, 1, 20_000), 1, "the descriptor is readable")
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take().map(\.version), [1])
    }

    /// Random writes against several queries (some brought up to date incrementally, some run
    /// again): each change, applied to the old results, gives the new results, and its keys
    /// are exactly the objects that left and entered.
    func testRandomWritesGiveChangesThatRebuildTheResults() throws {
        let store = try hostStore()
        var rng = SplitMix64(seed: 20261129)
        let queries = ["TRUEPREDICATE", "age > 50", "name BEGINSWITH 'a'", "age < 30 SORT(name ASC)",
                       "dog.age > 5", "ANY dogs.age < 3", "age > 20 DISTINCT(name)", "age >= 0 SORT(age DESC) LIMIT(7)",
                       "addresses.city == 'Oslo'", "TRUEPREDICATE SORT(age DESC, name ASC)",
                       "name != 'cy' SORT(name DESC)"]
        final class Tracker: @unchecked Sendable {
            var changes: [ResultsChange] = []
        }
        var trackers = [(Results, Tracker, [Int64])]()
        var tokens = [NotificationToken]()
        defer { tokens.forEach { $0.invalidate() } }
        for q in queries {
            let results = try store.objects("Person", where: q)
            let tracker = Tracker()
            tokens.append(try results.observe { tracker.changes.append($0) })
            trackers.append((results, tracker, []))
        }
        try store.write {
            for d in 1...7 as ClosedRange<Int64> { try store.create("Dog", ["id": .int(d), "age": .int(d)]) }
        }
        try store.deliverNotifications()
        for round in 0..<60 {
            try store.write {
                for _ in 0..<Int.random(in: 1...6, using: &rng) {
                    let id = Int64.random(in: 1...40, using: &rng)
                    let dog = Value.int(id % 7 + 1)
                    switch Int.random(in: 0..<5, using: &rng) {
                    case 0: try? store.delete("Person", primaryKey: .int(id))
                    case 1:
                        try store.create("Dog", ["id": dog, "age": .int(Int64.random(in: 0...10, using: &rng))], update: .modified)
                    case 2:
                        // Links to the dog become null, lists drop it; the dog comes back.
                        try store.delete("Dog", primaryKey: dog)
                        try store.create("Dog", ["id": dog, "age": .int(Int64.random(in: 0...10, using: &rng))])
                    default:
                        let name = ["ann", "bob", "al", "cy"][Int.random(in: 0..<4, using: &rng)]
                        try store.create("Person", ["id": .int(id), "name": .string(name),
                                                    "age": .int(Int64.random(in: 0...100, using: &rng)),
                                                    "dog": Bool.random(using: &rng) ? .int(id % 7 + 1) : .null,
                                                    "dogs": .list([.int(id % 5 + 1)]),
                                                    "addresses": .list([.object(["city": .string(Bool.random(using: &rng) ? "Oslo" : "Rome")])])],
                                         update: .modified)
                    }
                }
            }
            try store.deliverNotifications()
            for i in trackers.indices {
                let (results, tracker, old) = trackers[i]
                let now = try results.keys().map(\.rawValue)
                var rebuilt = old
                for change in tracker.changes where !change.initial {
                    for d in change.deletions.reversed() { rebuilt.remove(at: d) }
                    for j in change.insertions { rebuilt.insert(now[j], at: j) }
                    XCTAssertEqual(Set(change.deletedKeys.compactMap(\.intValue)), Set(old).subtracting(now), "\(queries[i]) round \(round)")
                    XCTAssertEqual(Set(change.insertedKeys.compactMap(\.intValue)), Set(now).subtracting(old), "\(queries[i]) round \(round)")
                    XCTAssertEqual(change.count, now.count)
                }
                XCTAssertEqual(rebuilt, now, "\(queries[i]) round \(round)")
                tracker.changes = []
                trackers[i].2 = now
            }
        }
    }

    func testAnObserverWhoseQueryNoLongerRunsGetsTheErrorOnce() throws {
        let path = temporaryRealmPath()
        let store = try hostStore(path)
        try people(store, 1...10)
        let inbox = Inbox<ResultsChange>()
        let token = try store.objects("Person", where: "age > 5").observe { inbox.add($0) }
        defer { token.invalidate() }
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take().map(\.count), [5])
        // Another handle migrates the file: Person loses `age`, which the query reads.
        var classes = Self.schema.classes
        classes[0].properties.removeAll { $0.name == "age" }
        let migrated = try Store(Configuration(path: path, schema: Schema(classes), schemaVersion: 1))
        defer { migrated.close() }
        try migrated.write { try migrated.create("Person", ["id": .int(11), "name": .string("new")]) }
        try store.deliverNotifications()
        let failed = inbox.take()
        XCTAssertEqual(failed.count, 1)
        let error = try XCTUnwrap(failed.first?.error, "the observer is told why it stops")
        XCTAssertTrue(error.description.contains("age"), error.description)
        XCTAssertEqual(failed.first?.insertions, [])
        try migrated.write { try migrated.create("Person", ["id": .int(12), "name": .string("newer")]) }
        try store.deliverNotifications()
        XCTAssertEqual(inbox.take(), [], "and is not called again")
    }
}
