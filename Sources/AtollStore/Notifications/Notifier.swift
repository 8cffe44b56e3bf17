import CSQLite
import Foundation

// Delivery: each store with observers has a notifier; commits in this process signal the
// notifiers of the same file directly, commits in other processes through a file watcher
// (inotify on the file's directory, with `PRAGMA data_version`-cheap polling behind it).
// A notifier's descriptor becomes readable when a delivery is due; the notifier thread (or the
// host) then refreshes the store, turns the new change-log entries into each observer's change,
// and calls the callbacks without holding the store's lock.

/// One store's observers and the means to wake whoever delivers to them.
final class Notifier: @unchecked Sendable {
    private weak var store: Store?
    let fileKey: String
    let mode: NotificationDelivery
    private let lock = NSLock()
    private var observers: [Observer] = []
    private var signalled = false
    private var stopped = false
    /// The pipe whose read end is the notification descriptor.
    private let readEnd: Int32
    private let writeEnd: Int32
    private var thread: Thread?
    private let threadDone = DispatchSemaphore(value: 0)

    init(store: Store, fileKey: String, mode: NotificationDelivery) throws {
        guard let fds = nonBlockingPipe() else {
            throw AtollError(.file, "cannot create the notification pipe: \(String(cString: strerror(errno)))")
        }
        readEnd = fds[0]
        writeEnd = fds[1]
        self.store = store
        self.fileKey = fileKey
        self.mode = mode
        if mode == .thread {
            let t = Thread { [weak self] in self?.run() }
            t.name = "atoll-notifier"
            thread = t
            t.start()
        }
        NotifierRegistry.shared.add(self)
    }

    /// The descriptor that is readable while a delivery is due.
    var descriptor: Int32 { readEnd }

    func add(_ observer: Observer) {
        lock.lock()
        observers.append(observer)
        lock.unlock()
        NotifierRegistry.shared.holdsChanged(fileKey)
        signal()
    }

    func remove(_ token: NotificationToken) {
        lock.lock()
        observers.removeAll { $0.token == nil || $0.token === token }
        lock.unlock()
        NotifierRegistry.shared.holdsChanged(fileKey)
    }

    /// The oldest change-log version an observer still needs to diff from (nil: none).
    var oldestVersion: UInt64? {
        lock.lock()
        defer { lock.unlock() }
        return observers.compactMap(\.version).min()
    }

    var hasObservers: Bool {
        lock.lock()
        defer { lock.unlock() }
        return !observers.isEmpty
    }

    /// Makes the descriptor readable (once, until the next delivery drains it).
    func signal() {
        lock.lock()
        let write = !signalled && !stopped
        signalled = true
        lock.unlock()
        if write {
            var byte: UInt8 = 1
            _ = Glibc.write(writeEnd, &byte, 1)
        }
    }

    /// Stops delivering: wakes and ends the notifier thread (waiting for it unless called on
    /// it, as when a callback closes the store) and closes the descriptor.
    func stop() {
        lock.lock()
        if stopped {
            lock.unlock()
            return
        }
        stopped = true
        let onOwnThread = thread.map { Thread.current.isEqual($0) } ?? false
        closeOnExit = onOwnThread
        lock.unlock()
        NotifierRegistry.shared.remove(self)
        var byte: UInt8 = 1
        _ = Glibc.write(writeEnd, &byte, 1)
        if onOwnThread { return }
        if thread != nil { threadDone.wait() }
        closeEnds()
    }

    private var closeOnExit = false

    private var isStopped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    private func closeEnds() {
        _ = Glibc.close(readEnd)
        _ = Glibc.close(writeEnd)
    }

    private func run() {
        var fd = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
        while !isStopped {
            let n = poll(&fd, 1, -1)
            if n < 0 && errno != EINTR { break }
            if isStopped { break }
            if n > 0 { _ = deliver() }
        }
        lock.lock()
        let close = closeOnExit
        lock.unlock()
        if close { closeEnds() }
        threadDone.signal()
    }

    /// Refreshes the store and delivers what changed to every observer, on the calling thread.
    /// Returns false when the store is closed.
    @discardableResult
    func deliver() -> Bool {
        var drain = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &drain, drain.count) > 0 {}
        lock.lock()
        signalled = false
        let current = observers
        lock.unlock()
        guard let store else { return false }
        var calls: [(NotificationToken, () -> Void)] = []
        do {
            // Nothing is delivered while the store is in a write transaction: its commit
            // signals again.
            try store.deliveryPass { conn, version in
                try self.evaluate(current, store, conn, version, into: &calls)
            }
        } catch {
            if store.isClosed { return false }
        }
        for (token, call) in calls { token.run(call) }
        lock.lock()
        observers.removeAll { $0.finished || $0.token == nil }
        lock.unlock()
        NotifierRegistry.shared.holdsChanged(fileKey)
        return true
    }

    /// An observer whose change cannot be computed gets the error once and is done.
    private func fail(_ observer: Observer, _ error: Error) -> (() -> Void)? {
        observer.finished = true
        return observer.failed(error as? AtollError ?? AtollError(.internal, "\(error)"))
    }

    private func evaluate(_ observers: [Observer], _ store: Store, _ conn: Connection, _ now: UInt64,
                          into calls: inout [(NotificationToken, () -> Void)]) throws {
        // Observers registered at different versions diff from their own; usually one index.
        var finders: [UInt64: ModificationFinder] = [:]
        for observer in observers {
            guard let token = observer.token, !token.isInvalidated, !observer.finished else { continue }
            let call: (() -> Void)?
            if let from = observer.version, !observer.needsChanges {
                guard from < now else { continue }
                call = observer.committed(from: from, to: now)
            } else if let from = observer.version {
                guard from < now else { continue }
                let finder: ModificationFinder
                if let known = finders[from] {
                    finder = known
                } else {
                    let log = try store.changeLogForObservers(after: from, upTo: now, conn)
                    let index = ChangeIndex(from: from, to: now, changes: log.sets, effects: log.effects,
                                            incomplete: !log.complete)
                    finder = ModificationFinder(store: store, conn: conn, index: index)
                    finders[from] = finder
                }
                do { call = try observer.evaluate(store, finder) } catch { call = fail(observer, error) }
            } else {
                do { call = try observer.start(store, conn) } catch { call = fail(observer, error) }
            }
            // Under the notifier's lock: the file watcher reads versions (`oldestVersion`).
            lock.lock()
            observer.version = now
            lock.unlock()
            if let call { calls.append((token, call)) }
        }
    }
}

/// The notifiers of this process by file, so that a commit wakes those on its file, and the
/// change-log versions they still need (what pruning must keep).
final class NotifierRegistry: @unchecked Sendable {
    static let shared = NotifierRegistry()
    private let lock = NSLock()
    private var notifiers: [String: [Weak]] = [:]
    private var watchers: [String: FileWatcher] = [:]

    private struct Weak { weak var notifier: Notifier? }

    func add(_ n: Notifier) {
        lock.lock()
        notifiers[n.fileKey, default: []].append(Weak(notifier: n))
        lock.unlock()
    }

    func remove(_ n: Notifier) {
        lock.lock()
        notifiers[n.fileKey]?.removeAll { $0.notifier == nil || $0.notifier === n }
        if notifiers[n.fileKey]?.isEmpty == true { notifiers[n.fileKey] = nil }
        lock.unlock()
        holdsChanged(n.fileKey)
    }

    /// Wakes every notifier on the file.
    func signal(_ fileKey: String) {
        lock.lock()
        let found = notifiers[fileKey]?.compactMap(\.notifier) ?? []
        lock.unlock()
        for n in found { n.signal() }
    }

    func hasNotifiers(_ fileKey: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return notifiers[fileKey]?.isEmpty == false
    }

    /// The oldest version an observer of this process still needs on the file (nil: none).
    func oldestVersion(_ fileKey: String) -> UInt64? {
        lock.lock()
        let found = notifiers[fileKey]?.compactMap(\.notifier) ?? []
        lock.unlock()
        return found.compactMap(\.oldestVersion).min()
    }

    /// Starts, updates or stops the file's watcher as its notifiers' needs changed.
    func holdsChanged(_ fileKey: String) {
        guard fileKey.hasPrefix("/") else { return }
        lock.lock()
        let active = notifiers[fileKey]?.contains { $0.notifier?.hasObservers == true } == true
        var watcher = watchers[fileKey]
        var stale: FileWatcher?
        if active, watcher == nil {
            watcher = FileWatcher(path: fileKey)
            watchers[fileKey] = watcher
        } else if !active, let w = watcher {
            stale = w
            watchers[fileKey] = nil
            watcher = nil
        }
        lock.unlock()
        stale?.stop()
        watcher?.wake()
    }
}

/// Watches a database file for commits of other processes (inotify on its directory: the
/// `-wal` file is written on each commit; a poll every 50 ms catches what inotify misses) and
/// keeps this process's hold on the change log (`_atoll_holds`) up to date.
final class FileWatcher: @unchecked Sendable {
    let path: String
    private let lock = NSLock()
    private var stopped = false
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let done = DispatchSemaphore(value: 0)
    /// The hold written for this process (nil: none).
    private var writtenHold: UInt64?
    static let pollMilliseconds: Int32 = 50
    /// How far this process's observers may advance before its hold row is rewritten.
    static let holdSlack: UInt64 = 32

    init(path: String) {
        self.path = path
        let fds = nonBlockingPipe() ?? [-1, -1]
        wakeRead = fds[0]
        wakeWrite = fds[1]
        let t = Thread { [self] in self.run() }
        t.name = "atoll-watcher"
        t.start()
    }

    func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    func stop() {
        lock.lock()
        stopped = true
        lock.unlock()
        wake()
        done.wait()
        _ = close(wakeRead)
        _ = close(wakeWrite)
    }

    private var isStopped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    private func run() {
        defer { done.signal() }
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI
        if sqlite3_open_v2(Store.sqliteFilename(path), &db, flags, nil) != SQLITE_OK {
            sqlite3_close(db)
            db = nil
            if sqlite3_open_v2(Store.sqliteFilename(path), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) != SQLITE_OK {
                sqlite3_close(db)
                db = nil
            }
        }
        defer {
            if let db { releaseHold(db) }
            sqlite3_close(db)
        }
        if let db { sqlite3_busy_timeout(db, 2000) }
        let inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        defer { if inotify >= 0 { _ = close(inotify) } }
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        if inotify >= 0 {
            _ = inotify_add_watch(inotify, directory.isEmpty ? "/" : directory,
                                  UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE))
        }
        var lastVersion = db.flatMap { latest($0) } ?? 0
        // A commit of another process may have come between an observer's registration and
        // that first read: let the notifiers look.
        NotifierRegistry.shared.signal(path)
        var buffer = [UInt8](repeating: 0, count: 4096)
        var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)]
        while !isStopped {
            fds[0].revents = 0
            fds[1].revents = 0
            _ = poll(&fds, inotify >= 0 ? 2 : 1, Self.pollMilliseconds)
            if isStopped { break }
            var check = fds[0].revents != 0 || fds[1].revents == 0
            while read(wakeRead, &buffer, buffer.count) > 0 {}
            if inotify >= 0, fds[1].revents != 0 {
                while true {
                    let n = read(inotify, &buffer, buffer.count)
                    if n <= 0 { break }
                    if Self.mentions(buffer[0..<n], name) { check = true }
                }
            }
            guard check, let db else { continue }
            if let now = latest(db), now != lastVersion {
                lastVersion = now
                NotifierRegistry.shared.signal(path)
            }
            updateHold(db)
        }
    }

    /// Whether a batch of inotify events names the database file or one of its companions.
    static func mentions(_ events: ArraySlice<UInt8>, _ name: String) -> Bool {
        var offset = events.startIndex
        let headerSize = MemoryLayout<inotify_event>.size
        while offset + headerSize <= events.endIndex {
            let length = events.withUnsafeBytes { raw in
                raw.loadUnaligned(fromByteOffset: offset - events.startIndex + 12, as: UInt32.self)
            }
            let nameStart = offset + headerSize
            let nameEnd = min(events.endIndex, nameStart + Int(length))
            let bytes = events[nameStart..<nameEnd].prefix { $0 != 0 }
            if let s = String(bytes: bytes, encoding: .utf8), s.hasPrefix(name) { return true }
            offset = nameEnd
        }
        return false
    }

    private func latest(_ db: OpaquePointer) -> UInt64? {
        var s: OpaquePointer?
        guard sqlite3_prepare_v2(db, "SELECT coalesce(max(version), 0) FROM _atoll_versions", -1, &s, nil) == SQLITE_OK else {
            sqlite3_finalize(s)
            return nil
        }
        defer { sqlite3_finalize(s) }
        return sqlite3_step(s) == SQLITE_ROW ? UInt64(sqlite3_column_int64(s, 0)) : nil
    }

    /// Writes this process's hold when its observers need versions older than the one written
    /// (or have moved well past it), so that other processes' pruning keeps what they need.
    private func updateHold(_ db: OpaquePointer) {
        guard let oldest = NotifierRegistry.shared.oldestVersion(path) else { return }
        if let written = writtenHold, oldest >= written, oldest - written < Self.holdSlack { return }
        let sql = """
            CREATE TABLE IF NOT EXISTS _atoll_holds (holder TEXT PRIMARY KEY, version INTEGER NOT NULL) STRICT;
            INSERT OR REPLACE INTO _atoll_holds VALUES ('\(ProcessIdentity.current)', \(oldest));
            """
        if sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK { writtenHold = oldest }
    }

    private func releaseHold(_ db: OpaquePointer) {
        guard writtenHold != nil else { return }
        sqlite3_exec(db, "DELETE FROM _atoll_holds WHERE holder = '\(ProcessIdentity.current)'", nil, nil, nil)
    }
}

/// Names this process in `_atoll_holds`: its pid and start time (so that a reused pid is not
/// taken for the process that wrote the hold).
enum ProcessIdentity {
    static let current: String = identity(getpid()) ?? "\(getpid())"

    static func identity(_ pid: Int32) -> String? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // Field 22 (starttime) is the 20th after the command's closing parenthesis.
        guard fields.count > 19 else { return nil }
        return "\(pid):\(fields[19])"
    }

    /// Whether the process a holder names is still running.
    static func isAlive(_ holder: String) -> Bool {
        guard let pid = Int32(holder.split(separator: ":").first ?? "") else { return false }
        return identity(pid) == holder
    }
}

/// A pipe whose ends do not block and are closed on exec.
func nonBlockingPipe() -> [Int32]? {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { return nil }
    for fd in fds {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
    return fds
}
