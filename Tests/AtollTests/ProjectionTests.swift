import Atoll
import AtollTestSupport
import Dispatch
import Foundation
import Observation
import XCTest

// Class projections as Realm Swift users know them: DoggoDB's `Profile` and realm-swift's
// `PersonProjection` (on `Friend`, see ProjectionModels.swift) read, write and observe their
// root objects in real temporary realm files. Observation callbacks arrive on the notifier
// thread; each test waits for the exact reports it expects.

/// A projection change as the test compares it: `name: old -> new` per property, and whether
/// the block got the observed projection itself.
private enum SeenProjection: Equatable {
    case change(sameProjection: Bool, [String])
    case deleted
    case error(AtollError.Code, String)

    init<T: AnyObject>(_ change: ObjectChange<T>, observed: T) {
        let text = { (value: Any?) in value.map { "\($0)" } ?? "nil" }
        switch change {
        case .change(let projection, let properties):
            self = .change(sameProjection: projection === observed,
                           properties.map { "\($0.name): \(text($0.oldValue)) -> \(text($0.newValue))" })
        case .deleted: self = .deleted
        case .error(let error):
            let e = error as? AtollError
            self = .error(e?.code ?? .internal, e?.message ?? "\(error)")
        }
    }
}

final class ProjectionTests: XCTestCase {
    let types: [ObjectBase.Type] = [Person.self, Dog.self, Friend.self, Address.self]

    func configuration() -> Realm.Configuration {
        Realm.Configuration(fileURL: URL(fileURLWithPath: temporaryRealmPath()), objectTypes: types)
    }

    /// A realm on a new temporary file with DoggoDB's people: Ann Smith (Rex and Bella) and
    /// Bob Jones (no dog).
    func doggoRealm(_ configuration: Realm.Configuration? = nil) throws -> (Realm, ann: Person, bob: Person) {
        let realm = try Realm(configuration: configuration ?? self.configuration())
        let ann = Person(value: ["firstName": "Ann", "lastName": "smith", "personId": "ann-1", "businessUnit": BusinessUnitEnum.sales,
                                 "profileImageUrl": URL(string: "https://example.com/ann.png") as Any])
        ann.dogs.append(Dog(value: ["name": "Rex", "breed": "Collie"]))
        ann.dogs.append(Dog(value: ["name": "Bella", "breed": "Beagle"]))
        let bob = Person(value: ["firstName": "Bob", "lastName": "jones", "personId": "bob-2"])
        try realm.write {
            realm.add(ann)
            realm.add(bob)
        }
        return (realm, ann, bob)
    }

    /// A realm with realm-swift's example: Ann Smith of Paris, whose friends are Bob and Cid
    /// and whose close friends are Dee and Bob.
    func friendRealm() throws -> (Realm, ann: Friend) {
        let realm = try Realm(configuration: configuration())
        let ann = Friend(value: ["firstName": "Ann", "lastName": "Smith"])
        ann.address = Address(value: ["street": "1 rue Haute", "city": "Paris"])
        let bob = Friend(value: ["firstName": "Bob", "lastName": "Jones"])
        ann.friends.append(bob)
        ann.friends.append(Friend(value: ["firstName": "Cid", "lastName": "Brown"]))
        ann.closeFriends.insert(Friend(value: ["firstName": "Dee", "lastName": "White"]))
        ann.closeFriends.insert(bob)
        try realm.write { realm.add(ann) }
        return (realm, ann)
    }

    // MARK: - Reading

    func testPassthroughPropertiesReadTheRootObject() throws {
        let (_, ann, _) = try doggoRealm()
        let profile = Profile(projecting: ann)
        XCTAssertTrue(profile.rootObject === ann)
        XCTAssertEqual(profile.firstName, "Ann")
        XCTAssertEqual(profile.personId, "ann-1")
        XCTAssertEqual(profile.businessUnit, .sales)
        XCTAssertEqual(profile.profileImageUrl, URL(string: "https://example.com/ann.png"))
        XCTAssertEqual(profile.dogs.map(\.name), ["Rex", "Bella"])
        XCTAssertNotNil(profile.realm)
        XCTAssertFalse(profile.isInvalidated)
    }

    func testRenamedPropertiesReadTheRootPropertyUnderTheirName() throws {
        let (_, ann, bob) = try doggoRealm()
        XCTAssertEqual(PersonCard(projecting: ann).givenName, "Ann")
        XCTAssertEqual(PersonCard(projecting: ann).familyName, "smith")
        XCTAssertEqual(PersonCard(projecting: bob).givenName, "Bob")
    }

    func testKeyPathTransformsComputeFromTheRootProperty() throws {
        let (_, ann, _) = try doggoRealm()
        XCTAssertEqual(Profile(projecting: ann).lastNameInitial, "S")

        let (_, friend) = try friendRealm()
        let projection = FriendProjection(projecting: friend)
        XCTAssertEqual(projection.lastNameCaps, "SMITH")
        // Through the optional embedded address.
        XCTAssertEqual(projection.homeCity, "Paris")
        XCTAssertNil(FriendProjection(projecting: Friend()).homeCity)
    }

    func testCollectionMappingProjectsListsAndSetsToAValueOfEachObject() throws {
        let (_, ann, bob) = try doggoRealm()
        let card = PersonCard(projecting: ann)
        XCTAssertEqual(Array(card.dogNames), ["Rex", "Bella"])
        XCTAssertEqual(card.dogNames.count, 2)
        XCTAssertEqual(card.dogNames[1], "Bella")
        XCTAssertEqual(card.dogNames.index(of: "Bella"), 1)
        XCTAssertEqual(card.dogNames.description, "ProjectedCollection<String>(Rex, Bella)")
        XCTAssertEqual(Array(PersonCard(projecting: bob).dogNames), [])

        let (_, friend) = try friendRealm()
        XCTAssertEqual(Array(FriendProjection(projecting: friend).friendsFirstName), ["Bob", "Cid"])
        XCTAssertEqual(FriendCircle(projecting: friend).closeFriendNames.sorted(), ["Bob", "Dee"])
    }

    func testAProjectionOfAnUnmanagedObjectReadsItsValues() {
        let person = Person(value: ["firstName": "Eve", "lastName": "adams"])
        person.dogs.append(Dog(value: ["name": "Ace"]))
        let card = PersonCard(projecting: person)
        XCTAssertNil(card.realm)
        XCTAssertEqual(card.givenName, "Eve")
        XCTAssertEqual(Profile(projecting: person).lastNameInitial, "A")
        XCTAssertEqual(Array(card.dogNames), ["Ace"])
    }

    func testProjectionsAreLive() throws {
        let configuration = configuration()
        let (realm, ann, _) = try doggoRealm(configuration)
        let profile = Profile(projecting: ann)
        let card = PersonCard(projecting: ann)
        XCTAssertEqual(profile.lastNameInitial, "S")

        try realm.write {
            ann.lastName = "turner"
            ann.dogs.append(Dog(value: ["name": "Max"]))
        }
        XCTAssertEqual(profile.lastNameInitial, "T")
        XCTAssertEqual(Array(card.dogNames), ["Rex", "Bella", "Max"])

        // A write of another realm on the same file, seen once the realm refreshes (a realm
        // reads one state of the data until then, as in Realm).
        let other = try Realm(configuration: configuration)
        let otherAnn = try XCTUnwrap(other.objects(Person.self).filter("firstName == 'Ann'").first)
        try other.write {
            otherAnn.firstName = "Anna"
            otherAnn.dogs[0].name = "Rexy"
        }
        XCTAssertEqual(profile.firstName, "Ann")
        XCTAssertTrue(realm.refresh())
        XCTAssertEqual(profile.firstName, "Anna")
        XCTAssertEqual(Array(card.dogNames), ["Rexy", "Bella", "Max"])
    }

    // MARK: - Writing

    func testPassthroughAndRenamedPropertiesWriteTheRootInsideAWrite() throws {
        let (realm, ann, _) = try doggoRealm()
        let profile = Profile(projecting: ann)
        let card = PersonCard(projecting: ann)
        try realm.write {
            profile.firstName = "Anna"
            card.familyName = "Turner"
            profile.businessUnit = .marketing
        }
        let stored = try XCTUnwrap(realm.objects(Person.self).filter("personId == 'ann-1'").first)
        XCTAssertEqual(stored.firstName, "Anna")
        XCTAssertEqual(stored.lastName, "Turner")
        XCTAssertEqual(stored.businessUnit, .marketing)
        XCTAssertEqual(card.givenName, "Anna")
        XCTAssertEqual(profile.lastNameInitial, "T")
        XCTAssertNil(realm.lastError)
    }

    func testWritingOutsideAWriteKeepsTheErrorAndChangesNothing() throws {
        let (realm, ann, _) = try doggoRealm()
        let card = PersonCard(projecting: ann)
        card.givenName = "Zed"
        XCTAssertEqual(realm.lastError?.code, .notInWrite)
        XCTAssertEqual(realm.lastError?.message.contains("setting 'Person.firstName'"), true, realm.lastError?.message ?? "")
        XCTAssertEqual(card.givenName, "Ann")
        XCTAssertEqual(ann.firstName, "Ann")
    }

    func testTransformedPropertiesAreReadOnly() throws {
        let (realm, ann, _) = try doggoRealm()
        let profile = Profile(projecting: ann)
        // The refused set fails the write transaction, as every error inside one does.
        assertAtollError(try realm.write { profile.lastNameInitial = "Z" }, .invalidArgument,
                         "'lastNameInitial' of Profile is read-only")
        XCTAssertEqual(realm.lastError?.code, .invalidArgument)
        XCTAssertEqual(profile.lastNameInitial, "S")
        XCTAssertEqual(ann.lastName, "smith")
    }

    // MARK: - Results of a projection

    func testResultsOfAProjectionFilterAndSortByTheRootsProperties() throws {
        let (realm, ann, _) = try doggoRealm()
        try realm.write { realm.add(Person(value: ["firstName": "Cid", "lastName": "smith", "personId": "cid-3"])) }

        let smiths: Results<Profile> = realm.objects(Profile.self).filter("lastName == $0", "smith").sorted(byKeyPath: "firstName", ascending: false)
        XCTAssertEqual(smiths.count, 2)
        XCTAssertEqual(smiths.map(\.firstName), ["Cid", "Ann"])
        XCTAssertEqual(smiths.map(\.personId), ["cid-3", "ann-1"])
        XCTAssertEqual(smiths[1], Profile(projecting: ann))
        XCTAssertEqual(smiths.index(of: Profile(projecting: ann)), 1)
        XCTAssertTrue(smiths[0].rootObject.realm != nil)

        let byId = realm.objects(Profile.self).sorted(by: \Person.personId)
        XCTAssertEqual(byId.map(\.firstName), ["Ann", "Bob", "Cid"])
        XCTAssertEqual(realm.objects(PersonCard.self).filter("ANY dogs.name == 'Rex'").map(\.givenName), ["Ann"])
        XCTAssertNil(realm.lastError)
    }

    func testProjectionsAreEqualWhenTheyProjectTheSameObject() throws {
        let (realm, ann, bob) = try doggoRealm()
        let again = try XCTUnwrap(realm.objects(Person.self).filter("firstName == 'Ann'").first)
        XCTAssertFalse(again === ann)
        XCTAssertEqual(Profile(projecting: ann), Profile(projecting: again))
        XCTAssertNotEqual(Profile(projecting: ann), Profile(projecting: bob))
        XCTAssertEqual(Set([Profile(projecting: ann), Profile(projecting: again), Profile(projecting: bob)]).count, 2)

        let (_, friend) = try friendRealm()
        XCTAssertEqual(FriendCircle(projecting: friend).id, FriendCircle(projecting: friend).id)
    }

    func testDescriptionListsTheProjectedValues() throws {
        let (_, friend) = try friendRealm()
        XCTAssertEqual(FriendProjection(projecting: friend).description, """
            FriendProjection<Friend> {
            \tfirstName = Ann;
            \tlastNameCaps = SMITH;
            \thomeCity = Paris;
            \tfriendsFirstName = ProjectedCollection<String>(Bob, Cid);
            }
            """)
    }

    // MARK: - Observing

    func testObservationReportsProjectedNamesAndNothingForExcludedProperties() throws {
        let (realm, ann, _) = try doggoRealm()
        let profile = Profile(projecting: ann)
        let seen = Collector<SeenProjection>()
        let token = profile.observe { seen.append(SeenProjection($0, observed: profile)) }
        defer { token.invalidate() }

        // `company` is not projected: its change is not reported (the next report is the
        // next write's).
        try realm.write { ann.company = "Atoll" }
        try realm.write { ann.firstName = "Anna" }
        XCTAssertEqual(reports(seen, count: 1), [.change(sameProjection: true, ["firstName: Ann -> Anna"])])

        // A transform is reported under its own name, with its old and new values.
        try realm.write { ann.lastName = "turner" }
        XCTAssertEqual(reports(seen, count: 2).last, .change(sameProjection: true, ["lastNameInitial: S -> T"]))

        try realm.write {
            ann.personId = "ann-9"
            ann.businessUnit = .product
        }
        XCTAssertEqual(reports(seen, count: 3).last,
                       .change(sameProjection: true, ["personId: ann-1 -> ann-9", "businessUnit: sales -> product"]))

        try realm.write { realm.delete(ann) }
        XCTAssertEqual(reports(seen, count: 4).last, .deleted)
    }

    func testObservationThroughAMappedCollectionWatchesTheMappedPropertyOnly() throws {
        let (realm, ann, _) = try doggoRealm()
        let card = PersonCard(projecting: ann)
        let seen = Collector<SeenProjection>()
        let token = card.observe { seen.append(SeenProjection($0, observed: card)) }
        defer { token.invalidate() }

        // The dogs' breeds are not projected; their names are.
        try realm.write { ann.dogs[0].breed = "Husky" }
        try realm.write { ann.dogs[0].name = "Max" }
        XCTAssertEqual(reports(seen, count: 1),
                       [.change(sameProjection: true, ["dogNames: nil -> ProjectedCollection<String>(Max, Bella)"])])

        // The list's own changes are reported too.
        try realm.write { ann.dogs.remove(at: 1) }
        XCTAssertEqual(reports(seen, count: 2).last,
                       .change(sameProjection: true, ["dogNames: nil -> ProjectedCollection<String>(Max)"]))
    }

    func testObservationThroughAnEmbeddedObjectAndAListOfLinks() throws {
        let (realm, friend) = try friendRealm()
        let projection = FriendProjection(projecting: friend)
        let seen = Collector<SeenProjection>()
        let token = projection.observe { seen.append(SeenProjection($0, observed: projection)) }
        defer { token.invalidate() }

        // The address's street is not projected; its city is (its old value rebuilt from the
        // embedded object's).
        try realm.write { friend.address?.street = "2 rue Basse" }
        try realm.write { friend.address?.city = "Lyon" }
        XCTAssertEqual(reports(seen, count: 1), [.change(sameProjection: true, ["homeCity: Paris -> Lyon"])])

        try realm.write { friend.friends[1].lastName = "Green" }
        try realm.write { friend.friends[1].firstName = "Cyd" }
        XCTAssertEqual(reports(seen, count: 2).last,
                       .change(sameProjection: true, ["friendsFirstName: nil -> ProjectedCollection<String>(Bob, Cyd)"]))
    }

    func testAPropertyAndAKeyPathThroughItAreBothWatched() throws {
        let (realm, ann, _) = try doggoRealm()
        let view = DogOwnerView(projecting: ann)
        let names = Collector<[String]>()
        let token = view.observe { change in
            if case .change(_, let properties) = change { names.append(properties.map(\.name)) }
        }
        defer { token.invalidate() }
        // `dogs` watches the list, `dogNames` the list and its dogs' names: not their breeds.
        // A change of the root's `dogs` is reported for each property that goes through it.
        try realm.write { ann.dogs[0].breed = "Husky" }
        try realm.write { ann.dogs[0].name = "Max" }
        XCTAssertEqual(reports(names, count: 1), [["dogs", "dogNames"]])

        let (friendRealm, friend) = try friendRealm()
        let circle = FriendCircle(projecting: friend)
        let circleNames = Collector<[String]>()
        let other = circle.observe { change in
            if case .change(_, let properties) = change { circleNames.append(properties.map(\.name)) }
        }
        defer { other.invalidate() }
        // `address` watches all of the embedded object, `city` its city only.
        try friendRealm.write { friend.address?.street = "2 rue Basse" }
        XCTAssertEqual(reports(circleNames, count: 1), [["address"]])
        try friendRealm.write { friend.address?.city = "Lyon" }
        XCTAssertEqual(reports(circleNames, count: 2).last, ["address", "city"])
    }

    func testObservingKeyPathsWatchesTheNamedProjectedPropertiesOnly() throws {
        let (realm, ann, _) = try doggoRealm()
        let profile = Profile(projecting: ann)
        let byName = Collector<SeenProjection>()
        let byKeyPath = Collector<SeenProjection>()
        let tokens = [
            profile.observe(keyPaths: ["lastNameInitial"]) { byName.append(SeenProjection($0, observed: profile)) },
            profile.observe(keyPaths: [\Profile.firstName]) { byKeyPath.append(SeenProjection($0, observed: profile)) },
        ]
        defer { tokens.forEach { $0.invalidate() } }

        try realm.write { ann.firstName = "Anna" }
        try realm.write { ann.lastName = "turner" }
        XCTAssertEqual(reports(byName, count: 1), [.change(sameProjection: true, ["lastNameInitial: S -> T"])])
        XCTAssertEqual(reports(byKeyPath, count: 1), [.change(sameProjection: true, ["firstName: Ann -> Anna"])])
    }

    func testObservingWhatCannotBeObservedReportsAnError() throws {
        let (_, ann, _) = try doggoRealm()
        let profile = Profile(projecting: ann)
        let unknown = Collector<SeenProjection>()
        let token = profile.observe(keyPaths: ["company"]) { unknown.append(SeenProjection($0, observed: profile)) }
        XCTAssertEqual(reports(unknown, count: 1), [.error(.invalidArgument, "observe: Profile has no projected property 'company'")])
        token.invalidate()

        let unmanaged = Profile(projecting: Person())
        let refused = Collector<SeenProjection>()
        let other = unmanaged.observe { refused.append(SeenProjection($0, observed: unmanaged)) }
        XCTAssertEqual(reports(refused, count: 1),
                       [.error(.invalidArgument, "only managed objects can be observed; add the object to a realm first")])
        other.invalidate()
    }

    func testResultsOfAProjectionReportChangesWithExactIndices() throws {
        let (realm, ann, _) = try doggoRealm()
        let seen = Collector<SeenCollection>()
        let token = realm.objects(Profile.self).sorted(byKeyPath: "firstName").observe { change in
            seen.append(SeenCollection(change) { $0.map(\.firstName) })
        }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Ann", "Bob"])])

        try realm.write {
            realm.add(Person(value: ["firstName": "Cid", "personId": "cid-3"]))
            ann.firstName = "Anna"
        }
        XCTAssertEqual(reports(seen, count: 2).last, .update(["Anna", "Bob", "Cid"], deletions: [], insertions: [2], modifications: [0]))
    }

    func testAProjectedCollectionReportsChangesOfItsValues() throws {
        let (realm, ann, _) = try doggoRealm()
        let names = PersonCard(projecting: ann).dogNames
        let seen = Collector<SeenCollection>()
        let token = names.observe { change in seen.append(SeenCollection(change) { Array($0) }) }
        defer { token.invalidate() }
        XCTAssertEqual(reports(seen, count: 1), [.initial(["Rex", "Bella"])])

        try realm.write { ann.dogs[1].breed = "Poodle" }  // not the mapped property
        try realm.write { ann.dogs[1].name = "Belle" }
        XCTAssertEqual(reports(seen, count: 2).last, .update(["Rex", "Belle"], deletions: [], insertions: [], modifications: [1]))
    }

    func testObservedResultsHoldProjections() throws {
        let configuration = configuration()
        let (realm, _, _) = try doggoRealm(configuration)
        let profiles = ObservedResults(Profile.self, configuration: configuration, sortDescriptor: SortDescriptor(keyPath: "firstName"))
        XCTAssertNil(profiles.error)
        waitUntil("the initial state") { profiles.changeCount >= 1 }
        XCTAssertEqual(profiles.wrappedValue.map(\.firstName), ["Ann", "Bob"])

        // Removing a projection deletes its root object.
        try profiles.remove(profiles.wrappedValue[0])
        XCTAssertTrue(realm.refresh())
        XCTAssertEqual(realm.objects(Person.self).map(\.firstName), ["Bob"])
        waitUntil("the removal's report") { profiles.changeCount >= 2 }
        XCTAssertEqual(profiles.changeCount, 2)
        guard case .update(let now, let deletions, _, _)? = profiles.lastChange else {
            return XCTFail("no update: \(String(describing: profiles.lastChange))")
        }
        XCTAssertEqual(deletions, [0])
        XCTAssertEqual(now.map(\.firstName), ["Bob"])
    }
}
