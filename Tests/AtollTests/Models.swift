import Atoll
import Foundation

// The models the typed-API tests share. `Person`, `Dog` and `BusinessUnitEnum` are the DoggoDB
// model of Realm's SwiftUI quick start, as written there.

class Person: Object, ObjectKeyIdentifiable {
    @Persisted(primaryKey: true) var _id: ObjectId
    @Persisted var firstName = ""
    @Persisted var lastName = ""
    @Persisted var personId = ""
    @Persisted var company = "MongoDB"
    @Persisted var businessUnit = BusinessUnitEnum.engineering
    @Persisted var profileImageUrl: URL?
    @Persisted var dogs: List<Dog>
}

enum BusinessUnitEnum: String, PersistableEnum, CaseIterable {
    case customerEngineering = "Customer Engineering"
    case educationCommunityAndDocs = "Education, Community and Docs"
    case engineering = "Engineering"
    case financeAndOperations = "Finance and Operations"
    case humanResourcesAndRecruiting = "Human Resources and Recruiting"
    case management = "Management"
    case marketing = "Marketing"
    case product = "Product"
    case sales = "Sales"
}

class Dog: Object, ObjectKeyIdentifiable {
    @Persisted(primaryKey: true) var _id: ObjectId
    @Persisted var name = ""
    @Persisted var breed = ""
    @Persisted var weight = 0
    @Persisted var favoriteToy = ""
    @Persisted var profileImageUrl: URL?
    @Persisted var dateLastExamined: Date
    @Persisted var yearOfBirth = 0
    @Persisted var currentCity = ""
    @Persisted(originProperty: "dogs") var person: LinkingObjects<Person>
}

// A model with every kind of property.

class Address: EmbeddedObject {
    @Persisted var street = ""
    @Persisted var city = ""
    @Persisted var country: String?
}

class Owner: Object {
    @Persisted(primaryKey: true) var name = ""
    @Persisted var age = 0
    @Persisted var address: Address?
    @Persisted var previousAddresses: List<Address>
    @Persisted var pets: List<Pet>
    @Persisted var bestPet: Pet?
}

class Pet: Object {
    @Persisted(primaryKey: true) var id = 0
    @Persisted var name = ""
    @Persisted(indexed: true) var age: Int?
    @Persisted var weight: Double = 0
    @Persisted var price = Decimal128(0)
    @Persisted var born = Date(timeIntervalSince1970: 0)
    @Persisted var tag = UUID()
    @Persisted var photo: Data?
    @Persisted var isGood = true
    @Persisted var nicknames: List<String>
    @Persisted var tags: MutableSet<String>
    @Persisted var scores: Map<String, Int>
    @Persisted(originProperty: "pets") var owners: LinkingObjects<Owner>
}

/// A class without primary key.
class Note: Object {
    @Persisted var text = ""
    @Persisted var pet: Pet?
}
