import Dispatch
import Synchronization

/// The instructions from which a changeset's work is worth handing to another core: for fewer,
/// the hop to another thread costs more than it saves.
public let instructionsWorthAnotherCore = 4_096

/// `body(0) … body(count - 1)`, run on all cores, in order of index: the JSON texts of a large
/// changeset's parts, which are independent of each other.
public func concurrentMap<T>(_ count: Int, _ body: @Sendable (Int) -> T) -> [T] {
    guard count > 1 else { return (0..<count).map(body) }
    return Array(unsafeUninitializedCapacity: count) { buffer, initialized in
        guard let base = buffer.baseAddress else { return }
        let slots = Slots(base)
        // Each index is written once, by one thread.
        DispatchQueue.concurrentPerform(iterations: count) { i in (slots.base + i).initialize(to: body(i)) }
        initialized = count
    }
}

/// The results' memory, shared by the threads of `concurrentMap`.
private struct Slots<T>: @unchecked Sendable {
    let base: UnsafeMutablePointer<T>
    init(_ base: UnsafeMutablePointer<T>) { self.base = base }
}

/// A value computed on another core while this one does something else; `value` waits for it.
///
/// The work runs on a global queue's thread, or on the caller of `value` if no such thread has
/// taken it up by then: the caller never waits for work that has not started, so a pool of
/// threads all waiting cannot keep it from starting.
public final class Eventually<T>: @unchecked Sendable {
    /// 0: not started; 1: started on the global queue; 2: taken by `value`.
    private let state = Atomic<Int>(0)
    private let done = DispatchSemaphore(value: 0)
    private let work: @Sendable () -> T
    private var result: T?

    public init(_ work: @escaping @Sendable () -> T) {
        self.work = work
        DispatchQueue.global().async { [self] in
            guard state.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged else { return }
            result = work()
            done.signal()
        }
    }

    /// The value: computed here if the work has not started elsewhere, else waited for.
    public func value() -> T {
        if state.compareExchange(expected: 0, desired: 2, ordering: .acquiringAndReleasing).exchanged {
            result = work()
            done.signal()
        }
        done.wait()
        done.signal()
        // Written before the signal that the wait saw.
        return result ?? work()
    }
}

/// The bytes of one connection's messages parsed ahead (`ParsedMessage`) and not yet handled,
/// up to a limit: past it, a message waits as text and is parsed where it is handled, so a
/// backlog of large messages costs its text and at most `limit` bytes' worth of parsed ones.
public final class ParseAhead: Sendable {
    public let limit: Int
    private let bytes = Atomic<Int>(0)

    public init(limit: Int = 32 << 20) { self.limit = limit }

    /// The bytes of the messages parsed ahead that are not handled (or dropped) yet.
    public var inFlight: Int { bytes.load(ordering: .relaxed) }

    fileprivate func take(_ n: Int) -> Bool {
        if bytes.add(n, ordering: .relaxed).newValue <= limit { return true }
        bytes.subtract(n, ordering: .relaxed)
        return false
    }

    fileprivate func give(_ n: Int) { bytes.subtract(n, ordering: .relaxed) }
}

/// A message of one side of the protocol, decoded from its text.
public protocol WireMessage: Sendable {
    /// - Throws: `ProtocolError` for text that is not a message of the protocol.
    init(text: String) throws
}

extension ClientMessage: WireMessage {}
extension ServerMessage: WireMessage {}

/// A message decoded (its changesets too) on another core while the queue that handles
/// messages in order is busy with the one before: large uploads and downloads arrive as several
/// messages, and reading their JSON is most of the work of each.
///
/// Messages under `parseAheadThreshold` bytes, and those past the connection's `ParseAhead` limit, are
/// decoded where they are handled: a hop to another thread costs more than a small one takes.
public struct ParsedMessage<Message: WireMessage>: Sendable {
    private enum Form: Sendable {
        case text(String)
        case ahead(Ahead)
    }
    private let form: Form

    /// Decodes `text` ahead when it is large and `budget` has room (without a budget, never).
    public init(_ text: String, ahead budget: ParseAhead? = nil) {
        let size = text.utf8.count
        guard size >= parseAheadThreshold, let budget, budget.take(size) else {
            form = .text(text)
            return
        }
        form = .ahead(Ahead(size: size, budget: budget, Eventually { Result { try Message(text: text) } }))
    }

    /// Whether the message is decoded elsewhere.
    public var isParsedAhead: Bool { if case .ahead = form { true } else { false } }

    /// The message (decoded here, or waited for if its decoding runs elsewhere).
    /// - Throws: `ProtocolError` for text that is not a message of the protocol.
    public func message() throws -> Message {
        switch form {
        case .text(let text): return try Message(text: text)
        case .ahead(let ahead): return try ahead.parsed.value().get()
        }
    }

    /// A decoding ahead, which gives its bytes back to the budget once the message is gone
    /// (handled, or dropped unhandled).
    private final class Ahead: Sendable {
        let size: Int
        let budget: ParseAhead
        let parsed: Eventually<Result<Message, Error>>

        init(size: Int, budget: ParseAhead, _ parsed: Eventually<Result<Message, Error>>) {
            self.size = size
            self.budget = budget
            self.parsed = parsed
        }

        deinit { budget.give(size) }
    }
}

/// The size from which a message is worth decoding on another core.
public let parseAheadThreshold = 64 << 10
