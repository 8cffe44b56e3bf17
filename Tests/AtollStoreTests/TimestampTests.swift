import AtollStore
import Foundation
import XCTest

final class TimestampTests: XCTestCase {
    /// 2026-01-01T00:00:00Z in milliseconds since the epoch.
    let newYear2026: Int64 = 1_767_225_600_000

    func testParsesUTCAndPrintsWithMilliseconds() {
        let t = Timestamp(iso8601: "2026-01-01T00:00:00Z")
        XCTAssertEqual(t?.milliseconds, newYear2026)
        XCTAssertEqual(t?.iso8601, "2026-01-01T00:00:00.000Z")
        XCTAssertEqual(t?.description, "2026-01-01T00:00:00.000Z")
        XCTAssertEqual(Timestamp(milliseconds: 0).iso8601, "1970-01-01T00:00:00.000Z")
    }

    func testFractions() {
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01T00:00:00.5Z")?.milliseconds, newYear2026 + 500)
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01T00:00:00.05Z")?.milliseconds, newYear2026 + 50)
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01T00:00:00.123Z")?.milliseconds, newYear2026 + 123)
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01T00:00:00,25Z")?.milliseconds, newYear2026 + 250)
        XCTAssertEqual(Timestamp(milliseconds: newYear2026 + 7).iso8601, "2026-01-01T00:00:00.007Z")
    }

    /// Digits beyond milliseconds are truncated. (This input has crashed the library: run apart.)
    func testFractionsBeyondMilliseconds() throws {
        try runInChildProcess {
            XCTAssertEqual(Timestamp(iso8601: "2026-01-01T00:00:00.1234Z")?.milliseconds, newYear2026 + 123)
            XCTAssertEqual(Timestamp(iso8601: "2026-01-01T00:00:00.123999999Z")?.milliseconds, newYear2026 + 123)
            XCTAssertEqual(Timestamp(iso8601: "2026-01-01T00:00:00.000000001+01:00")?.milliseconds, newYear2026 - 3_600_000)
        }
    }

    func testOffsets() {
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01T01:00:00+01:00")?.milliseconds, newYear2026)
        XCTAssertEqual(Timestamp(iso8601: "2025-12-31T23:00:00-01:00")?.milliseconds, newYear2026)
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01T05:30:00+0530")?.milliseconds, newYear2026)
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01T00:00:00.250+00:00")?.milliseconds, newYear2026 + 250)
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01t00:00:00z")?.milliseconds, newYear2026)
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01 00:00:00Z")?.milliseconds, newYear2026)
    }

    func testBareDateAndMinutesOnly() {
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01")?.milliseconds, newYear2026)
        XCTAssertEqual(Timestamp(iso8601: "2026-01-01T00:01Z")?.milliseconds, newYear2026 + 60_000)
    }

    func testBeforeTheEpochAndNegativeYears() {
        XCTAssertEqual(Timestamp(milliseconds: -1).iso8601, "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(Timestamp(iso8601: "1969-12-31T23:59:59.999Z")?.milliseconds, -1)
        XCTAssertEqual(Timestamp(iso8601: "1900-03-01T00:00:00Z")?.milliseconds, -2_203_891_200_000)

        let yearZero = Timestamp(iso8601: "0000-01-01T00:00:00Z")
        XCTAssertEqual(yearZero?.milliseconds, -62_167_219_200_000)
        XCTAssertEqual(yearZero?.iso8601, "0000-01-01T00:00:00.000Z")

        // Year -1 (2 BC): six digits and a sign, as ISO 8601's expanded years.
        let minusOne = Timestamp(iso8601: "-000001-01-01T00:00:00Z")
        XCTAssertEqual(minusOne?.milliseconds, -62_198_755_200_000)
        XCTAssertEqual(minusOne?.iso8601, "-000001-01-01T00:00:00.000Z")
        XCTAssertEqual(Timestamp(iso8601: "-000001-12-31T23:59:59.999Z")?.milliseconds, -62_167_219_200_001)

        let far = Timestamp(iso8601: "+010000-01-01T00:00:00Z")
        XCTAssertEqual(far?.milliseconds, 253_402_300_800_000)
        XCTAssertEqual(far?.iso8601, "+010000-01-01T00:00:00.000Z")
    }

    func testRoundTripOverManyInstants() {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<500 {
            let ms = Int64.random(in: -100_000_000_000_000...100_000_000_000_000, using: &rng)
            let t = Timestamp(milliseconds: ms)
            XCTAssertEqual(Timestamp(iso8601: t.iso8601), t, t.iso8601)
        }
    }

    func testInvalidDatesAreRejected() {
        for bad in ["2026-02-30", "2026-02-29", "2025-02-29T00:00:00Z", "2026-04-31", "2026-13-01", "2026-00-10",
                    "2026-01-00", "2026-01-32", "2026-1-01", "26-01-01", "2026/01/01",
                    "2026-01-01T24:00:00Z", "2026-01-01T12:60:00Z", "2026-01-01T12:00:61Z",
                    "2026-01-01T00:00:00", "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00Zjunk",
                    "2026-01-01T00:00:00+25:00", "2026-01-01T00:00:00+01:60", "2026-01-01T", "", "yesterday"] {
            XCTAssertNil(Timestamp(iso8601: bad), "'\(bad)' should be rejected")
        }
        XCTAssertNotNil(Timestamp(iso8601: "2024-02-29"))
        XCTAssertNotNil(Timestamp(iso8601: "2000-02-29"))
        XCTAssertNil(Timestamp(iso8601: "1900-02-29"))
    }

    func testFoundationDatesTruncateTowardsThePast() {
        XCTAssertEqual(Timestamp(Date(timeIntervalSince1970: 1.2345)).milliseconds, 1234)
        XCTAssertEqual(Timestamp(Date(timeIntervalSince1970: -0.0005)).milliseconds, -1)
        XCTAssertEqual(Timestamp(milliseconds: 1500).date, Date(timeIntervalSince1970: 1.5))
        XCTAssertLessThan(Timestamp(milliseconds: -5), Timestamp(milliseconds: 3))
    }
}
