import AtollStore
import XCTest

final class QueryErrorTests: QueryTestCase {
    private func syntax(_ query: String, _ substrings: String..., file: StaticString = #filePath, line: UInt = #line) {
        let error = assertAtollError(try store.objects("Person", where: query), .querySyntax, file: file, line: line)
        for s in substrings {
            XCTAssertTrue(error?.message.contains(s) ?? false, "'\(error?.message ?? "")' lacks '\(s)'", file: file, line: line)
        }
    }

    private func invalid(_ query: String, _ arguments: [Value] = [], _ substrings: String...,
                         file: StaticString = #filePath, line: UInt = #line) {
        let error = assertAtollError(try store.objects("Person", where: query, arguments), .queryInvalid, file: file, line: line)
        for s in substrings {
            XCTAssertTrue(error?.message.contains(s) ?? false, "'\(error?.message ?? "")' lacks '\(s)'", file: file, line: line)
        }
    }

    func testSyntaxErrorsGiveThePosition() {
        syntax("age 42", "expected a comparison operator at position 4 near '42'")
        syntax("name == 'abc", "unterminated string at position 8")
        syntax("age > 3 )", "unexpected token at position 8 near ')'")
        syntax("SORT(age)", "expected ASC or DESC at position 8 near ')'")
        syntax("age == #", "unexpected character '#' at position 7")
        syntax("name BEGINSWITH[x] 'a'", "unknown modifier '[x]' at position 15")
        syntax("age BETWEEN 1", "BETWEEN needs {low, high} at position 12")
        syntax("age BETWEEN {1, 2, 3}", "BETWEEN needs exactly two values", "position 4")
        syntax("oid == oid(xyz)", "bad ObjectId 'xyz' at position 7")
        syntax("uid == uuid(nope)", "bad UUID 'nope' at position 7")
        syntax("age == $", "expected an argument number or a variable name after '$' at position 7")
        syntax("born == 2026-02-30@00:00:00", "bad timestamp", "position")
        syntax("age > 3 LIMIT(x)", "LIMIT needs a non-negative integer at position 14")
        syntax("age > 3 LIMIT(-1)", "LIMIT needs a non-negative integer at position 14")
        syntax("age == 3 AND == 4", "expected a value or property at position 13 near '=='")
    }

    func testSyntaxErrorsAtTheEnd() {
        syntax("age >", "expected a value or property at the end of the query")
        syntax("age > 3 AND", "at the end of the query")
        syntax("(age > 3", "expected ')' at the end of the query")
        syntax("SORT(age ASC", "expected ')' at the end of the query")
    }

    func testUnknownProperties() {
        invalid("nme == 'x'", [], "class 'Person' has no property 'nme'", "position 0")
        invalid("pet.nme == 'x'", [], "class 'Dog' has no property 'nme'")
        invalid("age > 3 SORT(nme ASC)", [], "class 'Person' has no property 'nme'")
        invalid("tags.foo == 1", [], "'tags' is string[], not a link; 'foo' cannot follow it (in 'tags.foo' at position 0)")
        invalid("name.first == 'x'", [], "'name' is string, not a link; 'first' cannot follow it")
        invalid("age.@count == 1", [], "'@count' needs a list, set, dictionary, string or data property; 'age' is int?")
        invalid("@count == 1", [], "'@count' must follow a collection")
        assertAtollError(try store.objects("Nobody", where: "age > 3"), .noSuchClass, "no class named 'Nobody'")
    }

    func testTypeMismatches() {
        invalid("age == 'x'", [], "cannot compare 'age' (int?) with string 'x'")
        invalid("name > 5", [], "cannot compare 'name' (string) with int 5")
        invalid("born == 5", [], "cannot compare 'born' (date?) with int 5")
        invalid("oid == 'abc'", [], "cannot compare 'oid' (objectId?)")
        invalid("age == $0", [.string("x")], "cannot compare 'age' (int?) with string 'x'")
        invalid("age BEGINSWITH 'x'", [], "BEGINSWITH needs a string property; 'age' is int?")
        invalid("age ==[c] 3", [], "[c] and [d] apply to strings; 'age' is int?")
        invalid("flag > true", [], "'flag' is bool?; it cannot be compared with < or >")
        invalid("pet == 5", [], "'pet' links to Dog; compare it with null or a Dog primary key, not int 5")
        invalid("tags.@count == 'two'", [], "is a count; cannot compare it with string 'two'")
        invalid("age IN 5", [], "IN needs a list")
        invalid("ANY age > 3", [], "ANY/ALL/NONE need a collection in the key path 'age'")
        invalid("SORT(tags ASC)", [], "SORT needs a single value, but 'tags' goes through a collection")
        invalid("DISTINCT(toys.name)", [], "DISTINCT needs a single value")
        invalid("SORT(address ASC)", [], "cannot sort by embedded object 'address'")
        invalid("3 BEGINSWITH name", [], "needs the property on its left")
        invalid("3 == 4", [], "a comparison needs a property")
    }

    func testTooFewArguments() {
        invalid("age > $0", [], "the query uses $0 at position 6 but 0 arguments were given")
        invalid("age > $1", [.int(1)], "the query uses $1 at position 6 but 1 argument was given")
        invalid("age BETWEEN {$0, $2}", [.int(1), .int(2)], "$2", "but 2 arguments were given")
    }
}
