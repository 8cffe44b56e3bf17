import AtollStore
import Foundation
import XCTest

/// A realm's files: copies, compaction, existence, deletion, read-only handles, and several
/// handles and processes on one file. Every test works on real files; the two-process tests
/// run this test binary again as the second process.
final class FileOperationsTests: XCTestCase {
    static let schema = Schema([ObjectSchema(name: "Item", primaryKey: "id", properties: [
        .int("id"), .string("name"), .string("payload"),
    ])])

    /// `count` items from `first` on, each with a 1 KB payload, in one transaction.
    private static func fill(_ store: Store, from first: Int = 0, count: Int) throws {
        let payload = String(repeating: "x", count: 1000)
        try store.write {
            _ = try store.createMany("Item", (first..<first + count).map {
                ["id": .int(Int64($0)), "name": .string("item \($0)"), "payload": .string(payload)]
            })
        }
    }

    /// A closed file with 2,000 items written and all but the first 100 deleted: the pages of
    /// 1,900 KB of payload are free (the change log keeps its own copy of every payload).
    private func makeFragmentedFile() throws -> String {
        let path = temporaryRealmPath()
        let store = try Store(Configuration(path: path, schema: Self.schema, changeLogValues: true))
        try Self.fill(store, count: 2000)
        try store.write { try store.objects("Item", where: "id >= 100").deleteAll() }
        store.close()
        return path
    }

    /// What deleting 1,900 items of 1 KB frees at least (pages are not full).
    static let freed: Int64 = 1_500_000

    private func fileSize(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : 0
    }

    private func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Everything a user can read back from a realm: objects, version, change log.
    private func contents(_ store: Store) throws -> ([Document], UInt64, [ChangeSet]) {
        (try store.objects("Item").documents(), try store.version(), try store.changes(after: 0))
    }

    /// Records what `shouldCompactOnLaunch` was asked, and answers with `answer`.
    final class CompactProbe: @unchecked Sendable {
        private let lock = NSLock()
        private var asked: [(total: UInt64, used: UInt64)] = []
        let answer: Bool
        init(answer: Bool) { self.answer = answer }
        var calls: [(total: UInt64, used: UInt64)] { lock.lock(); defer { lock.unlock() }; return asked }
        var callback: @Sendable (UInt64, UInt64) -> Bool {
            { total, used in
                self.lock.lock()
                self.asked.append((total, used))
                self.lock.unlock()
                return self.answer
            }
        }
    }

    /// What `shouldCompactOnLaunch` is told about the file at `path` now (it answers no).
    private func usage(_ path: String) throws -> (total: UInt64, used: UInt64) {
        let probe = CompactProbe(answer: false)
        try Store(Configuration(path: path, shouldCompactOnLaunch: probe.callback)).close()
        guard let first = probe.calls.first else {
            XCTFail("shouldCompactOnLaunch was not asked")
            return (0, 0)
        }
        return first
    }

    // MARK: - writeCopy

    func testCompactedCopyIsSmallerAndHoldsTheSameData() throws {
        let path = try makeFragmentedFile()
        let store = try open(path, nil, changeLogValues: true)
        let compacted = temporaryRealmPath("compacted.realm")
        let plain = temporaryRealmPath("plain.realm")
        try store.writeCopy(to: compacted)
        try store.writeCopy(to: plain, compact: false)

        // The page-for-page copy is as large as the database; the compacted one much smaller.
        let before = try usage(path)
        XCTAssertEqual(UInt64(fileSize(plain)), before.total)
        XCTAssertLessThan(fileSize(compacted) + Self.freed, fileSize(plain))
        XCTAssertFalse(exists(compacted + "-wal"))

        let expected = try contents(store)
        XCTAssertEqual(expected.0.count, 100)
        for copy in [compacted, plain] {
            let opened = try open(copy, nil, changeLogValues: true)
            let got = try contents(opened)
            XCTAssertEqual(got.0, expected.0, copy)
            XCTAssertEqual(got.1, expected.1, copy)
            XCTAssertEqual(got.2, expected.2, copy)
            XCTAssertEqual(opened.schema, Self.schema)
            // The copy is a realm of its own: it can be written.
            try opened.write { try opened.create("Item", ["id": .int(5000), "name": .string("new")]) }
        }
        XCTAssertNil(try store.object("Item", primaryKey: .int(5000)), "writing a copy does not change the original")
    }

    func testUncompactedCopyKeepsTheFreePages() throws {
        let path = try makeFragmentedFile()
        let store = try open(path, nil, changeLogValues: true)
        let plain = temporaryRealmPath("plain.realm")
        try store.writeCopy(to: plain, compact: false)
        store.close()
        let original = try usage(path)
        let copy = try usage(plain)
        XCTAssertEqual(copy.total, original.total)
        XCTAssertEqual(copy.used, original.used)
        XCTAssertGreaterThan(copy.total - copy.used, UInt64(Self.freed), "the deleted items' pages are free")
    }

    func testCopyToAnExistingPathIsRefused() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try Self.fill(store, count: 3)
        let taken = temporaryRealmPath("taken.realm")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: taken))
        assertAtollError(try store.writeCopy(to: taken), .file, "'\(taken)' exists already")
        assertAtollError(try store.writeCopy(to: taken, compact: false), .file, "exists already")
        XCTAssertEqual(try String(contentsOfFile: taken, encoding: .utf8), "keep me")

        // A WAL left beside the destination would be replayed into the copy: refused too.
        let stale = temporaryRealmPath("stale.realm")
        try Data("old wal".utf8).write(to: URL(fileURLWithPath: stale + "-wal"))
        assertAtollError(try store.writeCopy(to: stale), .file, "'\(stale)-wal' exists already")
        XCTAssertFalse(exists(stale))
    }

    func testCopyInsideAWriteTransactionIsRefused() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        let copy = temporaryRealmPath("copy.realm")
        try store.beginWrite()
        try store.create("Item", ["id": .int(1), "name": .string("a")])
        assertAtollError(try store.writeCopy(to: copy), .alreadyInWrite, "write transaction")
        assertAtollError(try store.writeCopy(to: copy, compact: false), .alreadyInWrite)
        assertAtollError(try store.writeCopy(to: Configuration(path: copy, schema: Self.schema)), .alreadyInWrite)
        XCTAssertFalse(exists(copy))
        // The transaction is untouched.
        try store.commit()
        XCTAssertEqual(try store.intKeys("Item"), [1])
    }

    func testCopyErrorsLeaveNoFile() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        let missingDirectory = temporaryRealmPath("dir") + "/absent/copy.realm"
        assertAtollError(try store.writeCopy(to: missingDirectory), .file, "cannot create")
        assertAtollError(try store.writeCopy(to: ""), .invalidArgument, "empty")
        assertAtollError(try store.writeCopy(to: "a\0b"), .invalidArgument, "NUL")
        assertAtollError(try store.writeCopy(to: Configuration(inMemory: true)), .invalidArgument, "in-memory")
        assertAtollError(try store.writeCopy(to: Configuration()), .invalidArgument, "\"path\"")
        store.close()
        assertAtollError(try store.writeCopy(to: temporaryRealmPath("closed.realm")), .closed)
    }

    func testAnInMemoryRealmCanBeCopiedToAFile() throws {
        let memory = try Store(Configuration(inMemory: true, schema: Self.schema))
        defer { memory.close() }
        try Self.fill(memory, count: 10)
        for compact in [true, false] {
            let copy = temporaryRealmPath("from-memory.realm")
            try memory.writeCopy(to: copy, compact: compact)
            let opened = try open(copy, nil, changeLogValues: true)
            XCTAssertEqual(try opened.intKeys("Item"), Array(0..<10))
            XCTAssertEqual(try opened.version(), 1)
        }
    }

    func testCopyToAConfigurationThatNeedsAMigrationIsRefusedAndLeavesNoFile() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try Self.fill(store, count: 3)
        let copy = temporaryRealmPath("migrate.realm")
        var changed = Self.schema
        changed.classes[0].properties[1] = .int("name")
        // The same schema version: the change needs a migration, which then does not run.
        assertAtollError(try store.writeCopy(to: Configuration(path: copy, schema: changed)),
                         .schemaMismatch, "does not open with the configuration",
                         "property 'Item.name' changed type from string to int")
        for name in [copy] + ["-wal", "-shm", "-journal"].map({ copy + $0 }) {
            XCTAssertFalse(exists(name), "\(name) was left behind")
        }
        // The same path works afterwards with a configuration the data fits.
        try store.writeCopy(to: Configuration(path: copy, schema: Self.schema))
        XCTAssertEqual(try open(copy, nil, changeLogValues: true).intKeys("Item"), [0, 1, 2])
    }

    func testCopyToAConfigurationAddsItsNewClasses() throws {
        let store = try openTemporaryStore(Self.schema, changeLogValues: true)
        try Self.fill(store, count: 2)
        var extended = Self.schema
        extended.classes.append(ObjectSchema(name: "Tag", properties: [.string("label")]))
        let copy = temporaryRealmPath("extended.realm")
        try store.writeCopy(to: Configuration(path: copy, schema: extended, schemaVersion: 2))
        let opened = try open(copy, nil, changeLogValues: true)
        XCTAssertEqual(opened.schema, extended)
        XCTAssertEqual(opened.schemaVersion, 2)
        XCTAssertEqual(try opened.intKeys("Item"), [0, 1])
        XCTAssertEqual(store.schema, Self.schema, "the original keeps its schema")
    }

    // MARK: - compact

    func testCompactShrinksTheFileAndKeepsTheData() throws {
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema, changeLogValues: true)
        try Self.fill(store, count: 2000)
        try store.write { try store.objects("Item", where: "id >= 100").deleteAll() }
        let before = try contents(store)
        let sizeBefore = fileSize(path) + fileSize(path + "-wal")
        try store.compact()
        let sizeAfter = fileSize(path) + fileSize(path + "-wal")
        XCTAssertLessThan(sizeAfter + Self.freed, sizeBefore, "before \(sizeBefore), after \(sizeAfter)")
        XCTAssertEqual(fileSize(path + "-wal"), 0, "the WAL is truncated")
        let after = try contents(store)
        XCTAssertEqual(after.0, before.0)
        XCTAssertEqual(after.1, before.1)
        XCTAssertEqual(after.2, before.2)
        // Still writable, and another handle reads the same.
        try store.write { try store.create("Item", ["id": .int(9999), "name": .string("after")]) }
        XCTAssertEqual(try open(path, nil, changeLogValues: true).objects("Item").count(), 101)
    }

    func testCompactIsRefusedInAWriteAndWhenReadOnly() throws {
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema, changeLogValues: true)
        try store.beginWrite()
        assertAtollError(try store.compact(), .alreadyInWrite, "compact", "write transaction")
        XCTAssertTrue(store.isInWrite)
        try store.cancelWrite()
        let reader = try open(path, nil, readOnly: true)
        assertAtollError(try reader.compact(), .readOnly, "compact", "read-only")
        store.close()
        assertAtollError(try store.compact(), .closed)
    }

    func testCompactWaitsForAnotherWriterThenGivesBusy() throws {
        let path = temporaryRealmPath()
        let holder = try open(path, Self.schema, changeLogValues: true)
        let impatient = try open(path, nil, writeTimeoutMilliseconds: 100, changeLogValues: true)
        try holder.beginWrite()
        try holder.create("Item", ["id": .int(1), "name": .string("held")])
        assertAtollError(try impatient.compact(), .busy, "cannot compact", "write lock")
        try holder.commit()
        try impatient.compact()
        XCTAssertEqual(try impatient.intKeys("Item"), [1])
    }

    func testCompactWorksWithAnotherHandleOpen() throws {
        let path = temporaryRealmPath()
        let store = try open(path, Self.schema, changeLogValues: true)
        let other = try open(path, nil, changeLogValues: true)
        try Self.fill(store, count: 500)
        try store.write { try store.objects("Item", where: "id >= 10").deleteAll() }
        try store.compact()
        XCTAssertEqual(try other.intKeys("Item"), [], "the other handle reads as of its open")
        try other.refresh()
        XCTAssertEqual(try other.intKeys("Item"), Array(0..<10))
        try other.write { try other.create("Item", ["id": .int(100), "name": .string("other")]) }
        try store.refresh()
        XCTAssertEqual(try store.objects("Item").count(), 11)
    }

    func testAnInMemoryRealmCanBeCompacted() throws {
        let memory = try Store(Configuration(inMemory: true, schema: Self.schema))
        defer { memory.close() }
        try Self.fill(memory, count: 50)
        try memory.compact()
        XCTAssertEqual(try memory.objects("Item").count(), 50)
    }

    // MARK: - shouldCompactOnLaunch

    func testShouldCompactOnLaunchIsToldTheSizesAndCompactsOnlyWhenItSaysSo() throws {
        let path = try makeFragmentedFile()

        let no = CompactProbe(answer: false)
        try Store(Configuration(path: path, shouldCompactOnLaunch: no.callback)).close()
        XCTAssertEqual(no.calls.count, 1)
        guard let asked = no.calls.first else { return }
        XCTAssertEqual(asked.total % 4096, 0, "whole pages")
        XCTAssertGreaterThan(asked.total, 2_000_000, "2,000 items of 1 KB were written")
        XCTAssertGreaterThan(asked.total - asked.used, UInt64(Self.freed), "the deleted items' pages are free")
        XCTAssertGreaterThan(asked.used, 100_000, "100 items of 1 KB remain")
        XCTAssertEqual(try usage(path).total, asked.total, "answering no changes nothing")

        let yes = CompactProbe(answer: true)
        let store = try Store(Configuration(path: path, shouldCompactOnLaunch: yes.callback))
        XCTAssertEqual(yes.calls.first?.total, asked.total)
        XCTAssertEqual(try store.intKeys("Item"), Array(0..<100), "the data is kept")
        store.close()
        let after = try usage(path)
        XCTAssertLessThan(after.total + UInt64(Self.freed), asked.total)
        XCTAssertEqual(after.used, after.total, "no free pages left")
        XCTAssertLessThan(fileSize(path) + Self.freed, Int64(asked.total), "the file itself shrank")
    }

    func testShouldCompactOnLaunchDoesNotCompactWhileAnotherHandleHasTheFileOpen() throws {
        let path = try makeFragmentedFile()
        let before = try usage(path)
        let other = try open(path, nil, changeLogValues: true)
        let yes = CompactProbe(answer: true)
        let store = try Store(Configuration(path: path, shouldCompactOnLaunch: yes.callback))
        XCTAssertEqual(yes.calls.count, 1, "asked all the same")
        store.close()
        other.close()
        XCTAssertEqual(try usage(path).total, before.total, "not compacted")
    }

    func testShouldCompactOnLaunchIsNotAskedForReadOnlyOrInMemoryRealms() throws {
        let path = try makeFragmentedFile()
        let probe = CompactProbe(answer: true)
        try Store(Configuration(path: path, readOnly: true, shouldCompactOnLaunch: probe.callback)).close()
        try Store(Configuration(inMemory: true, schema: Self.schema, shouldCompactOnLaunch: probe.callback)).close()
        XCTAssertEqual(probe.calls.count, 0)
    }

    func testShouldCompactOnLaunchOnANewFile() throws {
        let path = temporaryRealmPath()
        let probe = CompactProbe(answer: true)
        let store = try Store(Configuration(path: path, schema: Self.schema, shouldCompactOnLaunch: probe.callback))
        defer { store.close() }
        XCTAssertEqual(probe.calls.count, 1)
        XCTAssertGreaterThan(probe.calls.first?.total ?? 0, 0, "the new file has its metadata tables")
        try Self.fill(store, count: 1)
        XCTAssertEqual(try store.intKeys("Item"), [0])
    }

    // MARK: - fileExists and deleteFiles

    func testFileExists() throws {
        let path = temporaryRealmPath()
        XCTAssertFalse(try Store.fileExists(Configuration(path: path)))
        let store = try open(path, Self.schema, changeLogValues: true)
        XCTAssertTrue(try Store.fileExists(Configuration(path: path)))
        store.close()
        XCTAssertTrue(try Store.fileExists(Configuration(path: path)))
        XCTAssertTrue(try Store.deleteFiles(Configuration(path: path)))
        XCTAssertFalse(try Store.fileExists(Configuration(path: path)))
        XCTAssertFalse(try Store.fileExists(Configuration(path: path, inMemory: true)), "in memory: no file")
        assertAtollError(try Store.fileExists(Configuration()), .invalidArgument, "fileExists", "\"path\"")
    }

    func testDeleteFilesRefusesWhileOpenInThisProcessAndRemovesEverythingAfterClose() throws {
        let path = temporaryRealmPath()
        let first = try open(path, Self.schema, changeLogValues: true)
        let second = try open(path, nil, changeLogValues: true)
        try Self.fill(first, count: 5)
        XCTAssertTrue(exists(path + "-wal") && exists(path + "-shm"))
        assertAtollError(try Store.deleteFiles(Configuration(path: path)), .busy,
                         "cannot delete the files of '\(path)'", "open in this process (2 handles)")
        // Another spelling of the same path is the same file.
        let directory = (path as NSString).deletingLastPathComponent
        let spelled = directory + "/./../" + (directory as NSString).lastPathComponent + "/test.realm"
        assertAtollError(try Store.deleteFiles(Configuration(path: spelled)), .busy, "open in this process")
        XCTAssertEqual(try first.intKeys("Item"), [0, 1, 2, 3, 4], "nothing was deleted")

        first.close()
        assertAtollError(try Store.deleteFiles(Configuration(path: path)), .busy, "(1 handle)")
        second.close()
        XCTAssertTrue(try Store.deleteFiles(Configuration(path: path)))
        for name in [path, path + "-wal", path + "-shm", path + "-journal"] {
            XCTAssertFalse(exists(name), "\(name) is still there")
        }
        XCTAssertFalse(try Store.deleteFiles(Configuration(path: path)), "nothing left to delete is not an error")
        XCTAssertFalse(try Store.deleteFiles(Configuration(path: path, inMemory: true)))
        assertAtollError(try Store.deleteFiles(Configuration()), .invalidArgument, "deleteFiles", "\"path\"")

        // A new realm at the same path starts empty.
        let fresh = try open(path, Self.schema, changeLogValues: true)
        XCTAssertEqual(try fresh.objects("Item").count(), 0)
    }

    func testDeleteFilesRemovesWhatAReadOnlyHandleLeaves() throws {
        let path = try makeFragmentedFile()
        let reader = try open(path, nil, readOnly: true)
        XCTAssertEqual(try reader.objects("Item").count(), 100)
        assertAtollError(try Store.deleteFiles(Configuration(path: path)), .busy, "open in this process")
        reader.close()
        // A read-only connection cannot remove its -wal and -shm files when it closes.
        XCTAssertTrue(exists(path + "-shm"))
        XCTAssertTrue(try Store.deleteFiles(Configuration(path: path)))
        XCTAssertFalse(exists(path) || exists(path + "-wal") || exists(path + "-shm"))
    }

    func testDeleteFilesThroughASymbolicLink() throws {
        let path = temporaryRealmPath()
        try open(path, Self.schema, changeLogValues: true).close()
        let link = (path as NSString).deletingLastPathComponent + "/link.realm"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: path)
        let store = try open(link, nil, changeLogValues: true)
        assertAtollError(try Store.deleteFiles(Configuration(path: path)), .busy, "open in this process")
        store.close()
        XCTAssertTrue(try Store.deleteFiles(Configuration(path: link)))
        var info = stat()
        XCTAssertFalse(exists(path))
        XCTAssertNotEqual(lstat(link, &info), 0, "the link is gone too")
    }

    // MARK: - Another process

    /// A second process: this test binary, running `test` in the role `role` on `path`. The
    /// child marks `path.ready` once its realm is open and holds it until `path.release`
    /// appears.
    private func startChild(_ test: String, role: String, path: String) throws -> TestProcess {
        try TestProcess("AtollStoreTests.FileOperationsTests/\(test)",
                        environment: ["ATOLL_FILES_ROLE": role, "ATOLL_FILES_PATH": path])
    }

    private func waitFor(_ marker: String, _ child: TestProcess, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let deadline = Date().addingTimeInterval(60)
        while !exists(marker) {
            if !child.process.isRunning || Date() > deadline {
                let (_, output) = child.finish()
                XCTFail("the child never wrote \(marker):\n\(output)", file: file, line: line)
                return false
            }
            usleep(5000)
        }
        return true
    }

    /// The child's side: open (read-only when the role says so), mark ready, hold until released.
    private func holdOpenInChild(_ role: String, _ path: String) throws {
        let store = try Store(Configuration(path: path, readOnly: role == "reader"))
        XCTAssertGreaterThanOrEqual(try store.objects("Item").count(), 0)
        _ = FileManager.default.createFile(atPath: path + ".ready", contents: nil)
        let deadline = Date().addingTimeInterval(60)
        while !exists(path + ".release"), Date() < deadline { usleep(5000) }
        store.close()
    }

    func testDeleteFilesRefusesWhileOpenInAnotherProcess() throws {
        let environment = ProcessInfo.processInfo.environment
        if let role = environment["ATOLL_FILES_ROLE"], let path = environment["ATOLL_FILES_PATH"] {
            return try holdOpenInChild(role, path)
        }
        for role in ["writer", "reader"] {
            let path = try makeFragmentedFile()
            let child = try startChild("testDeleteFilesRefusesWhileOpenInAnotherProcess", role: role, path: path)
            guard waitFor(path + ".ready", child) else { return }
            let pid = child.process.processIdentifier
            assertAtollError(try Store.deleteFiles(Configuration(path: path)), .busy,
                             "cannot delete the files of '\(path)'", "open in another process (pid \(pid))")
            XCTAssertTrue(exists(path), role)

            // Nor does compaction at open happen while the other process has the file.
            let before = try usage(path)
            let yes = CompactProbe(answer: true)
            try Store(Configuration(path: path, shouldCompactOnLaunch: yes.callback)).close()
            XCTAssertEqual(yes.calls.count, 1)
            XCTAssertEqual(try usage(path).total, before.total, "\(role): not compacted while the child has it open")

            _ = FileManager.default.createFile(atPath: path + ".release", contents: nil)
            let (passed, output) = child.finish()
            XCTAssertTrue(passed, output)
            XCTAssertTrue(try Store.deleteFiles(Configuration(path: path)), role)
            XCTAssertFalse(exists(path) || exists(path + "-wal") || exists(path + "-shm"), role)
        }
    }

    /// Two processes write one file at once while a read-only handle follows along.
    func testTwoProcessesReadAndWriteOneFileAtOnce() throws {
        let environment = ProcessInfo.processInfo.environment
        if environment["ATOLL_FILES_ROLE"] == "batches", let path = environment["ATOLL_FILES_PATH"] {
            let store = try Store(Configuration(path: path))
            defer { store.close() }
            for batch in 0..<10 { try Self.fill(store, from: 1000 + batch * 10, count: 10) }
            return
        }
        let path = temporaryRealmPath()
        let writer = try open(path, Self.schema, changeLogValues: true)
        let reader = try open(path, nil, readOnly: true)
        let child = try startChild("testTwoProcessesReadAndWriteOneFileAtOnce", role: "batches", path: path)
        var seen: [Int] = []
        for batch in 0..<10 {
            try Self.fill(writer, from: batch * 10, count: 10)
            try reader.refresh()
            seen.append(try reader.objects("Item").count())
        }
        let (passed, output) = child.finish()
        XCTAssertTrue(passed, output)
        try reader.refresh()
        XCTAssertEqual(seen, seen.sorted(), "the reader never goes back")
        XCTAssertGreaterThanOrEqual(seen.last ?? 0, 100, "the reader sees the writer's commits")
        let expected = (0..<100).map(Int64.init) + (1000..<1100).map(Int64.init)
        XCTAssertEqual(try reader.intKeys("Item"), expected)
        try writer.refresh()
        XCTAssertEqual(try writer.intKeys("Item"), expected)
        XCTAssertEqual(try reader.version(), 20, "one version per commit of either process")
        assertAtollError(try reader.beginWrite(), .readOnly)
    }

    func testTwoHandlesReadAndWriteOneFileAtOnce() throws {
        let path = temporaryRealmPath()
        let a = try open(path, Self.schema, changeLogValues: true)
        let b = try open(path, nil, changeLogValues: true)
        let done = expectation(description: "b wrote")
        let thread = Thread {
            do {
                for batch in 0..<10 { try Self.fill(b, from: 1000 + batch * 10, count: 10) }
            } catch {
                XCTFail("b: \(error)")
            }
            done.fulfill()
        }
        thread.start()
        for batch in 0..<10 { try Self.fill(a, from: batch * 10, count: 10) }
        wait(for: [done], timeout: 60)
        try a.refresh()
        try b.refresh()
        XCTAssertEqual(try a.objects("Item").count(), 200)
        XCTAssertEqual(try b.objects("Item").count(), 200)
        XCTAssertEqual(try a.version(), 20)
    }

    // MARK: - Read-only

    func testAReadOnlyHandleCannotWriteAnythingAndLeavesTheFileAsItWas() throws {
        let path = try makeFragmentedFile()
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        let store = try open(path, nil, readOnly: true)
        let one: Document = ["id": .int(7000), "name": .string("x")]
        assertAtollError(try store.beginWrite(), .readOnly, "read-only")
        assertAtollError(try store.write { try store.create("Item", one) }, .readOnly)
        assertAtollError(try store.create("Item", one), .readOnly, "create", "read-only")
        assertAtollError(try store.createMany("Item", [one]), .readOnly, "createMany", "read-only")
        assertAtollError(try store.delete("Item", primaryKey: .int(1)), .readOnly, "delete", "read-only")
        assertAtollError(try store.objects("Item").deleteAll(), .readOnly, "deleteAll", "read-only")
        assertAtollError(try store.compact(), .readOnly, "compact", "read-only")
        XCTAssertFalse(store.isInWrite)
        XCTAssertEqual(try store.objects("Item").count(), 100)
        // Reading is allowed, and so is copying.
        let copy = temporaryRealmPath("copy.realm")
        try store.writeCopy(to: copy)
        XCTAssertEqual(try open(copy, nil, changeLogValues: true).objects("Item").count(), 100)
        store.close()
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), original, "the database file is unchanged")
    }

    func testAReadOnlyHandleSeesAnotherHandlesCommits() throws {
        let path = temporaryRealmPath()
        let writer = try open(path, Self.schema, changeLogValues: true)
        let reader = try open(path, nil, readOnly: true)
        XCTAssertEqual(try reader.objects("Item").count(), 0)
        try Self.fill(writer, count: 3)
        XCTAssertEqual(try reader.intKeys("Item"), [], "the reader sees its snapshot until it refreshes")
        XCTAssertTrue(try reader.refresh())
        XCTAssertEqual(try reader.intKeys("Item"), [0, 1, 2])
        try writer.write { try writer.delete("Item", primaryKey: .int(1)) }
        try reader.refresh()
        XCTAssertEqual(try reader.intKeys("Item"), [0, 2])
        XCTAssertEqual(try reader.version(), 2)
    }
}
