import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation
import Synchronization

/// The query that decides which objects of one class a session sees: its subscriptions' queries
/// OR-ed, run with what the session's user may read (the read rule of this class for the
/// objects themselves, and of every class for what the query's key paths look at).
struct ViewQuery: Hashable {
    var text: String
    var arguments: [Value]
    /// Nil for a query of the app's own (a write rule): it sees everything, at any cost.
    var access: ReadAccess?
    /// What a user's query may cost (with `access`).
    var limits = QueryLimits()
    /// Every object of the class: the query is TRUEPREDICATE and the user may read them all.
    let isWholeClass: Bool

    init(_ className: String, text: String, arguments: [Value], access: ReadAccess?, limits: QueryLimits = QueryLimits()) {
        self.text = text
        self.arguments = arguments
        self.access = access
        self.limits = limits
        isWholeClass = text == "TRUEPREDICATE" && (access.map { $0.rule(className) == .everything } ?? true)
    }

    /// The objects of `cls` the view holds, with `extra` (a condition on the query's arguments
    /// and `extraArguments`) AND-ed. A user's view reads within its time budget.
    func results(_ store: Store, _ cls: String, and extra: String? = nil, _ extraArguments: [Value] = []) throws -> Results {
        let query = extra.map { "(\(text)) AND \($0)" } ?? text
        guard let access else { return try store.objects(cls, where: query, arguments + extraArguments) }
        let results = try store.objects(cls, where: query, arguments + extraArguments, readableBy: access, maxLinkDepth: limits.maxLinkDepth)
        results.timeBudget = limits.querySeconds
        return results
    }
}

/// One bound realm of one connection. Changed only on its app's queue.
final class Session {
    let number: Int64
    unowned let connection: SyncConnection
    var user: RuleUser { connection.user }
    var file: Int64 = 0
    var partitionMode = false
    var partition: Value = .null
    var queryVersion: Int64 = -1
    var subscriptions: [SubscriptionQuery] = []
    var views: [String: ViewQuery] = [:]
    /// The objects the client holds, as far as the server knows: primary key texts per class.
    var inView: [String: Set<ExactText>] = [:]
    /// Whether the session gets steady-state downloads (bootstrapped or resumed).
    var ready = false
    var uploadCursor: UInt64 = 0
    /// The newest of its changesets the client has been told of (acknowledged): changesets after
    /// it and through `uploadCursor` were integrated but their acknowledgement was lost.
    var clientAcked: UInt64 = 0
    var downloadCursor: UInt64 = 0
    /// The parts so far of a changeset that arrives in parts.
    var partial: SyncChangeset?
    /// The clock node of the session's first changeset: every later one must carry it too.
    var node: Int64?
    /// The bootstrap being read and sent off the queue, if any (ServerApp+Bootstrap.swift): until
    /// it ends the session gets no changesets, and its messages wait in `backlog`.
    var bootstrap: BootstrapJob?
    /// Whether to bootstrap again once this one ends (the rules changed while it ran).
    var bootstrapAgain = false
    /// The session's messages that came during its bootstrap, handled once it ends, in order;
    /// each one's bytes stay counted in its connection's and the app's pending bytes till then.
    var backlog: [(message: ClientMessage, bytes: Int)] = []

    init(number: Int64, connection: SyncConnection) {
        self.number = number
        self.connection = connection
    }
}

/// One app's sync engine: its store, history and sessions. Everything runs on `queue`, one
/// message at a time, so integration is serial and sessions need no locks (bootstraps read and
/// send on workers, from a snapshot, and end on the queue).
///
/// This file holds its state, its connections and the dispatch of their messages; the rest is
/// one file per concern: `ServerApp+Bind` (a session's mode, file and cursors), `+Schema`
/// (development mode, other instances' schema and commits), `+Subscriptions` (a set checked
/// whole, the views, read access), `+Bootstrap` (a view sent whole, and the catch-up of a
/// returning client), `+Upload` (checks, integration, acknowledgement), `+FanOut` (each session's
/// share of a changeset), and `Admin/ServerApp+Admin` (the admin API's view and edits).
package final class ServerApp: @unchecked Sendable {
    /// Changed only on the queue (the admin API replaces the rules).
    var configuration: ServerAppConfiguration
    package let queue: DispatchQueue
    let log: Logger
    let metrics: Metrics
    let path: String
    private(set) var store: Store
    /// Where the history, client files and objects are kept for good (Storage/SyncStorage.swift).
    let storage: SyncStorage
    var latestVersion: UInt64 = 0
    private(set) var sessions: [ObjectIdentifier: [Int64: Session]] = [:]
    var sessionCount: Int { sessions.values.reduce(0) { $0 + $1.count } }
    /// The last sync errors sent, for the admin console (ServerApp+Admin.swift).
    var recentErrors = RecentSyncErrors()
    /// Session numbers whose bind failed, per connection: messages the client sent for them
    /// before it learned of the failure (its query, its uploads) are dropped, not an error.
    var failedBinds: [ObjectIdentifier: Set<Int64>] = [:]
    /// Bytes of each user's messages waiting in its sessions' backlogs (bootstraps running).
    var heldBytes: [String: Int] = [:]
    /// How many objects a bootstrap reads from the store at a time (their metadata is read with
    /// one list of keys, which `ObjectMetadata.load` takes up to 500 long).
    static let bootstrapPage = 500
    /// Runs a bootstrap's reading and sending off the queue, for a user (`BootstrapWorkers`).
    /// The simulation gives its own, to run them at steps of its schedule.
    package var bootstrapRunner: @Sendable (_ user: String, _ work: @escaping @Sendable () -> Void) -> Void
    /// The bootstraps started and not ended: `close` waits for them.
    let bootstrapsRunning = DispatchGroup()
    /// Largest download message, in bytes of instructions (a bootstrap or catch-up is split).
    var maxDownloadBytes = 1 << 20
    /// What one connection may send (set by the server before it starts).
    var limits = SyncLimits(maxUploadsPerSecond: 0, maxPendingBytes: 256 << 20)
    /// Users whose subscription ran past its time budget, and until when (uptime nanoseconds)
    /// they may not subscribe again.
    var cooldowns: [String: UInt64] = [:]
    /// What each user's bootstraps took of the queue lately: seconds owed, and when that was
    /// last worked out (uptime nanoseconds); it drains at `bootstrapSecondsPerMinute` a minute.
    var bootstrapTime: [String: (owed: Double, at: UInt64)] = [:]

    /// The seconds of bootstrap a user owes now (what the last minute's bootstraps took, less
    /// what has drained since).
    func bootstrapOwed(_ user: String) -> Double {
        guard let t = bootstrapTime[user] else { return 0 }
        let drained = Double(DispatchTime.now().uptimeNanoseconds - t.at) / 1e9 * configuration.queryLimits.bootstrapSecondsPerMinute / 60
        return max(0, t.owed - drained)
    }
    /// The server's wall clock in milliseconds (a simulation gives its own).
    package var now: @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    var schema: Schema { store.schema }

    /// Opens the app's store in `directory`. With a shared storage (PostgreSQL) the store is this
    /// instance's cache, `cache.realm`, brought up to date from the storage at start; otherwise
    /// it is the app's data, `data.realm`.
    package convenience init(configuration: ServerAppConfiguration, directory: String, log: Logger, metrics: Metrics) throws {
        try self.init(configuration: configuration, directory: directory, log: log, metrics: metrics, storage: LocalSyncStorage())
    }

    /// What a commit of the app's store survives.
    let durability: Durability

    /// `durability`: what a commit of the app's store survives (the server's `"durability"`);
    /// an upload is acknowledged after its commit.
    init(configuration: ServerAppConfiguration, directory: String, log: Logger, metrics: Metrics, storage: SyncStorage,
         durability: Durability = .full) throws {
        self.configuration = configuration
        self.durability = durability
        self.log = log
        self.metrics = metrics
        self.storage = storage
        queue = DispatchQueue(label: "atoll.sync.\(configuration.id)")
        let workers = BootstrapWorkers(name: "atoll.bootstrap.\(configuration.id)")
        bootstrapRunner = { workers.run(user: $0, $1) }
        // The app's objects and history, readable by the server's user only (with SQLite's -wal
        // and -shm, which take the database file's mode).
        try PrivateFiles.directory(directory, tighten: true)
        path = directory + (storage is LocalSyncStorage ? "/data.realm" : "/cache.realm")
        try PrivateFiles.file(path)
        store = try Self.open(path: path, schema: configuration.schema, durability: durability)
        try ServerSyncTables.create(store)
        latestVersion = try storage.open(self)
    }

    static func open(path: String, schema: Schema?, version: UInt64? = nil, durability: Durability) throws -> Store {
        func configuration(_ schema: Schema?, _ version: UInt64) -> Configuration {
            var c = Configuration(path: path, schema: schema, schemaVersion: version)
            c.durability = durability
            return c
        }
        if let schema {
            // Additive changes (development mode, or a config that gained classes) migrate by
            // themselves with a new schema version.
            do {
                return try Store(configuration(schema, version ?? 0))
            } catch let e as AtollError where e.code == .schemaMismatch {
                let current = try Store(Configuration(path: path))
                let next = current.schemaVersion + 1
                current.close()
                return try Store(configuration(schema, next))
            }
        }
        return try Store(configuration(nil, 0))
    }

    /// Set by `close` (on the queue): a catch-up the listener queued after it does nothing, and
    /// a bootstrap that ends after it sends nothing more.
    private(set) var isClosed = false

    package func close() {
        // Bootstraps stop at their next page; their end runs on the queue, so they are waited
        // for outside it.
        queue.sync { cancelBootstraps() }
        bootstrapsRunning.wait()
        queue.sync {
            isClosed = true
            store.close()
            storage.close()
        }
    }

    // MARK: - Connections

    /// Every open connection, with or without sessions (the admin API closes a disabled user's
    /// connections, also those that have not bound a session yet).
    private(set) var connections: [ObjectIdentifier: SyncConnection] = [:]
    /// What each user's connections have queued for their clients (any thread).
    let queued = UserQueues()
    /// Large messages parsed on another core ahead of the queue, for all connections together:
    /// six connections each sending a 16 MB upload hold one budget of parsed messages, not six.
    let parseAhead = ParseAhead()
    /// Bytes of all its connections' messages read and not yet handled (any thread).
    let pendingBytes = Atomic<Int>(0)

    /// Whether a user has `limits.maxConnectionsPerUser` sync connections open (any thread).
    func tooManyConnections(of user: String) -> Bool {
        limits.maxConnectionsPerUser > 0 && queued.count(of: user) >= limits.maxConnectionsPerUser
    }

    package func connectionOpened(_ connection: SyncConnection) {
        queue.async { [self] in connections[ObjectIdentifier(connection)] = connection }
    }

    package func connectionClosed(_ connection: SyncConnection) {
        queue.async { [self] in
            connections[ObjectIdentifier(connection)] = nil
            failedBinds[ObjectIdentifier(connection)] = nil
            let gone = sessions.removeValue(forKey: ObjectIdentifier(connection)) ?? [:]
            for s in gone.values {
                s.bootstrap?.cancelled.store(true, ordering: .relaxed)
                releaseBacklog(s, s.backlog.reduce(0) { $0 + $1.bytes })
                s.backlog = []
            }
            metrics.update { $0.sessions -= gone.count }
        }
    }

    /// Handles one message of a connection (on the queue). `bytes` is its size, counted in the
    /// connection's and the app's pending bytes until it is handled.
    func handle(_ message: ClientMessage, from connection: SyncConnection, bytes: Int = 0) {
        let sessionNumber = message.session
        let isBind = if case .bind = message { true } else { false }
        if !isBind, let n = sessionNumber, failedBinds[ObjectIdentifier(connection)]?.contains(n) == true { return }
        // A session whose bootstrap runs handles its messages after it, in order. What waits so
        // is bounded per user, so that one user cannot fill the app's bound on waiting messages
        // (`maxPendingBytesPerApp`) and have everyone else's large messages refused.
        if !isBind, let n = sessionNumber, let s = sessions[ObjectIdentifier(connection)]?[n], s.bootstrap != nil {
            let held = (heldBytes[connection.user.id] ?? 0) + bytes
            guard held <= limits.maxPendingBytes else {
                let error = SyncErrorMessage(.tooManyMessages, "more than \(limits.maxPendingBytes) bytes of this user's messages wait for "
                                             + "their sessions' bootstraps", session: n, retryAfter: 1)
                return refuse(connection, error, reason: "messages waiting for a bootstrap")
            }
            heldBytes[connection.user.id] = held
            connection.pendingBytes.add(bytes, ordering: .relaxed)
            pendingBytes.add(bytes, ordering: .relaxed)
            s.backlog.append((message, bytes))
            return
        }
        do {
            switch message {
            case .ping(let timestamp):
                connection.send(.pong(timestamp: timestamp))
            case .bind(let b):
                guard connection.takeQuery() else { return refuseFlood(connection, session: sessionNumber, .queries) }
                try bind(b, connection)
            case .query(let q):
                let s = try session(q.session, connection)
                guard connection.takeQuery() else { return refuseFlood(connection, session: s.number, .queries) }
                try query(q, s)
            case .upload(let number, let changesets):
                let s = try session(number, connection)
                // Refused, not integrated; the connection closes so that no later upload is
                // integrated over the gap (the client resends from its upload cursor).
                guard connection.takeUpload() else { return refuseFlood(connection, session: s.number, .uploads) }
                try upload(changesets, s)
            case .mark(let number, let request):
                let s = try session(number, connection)
                // What the storage has now, also from other instances, comes before the mark.
                try storage.catchUp(self)
                s.downloadCursor = latestVersion
                connection.send(.mark(session: s.number, request: request, serverVersion: latestVersion))
            case .unbind(let number):
                let s = try session(number, connection)
                sessions[ObjectIdentifier(connection)]?[s.number] = nil
                metrics.update { $0.sessions -= 1 }
                connection.send(.unbound(session: s.number))
            }
        } catch var error as SyncErrorMessage {
            if error.session == nil, error.code != .badMessage { error.session = sessionNumber }
            if isBind, let n = sessionNumber, error.code != .badMessage, sessions[ObjectIdentifier(connection)]?[n] == nil {
                failedBinds[ObjectIdentifier(connection), default: []].insert(n)
            }
            fail(connection, error)
        } catch let error as ProtocolError {
            fail(connection, SyncErrorMessage(.badMessage, error.message))
        } catch {
            log.error("sync message failed", ["app": configuration.id, "type": message.type, "error": "\(error)"])
            fail(connection, SyncErrorMessage(.internalServerError, "the server failed: \(error)", session: sessionNumber))
        }
    }

    /// A message that does not decode (not JSON, a type the protocol does not have, a field
    /// missing or of the wrong kind): `badMessage`, and the connection closes. Messages for a
    /// session whose bind failed are dropped, decodable or not, as the client learned of it.
    func refuseUndecodable(_ error: Error, from connection: SyncConnection) {
        if let e = error as? ProtocolError, e.messageType != "bind", let n = e.session,
           failedBinds[ObjectIdentifier(connection)]?.contains(n) == true { return }
        fail(connection, SyncErrorMessage(.badMessage, (error as? ProtocolError)?.message ?? "\(error)"))
    }

    private enum Limited { case uploads, queries }

    /// `tooManyMessages` and a close for a connection over one of its message limits.
    private func refuseFlood(_ connection: SyncConnection, session: Int64?, _ limited: Limited) {
        let what = limited == .uploads ? "\(limits.maxUploadsPerSecond) uploads" : "\(limits.maxQueriesPerSecond) bind and query messages"
        // A second refills the bucket: the client waits at least that long before it reconnects.
        let error = SyncErrorMessage(.tooManyMessages, "more than \(what) per second: reconnect after a backoff", session: session,
                                     retryAfter: 1)
        refuse(connection, error, reason: "too many messages")
    }

    /// Counts, records and logs `error`, then refuses the rest of what the connection sent
    /// (`SyncConnection.refuse`: the error, a close with 1008, its queued messages dropped).
    func refuse(_ connection: SyncConnection, _ error: SyncErrorMessage, reason: String) {
        guard !connection.throttled else { return }
        metrics.error(error.code.rawValue)
        recentErrors.add(error, user: connection.user.id)
        log.warning("refusing a sync connection", ["app": configuration.id, "user": connection.user.id, "reason": reason,
                                                   "message": error.message])
        connection.refuse(error, reason: reason)
    }

    func fail(_ connection: SyncConnection, _ error: SyncErrorMessage) {
        metrics.error(error.code.rawValue)
        recentErrors.add(error, user: connection.user.id)
        log.info("sync error", ["app": configuration.id, "user": connection.user.id, "code": error.code.rawValue, "message": error.message])
        connection.send(.error(error))
        if error.code == .badMessage { connection.close(code: 1002, reason: "bad message") }
    }

    func session(_ n: Int64, _ connection: SyncConnection) throws -> Session {
        guard let s = sessions[ObjectIdentifier(connection)]?[n] else {
            throw SyncErrorMessage(.badMessage, "no session \(n) is bound on this connection")
        }
        return s
    }

    /// Uncounts `bytes` of a session's backlog (handled, or dropped with its connection).
    func releaseBacklog(_ s: Session, _ bytes: Int) {
        guard bytes > 0 else { return }
        pendingBytes.subtract(bytes, ordering: .relaxed)
        let left = (heldBytes[s.user.id] ?? 0) - bytes
        heldBytes[s.user.id] = left > 0 ? left : nil
    }

    /// Registers a bound session.
    func addSession(_ s: Session) {
        sessions[ObjectIdentifier(s.connection), default: [:]][s.number] = s
        metrics.update { $0.sessions += 1 }
    }

    /// Reopens the store with a grown schema; views of bound sessions are recomputed with it.
    func replaceSchema(_ merged: Schema) throws {
        let next = store.schemaVersion + 1
        store.close()
        store = try Self.open(path: path, schema: merged, version: next, durability: durability)
        for s in sessions.values.flatMap(\.values) { try? computeViews(s) }
    }
}
