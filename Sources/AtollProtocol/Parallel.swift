import Dispatch

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
public final class Eventually<T>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: T?

    public init(_ work: @escaping @Sendable () -> T) {
        DispatchQueue.global().async { [self] in
            result = work()
            done.signal()
        }
    }

    /// The value, once computed (nil only if the work never finished, which cannot happen).
    public func value() -> T? {
        done.wait()
        done.signal()
        // Written before the signal that the wait saw.
        return result
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

    private let text: String?
    private let parsed: Eventually<Result<Fields, Error>>?

    public init(_ text: String) {
        if text.utf8.count < Self.threshold {
            self.text = text
            parsed = nil
        } else {
            self.text = nil
            parsed = Eventually {
                Result {
                    var fields = try Wire.decode(text)
                    if fields["changesets"] != nil {
                        fields.decodedChangesets = try? fields.list("changesets").map(SyncChangeset.init(wire:))
                    }
                    return fields
                }
            }
        }
    }

    /// The message (waiting for its parse, if it runs elsewhere).
    /// - Throws: `ProtocolError` for text that is not a JSON object.
    public func fields() throws -> Fields {
        if let text { return try Wire.decode(text) }
        guard let result = parsed?.value() else { throw ProtocolError("a message was not parsed") }
        return try result.get()
    }
}
