import AtollStore
import AtollTestSupport
import XCTest

final class Decimal128Tests: XCTestCase {
    private func d(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> Decimal128 {
        guard let value = Decimal128(text) else {
            XCTFail("'\(text)' did not parse", file: file, line: line)
            return .nan
        }
        return value
    }

    func testCanonicalStrings() {
        let cases: [(String, String)] = [
            ("1.5", "1.5"),
            ("1.50", "1.5"),
            ("+1.5", "1.5"),
            ("-0.001", "-0.001"),
            ("-.001", "-0.001"),
            ("0.000001", "0.000001"),
            ("0.0000001", "1E-7"),
            ("1E+40", "1E+40"),
            ("1e40", "1E+40"),
            ("1.25E+40", "1.25E+40"),
            ("-2.5e-10", "-2.5E-10"),
            ("123.456e3", "123456"),
            ("0", "0"),
            ("-0", "0"),
            ("0.000", "0"),
            ("007", "7"),
            ("NaN", "NaN"),
            ("nan", "NaN"),
            ("Infinity", "Infinity"),
            ("inf", "Infinity"),
            ("-Infinity", "-Infinity"),
            ("-INF", "-Infinity"),
            ("1234567890123456789012345678901234", "1234567890123456789012345678901234"),
            ("0.1234567890123456789012345678901234", "0.1234567890123456789012345678901234"),
        ]
        for (input, expected) in cases {
            XCTAssertEqual(Decimal128(input)?.description, expected, "Decimal128(\"\(input)\")")
        }
    }

    func testPrintedTextParsesBackToTheSameValue() {
        for text in ["100", "1.5", "-0.001", "1E+40", "-7.25E-30", "12345678901234567890", "0.5", "NaN", "-Infinity"] {
            let value = d(text)
            XCTAssertEqual(Decimal128(value.description), value, text)
        }
    }

    func testNormalization() {
        XCTAssertEqual(d("1.50"), d("1.5"))
        XCTAssertEqual(d("100"), Decimal128(Int64(100)))
        XCTAssertEqual(d("100").digits, [1])
        XCTAssertEqual(d("100").exponent, 2)
        XCTAssertEqual(d("-0"), .zero)
        XCTAssertTrue(d("-0.000").isZero)
        XCTAssertEqual(Decimal128(Int64(-42)).description, "-42")
        XCTAssertEqual(Decimal128(Int64.min).description, "-9223372036854775808")
        XCTAssertEqual(Decimal128(0.1)?.description, "0.1")
        XCTAssertEqual(Decimal128(1e40)?.description, "1E+40")
        XCTAssertEqual(Decimal128(Double.nan), .nan)
        XCTAssertEqual(Decimal128(-Double.infinity), .negativeInfinity)
    }

    func testRejectsMoreThan34SignificantDigits() {
        XCTAssertNotNil(Decimal128("1234567890123456789012345678901234"))
        XCTAssertNil(Decimal128("12345678901234567890123456789012345"))
        XCTAssertNil(Decimal128("1.2345678901234567890123456789012345"))
        XCTAssertNil(Decimal128("-12345678901234567890123456789012345"))
        // Trailing zeros are not significant: this is 34 digits times ten.
        XCTAssertEqual(Decimal128("12345678901234567890123456789012340")?.description,
                       "1.234567890123456789012345678901234E+34")
        XCTAssertNil(Decimal128(negative: false, digits: [UInt8](repeating: 1, count: 35), exponent: 0))
    }

    func testRejectsMalformedTextAndOutOfRangeExponents() {
        for bad in ["", "+", "-", ".", "e5", "1e", "1e+", "1.2.3", "1,5", "abc", "1.5x", " 1", "0x10", "--1", "Infinityx"] {
            XCTAssertNil(Decimal128(bad), "'\(bad)' should not parse")
        }
        XCTAssertNotNil(Decimal128("1E+6144"))
        XCTAssertNil(Decimal128("1E+6145"))
        XCTAssertNotNil(Decimal128("1E-6176"))
        XCTAssertNil(Decimal128("1E-6177"))
    }

    func testDoubleValue() {
        XCTAssertEqual(d("1.5").doubleValue, 1.5)
        XCTAssertEqual(d("-0.001").doubleValue, -0.001)
        XCTAssertEqual(d("1E+40").doubleValue, 1e40)
        XCTAssertTrue(d("NaN").doubleValue.isNaN)
        XCTAssertEqual(d("-Infinity").doubleValue, -.infinity)
    }

    func testOrderingOfEdgeCases() {
        let ordered = ["NaN", "-Infinity", "-1E+40", "-100", "-10.5", "-10", "-9.99", "-1", "-0.5", "-0.001", "-1E-40",
                       "0", "1E-40", "0.001", "0.5", "1", "9.99", "10", "10.01", "10.5", "100", "1E+40", "Infinity"]
            .map { d($0) }
        for (a, b) in zip(ordered, ordered.dropFirst()) {
            XCTAssertLessThan(a, b)
            XCTAssertTrue(a.sortKey.lexicographicallyPrecedes(b.sortKey), "\(a) vs \(b)")
            XCTAssertFalse(b < a)
        }
        XCTAssertEqual(ordered.shuffled().sorted(), ordered)
    }

    /// The stored form of a decimal is its sort key: memcmp order must be the numeric order.
    func testSortKeyOrderIsNumericOrderForRandomDecimals() {
        var rng = SplitMix64(seed: 0xA70_11)
        var values = [Decimal128]()
        while values.count < 40 {
            let digits = Int.random(in: 1...9, using: &rng)
            let coefficient = (0..<digits).map { _ in UInt8.random(in: 0...9, using: &rng) }
            let exponent = Int.random(in: -30...30, using: &rng)
            guard let v = Decimal128(negative: Bool.random(using: &rng), digits: coefficient, exponent: exponent) else {
                XCTFail("could not build a decimal of \(coefficient)e\(exponent)")
                return
            }
            if !values.contains(v) { values.append(v) }
        }
        let byKey = values.sorted { $0.sortKey.lexicographicallyPrecedes($1.sortKey) }
        let byDouble = values.sorted { $0.doubleValue < $1.doubleValue }
        XCTAssertEqual(byKey.map(\.description), byDouble.map(\.description))
        // And the comparable conformance agrees.
        XCTAssertEqual(values.sorted().map(\.description), byDouble.map(\.description))
    }

    func testSortKeyRoundTrip() {
        for text in ["NaN", "-Infinity", "Infinity", "0", "1.5", "-1.5", "-0.001", "1E+40", "-1E-40",
                     "1234567890123456789012345678901234", "-9.87654321E+6000"] {
            let value = d(text)
            XCTAssertEqual(Decimal128(sortKey: value.sortKey), value, text)
        }
        XCTAssertNil(Decimal128(sortKey: []))
        XCTAssertNil(Decimal128(sortKey: [0x09]))
        XCTAssertNil(Decimal128(sortKey: [0x04, 0x20]))
    }
}
