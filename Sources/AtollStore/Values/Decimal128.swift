/// A decimal floating-point number with up to 34 significant digits, as IEEE 754-2008
/// decimal128 (Realm's `Decimal128`, BSON's `$numberDecimal`).
///
/// Values are kept normalized (trailing zeros of the coefficient removed), so `1.50` and `1.5`
/// are the same value and print as `1.5`. Ordering is numeric; NaN sorts below everything.
public struct Decimal128: Hashable, Sendable, Comparable, CustomStringConvertible {
    public enum Kind: UInt8, Sendable { case nan = 0, negativeInfinity = 1, finite = 2, positiveInfinity = 5 }

    public let kind: Kind
    /// For finite values: the sign (false for zero).
    public let isNegative: Bool
    /// For finite values: the decimal digits (0...9) of the coefficient, most significant first,
    /// without leading or trailing zeros (empty for zero).
    public let digits: [UInt8]
    /// For finite values: the value is `digits × 10^exponent`.
    public let exponent: Int

    public static let maxDigits = 34

    private init(kind: Kind, negative: Bool = false, digits: [UInt8] = [], exponent: Int = 0) {
        self.kind = kind
        self.isNegative = negative
        self.digits = digits
        self.exponent = exponent
    }

    public static let nan = Decimal128(kind: .nan)
    public static let infinity = Decimal128(kind: .positiveInfinity)
    public static let negativeInfinity = Decimal128(kind: .negativeInfinity)
    public static let zero = Decimal128(kind: .finite)

    /// A finite value `digits × 10^exponent`, normalized. Nil when it needs more than 34
    /// significant digits or its exponent is outside decimal128's range.
    public init?(negative: Bool, digits raw: [UInt8], exponent: Int) {
        var start = 0
        while start < raw.count, raw[start] == 0 { start += 1 }
        var end = raw.count
        var exp = exponent
        while end > start, raw[end - 1] == 0 { end -= 1; exp += 1 }
        if start == end { self = .zero; return }
        let d = Array(raw[start..<end])
        guard d.count <= Decimal128.maxDigits, d.allSatisfy({ $0 <= 9 }) else { return nil }
        // decimal128 holds exponents -6176...6111 for a 34-digit coefficient; a shorter
        // coefficient may be padded with zeros to bring a large exponent into range.
        guard exp >= -6176, exp + d.count - 1 <= 6111 + 33 else { return nil }
        self.init(kind: .finite, negative: negative, digits: d, exponent: exp)
    }

    /// Parses `[+-]digits[.digits][e[+-]digits]`, `Infinity`, `-Infinity`, `Inf`, `NaN`
    /// (case-insensitive). Nil for anything else or for values decimal128 cannot hold exactly.
    public init?(_ text: String) {
        let lower = text.lowercased()
        switch lower {
        case "nan", "+nan", "-nan": self = .nan; return
        case "inf", "infinity", "+inf", "+infinity": self = .infinity; return
        case "-inf", "-infinity": self = .negativeInfinity; return
        default: break
        }
        let c = Array(text.utf8)
        var i = 0
        var negative = false
        if i < c.count, c[i] == UInt8(ascii: "-") || c[i] == UInt8(ascii: "+") {
            negative = c[i] == UInt8(ascii: "-")
            i += 1
        }
        var digits = [UInt8]()
        var exponent = 0
        var sawDigit = false
        var sawPoint = false
        while i < c.count {
            let ch = c[i]
            if ch >= 48, ch <= 57 {
                sawDigit = true
                if !(digits.isEmpty && ch == 48) { digits.append(ch - 48) }
                if sawPoint { exponent -= 1 }
            } else if ch == UInt8(ascii: "."), !sawPoint {
                sawPoint = true
            } else {
                break
            }
            i += 1
        }
        guard sawDigit else { return nil }
        if i < c.count, c[i] == UInt8(ascii: "e") || c[i] == UInt8(ascii: "E") {
            i += 1
            var expNegative = false
            if i < c.count, c[i] == UInt8(ascii: "-") || c[i] == UInt8(ascii: "+") {
                expNegative = c[i] == UInt8(ascii: "-")
                i += 1
            }
            var e = 0
            var any = false
            while i < c.count, c[i] >= 48, c[i] <= 57 {
                e = e * 10 + Int(c[i] - 48)
                guard e < 100_000 else { return nil }
                any = true
                i += 1
            }
            guard any else { return nil }
            exponent += expNegative ? -e : e
        }
        guard i == c.count else { return nil }
        // Leading zeros were dropped; trailing zeros within 34 digits are normalized away.
        guard let value = Decimal128(negative: negative, digits: digits, exponent: exponent) else { return nil }
        self = value.isZero ? .zero : value
    }

    /// The exact decimal value of an integer.
    public init(_ value: Int64) {
        let magnitude = value.magnitude
        let d = String(magnitude).utf8.map { $0 - 48 }
        self = Decimal128(negative: value < 0, digits: d, exponent: 0)!
    }

    /// The shortest decimal that reads back as this double (as Swift prints it).
    public init?(_ value: Double) {
        if value.isNaN { self = .nan; return }
        if value.isInfinite { self = value < 0 ? .negativeInfinity : .infinity; return }
        guard let d = Decimal128("\(value)") else { return nil }
        self = d
    }

    public var isZero: Bool { kind == .finite && digits.isEmpty }

    /// The nearest double.
    public var doubleValue: Double {
        switch kind {
        case .nan: return .nan
        case .negativeInfinity: return -.infinity
        case .positiveInfinity: return .infinity
        case .finite: return Double(description) ?? .nan
        }
    }

    /// The text of the IEEE 754 / BSON specification (plain notation when the exponent is <= 0
    /// and the adjusted exponent >= -6, scientific notation otherwise), except that integers of
    /// up to 34 digits print in full.
    public var description: String {
        switch kind {
        case .nan: return "NaN"
        case .positiveInfinity: return "Infinity"
        case .negativeInfinity: return "-Infinity"
        case .finite: break
        }
        if digits.isEmpty { return "0" }
        let sign = isNegative ? "-" : ""
        let text = String(decoding: digits.map { $0 + 48 }, as: UTF8.self)
        let adjusted = exponent + digits.count - 1
        // Integers print in full ("100", not the normalized form's "1E+2") while they fit in
        // 34 digits.
        if exponent > 0, adjusted < Decimal128.maxDigits {
            return sign + text + String(repeating: "0", count: exponent)
        }
        if exponent <= 0, adjusted >= -6 {
            if exponent == 0 { return sign + text }
            let point = digits.count + exponent
            if point > 0 {
                let i = text.index(text.startIndex, offsetBy: point)
                return sign + text[..<i] + "." + text[i...]
            }
            return sign + "0." + String(repeating: "0", count: -point) + text
        }
        var s = sign + String(text.first!)
        if digits.count > 1 { s += "." + text.dropFirst() }
        return s + "E" + (adjusted >= 0 ? "+" : "") + String(adjusted)
    }

    // MARK: - Ordering

    /// Bytes whose lexicographic (memcmp) order is the numeric order, used to store decimals in
    /// SQLite so that comparisons in SQL are numeric. See `init(sortKey:)`.
    public var sortKey: [UInt8] {
        switch kind {
        case .nan: return [0x00]
        case .negativeInfinity: return [0x01]
        case .positiveInfinity: return [0x05]
        case .finite: break
        }
        if digits.isEmpty { return [0x03] }
        let biased = UInt16(exponent + digits.count - 1 + 8192)
        var key: [UInt8] = [isNegative ? 0x02 : 0x04]
        key.reserveCapacity(digits.count + 4)
        if isNegative {
            let inverted = ~biased
            key.append(UInt8(inverted >> 8)); key.append(UInt8(inverted & 0xFF))
            for d in digits { key.append(0xFE - d) }
            key.append(0xFF)
        } else {
            key.append(UInt8(biased >> 8)); key.append(UInt8(biased & 0xFF))
            for d in digits { key.append(d + 1) }
        }
        return key
    }

    /// Reads back a `sortKey`; nil when the bytes are not one.
    public init?(sortKey key: [UInt8]) {
        guard let first = key.first else { return nil }
        switch first {
        case 0x00: self = .nan
        case 0x01: self = .negativeInfinity
        case 0x03: self = .zero
        case 0x05: self = .infinity
        case 0x02, 0x04:
            guard key.count >= 4 else { return nil }
            let negative = first == 0x02
            var biased = UInt16(key[1]) << 8 | UInt16(key[2])
            if negative { biased = ~biased }
            var digits = [UInt8]()
            let body = negative ? key[3..<(key.count - 1)] : key[3...]
            for b in body {
                let d = negative ? 0xFE &- b : b &- 1
                guard d <= 9 else { return nil }
                digits.append(d)
            }
            let adjusted = Int(biased) - 8192
            guard let v = Decimal128(negative: negative, digits: digits, exponent: adjusted - digits.count + 1)
            else { return nil }
            self = v
        default: return nil
        }
    }

    public static func < (a: Decimal128, b: Decimal128) -> Bool {
        a.sortKey.lexicographicallyPrecedes(b.sortKey)
    }
}
