import AtollStore
import Foundation
import XCTest

/// Queries over sets, dictionaries, mixed values, backlinks, aggregates and SUBQUERY.
final class QueryCollectionsTests: XCTestCase {
    private var store: Store!

    override func setUpWithError() throws {
        store = try openTemporaryStore(Schema([
            ObjectSchema(name: "Owner", primaryKey: "id", properties: [
                .int("id"), .string("name"),
                Property(name: "dogs", type: .object, objectType: "Dog", collection: .list),
                Property(name: "best", type: .object, objectType: "Dog"),
                Property(name: "scores", type: .int, collection: .list),
                Property(name: "weights", type: .double, collection: .list),
                Property(name: "tags", type: .string, collection: .set),
                Property(name: "prices", type: .int, collection: .dictionary),
                Property(name: "pets", type: .object, objectType: "Dog", collection: .dictionary),
                Property(name: "anything", type: .mixed),
                Property(name: "bag", type: .mixed, collection: .list),
            ]),
            ObjectSchema(name: "Dog", primaryKey: "id", properties: [
                .int("id"), .string("name"), .int("age"),
                Property(name: "owners", type: .linkingObjects, objectType: "Owner", linkOriginProperty: "dogs"),
            ]),
        ]))
        try store.write {
            for (id, name, age) in [(1, "Rex", 3), (2, "Fido", 7), (3, "Ace", 10), (4, "Bo", 1)] {
                try store.create("Dog", ["id": .int(Int64(id)), "name": .string(name), "age": .int(Int64(age))])
            }
            try store.create("Owner", ["id": .int(1), "name": .string("Ann"), "dogs": .list([.int(1), .int(2)]), "best": .int(2),
                                       "scores": .list([.int(1), .int(2), .int(3)]), "weights": .list([.double(1.5), .double(2.5)]),
                                       "tags": .list([.string("a"), .string("b")]),
                                       "prices": .object(["apple": .int(5), "pear": .int(2)]),
                                       "pets": .object(["first": .int(3)]),
                                       "anything": .int(5), "bag": .list([.int(1), .string("x")])])
            try store.create("Owner", ["id": .int(2), "name": .string("Bob"), "dogs": .list([.int(3)]),
                                       "scores": .list([.int(10)]), "tags": .list([.string("c")]),
                                       "prices": .object(["apple": .int(9)]),
                                       "anything": .string("5"), "bag": .list([.double(1.0)])])
            try store.create("Owner", ["id": .int(3), "name": .string("Cid"),
                                       "anything": .list([.int(1), .object(["k": .string("v")])]),
                                       "bag": .list([.link(ObjectLink(className: "Dog", primaryKey: .int(4)))])])
            try store.create("Owner", ["id": .int(4), "name": .string("Dee"), "anything": .double(5.0),
                                       "prices": .object(["kiwi": .int(1)])])
            try store.create("Owner", ["id": .int(5), "name": .string("Eve"), "anything": .bool(true)])
            try store.create("Owner", ["id": .int(6), "name": .string("Fay"),
                                       "anything": .link(ObjectLink(className: "Dog", primaryKey: .int(1)))])
        }
    }

    private func check(_ query: String, _ args: [Value] = [], _ expected: [Int64], _ className: String = "Owner",
                       file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(try store.intKeys(className, query, args), expected, query, file: file, line: line)
    }

    func testSetsAndLists() {
        check("tags == 'a'", [], [1])
        check("ANY tags IN {'c', 'z'}", [], [2])
        check("tags.@count == 2", [], [1])
        check("NONE tags == 'a'", [], [2, 3, 4, 5, 6])
        check("ALL scores > 1", [], [2, 3, 4, 5, 6])
        check("scores[0] == 1", [], [1])
        check("scores[LAST] == 3", [], [1])
        check("scores[FIRST] == 10", [], [2])
        check("{1, 10} IN scores", [], [1, 2])
        check("ALL {1, 2} IN scores", [], [1])
        check("NONE {1, 10} IN scores", [], [3, 4, 5, 6])
        check("scores == {3, 10}", [], [1, 2])
    }

    func testAggregates() {
        check("scores.@sum > 5", [], [2, 1].sorted())
        check("scores.@sum == 0", [], [3, 4, 5, 6])
        check("scores.@avg == 2", [], [1])
        check("scores.@min == 1 AND scores.@max == 3", [], [1])
        check("weights.@sum == 4.0", [], [1])
        check("dogs.@avg.age == 5", [], [1])
        check("dogs.@max.age >= 10", [], [2])
        check("dogs.@sum.age < 5", [], [3, 4, 5, 6])
        check("scores.@avg == nil", [], [3, 4, 5, 6])
        check("SORT(scores.@sum DESC)", [], [2, 1, 3, 4, 5, 6])
        assertAtollError(try store.objects("Owner", where: "tags.@sum > 1"), .queryInvalid, "'@sum' needs numbers")
        assertAtollError(try store.objects("Owner", where: "dogs.@sum > 1"), .queryInvalid, "needs a property")
    }

    func testDecimalSumsAndAveragesAreExact() throws {
        let store = try openTemporaryStore(Schema([
            ObjectSchema(name: "Account", primaryKey: "id", properties: [
                .int("id"), Property(name: "amounts", type: .decimal128, collection: .list),
            ]),
        ]))
        func d(_ s: String) -> Value { .decimal(Decimal128(s)!) }
        try store.write {
            // 0.1 + 0.2 is exactly 0.3 in decimal (not in binary floating point).
            try store.create("Account", ["id": .int(1), "amounts": .list([d("0.1"), d("0.2")])])
            try store.create("Account", ["id": .int(2), "amounts": .list([d("1234567890123456789012345678901.5"), d("0.5")])])
            try store.create("Account", ["id": .int(3), "amounts": .list([])])
            try store.create("Account", ["id": .int(4), "amounts": .list([d("Infinity"), d("1")])])
        }
        XCTAssertEqual(try store.intKeys("Account", "amounts.@sum == $0", [d("0.3")]), [1])
        XCTAssertEqual(try store.intKeys("Account", "amounts.@sum == $0", [d("1234567890123456789012345678902")]), [2])
        XCTAssertEqual(try store.intKeys("Account", "amounts.@avg == $0", [d("0.15")]), [1])
        XCTAssertEqual(try store.intKeys("Account", "amounts.@sum == 0"), [3])
        XCTAssertEqual(try store.intKeys("Account", "amounts.@avg == nil"), [3])
        XCTAssertEqual(try store.intKeys("Account", "amounts.@sum > 1000000"), [2, 4])
        XCTAssertEqual(try store.intKeys("Account", "amounts.@sum > 0 SORT(amounts.@sum ASC)"), [1, 2, 4])
    }

    func testDictionaries() {
        check("prices.@keys == 'apple'", [], [1, 2])
        check("prices.@values > 4", [], [1, 2])
        check("prices['apple'] > 6", [], [2])
        check("prices.apple == 5", [], [1])
        check("prices['pear'] == nil", [], [2, 3, 4, 5, 6])
        check("prices.@count == 1", [], [2, 4])
        check("ALL prices.@values < 6", [], [1, 3, 4, 5, 6])
        check("pets['first'].name == 'Ace'", [], [1])
        check("pets.@values.age == 10", [], [1])
        check("SORT(prices['apple'] DESC) LIMIT(2)", [], [2, 1])
    }

    func testMixed() {
        check("anything == 5", [], [1, 4])
        check("anything == '5'", [], [2])
        check("anything == true", [], [5])
        check("anything != 5", [], [2, 3, 5, 6])
        check("anything > 4", [], [1, 4])
        check("anything == $0", [.link(ObjectLink(className: "Dog", primaryKey: .int(1)))], [6])
        check("anything.@type == 'string'", [], [2])
        check("anything.@type == 'numeric'", [], [1, 4])
        check("anything.@type == 'double'", [], [4])
        check("anything.@type == 'link'", [], [6])
        check("anything.@type IN {'bool', 'list'}", [], [3, 5])
        check("anything.@type == 'null'", [], [])
        check("anything[0] == 1", [], [3])
        check("anything[1]['k'] == 'v'", [], [3])
        check("anything.@size == 2", [], [3])
        check("ANY anything[*] == 1", [], [3])
        check("bag == 1", [], [1, 2])
        check("bag.@type == 'string'", [], [1])
        check("bag == $0", [.link(ObjectLink(className: "Dog", primaryKey: .int(4)))], [3])
        check("bag.@sum == 2", [], [])
        check("bag.@sum == 1", [], [1, 2])
        assertAtollError(try store.objects("Owner", where: "anything.@type == 'colour'"), .queryInvalid, "unknown type name")
        check("name.@type == 'string'", [], [1, 2, 3, 4, 5, 6])  // a typed property's type
        check("best.@type == 'link'", [], [1])
        assertAtollError(try store.objects("Owner", where: "anything.@type > 'string'"), .queryInvalid, "@type compares with == or !=")
    }

    /// Random token soups of the whole language: each query either runs or fails with a
    /// syntax or query error (never another code: that would be SQL the compiler got wrong).
    func testRandomQueriesFailCleanly() throws {
        let tokens = ["dogs", "best", "scores", "weights", "tags", "prices", "pets", "anything", "bag", "name", "id",
                      "owners", "age", ".", "@count", "@size", "@sum", "@avg", "@min", "@max", "@keys", "@values",
                      "@type", "@links", "Owner", "Dog", "[", "]", "0", "LAST", "*", "'apple'", "SUBQUERY(", "$d",
                      "$0", ",", "(", ")", "{", "}", "==", "!=", ">", "<=", "IN", "BETWEEN", "BEGINSWITH", "LIKE",
                      "[c]", "ANY", "ALL", "NONE", "AND", "OR", "NOT", "+", "-", "/", "2", "1.5", "null", "true",
                      "'string'", "obj('Dog', 1)", "SORT(", "ASC", "DISTINCT(", "LIMIT(", "TRUEPREDICATE"]
        var seed = UInt64(20261129)
        func next(_ n: Int) -> Int {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return Int((seed >> 33) % UInt64(n))
        }
        // Half the queries are built from paths, operators and values, so that many are valid.
        let paths = ["name", "dogs", "dogs.age", "dogs.@count", "dogs.@avg.age", "dogs.@max.name", "best.name",
                     "best.owners.@count", "scores", "scores[0]", "scores[LAST]", "scores.@sum", "weights.@avg", "tags",
                     "tags.@count", "prices", "prices['apple']", "prices.pear", "prices.@keys", "prices.@values",
                     "pets.first.age", "pets.@values.name", "anything", "anything.@type", "anything[0]",
                     "anything['k']", "anything[*]", "anything.@size", "bag", "bag.@type", "bag.@sum",
                     "@links.Owner.dogs.@count", "@links.@count", "SUBQUERY(dogs, $d, $d.age > 2).@count", "2 * id"]
        let ops = ["==", "!=", ">", "<=", "IN", "BEGINSWITH", "==[c]", "LIKE", "BETWEEN"]
        let values = ["5", "'apple'", "1.5", "null", "true", "$0", "{1, 'x'}", "{1, 2}", "ANY {1, 2}", "obj('Dog', 1)",
                      "'string'", "name", "id"]
        var ran = 0
        for i in 0..<20_000 {
            var query: String
            if i % 2 == 0 {
                query = (0..<(1 + next(12))).map { _ in tokens[next(tokens.count)] }.joined(separator: " ")
            } else {
                let quantifier = ["", "ANY ", "ALL ", "NONE "][next(4)]
                query = quantifier + paths[next(paths.count)] + " " + ops[next(ops.count)] + " " + values[next(values.count)]
                if next(3) == 0 { query += [" AND ", " OR "][next(2)] + paths[next(paths.count)] + " != null" }
            }
            do {
                _ = try store.objects(next(2) == 0 ? "Owner" : "Dog", where: query, [.int(5)]).count()
                ran += 1
            } catch let e as AtollError {
                XCTAssertTrue([.querySyntax, .queryInvalid].contains(e.code), "\(query): \(e)")
            }
        }
        XCTAssertGreaterThan(ran, 500)  // 679 with this seed
    }

    func testBacklinksAndSubquery() {
        check("owners.@count == 0", [], [4], "Dog")
        check("@links.Owner.dogs.@count > 0", [], [1, 2, 3], "Dog")
        check("@links.Owner.dogs.name == 'Bob'", [], [3], "Dog")
        check("ANY owners.name BEGINSWITH 'A'", [], [1, 2], "Dog")
        check("@links.@count == 0", [], [4], "Dog")  // links held in mixed values are not counted
        check("@links.Owner.best.@count == 1", [], [2], "Dog")
        check("SUBQUERY(dogs, $d, $d.age > 2).@count == 2", [], [1])
        check("SUBQUERY(dogs, $d, $d.age > 2 AND $d.name BEGINSWITH 'F').@count > 0", [], [1])
        check("SUBQUERY(dogs, $d, $d.age > 5).@count >= 1", [], [1, 2])
        check("SUBQUERY(scores, $s, $s > 1).@count == 2", [], [1])
        check("SUBQUERY(owners, $o, $o.name == 'Ann').@count == 1", [], [1, 2], "Dog")
        check("SUBQUERY(dogs, $d, $d.age > 2 AND name == 'Bob').@count == 1", [], [2])
        assertAtollError(try store.objects("Owner", where: "SUBQUERY(name, $x, $x == 'a').@count > 0"), .queryInvalid)
        assertAtollError(try store.objects("Owner", where: "SUBQUERY(dogs, $d, $e.age > 1).@count > 0"), .queryInvalid, "unknown variable $e")
        assertAtollError(try store.objects("Owner", where: "SUBQUERY(dogs, $d, $d.age > 1)"), .querySyntax, ".@count")
        assertAtollError(try store.objects("Dog", where: "@links.Owner.name.@count > 0"), .queryInvalid, "not a link to 'Dog'")
    }
}
