import Foundation

/// A point in time, stored to the millisecond (the precision of Extended JSON's `$date`).
public struct Timestamp: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z; negative before.
    public var milliseconds: Int64

    public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    /// The timestamp of a Foundation date, truncated towards the past to the millisecond.
    public init(_ date: Date) {
        milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.milliseconds < b.milliseconds }

    /// ISO 8601 in UTC with milliseconds: `2026-01-01T00:00:00.000Z`.
    public var description: String { iso8601 }

    public var iso8601: String {
        // Floor division that cannot overflow, even at Int64.min.
        var (days, ms) = milliseconds.quotientAndRemainder(dividingBy: 86_400_000)
        if ms < 0 { days -= 1; ms += 86_400_000 }
        let (y, m, d) = civil(fromDays: days)
        let h = ms / 3_600_000, mi = ms / 60_000 % 60, s = ms / 1000 % 60, f = ms % 1000
        func pad(_ v: Int64, _ n: Int) -> String {
            let t = String(v)
            return t.count >= n ? t : String(repeating: "0", count: n - t.count) + t
        }
        let year = y < 0 ? "-" + pad(-y, 6) : (y > 9999 ? "+" + pad(y, 6) : pad(y, 4))
        return "\(year)-\(pad(m, 2))-\(pad(d, 2))T\(pad(h, 2)):\(pad(mi, 2)):\(pad(s, 2)).\(pad(f, 3))Z"
    }

    /// Parses ISO 8601 / RFC 3339: `YYYY-MM-DDTHH:MM:SS[.fff...](Z|±HH:MM)`; also a bare date.
    /// Fractions beyond milliseconds are truncated. Nil when the text is not such a time.
    public init?(iso8601 text: String) {
        let c = Array(text.utf8)
        var i = 0
        func number(_ n: Int) -> Int64? {
            guard i + n <= c.count else { return nil }
            var v: Int64 = 0
            for k in 0..<n {
                let ch = c[i + k]
                guard ch >= 48, ch <= 57 else { return nil }
                v = v * 10 + Int64(ch - 48)
            }
            i += n
            return v
        }
        func expect(_ ch: Character) -> Bool {
            guard i < c.count, c[i] == ch.asciiValue! else { return false }
            i += 1
            return true
        }
        var sign: Int64 = 1
        var yearDigits = 4
        if i < c.count, c[i] == UInt8(ascii: "-") || c[i] == UInt8(ascii: "+") {
            sign = c[i] == UInt8(ascii: "-") ? -1 : 1
            yearDigits = 6
            i += 1
        }
        guard let y = number(yearDigits), expect("-"), let mo = number(2), expect("-"), let d = number(2),
              (1...12).contains(mo), d >= 1, d <= daysIn(month: mo, year: sign * y) else { return nil }
        var ms: Int64 = 0
        if i < c.count {
            guard expect("T") || expect("t") || expect(" ") else { return nil }
            guard let h = number(2), expect(":"), let mi = number(2), h < 24, mi < 60 else { return nil }
            var s: Int64 = 0
            if expect(":") {
                guard let sec = number(2), sec < 61 else { return nil }
                s = sec
            }
            ms = ((h * 60 + mi) * 60 + s) * 1000
            if expect(".") || expect(",") {
                var digits = 0
                var frac: Int64 = 0
                while i < c.count, c[i] >= 48, c[i] <= 57 {
                    if digits < 3 { frac = frac * 10 + Int64(c[i] - 48) }
                    digits += 1
                    i += 1
                }
                guard digits > 0 else { return nil }
                if digits < 3 { for _ in digits..<3 { frac *= 10 } }
                ms += frac
            }
            if expect("Z") || expect("z") {
            } else if i < c.count, c[i] == UInt8(ascii: "+") || c[i] == UInt8(ascii: "-") {
                let east = c[i] == UInt8(ascii: "+")
                i += 1
                guard let oh = number(2) else { return nil }
                _ = expect(":")
                guard let om = number(2), oh < 24, om < 60 else { return nil }
                let offset = (oh * 60 + om) * 60_000
                ms += east ? -offset : offset
            } else {
                return nil
            }
        }
        guard i == c.count else { return nil }
        milliseconds = days(fromCivil: sign * y, mo, d) * 86_400_000 + ms
    }
}

private func isLeap(_ y: Int64) -> Bool { y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) }

private func daysIn(month m: Int64, year y: Int64) -> Int64 {
    switch m {
    case 2: return isLeap(y) ? 29 : 28
    case 4, 6, 9, 11: return 30
    default: return 31
    }
}

// Howard Hinnant's days-from-civil algorithms (proleptic Gregorian calendar).
private func days(fromCivil y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
    let y = m <= 2 ? y0 - 1 : y0
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
}

private func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
    let z = z0 + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
    let y = yoe + era * 400
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp + (mp < 10 ? 3 : -9)
    return (m <= 2 ? y + 1 : y, m, d)
}
