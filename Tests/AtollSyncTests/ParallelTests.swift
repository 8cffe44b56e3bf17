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

    /// `text` through a `ParsedMessage` with room to parse ahead: whether it went ahead as
    /// `ahead` says, and the same document as parsed in place.
    private func parsed(_ text: String, ahead: Bool, file: StaticString = #filePath, line: UInt = #line) throws -> Fields {
        let message = ParsedMessage(text, ahead: ParseAhead())
        XCTAssertEqual(message.isParsedAhead, ahead, file: file, line: line)
        let fields = try message.fields()
        XCTAssertEqual(fields.document, try Wire.decode(text).document, file: file, line: line)
        return fields
    }

    func testALargeMessageIsParsedAndDecodedAsInPlace() throws {
        let (text, cs) = upload(10_000)
        XCTAssertGreaterThanOrEqual(text.utf8.count, ParsedMessage.threshold)
        let fields = try parsed(text, ahead: true)
        XCTAssertEqual(fields.decodedChangesets?.map(\.instructions), [cs.instructions])
        XCTAssertEqual(fields.decodedChangesets?.first?.clientVersion, 9)
        XCTAssertFalse(ParsedMessage(text).isParsedAhead, "without a budget, parsed where it is handled")
    }

    func testParsingAheadStopsAtTheBudgetAndGivesItBack() throws {
        let (text, _) = upload(10_000)
        let size = text.utf8.count
        let budget = ParseAhead(limit: 2 * size)
        var messages = (0..<3).map { _ in ParsedMessage(text, ahead: budget) }
        XCTAssertEqual(messages.map(\.isParsedAhead), [true, true, false], "the third waits as text")
        XCTAssertEqual(budget.inFlight, 2 * size)
        // Parsed ahead or not, the same message.
        XCTAssertEqual(try messages[0].fields().document, try messages[2].fields().document)
        messages.removeFirst()
        XCTAssertEqual(budget.inFlight, size, "a handled message gives its bytes back")
        XCTAssertTrue(ParsedMessage(text, ahead: budget).isParsedAhead, "and makes room for the next")
        messages.removeAll()
        XCTAssertEqual(budget.inFlight, 0)
    }

    func testASmallMessageIsParsedWhereItIsHandled() throws {
        let (text, _) = upload(3)
        XCTAssertLessThan(text.utf8.count, ParsedMessage.threshold)
        XCTAssertNil(try parsed(text, ahead: false).decodedChangesets, "decoded by the handler, in order")
    }

    func testALargeMessageWithABadChangesetLeavesItToTheHandler() throws {
        let filler = String(repeating: "x", count: ParsedMessage.threshold)
        let text = Wire.encode(.doc(["type": .string("upload"), "pad": .string(filler),
                                     "changesets": .list([.doc(["clientVersion": .int(1)])])]))
        let fields = try parsed(text, ahead: true)
        XCTAssertNil(fields.decodedChangesets)
        XCTAssertThrowsError(try SyncChangeset(wire: try fields.list("changesets")[0]))
    }

    func testALargeTextThatIsNotJSONFailsAsInPlace() {
        let text = "{" + String(repeating: "x", count: ParsedMessage.threshold)
        XCTAssertThrowsError(try ParsedMessage(text, ahead: ParseAhead()).fields()) { error in
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
