import Atoll
import AtollTestSupport
import Foundation
import XCTest

final class ModelTests: XCTestCase {
    func realm(_ types: [ObjectBase.Type] = [Person.self, Dog.self, Owner.self, Pet.self, Address.self, Note.self]) throws -> Realm {
        try Realm(configuration: Realm.Configuration(fileURL: URL(fileURLWithPath: temporaryRealmPath()), objectTypes: types))
    }

    func testSchemaComesFromTheClasses() throws {
        let realm = try realm()
        let person = try XCTUnwrap(realm.schema["Person"])
        XCTAssertEqual(person.primaryKey, "_id")
        XCTAssertEqual(person.properties.map(\.name), ["_id", "firstName", "lastName", "personId", "company", "businessUnit", "profileImageUrl", "dogs"])
        XCTAssertEqual(person.properties.map(\.typeName), ["objectId", "string", "string", "string", "string", "string", "string?", "Dog[]"])
        let dog = try XCTUnwrap(realm.schema["Dog"])
        XCTAssertEqual(dog[property: "person"]?.typeName, "linkingObjects<Person.dogs>")
        XCTAssertEqual(dog[property: "dateLastExamined"]?.typeName, "date")
        XCTAssertTrue(try XCTUnwrap(realm.schema["Address"]).isEmbedded)
        let pet = try XCTUnwrap(realm.schema["Pet"])
        XCTAssertEqual(pet[property: "age"]?.isIndexed, true)
        XCTAssertEqual(pet.properties.map(\.typeName),
                       ["int", "string", "int?", "double", "decimal128", "date", "uuid", "data?", "bool", "string[]", "string<>", "int{}", "linkingObjects<Owner.pets>"])
    }

    func testDoggoDB() throws {
        let realm = try realm()
        let person = Person()
        person.firstName = "Ann"
        person.lastName = "Lee"
        person.businessUnit = .sales
        person.profileImageUrl = URL(string: "https://example.com/ann.png")
        let dog = Dog(value: ["name": "Rex", "breed": "Collie", "weight": 20])
        person.dogs.append(dog)
        XCTAssertNil(person.realm)
        try realm.write { realm.add(person) }
        XCTAssertEqual(person.realm, realm)
        XCTAssertNotNil(dog.realm, "linked objects become managed too")
        XCTAssertEqual(person.dogs.count, 1)
        XCTAssertEqual(person.dogs[0].name, "Rex")
        XCTAssertEqual(person.businessUnit, .sales)
        XCTAssertEqual(person.profileImageUrl?.host, "example.com")
        XCTAssertEqual(dog.person.count, 1)
        XCTAssertEqual(dog.person.first?.firstName, "Ann")

        let found = try XCTUnwrap(realm.object(ofType: Person.self, forPrimaryKey: person._id))
        XCTAssertEqual(found.lastName, "Lee")
        XCTAssertEqual(found, person)
        XCTAssertEqual(found.id, person.id)

        try realm.write { found.lastName = "Smith" }
        XCTAssertEqual(person.lastName, "Smith", "managed objects are live")

        let dogs = realm.objects(Dog.self).filter("weight > $0", 10)
        XCTAssertEqual(dogs.count, 1)
        XCTAssertEqual(dogs.map(\.name), ["Rex"])
    }

    func testSettingOutsideAWriteIsAnErrorNotACrash() throws {
        let realm = try realm()
        let pet = Pet(value: ["id": 1, "name": "Tom"])
        try realm.write { realm.add(pet) }
        pet.name = "Jerry"
        XCTAssertEqual(pet.name, "Tom")
        XCTAssertEqual(realm.lastError?.code, .notInWrite)
        // Inside a write, a failed set fails the commit and keeps nothing of the transaction.
        XCTAssertThrowsError(try realm.write {
            pet.name = "Spike"
            realm.add(Pet(value: ["id": 1]))  // duplicate primary key
        }) { XCTAssertEqual(($0 as? AtollError)?.code, .duplicatePrimaryKey) }
        XCTAssertEqual(pet.name, "Tom")
    }
}
