import Dispatch
import Synchronization

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

/// A message parsed (and its changesets decoded) on another core while the queue that handles
/// messages in order is busy with the one before: large uploads and downloads arrive as several
/// messages, and reading their JSON is most of the work of each.
///
/// Messages under `threshold` bytes are parsed where they are handled: a hop to another thread
/// costs more than they take.
public struct ParsedMessage: Sendable {
    public static let threshold = 64 << 10

    private enum Form: Sendable {
        case text(String)
        case parsed(Eventually<Result<Fields, Error>>)
    }
    private let form: Form

    public init(_ text: String) {
        guard text.utf8.count >= Self.threshold else {
            form = .text(text)
            return
        }
        form = .parsed(Eventually {
            Result {
                var fields = try Wire.decode(text)
                if fields["changesets"] != nil {
                    fields.decodedChangesets = try? fields.list("changesets").map(SyncChangeset.init(wire:))
                }
                return fields
            }
        })
    }

    /// The message (parsed here, or waited for if its parse runs elsewhere).
    /// - Throws: `ProtocolError` for text that is not a JSON object.
    public func fields() throws -> Fields {
        switch form {
        case .text(let text): return try Wire.decode(text)
        case .parsed(let parsed): return try parsed.value().get()
        }
    }
}
