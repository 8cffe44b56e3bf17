import Atoll
import AtollTestSupport
import Dispatch
import Foundation
import Observation
import XCTest

// The typed observation API as Realm Swift users know it: results, objects, lists, sets, maps
// and realms observed with blocks, on queues and as async sequences; tokens; the Observable
// state of ObservedResults and ObservedRealmObject. Every observer runs on a real temporary
// realm file, its callbacks arrive on the notifier thread (or a queue), and each test waits for
// the exact reports it expects.

/// A map change as the test compares it: the entries the callback read, and the keys.
private enum SeenMap: Equatable {
    case initial([String])
    case update([String], deletions: [String], insertions: [String], modifications: [String])
    case error(AtollError.Code)

    init(_ change: RealmMapChange<Map<String, Int>>) {
        let read = { (map: Map<String, Int>) in map.map { "\($0.key)=\($0.value)" }.sorted() }
        switch change {
        case .initial(let map): self = .initial(read(map))
        case .update(let map, let deletions, let insertions, let modifications):
            self = .update(read(map), deletions: deletions, insertions: insertions, modifications: modifications)
        case .error(let error): self = .error((error as? AtollError)?.code ?? .internal)
        }
    }
}

/// An object change as the test compares it: values written with their Swift type
/// (`String:Tom`, `Int:3`, `nil`), and whether the block got the observed object itself.
private enum SeenObject: Equatable {
    case change(sameObject: Bool, [String])
    case deleted
    case error(AtollError.Code, String)

    init<T: Object>(_ change: ObjectChange<T>, observed: T) {
        let text = { (value: Any?) in value.map { "\(type(of: $0)):\($0)" } ?? "nil" }
        switch change {
        case .change(let object, let properties):
            self = .change(sameObject: object === observed,
                           properties.map { "\($0.name): \(text($0.oldValue)) -> \(text($0.newValue))" })
        case .deleted: self = .deleted
        case .error(let error):
            let e = error as? AtollError
            self = .error(e?.code ?? .internal, e?.message ?? "\(error)")
        }
    }
}

/// Whether a change is the initial report.
private func isInitial<C>(_ change: RealmCollectionChange<C>) -> Bool {
    if case .initial = change { true } else { false }
}

/// The names of pets, in the results' order.
private func names(_ pets: Results<Pet>) -> [String] { pets.map(\.name) }

final class ObservationTests: XCTestCase {
    let types: [ObjectBase.Type] = [Person.self, Dog.self, Owner.self, Pet.self, Address.self, Note.self]

    func configuration() -> Realm.Configuration {
        Realm.Configuration(fileURL: URL(fileURLWithPath: temporaryRealmPath()), objectTypes: types)
    }

    /// A realm on a new temporary file holding pets with these names (ids 1, 2, 3…).
    func realm(pets names: [String] = []) throws -> Realm {
        let realm = try Realm(configuration: configuration())
        try realm.write {
            for (i, name) in names.enumerated() { realm.add(Pet(value: ["id": i + 1, "name": name])) }
        }
        return realm
    }

    func pet(_ realm: Realm, _ id: Int, file: StaticString = #filePath, line: UInt = #line) throws -> Pet {
        try XCTUnwrap(realm.object(ofType: Pet.self, forPrimaryKey: id), "no pet \(id)", file: file, line: line)
    }

    // MARK: - Results

    func testResultsReportTheInitialStateThenOneUpdatePerWriteWithExactIndices() throws {
        let realm = try realm(pets: ["Ann", "Bob", "Cid", "Dan"])
        let seen = Collector<SeenCollection>()
        let token = realm.objects(Pet.self).observe { seen.append(SeenCollection($0, names)) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Ann", "Bob", "Cid", "Dan"])])

        try realm.write {
            realm.delete(try pet(realm, 2))
            try pet(realm, 3).name = "Cyd"
            realm.add(Pet(value: ["id": 5, "name": "Eve"]))
        }
        // Deletions index the old results, insertions and modifications the new ones (as the
        // typed API and docs/notifications.md say: Cyd was at 2 and is at 1).
        XCTAssertEqual(reports(seen, count: 2).last,
                       .update(["Ann", "Cyd", "Dan", "Eve"], deletions: [1], insertions: [3], modifications: [1]))

        try realm.write { try pet(realm, 1).weight = 4.5 }
        // The write above was reported once: the next report is this write's.
        XCTAssertEqual(reports(seen, count: 3),
                       [.initial(["Ann", "Bob", "Cid", "Dan"]),
                        .update(["Ann", "Cyd", "Dan", "Eve"], deletions: [1], insertions: [3], modifications: [1]),
                        .update(["Ann", "Cyd", "Dan", "Eve"], deletions: [], insertions: [], modifications: [0])])
    }

    func testSortedResultsReportIndicesInSortOrder() throws {
        let realm = try realm(pets: ["Bob", "Dan", "Fay"])
        let seen = Collector<SeenCollection>()
        let token = realm.objects(Pet.self).sorted(byKeyPath: "name").observe { seen.append(SeenCollection($0, names)) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Bob", "Dan", "Fay"])])

        try realm.write {
            realm.add(Pet(value: ["id": 4, "name": "Cid"]))  // enters at 2 of the new order
            try pet(realm, 2).weight = 9                     // Dan changes, and stays in place
        }
        XCTAssertEqual(reports(seen, count: 2).last,
                       .update(["Bob", "Cid", "Dan", "Fay"], deletions: [], insertions: [1], modifications: [2]))

        // Fay is renamed to the front: a move, which is a deletion at its old index and an
        // insertion at its new one (realm-core's convention); she changed too, so she is also a
        // modification at her new index.
        try realm.write { try pet(realm, 3).name = "Al" }
        XCTAssertEqual(reports(seen, count: 3).last, .update(["Al", "Bob", "Cid", "Dan"], deletions: [3], insertions: [0], modifications: [0]))
    }

    func testAWriteThroughAnotherRealmOnTheSameFileIsReported() throws {
        let realm = try realm(pets: ["Ann"])
        let other = try Realm(configuration: realm.configuration)
        let seen = Collector<SeenCollection>()
        let token = realm.objects(Pet.self).observe { seen.append(SeenCollection($0, names)) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Ann"])])

        try other.write { other.add(Pet(value: ["id": 2, "name": "Bob"])) }
        XCTAssertEqual(reports(seen, count: 2).last, .update(["Ann", "Bob"], deletions: [], insertions: [1], modifications: []))

        try other.write { other.delete(try pet(other, 1)) }
        XCTAssertEqual(reports(seen, count: 3).last, .update(["Bob"], deletions: [0], insertions: [], modifications: []))
    }

    func testResultsKeyPathsLimitWhatCountsAsAModification() throws {
        let realm = try realm(pets: ["Ann", "Bob"])
        let seen = Collector<SeenCollection>()
        let token = realm.objects(Pet.self).observe(keyPaths: ["name"]) { seen.append(SeenCollection($0, names)) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Ann", "Bob"])])

        try realm.write { try pet(realm, 1).weight = 12 }  // not a name: not reported
        try realm.write { try pet(realm, 2).name = "Bo" }
        // Had the first write been reported, its modification [0] would come first (alone, or
        // merged with this one).
        XCTAssertEqual(reports(seen, count: 2),
                       [.initial(["Ann", "Bob"]), .update(["Ann", "Bo"], deletions: [], insertions: [], modifications: [1])])

        // Insertions count whatever the key paths.
        try realm.write { realm.add(Pet(value: ["id": 3, "name": "Cid"])) }
        XCTAssertEqual(reports(seen, count: 3).last, .update(["Ann", "Bo", "Cid"], deletions: [], insertions: [2], modifications: []))
    }

    func testResultsKeyPathsAsSwiftKeyPaths() throws {
        let realm = try Realm(configuration: configuration())
        try realm.write {
            realm.add(Dog(value: ["name": "Rex", "weight": 20]))
            realm.add(Dog(value: ["name": "Fido", "weight": 8]))
        }
        let dogs = realm.objects(Dog.self)
        let seen = Collector<SeenCollection>()
        let token = dogs.observe(keyPaths: [\Dog.name]) { seen.append(SeenCollection($0) { $0.map(\.name) }) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Rex", "Fido"])])

        try realm.write { dogs[0].weight = 30 }
        try realm.write { dogs[1].name = "Fido II" }
        XCTAssertEqual(reports(seen, count: 2),
                       [.initial(["Rex", "Fido"]), .update(["Rex", "Fido II"], deletions: [], insertions: [], modifications: [1])])
    }

    func testResultsChangesAsAnAsyncSequence() throws {
        let realm = try realm(pets: ["Ann"])
        let pets = realm.objects(Pet.self)
        let seen = Collector<SeenCollection>()
        let ended = XCTestExpectation(description: "the iteration ended")
        let task = Task {
            for await change in pets.changes() {
                seen.append(SeenCollection(change, names))
                if seen.all.count == 2 { break }
            }
            ended.fulfill()
        }
        defer { task.cancel() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Ann"])])

        try realm.write { realm.add(Pet(value: ["id": 2, "name": "Bob"])) }
        XCTAssertEqual(reports(seen, count: 2),
                       [.initial(["Ann"]), .update(["Ann", "Bob"], deletions: [], insertions: [1], modifications: [])])
        wait(for: [ended], timeout: 5)
    }

    func testListObjectAndRealmChangesAsAsyncSequences() throws {
        let realm = try realm(pets: ["Tom"])
        let tom = try pet(realm, 1)
        try realm.write { tom.nicknames.append("T") }
        let listSeen = Collector<String>()
        let objectSeen = Collector<String>()
        let realmSeen = Collector<Realm.Notification>()
        let started = XCTestExpectation(description: "the list stream's initial state")
        let done = XCTestExpectation(description: "each stream saw the write")
        done.expectedFulfillmentCount = 3
        // The streams register their observers when made: make them here, iterate them in tasks.
        let listChanges = tom.nicknames.changes()
        let objectChanges: AsyncStream<ObjectChange<Pet>> = tom.changes()
        let realmChanges = realm.changes()
        let tasks = [
            Task {
                for await change in listChanges {
                    switch change {
                    case .initial(let list): listSeen.append("initial \(list.toArray())"); started.fulfill()
                    case .update(let list, let deletions, let insertions, _):
                        listSeen.append("update \(list.toArray()) -\(deletions) +\(insertions)")
                        done.fulfill()
                    case .error(let error): listSeen.append("error \(error)")
                    }
                }
            },
            Task {
                for await change in objectChanges {
                    if case .change(_, let properties) = change {
                        objectSeen.append(properties.map(\.name).joined(separator: ","))
                        done.fulfill()
                    }
                }
            },
            Task {
                for await notification in realmChanges {
                    realmSeen.append(notification)
                    done.fulfill()
                }
            },
        ]
        defer { tasks.forEach { $0.cancel() } }
        wait(for: [started], timeout: 5)
        try realm.write { tom.nicknames.append("Tommy") }
        wait(for: [done], timeout: 5)
        XCTAssertEqual(listSeen.all, ["initial [\"T\"]", "update [\"T\", \"Tommy\"] -[] +[1]"])
        XCTAssertEqual(objectSeen.all, ["nicknames"])
        XCTAssertEqual(realmSeen.all, [.didChange])
    }

    // MARK: - Objects

    func testObjectChangesCarryTheChangedPropertiesWithOldAndNewValuesThenTheDeletion() throws {
        let realm = try realm(pets: ["Tom"])
        let tom = try pet(realm, 1)
        let seen = Collector<SeenObject>()
        let token = tom.observe { (change: ObjectChange<Pet>) in seen.append(SeenObject(change, observed: tom)) }
        defer { token.invalidate() }

        try realm.write {
            tom.name = "Jerry"
            tom.age = 3
        }
        // No initial report (as in Realm): the first is the write's, in schema order.
        XCTAssertEqual(reports(seen, count: 1),
                       [.change(sameObject: true, ["name: String:Tom -> String:Jerry", "age: nil -> Int:3"])])

        try realm.write { realm.delete(tom) }
        XCTAssertEqual(reports(seen, count: 2).last, .deleted)
    }

    func testObjectKeyPathsLimitWhichChangesAreReported() throws {
        let realm = try realm(pets: ["Tom"])
        let tom = try pet(realm, 1)
        let byName = Collector<SeenObject>()
        let byKeyPath = Collector<SeenObject>()
        let t1 = tom.observe(keyPaths: ["age"]) { (change: ObjectChange<Pet>) in byName.append(SeenObject(change, observed: tom)) }
        let t2 = tom.observe(keyPaths: [\Pet.age]) { change in byKeyPath.append(SeenObject(change, observed: tom)) }
        defer {
            t1.invalidate()
            t2.invalidate()
        }

        try realm.write { tom.name = "Jerry" }  // not the age: not reported
        try realm.write { tom.age = 7 }
        let expected: [SeenObject] = [.change(sameObject: true, ["age: nil -> Int:7"])]
        XCTAssertEqual(reports(byName, count: 1), expected)
        XCTAssertEqual(reports(byKeyPath, count: 1), expected)
    }

    func testObservingAnUnmanagedObjectOrCollectionIsAnError() throws {
        let pet = Pet(value: ["id": 1, "name": "Tom"])
        let seen = Collector<SeenObject>()
        let token = pet.observe { (change: ObjectChange<Pet>) in seen.append(SeenObject(change, observed: pet)) }
        // Reported at once, on the caller's thread: nothing can be registered.
        XCTAssertEqual(seen.all, [.error(.invalidArgument, "only managed objects can be observed; add the object to a realm first")])
        XCTAssertTrue(token.isInvalidated)

        let list = Collector<SeenCollection>()
        let listToken = pet.nicknames.observe { list.append(SeenCollection($0) { Array($0) }) }
        XCTAssertEqual(list.all, [.error(.invalidArgument)])
        XCTAssertTrue(listToken.isInvalidated)
    }

    // MARK: - Collections

    func testListReportsInsertionsRemovalsMovesAndChangesOfItsObjects() throws {
        let realm = try realm(pets: ["Tom", "Rex", "Kit", "Max"])
        let owner = Owner(value: ["name": "Ann"])
        try realm.write {
            realm.add(owner)
            for id in 1...3 { owner.pets.append(try pet(realm, id)) }
        }
        let seen = Collector<SeenCollection>()
        let token = owner.pets.observe { seen.append(SeenCollection($0) { $0.map(\.name) }) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Tom", "Rex", "Kit"])])

        try realm.write { owner.pets.insert(try pet(realm, 4), at: 0) }
        XCTAssertEqual(reports(seen, count: 2).last,
                       .update(["Max", "Tom", "Rex", "Kit"], deletions: [], insertions: [0], modifications: []))

        try realm.write { owner.pets.remove(at: 2) }
        XCTAssertEqual(reports(seen, count: 3).last, .update(["Max", "Tom", "Kit"], deletions: [2], insertions: [], modifications: []))

        // A move is a deletion at the old index and an insertion at the new one.
        try realm.write { owner.pets.move(from: 0, to: 2) }
        XCTAssertEqual(reports(seen, count: 4).last, .update(["Tom", "Kit", "Max"], deletions: [0], insertions: [2], modifications: []))

        // A change of an object in the list is a modification at its index.
        try realm.write { try pet(realm, 3).name = "Kat" }
        XCTAssertEqual(reports(seen, count: 5).last, .update(["Tom", "Kat", "Max"], deletions: [], insertions: [], modifications: [1]))

        // Deleting the owner empties the list: every element is deleted (the last report).
        try realm.write { realm.delete(owner) }
        XCTAssertEqual(reports(seen, count: 6).last, .update([], deletions: [0, 1, 2], insertions: [], modifications: []))
    }

    func testListOfStringsReportsAnElementSetInPlaceAsAModification() throws {
        let realm = try realm(pets: ["Tom"])
        let tom = try pet(realm, 1)
        try realm.write { tom.nicknames.append(objectsIn: ["Tommy", "T"]) }
        let seen = Collector<SeenCollection>()
        let token = tom.nicknames.observe { seen.append(SeenCollection($0) { Array($0) }) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Tommy", "T"])])

        try realm.write { tom.nicknames[1] = "Tee" }
        XCTAssertEqual(reports(seen, count: 2).last, .update(["Tommy", "Tee"], deletions: [], insertions: [], modifications: [1]))
    }

    func testMutableSetReportsInsertionsAndDeletions() throws {
        let realm = try realm(pets: ["Tom"])
        let tom = try pet(realm, 1)
        try realm.write { tom.tags.insert(objectsIn: ["a", "b"]) }
        let seen = Collector<SeenCollection>()
        let token = tom.tags.observe { seen.append(SeenCollection($0) { Array($0) }) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["a", "b"])])

        try realm.write { tom.tags.insert("c") }
        XCTAssertEqual(reports(seen, count: 2).last, .update(["a", "b", "c"], deletions: [], insertions: [2], modifications: []))

        try realm.write { tom.tags.remove("a") }
        XCTAssertEqual(reports(seen, count: 3).last, .update(["b", "c"], deletions: [0], insertions: [], modifications: []))

        try realm.write { tom.tags.insert("b") }  // already there: no change, so no report
        try realm.write { tom.tags.insert("d") }
        XCTAssertEqual(reports(seen, count: 4).last, .update(["b", "c", "d"], deletions: [], insertions: [2], modifications: []))
    }

    func testMapReportsChangesByKey() throws {
        let realm = try realm(pets: ["Tom"])
        let tom = try pet(realm, 1)
        try realm.write {
            tom.scores["a"] = 1
            tom.scores["b"] = 2
        }
        let seen = Collector<SeenMap>()
        let token = tom.scores.observe { seen.append(SeenMap($0)) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["a=1", "b=2"])])

        try realm.write {
            tom.scores["c"] = 3
            tom.scores["a"] = nil
            tom.scores["b"] = 20
        }
        XCTAssertEqual(reports(seen, count: 2).last, .update(["b=20", "c=3"], deletions: ["a"], insertions: ["c"], modifications: ["b"]))
    }

    // MARK: - Realms

    func testRealmObserversAreToldAfterEachCommit() throws {
        let realm = try realm()
        let other = try Realm(configuration: realm.configuration)
        let seen = Collector<String>()
        let token = realm.observe { notification, r in seen.append("\(notification) same realm: \(r === realm)") }
        defer { token.invalidate() }

        try realm.write { realm.add(Pet(value: ["id": 1, "name": "Tom"])) }
        XCTAssertEqual(reports(seen, count: 1), ["didChange same realm: true"])
        try other.write { other.add(Pet(value: ["id": 2, "name": "Rex"])) }
        XCTAssertEqual(reports(seen, count: 2), ["didChange same realm: true", "didChange same realm: true"])
        XCTAssertEqual(realm.objects(Pet.self).count, 2, "the realm moved to the newest data before telling")
    }

    // MARK: - Delivery and tokens

    func testBlocksRunOnTheQueueGiven() throws {
        let realm = try realm(pets: ["Tom"])
        let tom = try pet(realm, 1)
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "atoll.tests.observers")
        queue.setSpecific(key: key, value: "observers")
        let seen = Collector<String>()
        let initials = Collector<String>()
        // Each block says where it runs; the initial reports come first, before the write
        // (an initial delivered after it would already hold it, and no update would follow).
        let report = { (what: String, initial: Bool) in
            (initial ? initials : seen).append("\(what) on \(DispatchQueue.getSpecific(key: key) ?? "another thread")")
        }
        let tokens = [
            realm.objects(Pet.self).observe(on: queue) { report("results", isInitial($0)) },
            tom.observe(on: queue) { (_: ObjectChange<Pet>) in report("object", false) },
            tom.nicknames.observe(on: queue) { report("list", isInitial($0)) },
            realm.observe(on: queue) { _, _ in report("realm", false) },
            realm.objects(Pet.self).observe { report("results without a queue", isInitial($0)) },
        ]
        defer { tokens.forEach { $0.invalidate() } }
        XCTAssertEqual(reports(initials, count: 3).sorted(),
                       ["list on observers", "results on observers", "results without a queue on another thread"])

        try realm.write {
            tom.name = "Jerry"
            tom.nicknames.append("J")
        }
        XCTAssertEqual(reports(seen, count: 5).sorted(),
                       ["list on observers", "object on observers", "realm on observers",
                        "results on observers", "results without a queue on another thread"])
    }

    func testInvalidatingATokenStopsItsReports() throws {
        let realm = try realm(pets: ["Tom"])
        let stopped = Collector<SeenCollection>()
        let running = Collector<SeenCollection>()
        let stoppedToken = realm.objects(Pet.self).observe { stopped.append(SeenCollection($0, names)) }
        let runningToken = realm.objects(Pet.self).observe { running.append(SeenCollection($0, names)) }
        defer { runningToken.invalidate() }
        XCTAssertEqual(reports(stopped, count: 1), [.initial(["Tom"])])
        XCTAssertEqual(reports(running, count: 1), [.initial(["Tom"])])

        stoppedToken.invalidate()
        XCTAssertTrue(stoppedToken.isInvalidated)
        try realm.write { realm.add(Pet(value: ["id": 2, "name": "Rex"])) }
        XCTAssertEqual(reports(running, count: 2).last, .update(["Tom", "Rex"], deletions: [], insertions: [1], modifications: []))
        // Deliveries to a realm's observers run one after the other on its notifier thread: once
        // the running observer has the second write's report, the first write's delivery to
        // every observer is over.
        try realm.write { realm.add(Pet(value: ["id": 3, "name": "Kit"])) }
        XCTAssertEqual(reports(running, count: 3).last, .update(["Tom", "Rex", "Kit"], deletions: [], insertions: [2], modifications: []))
        XCTAssertEqual(stopped.all, [.initial(["Tom"])])
    }

    // MARK: - Observing inside a write transaction

    func testObservingInsideAWriteTransactionIsAnErrorAndTheWriteStillCommits() throws {
        let realm = try realm(pets: ["Tom"])
        let tom = try pet(realm, 1)
        let results = Collector<SeenCollection>()
        let object = Collector<SeenObject>()
        let list = Collector<SeenCollection>()
        let set = Collector<SeenCollection>()
        let map = Collector<SeenMap>()
        var tokens = [NotificationToken]()
        try realm.write {
            tokens.append(realm.objects(Pet.self).observe { results.append(SeenCollection($0, names)) })
            tokens.append(tom.observe { (change: ObjectChange<Pet>) in object.append(SeenObject(change, observed: tom)) })
            tokens.append(tom.nicknames.observe { list.append(SeenCollection($0) { Array($0) }) })
            tokens.append(tom.tags.observe { set.append(SeenCollection($0) { Array($0) }) })
            tokens.append(tom.scores.observe { map.append(SeenMap($0)) })
            realm.add(Pet(value: ["id": 2, "name": "Rex"]))
        }
        // The store refuses observers inside a write: each block is told at once, on the
        // caller's thread, and its token is dead. The write itself is not harmed.
        XCTAssertEqual(results.all, [.error(.alreadyInWrite)])
        XCTAssertEqual(object.all, [.error(.alreadyInWrite, "observers cannot be added inside a write transaction")])
        XCTAssertEqual(list.all, [.error(.alreadyInWrite)])
        XCTAssertEqual(set.all, [.error(.alreadyInWrite)])
        XCTAssertEqual(map.all, [.error(.alreadyInWrite)])
        XCTAssertEqual(tokens.map(\.isInvalidated), [true, true, true, true, true])
        XCTAssertEqual(realm.objects(Pet.self).map(\.name), ["Tom", "Rex"])
    }

    func testObservingTheRealmInsideAWriteTransactionDoesNotFailTheWrite() throws {
        let realm = try realm(pets: ["Tom"])
        let told = Collector<String>()
        var token: NotificationToken?
        // realm.observe has no error case: the refusal is kept in lastError, as other calls
        // that cannot throw keep theirs; it is no error of the write, which commits.
        XCTAssertNoThrow(try realm.write {
            token = realm.observe { notification, _ in told.append("\(notification)") }
            realm.add(Pet(value: ["id": 2, "name": "Rex"]))
        })
        XCTAssertEqual(realm.lastError?.code, .alreadyInWrite)
        XCTAssertEqual(token?.isInvalidated, true)
        XCTAssertEqual(realm.objects(Pet.self).map(\.name), ["Tom", "Rex"])
        XCTAssertEqual(told.all, [])
    }

    // MARK: - ObservedResults and ObservedRealmObject

    func testObservedResultsIsObservableStateThatWrites() throws {
        let configuration = configuration()
        let realm = try Realm(configuration: configuration)
        try realm.write { realm.add(Dog(value: ["name": "Rex"])) }
        @ObservedResults(Dog.self, configuration: configuration, sortDescriptor: SortDescriptor(keyPath: "name")) var dogs
        XCTAssertNil(_dogs.error)
        waitUntil("the initial state") { _dogs.changeCount >= 1 }
        XCTAssertEqual(_dogs.changeCount, 1)
        guard case .initial(let initial)? = _dogs.lastChange else { return XCTFail("no initial change: \(String(describing: _dogs.lastChange))") }
        XCTAssertEqual(initial.map(\.name), ["Rex"])

        // A write of another realm on the file: the tracked read is told, and the new state is
        // readable when it is.
        let changed = XCTestExpectation(description: "onChange")
        withObservationTracking { _ = dogs.count } onChange: { changed.fulfill() }
        try realm.write { realm.add(Dog(value: ["name": "Ace"])) }
        wait(for: [changed], timeout: 5)
        XCTAssertEqual(_dogs.changeCount, 2)
        XCTAssertEqual(dogs.map(\.name), ["Ace", "Rex"])
        guard case .update(_, let deletions, let insertions, let modifications)? = _dogs.lastChange else {
            return XCTFail("no update: \(String(describing: _dogs.lastChange))")
        }
        XCTAssertEqual([deletions, insertions, modifications], [[], [0], []])

        // $dogs writes, each in a write transaction of its own.
        try $dogs.append(Dog(value: ["name": "Max"]))
        XCTAssertEqual(dogs.map(\.name), ["Ace", "Max", "Rex"])
        waitUntil("the append's report") { _dogs.changeCount >= 3 }
        try $dogs.remove(dogs[0])
        XCTAssertEqual(dogs.map(\.name), ["Max", "Rex"])
        waitUntil("the removal's report") { _dogs.changeCount >= 4 }
        guard case .update(let now, let removed, _, _)? = _dogs.lastChange else { return XCTFail("no update") }
        XCTAssertEqual(removed, [0])
        XCTAssertEqual(now.map(\.name), ["Max", "Rex"])
        try $dogs.remove(atOffsets: IndexSet([1]))
        realm.refresh()
        XCTAssertEqual(realm.objects(Dog.self).map(\.name), ["Max"])
    }

    func testObservedRealmObjectTracksChangesUpdatesAndDeletion() throws {
        let realm = try Realm(configuration: configuration())
        let rex = Dog(value: ["name": "Rex", "weight": 20])
        try realm.write { realm.add(rex) }
        let observed = ObservedRealmObject(wrappedValue: rex)
        XCTAssertEqual(observed.changedProperties, [])
        XCTAssertFalse(observed.isDeleted)

        let changed = XCTestExpectation(description: "onChange")
        withObservationTracking { _ = observed.wrappedValue } onChange: { changed.fulfill() }
        try realm.write { rex.name = "Rexy" }
        wait(for: [changed], timeout: 5)
        XCTAssertEqual(observed.changedProperties, ["name"])
        XCTAssertEqual(observed.wrappedValue.name, "Rexy")

        try observed.update { $0.weight = 31 }
        XCTAssertEqual(rex.weight, 31)
        waitUntil("the update's report") { observed.changedProperties == ["weight"] }

        try realm.write { realm.delete(rex) }
        waitUntil("the deletion") { observed.isDeleted }
        XCTAssertTrue(observed.wrappedValue.isInvalidated)
    }
}
