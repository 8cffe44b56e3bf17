import Atoll
import Foundation
import Observation
import XCTest

// Helpers the typed-API tests share: collecting what callbacks on other threads report, and
// comparing collection changes.

/// What a callback on another thread reported, in order; the test waits for the n-th report.
final class Collector<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [T] = []
    private var waiters: [(count: Int, expectation: XCTestExpectation)] = []

    func append(_ item: T) {
        lock.lock()
        items.append(item)
        let n = items.count
        let due = waiters.filter { $0.count <= n }
        waiters.removeAll { $0.count <= n }
        lock.unlock()
        for waiter in due { waiter.expectation.fulfill() }
    }

    var all: [T] {
        lock.lock()
        defer { lock.unlock() }
        return items
    }

    /// Fulfilled once `count` reports have arrived.
    func expectation(count: Int) -> XCTestExpectation {
        let e = XCTestExpectation(description: "\(count) reports")
        lock.lock()
        defer { lock.unlock() }
        if items.count >= count {
            e.fulfill()
        } else {
            waiters.append((count, e))
        }
        return e
    }
}

/// A collection change as the test compares it: the elements the callback read (so the live
/// collection it got shows the new state), and the indices.
enum SeenCollection: Equatable {
    case initial([String])
    case update([String], deletions: [Int], insertions: [Int], modifications: [Int])
    case error(AtollError.Code)

    init<C>(_ change: RealmCollectionChange<C>, _ read: (C) -> [String]) {
        switch change {
        case .initial(let c): self = .initial(read(c))
        case .update(let c, let deletions, let insertions, let modifications):
            self = .update(read(c), deletions: deletions, insertions: insertions, modifications: modifications)
        case .error(let error): self = .error((error as? AtollError)?.code ?? .internal)
        }
    }
}

extension XCTestCase {
    /// Waits (5 s at most) until `collector` holds `count` reports, and returns them all.
    func reports<T>(_ collector: Collector<T>, count: Int, file: StaticString = #filePath, line: UInt = #line) -> [T] {
        if XCTWaiter().wait(for: [collector.expectation(count: count)], timeout: 5) != .completed {
            XCTFail("waited 5 s for \(count) reports, got \(collector.all.count): \(collector.all)", file: file, line: line)
        }
        return collector.all
    }

    /// Waits (5 s at most) until `condition`, which reads Observable state, holds: it is
    /// checked again each time the state it read changes.
    func waitUntil(_ what: String, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(5)
        while true {
            let changed = XCTestExpectation(description: what)
            changed.assertForOverFulfill = false
            if withObservationTracking(condition, onChange: { changed.fulfill() }) { return }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 || XCTWaiter().wait(for: [changed], timeout: left) != .completed {
                XCTFail("waited 5 s for \(what)", file: file, line: line)
                return
            }
        }
    }
}
