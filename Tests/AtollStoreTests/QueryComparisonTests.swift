import AtollStore
import Foundation
import XCTest

/// Comparison operators on every ordered type, nulls, logic, strings, IN, BETWEEN, constants and
/// arguments, over the fixture of `QueryFixture`.
final class QueryComparisonTests: QueryTestCase {
    /// A parenthesis may open an operand as well as a group of predicates.
    func testAParenthesisedOperandComesFirst() {
        check("(age + 1) * 2 == 62", [1, 9])
        check("(age) > 55", [8])
        check("((age + 1) * 2 == 62 AND name == 'Alice')", [1])
        check("(age + 1 == 31) OR id == 3", [1, 3, 9])
        check("(age - 20) * (age - 20) < 5", [5, 7, 17])
        check("NOT (age + 1) * 2 == 62 AND age != nil", all(except: [1, 9, 19, 20]))
        assertAtollError(try store.objects("Person", where: "(age + 1"), .querySyntax, "expected")
        assertAtollError(try store.objects("Person", where: "(age == 1) * 2 == 3"), .querySyntax)
    }

    /// The lexer reads Unicode scalars: a string may begin with a combining mark (as one
    /// character the quote and the mark would be one, and the string would never open).
    func testAStringMayBeginWithACombiningMark() {
        check("name == '\u{301}'", [])
        check("name == \"\u{301}a\" OR id == 2", [2])
        check("name == 'e\u{301}cole'", [])               // the fixture's "école" is precomposed
        check("name == '\u{E9}cole'", [7])
        check("name BEGINSWITH '\u{301}'", [])
    }

    func testInt() {
        check("age == 30", [1, 9])
        check("age = 30", [1, 9])
        check("age != 30", all(except: [1, 9]))
        check("age <> 30", all(except: [1, 9]))
        check("age < 25", [5, 7, 17, 18])
        check("age <= 25", [2, 5, 7, 17, 18])
        check("age =< 25", [2, 5, 7, 17, 18])
        check("age > 45", [6, 8, 16])
        check("age >= 45", [6, 8, 10, 16])
        check("age => 45", [6, 8, 10, 16])
        check("age == 30.0", [1, 9])
        check("age > 29.5", [1, 3, 4, 6, 8, 9, 10, 11, 14, 15, 16])
        check("age == -30", [])
        check("age > 0x2C", [6, 8, 10, 16])
    }

    func testDouble() {
        check("height > 1.8", [4, 8, 14, 17])
        check("height >= 1.8", [2, 4, 8, 14, 17])
        check("height < 1.6", [5, 12, 16])
        check("height <= 1.6", [1, 5, 12, 16])
        check("height == 1.75", [3])
        check("height != 1.75", all(except: [3]))
        check("height > 2", [])
        check("height > 1.9e0", [17])
    }

    func testString() {
        check("name == 'bob'", [2])
        check("name == \"bob\"", [2])
        check("name == 'Bob'", [])
        check("name != 'bob'", all(except: [2]))
        check("name < 'C'", [1])
        check("name <= 'Eve'", [1, 3, 5])
        check("name > 'Rupert'", [2, 4, 6, 7, 9, 12, 18, 19, 20])
        check("name >= 'a'", [2, 4, 6, 7, 9, 12])
        check("name == '\\u00e9cole'", [7])
    }

    func testDate() {
        check("born == 1990-01-01@00:00:00", [1, 9])
        check("born < 1970-01-01@00:00:00", [8, 16])
        check("born >= 2002-02-02@00:00:00", [5, 7, 17])
        check("born > T631152000:0", [2, 5, 7, 12, 13, 17, 18])
        check("born == T631152000:0", [1, 9])
        check("born <= $0", [.date(QueryFixture.date("1970-07-07"))], [6, 8, 16])
        check("born != nil", Array(1...18))
        check("born == 1990-01-01T00:00:00", [1, 9])
    }

    /// Realm's readable timestamp with nanoseconds. (This query has crashed the library: run apart.)
    func testReadableTimestampWithNanoseconds() throws {
        try runInChildProcess {
            check("born == 1990-01-01@00:00:00:0", [1, 9])
            check("born < 1960-05-05@00:00:00:999999999", [8])  // born at 00:00:00.000
            check("born > 1960-05-05@00:00:00:999999999", [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18])
        }
    }

    /// The ISO 8601 timestamp forms the grammar lists: `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]`.
    func testISOTimestampLiteralsWithAZoneDesignator() {
        check("born == 1990-01-01T00:00:00Z", [1, 9])
        check("born == 1990-01-01T00:00:00.000Z", [1, 9])
        check("born == 1990-01-01T01:00:00+01:00", [1, 9])
        check("born == 1989-12-31T23:00:00-01:00", [1, 9])
    }

    func testDecimal() {
        check("balance > 10", [1, 3, 6, 9, 11, 15, 17])
        check("balance < 0", [2, 5, 8, 13])
        check("balance == 10.5", [1, 9])
        check("balance == $0", [.decimal(Decimal128("10.50")!)], [1, 9])
        check("balance >= 0.001 AND balance <= 0.1", [4, 16])
        check("balance < -1E+39", [8])
        check("balance > 99.99", [3, 6])
        check("balance > $0", [.int(50)], [3, 6, 17])
        check("balance == 0", [12])
        check("balance != 0", all(except: [12]))
        check("balance == nil", [19, 20])
        check("balance != nil SORT(balance ASC)", [8, 13, 2, 5, 12, 4, 16, 18, 7, 14, 10, 1, 9, 15, 11, 17, 3, 6])
    }

    func testObjectIdAndUUID() {
        check("oid == oid(000000000000000000000005)", [5])
        check("oid < oid(000000000000000000000004)", [1, 2, 3])
        check("oid >= $0", [.objectId(QueryFixture.oid(17))], [17, 18])
        check("oid BETWEEN {oid(00000000000000000000000a), oid(00000000000000000000000C)}", [10, 11, 12])
        check("oid == nil", [19, 20])
        check("uid == uuid(00000000-0000-0000-0000-00000000000a)", [10])
        check("uid == uuid(00000000-0000-0000-0000-00000000000A)", [10])
        check("uid == $0", [.uuid(QueryFixture.uid(3))], [3])
        check("uid != $0", [.uuid(QueryFixture.uid(3))], all(except: [3]))
        check("uid == nil", [19, 20])
    }

    func testBoolAndData() {
        check("flag == true", [1, 3, 5, 8, 10, 13, 15, 17, 20])
        check("flag == TRUE", [1, 3, 5, 8, 10, 13, 15, 17, 20])
        check("flag == false", [2, 4, 7, 9, 12, 14, 16, 18])
        check("flag == nil", [6, 11, 19])
        check("flag != true", [2, 4, 6, 7, 9, 11, 12, 14, 16, 18, 19])
        check("flag == $0", [.bool(false)], [2, 4, 7, 9, 12, 14, 16, 18])
        check("photo == $0", [.data([1, 2, 3])], [1])
        check("photo == $0", [.data([])], [2])
        check("photo == nil", all(except: [1, 2]))
        check("photo BEGINSWITH $0", [.data([1, 2])], [1])
        check("photo.@size == 3", [1])
        check("photo.@size == 0", [2])
    }

    func testNulls() {
        check("age == nil", [19, 20])
        check("age == NULL", [19, 20])
        check("age != nil", Array(1...18))
        check("age != 3", Array(1...20))
        check("age > nil", [])
        check("nick == nil", all(except: [1]))
        check("nick != 'al'", all(except: [1]))
        check("age IN {nil, 18}", [7, 19, 20])
    }

    func testLogic() {
        check("age > 30 AND flag == true", [3, 8, 10, 15])
        check("age > 30 && flag == true", [3, 8, 10, 15])
        check("age > 30 and flag == true", [3, 8, 10, 15])
        check("age < 20 OR age > 55", [7, 8, 17])
        check("age < 20 || name == 'Frank'", [7, 8, 17])
        check("NOT (flag == true)", [2, 4, 6, 7, 9, 11, 12, 14, 16, 18, 19])
        check("!(flag == true)", [2, 4, 6, 7, 9, 11, 12, 14, 16, 18, 19])
        check("NOT flag == true", [2, 4, 6, 7, 9, 11, 12, 14, 16, 18, 19])
        check("NOT (age > 30)", [1, 2, 5, 7, 9, 12, 13, 17, 18, 19, 20])
        check("NOT NOT (age == 30)", [1, 9])
        // AND binds tighter than OR.
        check("age < 20 OR age > 55 AND flag == false", [7, 17])
        check("(age < 20 OR age > 55) AND flag == true", [8, 17])
        check("(age < 20 OR age > 55) AND NOT name BEGINSWITH 'R'", [7, 8])
    }

    func testStringOperators() {
        check("name BEGINSWITH 'A'", [1])
        check("name BEGINSWITH[c] 'a'", [1])
        check("name BEGINSWITH 'éc'", [7])
        check("name BEGINSWITH[c] 'éc'", [6, 7])
        check("name BEGINSWITH[c] 'ÉC'", [6, 7])
        check("name ENDSWITH 'e'", [1, 4, 5, 7, 9])
        check("name ENDSWITH[c] 'E'", [1, 4, 5, 6, 7, 9])
        check("name CONTAINS 'a'", [3, 4, 8, 9, 11, 13, 14, 15, 20])
        check("name CONTAINS[c] 'A'", [1, 3, 4, 8, 9, 11, 13, 14, 15, 20])
        check("name CONTAINS 'ol'", [3, 7])
        check("name CONTAINS[c] 'OL'", [3, 6, 7, 15])
        check("name ==[c] 'BOB'", [2])
        check("name !=[c] 'BOB'", all(except: [2]))
        check("name ==[c] 'école'", [6, 7])
        check("name BEGINSWITH ''", Array(1...20))
        check("name CONTAINS $0", [.string("ar")], [3])
    }

    /// An empty pattern matches every string, and null never matches, whatever the operator.
    func testEmptyPatternsAndNulls() {
        check("nick BEGINSWITH ''", [1])
        check("nick CONTAINS ''", [1])
        check("nick LIKE '*'", [1])
        check("nick ENDSWITH ''", [1])
        check("nick ENDSWITH[c] ''", [1])
    }

    func testLike() {
        check("name LIKE '*o*'", [2, 3, 7, 13])
        check("name LIKE[c] '*o*'", [2, 3, 6, 7, 13, 15])
        check("name LIKE '?ve'", [5])
        check("name LIKE 'A?i*'", [1])
        check("name LIKE 'J*'", [])
        check("name LIKE[c] 'J*'", [12])
        check("name LIKE '*'", Array(1...20))
        check("name LIKE '*y'", [12, 13, 16])
    }

    /// `?` matches one character, also one written with several UTF-8 bytes.
    func testLikeQuestionMarkMatchesOneNonASCIICharacter() {
        check("name LIKE '?COLE'", [6])
        check("name LIKE '?cole'", [7])
    }

    func testDiacriticInsensitive() {
        check("name ==[d] 'ecole'", [7])
        check("name ==[cd] 'ecole'", [6, 7])
        check("name BEGINSWITH[d] 'EC'", [6])
        check("name LIKE[cd] 'e*'", [5, 6, 7])
    }

    func testIn() {
        check("age IN {18, 30, 99}", [1, 7, 9])
        check("name IN {'bob', 'Eve', 'nobody'}", [2, 5])
        check("age IN $0", [.list([.int(22), .int(25)])], [2, 5])
        check("age IN {}", [])
        check("NOT age IN {30}", all(except: [1, 9]))
        check("height IN {1.6, 1.75}", [1, 3])
        check("born IN {1990-01-01@00:00:00}", [1, 9])
        check("oid IN {oid(000000000000000000000001), oid(000000000000000000000002)}", [1, 2])
    }

    /// `v IN list` means `ANY list == v` (docs/query-language.md).
    func testValueInList() {
        check("'red' IN tags", [1, 5, 6, 11, 17, 20])
        check("$0 IN tags", [.string("blue")], [1, 2, 8, 17])
        check("5 IN scores", [2, 12])
        check("'bone' IN toys", [1, 5, 9, 15])
        check("NOT 'red' IN tags", [2, 3, 4, 7, 8, 9, 10, 12, 13, 14, 15, 16, 18, 19])
    }

    func testBetween() {
        check("age BETWEEN {25, 30}", [1, 2, 9, 12, 13])
        check("height BETWEEN {1.6, 1.65}", [1, 7, 9, 18])
        check("born BETWEEN {1980-01-01@00:00:00, 1985-12-31@00:00:00}", [3, 4, 14, 15])
        check("name BETWEEN {'a', 'e'}", [2, 4])
        check("balance BETWEEN {-1, 1}", [4, 5, 12, 16])
        check("age BETWEEN {$0, $1}", [.int(40), .int(45)], [4, 10, 15])
        check("age BETWEEN {30, 25}", [])
    }

    func testConstantPredicates() {
        check("TRUEPREDICATE", Array(1...20))
        check("FALSEPREDICATE", [])
        check("", Array(1...20))
        check("TRUEPREDICATE AND age == 30", [1, 9])
        check("FALSEPREDICATE OR age == 18", [7])
        check("truepredicate", Array(1...20))
    }

    func testConstantOnTheLeft() {
        check("30 < age", [3, 4, 6, 8, 10, 11, 14, 15, 16])
        check("30 >= age", [1, 2, 5, 7, 9, 12, 13, 17, 18])
        check("'Eve' == name", [5])
        check("$0 == name", [.string("bob")], [2])
        check("nil == age", [19, 20])
        check("1990-01-01@00:00:00 == born", [1, 9])
    }

    func testArgumentsOfEveryType() {
        let args: [Value] = [
            .int(30), .double(1.60), .string("Alice"), .date(QueryFixture.date("1990-01-01")),
            .decimal(Decimal128("10.5")!), .bool(true), .objectId(QueryFixture.oid(1)), .uuid(QueryFixture.uid(1)),
            .data([1, 2, 3]), .null,
        ]
        check("age == $0 AND height == $1 AND name == $2 AND born == $3 AND balance == $4 AND flag == $5"
              + " AND oid == $6 AND uid == $7 AND photo == $8 AND nick != $9", args, [1])
        check("name == $2", args, [1])
        check("age == $9", args, [19, 20])
        check("height > $0", [.float(1.85)], [4, 17])
        check("age > $0", [.double(44.5)], [6, 8, 10, 16])
        check("balance > $0", [.double(99.9)], [3, 6, 17])
        check("age < $0", [.decimal(Decimal128("19.5")!)], [7, 17])
        check("pet == $0", [.link(ObjectLink(className: "Dog", primaryKey: .string("d4")))], [7, 15])
    }
}
