import AtollStore
import XCTest

/// Key paths through links and embedded objects, and quantified comparisons over lists.
final class QueryKeyPathTests: QueryTestCase {
    func testToOneLinks() {
        check("pet.name == 'Rex'", [1, 5, 20])
        check("pet == nil", [3, 6, 8, 10, 12, 14, 16, 18, 19])
        check("pet != nil", [1, 2, 4, 5, 7, 9, 11, 13, 15, 17, 20])
        check("pet == 'd2'", [2, 9])
        check("pet == $0", [.string("d4")], [7, 15])
        check("pet.name IN {'Max', 'Luna'}", [7, 13, 15, 17])
    }

    func testTwoLevelsOfLinks() {
        check("pet.vet.city == 'Oslo'", [1, 5, 7, 13, 15, 17, 20])
        check("pet.vet == nil", [3, 4, 6, 8, 10, 11, 12, 14, 16, 18, 19])
        check("pet.vet.city != 'Oslo'", [2, 3, 4, 6, 8, 9, 10, 11, 12, 14, 16, 18, 19])
        check("pet.vet.name BEGINSWITH 'Dr. B'", [2, 9])
        check("pet.name == 'Rex' AND pet.vet.city == 'Oslo'", [1, 5, 20])
        check("pet.vet.city == 'Oslo' AND NOT pet.name == 'Rex'", [7, 13, 15, 17])
    }

    func testLinksListsAndSortTogether() {
        check("age > 1 AND (pet.vet.city == 'Oslo' OR ANY toys.name == 'ball') SORT(pet.vet.name DESC)",
              [13, 17, 2, 1, 5, 7, 15, 11])
    }

    func testEmbeddedObjects() {
        check("address.city == 'Oslo'", [1, 4, 9, 13, 20])
        check("address.city IN {'Bergen', 'Tromsø'}", [2, 7, 15, 17])
        check("address == nil", [3, 6, 8, 10, 12, 14, 16, 18, 19])
        check("address.city ENDSWITH 'ø'", [17])
    }

    func testListsOfPrimitives() {
        check("ANY tags == 'blue'", [1, 2, 8, 17])
        check("SOME tags == 'blue'", [1, 2, 8, 17])
        check("tags == 'blue'", [1, 2, 8, 17])
        check("ALL tags == 'red'", [3, 6, 7, 10, 11, 12, 14, 16, 18, 19, 20])
        check("NONE tags == 'red'", [2, 3, 4, 7, 8, 9, 10, 12, 13, 14, 15, 16, 18, 19])
        check("NOT ANY tags == 'red'", [2, 3, 4, 7, 8, 9, 10, 12, 13, 14, 15, 16, 18, 19])
        check("ANY tags ==[c] 'red'", [1, 4, 5, 6, 11, 17, 20])
        check("ANY tags BEGINSWITH 'bl'", [1, 2, 8, 13, 17])
        check("ANY scores > 9", [4, 8])
        check("ALL scores > 2", all(except: [1, 9, 10]))
        check("NONE scores == 7", all(except: [6]))
        check("ANY scores IN {5, 6}", [2, 12, 20])
        check("ANY scores BETWEEN {6, 8}", [6, 17, 20])
    }

    func testListsOfObjects() {
        check("ANY toys.name == 'ball'", [1, 2, 7, 11, 17])
        check("toys.name == 'bone'", [1, 5, 9, 15])
        check("ALL toys.price > 4", all(except: [1, 5, 9, 15]))
        check("NONE toys.name == 'rope'", all(except: [4, 5, 13, 17]))
        check("ANY toys == 'rope'", [4, 5, 13, 17])
        check("ANY toys.price BETWEEN {4, 6}", [1, 2, 7, 11, 17])
        check("ANY toys.name == 'ball' AND ANY toys.name == 'rope'", [17])
    }

    func testPropertyAgainstProperty() {
        check("tags.@count == scores.@count", [2, 3, 7, 9, 14, 15, 16, 18, 19, 20])
        check("name == nick", [])
        check("name BEGINSWITH[c] nick", [1])
    }

    func testCountAndSize() {
        check("tags.@count == 2", [1, 5, 8, 17])
        check("tags.@count > 1", [1, 5, 8, 17])
        check("tags.@size == 0", [3, 7, 10, 12, 14, 16, 18, 19])
        check("scores.@count >= 2", [1, 4, 6, 12])
        check("toys.@count == 2", [1, 5, 11, 17])
        check("toys.@COUNT == 2", [1, 5, 11, 17])
        check("name.@size == 3", [2, 5])
        check("name.@size == 5", [1, 3, 6, 7, 8, 9, 10, 16, 18, 19])
        check("name.@size > 5", [13, 15, 17, 20])
        check("pet.name.@size == 4", [2, 9, 13, 17])
    }
}
