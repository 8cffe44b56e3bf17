import AtollStore
import Foundation

// The keys both sides of sync use in their metadata tables: they must agree, so they are defined
// once, here.

/// The text key of a primary key in metadata tables (its wire form). Integers, the commonest
/// keys, are written directly: the same digits jansson writes.
public func keyText(_ v: Value) -> String {
    if case .int(let i) = v { return String(i) }
    return Wire.encode(v)
}

/// `keyText` as a key of Swift sets and dictionaries: compared byte for byte, as SQLite
/// compares the primary keys themselves.
public func exactKey(_ v: Value) -> ExactText { ExactText(keyText(v)) }

/// Field-clock path keys: a set element is `property + setSeparator + keyText(element)`, a
/// dictionary key `property + dictionarySeparator + key`, a collection's last clear
/// `property + clearMark` (none of them can be a property name).
public let setSeparator = "\u{1}"
public let dictionarySeparator = "\u{2}"
public let clearMark = "\u{3}clear"

/// The field-clock path of a set element.
public func setElementPath(_ property: String, _ element: Value) -> String { property + setSeparator + keyText(element) }

/// The field-clock path of a dictionary key.
public func dictionaryKeyPath(_ property: String, _ key: String) -> String { property + dictionarySeparator + key }

/// The member of a set element's or dictionary key's path (the element's `keyText`, or the
/// key), cut by bytes: a key may begin with a combining mark, which `String` would count as
/// part of the separator's character.
public func memberOfPath(_ path: String, property: String) -> String {
    String(decoding: path.utf8.dropFirst(property.utf8.count + 1), as: UTF8.self)
}

/// Runs an async call to completion from a thread that may block (a C host's, a test's, a
/// program's main thread) — never from Swift's cooperative pool, whose threads it would hold.
public func runToCompletion<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = CompletionBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    guard let result = box.result else { throw ProtocolError("the call did not finish") }
    return try result.get()
}

/// Where `runToCompletion` leaves the result for the waiting thread.
private final class CompletionBox<T>: @unchecked Sendable { var result: Result<T, Error>? }
