import Atoll
import AtollTestSupport
import Foundation
import XCTest

/// The README's Swift quick start, statement for statement (its classes in a namespace, since
/// this test target has other `Dog` and `Person` classes; a realm of their own through
/// `objectTypes`).
enum Readme {
    class Dog: Object, ObjectKeyIdentifiable {
        @Persisted(primaryKey: true) var _id: ObjectId
        @Persisted var name = ""
        @Persisted var age = 0
        @Persisted(originProperty: "dogs") var owners: LinkingObjects<Person>
    }

    class Person: Object {
        @Persisted(primaryKey: true) var name = ""
        @Persisted var dogs: List<Dog>
    }
}

final class QuickStartTests: XCTestCase {
    func testTheReadmeQuickStart() throws {
        let realm = try Realm(configuration: Realm.Configuration(fileURL: URL(fileURLWithPath: temporaryRealmPath("dogs.realm")),
                                                                 objectTypes: [Readme.Dog.self, Readme.Person.self]))
        try realm.write {
            let ann = Readme.Person(value: ["name": "Ann"])
            ann.dogs.append(Readme.Dog(value: ["name": "Rex", "age": 3]))
            realm.add(ann)
        }
        let rexes = realm.objects(Readme.Dog.self).where { $0.name == "Rex" && $0.age > 2 }
        XCTAssertEqual(rexes.count, 1)
        XCTAssertEqual(rexes.first?.owners.first?.name, "Ann")

        let initial = expectation(description: "initial")
        let updated = expectation(description: "update")
        let seen = Collector<[[Int]]>()
        let token = rexes.observe { change in
            switch change {
            case .initial: initial.fulfill()
            case .update(_, let deletions, let insertions, let modifications):
                seen.append([deletions, insertions, modifications])
                updated.fulfill()
            case .error(let error): XCTFail("\(error)")
            }
        }
        // As in Realm, the initial state is delivered asynchronously, and a commit before it is
        // part of it: wait for it first.
        wait(for: [initial], timeout: 5)
        try realm.write { realm.objects(Readme.Dog.self).first?.age = 4 }
        wait(for: [updated], timeout: 5)
        token.invalidate()
        XCTAssertEqual(seen.all, [[[], [], [0]]])
    }
}
