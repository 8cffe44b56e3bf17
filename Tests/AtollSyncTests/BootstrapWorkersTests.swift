@testable import AtollServer
import Foundation
import Synchronization
import XCTest

/// The server's bootstrap workers share themselves fairly among users: a user who starts many
/// bootstraps at once does not make another user's wait behind all of them.
final class BootstrapWorkersTests: XCTestCase {
    /// What ran, in order; each job waits for its gate before it ends, so the test decides when
    /// a worker frees.
    final class Recorder: @unchecked Sendable {
        let started = Mutex<[String]>([])
        let gates = Mutex<[String: DispatchSemaphore]>([:])
        let startedOne = DispatchSemaphore(value: 0)

        func job(_ name: String) -> @Sendable () -> Void {
            let gate = DispatchSemaphore(value: 0)
            gates.withLock { $0[name] = gate }
            return { [self] in
                started.withLock { $0.append(name) }
                startedOne.signal()
                gate.wait()
            }
        }

        struct NotStarted: Error, CustomStringConvertible {
            var description: String { "a job did not start within 10 s" }
        }

        func release(_ name: String) { gates.withLock { $0[name] }?.signal() }

        func waitForStarts(_ n: Int) throws {
            for _ in 0..<n {
                guard startedOne.wait(timeout: .now() + 10) == .success else { throw NotStarted() }
            }
        }
    }

    func testAnotherUsersBootstrapWaitsForOneOfAFloodNotAll() throws {
        let workers = BootstrapWorkers(name: "test", limit: 1)
        let r = Recorder()
        for n in 0..<5 { workers.run(user: "flood", r.job("flood\(n)")) }
        try r.waitForStarts(1)
        workers.run(user: "other", r.job("other"))
        // The worker frees: the other user (none running) goes before the flood's next.
        r.release("flood0")
        try r.waitForStarts(1)
        r.release("other")
        for n in 1..<5 {
            try r.waitForStarts(1)
            r.release("flood\(n)")
        }
        XCTAssertEqual(r.started.withLock { $0 }, ["flood0", "other", "flood1", "flood2", "flood3", "flood4"])
    }

    func testAUserWithFewerRunningGoesFirstAndEachUsersOwnRunInOrder() throws {
        let workers = BootstrapWorkers(name: "test", limit: 2)
        let r = Recorder()
        workers.run(user: "a", r.job("a0"))
        try r.waitForStarts(1)
        workers.run(user: "a", r.job("a1"))
        try r.waitForStarts(1)
        workers.run(user: "a", r.job("a2"))
        workers.run(user: "b", r.job("b0"))
        workers.run(user: "b", r.job("b1"))
        r.release("a0")
        try r.waitForStarts(1)
        // b has none running, a has one: b's oldest starts.
        XCTAssertEqual(r.started.withLock { $0.last }, "b0")
        r.release("a1")
        try r.waitForStarts(1)
        // One running each: the oldest waiting of the two (a2 came before b1).
        XCTAssertEqual(r.started.withLock { $0.last }, "a2")
        for name in ["b0", "a2"] { r.release(name) }
        try r.waitForStarts(1)
        r.release("b1")
        XCTAssertEqual(r.started.withLock { $0 }, ["a0", "a1", "b0", "a2", "b1"])
    }
}

/// The server's `"durability"` reaches its apps' stores (SQLite's `synchronous`: 2 FULL, 1 NORMAL).
final class ServerDurabilityTests: XCTestCase {
    func testTheServersDurabilityIsItsStoresOwn() throws {
        for (config, expected) in [(nil, Int64(2)), (#"{"durability": "full"}"#, 2), (#"{"durability": "normal"}"#, 1)] {
            let h = try SyncHarness(config: config)
            defer { h.stopServer() }
            let app = try XCTUnwrap(h.server.apps["default"])
            let synchronous = try app.queue.sync { try app.store.withMetadata { try $0.rows("PRAGMA synchronous").first?.first?.intValue } }
            XCTAssertEqual(synchronous, expected, config ?? "no config")
        }
    }
}
