@testable import AtollNet
import Foundation
import Synchronization
import XCTest

/// `MemorySocket`: the pipe the in-process transport gives a sync connection in place of a
/// WebSocket. What a WebSocket promises its users, it must promise too.
final class MemorySocketTests: XCTestCase {
    /// Collects one end's events; `closed` is fulfilled by `.closed`.
    final class Events: @unchecked Sendable {
        private let lock = NSLock()
        private var events: [WebSocketEvent] = []
        let closed = XCTestExpectation(description: "closed")
        func add(_ e: WebSocketEvent) {
            lock.withLock { events.append(e) }
            if case .closed = e { closed.fulfill() }
        }
        var all: [WebSocketEvent] { lock.withLock { events } }
    }

    func testMessagesArriveInOrderThenTheCloseOnBothEnds() throws {
        let (a, b) = MemorySocket.pair()
        let atA = Events(), atB = Events()
        a.onEvent = { atA.add($0) }
        b.onEvent = { atB.add($0) }
        // From several threads at once: each sender's messages keep their order.
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            for i in 0..<250 { try? a.send("\(t):\(i)") }
        }
        for i in 0..<10 { try b.send("back \(i)") }
        a.close(code: 4001, reason: "done")
        XCTAssertThrowsError(try a.send("late")) { XCTAssertEqual($0 as? NetError, .closed("the socket is closed")) }
        XCTAssertThrowsError(try b.send("late"))
        wait(for: [atA.closed, atB.closed], timeout: 10)
        let texts = atB.all.compactMap { if case .text(let t) = $0 { t } else { nil } }
        XCTAssertEqual(texts.count, 1000)
        for t in 0..<4 {
            XCTAssertEqual(texts.filter { $0.hasPrefix("\(t):") }, (0..<250).map { "\(t):\($0)" })
        }
        XCTAssertEqual(atB.all.last, .closed(code: 4001, reason: "done"))
        XCTAssertEqual(atA.all, (0..<10).map { .text("back \($0)") } + [.closed(code: 4001, reason: "done")])
        // A second close changes nothing.
        b.close(code: 1000, reason: "again")
        a.close(code: 1000, reason: "again")
        Thread.sleep(forTimeInterval: 0.05)
        XCTAssertEqual(atA.all.count, 11)
        XCTAssertEqual(a.queuedBytes, 0)
    }

    func testEventsBeforeTheHandlerAreDeliveredFirst() throws {
        let (a, b) = MemorySocket.pair()
        try a.send("one")
        try a.send("two")
        a.close(code: 1001, reason: "away")
        let atB = Events()
        b.onEvent = { atB.add($0) }
        wait(for: [atB.closed], timeout: 10)
        XCTAssertEqual(atB.all, [.text("one"), .text("two"), .closed(code: 1001, reason: "away")])
    }

    func testQueuedBytesCountWhatThePeerHasNotTaken() throws {
        let (a, b) = MemorySocket.pair()
        let gate = DispatchSemaphore(value: 0)
        let taken = Events()
        b.onEvent = { e in
            if case .text = e { gate.wait() }
            taken.add(e)
        }
        try a.send("12345")
        try a.send("678")
        // The first is held in b's handler, the second waits behind it.
        let deadline = Date().addingTimeInterval(5)
        while a.queuedBytes != 3, Date() < deadline { usleep(1000) }
        XCTAssertEqual(a.queuedBytes, 3)
        gate.signal()
        gate.signal()
        a.close(code: 1000, reason: "")
        wait(for: [taken.closed], timeout: 10)
        XCTAssertEqual(a.queuedBytes, 0)
    }
}
