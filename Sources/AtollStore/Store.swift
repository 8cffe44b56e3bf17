import CSQLite
import Foundation
import Synchronization

/// How to open a store.
public struct Configuration: Sendable {
    /// The database file. Required unless `inMemory`; for in-memory stores, a name shared by
    /// the handles of this process that open it.
    public var path: String?
    public var inMemory: Bool
    /// The classes; nil opens with the schema stored in the file.
    public var schema: Schema?
    public var schemaVersion: UInt64
    public var readOnly: Bool
    /// How long `beginWrite()` waits for another writer, in milliseconds; nil waits forever.
    public var writeTimeoutMilliseconds: Int?
    /// Asked at open whether to compact the file first (Realm's `shouldCompactOnLaunch`), with
    /// the file's total and used bytes; see `Store+Files.swift`. Not asked for read-only or
    /// in-memory stores.
    public var shouldCompactOnLaunch: (@Sendable (_ totalBytes: UInt64, _ usedBytes: UInt64) -> Bool)?
    /// Runs when the file's schema version is lower than `schemaVersion`, after the file's
    /// classes were changed to the new schema, to move data from the old objects to the new
    /// ones (see `Migration`). Throwing cancels the migration and the open: the file stays as
    /// it was.
    public var migration: (@Sendable (Migration) throws -> Void)?
    /// Deletes every object and class instead of failing when the file's schema would need a
    /// migration (Realm's `deleteRealmIfMigrationNeeded`). Lower schema versions still fail.
    public var deleteRealmIfMigrationNeeded: Bool
    /// Who calls the store's change callbacks: a notifier thread of the library (the default),
    /// or the host, which polls `Store.notificationDescriptor` and calls
    /// `deliverNotifications()` on its own thread (see Notifications/).
    public var notificationDelivery: NotificationDelivery = .thread
    /// The time the change log records for each commit (sync stamps a commit's changeset with
    /// it); nil reads the system clock. A simulation gives each device a clock of its own.
    public var commitClock: (@Sendable () -> Timestamp)?
    /// What a commit that returned survives (docs/files.md, "Durability"): `.full` (the
    /// default, as Realm's commits) a power loss or an operating system crash; `.normal` a crash
    /// of the process only, for fewer writes to the disk.
    public var durability: Durability = .full
    /// Whether the change log keeps the values it records (docs/changelog.md, "What the log
    /// keeps"). A file keeps only what changed (objects, properties, positions), which is all
    /// notifications need, until a handle opens it with `true`: from then on the file keeps
    /// values, for every handle and process, which `changes(after:)` and sync read. False
    /// leaves the file as it is.
    public var changeLogValues: Bool = false

    public init(path: String? = nil, inMemory: Bool = false, schema: Schema? = nil, schemaVersion: UInt64 = 0,
                readOnly: Bool = false, writeTimeoutMilliseconds: Int? = nil,
                shouldCompactOnLaunch: (@Sendable (_ totalBytes: UInt64, _ usedBytes: UInt64) -> Bool)? = nil,
                migration: (@Sendable (Migration) throws -> Void)? = nil, deleteRealmIfMigrationNeeded: Bool = false,
                changeLogValues: Bool = false) {
        self.changeLogValues = changeLogValues
        self.migration = migration
        self.deleteRealmIfMigrationNeeded = deleteRealmIfMigrationNeeded
        self.path = path
        self.inMemory = inMemory
        self.schema = schema
        self.schemaVersion = schemaVersion
        self.readOnly = readOnly
        self.writeTimeoutMilliseconds = writeTimeoutMilliseconds
        self.shouldCompactOnLaunch = shouldCompactOnLaunch
    }
}

/// What a commit that returned survives.
public enum Durability: String, Sendable, CaseIterable {
    /// A power loss or an operating system crash: the commit waits until the log is on the
    /// disk (SQLite's `synchronous=FULL`).
    case full
    /// A crash of the process; after a power loss or an operating system crash the last
    /// commits may be gone, the file intact (SQLite's `synchronous=NORMAL` in WAL mode).
    case normal
}

/// How `create` treats an object whose primary key exists already (Realm's `UpdatePolicy`).
public enum UpdatePolicy: Int32, Sendable {
    /// Fail with `.duplicatePrimaryKey`.
    case error = 0
    /// Update the given properties, recording only those whose value changed.
    case modified = 1
    /// Update the given properties, recording all of them.
    case all = 2
}

/// An open realm: a dynamic object store on one SQLite connection.
///
/// Objects are `Document`s checked against the schema. Writes happen in explicit write
/// transactions; each commit that changed something appends one entry to the change log.
///
/// ```swift
/// let store = try Store(Configuration(path: "app.realm", schema: schema))
/// try store.write {
///     try store.create("Dog", ["_id": .int(1), "name": .string("Rex")])
/// }
/// let dogs = try store.objects("Dog", where: "name BEGINSWITH $0", [.string("R")])
/// ```
///
/// Thread safety: every method may be called from any thread; calls are serialized by a lock
/// inside the store. The write transaction belongs to the store, not to a thread.
public final class Store: @unchecked Sendable {
    public let configuration: Configuration
    let lock = NSRecursiveLock()
    var connection: Connection?
    public internal(set) var schema = Schema()
    public internal(set) var schemaVersion: UInt64 = 0
    var classes: [String: ClassInfo] = [:]
    /// Set while a write transaction is open.
    var write: WriteState?
    var busy: BusyBox?
    /// Queries compiled and counted on the data as it is (see `QueryCache`).
    var queryCache = QueryCache()
    /// Row counts per class, valid while `dataStamp` is unchanged (used by the query planner).
    var rowCounts: [String: Int] = [:]
    var rowCountStamp: Int64 = -1
    /// For each class, the properties of other classes that link to it (built on first use).
    var incomingLinks: [String: [(ClassInfo, Property)]] = [:]
    /// Write operations and transaction ends so far: with `PRAGMA data_version`, tells whether
    /// the data changed (see `DataStamp`). Changed under the lock; atomic so that
    /// `readStamp()` can read it without the lock.
    var writeCount: Int {
        get { writeCounter.load(ordering: .relaxed) }
        set { writeCounter.store(newValue, ordering: .relaxed) }
    }
    private let writeCounter = Atomic<Int>(0)
    /// Set while a migration callback runs: its writes belong to the migration's transaction,
    /// which only the migration commits.
    var migrating = false
    /// How deep the object being written is nested in inline links and embedded objects.
    var nesting = 0
    static let maxNesting = 100
    /// The canonical path under which this store's file is in the process's registry of open
    /// files (nil for in-memory stores, and once closed); see `Store+Files.swift`.
    var fileKey: String?
    /// Whether reads between refreshes run in one held read transaction (a WAL snapshot);
    /// false for in-memory stores, whose journal would make a held read block writers.
    var holdsSnapshot = false
    /// How many snapshots were taken so far (with `writeCount`, tells the typed API whether
    /// what this handle reads may have changed; see `Store+Typed.swift`).
    var snapshotCount: Int {
        get { snapshotCounter.load(ordering: .relaxed) }
        set { snapshotCounter.store(newValue, ordering: .relaxed) }
    }
    private let snapshotCounter = Atomic<Int>(0)
    /// The change-log version the held snapshot sees (nil while none is held).
    var snapshotVersion: UInt64?
    /// The size the WAL file is truncated to when SQLite resets it (64 MB).
    static let walSizeLimit = 64 << 20

    /// The version reads saw at the last refresh or commit.
    var viewVersion: UInt64 = 0
    /// The store's notifier, once something observes it (Notifications/Notifier.swift).
    var notifier: Notifier?

    /// Opens (creating when needed) the store a configuration describes.
    /// - Throws: `.invalidArgument` for a bad configuration, `.file` when the file cannot be
    ///   opened (or compacting it at open failed), `.schema` for an invalid schema,
    ///   `.schemaMismatch` when the file's schema needs a migration to become the
    ///   configuration's.
    public init(_ configuration: Configuration) throws {
        self.configuration = configuration
        let filename: String
        if configuration.inMemory {
            if let path = configuration.path, !path.isEmpty {
                let escaped = path.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "x"
                filename = "file:/atoll-memory-\(escaped)?vfs=memdb"
            } else {
                filename = ":memory:"
            }
        } else {
            guard let path = configuration.path, !path.isEmpty else {
                throw AtollError(.invalidArgument, "the configuration needs a \"path\" (or \"inMemory\": true)")
            }
            if path.contains("\0") { throw AtollError(.invalidArgument, "the path contains a NUL character") }
            if configuration.readOnly, !FileManager.default.fileExists(atPath: path) {
                throw AtollError(.file, "cannot open '\(path)' read-only: the file does not exist")
            }
            filename = configuration.readOnly ? Store.readOnlyFilename(path) : Store.sqliteFilename(path)
        }
        if let t = configuration.writeTimeoutMilliseconds, t < 0 {
            throw AtollError(.invalidArgument, "writeTimeoutMs must be -1 (wait forever) or >= 0, not \(t)")
        }
        let flags = configuration.readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        let alone = registerFile()
        let conn: Connection
        do { conn = try Connection(path: filename, flags: flags) } catch { releaseFile(); throw error }
        connection = conn
        do {
            busy = BusyBox(timeout: configuration.writeTimeoutMilliseconds)
            installBusyHandler(conn)
            if !configuration.inMemory {
                if !configuration.readOnly {
                    try Store.checkWritable(conn, path: configuration.path ?? "")
                    try conn.execute("PRAGMA journal_mode=WAL")
                }
                try conn.execute(Self.synchronousPragma(configuration.durability))
                // A handle that holds an old snapshot keeps the WAL from being reset, so it grows
                // while others commit; once released, the next reset truncates it to this size.
                try conn.execute("PRAGMA journal_size_limit=\(Store.walSizeLimit)")
                let mode = try conn.statement("PRAGMA journal_mode")
                holdsSnapshot = try mode.step() && mode.string(0).lowercased() == "wal"
                mode.reset()
            }
            try registerQueryFunctions(conn)
            try openSchema()
            if configuration.changeLogValues { try keepChangeLogValues(conn) }
            try compactOnLaunch(conn, alone: alone)
            // Reads see the data as of the open until the first refresh.
            if holdsSnapshot { try beginSnapshot(conn) }
        } catch {
            conn.close()
            connection = nil
            releaseFile()
            throw error
        }
    }

    deinit { close() }

    /// Makes the connection wait for other connections' locks (up to the write timeout).
    func installBusyHandler(_ conn: Connection) {
        guard let busy else { return }
        sqlite3_busy_handler(conn.db, busyHandler, Unmanaged.passUnretained(busy).toOpaque())
    }

    /// Closes the store. An open write transaction is cancelled. Later calls fail with `.closed`.
    public func close() {
        lock.lock()
        let stopped = notifier
        notifier = nil
        defer {
            lock.unlock()
            stopped?.stop()
        }
        guard let conn = connection else { return }
        if write != nil {
            try? conn.execute("ROLLBACK")
            write = nil
        }
        endSnapshot(conn)
        conn.close()
        connection = nil
        releaseFile()
    }

    public var isClosed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return connection == nil
    }

    /// Runs `body` holding the store's lock, with the open connection, inside the store's
    /// snapshot: outside a write transaction, reads see the data as of the last refresh.
    func locked<T>(_ body: (Connection) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let conn = connection else { throw AtollError(.closed, "the realm is closed") }
        if holdsSnapshot, write == nil, sqlite3_get_autocommit(conn.db) != 0 { try beginSnapshot(conn) }
        return try body(conn)
    }

    /// Runs `body` holding the store's lock, with no snapshot held (what `BEGIN IMMEDIATE`,
    /// `VACUUM` and refreshing need). The next `locked` call takes a new snapshot.
    func lockedOutsideSnapshot<T>(_ body: (Connection) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let conn = connection else { throw AtollError(.closed, "the realm is closed") }
        if write == nil { endSnapshot(conn) }
        return try body(conn)
    }

    /// Starts the held read transaction and notes the version it sees.
    func beginSnapshot(_ conn: Connection) throws {
        try conn.execute("BEGIN DEFERRED")
        snapshotCount += 1
        do {
            let version = try latestVersion(conn)
            snapshotVersion = version
            viewVersion = version
        } catch {
            try? conn.execute("ROLLBACK")
            throw error
        }
    }

    /// Ends the held read transaction, if any (a read-only transaction has nothing to lose).
    func endSnapshot(_ conn: Connection) {
        guard snapshotVersion != nil else { return }
        snapshotVersion = nil
        if sqlite3_get_autocommit(conn.db) == 0, (try? conn.execute("COMMIT")) == nil { try? conn.execute("ROLLBACK") }
    }

    /// Moves the store's snapshot to the newest committed data (Realm's `refresh()`).
    /// Observers are told of the changes by the next delivery. Inside a write transaction,
    /// which always sees the newest data, it does nothing.
    /// - Returns: whether the snapshot moved to a newer version.
    /// - Throws: `.closed`.
    @discardableResult
    public func refresh() throws -> Bool {
        try lockedOutsideSnapshot { conn in
            guard write == nil else { return false }
            let before = viewVersion
            if holdsSnapshot { try beginSnapshot(conn) } else { viewVersion = try latestVersion(conn) }
            return viewVersion != before
        }
    }

    /// Runs `body` holding the store's lock, so that a sequence of calls (a create and the read
    /// of what it wrote) sees no other thread's call in between. Calls inside may re-enter.
    /// - Throws: `.closed` when the store is closed, and whatever `body` throws.
    public func withLock<T>(_ body: () throws -> T) throws -> T {
        try locked { _ in try body() }
    }

    /// The class's layout, or nil when the schema has no such class.
    func classInfo(ifExists name: String) -> ClassInfo? { classes[name] }

    func classInfo(_ name: String) throws -> ClassInfo {
        guard let info = classes[name] else {
            throw AtollError(.noSuchClass, "no class named '\(name)' in the schema")
        }
        return info
    }

    // MARK: - Transactions

    /// Whether a write transaction is open.
    public var isInWrite: Bool {
        lock.lock()
        defer { lock.unlock() }
        return write != nil
    }

    /// Begins a write transaction, waiting for another writer (handle or process) to finish.
    /// - Parameter durability: what its commit survives, when it differs from the
    ///   configuration's (the sync client commits what it downloaded with `.normal`: a commit
    ///   lost to a power loss is downloaded again).
    /// - Throws: `.alreadyInWrite`, `.readOnly`, `.busy` (timeout), `.closed`.
    public func beginWrite(durability: Durability? = nil) throws {
        try lockedOutsideSnapshot { conn in
            guard write == nil else { throw AtollError(.alreadyInWrite, "the realm is already in a write transaction") }
            guard !configuration.readOnly else { throw AtollError(.readOnly, "the realm was opened read-only") }
            // SQLite takes the setting only outside a transaction.
            let other = durability.flatMap { $0 == configuration.durability || configuration.inMemory ? nil : $0 }
            if let other { try conn.execute(Self.synchronousPragma(other)) }
            do {
                try conn.statement("BEGIN IMMEDIATE").run()
            } catch {
                if other != nil { try? conn.execute(Self.synchronousPragma(configuration.durability)) }
                throw error
            }
            do {
                write = WriteState(version: try latestVersion(conn) + 1, keepsValues: try recordsChangeLogValues(conn),
                                   durability: other)
            } catch {
                try? conn.execute("ROLLBACK")
                if other != nil { try? conn.execute(Self.synchronousPragma(configuration.durability)) }
                throw error
            }
        }
    }

    /// After the transaction of `state` ended (before a snapshot begins: SQLite takes the
    /// setting only outside a transaction): the configuration's durability again.
    private func restoreDurability(_ state: WriteState, _ conn: Connection) {
        if state.durability != nil { try? conn.execute(Self.synchronousPragma(configuration.durability)) }
    }

    /// Commits the write transaction with its change-log entry.
    /// - Throws: `.notInWrite`, `.file` (the transaction is then rolled back).
    public func commit() throws {
        try locked { conn in
            guard let state = write else { throw AtollError(.notInWrite, "commit: the realm is not in a write transaction") }
            guard !migrating else { throw AtollError(.invalidArgument, "commit: a migration commits its own transaction when its callback returns") }
            do {
                try writeChangeLogEntry(state, conn)
                if state.recorder.total > 0 { try pruneChangeLog(conn, version: state.version) }
                try conn.statement("COMMIT").run()
                restoreDurability(state, conn)
                write = nil
                writeCount += 1
                rowCountStamp = -1
                if state.recorder.total > 0 { viewVersion = state.version }
                // Reads see the data as of this commit until the next refresh.
                if holdsSnapshot { try? beginSnapshot(conn) }
            } catch {
                try? conn.execute("ROLLBACK")
                restoreDurability(state, conn)
                write = nil
                throw error
            }
        }
        signalCommit()
    }

    /// Writes the transaction's change-log entry (its last chunk and its `_atoll_versions` row),
    /// when it recorded anything; the caller commits.
    func writeChangeLogEntry(_ state: WriteState, _ conn: Connection) throws {
        guard state.recorder.total > 0 else { return }
        try state.recorder.flush(conn, version: state.version)
        try state.effects.flush(conn, version: state.version, chunk: ChangeRecorder.effectsChunk)
        let row = try conn.statement("INSERT INTO _atoll_versions(version, committed_at, instruction_count) VALUES (?, ?, ?)")
        row.bind(1, Int64(state.version))
        row.bind(2, (configuration.commitClock?() ?? Timestamp(Date())).milliseconds)
        row.bind(3, Int64(state.recorder.total))
        try row.run()
    }

    /// Cancels the write transaction: nothing written in it is kept.
    /// - Throws: `.notInWrite`.
    public func cancelWrite() throws {
        try locked { conn in
            guard let state = write else { throw AtollError(.notInWrite, "cancel: the realm is not in a write transaction") }
            guard !migrating else { throw AtollError(.invalidArgument, "cancel: to cancel a migration, fail its callback") }
            write = nil
            writeCount += 1
            try conn.statement("ROLLBACK").run()
            restoreDurability(state, conn)
            if holdsSnapshot { try? beginSnapshot(conn) }
            // Deliveries skipped during the transaction are due now (a commit would signal).
            notifier?.signal()
        }
    }

    /// SQLite's setting for a durability.
    static func synchronousPragma(_ durability: Durability) -> String {
        durability == .full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"
    }

    /// Runs `body` in a write transaction: commits when it returns (with `durability`, when
    /// given, instead of the configuration's), cancels when it throws.
    @discardableResult
    public func write<T>(durability: Durability? = nil, _ body: () throws -> T) throws -> T {
        try beginWrite(durability: durability)
        do {
            let result = try body()
            try commit()
            return result
        } catch {
            if isInWrite { try? cancelWrite() }
            throw error
        }
    }

    /// Runs one write operation atomically: either all its SQL and change-log instructions are
    /// kept, or none (a savepoint when the operation may issue several statements).
    func writeOperation<T>(_ name: String, multiStatement: Bool = true, _ body: (Connection, WriteState) throws -> T) throws -> T {
        try locked { conn in
            guard !configuration.readOnly else { throw AtollError(.readOnly, "\(name): the realm was opened read-only") }
            guard let state = write else {
                throw AtollError(.notInWrite, "\(name): the realm is not in a write transaction (call beginWrite first)")
            }
            let mark = state.recorder.mark()
            let effectsMark = state.effects.mark()
            writeCount += 1
            if multiStatement { try conn.statement("SAVEPOINT atoll_op").run() }
            do {
                let result = try body(conn, state)
                if multiStatement { try conn.statement("RELEASE atoll_op").run() }
                if state.recorder.pendingBytes > 4 << 20 { try state.recorder.flush(conn, version: state.version) }
                return result
            } catch {
                if multiStatement {
                    try? conn.statement("ROLLBACK TO atoll_op").run()
                    try? conn.statement("RELEASE atoll_op").run()
                }
                state.recorder.rollback(to: mark)
                state.effects.rollback(to: effectsMark)
                throw error
            }
        }
    }

    // MARK: - Versions and the change log

    /// The version of the newest change-log entry (0 when nothing was ever written).
    public func version() throws -> UInt64 {
        try locked { conn in try latestVersion(conn) }
    }

    func latestVersion(_ conn: Connection) throws -> UInt64 {
        let s = try conn.statement("SELECT coalesce(max(version), 0) FROM _atoll_versions")
        _ = try s.step()
        defer { s.reset() }
        return UInt64(s.int64(0))
    }

    /// Whether this file's change log keeps values (`Configuration.changeLogValues`): read at
    /// each write's start, under the write lock, so that a handle of another process that turned
    /// it on counts from its next commit.
    func recordsChangeLogValues(_ conn: Connection) throws -> Bool {
        let s = try conn.statement("SELECT value = 'values' FROM _atoll_meta WHERE key = 'changeLog'")
        defer { s.reset() }
        return try s.step() && s.int64(0) != 0
    }

    /// Makes the file's change log keep values from the next commit on (at open, when the
    /// configuration asks; a read-only handle cannot, and says so).
    private func keepChangeLogValues(_ conn: Connection) throws {
        // (A read-only handle may look at a file without Atoll's tables.)
        guard (try? recordsChangeLogValues(conn)) != true else { return }
        guard !configuration.readOnly else {
            throw AtollError(.readOnly, "changeLogValues: the realm was opened read-only, and its change log does not keep values yet")
        }
        try inTransaction(conn) {
            try conn.execute("INSERT OR REPLACE INTO _atoll_meta VALUES ('changeLog', 'values')")
        }
    }

    /// Whether this file's change log keeps values now (`Configuration.changeLogValues`).
    public func changeLogKeepsValues() throws -> Bool {
        try locked { conn in try recordsChangeLogValues(conn) }
    }

    /// The change-log entries after a version, oldest first.
    /// - Parameters:
    ///   - limit: at most this many entries; nil for all.
    ///   - skipping: versions whose instructions are not read (their entries come back empty).
    /// - Throws: `.invalidArgument` for an entry (not skipped) that the file recorded without
    ///   values (before `Configuration.changeLogValues` was set for it), naming its version.
    public func changes(after version: UInt64, limit: Int? = nil, skipping: Set<UInt64> = []) throws -> [ChangeSet] {
        try locked { conn in
            let s = try conn.statement(
                "SELECT version, committed_at FROM _atoll_versions WHERE version > ? ORDER BY version LIMIT ?")
            s.bind(1, Int64(clamping: version))
            s.bind(2, Int64(limit ?? -1))
            var sets = [ChangeSet]()
            while try s.step() {
                sets.append(ChangeSet(version: UInt64(s.int64(0)), timestamp: Timestamp(milliseconds: s.int64(1)),
                                      instructions: []))
            }
            s.reset()
            let chunks = try conn.statement("SELECT instructions FROM _atoll_changes WHERE version = ? AND chunk >= 0 ORDER BY chunk")
            for i in sets.indices where !skipping.contains(sets[i].version) {
                chunks.reset()
                chunks.bind(1, Int64(sets[i].version))
                while try chunks.step() {
                    let bytes = chunks.blob(0)
                    guard ChangeRecorder.hasValues(bytes) else {
                        chunks.reset()
                        throw AtollError(.invalidArgument, "change-log entry \(sets[i].version) was recorded without values: the realm's change log keeps values only from the first commit after it is opened with changeLogValues set")
                    }
                    let decoded = try ChangeRecorder.decode(bytes)
                    if sets[i].instructions.isEmpty { sets[i].instructions = decoded } else { sets[i].instructions += decoded }
                }
            }
            chunks.reset()
            return sets
        }
    }
}

/// The state of an open write transaction.
final class WriteState {
    let version: UInt64
    let recorder: ChangeRecorder
    /// What the instructions imply without saying it (links nulled by erases), for observers;
    /// kept beside the entry (`ChangeRecorder.effectsChunk`), never replayed. Observers read no
    /// values, so it keeps none.
    let effects = ChangeRecorder(keepsValues: false)
    /// The durability of this transaction's commit when it is not the configuration's.
    let durability: Durability?
    init(version: UInt64, keepsValues: Bool, durability: Durability? = nil) {
        self.version = version
        recorder = ChangeRecorder(keepsValues: keepsValues)
        self.durability = durability
    }
}

/// What the busy handler needs: how long to wait.
final class BusyBox {
    let timeout: Int?
    init(timeout: Int?) { self.timeout = timeout }
}

/// Waits for another connection's lock: short sleeps growing to 10 ms, until the timeout.
private let busyHandler: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Int32 = { context, count in
    guard let context else { return 0 }
    let box = Unmanaged<BusyBox>.fromOpaque(context).takeUnretainedValue()
    let sleepMicros = count < 10 ? 100 : (count < 50 ? 1000 : 10_000)
    if let timeout = box.timeout {
        // Time waited so far, approximately, from the sleeps taken.
        let waited = count < 10 ? Int(count) / 10 : (count < 50 ? 1 + Int(count - 10) : 41 + Int(count - 50) * 10)
        if waited >= timeout { return 0 }
    }
    usleep(useconds_t(sleepMicros))
    return 1
}
