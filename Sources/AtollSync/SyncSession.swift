import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation

/// What to do when the server cannot resume the client (docs/sync.md, "Client reset").
public enum ClientResetMode: String, Sendable {
    /// Report the error and stop the session; the app deals with the file.
    case manual
    /// Drop what was not uploaded and start again from the server's state.
    case discardUnsyncedChanges
    /// Start again from the server's state, then write the changes that were not uploaded again.
    case recoverUnsyncedChanges
    /// Recover; if that fails, discard.
    case recoverOrDiscardUnsyncedChanges
}

/// One subscription: a named query on a class.
public struct QuerySubscription: Sendable, Hashable {
    public var name: String
    public var className: String
    public var query: String
    public var arguments: [Value]
    public init(name: String, className: String, query: String = "TRUEPREDICATE", arguments: [Value] = []) {
        self.name = name
        self.className = className
        self.query = query
        self.arguments = arguments
    }

    var wireValue: Value {
        .doc(["name": .string(name), "class": .string(className), "query": .string(query), "args": .list(arguments)])
    }

    init(wire: Value) throws {
        let f = try Fields(wire, "subscription")
        self.init(name: try f.optionalString("name") ?? "", className: try f.string("class"),
                  query: try f.optionalString("query") ?? "TRUEPREDICATE", arguments: try f.list("args"))
    }
}

/// How a synced realm syncs.
public struct SyncConfiguration: @unchecked Sendable {
    public enum Mode: Sendable, Equatable {
        case flexible
        case partition(Value)
    }
    public var mode: Mode
    /// Subscriptions added at the first open (and at every open with `rerunOnOpen`).
    public var initialSubscriptions: [QuerySubscription] = []
    public var rerunOnOpen = false
    public var clientResetMode: ClientResetMode = .recoverUnsyncedChanges
    /// Called before a client reset replaces the data (with the store as it is) and after.
    public var beforeReset: (@Sendable (Store) -> Void)?
    public var afterReset: (@Sendable (Store) -> Void)?
    /// Whether the session hears of the app's commits by itself (a commit observer on a notifier
    /// thread). The deterministic simulation turns it off and tells the session when to read them.
    var watchesLocalCommits = true
    /// Draws the clock's tie-break for a new client file (random; a simulation draws from its seed).
    var makeNode: @Sendable () -> Int64 = { Int64.random(in: 1...(Int64(1) << 52)) }

    public init(mode: Mode) { self.mode = mode }
}

/// What a session's observers are told.
public enum SessionEvent: Sendable, Equatable {
    case state(SyncSession.State)
    case connection(SyncSession.ConnectionState)
    /// `direction` is "upload" or "download"; `estimate` is transferred / transferable (1 when done).
    case progress(direction: String, transferred: Int, transferable: Int, estimate: Double)
}

/// The sync of one realm file: uploads its local changes, applies what the server sends, keeps
/// its subscriptions. Works on its own store handle of the file (writes from the app's handles
/// are read back from the change log) and on its user's connection queue.
public final class SyncSession: @unchecked Sendable {
    public enum State: String, Sendable { case active, paused, inactive }
    public enum ConnectionState: String, Sendable { case disconnected, connecting, connected }

    public let user: User
    public let path: String
    public let configuration: SyncConfiguration
    /// The session's own handle of the realm file.
    let store: Store
    /// What carries the session's messages and runs its work in turn: the user's connection.
    let connection: any SessionConnection
    let clock: HybridClock
    private let lock = NSCondition()

    // Guarded by `lock`.
    private var _state = State.active
    private var _connectionState = ConnectionState.disconnected
    private var observers: [Int: @Sendable (SessionEvent) -> Void] = [:]
    private var nextObserver = 0
    private var marksAnswered = 0
    private var lastError: SyncError?
    private var errorCount = 0
    private var uploadedThrough: UInt64 = 0
    private var completedQueryVersion: Int64 = -1
    private var queryErrors: [Int64: String] = [:]
    private var handles = 0
    private var interruptions = 0

    // Queue state.
    var number: Int64 = 0
    var bound = false
    private var lastSent: UInt64 = 0
    private var marksSent = 0
    private var bootstrapBuffer: [(SyncInstruction, Clock)] = []
    private var localToken: NotificationToken?
    private var recovering: [SyncChangeset]?
    private var uploadTotal = 0

    // MARK: - Open

    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var registry: [String: SyncSession] = [:]

    /// The session of a realm file: the open one, or a new one. Each call takes a handle;
    /// `release()` gives it back, and the session stops with the last.
    /// - Throws: `AtollError` when the file cannot be opened, `SyncError` for a logged-out user
    ///   or a session of the file that syncs differently.
    public static func open(user: User, storeConfiguration: Configuration, sync: SyncConfiguration) throws -> SyncSession {
        guard user.isLoggedIn else { throw SyncError(.authFailed, "user \(user.id) is not logged in") }
        guard let path = storeConfiguration.path, !storeConfiguration.inMemory else {
            throw AtollError(.invalidArgument, "a synced realm needs a file \"path\" (not in memory)")
        }
        let key = URL(fileURLWithPath: path).standardizedFileURL.path
        registryLock.lock()
        defer { registryLock.unlock() }
        if let existing = registry[key] {
            guard existing.user === user, existing.configuration.mode == sync.mode else {
                throw SyncError(.badSyncPartitionValue, "'\(path)' is open already with another user or sync mode")
            }
            existing.retain()
            return existing
        }
        let session = try SyncSession(user: user, path: key, storeConfiguration: storeConfiguration, sync: sync)
        registry[key] = session
        session.retain()
        session.start()
        return session
    }

    private init(user: User, path: String, storeConfiguration: Configuration, sync: SyncConfiguration) throws {
        self.user = user
        self.path = path
        configuration = sync
        var c = storeConfiguration
        c.notificationDelivery = .thread
        let store = try Store(c)
        self.store = store
        connection = user.app.connection(for: user)
        var node: Int64 = 0
        try store.write {
            try store.withMetadata { sql in
                try ClientTables.create(sql)
                node = try ClientTables.int(sql, "node")
                if node == 0 {
                    // The clock's tie-break: random per client file, so that two devices never
                    // name two list elements alike, even before the server knows them.
                    node = sync.makeNode()
                    try ClientTables.set(sql, "node", .int(node))
                }
            }
        }
        clock = HybridClock(node: node)
        let last = try self.store.withMetadata { sql in try ClientTables.get(sql, "clock")?.stringValue.flatMap { Clock(text: $0) } }
        if let last { clock.observe(last) }
        try setUpSubscriptions()
        // A version the file completed in an earlier session is complete now: the server resumes
        // such a file from its cursor and sends no second `queryComplete` for it.
        let completed = try store.withMetadata { sql in
            try sql.rows("SELECT coalesce(max(version), -1) FROM _atoll_sync_subscriptions WHERE state = 'complete'").first?.first?.intValue ?? -1
        }
        lock.withLock { completedQueryVersion = max(completedQueryVersion, completed) }
    }

    func retain() { lock.withLock { handles += 1 } }

    /// Gives back a handle; the last one stops the session.
    public func release() {
        let last = lock.withLock { () -> Bool in
            handles -= 1
            return handles <= 0
        }
        guard last else { return }
        Self.registryLock.withLock { if Self.registry[path] === self { Self.registry[path] = nil } }
        stop()
    }

    private func start() {
        if configuration.watchesLocalCommits {
            localToken = try? store.observeCommits { [weak self] _ in
                guard let self else { return }
                self.connection.async { self.processLocal() }
            }
        }
        connection.async { [self] in
            processLocal()
            connection.attach(self)
        }
    }

    /// Stops syncing: the session leaves its connection and closes its handle of the file.
    public func stop() {
        localToken?.invalidate()
        localToken = nil
        setState(.inactive)
        connection.sync {
            connection.detach(self)
            store.close()
        }
        lock.withLock { lock.broadcast() }
    }

    /// Runs `body` on the session's queue (at once when already there): the session's store
    /// handle is written only there, so that its writes never overlap.
    func onQueue<T>(_ body: () throws -> T) throws -> T { try connection.sync(body) }

    // MARK: - State

    public var state: State { lock.withLock { _state } }
    public var connectionState: ConnectionState { lock.withLock { _connectionState } }

    /// Observes state, connection and progress changes; returns a token for `removeObserver`.
    @discardableResult
    public func observe(_ callback: @escaping @Sendable (SessionEvent) -> Void) -> Int {
        lock.withLock {
            nextObserver += 1
            observers[nextObserver] = callback
            return nextObserver
        }
    }

    public func removeObserver(_ token: Int) { _ = lock.withLock { observers.removeValue(forKey: token) } }

    private func emit(_ event: SessionEvent) {
        let targets = lock.withLock { Array(observers.values) }
        for t in targets { t(event) }
    }

    private func setState(_ s: State) {
        let changed = lock.withLock { () -> Bool in
            guard _state != s else { return false }
            _state = s
            lock.broadcast()
            return true
        }
        if changed { emit(.state(s)) }
    }

    func setConnectionState(_ s: ConnectionState) {
        let changed = lock.withLock { () -> Bool in
            guard _connectionState != s else { return false }
            _connectionState = s
            lock.broadcast()
            return true
        }
        if changed { emit(.connection(s)) }
    }

    /// Stops talking to the server until `resume()`; local writes go on and wait.
    public func pause() {
        setState(.paused)
        connection.async { [self] in connection.detach(self) }
    }

    /// Syncs again after `pause()`.
    public func resume() {
        guard state == .paused else { return }
        setState(.active)
        connection.async { [self] in connection.attach(self) }
    }

    /// Drops the connection and connects again at once.
    public func reconnect() { connection.async { [self] in connection.reconnectNow() } }

    // MARK: - Errors

    func report(_ error: SyncError) {
        lock.withLock {
            lastError = error
            errorCount += 1
            lock.broadcast()
        }
        user.app.report(error, self)
    }

    /// The connection could not be made (or was refused): waiters learn of it.
    func connectFailed(_ error: SyncError) {
        report(error)
    }

    // MARK: - Connection events (on the queue)

    func didConnect() {
        setConnectionState(.connected)
        guard state == .active, !bound else { return }
        bound = true
        lastSent = 0
        var bind = Document()
        bind["type"] = .string("bind")
        bind["session"] = .int(number)
        bind["realm"] = .string(URL(fileURLWithPath: path).lastPathComponent)
        do {
            let (ident, salt, cursor, uploaded) = try store.withMetadata { sql in
                (try ClientTables.int(sql, "ident"), try ClientTables.int(sql, "salt"), try ClientTables.int(sql, "downloadCursor"),
                 try ClientTables.int(sql, "uploadCursor"))
            }
            switch configuration.mode {
            case .flexible: bind["mode"] = .string("flexible")
            case .partition(let value):
                bind["mode"] = .string("partition")
                bind["partition"] = value
            }
            bind["file"] = ident > 0 ? .doc(["ident": .int(ident), "salt": .int(salt)]) : .null
            bind["downloadCursor"] = .int(cursor)
            // What the server acknowledged: changesets it integrated after that, their
            // acknowledgement lost, are sent again, and answered with their objects' state.
            if ident > 0 { bind["uploadCursor"] = .int(uploaded) }
            bind["schema"] = SchemaWire.value(store.schema)
            connection.send(.object(bind))
            querySent = nil
            if case .flexible = configuration.mode { try sendQuery() }
            if marksSent > lock.withLock({ marksAnswered }) {
                connection.send(.doc(["type": .string("mark"), "session": .int(number), "request": .int(Int64(marksSent))]))
            }
        } catch {
            report(SyncError(.internalServerError, "cannot start the session: \(error)"))
        }
    }

    func didDisconnect() {
        bound = false
        bootstrapBuffer = []
        setConnectionState(.disconnected)
    }

    /// Handles one message for this session (on the queue).
    func handle(_ m: Fields) {
        do {
            switch try m.string("type") {
            case "ident":
                guard case .object(let f)? = m["file"], case .int(let ident)? = f["ident"], case .int(let salt)? = f["salt"] else {
                    throw ProtocolError("ident without a file")
                }
                try store.write {
                    try store.withMetadata { sql in
                        try ClientTables.set(sql, "ident", .int(ident))
                        try ClientTables.set(sql, "salt", .int(salt))
                    }
                }
            case "uploadAck":
                try acknowledge(try m.uint("clientVersion"))
            case "download":
                // What the server says of the device's own changesets comes with their
                // acknowledgement, in one message: merged with what is still pending, only.
                if case .int(let acked)? = m["uploadAck"], acked > 0 { try acknowledge(UInt64(acked)) }
                try download(m)
            case "queryComplete":
                let version = try m.int("version")
                try store.write {
                    try store.withMetadata { sql in
                        try sql.execute("UPDATE _atoll_sync_subscriptions SET state = 'complete', error = NULL WHERE version = ?", [.int(version)])
                        try sql.execute("UPDATE _atoll_sync_subscriptions SET state = 'superseded' WHERE version < ? AND state != 'error'", [.int(version)])
                        try sql.execute("DELETE FROM _atoll_sync_subscriptions WHERE version < ? AND state = 'superseded' AND version NOT IN (SELECT max(version) FROM _atoll_sync_subscriptions WHERE version < ?)", [.int(version), .int(version)])
                        try ClientTables.set(sql, "downloadedOnce", .int(1))
                    }
                }
                lock.withLock {
                    completedQueryVersion = max(completedQueryVersion, version)
                    lock.broadcast()
                }
                emit(.progress(direction: "download", transferred: 1, transferable: 1, estimate: 1))
            case "queryError":
                let version = try m.int("version")
                let message = (try? m.string("message")) ?? "the server refused the subscriptions"
                try store.write {
                    try store.withMetadata { sql in
                        try sql.execute("UPDATE _atoll_sync_subscriptions SET state = 'error', error = ? WHERE version = ?", [.string(message), .int(version)])
                    }
                }
                lock.withLock {
                    queryErrors[version] = message
                    lock.broadcast()
                }
                report(SyncError(.invalidFlexibleSyncSubscriptions, message))
            case "mark":
                if case .int(let v)? = m["serverVersion"] {
                    try store.write { try store.withMetadata { sql in
                        if try ClientTables.int(sql, "downloadCursor") < v { try ClientTables.set(sql, "downloadCursor", .int(v)) }
                    } }
                }
                if case .int(let r)? = m["request"] {
                    lock.withLock {
                        marksAnswered = max(marksAnswered, Int(r))
                        lock.broadcast()
                    }
                }
            case "error":
                try serverError(try SyncErrorMessage(wire: m))
            case "unbound":
                break
            default:
                break
            }
        } catch {
            report(SyncError(.badMessage, "a message from the server could not be used: \(error)"))
            connection.reconnectNow()
        }
    }

    private func serverError(_ e: SyncErrorMessage) throws {
        let error = SyncError(e.code, e.message, compensatingWrites: e.compensatingWrites)
        if e.code.action == "clientReset" {
            try clientReset(error)
            return
        }
        report(error)
        if e.code.isFatal {
            setState(.inactive)
            connection.detach(self)
        }
    }

    // MARK: - Local changes and upload

    /// Translates new local change-log entries into pending changesets (their own transaction,
    /// or the caller's), then uploads what is new.
    func processLocal() {
        guard !store.isClosed else { return }
        do {
            // The session's handle reads a snapshot: see the app's commits.
            _ = try store.refresh()
            let processed = try store.withMetadata { sql in UInt64(try ClientTables.int(sql, "processedLocal")) }
            if try store.version() > processed {
                try store.write { try store.withMetadata { sql in try translateLocal(sql) } }
            }
            try upload()
        } catch {
            report(SyncError(.internalServerError, "local changes could not be prepared for upload: \(error)"))
        }
    }

    /// Inside a write: every entry after the last translated one, except the client's own.
    private func translateLocal(_ sql: MetadataSQL) throws {
        let processed = UInt64(try ClientTables.int(sql, "processedLocal"))
        var applied = Set<UInt64>()
        for row in try sql.rows("SELECT version FROM _atoll_sync_applied WHERE version > ?", [.int(Int64(processed))]) {
            if case .int(let v) = row[0] { applied.insert(UInt64(v)) }
        }
        // The session's own commits (downloads) are not read: a bootstrap's entry is large.
        let entries = try store.changes(after: processed, skipping: applied)
        guard let newest = entries.last?.version else { return }
        if let first = entries.first?.version, first > processed + 1, processed > 0 {
            report(SyncError(.internalServerError, "local changes \(processed + 1)...\(first - 1) were pruned before they could be uploaded"))
        }
        let translator = Translator(store: store, sql: sql, clock: clock)
        for entry in entries where !applied.contains(entry.version) {
            guard let cs = try translator.translate(entry) else { continue }
            // Stored ready to send: one changeset text, or its parts (one per line) when it is
            // larger than a message should be.
            let text = Self.parts(of: cs).joined(separator: "\n")
            try sql.execute("INSERT OR REPLACE INTO _atoll_sync_pending VALUES (?, ?, ?)",
                            [.int(Int64(entry.version)), .string(text), .int(Int64(text.utf8.count))])
        }
        try ClientTables.set(sql, "processedLocal", .int(Int64(newest)))
        try ClientTables.set(sql, "clock", .string(clock.last.description))
        try sql.execute("DELETE FROM _atoll_sync_applied WHERE version <= ?", [.int(Int64(newest))])
        try store.holdChangeLog(from: newest)
    }

    func pendingChangesets(after version: UInt64 = 0, maxBytes: Int = .max) throws -> [SyncChangeset] {
        try readPending(after: version, maxBytes: maxBytes).changesets
    }

    /// The pending changesets as parsed, by local version, with the text they were parsed from:
    /// every download needs all of them (`PendingIndex`), and parsing each again for every
    /// download made a client with many unacknowledged commits slower and slower (quadratic).
    /// A cached changeset is used only while its stored text is the same.
    private var parsedPending: [UInt64: (text: String, changeset: SyncChangeset)] = [:]
    /// The index of the pending changesets of the last download, while they stay the same.
    private var pendingIndexCache: (versions: [UInt64], index: PendingIndex)?

    /// The pending changesets after `version` (up to about `maxBytes`), their versions, and
    /// whether every one was parsed before.
    private func readPending(after version: UInt64, maxBytes: Int) throws -> (changesets: [SyncChangeset], versions: [UInt64], cached: Bool) {
        try store.withMetadata { sql in
            var out = [SyncChangeset]()
            var versions = [UInt64]()
            var cached = true
            var bytes = 0
            for row in try sql.rows("SELECT version, changeset, bytes FROM _atoll_sync_pending WHERE version > ? ORDER BY version", [.int(Int64(version))]) {
                guard case .int(let v) = row[0], case .string(let text) = row[1] else { continue }
                if !out.isEmpty, bytes + (row[2].intValue.map(Int.init) ?? 0) > maxBytes { break }
                bytes += row[2].intValue.map(Int.init) ?? 0
                versions.append(UInt64(v))
                if let known = parsedPending[UInt64(v)], known.text == text {
                    out.append(known.changeset)
                    continue
                }
                cached = false
                var whole: SyncChangeset?
                for part in Self.lines(text) {
                    let cs = try SyncChangeset(wire: try EJSON.parse(part))
                    if whole == nil { whole = cs } else { whole?.instructions += cs.instructions }
                }
                if let whole {
                    out.append(whole)
                    parsedPending[UInt64(v)] = (text, whole)
                }
            }
            if version == 0, maxBytes == .max {
                // Everything pending was read: forget what was acknowledged or reset since.
                let live = Set(versions)
                parsedPending = parsedPending.filter { live.contains($0.key) }
            }
            return (out, versions, cached)
        }
    }

    /// The index of everything pending (built again only when the pending changesets changed).
    private func pendingIndex() throws -> PendingIndex {
        let pending = try readPending(after: 0, maxBytes: .max)
        if pending.cached, let known = pendingIndexCache, known.versions == pending.versions { return known.index }
        let index = PendingIndex(pending.changesets)
        pendingIndexCache = (pending.versions, index)
        return index
    }

    /// Sends the pending changesets the server has not been sent on this connection.
    private func upload() throws {
        guard bound, state == .active else { return }
        while true {
            // The pending texts as stored (translated once), a message of up to about 1 MB; a
            // changeset larger than a message travels in parts.
            let batch = try store.withMetadata { sql -> [(version: UInt64, text: String)] in
                var out = [(version: UInt64, text: String)]()
                var bytes = 0
                for row in try sql.rows("SELECT version, changeset, bytes FROM _atoll_sync_pending WHERE version > ? ORDER BY version LIMIT 1000",
                                        [.int(Int64(lastSent))]) {
                    guard case .int(let v) = row[0], case .string(let text) = row[1] else { continue }
                    let size = Int(row[2].intValue ?? 0)
                    if !out.isEmpty, bytes + size > 1 << 20 { break }
                    bytes += size
                    out.append((UInt64(v), text))
                }
                return out
            }
            guard !batch.isEmpty else { return }
            // Small changesets share a message; the parts of a large one go one per message.
            var group = [String]()
            func send() {
                guard !group.isEmpty else { return }
                connection.send(text: "{\"type\":\"upload\",\"session\":\(number),\"changesets\":[" + group.joined(separator: ",") + "]}")
                group = []
            }
            for row in batch {
                let parts = Self.lines(row.text)
                if parts.count == 1 { group.append(row.text); continue }
                send()
                for part in parts {
                    group = [part]
                    send()
                }
            }
            send()
            lastSent = batch.last?.version ?? lastSent
            let total = try store.withMetadata { sql in try sql.rows("SELECT coalesce(sum(bytes), 0) FROM _atoll_sync_pending").first?.first?.intValue ?? 0 }
            uploadTotal = max(uploadTotal, Int(total))
        }
    }

    /// The lines of a stored pending text (its parts), split on the bytes: a long text is not
    /// walked character by character.
    static func lines(_ text: String) -> [String] {
        text.utf8.split(separator: UInt8(ascii: "\n")).map { String(Substring($0)) }
    }

    /// The largest part of one changeset in one upload message.
    static let partBytes = 4 << 20

    /// A changeset's wire text, or (when larger than `partBytes`) the texts of its parts: the
    /// same `clientVersion` and clock, `"more": true` on all but the last. Each part is encoded
    /// once; a part that comes out too large is halved.
    static func parts(of cs: SyncChangeset) -> [String] {
        @Sendable func encode(_ slice: ArraySlice<SyncInstruction>, more: Bool) -> String {
            var piece = cs
            piece.instructions = Array(slice)
            var value = piece.wireValue
            if more, case .object(var d) = value {
                d["more"] = .bool(true)
                value = .object(d)
            }
            return Wire.encode(value)
        }
        let whole = cs.instructions[...]
        // About 100 bytes an instruction: a first guess of the part size, corrected below.
        let perPart = max(1, partBytes / 100)
        if whole.count <= perPart {
            let text = encode(whole, more: false)
            if text.utf8.count <= partBytes || whole.count == 1 { return [text] }
        }
        var out = [String]()
        var pending = [whole]
        var chunks = [ArraySlice<SyncInstruction>]()
        while let next = pending.popLast() {
            if next.count > perPart {
                let mid = next.startIndex + next.count / 2
                pending.append(next[mid...])
                pending.append(next[..<mid])
            } else {
                chunks.append(next)
            }
        }
        // The parts are encoded on all cores; one that comes out too large is halved here.
        var texts = concurrentMap(chunks.count) { [chunks] i in encode(chunks[i], more: i < chunks.count - 1) }
        var i = 0
        while i < chunks.count {
            let chunk = chunks[i]
            if texts[i].utf8.count > partBytes, chunk.count > 1 {
                let mid = chunk.startIndex + chunk.count / 2
                chunks.replaceSubrange(i...i, with: [chunk[..<mid], chunk[mid...]])
                texts.replaceSubrange(i...i, with: [encode(chunks[i], more: true), encode(chunks[i + 1], more: i + 1 < chunks.count - 1)])
                continue
            }
            out.append(texts[i])
            i += 1
        }
        return out
    }

    private func acknowledge(_ version: UInt64) throws {
        try store.write {
            try store.withMetadata { sql in
                try sql.execute("DELETE FROM _atoll_sync_pending WHERE version <= ?", [.int(Int64(version))])
                try ClientTables.set(sql, "uploadCursor", .int(Int64(version)))
            }
        }
        lastSent = max(lastSent, version)
        lock.withLock {
            uploadedThrough = max(uploadedThrough, version)
            lock.broadcast()
        }
        let left = try store.withMetadata { sql in try sql.rows("SELECT coalesce(sum(bytes), 0) FROM _atoll_sync_pending").first?.first?.intValue ?? 0 }
        let total = max(uploadTotal, Int(left))
        emit(.progress(direction: "upload", transferred: total - Int(left), transferable: total,
                       estimate: total == 0 ? 1 : Double(total - Int(left)) / Double(total)))
        if left == 0 { uploadTotal = 0 }
        try upload()
    }

    // MARK: - Download

    private func download(_ m: Fields) throws {
        let serverVersion = try m.uint("serverVersion")
        var instructions = [(SyncInstruction, Clock)]()
        let decoded = m.decodedChangesets
        for (n, item) in try m.list("changesets").enumerated() {
            let cs = try decoded?[n] ?? SyncChangeset(wire: item)
            instructions.reserveCapacity(instructions.count + cs.instructions.count)
            for ins in cs.instructions { instructions.append((ins, cs.clock)) }
        }
        if case .object(let b)? = m["bootstrap"] {
            // A bootstrap's objects carry their own clocks.
            if bootstrapBuffer.isEmpty { bootstrapBuffer = instructions } else { bootstrapBuffer += instructions }
            let sent = Int(b["sent"]?.intValue ?? 0), total = Int(b["total"]?.intValue ?? 0)
            emit(.progress(direction: "download", transferred: sent, transferable: total,
                           estimate: total == 0 ? 1 : Double(sent) / Double(total)))
            guard b["last"] == .bool(true) else { return }
            let batch = bootstrapBuffer
            bootstrapBuffer = []
            try apply(batch, serverVersion: serverVersion, bootstrap: true)
            if let recovering {
                self.recovering = nil
                try recover(recovering)
            }
            return
        }
        if case .object(let p)? = m["progress"] {
            let done = Int(p["downloaded"]?.intValue ?? 0), total = Int(p["downloadable"]?.intValue ?? 0)
            emit(.progress(direction: "download", transferred: done, transferable: total, estimate: total == 0 ? 1 : Double(done) / Double(total)))
        }
        try apply(instructions, serverVersion: serverVersion, bootstrap: false)
    }

    /// Applies downloaded instructions in one transaction, after translating local changes
    /// (so that the pending set and list identities are current).
    private func apply(_ instructions: [(SyncInstruction, Clock)], serverVersion: UInt64, bootstrap: Bool) throws {
        try store.write {
            try store.withMetadata { sql in
                try translateLocal(sql)
                let pending = try pendingIndex()
                let applier = Applier(store: store, sql: sql, pending: pending)
                for (ins, c) in instructions {
                    if c != .zero { clock.observe(c) }
                    if let carried = ins.newestCarriedClock { clock.observe(carried) }
                }
                // What a bootstrap may evict: the objects the device held before it.
                let held = bootstrap ? try heldObjects(sql) : [:]
                try applier.applyDownload(instructions)
                if bootstrap { try evictOutside(held, instructions, pending, sql) }
                if try ClientTables.int(sql, "downloadCursor") < Int64(serverVersion) {
                    try ClientTables.set(sql, "downloadCursor", .int(Int64(serverVersion)))
                }
                try ClientTables.set(sql, "clock", .string(clock.last.description))
                if store.writeHasChanges, let v = store.writeVersion {
                    try sql.execute("INSERT OR REPLACE INTO _atoll_sync_applied VALUES (?)", [.int(Int64(v))])
                }
            }
        }
    }

    /// The primary keys of the objects of the synced classes the device holds, by class.
    private func heldObjects(_ sql: MetadataSQL) throws -> [String: [Value]] {
        var out = [String: [Value]]()
        for cls in try syncedClasses(sql) where store.schema.classes.first(where: { $0.name == cls })?.primaryKey != nil {
            let keys = try store.primaryKeys(cls)
            if !keys.isEmpty { out[cls] = keys }
        }
        return out
    }

    /// After a bootstrap: objects the device held before it (`held`) that the new view does not
    /// hold leave the device (not the server), unless a pending change names them.
    private func evictOutside(_ held: [String: [Value]], _ instructions: [(SyncInstruction, Clock)],
                              _ pending: PendingIndex, _ sql: MetadataSQL) throws {
        guard !held.isEmpty else { return }
        var keep = Set<ObjectID>()
        for (ins, _) in instructions where ins.op == .upsert && held[ins.className] != nil { keep.insert(ins.objectID) }
        for (cls, keys) in held {
            for pk in keys {
                let id = ObjectID(cls, pk)
                if keep.contains(id) || pending.touched.contains(id) { continue }
                try ClientTables.hideLinks(sql, store.schema, to: id)
                do { try store.delete(cls, primaryKey: pk) } catch let error as AtollError where error.code == .notFound { continue }
                try ClientTables.dropLists(sql, cls, keyText(pk))
            }
        }
    }

    /// The classes whose objects come from the server: every class any subscription version
    /// names (flexible), or the classes with the partition key (partition).
    private func syncedClasses(_ sql: MetadataSQL) throws -> Set<String> {
        var out = Set<String>()
        if case .partition = configuration.mode {
            for cls in store.schema.classes where !cls.isEmbedded && cls.primaryKey != nil { out.insert(cls.name) }
            return out
        }
        for row in try sql.rows("SELECT queries FROM _atoll_sync_subscriptions") {
            guard case .string(let text) = row[0], case .list(let items) = try EJSON.parse(text) else { continue }
            for item in items { if let q = try? QuerySubscription(wire: item) { out.insert(q.className) } }
        }
        return out
    }

    // MARK: - Waiting

    /// Waits until every local change made before the call is on the server.
    /// - Throws: `SyncError(.timeout)`, or the session's fatal error.
    public func waitForUpload(timeout: Double) throws {
        connection.sync { processLocal() }
        let target = try store.withMetadata { sql in try sql.rows("SELECT coalesce(max(version), 0) FROM _atoll_sync_pending").first?.first?.intValue ?? 0 }
        try wait(timeout: timeout, what: "upload") { UInt64(max(0, target)) <= self.uploadedThrough }
    }

    /// Waits until everything the server had when the call was made is applied here.
    public func waitForDownload(timeout: Double, cancelled: () -> Bool = { false }) throws {
        let request = connection.sync { () -> Int in
            marksSent += 1
            if bound { connection.send(.doc(["type": .string("mark"), "session": .int(number), "request": .int(Int64(marksSent))])) }
            return marksSent
        }
        try wait(timeout: timeout, what: "download", cancelled: cancelled) { self.marksAnswered >= request }
    }

    /// Waits for a subscription version to be complete.
    /// - Throws: `SyncError(.invalidFlexibleSyncSubscriptions)` with the server's reason when it
    ///   was refused, `.timeout`.
    public func waitForSubscriptions(version: Int64, timeout: Double, cancelled: () -> Bool = { false }) throws {
        try wait(timeout: timeout, what: "subscriptions", cancelled: cancelled) {
            if let message = self.queryErrors[version] { throw SyncError(.invalidFlexibleSyncSubscriptions, message) }
            return self.completedQueryVersion >= version
        }
    }

    /// Waits for a condition (checked under the lock); fails on timeout, on a fatal error of the
    /// session, or when it stops.
    func wait(timeout: Double, what: String, _ done: () throws -> Bool) throws {
        try wait(timeout: timeout, what: what, cancelled: { false }, done)
    }

    /// `wait`, also ending (with a timeout error) as soon as `cancelled` says so.
    func wait(timeout: Double, what: String, cancelled: () -> Bool, _ done: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        let errorsAtStart = errorCount
        let interruptionsAtStart = interruptions
        while try !done() {
            if interruptions != interruptionsAtStart || cancelled() { throw SyncError(.timeout, "waiting for \(what) was cancelled") }
            if _state == .inactive {
                throw lastError ?? SyncError(.connectionFailed, "the session stopped")
            }
            if errorCount > errorsAtStart, let e = lastError, e.isFatal { throw e }
            if Date() >= deadline {
                if let e = lastError, errorCount > errorsAtStart, e.code == .timeout || e.code == .connectionFailed {
                    throw SyncError(.timeout, "waiting for \(what) timed out after \(timeout) s (\(e.message))")
                }
                throw SyncError(.timeout, "waiting for \(what) timed out after \(timeout) s")
            }
            _ = lock.wait(until: min(deadline, Date().addingTimeInterval(0.5)))
        }
    }

    /// Makes the waits under way throw (a cancelled AsyncOpen).
    func interruptWaits() {
        lock.withLock {
            interruptions += 1
            lock.broadcast()
        }
    }

    /// The subscription version whose completion means the realm holds the server's data:
    /// the newest non-error version (partition sync: 0).
    func activeQueryVersion() throws -> Int64 {
        if case .partition = configuration.mode { return 0 }
        return try store.withMetadata { sql in
            try sql.rows("SELECT coalesce(max(version), 0) FROM _atoll_sync_subscriptions WHERE state != 'error'").first?.first?.intValue ?? 0
        }
    }

    /// Whether this file ever completed a download.
    var hasDownloaded: Bool {
        (try? store.withMetadata { sql in try ClientTables.int(sql, "downloadedOnce") }) == 1
    }

    /// Waits for the realm to hold the server's data: its subscriptions bootstrapped, then a
    /// round trip (what `downloadBeforeOpen` and AsyncOpen do).
    public func waitForInitialDownload(timeout: Double, cancelled: () -> Bool = { false }) throws {
        let start = Date()
        try waitForSubscriptions(version: try activeQueryVersion(), timeout: timeout, cancelled: cancelled)
        try waitForDownload(timeout: max(0.1, timeout - Date().timeIntervalSince(start)), cancelled: cancelled)
        try onQueue { try store.write { try store.withMetadata { sql in try ClientTables.set(sql, "downloadedOnce", .int(1)) } } }
    }

    // MARK: - Subscriptions

    private func setUpSubscriptions() throws {
        let count = try store.withMetadata { sql in try sql.rows("SELECT count(*) FROM _atoll_sync_subscriptions").first?.first?.intValue ?? 0 }
        guard case .flexible = configuration.mode else { return }
        if count == 0 || configuration.rerunOnOpen, !configuration.initialSubscriptions.isEmpty || count == 0 {
            _ = try updateSubscriptions { set in
                for s in configuration.initialSubscriptions {
                    if let i = set.firstIndex(where: { $0.name == s.name && !s.name.isEmpty }) { set[i] = s } else { set.append(s) }
                }
            }
        }
    }

    /// The newest subscription set: version, state, error, subscriptions.
    public func subscriptions() throws -> (version: Int64, state: String, error: String?, subscriptions: [QuerySubscription]) {
        try store.withMetadata { sql in
            guard let row = try sql.rows("SELECT version, state, error, queries FROM _atoll_sync_subscriptions ORDER BY version DESC LIMIT 1").first else {
                return (0, "complete", nil, [])
            }
            var subs = [QuerySubscription]()
            if case .string(let text) = row[3], case .list(let items) = try EJSON.parse(text) {
                subs = try items.map { try QuerySubscription(wire: $0) }
            }
            var state = row[1].stringValue ?? "pending"
            if state == "pending", bootstrapping { state = "bootstrapping" }
            return (row[0].intValue ?? 0, state, row[2].stringValue, subs)
        }
    }

    private var bootstrapping: Bool { !bootstrapBuffer.isEmpty }
    /// The subscription version last sent on this binding (on the queue).
    private var querySent: Int64?

    /// Makes a new subscription set version from the newest one changed by `body`, and sends
    /// it. Returns the new version.
    public func updateSubscriptions(_ body: (inout [QuerySubscription]) throws -> Void) throws -> Int64 {
        guard case .flexible = configuration.mode else {
            throw SyncError(.badSyncPartitionValue, "a partition-sync realm has no subscriptions")
        }
        // The session's handle has one write transaction at a time: it is written on the queue.
        let version = try onQueue { try store.write {
            try store.withMetadata { sql -> Int64 in
                let current = try subscriptions()
                var set = current.subscriptions
                try body(&set)
                let next = current.version + 1
                try sql.execute("INSERT INTO _atoll_sync_subscriptions VALUES (?, 'pending', NULL, ?)",
                                [.int(next), .string(Wire.encode(.list(set.map(\.wireValue))))])
                return next
            }
        } }
        connection.async { [self] in try? sendQuery() }
        return version
    }

    /// Sends the newest subscription version that the server has not refused (on the queue).
    private func sendQuery() throws {
        guard bound else { return }
        let row = try store.withMetadata { sql in
            try sql.rows("SELECT version, state, queries FROM _atoll_sync_subscriptions WHERE state != 'error' ORDER BY version DESC LIMIT 1").first
        }
        let version = row?[0].intValue ?? 0
        // A version sent on this binding is not sent again (an update made before the bind
        // would otherwise go twice, and the server would bootstrap it twice).
        guard version != querySent else { return }
        querySent = version
        let queries: Value = {
            if case .string(let text)? = row?[2], let v = try? EJSON.parse(text) { return v }
            return .list([])
        }()
        connection.send(.doc(["type": .string("query"), "session": .int(number), "version": .int(version), "queries": queries,
                              "complete": .bool(row?[1].stringValue == "complete")]))
    }

    // MARK: - Client reset

    private func clientReset(_ error: SyncError) throws {
        let mode = configuration.clientResetMode
        var reported = SyncError(.clientReset, "client reset (\(mode.rawValue)): \(error.message)")
        reported.isFatal = mode == .manual
        report(reported)
        if mode == .manual {
            setState(.inactive)
            connection.detach(self)
            return
        }
        configuration.beforeReset?(store)
        let unsynced = mode == .discardUnsyncedChanges ? [] : try pendingChangesets()
        try store.write {
            try store.withMetadata { sql in
                try translateLocal(sql)
                for cls in store.schema.classes where !cls.isEmbedded && cls.primaryKey != nil {
                    _ = try store.objects(cls.name).deleteAll()
                }
                for table in ["_atoll_sync_pending", "_atoll_sync_lists"] { try sql.execute("DELETE FROM \(table)") }
                for key in ["ident", "salt", "downloadCursor", "uploadCursor", "downloadedOnce"] {
                    try sql.execute("DELETE FROM _atoll_sync_state WHERE key = ?", [.string(key)])
                }
                try sql.execute("UPDATE _atoll_sync_subscriptions SET state = 'pending' WHERE state = 'complete'")
                if let v = store.writeVersion, store.writeHasChanges {
                    try sql.execute("INSERT OR REPLACE INTO _atoll_sync_applied VALUES (?)", [.int(Int64(v))])
                }
            }
        }
        lock.withLock { completedQueryVersion = -1 }
        recovering = unsynced.isEmpty ? nil : unsynced
        // Bind again as a new client file: the server bootstraps the view from scratch.
        bound = false
        connection.rebind(self)
        if recovering == nil { configuration.afterReset?(store) }
    }

    /// Writes the changes that were not uploaded again, on top of the server's state, as new
    /// local writes (they are uploaded like any other).
    private func recover(_ changesets: [SyncChangeset]) throws {
        do {
            try store.write {
                for cs in changesets { try Replayer(store: store).replay(cs) }
            }
        } catch {
            report(SyncError(.clientReset, "unsynced changes could not be recovered: \(error)"))
            if configuration.clientResetMode == .recoverUnsyncedChanges { throw error }
        }
        configuration.afterReset?(store)
        processLocal()
    }
}

/// Writes sync instructions back as ordinary local writes (client reset recovery): objects,
/// fields, set and dictionary elements by value, list inserts after their neighbour when it is
/// still there (else at the end).
struct Replayer {
    let store: Store

    func replay(_ cs: SyncChangeset) throws {
        for ins in cs.instructions {
            guard let pkName = store.schema.classes.first(where: { $0.name == ins.className })?.primaryKey else { continue }
            let exists = try store.object(ins.className, primaryKey: ins.primaryKey) != nil
            do {
                switch ins.op {
                case .create:
                    if !exists { var d = Document(); d[pkName] = ins.primaryKey; _ = try store.create(ins.className, d) }
                case .erase:
                    if exists { try store.delete(ins.className, primaryKey: ins.primaryKey) }
                case .set:
                    if exists { try store.apply(set: ins) }
                case .listInsert:
                    if exists, let p = ins.property, case .list(let items)? = try store.value(ins.className, primaryKey: ins.primaryKey, property: p) {
                        try store.listInsert(ins.className, primaryKey: ins.primaryKey, property: p, ins.value ?? .null, at: items.count)
                    }
                case .setInsert:
                    if exists, let p = ins.property { _ = try store.setInsert(ins.className, primaryKey: ins.primaryKey, property: p, ins.value ?? .null) }
                case .setErase:
                    if exists, let p = ins.property { _ = try store.setErase(ins.className, primaryKey: ins.primaryKey, property: p, ins.value ?? .null) }
                case .dictionarySet:
                    if exists, ins.path.count == 2, case .key(let p) = ins.path[0], case .key(let k) = ins.path[1] {
                        try store.dictionarySet(ins.className, primaryKey: ins.primaryKey, property: p, key: k, ins.value ?? .null)
                    }
                case .dictionaryErase:
                    if exists, ins.path.count == 2, case .key(let p) = ins.path[0], case .key(let k) = ins.path[1] {
                        _ = try store.dictionaryErase(ins.className, primaryKey: ins.primaryKey, property: p, key: k)
                    }
                case .addInteger:
                    if exists, let p = ins.property, case .int(let d)? = ins.value {
                        try store.addInteger(ins.className, primaryKey: ins.primaryKey, property: p, d)
                    }
                default:
                    // Element erases and sets name elements of the old state: they have no
                    // meaning on the new one.
                    break
                }
            } catch let e as AtollError where e.code == .notFound {
                continue
            }
        }
    }
}

/// The schema in Realm JS notation, for `bind` (development mode).
enum SchemaWire {
    static func value(_ schema: Schema) -> Value {
        let json = SchemaJSON.make(schema)
        defer { json_decref(json) }
        return (try? EJSON.value(json)) ?? .list([])
    }
}
