#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A 12-byte MongoDB ObjectId: a 4-byte timestamp (seconds), 5 random bytes, a 3-byte counter.
public struct ObjectId: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The 12 bytes, big-endian as in BSON.
    public let bytes: [UInt8]

    /// An ObjectId from its 12 bytes; nil when there are not exactly 12.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 12 else { return nil }
        self.bytes = bytes
    }

    /// An ObjectId from 24 hexadecimal digits; nil for anything else.
    public init?(hex: String) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 24 else { return nil }
        var out = [UInt8](repeating: 0, count: 12)
        for i in 0..<12 {
            guard let hi = hexDigit(utf8[2 * i]), let lo = hexDigit(utf8[2 * i + 1]) else { return nil }
            out[i] = hi << 4 | lo
        }
        bytes = out
    }

    /// This process's random value (5 bytes are used) and the counter, as BSON prescribes.
    private static let processRandom = UInt64.random(in: 0...UInt64.max)
    private static let counter = Atomic<UInt32>(UInt32.random(in: 0...0xFF_FFFF))

    /// A new ObjectId from the clock, this process's random value and a counter.
    public static func generate() -> ObjectId {
        let seconds = UInt32(truncatingIfNeeded: time(nil))
        let random = processRandom
        let counter = counter.add(1, ordering: .relaxed).newValue
        var b = [UInt8](repeating: 0, count: 12)
        for i in 0..<4 { b[i] = UInt8(truncatingIfNeeded: seconds >> (24 - 8 * UInt32(i))) }
        for i in 0..<5 { b[4 + i] = UInt8(truncatingIfNeeded: random >> (8 * UInt64(i))) }
        for i in 0..<3 { b[9 + i] = UInt8(truncatingIfNeeded: counter >> (16 - 8 * UInt32(i))) }
        return ObjectId(bytes: b)!
    }

    /// The 24 lowercase hexadecimal digits.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(24)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { hex }

    public static func < (a: ObjectId, b: ObjectId) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
}

@inline(__always)
func hexDigit(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}
