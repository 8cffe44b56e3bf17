import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation

/// What to do when the server cannot resume the client (docs/sync.md, "Client reset").
public enum ClientResetStrategy: String, Sendable {
    /// Report the error and stop the session; the app deals with the file.
    case manual
    /// Drop what was not uploaded and start again from the server's state.
    case discardUnsyncedChanges
    /// Start again from the server's state, then write the changes that were not uploaded again.
    case recoverUnsyncedChanges
    /// Recover; if that fails, discard.
    case recoverOrDiscardUnsyncedChanges
}

/// How a synced realm syncs.
public struct ClientSyncConfiguration: @unchecked Sendable {
    public enum Mode: Sendable, Equatable {
        case flexible
        case partition(Value)
    }
    public var mode: Mode
    /// Subscriptions added at the first open (and at every open with `rerunOnOpen`).
    public var initialSubscriptions: [SubscriptionQuery] = []
    public var rerunOnOpen = false
    public var clientResetMode: ClientResetStrategy = .recoverUnsyncedChanges
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
    case state(ClientSession.State)
    case connection(ClientSession.ConnectionState)
    /// `direction` is "upload" or "download"; `estimate` is transferred / transferable (1 when done).
    case progress(direction: String, transferred: Int, transferable: Int, estimate: Double)
}

/// The sync of one realm file: uploads its local changes, applies what the server sends, keeps
/// its subscriptions. Works on its own store handle of the file (writes from the app's handles
/// are read back from the change log) and on its user's connection queue.
///
/// This file holds its state, its opening and the dispatch of what the server sends; the rest is
/// one file per concern: `ClientSession+Upload` (local commits to pending changesets to uploads),
/// `+Download` (downloads and bootstraps applied), `+Subscriptions`, `+Waiting` (for uploads,
/// downloads and subscription sets) and `+ClientReset` (with the `Replayer` of recovery).
public final class ClientSession: @unchecked Sendable {
    public enum State: String, Sendable { case active, paused, inactive }
    public enum ConnectionState: String, Sendable { case disconnected, connecting, connected }

    public let user: ClientUser
    public let path: String
    public let configuration: ClientSyncConfiguration
    /// The session's own handle of the realm file.
    let store: Store
    /// What carries the session's messages and runs its work in turn: the user's connection.
    let connection: any SessionConnection
    let clock: HybridClock
    let lock = NSCondition()

    // Guarded by `lock`.
    var _state = State.active
    var _connectionState = ConnectionState.disconnected
    var observers: [Int: @Sendable (SessionEvent) -> Void] = [:]
    var nextObserver = 0
    var marksAnswered = 0
    var lastError: SyncError?
    var errorCount = 0
    var uploadedThrough: UInt64 = 0
    var completedQueryVersion: Int64 = -1
    var queryErrors: [Int64: String] = [:]
    var handles = 0
    var interruptions = 0

    // Queue state.
    var number: Int64 = 0
    var bound = false
    var lastSent: UInt64 = 0
    var marksSent = 0
    var bootstrapBuffer: [(SyncInstruction, Clock)] = []
    var localToken: NotificationToken?
    var recovering: [SyncChangeset]?
    var uploadTotal = 0
    /// The pending changesets as parsed, by local version, with the text they were parsed from:
    /// every download needs all of them (`PendingIndex`), and parsing each again for every
    /// download made a client with many unacknowledged commits slower and slower (quadratic).
    /// A cached changeset is used only while its stored text is the same.
    var parsedPending: [UInt64: (text: String, changeset: SyncChangeset)] = [:]
    /// The index of the pending changesets of the last download, while they stay the same.
    var pendingIndexCache: (versions: [UInt64], index: PendingIndex)?
    /// The subscription version last sent on this binding (on the queue).
    var querySent: Int64?

    // MARK: - Open

    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var registry: [String: ClientSession] = [:]

    /// The session of a realm file: the open one, or a new one. Each call takes a handle;
    /// `release()` gives it back, and the session stops with the last.
    /// - Throws: `AtollError` when the file cannot be opened, `SyncError` for a logged-out user
    ///   or a session of the file that syncs differently.
    public static func open(user: ClientUser, storeConfiguration: Configuration, sync: ClientSyncConfiguration) throws -> ClientSession {
        guard user.isLoggedIn else { throw SyncError(.authFailed, "user \(user.id) is not logged in") }
        guard let path = storeConfiguration.path, !storeConfiguration.inMemory else {
            throw AtollError(.invalidArgument, "a synced realm needs a file \"path\" (not in memory)")
        }
        // A file that rolls back to an earlier commit after a power loss would number its next
        // commits as versions the server took already, and the server would drop them.
        guard storeConfiguration.durability == .full else {
            throw AtollError(.invalidArgument, "a synced realm's durability must be \"full\" (with \"normal\", writes made after a power loss could be lost)")
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
        let session = try ClientSession(user: user, path: key, storeConfiguration: storeConfiguration, sync: sync)
        registry[key] = session
        session.retain()
        session.start()
        return session
    }

    private init(user: ClientUser, path: String, storeConfiguration: Configuration, sync: ClientSyncConfiguration) throws {
        self.user = user
        self.path = path
        configuration = sync
        var c = storeConfiguration
        c.notificationDelivery = .thread
        // Uploads are read from the change log, values and all: the file keeps them from this
        // open on, for the host's handles too (they open after the session).
        c.changeLogValues = true
        let store = try Store(c)
        self.store = store
        connection = user.app.connection(for: user)
        var node: Int64 = 0
        try store.write {
            try store.withMetadata { sql in
                try ClientTables.create(sql)
                node = try ClientTables.int(sql, "node")
                if node == 0, try sql.changeLogHasEntriesWithoutValues() {
                    // A local realm's file, whose history kept no values: the upload could not
                    // send it. (Nothing of this transaction is kept.)
                    throw AtollError(.invalidArgument, "'\(path)' is a local realm's file with changes that cannot be uploaded: open it as a local realm and copy its objects into a synced realm with writeCopy")
                }
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
        var completed = try store.withMetadata { sql in try ClientTables.newestCompleteSubscriptionVersion(sql) }
        // A partition file has one set of its own, version 0, that the device does not store:
        // once it was bootstrapped, it is complete in every later session too.
        if case .partition = configuration.mode, try store.withMetadata({ sql in try ClientTables.int(sql, "downloadedOnce") }) == 1 {
            completed = max(completed, 0)
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

    func start() {
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

    func emit(_ event: SessionEvent) {
        let targets = lock.withLock { Array(observers.values) }
        for t in targets { t(event) }
    }

    func setState(_ s: State) { change(\._state, to: s, .state(s)) }

    func setConnectionState(_ s: ConnectionState) { change(\._connectionState, to: s, .connection(s)) }

    /// Sets a state under the lock, waking waiters, and tells observers if it changed.
    private func change<T: Equatable>(_ state: ReferenceWritableKeyPath<ClientSession, T>, to value: T, _ event: SessionEvent) {
        let changed = lock.withLock { () -> Bool in
            guard self[keyPath: state] != value else { return false }
            self[keyPath: state] = value
            lock.broadcast()
            return true
        }
        if changed { emit(event) }
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
        do {
            let (ident, salt, cursor, uploaded) = try store.withMetadata { sql in
                (try ClientTables.int(sql, "ident"), try ClientTables.int(sql, "salt"), try ClientTables.int(sql, "downloadCursor"),
                 try ClientTables.int(sql, "uploadCursor"))
            }
            let mode: ClientMessage.Mode = switch configuration.mode {
            case .flexible: .flexible
            case .partition(let value): .partition(value)
            }
            // What the server acknowledged: changesets it integrated after that, their
            // acknowledgement lost, are sent again, and answered with their objects' state.
            connection.send(.bind(ClientMessage.Bind(
                session: number, realm: URL(fileURLWithPath: path).lastPathComponent, mode: mode,
                file: ident > 0 ? ClientFileIdentity(ident: ident, salt: salt) : nil, downloadCursor: UInt64(max(cursor, 0)),
                uploadCursor: ident > 0 ? UInt64(max(uploaded, 0)) : nil, schema: SchemaWire.value(store.schema))))
            querySent = nil
            if case .flexible = configuration.mode { try sendQuery() }
            if marksSent > lock.withLock({ marksAnswered }) {
                connection.send(.mark(session: number, request: Int64(marksSent)))
            }
        } catch {
            report(SyncError(.clientInternalError, "cannot start the session: \(error)"))
        }
    }

    func didDisconnect() {
        bound = false
        bootstrapBuffer = []
        setConnectionState(.disconnected)
    }

    /// Handles one message for this session (on the queue).
    func handle(_ message: ServerMessage) {
        do {
            switch message {
            case .ident(_, let file):
                try store.write {
                    try store.withMetadata { sql in
                        try ClientTables.set(sql, "ident", .int(file.ident))
                        try ClientTables.set(sql, "salt", .int(file.salt))
                    }
                }
            case .uploadAck(_, let clientVersion):
                try acknowledge(clientVersion)
            case .download(let d):
                // What the server says of the device's own changesets comes with their
                // acknowledgement, in one message: merged with what is still pending, only.
                if let acked = d.uploadAck { try acknowledge(acked) }
                try download(d)
            case .queryComplete(_, let version, _):
                try store.write {
                    try store.withMetadata { sql in
                        try ClientTables.completeSubscriptionSet(sql, version)
                        try ClientTables.set(sql, "downloadedOnce", .int(1))
                    }
                }
                lock.withLock {
                    completedQueryVersion = max(completedQueryVersion, version)
                    lock.broadcast()
                }
                emit(.progress(direction: "download", transferred: 1, transferable: 1, estimate: 1))
            case .queryError(_, let version, let message):
                try store.write {
                    try store.withMetadata { sql in
                        try ClientTables.refuseSubscriptionSet(sql, version, error: message)
                    }
                }
                lock.withLock {
                    queryErrors[version] = message
                    lock.broadcast()
                }
                report(SyncError(.invalidFlexibleSyncSubscriptions, message))
            case .mark(_, let request, let serverVersion):
                if serverVersion > 0 {
                    try store.write { try store.withMetadata { sql in
                        if try ClientTables.int(sql, "downloadCursor") < Int64(serverVersion) {
                            try ClientTables.set(sql, "downloadCursor", .int(Int64(serverVersion)))
                        }
                    } }
                }
                lock.withLock {
                    marksAnswered = max(marksAnswered, Int(request))
                    lock.broadcast()
                }
            case .error(let e):
                try serverError(e)
            case .unbound, .pong:
                break
            }
        } catch {
            report(SyncError(.badMessage, "a message from the server could not be used: \(error)"))
            connection.reconnectNow()
        }
    }

    func serverError(_ e: SyncErrorMessage) throws {
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
}

/// The schema in Realm JS notation, for `bind` (development mode).
enum SchemaWire {
    static func value(_ schema: Schema) -> Value {
        let json = SchemaJSON.make(schema)
        defer { json_decref(json) }
        return (try? EJSON.value(json)) ?? .list([])
    }
}
