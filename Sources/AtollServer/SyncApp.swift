import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation
import Synchronization

/// A subscription as the server holds it.
struct Subscription: Sendable, Hashable {
    var name: String
    var className: String
    var query: String
    var arguments: [Value]
}

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
    var subscriptions: [Subscription] = []
    var views: [String: ViewQuery] = [:]
    /// The objects the client holds, as far as the server knows: primary key texts per class.
    var inView: [String: Set<String>] = [:]
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
    /// The bootstrap being read and sent off the queue, if any (SyncApp+Bootstrap.swift): until
    /// it ends the session gets no changesets, and its messages wait in `backlog`.
    var bootstrap: BootstrapJob?
    /// Whether to bootstrap again once this one ends (the rules changed while it ran).
    var bootstrapAgain = false
    /// The session's messages that came during its bootstrap, handled once it ends, in order;
    /// each one's bytes stay counted in its connection's and the app's pending bytes till then.
    var backlog: [(message: Fields, bytes: Int)] = []

    init(number: Int64, connection: SyncConnection) {
        self.number = number
        self.connection = connection
    }
}

/// One app's sync engine: its store, history and sessions. Everything runs on `queue`, one
/// message at a time, so integration is serial and sessions need no locks.
package final class SyncApp: @unchecked Sendable {
    /// Changed only on the queue (the admin API replaces the rules).
    var configuration: AppConfiguration
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
    /// The last sync errors sent, for the admin console (SyncApp+Admin.swift).
    var recentErrors = RecentSyncErrors()
    /// Session numbers whose bind failed, per connection: messages the client sent for them
    /// before it learned of the failure (its query, its uploads) are dropped, not an error.
    private var failedBinds: [ObjectIdentifier: Set<Int64>] = [:]
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
    package convenience init(configuration: AppConfiguration, directory: String, log: Logger, metrics: Metrics) throws {
        try self.init(configuration: configuration, directory: directory, log: log, metrics: metrics, storage: LocalSyncStorage())
    }

    init(configuration: AppConfiguration, directory: String, log: Logger, metrics: Metrics, storage: SyncStorage) throws {
        self.configuration = configuration
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
        store = try Self.open(path: path, schema: configuration.schema)
        try ServerSyncTables.create(store)
        latestVersion = try storage.open(self)
    }

    static func open(path: String, schema: Schema?, version: UInt64? = nil) throws -> Store {
        if let schema {
            // Additive changes (development mode, or a config that gained classes) migrate by
            // themselves with a new schema version.
            do {
                return try Store(Configuration(path: path, schema: schema, schemaVersion: version ?? 0))
            } catch let e as AtollError where e.code == .schemaMismatch {
                let current = try Store(Configuration(path: path))
                let next = current.schemaVersion + 1
                current.close()
                return try Store(Configuration(path: path, schema: schema, schemaVersion: next))
            }
        }
        return try Store(Configuration(path: path))
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
                pendingBytes.subtract(s.backlog.reduce(0) { $0 + $1.bytes }, ordering: .relaxed)
                s.backlog = []
            }
            metrics.update { $0.sessions -= gone.count }
        }
    }

    /// Handles one message of a connection (on the queue). `bytes` is its size, counted in the
    /// connection's and the app's pending bytes until it is handled.
    func handle(_ message: Fields, from connection: SyncConnection, bytes: Int = 0) {
        let type = (try? message.string("type")) ?? ""
        let sessionNumber = try? message.int("session")
        if type != "bind", let n = sessionNumber, failedBinds[ObjectIdentifier(connection)]?.contains(n) == true { return }
        // A session whose bootstrap runs handles its messages after it, in order.
        if type != "bind", type != "ping", let n = sessionNumber, let s = sessions[ObjectIdentifier(connection)]?[n], s.bootstrap != nil {
            connection.pendingBytes.add(bytes, ordering: .relaxed)
            pendingBytes.add(bytes, ordering: .relaxed)
            s.backlog.append((message, bytes))
            return
        }
        do {
            switch type {
            case "ping":
                connection.send(.doc(["type": .string("pong"), "timestamp": message["timestamp"] ?? .null]))
            case "bind":
                guard connection.takeQuery() else { return refuseFlood(connection, session: sessionNumber, .queries) }
                try bind(message, connection)
            case "query":
                let s = try session(message, connection)
                guard connection.takeQuery() else { return refuseFlood(connection, session: s.number, .queries) }
                try query(message, s)
            case "upload":
                let s = try session(message, connection)
                // Refused, not integrated; the connection closes so that no later upload is
                // integrated over the gap (the client resends from its upload cursor).
                guard connection.takeUpload() else { return refuseFlood(connection, session: s.number, .uploads) }
                try upload(message, s)
            case "mark":
                let s = try session(message, connection)
                // What the storage has now, also from other instances, comes before the mark.
                try storage.catchUp(self)
                s.downloadCursor = latestVersion
                connection.send(.doc(["type": .string("mark"), "session": .int(s.number), "request": message["request"] ?? .null,
                                      "serverVersion": .int(Int64(latestVersion))]))
            case "unbind":
                let s = try session(message, connection)
                sessions[ObjectIdentifier(connection)]?[s.number] = nil
                metrics.update { $0.sessions -= 1 }
                connection.send(.doc(["type": .string("unbound"), "session": .int(s.number)]))
            default:
                throw SyncErrorMessage(.badMessage, "unknown message type '\(type)'")
            }
        } catch var error as SyncErrorMessage {
            if error.session == nil, error.code != .badMessage { error.session = sessionNumber }
            if type == "bind", let n = sessionNumber, error.code != .badMessage,
               sessions[ObjectIdentifier(connection)]?[n] == nil {
                failedBinds[ObjectIdentifier(connection), default: []].insert(n)
            }
            fail(connection, error)
        } catch let error as ProtocolError {
            fail(connection, SyncErrorMessage(.badMessage, error.message))
        } catch {
            log.error("sync message failed", ["app": configuration.id, "type": type, "error": "\(error)"])
            fail(connection, SyncErrorMessage(.internalServerError, "the server failed: \(error)", session: sessionNumber))
        }
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
    private func refuse(_ connection: SyncConnection, _ error: SyncErrorMessage, reason: String) {
        guard !connection.throttled else { return }
        metrics.error(error.code.rawValue)
        recentErrors.add(error, user: connection.user.id)
        log.warning("refusing a sync connection", ["app": configuration.id, "user": connection.user.id, "reason": reason,
                                                   "message": error.message])
        connection.refuse(error, reason: reason)
    }

    private func fail(_ connection: SyncConnection, _ error: SyncErrorMessage) {
        metrics.error(error.code.rawValue)
        recentErrors.add(error, user: connection.user.id)
        log.info("sync error", ["app": configuration.id, "user": connection.user.id, "code": error.code.rawValue, "message": error.message])
        connection.send(error.wireValue)
        if error.code == .badMessage { connection.close(code: 1002, reason: "bad message") }
    }

    private func session(_ message: Fields, _ connection: SyncConnection) throws -> Session {
        let n = try message.int("session")
        guard let s = sessions[ObjectIdentifier(connection)]?[n] else {
            throw SyncErrorMessage(.badMessage, "no session \(n) is bound on this connection")
        }
        return s
    }

    // MARK: - Bind

    private func bind(_ m: Fields, _ connection: SyncConnection) throws {
        let number = try m.int("session")
        guard sessions[ObjectIdentifier(connection)]?[number] == nil else {
            throw SyncErrorMessage(.badMessage, "session \(number) is bound already")
        }
        failedBinds[ObjectIdentifier(connection)]?.remove(number)
        let s = Session(number: number, connection: connection)
        let mode = try m.optionalString("mode") ?? "flexible"
        switch mode {
        case "flexible":
            if case .partition = configuration.mode {
                throw SyncErrorMessage(.badSyncPartitionValue, "this app uses partition-based sync; open the realm with a partition value", session: number)
            }
        case "partition":
            guard let key = configuration.partitionKey else {
                throw SyncErrorMessage(.badSyncPartitionValue, "this app has no partition key; use flexible sync", session: number)
            }
            guard let value = m.document["partition"] else {
                throw SyncErrorMessage(.badSyncPartitionValue, "partition sync needs a \"partition\" value", session: number)
            }
            s.partitionMode = true
            s.partition = value
            _ = key
        default:
            throw SyncErrorMessage(.badMessage, "bind: mode must be \"flexible\" or \"partition\"")
        }
        if case .list = m["schema"] {
            try adoptSchema(m["schema"] ?? .null, session: number)
        }
        // The client file.
        if case .object(let f)? = m["file"] {
            guard case .int(let ident)? = f["ident"], case .int(let salt)? = f["salt"] else {
                throw SyncErrorMessage(.badMessage, "bind: \"file\" must be {\"ident\", \"salt\"}")
            }
            guard let known = try storage.file(ident), known.salt == salt else {
                throw SyncErrorMessage(.badClientFile, "this server does not know the client file \(ident) (was the server's data reset?)", session: number)
            }
            guard known.user == connection.user.id else {
                throw SyncErrorMessage(.badClientFile, "the client file \(ident) belongs to another user", session: number)
            }
            s.file = ident
            s.uploadCursor = known.uploadCursor
            // A client that says what it was told of has the changesets after it sent again.
            s.clientAcked = min(known.uploadCursor, try m.uint("uploadCursor", default: known.uploadCursor))
        } else {
            // A new file has downloaded nothing: it cannot resume (a resume from a made-up cursor
            // would be told about objects it never held).
            guard try m.uint("downloadCursor", default: 0) == 0 else {
                throw SyncErrorMessage(.badMessage, "bind: a new client file (no \"file\") starts at downloadCursor 0", session: number)
            }
            let salt = Int64.random(in: 1...Int64.max)
            s.file = try storage.createFile(user: connection.user.id, salt: salt)
            connection.send(.doc(["type": .string("ident"), "session": .int(number),
                                  "file": .doc(["ident": .int(s.file), "salt": .int(salt)])]))
        }
        let cursor = try m.uint("downloadCursor", default: 0)
        // A client that comes from another instance may know versions this one has not applied yet.
        if cursor > latestVersion { try storage.catchUp(self) }
        guard cursor <= latestVersion else {
            throw SyncErrorMessage(.badServerVersion, "the client has server version \(cursor), newer than the server's \(latestVersion): the server was restored from a backup", session: number)
        }
        s.downloadCursor = cursor
        sessions[ObjectIdentifier(connection), default: [:]][number] = s
        metrics.update { $0.sessions += 1 }
        log.debug("bound", ["app": configuration.id, "user": connection.user.id, "session": "\(number)", "file": "\(s.file)"])
        // What the server has of the client's uploads: it re-sends what comes after.
        connection.send(.doc(["type": .string("uploadAck"), "session": .int(number), "clientVersion": .int(Int64(s.clientAcked))]))
        if s.partitionMode {
            s.subscriptions = try partitionSubscriptions(s.partition)
            s.queryVersion = 0
            try computeViews(s)
            if cursor == 0 { try startBootstrap(s, version: 0) } else { try resume(s, from: cursor) }
        }
    }

    /// Partition sync as flexible sync: one query per class that has the partition key.
    func partitionSubscriptions(_ value: Value) throws -> [Subscription] {
        guard let key = configuration.partitionKey else { return [] }
        return schema.classes.filter { !$0.isEmbedded && $0[property: key] != nil }.map {
            Subscription(name: "partition:\($0.name)", className: $0.name, query: "\(key) == $0", arguments: [value])
        }
    }

    /// Development mode: classes and properties the client has and the server lacks are added.
    private func adoptSchema(_ json: Value, session: Int64) throws {
        // Classes other instances added come first.
        try storage.catchUp(self)
        let ref = EJSON.make(json)
        defer { json_decref(ref) }
        let client: Schema
        do { client = try SchemaJSON.schema(ref) } catch {
            throw SyncErrorMessage(.invalidSchemaChange, "the client's schema cannot be read: \(error)", session: session)
        }
        var merged = schema
        var changed = false
        // A property the rules name decides who reads and writes: the first client to add it
        // fixes its type for everyone. As a collection, the rule's comparison means something
        // else (any element), and every client with the single value is refused: not allowed.
        var ruleFields = [String: Set<String>]()
        func checkRuleField(_ cls: String, _ p: Property) throws {
            guard p.collection != .single else { return }
            let named = ruleFields[cls] ?? configuration.rules.fieldsNamed(by: cls)
            ruleFields[cls] = named
            guard named.contains(p.name) else { return }
            throw SyncErrorMessage(.invalidSchemaChange, "'\(cls).\(p.name)' is named by the app's rules: development mode adds it only as a "
                                   + "single value, not a \(p.collection.rawValue) (declare it in the app's schema)", session: session)
        }
        for cls in client.classes {
            guard let index = merged.classes.firstIndex(where: { $0.name == cls.name }) else {
                guard configuration.developmentMode else {
                    throw SyncErrorMessage(.invalidSchemaChange, "class '\(cls.name)' is not in the server's schema (development mode is off)", session: session)
                }
                for p in cls.properties { try checkRuleField(cls.name, p) }
                merged.classes.append(cls)
                changed = true
                continue
            }
            let mine = merged.classes[index]
            if mine.primaryKey != cls.primaryKey || mine.isEmbedded != cls.isEmbedded {
                throw SyncErrorMessage(.invalidSchemaChange, "class '\(cls.name)' differs from the server's (primary key or embedded)", session: session)
            }
            for p in cls.properties {
                if let existing = mine[property: p.name] {
                    if existing.type != p.type || existing.collection != p.collection || existing.objectType != p.objectType {
                        throw SyncErrorMessage(.invalidSchemaChange, "'\(cls.name).\(p.name)' is \(existing.typeName) on the server, \(p.typeName) on the client", session: session)
                    }
                } else {
                    guard configuration.developmentMode else {
                        throw SyncErrorMessage(.invalidSchemaChange, "'\(cls.name).\(p.name)' is not in the server's schema (development mode is off)", session: session)
                    }
                    try checkRuleField(cls.name, p)
                    merged.classes[index].properties.append(p)
                    changed = true
                }
            }
        }
        guard changed else { return }
        do { try merged.validate() } catch {
            throw SyncErrorMessage(.invalidSchemaChange, "the merged schema is invalid: \(error)", session: session)
        }
        try replaceSchema(merged)
        try storage.saveSchema(self, merged)
        log.info("schema changed (development mode)", ["app": configuration.id, "classes": merged.classes.map(\.name).joined(separator: ",")])
    }

    /// Reopens the store with a grown schema; views of bound sessions are recomputed with it.
    private func replaceSchema(_ merged: Schema) throws {
        let next = store.schemaVersion + 1
        store.close()
        store = try Self.open(path: path, schema: merged, version: next)
        for s in sessions.values.flatMap(\.values) { try? computeViews(s) }
    }

    /// Takes the classes and properties of a schema kept in a shared storage (another instance
    /// adopted them) that this store lacks.
    func adoptStoredSchema(_ stored: Schema) throws {
        var merged = schema
        var changed = false
        for cls in stored.classes {
            guard let index = merged.classes.firstIndex(where: { $0.name == cls.name }) else {
                merged.classes.append(cls)
                changed = true
                continue
            }
            for p in cls.properties where merged.classes[index][property: p.name] == nil {
                merged.classes[index].properties.append(p)
                changed = true
            }
        }
        guard changed else { return }
        try merged.validate()
        try replaceSchema(merged)
        log.info("schema changed (another instance)", ["app": configuration.id, "classes": merged.classes.map(\.name).joined(separator: ",")])
    }

    /// Writes what a shared storage has beyond this store's latest version into the store, then
    /// sends each of those versions to the sessions as if it had been integrated here.
    /// `nextObjects` gives the objects in batches (nil after the last), each written in a
    /// transaction of its own; the links and `record` (the storage notes what the store now
    /// holds) come in the last.
    func applyStored(_ nextObjects: () throws -> [CachedObject]?, entries: [HistoryEntry], latest: UInt64,
                     record: () throws -> Void) throws {
        var links = CachedObject.Links()
        while let batch = try nextObjects() {
            try store.write { links += try CachedObject.applyDocuments(batch, to: store) }
        }
        try store.write {
            try CachedObject.applyLinks(links, to: store)
            try record()
        }
        for e in entries {
            latestVersion = e.version
            let effects = try EncodedEffects(changeset: e.changeset)
            try fanOut(effects, version: e.version, clock: e.clock, origin: nil, originFile: e.file)
        }
        latestVersion = latest
    }

    /// Catches up with a shared storage (the listener's call, on the queue); a failure is logged
    /// and the next call tries again.
    func catchUpQuietly() {
        guard !isClosed else { return }
        do { try storage.catchUp(self) } catch {
            log.warning("catching up with the shared storage failed", ["app": configuration.id, "error": "\(error)"])
        }
    }

    // MARK: - Subscriptions

    private func query(_ m: Fields, _ s: Session) throws {
        guard !s.partitionMode else {
            throw SyncErrorMessage(.badMessage, "a partition-sync session has no subscriptions to send")
        }
        let version = try m.int("version")
        var subscriptions = [Subscription]()
        var error: String?
        let limits = configuration.queryLimits
        let access = readAccess(s.user)
        let queries = try m.list("queries")
        if queries.count > limits.maxSubscriptions {
            error = "\(queries.count) subscriptions in one set: at most \(limits.maxSubscriptions)"
        }
        for q in queries {
            let f = try Fields(q, "query")
            var text = try f.optionalString("query") ?? "TRUEPREDICATE"
            // An empty query is every object, as in a store query.
            if text.allSatisfy(\.isWhitespace) { text = "TRUEPREDICATE" }
            let sub = Subscription(name: try f.optionalString("name") ?? "", className: try f.string("class"),
                                   query: text, arguments: try f.list("args"))
            if error == nil { error = check(sub, access) }
            subscriptions.append(sub)
        }
        if error == nil, let until = cooldowns[s.user.id], until > DispatchTime.now().uptimeNanoseconds {
            let seconds = Int((until - DispatchTime.now().uptimeNanoseconds) / 1_000_000_000) + 1
            error = "a subscription of this user ran past its time budget (\(limits.querySeconds) s): no new subscriptions for \(seconds) s"
        }
        let owed = bootstrapOwed(s.user.id)
        if error == nil, owed > limits.bootstrapSecondsPerMinute {
            let seconds = Int((owed - limits.bootstrapSecondsPerMinute) * 60 / limits.bootstrapSecondsPerMinute) + 1
            error = "this user's subscriptions took more than \(limits.bootstrapSecondsPerMinute) s of the server in a minute: no new subscriptions for \(seconds) s"
        }
        if let error {
            refuseQuery(s, version: version, error)
            return
        }
        // The version this session has already: nothing to do (a client that sends it twice does
        // not get, nor cost, a second bootstrap).
        if version == s.queryVersion, subscriptions == s.subscriptions, s.ready {
            s.connection.send(.doc(["type": .string("queryComplete"), "session": .int(s.number), "version": .int(version),
                                    "serverVersion": .int(Int64(s.downloadCursor))]))
            return
        }
        let complete = try m.bool("complete", default: false)
        let previous = QueryState(subscriptions: s.subscriptions, version: s.queryVersion, views: s.views, ready: s.ready)
        s.subscriptions = subscriptions
        s.queryVersion = version
        // What this takes of the queue, and what its bootstrap takes of a worker, is charged to
        // the user (users who owe nothing forgotten).
        if bootstrapTime.count + cooldowns.count > 10_000 {
            let now = DispatchTime.now().uptimeNanoseconds
            bootstrapTime = bootstrapTime.filter { bootstrapOwed($0.key) > 0 }
            cooldowns = cooldowns.filter { $0.value > now }
        }
        let started = DispatchTime.now().uptimeNanoseconds
        defer { chargeBootstrap(s.user.id, seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9) }
        // The views whole (many subscriptions OR-ed are deeper than each): a set that fails here
        // is refused and the session keeps the one it had, with nothing sent. (Counting them,
        // where a costly one fails, is the bootstrap's first step, off the queue.)
        do {
            try computeViews(s)
            for (cls, view) in s.views { _ = try view.results(store, cls) }
        } catch let failure as AtollError where [.queryInvalid, .querySyntax, .timeout, .typeMismatch, .noSuchProperty].contains(failure.code) {
            (s.subscriptions, s.queryVersion, s.views) = (previous.subscriptions, previous.version, previous.views)
            if failure.code == .timeout { cooldowns[s.user.id] = DispatchTime.now().uptimeNanoseconds + UInt64(limits.cooldownSeconds * 1e9) }
            refuseQuery(s, version: version, "the subscriptions as a whole: \(failure.message)")
            return
        }
        // From here on the client is being sent the new view: a failure ends the session. A
        // client that comes back with the set it had complete catches up instead.
        do {
            if complete && s.downloadCursor > 0 && previous.version < 0 {
                try resume(s, from: s.downloadCursor)
            } else {
                try startBootstrap(s, version: version, previous: previous)
            }
        } catch {
            drop(s, because: error, while: "sending it its subscriptions' objects")
        }
    }

    /// Tells the session its subscription set `version` is refused, and why.
    func refuseQuery(_ s: Session, version: Int64, _ message: String) {
        metrics.error(SyncErrorCode.invalidFlexibleSyncSubscriptions.rawValue)
        recentErrors.add(SyncErrorMessage(.invalidFlexibleSyncSubscriptions, message, session: s.number), user: s.user.id)
        s.connection.send(.doc(["type": .string("queryError"), "session": .int(s.number), "version": .int(version), "message": .string(message)]))
    }

    /// Why the server will not serve a subscription, or nil: what a store query refuses, and
    /// what the app's query limits and queryable fields do not allow. Key paths see what
    /// `access` lets the user read.
    func check(_ sub: Subscription, _ access: ReadAccess) -> String? {
        guard let cls = schema.classes.first(where: { $0.name == sub.className }) else {
            return "subscription '\(sub.name)': no class named '\(sub.className)'"
        }
        if cls.isEmbedded { return "subscription '\(sub.name)': '\(sub.className)' is embedded; subscribe to its owner" }
        let limits = configuration.queryLimits
        let bytes = sub.query.utf8.count + Wire.encode(.list(sub.arguments)).utf8.count
        if bytes > limits.maxQueryBytes {
            return "subscription '\(sub.name)': its query and arguments take \(bytes) bytes, more than \(limits.maxQueryBytes)"
        }
        do {
            let results = try store.objects(sub.className, where: sub.query, sub.arguments, readableBy: access, maxLinkDepth: limits.maxLinkDepth)
            guard results.isPlainFilter else {
                return "subscription '\(sub.name)': SORT, DISTINCT and LIMIT are not allowed in subscriptions"
            }
        } catch {
            return "subscription '\(sub.name)': \(error)"
        }
        if let global = configuration.queryableFields {
            let allowed = global.union(configuration.classQueryableFields[sub.className] ?? [])
                .union([cls.primaryKey ?? "_id"])
                .union(configuration.partitionKey.map { [$0] } ?? [])
            for name in QueryText.fieldNames(in: sub.query) where !allowed.contains(name) {
                if cls[property: name] != nil {
                    return "subscription '\(sub.name)': '\(name)' is not a queryable field (queryable: \(allowed.sorted().joined(separator: ", ")))"
                }
            }
        }
        return nil
    }

    /// Builds the session's view query per class from its subscriptions and the read rules.
    func computeViews(_ s: Session) throws {
        var byClass = [String: [Subscription]]()
        for sub in s.subscriptions { byClass[sub.className, default: []].append(sub) }
        let access = readAccess(s.user)
        var views = [String: ViewQuery]()
        for (cls, subs) in byClass {
            if access.rule(cls) == .nothing { continue }
            var text = ""
            var arguments = [Value]()
            // A subscription to the whole class makes the others moot; the view is then plain
            // TRUEPREDICATE, which `matching` answers without a query.
            let whole = subs.contains { $0.query.trimmingCharacters(in: .whitespacesAndNewlines).uppercased() == "TRUEPREDICATE" }
            var parts = [String]()
            for sub in subs where !whole {
                parts.append("(\(QueryText.shiftArguments(sub.query, by: arguments.count)))")
                arguments += sub.arguments
            }
            // OR-ed as a balanced tree: a chain of a hundred ORs nests a hundred deep, past what
            // SQLite's parser takes.
            func or(_ parts: ArraySlice<String>) -> String {
                guard parts.count > 1 else { return parts.first ?? "FALSEPREDICATE" }
                let mid = parts.startIndex + parts.count / 2
                return "(" + or(parts[..<mid]) + " OR " + or(parts[mid...]) + ")"
            }
            text = whole ? "TRUEPREDICATE" : or(parts[...])
            views[cls] = ViewQuery(cls, text: text, arguments: arguments, access: access, limits: configuration.queryLimits)
        }
        s.views = views
    }

    /// What `user` may read of every class: its role's read rule, bound to it (no role: nothing).
    func readAccess(_ user: RuleUser) -> ReadAccess {
        var rules = [String: ReadAccess.Rule]()
        for cls in schema.classes where !cls.isEmbedded {
            guard let role = configuration.rules.role(cls.name, for: user) else {
                rules[cls.name] = .nothing
                continue
            }
            switch role.read.kind {
            case .always: rules[cls.name] = .everything
            case .never: rules[cls.name] = .nothing
            case .query:
                if let (text, arguments) = role.read.bound(to: user) { rules[cls.name] = .matching(text, arguments) } else { rules[cls.name] = .nothing }
            }
        }
        return ReadAccess(rules: rules)
    }

    /// The primary key texts of the objects of a class that a view holds (among `keys`, if given).
    func matching(_ cls: String, _ view: ViewQuery, among keys: [Value]? = nil) throws -> Set<String> {
        guard let pkName = schema.classes.first(where: { $0.name == cls })?.primaryKey else { return [] }
        var out = Set<String>()
        if let keys {
            if view.isWholeClass { return Set(try store.primaryKeys(cls, among: keys).map(keyText)) }
            for chunk in stride(from: 0, to: keys.count, by: 500) {
                let part = Array(keys[chunk..<min(chunk + 500, keys.count)])
                for pk in try view.results(store, cls, and: "\(pkName) IN $\(view.arguments.count)", [.list(part)]).primaryKeyValues() {
                    out.insert(keyText(pk))
                }
            }
        } else {
            for pk in try view.results(store, cls).primaryKeyValues() { out.insert(keyText(pk)) }
        }
        return out
    }

    // MARK: - Upload

    private func upload(_ m: Fields, _ s: Session) throws {
        var acked = s.uploadCursor
        let decoded = m.decodedChangesets
        var previousVersion: UInt64?
        for (n, item) in try m.list("changesets").enumerated() {
            var cs = try decoded?[n] ?? SyncChangeset(wire: item)
            // One message's changesets go in increasing client versions: one that comes after a
            // newer one would be taken for a changeset integrated before and skipped without a
            // word, so it is refused. (Across messages a client may send again what it sent:
            // one that was killed, or lost an acknowledgement, does.)
            if let previous = previousVersion, cs.clientVersion <= previous {
                s.partial = nil
                throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion) is out of order: after \(previous) in the same upload, "
                                       + "changesets go in increasing client versions")
            }
            previousVersion = cs.clientVersion
            guard cs.clientVersion > s.clientAcked else { continue }
            if cs.clientVersion <= s.uploadCursor {
                // Integrated before its acknowledgement was lost, and with it what the client
                // was to be told of it: the state of its objects now tells it all the same.
                if case .object(let d) = item, d["more"] == .bool(true) { continue }
                try tellOwnState(s, of: cs)
                continue
            }
            try checkClock(cs, s)
            if let refusal = clockAhead(cs, s) {
                s.partial = nil
                return refuse(s.connection, refusal, reason: "clock ahead")
            }
            try checkElements(cs)
            // A large changeset arrives in parts: it is integrated once the last one is in.
            if var partial = s.partial {
                // Taken out of the session first, so that the parts grow in place.
                s.partial = nil
                guard partial.clientVersion == cs.clientVersion else {
                    throw SyncErrorMessage(.badMessage, "changeset \(partial.clientVersion) was not finished before \(cs.clientVersion)")
                }
                guard partial.clock == cs.clock else {
                    throw SyncErrorMessage(.badMessage, "the parts of changeset \(cs.clientVersion) carry different clocks")
                }
                partial.instructions.append(contentsOf: cs.instructions)
                cs.instructions = partial.instructions
            }
            if case .object(let d) = item, d["more"] == .bool(true) {
                guard cs.instructions.count <= 5_000_000 else {
                    s.partial = nil
                    throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion) is too large (over 5,000,000 instructions)")
                }
                s.partial = cs
                continue
            }
            s.partial = nil
            let started = DispatchTime.now().uptimeNanoseconds
            var result = Integration()
            var version = latestVersion
            var effects = EncodedEffects()
            var integratedBefore = false
            try storage.write(self, file: s.file) { cursor in
                // Another instance may have integrated it (the client's connection broke before
                // the acknowledgement came).
                guard cs.clientVersion > cursor else {
                    integratedBefore = true
                    return SyncCommit()
                }
                version = latestVersion
                // A large changeset's text, encoded on another core during integration as though
                // every instruction took effect, as they mostly do.
                let instructions = cs.instructions, clock = cs.clock, next = latestVersion + 1
                let speculative = instructions.count < instructionsWorthAnotherCore ? nil
                    : Eventually { EncodedEffects(instructions, serverVersion: next, clock: clock, onAllCores: false) }
                result = try Integrator(store: store, mayWrite: { [self] cls, keys in try self.mayWrite(s, cls, keys) },
                                        mayWriteAll: { [self] cls in self.mayWriteAll(s, cls) }).integrate(cs)
                var commit = SyncCommit(uploadCursor: (s.file, cs.clientVersion))
                if !result.effects.isEmpty {
                    version = next
                    // The effects are then the instructions: their text was made on the other core.
                    if result.effectsAreTheInstructions, let encoded = speculative?.value() {
                        effects = encoded
                    } else {
                        effects = EncodedEffects(result.effects, serverVersion: version, clock: cs.clock)
                    }
                    commit.entry = HistoryEntry(version: version, file: s.file, clientVersion: cs.clientVersion, clock: cs.clock,
                                                user: s.user.id, changeset: effects.changesetText)
                }
                // Each object once (an object may both have effects and have changed without one,
                // and PostgreSQL's upsert refuses a row twice in one statement). The effects' order
                // names each object once already: most commits have nothing else.
                if result.changedWithoutEffects.isEmpty {
                    commit.touched = effects.order
                } else {
                    var seen = Set<ObjectID>()
                    commit.touched = (effects.order + result.changedWithoutEffects).filter { seen.insert($0).inserted }
                }
                return commit
            }
            s.uploadCursor = cs.clientVersion
            acked = cs.clientVersion
            if integratedBefore {
                try tellOwnState(s, of: cs)
                continue
            }
            latestVersion = version
            metrics.integrated(seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9, instructions: cs.instructions.count)
            // What the uploader is told of its own changeset (refused writes, corrections) goes
            // in one message with the changeset's acknowledgement, so that it merges it with what
            // it has not uploaded yet, only, and cannot get the one without the other.
            let mail = OwnMail()
            if !result.rejected.isEmpty {
                metrics.update { $0.rejectedWrites += result.rejected.count }
                try compensate(s, result.rejected, clientVersion: cs.clientVersion, into: mail)
            }
            if !result.effects.isEmpty || !result.corrections.isEmpty {
                try fanOut(effects, version: version, clock: cs.clock, origin: s, corrections: result.corrections, mail: mail)
            }
            if !mail.changesets.isEmpty { sendOwn(s, mail, acking: cs.clientVersion) }
        }
        s.clientAcked = max(s.clientAcked, acked)
        s.connection.send(.doc(["type": .string("uploadAck"), "session": .int(s.number), "clientVersion": .int(Int64(acked))]))
    }

    /// What the uploader is told of its own changeset, gathered to go with its acknowledgement:
    /// changesets of already-encoded instructions, each with its clock.
    final class OwnMail {
        var changesets: [(clock: Clock, texts: [String])] = []
        func add(_ clock: Clock, _ texts: [String]) { if !texts.isEmpty { changesets.append((clock, texts)) } }
    }

    /// Sends the uploader what it is told of its changeset `clientVersion`, with the changeset's
    /// acknowledgement (`uploadAck` in the download), at the latest version.
    private func sendOwn(_ s: Session, _ mail: OwnMail, acking clientVersion: UInt64) {
        // A session that has not had its view yet gets it whole later: its cursor stays.
        let version = s.ready ? latestVersion : s.downloadCursor
        var text = "{\"type\":\"download\",\"session\":\(s.number),\"serverVersion\":\(version),\"uploadAck\":\(clientVersion),\"changesets\":["
        text += mail.changesets.map { "{\"serverVersion\":\(version),\"clock\":" + Wire.encode($0.clock.value) + ",\"instructions\":[" + $0.texts.joined(separator: ",") + "]}" }
            .joined(separator: ",")
        text += "]}"
        s.connection.send(text: text)
        metrics.update { c in
            c.downloads += 1
            c.downloadBytes += text.utf8.count
        }
        s.clientAcked = max(s.clientAcked, clientVersion)
        s.downloadCursor = max(s.downloadCursor, version)
    }

    /// A changeset the client sent again that was integrated already: the state now of every
    /// object it names, with its acknowledgement (what the client was told then is lost).
    private func tellOwnState(_ s: Session, of cs: SyncChangeset) throws {
        let mail = OwnMail()
        try fanOut(EncodedEffects(), version: latestVersion, clock: .zero, origin: s, corrections: cs.instructions.objectIDs, mail: mail)
        sendOwn(s, mail, acking: cs.clientVersion)
    }

    /// The refusal of a changeset whose clock is further ahead of the server's wall clock than
    /// `limits.maxClockAheadMilliseconds`; nil when it is not (or there is no limit).
    private func clockAhead(_ cs: SyncChangeset, _ s: Session) -> SyncErrorMessage? {
        let limit = limits.maxClockAheadMilliseconds
        guard limit > 0 else { return nil }
        let now = self.now()
        let (bound, overflow) = now.addingReportingOverflow(limit)
        guard !overflow, cs.clock.milliseconds > bound else { return nil }
        let ahead = cs.clock.milliseconds / 1000 - now / 1000
        // Whole seconds until the clock is near enough (the difference fits: both are positive).
        let wait = (cs.clock.milliseconds - bound + 999) / 1000
        return SyncErrorMessage(.clockAhead, "changeset \(cs.clientVersion) has a clock \(ahead) s ahead of the server's (at most \(limit / 1000) s): "
                                + "check the device's clock; the upload is tried again after \(wait) s",
                                session: s.number, retryAfter: wait)
    }

    /// Refuses (`badMessage`) a clock that is not a reading of the client file's own clock: a
    /// negative time or counter, a node that is not positive (a client's node is a random
    /// positive number, docs/protocol.md), a node other than the session's first changeset's, or
    /// a node another user's device used first. A clock borrowed from another device would tie
    /// with that device's writes and name list elements alike.
    private func checkClock(_ cs: SyncChangeset, _ s: Session) throws {
        let c = cs.clock
        guard c.milliseconds >= 0, c.counter >= 0, c.node > 0 else {
            throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion): the clock \(c) is not a client's clock (negative, or node 0)")
        }
        if let node = s.node, node != c.node {
            throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion): the clock's node \(c.node) is not this client's (\(node))")
        }
        if s.node == nil {
            // A node is the user's whose device used it first: another user's clocks cannot
            // borrow it (to tie with that device's writes), whatever the session or instance.
            let owner = try storage.claimNode(c.node, user: s.user.id)
            guard owner == s.user.id else {
                throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion): the clock's node \(c.node) is another user's device's")
            }
        }
        s.node = c.node
    }

    /// Refuses (`badMessage`) list element identities newer than their changeset: an insert names
    /// its element by its own transaction's clock, and a clear marks a point it has seen. A
    /// later one would sort before every real insert, or clear inserts not yet made.
    private func checkElements(_ cs: SyncChangeset) throws {
        for ins in cs.instructions where ins.op == .listInsert || ins.op == .listClear {
            if let e = ins.element, e.clock > cs.clock {
                throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion): a \(ins.op.rawValue) of '\(ins.className)' names element \(e), "
                                       + "newer than the changeset's clock \(cs.clock)")
            }
        }
    }

    /// Whether the session's user may write any object of `cls`, whatever its state: the role's
    /// write rule always allows, and the session's view is the whole class.
    func mayWriteAll(_ s: Session, _ cls: String) -> Bool {
        guard let role = configuration.rules.role(cls, for: s.user), case .always = role.write.kind else { return false }
        return s.views[cls]?.isWholeClass == true
    }

    /// Which of a class's objects (as they are now in the store) the session's user may not
    /// write: primary key text → reason. The write rule and the session's view must both hold.
    func mayWrite(_ s: Session, _ cls: String, _ keys: [Value]) throws -> [String: String] {
        func all(_ reason: String) -> [String: String] {
            Dictionary(keys.map { (keyText($0), reason) }, uniquingKeysWith: { a, _ in a })
        }
        guard let role = configuration.rules.role(cls, for: s.user) else { return all("no role lets this user write '\(cls)'") }
        var allowed = Set(keys.map(keyText))
        var out = [String: String]()
        switch role.write.kind {
        case .never: return all("the role '\(role.name)' may not write '\(cls)'")
        case .always: break
        case .query(let text):
            let args = role.write.bound(to: s.user)?.arguments ?? []
            let passing = try matching(cls, ViewQuery(cls, text: text, arguments: args, access: nil), among: keys)
            for k in allowed where !passing.contains(k) { out[k] = "write not allowed by the role '\(role.name)' (\(role.write.source))" }
            allowed = allowed.intersection(passing)
        }
        guard let view = s.views[cls] else {
            for k in allowed { out[k] = "'\(cls)' is outside the session's subscriptions" }
            return out
        }
        // The keys are of objects in the store: a view of the whole class holds them all.
        if view.isWholeClass { return out }
        let visible = try matching(cls, view, among: keys.filter { allowed.contains(keyText($0)) })
        for k in allowed where !visible.contains(k) { out[k] = "the object is outside the session's subscriptions (or its read rule)" }
        return out
    }

    /// Tells the client which writes were refused, and puts the server's state of them in `mail`.
    private func compensate(_ s: Session, _ rejected: [CompensatingWrite], clientVersion: UInt64, into mail: OwnMail) throws {
        let error = SyncErrorMessage(.writeRejected, "\(rejected.count) write(s) refused: " + (rejected.first?.reason ?? ""),
                                     session: s.number, compensatingWrites: rejected, clientVersion: clientVersion)
        metrics.error(error.code.rawValue)
        recentErrors.add(error, user: s.user.id)
        s.connection.send(error.wireValue)
        var texts = [String]()
        var restored = [ObjectID]()
        for r in rejected {
            let key = keyText(r.primaryKey)
            if let view = s.views[r.className], let doc = try storedObject(r.className, r.primaryKey),
               try matching(r.className, view, among: [r.primaryKey]).contains(key) {
                let meta = try ObjectMetadata.load(store, className: r.className, key: key)
                texts.append(Wire.encode(meta.upsert(r.className, r.primaryKey, key, doc).wireValue))
                s.inView[r.className, default: []].insert(key)
                restored.append(ObjectID(r.className, r.primaryKey))
            } else {
                texts.append(Wire.encode(SyncInstruction(.evict, r.className, r.primaryKey).wireValue))
                s.inView[r.className]?.remove(key)
            }
        }
        // The refused writes may have deleted these objects on the device, and its links to them.
        let refused = Set(rejected.map { ObjectID($0.className, $0.primaryKey) })
        for h in try linkHolders(s, of: restored) where !refused.contains(h) {
            guard let doc = try store.object(h.className, primaryKey: h.primaryKey) else { continue }
            let key = keyText(h.primaryKey)
            texts.append(Wire.encode(try ObjectMetadata.load(store, className: h.className, key: key).upsert(h.className, h.primaryKey, key, doc).wireValue))
        }
        mail.add(.zero, texts)
    }

    /// The objects the session holds that link to any of `targets` (a link, or a list of links):
    /// those to send again when the targets come (back) to the device.
    func linkHolders(_ s: Session, of targets: [ObjectID]) throws -> [ObjectID] {
        var out = [ObjectID]()
        var seen = Set(targets)
        for (cls, keys) in targets.keysByClass {
            guard let pkName = schema.classes.first(where: { $0.name == cls })?.primaryKey else { continue }
            for h in schema.classes where !h.isEmbedded && h.primaryKey != nil && s.views[h.name] != nil {
                let held = s.inView[h.name] ?? []
                guard !held.isEmpty else { continue }
                for p in h.properties where p.type == .object && p.objectType == cls && (p.collection == .single || p.isList) {
                    let path = "\(p.name).\(pkName)"
                    let query = p.collection == .single ? "\(path) IN $0" : "ANY \(path) IN $0"
                    for key in try store.objects(h.name, where: query, [.list(keys)]).primaryKeyValues() where held.contains(keyText(key)) {
                        let id = ObjectID(h.name, key)
                        if seen.insert(id).inserted { out.append(id) }
                    }
                }
            }
        }
        return out
    }

    /// The object a refused write named, as stored; nil when there is none, also when the key
    /// cannot name one (of the wrong type for the class: the client gets an evict for it).
    private func storedObject(_ cls: String, _ key: Value) throws -> Document? {
        do {
            return try store.object(cls, primaryKey: key)
        } catch let error as AtollError where error.code == .typeMismatch || error.code == .invalidArgument {
            return nil
        }
    }

    /// Sends each ready session what one integrated changeset changed in its view.
    /// `origin` is the uploading session (nil for an edit made in the admin console);
    /// `originFile` names the uploading client file when it uploaded through another instance.
    /// The origin gets what it does not know of its own changeset: the objects in `corrections`
    /// (their state now), and objects that entered its view without its creating them.
    func fanOut(_ effects: EncodedEffects, version: UInt64, clock: Clock, origin: Session?, originFile: Int64? = nil,
                corrections: [ObjectID] = [], mail: OwnMail? = nil) throws {
        let order = effects.order
        var keysByClass = [String: [Value]]()
        for id in order { keysByClass[id.className, default: []].append(id.primaryKey) }
        // Which touched objects exist now, per class.
        var live = [String: Set<String>]()
        for (cls, keys) in keysByClass {
            live[cls] = try matching(cls, ViewQuery(cls, text: "TRUEPREDICATE", arguments: [], access: nil), among: keys)
        }
        let keys = order.map { keyText($0.primaryKey) }
        let correct = Set(corrections)
        // The objects the effects name, made once and only when needed (a large changeset's are many).
        var namedSet: Set<ObjectID>?
        func named() -> Set<ObjectID> {
            if let namedSet { return namedSet }
            let made = Set(order)
            namedSet = made
            return made
        }
        // Sessions with the same view share one query.
        var cache = [String: [ViewQuery: Set<String>]]()
        var metas = [String: ObjectMetadata]()
        var objectTexts = [Int: [String]]()
        func upsertText(_ cls: String, _ id: ObjectID, _ key: String) throws -> String? {
            guard let doc = try store.object(cls, primaryKey: id.primaryKey) else { return nil }
            // Loaded once for the class's objects in the effects; an object corrected without
            // an effect of its own is loaded alone.
            let meta: ObjectMetadata
            if let known = metas[cls], known.created[key] != nil {
                meta = known
            } else if metas[cls] == nil, keysByClass[cls]?.contains(id.primaryKey) == true {
                meta = try ObjectMetadata.load(store, className: cls, keys: keysByClass[cls] ?? [])
                metas[cls] = meta
            } else {
                meta = try ObjectMetadata.load(store, className: cls, key: key)
            }
            return Wire.encode(meta.upsert(cls, id.primaryKey, key, doc).wireValue)
        }
        // One session's failure (its view's query, its socket) is its own: the others get the
        // changeset all the same, and the uploader is not told of an error for a write that was kept.
        func deliver(_ s: Session) throws {
            let isOrigin = s === origin || (originFile != nil && s.file == originFile)
            // What the session gets: objects' instructions as integrated, or other texts.
            var out = [Piece]()
            var whole = 0
            // The origin's objects that are gone, each told at its erase's clock.
            var gone = [ObjectID]()
            // Objects the session is sent whole that it may not have had: what it holds that
            // links to them comes too (its links to them read as none while they were missing).
            var entered = [ObjectID]()
            // The session's view of a class, which touched objects of the class exist, which it
            // holds and which it may see (all that exist, for a view of the whole class): looked
            // up once for each run of a class's objects, the held objects taken out of the
            // session while the run lasts.
            var runClass: String?
            var inView = false
            var existing = Set<String>(), visible = Set<String>()
            var wholeClass = false
            var held = Set<String>()
            func endRun() {
                if let runClass, inView, !held.isEmpty { s.inView[runClass] = held }
                held = []
            }
            do {
                defer { endRun() }
                for (index, id) in order.enumerated() {
                    let cls = id.className
                    if runClass != cls {
                        endRun()
                        runClass = cls
                        inView = false
                        guard let view = s.views[cls] else { continue }
                        existing = live[cls] ?? []
                        wholeClass = view.isWholeClass
                        if wholeClass {
                            visible = []
                        } else if let known = cache[cls]?[view] { visible = known } else {
                            visible = try matching(cls, view, among: keysByClass[cls] ?? [])
                            cache[cls, default: [:]][view] = visible
                        }
                        held = s.inView.removeValue(forKey: cls) ?? []
                        held.reserveCapacity(held.count + (keysByClass[cls]?.count ?? 0))
                        inView = true
                    }
                    guard inView else { continue }
                    let key = keys[index]
                    if !existing.contains(key) {
                        let wasHeld = held.remove(key) != nil
                        if isOrigin {
                            if correct.contains(id) { gone.append(id) }
                        } else if wasHeld {
                            out.append(.text(Wire.encode(SyncInstruction(.erase, cls, id.primaryKey).wireValue)))
                        }
                        continue
                    }
                    if wholeClass || visible.contains(key) {
                        if isOrigin {
                            // Its own new objects it has; anything else it may lack, or hold
                            // otherwise than the server.
                            if correct.contains(id) || (!held.contains(key) && !effects.createdObject(at: index)),
                               let text = try upsertText(cls, id, key) {
                                out.append(.text(text))
                                entered.append(id)
                            }
                            held.insert(key)
                        } else if held.contains(key) {
                            out.append(.integrated(index))
                            whole += 1
                        } else if effects.createdObject(at: index) {
                            // Created by this changeset (a create is an effect only when it made the
                            // object): its instructions are the whole object.
                            out.append(.integrated(index))
                            whole += 1
                            held.insert(key)
                        } else if let text = try upsertText(cls, id, key) {
                            out.append(.text(text))
                            held.insert(key)
                            entered.append(id)
                        }
                    } else if held.remove(key) != nil || (isOrigin && correct.contains(id)) {
                        out.append(.text(Wire.encode(SyncInstruction(.evict, cls, id.primaryKey).wireValue)))
                    }
                }
            }
            if isOrigin, !corrections.isEmpty {
                // Corrected objects the effects do not name (none of the origin's instructions on
                // them took effect as written).
                let named = named()
                for id in corrections where !named.contains(id) {
                    let cls = id.className, key = keyText(id.primaryKey)
                    guard let view = s.views[cls] else { continue }
                    var held = s.inView[cls] ?? []
                    defer { s.inView[cls] = held }
                    guard try store.object(cls, primaryKey: id.primaryKey) != nil else {
                        held.remove(key)
                        gone.append(id)
                        continue
                    }
                    if try view.isWholeClass || matching(cls, view, among: [id.primaryKey]).contains(key) {
                        if let text = try upsertText(cls, id, key) {
                            out.append(.text(text))
                            entered.append(id)
                        }
                        held.insert(key)
                    } else {
                        held.remove(key)
                        out.append(.text(Wire.encode(SyncInstruction(.evict, cls, id.primaryKey).wireValue)))
                    }
                }
            }
            if isOrigin { try tellGone(s, gone, version: version, mail: mail) }
            if !entered.isEmpty {
                // Named in the changeset or not: its instructions there do not bring back its
                // links to what entered.
                for h in try linkHolders(s, of: entered) {
                    if let text = try upsertText(h.className, h, keyText(h.primaryKey)) { out.append(.text(text)) }
                }
            }
            guard !out.isEmpty else { return }
            if isOrigin, let mail {
                // Goes with the changeset's acknowledgement.
                mail.add(clock, out.flatMap { piece -> [String] in
                    switch piece {
                    case .integrated(let index): return effects.texts(ofObjectAt: index)
                    case .text(let t): return [t]
                    }
                })
                s.downloadCursor = version
                return
            }
            let everything = whole == order.count && !order.isEmpty
            if everything, effects.bytes <= maxDownloadBytes {
                // Everything, as integrated: the history's text.
                sendChangeset(s, serverVersion: version, effects.changesetText)
            } else {
                // Everything: the history's pieces; some: each object's own texts.
                let texts = everything ? effects.pieces : out.flatMap { piece -> [String] in
                    switch piece {
                    case .integrated(let index):
                        if let known = objectTexts[index] { return known }
                        let t = effects.texts(ofObjectAt: index)
                        objectTexts[index] = t
                        return t
                    case .text(let t): return [t]
                    }
                }
                // In messages of at most maxDownloadBytes; only the last moves the client's
                // cursor, so that a cut in between sends the whole again.
                var batch = [String]()
                var size = 0
                for t in texts {
                    if size + t.utf8.count > maxDownloadBytes, !batch.isEmpty {
                        send(s, serverVersion: s.downloadCursor, clock: clock, instructions: batch)
                        batch = []
                        size = 0
                    }
                    batch.append(t)
                    size += t.utf8.count
                }
                send(s, serverVersion: version, clock: clock, instructions: batch)
            }
            s.downloadCursor = version
        }
        for s in sessions.values.flatMap(\.values) where s.ready {
            do { try deliver(s) } catch { drop(s, because: error, while: "sending it a changeset") }
        }
    }

    /// Ends a session whose work failed: its client is told why and its connection closes (the
    /// client connects again and gets what it missed). Only that user's connection is touched.
    func drop(_ s: Session, because error: Error, while doing: String) {
        let message = (error as? SyncErrorMessage)?.message ?? "\(error)"
        log.error("a session failed", ["app": configuration.id, "user": s.user.id, "session": "\(s.number)", "while": doing, "error": message])
        var failure = (error as? SyncErrorMessage) ?? SyncErrorMessage(.internalServerError, "the server failed while \(doing): \(message)")
        failure.session = s.number
        s.ready = false
        refuse(s.connection, failure, reason: "a session failed")
    }

    /// Tells a session that objects it may hold are gone: an erase at each one's erase clock (so
    /// that its own newer create of it stands), or an eviction when the server never had it.
    private func tellGone(_ s: Session, _ ids: [ObjectID], version: UInt64, mail: OwnMail? = nil) throws {
        for id in ids {
            let erased = try ServerSyncTables(store: store).record(id.className, keyText(id.primaryKey))?.erased
            let ins = SyncInstruction(erased == nil ? .evict : .erase, id.className, id.primaryKey)
            if let mail { mail.add(erased ?? .zero, [Wire.encode(ins.wireValue)]) } else {
                send(s, serverVersion: version, clock: erased ?? .zero, instructions: [Wire.encode(ins.wireValue)])
            }
        }
    }

    /// An integrated changeset's effects grouped by object, in the order of each object's first
    /// effect, and encoded once (docs/protocol.md: new objects fold into `creates` groups) in
    /// pieces of about `pieceBytes`: the history's text, and the download of every session that
    /// gets all of them. The texts of single objects are made only for a session that gets some
    /// of the objects and not all.
    struct EncodedEffects {
        /// The objects, in order.
        private(set) var order: [ObjectID] = []
        /// The effects with each object's together, and the range of each object's (as `order`).
        private var grouped: [SyncInstruction] = []
        private var ranges: [Range<Int>] = []
        /// The texts of runs of objects, in order: the history's instructions, comma-separated.
        private(set) var pieces: [String] = []
        /// The size of all the pieces.
        private(set) var bytes = 0
        /// The changeset's text, as the history keeps it.
        private(set) var changesetText = ""

        init() {}

        /// The effects of a changeset as the history keeps it.
        init(changeset text: String) throws {
            let cs = try SyncChangeset(wire: try EJSON.parse(text))
            self.init(cs.instructions, serverVersion: cs.serverVersion, clock: cs.clock)
        }

        /// `onAllCores`: the pieces are encoded on all cores (not when this runs beside the work
        /// that waits for it).
        init(_ effects: [SyncInstruction], serverVersion: UInt64, clock: Clock, pieceBytes: Int = 1 << 18, onAllCores: Bool = true) {
            // Runs of one object's instructions; an object seen again after another's run makes
            // the effects interleaved, and they are regrouped.
            var position = [ObjectID: Int]()
            var runs = [(object: Int, range: Range<Int>)]()
            var interleaved = false
            var start = effects.startIndex
            while start < effects.endIndex {
                var end = start + 1
                while end < effects.endIndex, effects[end].sameObject(as: effects[start]) { end += 1 }
                let id = effects[start].objectID
                if let p = position[id] {
                    runs.append((p, start..<end))
                    interleaved = true
                } else {
                    position[id] = order.count
                    order.append(id)
                    runs.append((order.count - 1, start..<end))
                }
                start = end
            }
            if interleaved {
                var offset = 0
                var byObject = [[Range<Int>]](repeating: [], count: order.count)
                for run in runs { byObject[run.object].append(run.range) }
                grouped.reserveCapacity(effects.count)
                for objectRuns in byObject {
                    for r in objectRuns { grouped += effects[r] }
                    ranges.append(offset..<grouped.count)
                    offset = grouped.count
                }
            } else {
                grouped = effects
                ranges = runs.map(\.range)
            }
            // Pieces: runs of objects of about 4,096 instructions, encoded on all cores, each
            // halved while too large.
            var spans = [Range<Int>]()
            var first = 0
            while first < order.count {
                var last = first
                while last + 1 < order.count, ranges[last + 1].upperBound - ranges[first].lowerBound <= 4_096 { last += 1 }
                spans.append(first..<last + 1)
                first = last + 1
            }
            let grouped = self.grouped, ranges = self.ranges
            @Sendable func encode(_ objects: Range<Int>) -> String {
                SyncInstruction.wireValues(grouped[ranges[objects.lowerBound].lowerBound..<ranges[objects.upperBound - 1].upperBound])
                    .map(Wire.encode).joined(separator: ",")
            }
            let texts = onAllCores ? concurrentMap(spans.count) { [spans] in encode(spans[$0]) } : spans.map(encode)
            for (span, encoded) in zip(spans, texts) {
                var todo = [(span, encoded)]
                while let (objects, text) = todo.popLast() {
                    if text.utf8.count > pieceBytes, objects.count > 1 {
                        let halves = [objects.lowerBound..<objects.lowerBound + objects.count / 2,
                                      objects.lowerBound + objects.count / 2..<objects.upperBound]
                        todo += halves.reversed().map { ($0, encode($0)) }
                        continue
                    }
                    pieces.append(text)
                    bytes += text.utf8.count + 1
                }
            }
            changesetText = "{\"serverVersion\":\(serverVersion),\"clock\":" + Wire.encode(clock.value) + ",\"instructions\":["
                + pieces.joined(separator: ",") + "]}"
        }

        /// Whether the effects of the object at `index` (in `order`) created it.
        func createdObject(at index: Int) -> Bool { grouped[ranges[index].lowerBound].op == .create }

        /// The texts of the object at `index` (in `order`) alone.
        func texts(ofObjectAt index: Int) -> [String] { SyncInstruction.wireValues(grouped[ranges[index]]).map(Wire.encode) }
    }

    /// A part of a session's download: an object's instructions as integrated, or a text.
    private enum Piece {
        /// The object at this index of the effects' order.
        case integrated(Int)
        case text(String)
    }

    /// Sends one `download` of one whole changeset text.
    private func sendChangeset(_ s: Session, serverVersion: UInt64, _ changesetText: String) {
        let text = "{\"type\":\"download\",\"session\":\(s.number),\"serverVersion\":\(serverVersion),\"changesets\":[" + changesetText + "]}"
        s.connection.send(text: text)
        metrics.update { c in
            c.downloads += 1
            c.downloadBytes += text.utf8.count
        }
    }
}
