import Atoll
import AtollTestSupport
import Foundation
import XCTest

/// The type-safe query builder (`Results.where`): each operator selects exactly the objects
/// that the same query written in the Realm Query Language selects, and writes the predicate
/// text expected of it, with every value as an argument.
final class QueryTests: XCTestCase {
    // MARK: - Fixture

    /// Five pets, three owners of them, three people with four dogs (one without a person) and
    /// three gadgets, each object chosen so that every query below selects some but not all.
    ///
    /// | pet | name | age | weight | price | isGood | nicknames | tags | scores |
    /// | --- | --- | --- | --- | --- | --- | --- | --- | --- |
    /// | 1 | Rex | 5 | 30.5 | 10.25 | true | Rexy, Boss | brown, big | fetch 8, sit 3 |
    /// | 2 | Max | 2 | 12 | 5 | false | Maxi | black | fetch 5 |
    /// | 3 | Rex | 2 | 8 | 7.5 | true | | | |
    /// | 4 | Zoë | nil | 20 | 99.99 | false | Zo | white, big | sit 9 |
    /// | 5 | rexy | 7 | 40 | 0 | true | it's | | fetch 1, roll 2 |
    ///
    /// Owners: Ann (30, Paris, lived in Lyon and Nice, pets 1 and 2, best pet 1), Bob (40,
    /// Berlin without country, pet 3, no best pet), Cid (50, no address, lived in Paris, pets 4
    /// and 5, best pet 5).
    struct Fixture {
        let realm: Realm
        let pets: [Pet]
        let owners: [Owner]
        let people: [Person]
        let gadgets: [Gadget]
        let born: [Date]
    }

    func fixture() throws -> Fixture {
        let realm = try Realm(configuration: Realm.Configuration(
            fileURL: URL(fileURLWithPath: temporaryRealmPath()),
            objectTypes: [Person.self, Dog.self, Owner.self, Pet.self, Address.self, Note.self, Gadget.self]))
        let born = [1_577_836_800, 1_654_041_600, 1_677_628_800, 1_546_300_800, 1_525_478_400].map { Date(timeIntervalSince1970: $0) }
        let prices = try ["10.25", "5", "7.5", "99.99", "0"].map { try XCTUnwrap(Decimal128($0)) }
        let rows: [(String, Int?, Double, Bool, [String], [String], [(String, Int)], Data?)] = [
            ("Rex", 5, 30.5, true, ["Rexy", "Boss"], ["brown", "big"], [("fetch", 8), ("sit", 3)], Data([1, 2, 3])),
            ("Max", 2, 12, false, ["Maxi"], ["black"], [("fetch", 5)], nil),
            ("Rex", 2, 8, true, [], [], [], nil),
            ("Zoë", nil, 20, false, ["Zo"], ["white", "big"], [("sit", 9)], nil),
            ("rexy", 7, 40, true, ["it's"], [], [("fetch", 1), ("roll", 2)], Data([9])),
        ]
        let pets = rows.enumerated().map { i, row in
            let pet = Pet()
            pet.id = i + 1
            (pet.name, pet.age, pet.weight, pet.isGood) = (row.0, row.1, row.2, row.3)
            pet.price = prices[i]
            pet.born = born[i]
            pet.nicknames.append(objectsIn: row.4)
            pet.tags.insert(objectsIn: row.5)
            for (key, value) in row.6 { pet.scores[key] = value }
            pet.photo = row.7
            return pet
        }
        try realm.write { realm.add(pets) }

        func owner(_ name: String, _ age: Int, _ address: Address?, _ previous: [String], _ pets: [Pet], _ best: Pet?) -> Owner {
            let owner = Owner()
            (owner.name, owner.age, owner.address, owner.bestPet) = (name, age, address, best)
            owner.previousAddresses.append(objectsIn: previous.map { Address(value: ["city": $0]) })
            owner.pets.append(objectsIn: pets)
            return owner
        }
        let owners = [
            owner("Ann", 30, Address(value: ["street": "1 Main", "city": "Paris", "country": "FR"]), ["Lyon", "Nice"], [pets[0], pets[1]], pets[0]),
            owner("Bob", 40, Address(value: ["street": "2 High", "city": "Berlin"]), [], [pets[2]], nil),
            owner("Cid", 50, nil, ["Paris"], [pets[3], pets[4]], pets[4]),
        ]
        try realm.write { realm.add(owners) }

        func person(_ first: String, _ last: String, _ unit: BusinessUnitEnum, _ dogs: [(String, Int)]) -> Person {
            let person = Person()
            (person.firstName, person.lastName, person.businessUnit) = (first, last, unit)
            person.dogs.append(objectsIn: dogs.map { Dog(value: ["name": $0.0, "weight": $0.1]) })
            return person
        }
        let people = [
            person("Ann", "Lee", .sales, [("Rex", 20), ("Fido", 8)]),
            person("Bo", "Bo", .engineering, []),
            person("Cy", "Cyrus", .marketing, [("Spot", 15)]),
        ]
        people[0].profileImageUrl = URL(string: "https://example.com/ann.png")
        try realm.write {
            realm.add(people)
            realm.add(Dog(value: ["name": "Stray", "weight": 5]))
        }

        func gadget(_ id: Int, _ label: String?, _ size: GadgetSize, _ optionalSize: GadgetSize?, _ unit: BusinessUnitEnum?,
                    _ ratio: Float, _ low: Int, _ high: Int, _ flag: Bool?, _ readings: [Int]) -> Gadget {
            let gadget = Gadget()
            (gadget.id, gadget.label, gadget.size, gadget.optionalSize, gadget.unit) = (id, label, size, optionalSize, unit)
            (gadget.ratio, gadget.low, gadget.high, gadget.flag) = (ratio, low, high, flag)
            gadget.readings.append(objectsIn: readings)
            return gadget
        }
        let gadgets = [
            gadget(1, "alpha", .small, nil, nil, 0.5, 1, 5, nil, [1, 2, 3]),
            gadget(2, nil, .large, .medium, .sales, 1.5, 6, 2, true, [10]),
            gadget(3, "beta", .medium, .large, .engineering, 2.5, 3, 3, false, []),
        ]
        try realm.write { realm.add(gadgets) }
        return Fixture(realm: realm, pets: pets, owners: owners, people: people, gadgets: gadgets, born: born)
    }

    // MARK: - Helpers

    /// Asserts that a typed query and the same query in RQL run without error and select
    /// exactly `expected` (keys of the objects, in the realm's order); with `text`, that the
    /// typed query wrote that predicate.
    func check<T: Object, K: Equatable>(_ realm: Realm, _ query: (Query<T>) -> Query<Bool>, _ rql: String, _ arguments: [Any],
                                        _ expected: [K], key: (T) -> K, text: String?,
                                        file: StaticString, line: UInt) {
        let typed = realm.objects(T.self).where(query)
        let written = realm.objects(T.self).filter(rql, arguments: arguments)
        XCTAssertNil(typed.error, "typed query: \(typed.error?.message ?? "")", file: file, line: line)
        XCTAssertNil(written.error, "RQL \(rql): \(written.error?.message ?? "")", file: file, line: line)
        XCTAssertEqual(typed.map(key), expected, "typed query (\(predicate(of: typed)))", file: file, line: line)
        XCTAssertEqual(written.map(key), expected, "RQL \(rql)", file: file, line: line)
        if let text { XCTAssertEqual(predicate(of: typed), text, file: file, line: line) }
    }

    func pets(_ f: Fixture, _ query: (Query<Pet>) -> Query<Bool>, _ rql: String, _ arguments: Any..., ids: [Int], text: String? = nil,
              file: StaticString = #filePath, line: UInt = #line) {
        check(f.realm, query, rql, arguments, ids, key: \.id, text: text, file: file, line: line)
    }

    func owners(_ f: Fixture, _ query: (Query<Owner>) -> Query<Bool>, _ rql: String, _ arguments: Any..., names: [String], text: String? = nil,
                file: StaticString = #filePath, line: UInt = #line) {
        check(f.realm, query, rql, arguments, names, key: \.name, text: text, file: file, line: line)
    }

    func people(_ f: Fixture, _ query: (Query<Person>) -> Query<Bool>, _ rql: String, _ arguments: Any..., names: [String], text: String? = nil,
                file: StaticString = #filePath, line: UInt = #line) {
        check(f.realm, query, rql, arguments, names, key: \.firstName, text: text, file: file, line: line)
    }

    func dogs(_ f: Fixture, _ query: (Query<Dog>) -> Query<Bool>, _ rql: String, _ arguments: Any..., names: [String], text: String? = nil,
              file: StaticString = #filePath, line: UInt = #line) {
        check(f.realm, query, rql, arguments, names, key: \.name, text: text, file: file, line: line)
    }

    func gadgets(_ f: Fixture, _ query: (Query<Gadget>) -> Query<Bool>, _ rql: String, _ arguments: Any..., ids: [Int], text: String? = nil,
                 file: StaticString = #filePath, line: UInt = #line) {
        check(f.realm, query, rql, arguments, ids, key: \.id, text: text, file: file, line: line)
    }

    /// The predicate of results as they describe their query: `Results<Pet>((age > $0)): 2
    /// objects` gives `age > $0`.
    func predicate<T>(of results: Results<T>) -> String {
        let description = results.description
        guard let start = description.range(of: ">(("), let end = description.range(of: ")): ", options: .backwards),
              start.upperBound <= end.lowerBound else { return description }
        return String(description[start.upperBound..<end.lowerBound])
    }

    // MARK: - Comparisons

    func testTheCombinedQueryOfTheDocs() throws {
        let f = try fixture()
        pets(f, { $0.name == "Rex" && $0.age > 3 }, "name == $0 AND age > $1", "Rex", 3, ids: [1], text: "(name == $0 AND age > $1)")
    }

    func testEqualityOfEachValueType() throws {
        let f = try fixture()
        pets(f, { $0.name == "Rex" }, "name == $0", "Rex", ids: [1, 3], text: "name == $0")
        pets(f, { $0.name != "Rex" }, "name != $0", "Rex", ids: [2, 4, 5], text: "name != $0")
        pets(f, { $0.id == 4 }, "id == $0", 4, ids: [4])
        pets(f, { $0.age == 2 }, "age == $0", 2, ids: [2, 3])
        pets(f, { $0.weight == 12 }, "weight == $0", 12.0, ids: [2])
        pets(f, { $0.price == f.pets[2].price }, "price == $0", f.pets[2].price, ids: [3])
        pets(f, { $0.born == f.born[1] }, "born == $0", f.born[1], ids: [2])
        pets(f, { $0.tag == f.pets[3].tag }, "tag == $0", f.pets[3].tag, ids: [4])
        pets(f, { $0.isGood == false }, "isGood == $0", false, ids: [2, 4])
        pets(f, { $0.photo == Data([9]) }, "photo == $0", Data([9]), ids: [5])
        people(f, { $0._id == f.people[1]._id }, "_id == $0", f.people[1]._id, names: ["Bo"])
        let url = try XCTUnwrap(URL(string: "https://example.com/ann.png"))
        people(f, { $0.profileImageUrl == url }, "profileImageUrl == $0", url.absoluteString, names: ["Ann"])
        gadgets(f, { $0.ratio == 1.5 }, "ratio == $0", Float(1.5), ids: [2])
        gadgets(f, { $0.flag == true }, "flag == $0", true, ids: [2])
    }

    func testOrderOfNumbersAndDates() throws {
        let f = try fixture()
        pets(f, { $0.age > 3 }, "age > $0", 3, ids: [1, 5], text: "age > $0")
        pets(f, { $0.age >= 5 }, "age >= $0", 5, ids: [1, 5], text: "age >= $0")
        pets(f, { $0.age < 5 }, "age < $0", 5, ids: [2, 3], text: "age < $0")
        pets(f, { $0.age <= 2 }, "age <= $0", 2, ids: [2, 3], text: "age <= $0")
        pets(f, { $0.weight < 12.5 }, "weight < $0", 12.5, ids: [2, 3])
        let seven = try XCTUnwrap(Decimal128("7"))
        pets(f, { $0.price > seven }, "price > $0", seven, ids: [1, 3, 4])
        pets(f, { $0.born < f.born[0] }, "born < $0", f.born[0], ids: [4, 5])
        pets(f, { $0.born >= f.born[1] }, "born >= $0", f.born[1], ids: [2, 3])
        gadgets(f, { $0.ratio > 1 }, "ratio > $0", Float(1), ids: [2, 3])
    }

    func testComparingTwoProperties() throws {
        let f = try fixture()
        gadgets(f, { $0.low < $0.high }, "low < high", ids: [1], text: "low < high")
        gadgets(f, { $0.low > $0.high }, "low > high", ids: [2])
        gadgets(f, { $0.low == $0.high }, "low == high", ids: [3])
        gadgets(f, { $0.low != $0.high }, "low != high", ids: [1, 2])
        gadgets(f, { $0.low >= $0.high }, "low >= high", ids: [2, 3])
        gadgets(f, { $0.low <= $0.high }, "low <= high", ids: [1, 3])
        people(f, { $0.firstName == $0.lastName }, "firstName == lastName", names: ["Bo"])
        people(f, { $0.firstName != $0.lastName }, "firstName != lastName", names: ["Ann", "Cy"])
        people(f, { $0.lastName.starts(with: $0.firstName) }, "lastName BEGINSWITH firstName", names: ["Bo", "Cy"],
               text: "lastName BEGINSWITH firstName")
        people(f, { $0.lastName.ends(with: $0.firstName) }, "lastName ENDSWITH firstName", names: ["Bo"])
        people(f, { $0.lastName.contains($0.firstName, options: .caseInsensitive) }, "lastName CONTAINS[c] firstName", names: ["Bo", "Cy"])
        people(f, { $0.lastName.equals($0.firstName, options: .caseInsensitive) }, "lastName ==[c] firstName", names: ["Bo"])
        people(f, { $0.lastName.notEquals($0.firstName) }, "lastName != firstName", names: ["Ann", "Cy"])
        people(f, { $0.lastName.like($0.firstName) }, "lastName LIKE firstName", names: ["Bo"])
    }

    func testNil() throws {
        let f = try fixture()
        pets(f, { $0.age == nil }, "age == nil", ids: [4], text: "age == $0")
        pets(f, { $0.age != nil }, "age != nil", ids: [1, 2, 3, 5])
        pets(f, { $0.photo == nil }, "photo == nil", ids: [2, 3, 4])
        pets(f, { $0.photo != nil }, "photo != nil", ids: [1, 5])
        // `!=` holds for null against a value, as in Realm.
        pets(f, { $0.age != 2 }, "age != $0", 2, ids: [1, 4, 5])
        owners(f, { $0.bestPet == nil }, "bestPet == nil", names: ["Bob"])
        owners(f, { $0.bestPet != nil }, "bestPet != nil", names: ["Ann", "Cid"])
        owners(f, { $0.address == nil }, "address == nil", names: ["Cid"])
        owners(f, { $0.address.country == nil }, "address.country == nil", names: ["Bob", "Cid"])
        gadgets(f, { $0.label == nil }, "label == nil", ids: [2])
        gadgets(f, { $0.optionalSize == nil }, "optionalSize == nil", ids: [1])
        gadgets(f, { $0.unit == nil }, "unit == nil", ids: [1])
        gadgets(f, { $0.flag == nil }, "flag == nil", ids: [1])
        gadgets(f, { $0.flag != nil }, "flag != nil", ids: [2, 3])
    }

    func testBooleanPropertiesAsConditions() throws {
        let f = try fixture()
        pets(f, { $0.isGood }, "isGood == true", ids: [1, 3, 5], text: "isGood == true")
        pets(f, { !$0.isGood }, "isGood == false", ids: [2, 4], text: "isGood == false")
        pets(f, { $0.isGood && $0.age < 3 }, "isGood == true AND age < $0", 3, ids: [3])
        gadgets(f, { !$0.flag.in([true]) }, "NOT flag IN {true}", ids: [1, 3], text: "NOT (flag IN $0)")
    }

    // MARK: - Logic

    func testAndOrNot() throws {
        let f = try fixture()
        pets(f, { $0.name == "Max" || $0.age > 6 }, "name == $0 OR age > $1", "Max", 6, ids: [2, 5], text: "(name == $0 OR age > $1)")
        pets(f, { !($0.name == "Rex") }, "NOT name == $0", "Rex", ids: [2, 4, 5], text: "NOT (name == $0)")
        pets(f, { !($0.name == "Rex" || $0.age == nil) }, "NOT (name == 'Rex' OR age == nil)", ids: [2, 5],
             text: "NOT (name == $0 OR age == $1)")
        // Swift's precedence: && before ||.
        pets(f, { $0.name == "Max" || $0.name == "Rex" && $0.age > 3 }, "name == 'Max' OR name == 'Rex' AND age > 3", ids: [1, 2],
             text: "(name == $0 OR (name == $1 AND age > $2))")
        pets(f, { ($0.name == "Max" || $0.name == "Rex") && $0.age > 3 }, "(name == 'Max' OR name == 'Rex') AND age > 3", ids: [1])
        // `NOT` matches where the condition is null: Zoë has no age.
        pets(f, { !($0.age > 3) }, "NOT age > 3", ids: [2, 3, 4])
    }

    func testValuesAreArgumentsNotText() throws {
        let f = try fixture()
        pets(f, { $0.nicknames.contains("it's") }, "$0 IN nicknames", "it's", ids: [5], text: "$0 IN nicknames")
        pets(f, { $0.name == "Rex' OR name != '" }, "name == $0", "Rex' OR name != '", ids: [], text: "name == $0")
        pets(f, { $0.name.contains("\"") || $0.name.starts(with: "$1") }, "name CONTAINS $0 OR name BEGINSWITH $1", "\"", "$1", ids: [],
             text: "(name CONTAINS $0 OR name BEGINSWITH $1)")
    }

    func testWhereAfterFilterNumbersItsArgumentsAfterTheFilters() throws {
        let f = try fixture()
        let results = f.realm.objects(Pet.self).filter("age > $0", 2).where { $0.name == "Rex" }
        XCTAssertNil(results.error)
        XCTAssertEqual(results.map(\.id), [1])
        XCTAssertEqual(predicate(of: results), "age > $0) AND (name == $1")
        let chained = f.realm.objects(Pet.self).where { $0.age > 2 }.where { $0.name.starts(with: "R", options: .caseInsensitive) }
        XCTAssertEqual(chained.map(\.id), [1, 5])
        XCTAssertEqual(chained.sorted(byKeyPath: "age", ascending: false).map(\.id), [5, 1])
    }

    // MARK: - Strings

    func testStringOperators() throws {
        let f = try fixture()
        pets(f, { $0.name.contains("ex") }, "name CONTAINS $0", "ex", ids: [1, 3, 5], text: "name CONTAINS $0")
        pets(f, { $0.name.contains("EX") }, "name CONTAINS $0", "EX", ids: [])
        pets(f, { $0.name.starts(with: "R") }, "name BEGINSWITH $0", "R", ids: [1, 3], text: "name BEGINSWITH $0")
        pets(f, { $0.name.ends(with: "x") }, "name ENDSWITH $0", "x", ids: [1, 2, 3], text: "name ENDSWITH $0")
        pets(f, { $0.name.like("R?x") }, "name LIKE $0", "R?x", ids: [1, 3], text: "name LIKE $0")
        pets(f, { $0.name.like("*e*") }, "name LIKE $0", "*e*", ids: [1, 3, 5])
        pets(f, { $0.name.equals("Rex") }, "name == $0", "Rex", ids: [1, 3], text: "name == $0")
        pets(f, { $0.name.notEquals("Rex") }, "name != $0", "Rex", ids: [2, 4, 5], text: "name != $0")
        gadgets(f, { $0.label.starts(with: "a") }, "label BEGINSWITH $0", "a", ids: [1])
        gadgets(f, { $0.label.like("?eta") }, "label LIKE $0", "?eta", ids: [3])
        pets(f, { $0.photo.contains(Data([2, 3])) }, "photo CONTAINS $0", Data([2, 3]), ids: [1])
    }

    func testCaseAndDiacriticInsensitiveOptions() throws {
        let f = try fixture()
        pets(f, { $0.name.contains("EX", options: .caseInsensitive) }, "name CONTAINS[c] $0", "EX", ids: [1, 3, 5], text: "name CONTAINS[c] $0")
        pets(f, { $0.name.starts(with: "r", options: .caseInsensitive) }, "name BEGINSWITH[c] $0", "r", ids: [1, 3, 5],
             text: "name BEGINSWITH[c] $0")
        pets(f, { $0.name.ends(with: "X", options: .caseInsensitive) }, "name ENDSWITH[c] $0", "X", ids: [1, 2, 3])
        pets(f, { $0.name.like("r*", caseInsensitive: true) }, "name LIKE[c] $0", "r*", ids: [1, 3, 5], text: "name LIKE[c] $0")
        pets(f, { $0.name.equals("rex", options: .caseInsensitive) }, "name ==[c] $0", "rex", ids: [1, 3], text: "name ==[c] $0")
        pets(f, { $0.name.notEquals("rex", options: .caseInsensitive) }, "name !=[c] $0", "rex", ids: [2, 4, 5])
        pets(f, { $0.name.equals("Zoe") }, "name == $0", "Zoe", ids: [])
        pets(f, { $0.name.equals("Zoe", options: .diacriticInsensitive) }, "name ==[d] $0", "Zoe", ids: [4], text: "name ==[d] $0")
        pets(f, { $0.name.equals("zoe", options: [.caseInsensitive, .diacriticInsensitive]) }, "name ==[cd] $0", "zoe", ids: [4],
             text: "name ==[cd] $0")
        pets(f, { $0.name.ends(with: "oe", options: .diacriticInsensitive) }, "name ENDSWITH[d] $0", "oe", ids: [4])
    }

    // MARK: - IN and ranges

    func testInAndRanges() throws {
        let f = try fixture()
        pets(f, { $0.age.in([2, 7]) }, "age IN $0", [2, 7], ids: [2, 3, 5], text: "age IN $0")
        pets(f, { $0.age.in([nil, 7]) }, "age IN {nil, 7}", ids: [4, 5])
        pets(f, { $0.name.in(["Max", "Zoë"]) }, "name IN {'Max', 'Zoë'}", ids: [2, 4])
        pets(f, { $0.age.contains(2...5) }, "age BETWEEN {$0, $1}", 2, 5, ids: [1, 2, 3], text: "age BETWEEN {$0, $1}")
        pets(f, { $0.age.contains(2..<5) }, "age >= $0 AND age < $1", 2, 5, ids: [2, 3], text: "(age >= $0 AND age < $1)")
        pets(f, { $0.id.contains(2...3) }, "id BETWEEN {2, 3}", ids: [2, 3])
        pets(f, { $0.weight.contains(10.0...30.0) }, "weight BETWEEN {10.0, 30.0}", ids: [2, 4])
        pets(f, { $0.born.contains(f.born[4]..<f.born[0]) }, "born >= $0 AND born < $1", f.born[4], f.born[0], ids: [4, 5])
        pets(f, { $0.name.contains("Max"..."Rex") }, "name BETWEEN {'Max', 'Rex'}", ids: [1, 2, 3])
        owners(f, { $0.bestPet.in([f.pets[0], f.pets[4]]) }, "bestPet IN $0", [f.pets[0], f.pets[4]], names: ["Ann", "Cid"])
    }

    // MARK: - Enums

    func testEnums() throws {
        let f = try fixture()
        people(f, { $0.businessUnit == .sales }, "businessUnit == $0", "Sales", names: ["Ann"], text: "businessUnit == $0")
        people(f, { $0.businessUnit != .engineering }, "businessUnit != 'Engineering'", names: ["Ann", "Cy"])
        people(f, { $0.businessUnit.in([.sales, .engineering]) }, "businessUnit IN {'Sales', 'Engineering'}", names: ["Ann", "Bo"])
        people(f, { $0.businessUnit.rawValue.starts(with: "Eng") }, "businessUnit BEGINSWITH 'Eng'", names: ["Bo"])
        people(f, { $0.businessUnit.rawValue.contains("ING", options: .caseInsensitive) }, "businessUnit CONTAINS[c] 'ing'",
               names: ["Bo", "Cy"])
        gadgets(f, { $0.size == .large }, "size == 3", ids: [2])
        gadgets(f, { $0.size > .small }, "size > 1", ids: [2, 3], text: "size > $0")
        gadgets(f, { $0.size >= .medium }, "size >= 2", ids: [2, 3])
        gadgets(f, { $0.size < .large }, "size < 3", ids: [1, 3])
        gadgets(f, { $0.size <= .medium }, "size <= 2", ids: [1, 3])
        gadgets(f, { $0.size.in([.small, .large]) }, "size IN {1, 3}", ids: [1, 2])
        gadgets(f, { $0.size.rawValue > 1 }, "size > 1", ids: [2, 3])
        gadgets(f, { $0.optionalSize >= .medium }, "optionalSize >= 2", ids: [2, 3])
        gadgets(f, { $0.optionalSize < .large }, "optionalSize < 3", ids: [2])
        gadgets(f, { $0.optionalSize == .large }, "optionalSize == 3", ids: [3])
        gadgets(f, { $0.unit == .sales }, "unit == 'Sales'", ids: [2])
        gadgets(f, { $0.unit.rawValue.ends(with: "ing") }, "unit ENDSWITH 'ing'", ids: [3])
    }

    // MARK: - Key paths

    func testKeyPathsThroughLinksAndEmbeddedObjects() throws {
        let f = try fixture()
        owners(f, { $0.bestPet.name == "Rex" }, "bestPet.name == 'Rex'", names: ["Ann"], text: "bestPet.name == $0")
        owners(f, { $0.bestPet.age > 5 }, "bestPet.age > 5", names: ["Cid"])
        owners(f, { $0.bestPet.scores.count == 2 }, "bestPet.scores.@count == 2", names: ["Ann", "Cid"], text: "bestPet.scores.@count == $0")
        owners(f, { $0.bestPet == f.pets[0] }, "bestPet == $0", f.pets[0], names: ["Ann"], text: "bestPet == $0")
        owners(f, { $0.bestPet != f.pets[0] }, "bestPet != $0", f.pets[0], names: ["Bob", "Cid"])
        owners(f, { $0.address.city == "Paris" }, "address.city == 'Paris'", names: ["Ann"], text: "address.city == $0")
        owners(f, { $0.address.city.starts(with: "B") }, "address.city BEGINSWITH 'B'", names: ["Bob"])
        owners(f, { $0.address.country == "FR" }, "address.country == 'FR'", names: ["Ann"])
    }

    func testKeyPathsThroughListsSetsAndLinkingObjects() throws {
        let f = try fixture()
        owners(f, { $0.pets.name == "Rex" }, "ANY pets.name == 'Rex'", names: ["Ann", "Bob"], text: "ANY pets.name == $0")
        owners(f, { $0.pets.age > 4 }, "ANY pets.age > 4", names: ["Ann", "Cid"], text: "ANY pets.age > $0")
        owners(f, { $0.pets.name.starts(with: "Z") }, "ANY pets.name BEGINSWITH 'Z'", names: ["Cid"])
        owners(f, { !$0.pets.isGood }, "ANY pets.isGood == false", names: ["Ann", "Cid"], text: "ANY pets.isGood == false")
        owners(f, { $0.pets.tags == "black" }, "ANY pets.tags == 'black'", names: ["Ann"])
        owners(f, { $0.previousAddresses.city == "Nice" }, "ANY previousAddresses.city == 'Nice'", names: ["Ann"])
        owners(f, { $0.previousAddresses.city == "Paris" }, "ANY previousAddresses.city == 'Paris'", names: ["Cid"])
        people(f, { $0.dogs.weight > 18 }, "ANY dogs.weight > 18", names: ["Ann"])
        people(f, { $0.dogs.name.in(["Spot", "Fido"]) }, "ANY dogs.name IN {'Spot', 'Fido'}", names: ["Ann", "Cy"], text: "ANY dogs.name IN $0")
        pets(f, { $0.owners.name == "Ann" }, "ANY owners.name == 'Ann'", ids: [1, 2])
        pets(f, { $0.owners.age >= 40 }, "ANY owners.age >= 40", ids: [3, 4, 5])
        dogs(f, { $0.person.firstName == "Ann" }, "ANY person.firstName == 'Ann'", names: ["Rex", "Fido"])
        dogs(f, { $0.person.count == 0 }, "person.@count == 0", names: ["Stray"], text: "person.@count == $0")
        // A key path through a collection on the right is turned around.
        XCTAssertEqual(predicate(of: f.realm.objects(Owner.self).where { $0.name == $0.pets.name }), "ANY pets.name == name")
    }

    // MARK: - Collections

    func testCollectionsOfObjects() throws {
        let f = try fixture()
        owners(f, { $0.pets.count == 2 }, "pets.@count == 2", names: ["Ann", "Cid"], text: "pets.@count == $0")
        owners(f, { $0.previousAddresses.count == 0 }, "previousAddresses.@count == 0", names: ["Bob"])
        owners(f, { $0.pets.contains(f.pets[2]) }, "$0 IN pets", f.pets[2], names: ["Bob"], text: "$0 IN pets")
        owners(f, { $0.pets.containsAny(in: [f.pets[1], f.pets[3]]) }, "ANY pets IN $0", [f.pets[1], f.pets[3]], names: ["Ann", "Cid"],
               text: "ANY pets IN $0")
        pets(f, { $0.owners.contains(f.owners[2]) }, "$0 IN owners", f.owners[2], ids: [4, 5])
        // A collection reached through another: some pet's nicknames hold the value.
        owners(f, { $0.pets.nicknames.contains("Boss") }, "ANY pets.nicknames == 'Boss'", names: ["Ann"], text: "$0 IN pets.nicknames")
        owners(f, { $0.pets.nicknames.count == 2 }, "ANY pets.nicknames.@count == 2", names: ["Ann"], text: "ANY pets.nicknames.@count == $0")
    }

    func testListsAndSetsOfValues() throws {
        let f = try fixture()
        pets(f, { $0.nicknames.contains("Boss") }, "$0 IN nicknames", "Boss", ids: [1], text: "$0 IN nicknames")
        pets(f, { $0.nicknames == "Maxi" }, "ANY nicknames == 'Maxi'", ids: [2], text: "ANY nicknames == $0")
        pets(f, { $0.nicknames != "Maxi" }, "ANY nicknames != 'Maxi'", ids: [1, 4, 5])
        pets(f, { $0.nicknames.count == 1 }, "nicknames.@count == 1", ids: [2, 4, 5])
        pets(f, { $0.nicknames.containsAny(in: ["Maxi", "Boss"]) }, "ANY nicknames IN {'Maxi', 'Boss'}", ids: [1, 2])
        pets(f, { $0.tags.contains("big") }, "'big' IN tags", ids: [1, 4])
        pets(f, { $0.tags == "black" }, "ANY tags == 'black'", ids: [2])
        pets(f, { $0.tags.count == 0 }, "tags.@count == 0", ids: [3, 5])
        pets(f, { $0.tags.containsAny(in: ["white", "black"]) }, "ANY tags IN {'white', 'black'}", ids: [2, 4])
        gadgets(f, { $0.readings.contains(3) }, "3 IN readings", ids: [1])
        gadgets(f, { $0.readings > 2 }, "ANY readings > 2", ids: [1, 2], text: "ANY readings > $0")
        gadgets(f, { $0.readings >= 10 }, "ANY readings >= 10", ids: [2])
        gadgets(f, { $0.readings < 2 }, "ANY readings < 2", ids: [1])
        gadgets(f, { $0.readings <= 3 }, "ANY readings <= 3", ids: [1])
        gadgets(f, { $0.readings.containsAny(in: [3, 10]) }, "ANY readings IN {3, 10}", ids: [1, 2])
    }

    func testAggregatesOfCollectionsOfValues() throws {
        let f = try fixture()
        gadgets(f, { $0.readings.count == 0 }, "readings.@count == 0", ids: [3])
        gadgets(f, { $0.readings.min == 1 }, "readings.@min == 1", ids: [1], text: "readings.@min == $0")
        gadgets(f, { $0.readings.max > 5 }, "readings.@max > 5", ids: [2], text: "readings.@max > $0")
        gadgets(f, { $0.readings.sum == 6 }, "readings.@sum == 6", ids: [1], text: "readings.@sum == $0")
        gadgets(f, { $0.readings.avg == 2 }, "readings.@avg == 2", ids: [1], text: "readings.@avg == $0")
        // Every element in range: @min and @max.
        gadgets(f, { $0.readings.contains(1...3) }, "readings.@min >= 1 AND readings.@max <= 3", ids: [1],
                text: "(readings.@min >= $0 AND readings.@max <= $1)")
        gadgets(f, { $0.readings.contains(0..<10) }, "readings.@min >= 0 AND readings.@max < 10", ids: [1])
        gadgets(f, { $0.readings.contains(0..<11) }, "readings.@min >= 0 AND readings.@max < 11", ids: [1, 2])
    }

    func testAggregatesThroughCollectionsOfObjects() throws {
        let f = try fixture()
        owners(f, { $0.pets.age.max >= 5 }, "pets.@max.age >= 5", names: ["Ann", "Cid"], text: "pets.@max.age >= $0")
        owners(f, { $0.pets.age.min == 2 }, "pets.@min.age == 2", names: ["Ann", "Bob"], text: "pets.@min.age == $0")
        // Nulls are left out: Cid's average is 7.
        owners(f, { $0.pets.age.avg > 4 }, "pets.@avg.age > 4", names: ["Cid"], text: "pets.@avg.age > $0")
        owners(f, { $0.pets.age.sum == 7 }, "pets.@sum.age == 7", names: ["Ann", "Cid"], text: "pets.@sum.age == $0")
        owners(f, { $0.pets.weight.sum > 50 }, "pets.@sum.weight > 50", names: ["Cid"])
        people(f, { $0.dogs.weight.avg < 15 }, "dogs.@avg.weight < 15", names: ["Ann"])
    }

    func testMaps() throws {
        let f = try fixture()
        pets(f, { $0.scores.keys == "sit" }, "ANY scores.@keys == 'sit'", ids: [1, 4], text: "ANY scores.@keys == $0")
        pets(f, { $0.scores.keys.starts(with: "r") }, "ANY scores.@keys BEGINSWITH 'r'", ids: [5])
        pets(f, { $0.scores.values > 6 }, "ANY scores.@values > 6", ids: [1, 4], text: "ANY scores.@values > $0")
        pets(f, { $0.scores.values.contains(1...2) }, "ANY scores.@values BETWEEN {1, 2}", ids: [5])
        pets(f, { $0.scores.contains(5) }, "5 IN scores", ids: [2], text: "$0 IN scores")
        pets(f, { $0.scores.containsAny(in: [2, 9]) }, "ANY scores IN {2, 9}", ids: [4, 5], text: "ANY scores IN $0")
        pets(f, { $0.scores.count == 2 }, "scores.@count == 2", ids: [1, 5], text: "scores.@count == $0")
        pets(f, { $0.scores.min == 3 }, "scores.@min == 3", ids: [1])
        pets(f, { $0.scores.max >= 8 }, "scores.@max >= 8", ids: [1, 4], text: "scores.@max >= $0")
        pets(f, { $0.scores.sum == 3 }, "scores.@sum == 3", ids: [5])
        pets(f, { $0.scores.avg > 4 }, "scores.@avg > 4", ids: [1, 2, 4])
        pets(f, { $0.scores.contains(1...5) }, "scores.@min >= 1 AND scores.@max <= 5", ids: [2, 5])
    }

    // MARK: - Subqueries and ranges through collections

    func testCountOfAConditionIsASubquery() throws {
        let f = try fixture()
        owners(f, { ($0.pets.age > 1 && $0.pets.name.starts(with: "R")).count >= 1 },
               "SUBQUERY(pets, $p, $p.age > 1 AND $p.name BEGINSWITH 'R').@count >= 1", names: ["Ann", "Bob"],
               text: "SUBQUERY(pets, $x1, ($x1.age > $0 AND $x1.name BEGINSWITH $1)).@count >= $2")
        // One pet must match both: Ann's Max is 2 and her Rex is 5, so no owner has a Max older
        // than 4, though ANY on each condition alone matches Ann.
        owners(f, { ($0.pets.name == "Max" && $0.pets.age > 4).count > 0 }, "SUBQUERY(pets, $p, $p.name == 'Max' AND $p.age > 4).@count > 0",
               names: [])
        owners(f, { $0.pets.name == "Max" && $0.pets.age > 4 }, "ANY pets.name == 'Max' AND ANY pets.age > 4", names: ["Ann"])
        // Key paths that do not go through the collection start from the queried object.
        owners(f, { ($0.pets.age > 1 && $0.age > 35).count > 0 }, "SUBQUERY(pets, $p, $p.age > 1 AND age > 35).@count > 0",
               names: ["Bob", "Cid"], text: "SUBQUERY(pets, $x1, ($x1.age > $0 AND age > $1)).@count > $2")
        people(f, { ($0.dogs.weight >= 8).count == 2 }, "SUBQUERY(dogs, $d, $d.weight >= 8).@count == 2", names: ["Ann"])
    }

    func testRangesThroughCollectionsHoldForOneElement() throws {
        let f = try fixture()
        owners(f, { $0.pets.age.contains(5...5) }, "ANY pets.age BETWEEN {5, 5}", names: ["Ann"], text: "ANY pets.age BETWEEN {$0, $1}")
        owners(f, { $0.pets.age.contains(6..<8) }, "SUBQUERY(pets, $p, $p.age >= 6 AND $p.age < 8).@count > 0", names: ["Cid"],
               text: "SUBQUERY(pets, $x1, ($x1.age >= $0 AND $x1.age < $1)).@count > $2")
        // Ann has pets of 5 and 2: one is >= 3 and one is < 5, but none is in 3..<5.
        owners(f, { $0.pets.age.contains(3..<5) }, "SUBQUERY(pets, $p, $p.age >= 3 AND $p.age < 5).@count > 0", names: [])
        owners(f, { $0.pets.age.contains(2..<3) }, "SUBQUERY(pets, $p, $p.age >= 2 AND $p.age < 3).@count > 0", names: ["Ann", "Bob"])
    }

    // MARK: - Errors

    /// Asserts that typed results fail with `.queryInvalid` and a message containing `message`:
    /// empty, with the error in `error` and, once read, in `realm.lastError`.
    func assertInvalid<T>(_ results: Results<T>, _ message: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(results.error?.code, .queryInvalid, file: file, line: line)
        XCTAssertTrue(results.error?.message.contains(message) ?? false, "\(results.error?.message ?? "no error")", file: file, line: line)
        XCTAssertEqual(results.count, 0, file: file, line: line)
        XCTAssertEqual(results.realm?.lastError?.code, .queryInvalid, file: file, line: line)
        XCTAssertEqual(results.realm?.lastError?.message, results.error?.message, file: file, line: line)
    }

    func testAKeyPathToAPropertyThatIsNotPersistedIsAnError() throws {
        let f = try fixture()
        assertInvalid(f.realm.objects(Pet.self).where { $0.isInvalidated == false },
                      "a key path of 'Pet' to Bool reads no @Persisted property")
        assertInvalid(f.realm.objects(Owner.self).where { $0.bestPet.isFrozen == false && $0.age > 3 }, "reads no @Persisted property")
    }

    func testObjectsThatAreNotInTheRealmAreAnError() throws {
        let f = try fixture()
        assertInvalid(f.realm.objects(Owner.self).where { $0.bestPet == Pet() }, "a 'Pet' in a query must be an object of the realm")
        assertInvalid(f.realm.objects(Owner.self).where { $0.pets.containsAny(in: [f.pets[0], Pet()]) }, "must be an object of the realm")
        assertInvalid(f.realm.objects(Owner.self).where { $0.address == Address() }, "an embedded 'Address' cannot be compared")
        let other = try Realm(configuration: Realm.Configuration(fileURL: URL(fileURLWithPath: temporaryRealmPath()), objectTypes: [Pet.self, Owner.self, Address.self]))
        let stranger = Pet(value: ["id": 1])
        try other.write { other.add(stranger) }
        assertInvalid(f.realm.objects(Owner.self).where { $0.bestPet == stranger }, "belongs to another realm")
    }

    func testOperationsThatNeedACollectionAreErrorsWithoutOne() throws {
        let f = try fixture()
        assertInvalid(f.realm.objects(Pet.self).where { $0.age.max > 3 }, "@max needs a key path through a list, set or linking objects; 'age'")
        assertInvalid(f.realm.objects(Pet.self).where { ($0.age > 3).count > 0 }, "the count of a condition needs a key path through")
        assertInvalid(f.realm.objects(Owner.self).where { $0.pets.name == $0.previousAddresses.city },
                      "two key paths through collections cannot be compared")
        assertInvalid(f.realm.objects(Pet.self).where { $0.scores.values.contains(1..<3) }, "a half-open range cannot be applied to 'scores.@values'")
    }

    func testAQueryTheStoreRejectsFailsAsTheSameFilterDoes() throws {
        let f = try fixture()
        // `[c]` applies to strings only; the builder leaves that to the store.
        let typed = f.realm.objects(Pet.self).where { $0.photo.contains(Data([1]), options: .caseInsensitive) }
        let written = f.realm.objects(Pet.self).filter("photo CONTAINS[c] $0", Data([1]))
        XCTAssertNotNil(written.error)
        XCTAssertEqual(typed.error, written.error)
        XCTAssertEqual(typed.count, 0)
        XCTAssertEqual(f.realm.lastError, written.error)
    }
}
