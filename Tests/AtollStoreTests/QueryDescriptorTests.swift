import AtollStore
import XCTest

/// SORT, DISTINCT and LIMIT, alone and combined, in the order written.
final class QueryDescriptorTests: QueryTestCase {
    func testSort() {
        check("age > 40 SORT(age DESC)", [8, 16, 6, 10, 15])
        check("SORT(age ASC)", [19, 20, 7, 17, 5, 18, 2, 12, 13, 1, 9, 11, 3, 14, 4, 15, 10, 6, 16, 8])
        check("SORT(age ASCENDING)", [19, 20, 7, 17, 5, 18, 2, 12, 13, 1, 9, 11, 3, 14, 4, 15, 10, 6, 16, 8])
        check("age > 40 SORT(age DESCENDING)", [8, 16, 6, 10, 15])
        check("sort(id desc) limit(2)", [20, 19])
        // Binary (code point) order: upper case before lower case, then non-ASCII.
        check("SORT(name ASC)", [1, 3, 5, 8, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 2, 4, 9, 12, 6, 7])
        check("SORT(born DESC) LIMIT(3)", [7, 17, 5])
    }

    func testMultiKeySort() {
        check("age != nil SORT(age ASC, name DESC)", [7, 17, 5, 18, 2, 12, 13, 9, 1, 11, 3, 14, 4, 15, 10, 6, 16, 8])
        check("age != nil SORT(age ASC, name ASC)", [7, 17, 5, 18, 2, 12, 13, 1, 9, 11, 3, 14, 4, 15, 10, 6, 16, 8])
    }

    func testALaterSortTakesPrecedence() {
        check("SORT(name ASC) SORT(age DESC)", [8, 16, 6, 10, 15, 4, 14, 3, 11, 1, 9, 13, 12, 2, 18, 5, 17, 7, 19, 20])
    }

    func testSortThroughLinks() {
        check("pet != nil SORT(pet.name ASC)", [4, 11, 2, 9, 13, 17, 7, 15, 1, 5, 20])
        check("SORT(pet.vet.city DESC)", [1, 5, 7, 13, 15, 17, 20, 2, 9, 3, 4, 6, 8, 10, 11, 12, 14, 16, 18, 19])
        check("address != nil SORT(address.city ASC)", [2, 7, 15, 1, 4, 9, 13, 20, 11, 17, 5])
    }

    func testDistinct() {
        check("DISTINCT(age)", all(except: [9, 20]))
        check("DISTINCT(flag)", [1, 2, 6])
        check("DISTINCT(pet.vet.city)", [1, 2, 3])
        check("DISTINCT(flag, pet)", [1, 2, 3, 4, 6, 7, 11, 12, 13, 15])
    }

    func testLimit() {
        check("LIMIT(3)", [1, 2, 3])
        check("age > 40 LIMIT(2)", [6, 8])
        check("LIMIT(0)", [])
        check("LIMIT(100)", Array(1...20))
    }

    func testCombinedInTheOrderWritten() {
        check("SORT(age DESC) DISTINCT(flag) LIMIT(2)", [8, 16])
        check("SORT(age DESC) DISTINCT(flag) LIMIT(5)", [8, 16, 6])
        check("LIMIT(5) SORT(age ASC)", [5, 2, 1, 3, 4])
        check("SORT(age ASC) LIMIT(5)", [19, 20, 7, 17, 5])
        check("SORT(age DESC) LIMIT(3) DISTINCT(flag)", [8, 16, 6])
        check("DISTINCT(flag) SORT(age DESC)", [6, 1, 2])
        check("flag != nil SORT(age DESC) DISTINCT(flag) SORT(name ASC)", [8, 16])
        check("TRUEPREDICATE SORT(id DESC) LIMIT(2)", [20, 19])
    }
}
