import AtollStore
import Foundation
import Synchronization

/// A hybrid logical clock reading: wall milliseconds, a counter for readings within one
/// millisecond, and the client file's identity as the tie-break (docs/protocol.md). Readings
/// compare element by element. On the wire: `[milliseconds, counter, ident]`.
public struct Clock: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var milliseconds: Int64
    public var counter: Int64
    public var node: Int64

    public init(milliseconds: Int64, counter: Int64 = 0, node: Int64) {
        self.milliseconds = milliseconds
        self.counter = counter
        self.node = node
    }

    public static let zero = Clock(milliseconds: 0, counter: 0, node: 0)

    public static func < (a: Clock, b: Clock) -> Bool {
        (a.milliseconds, a.counter, a.node) < (b.milliseconds, b.counter, b.node)
    }

    public var value: Value { .list([.int(milliseconds), .int(counter), .int(node)]) }

    /// A clock from its wire form; nil when it is not three integers.
    public init?(_ value: Value?) {
        guard case .list(let items)? = value, items.count == 3,
              case .int(let ms) = items[0], case .int(let c) = items[1], case .int(let n) = items[2] else { return nil }
        self.init(milliseconds: ms, counter: c, node: n)
    }

    public var description: String { "\(milliseconds).\(counter).\(node)" }

    /// The text form `ms.counter.node`, for metadata tables. Read byte by byte: a bootstrap reads
    /// one for every object it sends.
    public init?(text: String) {
        var first: Int64 = 0, second: Int64 = 0
        var field = 0
        var digits = 0
        var negative = false
        var value: Int64 = 0
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                let (times, o1) = value.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                guard !o1, !o2 else { return nil }
                value = sum
                digits += 1
            case UInt8(ascii: "-") where digits == 0 && !negative:
                negative = true
            case UInt8(ascii: "."):
                guard digits > 0, field < 2 else { return nil }
                if field == 0 { first = negative ? -value : value } else { second = negative ? -value : value }
                field += 1
                (digits, negative, value) = (0, false, 0)
            default:
                return nil
            }
        }
        guard digits > 0, field == 2 else { return nil }
        self.init(milliseconds: first, counter: second, node: negative ? -value : value)
    }
}

/// A list element's identity: the clock of the transaction that inserted it and the number of
/// the instruction within it. On the wire: `[milliseconds, counter, ident, n]`.
public struct ElementID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var clock: Clock
    public var n: Int64

    public init(_ clock: Clock, _ n: Int64) {
        self.clock = clock
        self.n = n
    }

    public static func < (a: ElementID, b: ElementID) -> Bool { a.clock != b.clock ? a.clock < b.clock : a.n < b.n }

    public var value: Value {
        .list([.int(clock.milliseconds), .int(clock.counter), .int(clock.node), .int(n)])
    }

    public init?(_ value: Value?) {
        guard case .list(let items)? = value, items.count == 4,
              case .int(let ms) = items[0], case .int(let c) = items[1], case .int(let node) = items[2],
              case .int(let n) = items[3] else { return nil }
        self.init(Clock(milliseconds: ms, counter: c, node: node), n)
    }

    public var description: String { "\(clock).\(n)" }
}

/// The clock of one replica: readings only grow, also when the wall clock goes back, and move
/// past every clock the replica hears of.
public final class HybridClock: Sendable {
    private let state: Mutex<Clock>

    public init(node: Int64, last: Clock = .zero) {
        state = Mutex(Clock(milliseconds: last.milliseconds, counter: last.counter, node: node))
    }

    public var node: Int64 { state.withLock { $0.node } }

    /// Sets the node (a client learns its identity from the server after its first writes).
    public func setNode(_ node: Int64) { state.withLock { $0.node = node } }

    /// A new reading, later than every reading and every observed clock so far.
    public func now() -> Clock {
        let wall = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        return state.withLock { last in
            Self.advance(&last, wall: wall)
            return last
        }
    }

    /// Moves `last` on: to `wall` when that is later, else one count on within its millisecond,
    /// or at the end of the counter to the next millisecond. A clock heard from a broken or
    /// hostile peer can be at the end of both (`[Int64.max, Int64.max, n]` is a valid reading on
    /// the wire): the reading then stays where it is rather than overflow.
    private static func advance(_ last: inout Clock, wall: Int64) {
        if wall > last.milliseconds {
            last.milliseconds = wall
            last.counter = 0
        } else if last.counter < .max {
            last.counter += 1
        } else if last.milliseconds < .max {
            last.milliseconds += 1
            last.counter = 0
        }
    }

    /// A new reading for something that happened at `wall` milliseconds (a commit read back from
    /// the change log): that time if it is later than every reading so far, else just after the last.
    public func stamp(wall: Int64) -> Clock {
        state.withLock { last in
            Self.advance(&last, wall: wall)
            return last
        }
    }

    /// Moves past a clock heard from another replica.
    public func observe(_ clock: Clock) {
        state.withLock { last in
            if (clock.milliseconds, clock.counter) > (last.milliseconds, last.counter) {
                last.milliseconds = clock.milliseconds
                last.counter = clock.counter
            }
        }
    }

    /// The last reading given or observed.
    public var last: Clock { state.withLock { $0 } }
}
