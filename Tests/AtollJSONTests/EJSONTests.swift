import AtollJSON
import AtollStore
import Foundation
import XCTest

final class EJSONTests: XCTestCase {
    let oid = ObjectId(hex: "507f1f77bcf86cd799439011")!
    let uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
    /// 2026-01-01T00:00:00Z.
    let newYear2026: Int64 = 1_767_225_600_000

    private func parse(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> Value? {
        do { return try EJSON.parse(text) } catch {
            XCTFail("\(text): \(error)", file: file, line: line)
            return nil
        }
    }

    // MARK: - Parsing

    func testPlainJSON() {
        XCTAssertEqual(parse("null"), .null)
        XCTAssertEqual(parse("true"), .bool(true))
        XCTAssertEqual(parse("false"), .bool(false))
        XCTAssertEqual(parse("42"), .int(42))
        XCTAssertEqual(parse("-9223372036854775808"), .int(Int64.min))
        XCTAssertEqual(parse("9223372036854775807"), .int(Int64.max))
        XCTAssertEqual(parse("-1.5"), .double(-1.5))
        XCTAssertEqual(parse("1e3"), .double(1000))
        XCTAssertEqual(parse(#""héllo ✓ \"q\" \u00e9""#), .string("héllo ✓ \"q\" é"))
        XCTAssertEqual(parse(#"[1, "a", null, [true]]"#), .list([.int(1), .string("a"), .null, .list([.bool(true)])]))
        XCTAssertEqual(parse("[]"), .list([]))
        XCTAssertEqual(parse("{}"), .object([:]))
    }

    func testObjectsKeepTheirKeyOrder() throws {
        let value = try XCTUnwrap(parse(#"{"b": 1, "a": {"z": null, "y": [2]}, "c": "x"}"#))
        XCTAssertEqual(value.documentValue?.keys, ["b", "a", "c"])
        XCTAssertEqual(value, .object(["b": .int(1), "a": .object(["z": .null, "y": .list([.int(2)])]), "c": .string("x")]))
    }

    func testExtendedTypes() {
        XCTAssertEqual(parse(#"{"$oid": "507f1f77bcf86cd799439011"}"#), .objectId(oid))
        XCTAssertEqual(parse(#"{"$uuid": "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"}"#), .uuid(uuid))
        XCTAssertEqual(parse(#"{"$numberDecimal": "1.50"}"#), .decimal(Decimal128("1.5")!))
        XCTAssertEqual(parse(#"{"$numberDecimal": "-1E+40"}"#), .decimal(Decimal128("-1E+40")!))
        XCTAssertEqual(parse(#"{"$numberDecimal": "NaN"}"#), .decimal(.nan))
        XCTAssertEqual(parse(#"{"$numberLong": "9223372036854775807"}"#), .int(Int64.max))
        XCTAssertEqual(parse(#"{"$numberLong": "-12"}"#), .int(-12))
        XCTAssertEqual(parse(#"{"$numberInt": "5"}"#), .int(5))
        XCTAssertEqual(parse(#"{"$numberDouble": "1.5"}"#), .double(1.5))
        XCTAssertEqual(parse(#"{"$numberDouble": "Infinity"}"#), .double(.infinity))
        XCTAssertEqual(parse(#"{"$numberDouble": "-Infinity"}"#), .double(-.infinity))
        guard case .double(let nan)? = parse(#"{"$numberDouble": "NaN"}"#) else { return XCTFail("NaN is not a double") }
        XCTAssertTrue(nan.isNaN)
    }

    func testNumberFloatIsAFloat() {
        XCTAssertEqual(parse(#"{"$numberFloat": "0.1"}"#), .float(0.1))
        XCTAssertEqual(parse(#"{"$numberFloat": "-Infinity"}"#), .float(-.infinity))
        guard case .float(let zero)? = parse(#"{"$numberFloat": "-0.0"}"#) else { return XCTFail("-0.0 is not a float") }
        XCTAssertEqual(zero.sign, .minus)
        guard case .float(let nan)? = parse(#"{"$numberFloat": "NaN"}"#) else { return XCTFail("NaN is not a float") }
        XCTAssertTrue(nan.isNaN)
        assertAtollError(try EJSON.parse(#"{"$numberFloat": "one"}"#), .invalidJSON, "invalid $numberFloat 'one'")
        assertAtollError(try EJSON.parse(#"{"$numberFloat": 1.5}"#), .invalidJSON, "one string value")
    }

    func testDates() {
        XCTAssertEqual(parse(#"{"$date": "2026-01-01T00:00:00Z"}"#), .date(Timestamp(milliseconds: newYear2026)))
        XCTAssertEqual(parse(#"{"$date": "2026-01-01T01:00:00.250+01:00"}"#), .date(Timestamp(milliseconds: newYear2026 + 250)))
        XCTAssertEqual(parse(#"{"$date": {"$numberLong": "1767225600000"}}"#), .date(Timestamp(milliseconds: newYear2026)))
        XCTAssertEqual(parse(#"{"$date": {"$numberLong": "-62198755200000"}}"#),
                       .date(Timestamp(milliseconds: -62_198_755_200_000)))
        XCTAssertEqual(parse(#"{"$date": 1767225600000}"#), .date(Timestamp(milliseconds: newYear2026)))
        XCTAssertEqual(parse(#"{"$date": -1}"#), .date(Timestamp(milliseconds: -1)))
    }

    /// Microsecond precision, as other Extended JSON writers produce. (These inputs have crashed
    /// the library: run apart.)
    func testDatesWithMoreThanThreeFractionalDigits() throws {
        try runInChildProcess {
            XCTAssertEqual(try EJSON.parse(#"{"$date": "2026-01-01T00:00:00.123456Z"}"#),
                           .date(Timestamp(milliseconds: newYear2026 + 123)))
            XCTAssertEqual(try EJSON.parse(#"{"$date": "2026-01-01T00:00:00.999999999Z"}"#),
                           .date(Timestamp(milliseconds: newYear2026 + 999)))
        }
    }

    func testBinary() {
        XCTAssertEqual(parse(#"{"$binary": {"base64": "AQID", "subType": "00"}}"#), .data([1, 2, 3]))
        XCTAssertEqual(parse(#"{"$binary": {"base64": "", "subType": "00"}}"#), .data([]))
        XCTAssertEqual(parse(#"{"$binary": {"base64": "AQID", "subType": "80"}}"#), .data([1, 2, 3]))
        // Subtype 04 is a UUID.
        XCTAssertEqual(parse(#"{"$binary": {"base64": "5iHh+MNsSVqT/Awkej5uXw==", "subType": "04"}}"#), .uuid(uuid))
        // The legacy form.
        XCTAssertEqual(parse(#"{"$binary": "AQID", "$type": "00"}"#), .data([1, 2, 3]))
        XCTAssertEqual(parse(#"{"$binary": "5iHh+MNsSVqT/Awkej5uXw==", "$type": "4"}"#), .uuid(uuid))
    }

    func testNestedExtendedValues() {
        XCTAssertEqual(parse(#"{"id": {"$oid": "507f1f77bcf86cd799439011"}, "when": [{"$date": 0}]}"#),
                       .object(["id": .objectId(oid), "when": .list([.date(Timestamp(milliseconds: 0))])]))
    }

    // MARK: - Errors

    func testMalformedExtendedJSON() {
        assertAtollError(try EJSON.parse(#"{"$foo": 1}"#), .invalidJSON, "unknown Extended JSON type '$foo'")
        assertAtollError(try EJSON.parse(#"{"$regularExpression": {"pattern": "a", "options": ""}}"#), .invalidJSON,
                         "unknown Extended JSON type '$regularExpression'")
        assertAtollError(try EJSON.parse(#"{"$oid": "xyz"}"#), .invalidJSON, "invalid $oid 'xyz'")
        assertAtollError(try EJSON.parse(#"{"$oid": 5}"#), .invalidJSON, "$oid must be an object with one string value")
        assertAtollError(try EJSON.parse(#"{"$oid": "507f1f77bcf86cd799439011", "x": 1}"#), .invalidJSON, "$oid must be")
        assertAtollError(try EJSON.parse(#"{"$uuid": "nope"}"#), .invalidJSON, "invalid $uuid 'nope'")
        assertAtollError(try EJSON.parse(#"{"$numberDecimal": "12345678901234567890123456789012345"}"#), .invalidJSON,
                         "invalid $numberDecimal")
        assertAtollError(try EJSON.parse(#"{"$numberLong": "1.5"}"#), .invalidJSON, "invalid $numberLong '1.5'")
        assertAtollError(try EJSON.parse(#"{"$numberLong": "9223372036854775808"}"#), .invalidJSON, "invalid $numberLong")
        assertAtollError(try EJSON.parse(#"{"$numberDouble": "one"}"#), .invalidJSON, "invalid $numberDouble 'one'")
        assertAtollError(try EJSON.parse(#"{"$date": "2026-02-30T00:00:00Z"}"#), .invalidJSON,
                         "invalid $date '2026-02-30T00:00:00Z'")
        assertAtollError(try EJSON.parse(#"{"$date": true}"#), .invalidJSON, "invalid $date")
        assertAtollError(try EJSON.parse(#"{"$date": {"$numberLong": "x"}}"#), .invalidJSON, "invalid $numberLong 'x'")
        assertAtollError(try EJSON.parse(#"{"$date": 0, "x": 1}"#), .invalidJSON, "$date must be the object's only key")
        assertAtollError(try EJSON.parse(#"{"$binary": {"base64": "AQID", "subType": "04"}}"#), .invalidJSON,
                         "a UUID has 16 bytes")
        assertAtollError(try EJSON.parse(#"{"$binary": {"base64": "!!!", "subType": "00"}}"#), .invalidJSON, "invalid $binary")
        assertAtollError(try EJSON.parse(#"{"$binary": {"base64": "AQID"}}"#), .invalidJSON, "invalid $binary")
        assertAtollError(try EJSON.parse(#"[1, {"$oid": "bad"}]"#), .invalidJSON, "invalid $oid 'bad'")
    }

    func testInvalidJSONGivesLineAndColumn() {
        assertAtollError(try EJSON.parse(#"{"a": 1,}"#), .invalidJSON, "invalid JSON:", "(line 1, column")
        let error = assertAtollError(try EJSON.parse("{\n  \"a\": 1\n  \"b\": 2\n}"), .invalidJSON, "(line 3, column")
        XCTAssertNotNil(error)
        assertAtollError(try EJSON.parse(""), .invalidJSON, "invalid JSON:")
        assertAtollError(try EJSON.parse("[1, 2"), .invalidJSON, "invalid JSON:")
        assertAtollError(try EJSON.parse("nul"), .invalidJSON, "(line 1")
        assertAtollError(try EJSON.parse("9223372036854775808"), .invalidJSON, "invalid JSON:")
        assertAtollError(try EJSON.parse("[1] [2]"), .invalidJSON, "invalid JSON:")
    }

    func testNonUTF8BytesAreRejected() {
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x28, 0x22], [0x5B, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x5D]] {
            let cString = bytes.map { CChar(bitPattern: $0) } + [0]
            let error: AtollError? = cString.withUnsafeBufferPointer { buffer in
                do { _ = try EJSON.parse(buffer.baseAddress!) } catch { return error as? AtollError }
                return nil
            }
            XCTAssertEqual(error?.code, .invalidJSON, "\(bytes)")
            XCTAssertTrue(error?.message.hasPrefix("invalid JSON:") ?? false, error?.message ?? "no error for \(bytes)")
        }
    }

    // MARK: - Serializing

    func testSerializeEveryType() {
        XCTAssertEqual(EJSON.serialize(.null), "null")
        XCTAssertEqual(EJSON.serialize(.bool(true)), "true")
        XCTAssertEqual(EJSON.serialize(.bool(false)), "false")
        XCTAssertEqual(EJSON.serialize(.int(-5)), "-5")
        XCTAssertEqual(EJSON.serialize(.int(Int64.max)), "9223372036854775807")
        XCTAssertEqual(EJSON.serialize(.double(1.5)), "1.5")
        XCTAssertEqual(EJSON.serialize(.double(.nan)), #"{"$numberDouble":"NaN"}"#)
        XCTAssertEqual(EJSON.serialize(.double(.infinity)), #"{"$numberDouble":"Infinity"}"#)
        XCTAssertEqual(EJSON.serialize(.double(-.infinity)), #"{"$numberDouble":"-Infinity"}"#)
        XCTAssertEqual(EJSON.serialize(.float(.nan)), #"{"$numberDouble":"NaN"}"#)
        XCTAssertEqual(EJSON.serialize(.string("a\"b\\c\nd")), #""a\"b\\c\nd""#)
        XCTAssertEqual(EJSON.serialize(.string("é✓")), "\"é✓\"")
        XCTAssertEqual(EJSON.serialize(.string("")), "\"\"")
        XCTAssertEqual(EJSON.serialize(.data([1, 2, 3])), #"{"$binary":{"base64":"AQID","subType":"00"}}"#)
        XCTAssertEqual(EJSON.serialize(.data([])), #"{"$binary":{"base64":"","subType":"00"}}"#)
        XCTAssertEqual(EJSON.serialize(.date(Timestamp(milliseconds: newYear2026 + 5))), #"{"$date":"2026-01-01T00:00:00.005Z"}"#)
        XCTAssertEqual(EJSON.serialize(.date(Timestamp(milliseconds: -1))), #"{"$date":{"$numberLong":"-1"}}"#)
        XCTAssertEqual(EJSON.serialize(.date(Timestamp(milliseconds: 253_402_300_800_000))),
                       #"{"$date":{"$numberLong":"253402300800000"}}"#)
        XCTAssertEqual(EJSON.serialize(.objectId(oid)), #"{"$oid":"507f1f77bcf86cd799439011"}"#)
        XCTAssertEqual(EJSON.serialize(.uuid(uuid)), #"{"$uuid":"e621e1f8-c36c-495a-93fc-0c247a3e6e5f"}"#)
        XCTAssertEqual(EJSON.serialize(.decimal(Decimal128("1.50")!)), #"{"$numberDecimal":"1.5"}"#)
        XCTAssertEqual(EJSON.serialize(.link(ObjectLink(className: "Dog", primaryKey: .string("rex")))), #"{"$ref":"Dog","$id":"rex"}"#)
        XCTAssertEqual(EJSON.serialize(.list([.int(1), .string("a"), .null])), #"[1,"a",null]"#)
        XCTAssertEqual(EJSON.serialize(.object(["b": .int(1), "a": .list([.bool(true)])])), #"{"b":1,"a":[true]}"#)
    }

    func testFloatsSerializeToTheirDecimalValue() throws {
        let text = EJSON.serialize(.float(0.1))
        guard case .double(let d) = try EJSON.parse(text) else { return XCTFail("\(text) is not a number") }
        XCTAssertEqual(Float(d), Float(0.1), text)
        XCTAssertEqual(d, 0.1, "a float is written as its shortest decimal, not as the double nearest to it: \(text)")
    }

    func testRoundTrip() throws {
        let values: [Value] = [
            .null, .bool(true), .int(Int64.min), .double(-2.5e-300), .double(0.1), .double(.infinity), .string("héllo \"x\""),
            .data(Array(0...255)), .data([]), .date(Timestamp(milliseconds: newYear2026 + 999)),
            .date(Timestamp(milliseconds: -62_198_755_200_000)), .objectId(oid), .uuid(uuid),
            .decimal(Decimal128("-1234567890.123456789012345678901234")!), .decimal(.negativeInfinity),
            .list([.int(1), .list([]), .object(["k": .null])]),
            .object(["id": .objectId(oid), "tags": .list([.string("a")]), "nested": .object(["d": .date(Timestamp(milliseconds: 0))])]),
        ]
        for v in values {
            let text = EJSON.serialize(v)
            XCTAssertEqual(try EJSON.parse(text), v, text)
        }
    }

    /// What the serializer writes, the parser reads, also for a string with U+0000.
    func testStringsWithANulCharacterRoundTrip() throws {
        let v = Value.string("a\u{0}b")
        let text = EJSON.serialize(v)
        XCTAssertEqual(text, #""a\u0000b""#)
        XCTAssertEqual(try EJSON.parse(text), v)
    }

    func testDocumentFromJSON() throws {
        let doc = try withJSON(#"{"a": 1, "b": {"$oid": "507f1f77bcf86cd799439011"}}"#) { try EJSON.document($0) }
        XCTAssertEqual(doc, ["a": .int(1), "b": .objectId(oid)])
        assertAtollError(try withJSON("[1]") { try EJSON.document($0) }, .invalidJSON, "expected a JSON object, got an array")
    }
}
