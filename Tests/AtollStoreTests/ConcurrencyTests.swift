import AtollStore
import Foundation
import XCTest

/// Several handles on one file, and several threads on one handle. No assertion depends on timing:
/// orderings are recorded as events and compared.
final class ConcurrencyTests: XCTestCase {
    static let schema = Schema([ObjectSchema(name: "Item", primaryKey: "id", properties: [
        .int("id"), .string("writer"), .int("n"),
    ])])

    /// A thread-safe list of events.
    final class Events: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [String] = []
        func add(_ e: String) { lock.lock(); items.append(e); lock.unlock() }
        var all: [String] { lock.lock(); defer { lock.unlock() }; return items }
    }

    /// Two processes on one file. The second process is this test binary running this test in
    /// the role `ATOLL_TEST_ROLE` names.
    func testTwoProcesses() throws {
        let environment = ProcessInfo.processInfo.environment
        if let role = environment["ATOLL_TEST_ROLE"], let path = environment["ATOLL_TEST_PATH"] {
            switch role {
            case "impatient":
                // The parent holds the write lock, with object 1 committed and 2 not.
                let store = try Store(Configuration(path: path, writeTimeoutMilliseconds: 100))
                defer { store.close() }
                XCTAssertEqual(try store.intKeys("Item"), [1])
                assertAtollError(try store.beginWrite(), .busy)
            case "writer":
                // Waits for the parent's write lock, then writes object 3.
                let store = try Store(Configuration(path: path))
                defer { store.close() }
                try store.write { try store.create("Item", ["id": .int(3), "writer": .string("child")]) }
            default:
                XCTFail("unknown role \(role)")
            }
            return
        }

        let name = String(reflecting: type(of: self)) + "/testTwoProcesses"
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema, changeLogValues: true)
        try store.write { try store.create("Item", ["id": .int(1)]) }
        try store.beginWrite()
        try store.create("Item", ["id": .int(2)])

        let impatient = try TestProcess(name, environment: ["ATOLL_TEST_ROLE": "impatient", "ATOLL_TEST_PATH": path])
        let (passed, output) = impatient.finish()
        XCTAssertTrue(passed, output)

        let writer = try TestProcess(name, environment: ["ATOLL_TEST_ROLE": "writer", "ATOLL_TEST_PATH": path])
        usleep(200_000)  // the writer is now (most likely) waiting for the lock; not needed for the assertions
        try store.commit()
        let (writerPassed, writerOutput) = writer.finish()
        XCTAssertTrue(writerPassed, writerOutput)
        try store.refresh()

        // The child's commit came after the parent's: the next version, with the parent's data seen.
        XCTAssertEqual(try store.intKeys("Item"), [1, 2, 3])
        XCTAssertEqual(try store.changes(after: 0).map { $0.instructions.first?.primaryKey }, [.int(1), .int(2), .int(3)])
        XCTAssertEqual(try store.value("Item", primaryKey: .int(3), property: "writer"), .string("child"))
    }

    func testAReaderSeesCommittedDataOnly() throws {
        let path = temporaryRealmPath()
        let writer = try open(path, Self.schema, changeLogValues: true)
        let reader = try open(path, nil, changeLogValues: true)
        try writer.beginWrite()
        try writer.create("Item", ["id": .int(1)])
        XCTAssertEqual(try reader.objects("Item").count(), 0, "uncommitted writes are invisible to others")
        XCTAssertEqual(try reader.version(), 0)
        try writer.commit()
        XCTAssertEqual(try reader.objects("Item").count(), 0, "the reader sees its snapshot until it refreshes")
        try reader.refresh()
        XCTAssertEqual(try reader.objects("Item").count(), 1)
        XCTAssertEqual(try reader.version(), 1)
        XCTAssertEqual(try reader.changes(after: 0).first?.instructions.first,
                       Instruction(.create, "Item", .int(1)))
    }

    func testASecondWriterWaitsForTheFirstToCommit() throws {
        let path = temporaryRealmPath()
        let first = try open(path, Self.schema, changeLogValues: true)
        let second = try open(path, nil, changeLogValues: true)
        let events = Events()
        let done = expectation(description: "second writer finished")

        try first.beginWrite()
        try first.create("Item", ["id": .int(1), "writer": .string("first")])
        let thread = Thread {
            do {
                events.add("second: beginWrite called")
                try second.beginWrite()
                events.add("second: began")
                // It sees what the first committed, and takes the next version.
                let seen = try second.objects("Item").count()
                events.add("second: sees \(seen)")
                try second.create("Item", ["id": .int(2), "writer": .string("second")])
                try second.commit()
                events.add("second: committed")
            } catch {
                events.add("second: error \(error)")
            }
            done.fulfill()
        }
        thread.start()
        // Give the thread a chance to block in beginWrite (not needed for the assertions).
        while !events.all.contains("second: beginWrite called") { usleep(1000) }
        usleep(50_000)
        events.add("first: committing")
        try first.commit()
        wait(for: [done], timeout: 30)
        try first.refresh()

        XCTAssertEqual(events.all, ["second: beginWrite called", "first: committing", "second: began", "second: sees 1",
                                    "second: committed"])
        XCTAssertEqual(try first.changes(after: 0).map(\.version), [1, 2])
        XCTAssertEqual(try first.changes(after: 1).first?.instructions.first, Instruction(.create, "Item", .int(2)))
    }

    func testWriteTimeoutGivesBusy() throws {
        let path = temporaryRealmPath()
        let holder = try open(path, Self.schema, changeLogValues: true)
        let impatient = try open(path, nil, writeTimeoutMilliseconds: 100, changeLogValues: true)
        try holder.beginWrite()
        assertAtollError(try impatient.beginWrite(), .busy, "locked")
        XCTAssertFalse(impatient.isInWrite)
        assertAtollError(try impatient.write { try impatient.create("Item", ["id": .int(9)]) }, .busy)
        try holder.create("Item", ["id": .int(1)])
        try holder.commit()

        try impatient.write { try impatient.create("Item", ["id": .int(2)]) }
        try holder.refresh()
        XCTAssertEqual(try holder.intKeys("Item"), [1, 2])
        XCTAssertEqual(try impatient.version(), 2)
    }

    func testZeroTimeoutFailsAtOnce() throws {
        let path = temporaryRealmPath()
        let holder = try open(path, Self.schema, changeLogValues: true)
        let other = try open(path, nil, writeTimeoutMilliseconds: 0, changeLogValues: true)
        try holder.beginWrite()
        assertAtollError(try other.beginWrite(), .busy)
        try holder.cancelWrite()
        try other.write { try other.create("Item", ["id": .int(1)]) }
        XCTAssertEqual(try holder.intKeys("Item"), [], "the holder reads as of its cancel until it refreshes")
        try holder.refresh()
        XCTAssertEqual(try holder.intKeys("Item"), [1])
    }

    /// The write transaction belongs to the store, not to a thread: a second thread's
    /// `beginWrite` while one is open fails instead of nesting.
    func testAnotherThreadCannotBeginWhileATransactionIsOpen() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try store.beginWrite()
        let done = expectation(description: "other thread")
        let events = Events()
        Thread {
            do { try store.beginWrite() } catch let e as AtollError { events.add("\(e.code)") } catch {}
            done.fulfill()
        }.start()
        wait(for: [done], timeout: 10)
        XCTAssertEqual(events.all, ["alreadyInWrite"])
        try store.commit()
    }

    /// Eight threads writing (each transaction under `withLock`) and reading one store.
    func testManyThreadsOnOneStore() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        let hold = try holdChangeLog(store.configuration.path!)
        defer { hold.invalidate() }
        let threads = 8, perThread = 100
        let failures = Events()
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            var lastCount = 0
            for k in 0..<perThread {
                let id = Int64(t * 1000 + k)
                do {
                    _ = try store.withLock {
                        try store.write {
                            try store.create("Item", ["id": .int(id), "writer": .string("t\(t)"), "n": .int(Int64(k))])
                        }
                    }
                    let doc = try store.object("Item", primaryKey: .int(id))
                    if doc?["n"] != .int(Int64(k)) { failures.add("t\(t): read back \(String(describing: doc))") }
                    let count = try store.objects("Item").count()
                    if count < lastCount || count < k + 1 { failures.add("t\(t): count went from \(lastCount) to \(count)") }
                    lastCount = count
                    let mine = try store.objects("Item", where: "writer == $0", [.string("t\(t)")]).count()
                    if mine != k + 1 { failures.add("t\(t): sees \(mine) of its own, wrote \(k + 1)") }
                } catch {
                    failures.add("t\(t): \(error)")
                }
            }
        }
        XCTAssertEqual(failures.all, [])
        XCTAssertEqual(try store.objects("Item").count(), threads * perThread)
        XCTAssertEqual(try store.version(), UInt64(threads * perThread))
        for t in 0..<threads {
            XCTAssertEqual(try store.objects("Item", where: "writer == $0 SORT(n ASC)", [.string("t\(t)")])
                .documents().map { $0["n"]?.intValue ?? -1 }, (0..<Int64(perThread)).map { $0 })
        }
        let sets = try store.changes(after: 0)
        XCTAssertEqual(sets.map(\.version), (1...UInt64(threads * perThread)).map { $0 })
        XCTAssertTrue(sets.allSatisfy { $0.instructions.count == 3 && $0.instructions[0].op == .create })
    }

    /// Two handles on one file, each written by its own threads.
    func testTwoHandlesWritingConcurrently() throws {
        let path = temporaryRealmPath()
        let a = try open(path, Self.schema, changeLogValues: true)
        let b = try open(path, nil, changeLogValues: true)
        let hold = try holdChangeLog(path)
        defer { hold.invalidate() }
        let failures = Events()
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            let store = t % 2 == 0 ? a : b
            for k in 0..<50 {
                do {
                    _ = try store.withLock {
                        try store.write { try store.create("Item", ["id": .int(Int64(t * 1000 + k)), "n": .int(Int64(k))]) }
                    }
                } catch {
                    failures.add("t\(t): \(error)")
                }
            }
        }
        XCTAssertEqual(failures.all, [])
        try a.refresh()
        try b.refresh()
        XCTAssertEqual(try a.objects("Item").count(), 200)
        XCTAssertEqual(try b.objects("Item").count(), 200)
        XCTAssertEqual(try a.changes(after: 0).map(\.version), (1...200).map { UInt64($0) })
    }

    func testReadsFromOtherThreadsDuringAWrite() throws {
        let path = temporaryRealmPath()
        let writer = try open(path, Self.schema, changeLogValues: true)
        let reader = try open(path, nil, changeLogValues: true)
        try writer.write { try writer.createMany("Item", (0..<100).map { ["id": .int(Int64($0))] }) }
        XCTAssertEqual(try reader.objects("Item").count(), 0, "the reader reads as of its open")
        try reader.refresh()
        try writer.beginWrite()
        try writer.createMany("Item", (100..<200).map { ["id": .int(Int64($0))] })
        let counts = Events()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<20 { counts.add(String((try? reader.objects("Item").count()) ?? -1)) }
        }
        XCTAssertEqual(Set(counts.all), ["100"])
        try writer.commit()
        XCTAssertEqual(try reader.objects("Item").count(), 100, "the reader's snapshot holds until it refreshes")
        try reader.refresh()
        XCTAssertEqual(try reader.objects("Item").count(), 200)
    }

    /// Keeps the whole change log of a file (pruning keeps what observers have not seen): an
    /// observer on another handle that is never delivered to.
    func holdChangeLog(_ path: String) throws -> NotificationToken {
        var config = Configuration(path: path)
        config.notificationDelivery = .host
        let store = try Store(config)
        addTeardownBlock { store.close() }
        return try store.observe { _ in }
    }
}
