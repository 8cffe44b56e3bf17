import AtollJSON
import AtollProtocol
import AtollStore
import Dispatch
import XCTest

/// The work sync hands to the other core (Parallel.swift): results in order, values that arrive
/// whether or not a thread took the work up, and messages parsed ahead (within a budget of
/// bytes) as they would be in place.
final class ParallelTests: XCTestCase {
    func testConcurrentMapKeepsTheOrderOfIndexes() {
        XCTAssertEqual(concurrentMap(0) { $0 }, [])
        XCTAssertEqual(concurrentMap(1) { "\($0)" }, ["0"])
        XCTAssertEqual(concurrentMap(1_000) { String(repeating: "x", count: $0 % 7) + "\($0)" },
                       (0..<1_000).map { String(repeating: "x", count: $0 % 7) + "\($0)" })
    }

    func testEventuallyGivesTheValueOnceWhoeverComputesIt() {
        // Asked at once (most often before a thread takes it up: computed by the asker) and
        // asked late (computed on the global queue); either way once, and asked again the same.
        for delay in [0.0, 0.05] {
            let runs = Counter()
            let value = Eventually { runs.add(); return (1...100).reduce(0, +) }
            if delay > 0 { Thread.sleep(forTimeInterval: delay) }
            XCTAssertEqual(value.value(), 5_050)
            XCTAssertEqual(value.value(), 5_050)
            Thread.sleep(forTimeInterval: 0.05)
            XCTAssertEqual(runs.count, 1, "after \(delay) s")
        }
    }

    func testEventuallyDoesNotWaitForAThreadWhenEveryThreadWaits() {
        // More waiters than the machine has threads for: each takes up its own work if no
        // thread has, so all of them finish.
        let group = DispatchGroup()
        let finished = Counter()
        for i in 0..<200 {
            DispatchQueue.global().async(group: group) {
                let value = Eventually { i * 2 }
                if value.value() == i * 2 { finished.add() }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(finished.count, 200)
    }

    /// An upload of `objects` new objects, as its text.
    private func upload(_ objects: Int) -> (text: String, changeset: SyncChangeset) {
        let clock = Clock(milliseconds: 1_764_489_600_000, node: 5)
        let instructions = (0..<objects).flatMap { i in
            [SyncInstruction(.create, "Item", .int(Int64(i))),
             SyncInstruction(.set, "Item", .int(Int64(i)), path: [.key("name")], value: .string("item-\(i)"))]
        }
        let cs = SyncChangeset(clientVersion: 9, clock: clock, instructions: instructions)
        let message = Value.doc(["type": .string("upload"), "session": .int(1), "changesets": .list([cs.wireValue])])
        return (Wire.encode(message), cs)
    }

    /// `text` through a `ParsedMessage` with room to decode ahead: whether it went ahead as
    /// `ahead` says, and the same message as decoded in place.
    private func parsed(_ text: String, ahead: Bool, file: StaticString = #filePath, line: UInt = #line) throws -> ClientMessage {
        let message = ParsedMessage<ClientMessage>(text, ahead: ParseAhead())
        XCTAssertEqual(message.isParsedAhead, ahead, file: file, line: line)
        let decoded = try message.message()
        XCTAssertEqual(decoded, try ClientMessage(text: text), file: file, line: line)
        return decoded
    }

    func testALargeMessageIsDecodedAsInPlace() throws {
        let (text, cs) = upload(10_000)
        XCTAssertGreaterThanOrEqual(text.utf8.count, parseAheadThreshold)
        let message = try parsed(text, ahead: true)
        XCTAssertEqual(message, .upload(session: 1, changesets: [.decoded(cs)]))
        XCTAssertFalse(ParsedMessage<ClientMessage>(text).isParsedAhead, "without a budget, decoded where it is handled")
    }

    func testDecodingAheadStopsAtTheBudgetAndGivesItBack() throws {
        let (text, _) = upload(10_000)
        let size = text.utf8.count
        let budget = ParseAhead(limit: 2 * size)
        var messages = (0..<3).map { _ in ParsedMessage<ClientMessage>(text, ahead: budget) }
        XCTAssertEqual(messages.map(\.isParsedAhead), [true, true, false], "the third waits as text")
        XCTAssertEqual(budget.inFlight, 2 * size)
        // Decoded ahead or not, the same message.
        XCTAssertEqual(try messages[0].message(), try messages[2].message())
        messages.removeFirst()
        XCTAssertEqual(budget.inFlight, size, "a handled message gives its bytes back")
        XCTAssertTrue(ParsedMessage<ClientMessage>(text, ahead: budget).isParsedAhead, "and makes room for the next")
        messages.removeAll()
        XCTAssertEqual(budget.inFlight, 0)
    }

    func testASmallMessageIsDecodedWhereItIsHandled() throws {
        let (text, cs) = upload(3)
        XCTAssertLessThan(text.utf8.count, parseAheadThreshold)
        XCTAssertEqual(try parsed(text, ahead: false), .upload(session: 1, changesets: [.decoded(cs)]))
    }

    func testALargeMessageWithABadChangesetFailsAsInPlace() throws {
        let filler = String(repeating: "x", count: parseAheadThreshold)
        let text = Wire.encode(.doc(["type": .string("upload"), "session": .int(4), "pad": .string(filler),
                                     "changesets": .list([.doc(["clientVersion": .int(1)])])]))
        let message = ParsedMessage<ClientMessage>(text, ahead: ParseAhead())
        XCTAssertTrue(message.isParsedAhead)
        XCTAssertThrowsError(try message.message()) { error in
            let e = error as? ProtocolError
            XCTAssertTrue(e?.message.contains("clock") == true, "\(error)")
            XCTAssertEqual(e?.messageType, "upload", "the refusal knows the message's type")
            XCTAssertEqual(e?.session, 4, "and its session")
        }
    }

    func testALargeTextThatIsNotJSONFailsAsInPlace() {
        let text = "{" + String(repeating: "x", count: parseAheadThreshold)
        XCTAssertThrowsError(try ParsedMessage<ServerMessage>(text, ahead: ParseAhead()).message()) { error in
            XCTAssertTrue(error is ProtocolError, "\(error)")
            XCTAssertTrue("\(error)".contains("not JSON"), "\(error)")
        }
    }
}

/// A count several threads add to.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    var count: Int { lock.withLock { value } }
    func add() { lock.withLock { value += 1 } }
}
