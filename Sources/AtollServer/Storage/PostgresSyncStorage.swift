import AtollJSON
import AtollPostgres
import AtollProtocol
import AtollStore
import CJansson
import Foundation

/// The sync state of one app in PostgreSQL, shared by every `atoll-server` instance configured
/// with the same database (docs/deploy.md, "How instances share one database"):
///
/// - `atoll_sync_history`: the history, one row per version, gapless per app;
/// - `atoll_sync_objects`: every object as its document and its sync metadata (create, erase and
///   field clocks, list element identities, counter adds), with the version that last wrote it;
/// - `atoll_sync_files`: client files and their upload cursors;
/// - `atoll_sync_apps`: the schema (development mode grows it).
///
/// Writes take a transaction-scoped advisory lock per app: integration is serial by nature (each
/// upload is resolved against the state the previous one left), so instances wait for the lock
/// instead of failing serializable transactions and retrying them, and the lock holder's
/// `max(version) + 1` is the next version, never skipped nor taken twice. Under the lock the
/// instance first applies what others committed, then integrates on its own store (its cache),
/// then writes the history row, the objects it touched and the file's cursor, commits PostgreSQL,
/// and only then commits its cache. `NOTIFY atoll_sync` tells the other instances.
final class PostgresSyncStorage: SyncStorage {
    private let url: String
    private let appId: String
    private var db: PostgresConnection
    /// The schema version (in `atoll_sync_apps`) this instance's store has.
    private var schemaVersion: Int64 = -1
    /// The app's `epoch` in the database: a random text made with its row, kept in the cache.
    private var epoch = ""

    static let channel = "atoll_sync"
    /// Objects read and written into the cache per transaction when catching up
    /// (`ServerConfiguration.postgresCatchUpBatch`).
    private let objectsPerBatch: Int

    static let tables = [
        "CREATE TABLE IF NOT EXISTS atoll_sync_apps (app text PRIMARY KEY, schema text, schema_version bigint NOT NULL DEFAULT 0)",
        "ALTER TABLE atoll_sync_apps ADD COLUMN IF NOT EXISTS epoch text",
        """
        CREATE TABLE IF NOT EXISTS atoll_sync_history (app text NOT NULL, version bigint NOT NULL, file bigint NOT NULL,
            client_version bigint NOT NULL, clock text NOT NULL, user_id text NOT NULL, at bigint NOT NULL,
            changeset text NOT NULL, PRIMARY KEY (app, version))
        """,
        """
        CREATE TABLE IF NOT EXISTS atoll_sync_files (ident bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, app text NOT NULL,
            salt bigint NOT NULL, user_id text NOT NULL, upload_cursor bigint NOT NULL DEFAULT 0, created bigint NOT NULL)
        """,
        """
        CREATE TABLE IF NOT EXISTS atoll_sync_objects (app text NOT NULL, class text NOT NULL, pk text NOT NULL,
            key text NOT NULL, doc text, meta text NOT NULL, version bigint NOT NULL, PRIMARY KEY (app, class, pk))
        """,
        "CREATE INDEX IF NOT EXISTS atoll_sync_objects_version ON atoll_sync_objects (app, version)",
        "CREATE TABLE IF NOT EXISTS atoll_sync_nodes (app text NOT NULL, node bigint NOT NULL, user_id text NOT NULL, PRIMARY KEY (app, node))",
    ]

    /// Connects and creates the tables (several instances may start at once: the DDL runs under
    /// an advisory lock).
    init(url: String, appId: String, objectsPerBatch: Int = 5000) throws {
        self.url = url
        self.appId = appId
        self.objectsPerBatch = max(1, objectsPerBatch)
        db = try PostgresConnection(url: url)
        try db.transaction {
            try db.execute("SELECT pg_advisory_xact_lock(hashtext('atoll_sync_tables'))")
            for statement in Self.tables { try db.execute(statement) }
            try db.execute("INSERT INTO atoll_sync_apps (app) VALUES ($1) ON CONFLICT (app) DO NOTHING", [appId])
            // The app's data in this database: a cache made from another database (or from this
            // one before its app row was made again) is not kept.
            try db.execute("UPDATE atoll_sync_apps SET epoch = md5(random()::text || clock_timestamp()::text) WHERE app = $1 AND epoch IS NULL",
                           [appId])
            epoch = try db.value("SELECT epoch FROM atoll_sync_apps WHERE app = $1", [appId]) ?? ""
        }
    }

    /// Set by `close`: the storage does not connect again after it.
    private var closed = false

    func close() {
        closed = true
        db.close()
    }

    /// Runs `body` on the connection, reconnecting first when the server went away.
    private func connected<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        guard !closed else { throw AtollError(.file, "the app's PostgreSQL storage is closed") }
        if !db.isOpen { db = try PostgresConnection(url: url) }
        return try body(db)
    }

    // MARK: - Reading

    /// Keeps the cache an earlier run left when it is this database's and not ahead of it (its
    /// newest version has the same clock here); otherwise empties it. Then catches up.
    func open(_ app: ServerApp) throws -> UInt64 {
        let kept = try CacheState.read(app.store)
        app.latestVersion = 0
        if let kept, kept.epoch == epoch, kept.version > 0 {
            let clock = try connected { db in
                try db.value("SELECT clock FROM atoll_sync_history WHERE app = $1 AND version = $2", [appId, String(kept.version)])
            }
            if clock == kept.clock { app.latestVersion = kept.version }
        }
        if app.latestVersion == 0, kept != nil {
            app.log.info("the cache is not this database's or is ahead of it: made again", ["app": appId])
            try CacheState.empty(app.store)
        }
        try catchUp(app)
        return app.latestVersion
    }

    func history(after version: UInt64, excludingFile file: Int64) throws -> [HistoryEntry] {
        try connected { db in
            try db.execute("SELECT version, file, client_version, clock, user_id, changeset FROM atoll_sync_history WHERE app = $1 AND version > $2 AND file != $3 ORDER BY version",
                           [appId, String(version), String(file)]).map(Self.entry)
        }
    }

    /// A history row as selected above; one that cannot be read is an error, never skipped.
    private static func entry(_ row: [String?]) throws -> HistoryEntry {
        guard row.count == 6, let v = row[0].flatMap(UInt64.init), let f = row[1].flatMap(Int64.init),
              let cv = row[2].flatMap(UInt64.init), let clock = row[3].flatMap(Clock.init(text:)),
              let user = row[4], let text = row[5] else {
            throw AtollError(.file, "a history row in atoll_sync_history cannot be read (version \(row.first.flatMap { $0 } ?? "?"))")
        }
        return HistoryEntry(version: v, file: f, clientVersion: cv, clock: clock, user: user, changeset: text)
    }

    func file(_ ident: Int64) throws -> ClientFile? {
        try connected { db in
            guard let row = try db.execute("SELECT salt, user_id, upload_cursor FROM atoll_sync_files WHERE app = $1 AND ident = $2",
                                           [appId, String(ident)]).first,
                  let salt = row[0].flatMap(Int64.init), let user = row[1], let cursor = row[2].flatMap(UInt64.init) else { return nil }
            return ClientFile(ident: ident, salt: salt, user: user, uploadCursor: cursor)
        }
    }

    func claimNode(_ node: Int64, user: String) throws -> String {
        try connected { db in
            // Twice at most: a claim another instance was committing at once is read the second time.
            for _ in 0..<2 {
                if let owner = try db.value("""
                    WITH claimed AS (INSERT INTO atoll_sync_nodes (app, node, user_id) VALUES ($1, $2, $3)
                                     ON CONFLICT (app, node) DO NOTHING RETURNING user_id)
                    SELECT user_id FROM claimed UNION ALL SELECT user_id FROM atoll_sync_nodes WHERE app = $1 AND node = $2 LIMIT 1
                    """, [appId, String(node), user]) {
                    return owner
                }
            }
            throw AtollError(.file, "the clock node \(node) was not recorded")
        }
    }

    func createFile(user: String, salt: Int64) throws -> Int64 {
        try connected { db in
            guard let text = try db.value("INSERT INTO atoll_sync_files (app, salt, user_id, created) VALUES ($1, $2, $3, $4) RETURNING ident",
                                          [appId, String(salt), user, String(Int64(Date().timeIntervalSince1970 * 1000))]),
                  let ident = Int64(text) else { throw AtollError(.file, "PostgreSQL handed out no client file identity") }
            return ident
        }
    }

    // MARK: - Catching up

    func catchUp(_ app: ServerApp) throws {
        try connected { db in
            // One snapshot: the newest version and the objects as they are at it.
            _ = try db.transaction("REPEATABLE READ READ ONLY") { try fetch(app, db) }
        }
    }

    /// Applies what the database has beyond the app's latest version (in the caller's
    /// transaction: a snapshot, or the writer's lock). Returns the upload cursor of `file`.
    @discardableResult
    private func fetch(_ app: ServerApp, _ db: PostgresConnection, file: Int64? = nil) throws -> UInt64 {
        // One round trip for the schema (when it changed), the newest version and the cursor.
        guard let row = try db.execute("""
            SELECT schema_version, CASE WHEN schema_version <> $2 THEN schema END,
                (SELECT coalesce(max(version), 0) FROM atoll_sync_history WHERE app = $1),
                (SELECT upload_cursor FROM atoll_sync_files WHERE app = $1 AND ident = $3)
            FROM atoll_sync_apps WHERE app = $1
            """, [appId, String(schemaVersion), String(file ?? 0)]).first,
              let version = row[0].flatMap(Int64.init), let latest = row[2].flatMap(UInt64.init) else {
            throw AtollError(.file, "the app '\(appId)' has no row in atoll_sync_apps")
        }
        if version != schemaVersion {
            if let text = row[1] {
                let json = try EJSON.parse(text)
                let ref = EJSON.make(json)
                defer { json_decref(ref) }
                try app.adoptStoredSchema(try SchemaJSON.schema(ref))
            }
            schemaVersion = version
        }
        let cursor = row[3].flatMap(UInt64.init) ?? 0
        guard latest > app.latestVersion else { return cursor }
        let since = String(app.latestVersion)
        // At start (no session is bound yet) the history is not read, only the objects.
        let entries = app.sessionCount == 0 ? [] : try db.execute(
            "SELECT version, file, client_version, clock, user_id, changeset FROM atoll_sync_history WHERE app = $1 AND version > $2 ORDER BY version",
            [appId, since]).map(Self.entry)
        let clock = try db.value("SELECT clock FROM atoll_sync_history WHERE app = $1 AND version = $2", [appId, String(latest)]) ?? ""
        // The objects through a cursor, a few thousand at a time: a new instance reads the whole
        // app without holding it in memory at once.
        try db.execute("DECLARE atoll_changed CURSOR FOR SELECT class, key, doc, meta FROM atoll_sync_objects WHERE app = $1 AND version > $2",
                       [appId, since])
        defer { _ = try? db.execute("CLOSE atoll_changed") }
        try app.applyStored({
            let rows = try db.execute("FETCH \(objectsPerBatch) FROM atoll_changed")
            guard !rows.isEmpty else { return nil }
            return try rows.map { row in
                guard let cls = row[0], let key = row[1], let meta = row[3] else { throw AtollError(.file, "a stored object row is incomplete") }
                return try CachedObject(className: cls, keyJSON: key, docText: row[2], metaText: meta)
            }
        }, entries: entries, latest: latest) {
            try CacheState(epoch: epoch, version: latest, clock: clock).write(app.store)
        }
        return cursor
    }

    // MARK: - Writing

    func write(_ app: ServerApp, file: Int64?, _ body: (UInt64) throws -> SyncCommit) throws {
        try connected { db in
            // The app id is letters, digits, - and _ (AppConfiguration): safe in the text, so that
            // BEGIN and the lock take one round trip.
            var localOpen = false
            do {
                try db.execute("BEGIN; SELECT pg_advisory_xact_lock(hashtext('atoll_sync:\(appId)'))")
                let cursor = try fetch(app, db, file: file)
                try app.store.beginWrite()
                localOpen = true
                let commit = try body(cursor)
                if let e = commit.entry {
                    // The history row, the file's cursor and the notification (sent at commit).
                    try db.execute("""
                        WITH history AS (INSERT INTO atoll_sync_history VALUES ($1, $2, $3, $4, $5, $6, $7, $8)),
                             files AS (UPDATE atoll_sync_files SET upload_cursor = greatest(upload_cursor, $10) WHERE app = $1 AND ident = $11)
                        SELECT pg_notify($9, $1)
                        """,
                                   [appId, String(e.version), String(e.file), String(e.clientVersion), e.clock.description, e.user,
                                    String(Int64(Date().timeIntervalSince1970 * 1000)), e.changeset, Self.channel,
                                    String(commit.uploadCursor?.clientVersion ?? 0), String(commit.uploadCursor?.file ?? 0)])
                    try saveObjects(commit.touched, version: e.version, from: app.store, db)
                    try CacheState(epoch: epoch, version: e.version, clock: e.clock.description).write(app.store)
                } else if let u = commit.uploadCursor {
                    try db.execute("UPDATE atoll_sync_files SET upload_cursor = greatest(upload_cursor, $1) WHERE app = $2 AND ident = $3",
                                   [String(u.clientVersion), appId, String(u.file)])
                }
                try db.execute("COMMIT")
            } catch {
                if localOpen { try? app.store.cancelWrite() }
                if db.isOpen { _ = try? db.execute("ROLLBACK") }
                throw error
            }
            // The database has it now. Should the cache fail to commit, it is behind the
            // database, and the next catch-up brings it back (the version is above its latest).
            try app.store.commit()
        }
    }

    /// Writes the objects a version touched, as the store has them now (in its open
    /// transaction), in statements of a few hundred rows.
    private func saveObjects(_ ids: [ObjectID], version: UInt64, from store: Store, _ db: PostgresConnection) throws {
        let perStatement = 500
        var start = 0
        while start < ids.count {
            let part = ids[start..<min(ids.count, start + perStatement)]
            start += perStatement
            var values = [String]()
            var parameters: [String?] = [appId, String(version)]
            for id in part {
                let object = try CachedObject(id, from: store)
                let n = parameters.count
                values.append("($1, $\(n + 1), $\(n + 2), $\(n + 3), $\(n + 4), $\(n + 5), $2)")
                parameters += [object.className, object.keyText, object.keyJSON, object.docText, object.metaText]
            }
            try db.execute("""
                INSERT INTO atoll_sync_objects (app, class, pk, key, doc, meta, version) VALUES \(values.joined(separator: ", "))
                ON CONFLICT (app, class, pk) DO UPDATE SET key = excluded.key, doc = excluded.doc, meta = excluded.meta, version = excluded.version
                """, parameters)
        }
    }

    /// The notification's payload: `APP` for new versions, `APP disabled USER` for a user whose
    /// connections every instance closes, `APP ended SESSION USER` for a user's session that
    /// ended (`*`: all of them), whose connections every instance closes. (A session is a hex
    /// id; the user, which may hold spaces, comes last.)
    func announceDisabled(user: String) throws {
        try connected { db in _ = try db.execute("SELECT pg_notify($1, $2)", [Self.channel, appId + " disabled " + user]) }
    }

    func announceSessionsEnded(user: String, session: String?) throws {
        let payload = appId + " ended " + (session ?? "*") + " " + user
        try connected { db in _ = try db.execute("SELECT pg_notify($1, $2)", [Self.channel, payload]) }
    }

    func saveSchema(_ app: ServerApp, _ schema: Schema) throws {
        try connected { db in
            try db.transaction {
                try db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", ["atoll_sync:" + appId])
                // Another instance may have grown the schema meanwhile: take its classes first.
                try fetch(app, db)
                let ref = SchemaJSON.make(app.schema)
                defer { json_decref(ref) }
                let text = EJSON.serialize(try EJSON.value(ref))
                guard let v = try db.value("UPDATE atoll_sync_apps SET schema = $1, schema_version = schema_version + 1 WHERE app = $2 RETURNING schema_version",
                                           [text, appId]).flatMap(Int64.init) else { throw AtollError(.file, "the app '\(appId)' has no row in atoll_sync_apps") }
                schemaVersion = v
                try db.execute("SELECT pg_notify($1, $2)", [Self.channel, appId])
            }
        }
    }
}

/// What an instance's cache holds, kept in the cache itself (written in the same transactions as
/// the objects): the database's app epoch, the newest version applied, and that version's clock.
struct CacheState: Equatable {
    var epoch: String
    var version: UInt64
    var clock: String

    static let table = "CREATE TABLE IF NOT EXISTS _atoll_sync_cache (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT"

    static func read(_ store: Store) throws -> CacheState? {
        try store.write { try store.withMetadata { sql in try sql.execute(table) } }
        let rows = try store.withMetadata { sql in try sql.rows("SELECT key, value FROM _atoll_sync_cache") }
        var values = [String: String]()
        for row in rows { if case .string(let k) = row[0], case .string(let v) = row[1] { values[k] = v } }
        guard let epoch = values["epoch"], let version = values["version"].flatMap(UInt64.init), let clock = values["clock"] else { return nil }
        return CacheState(epoch: epoch, version: version, clock: clock)
    }

    /// Inside the store's write transaction.
    func write(_ store: Store) throws {
        try store.withMetadata { sql in
            for (k, v) in [("epoch", epoch), ("version", String(version)), ("clock", clock)] {
                try sql.execute("INSERT OR REPLACE INTO _atoll_sync_cache VALUES (?, ?)", [.string(k), .string(v)])
            }
        }
    }

    /// Deletes every object, its metadata and the state: the cache is made again from nothing.
    static func empty(_ store: Store) throws {
        try store.write {
            for cls in store.schema.classes where !cls.isEmbedded {
                _ = try store.objects(cls.name).deleteAll()
            }
            try store.withMetadata { sql in
                for table in CachedObject.metadataTables + ["_atoll_sync_cache"] { try sql.execute("DELETE FROM \(table)") }
            }
        }
    }
}

/// Listens for `NOTIFY atoll_sync` from other instances and has the named app catch up. Every
/// two seconds without a notification (and after the connection is restored) every app
/// catches up anyway: a notification lost with a broken connection delays, never loses.
final class PostgresListener: @unchecked Sendable {
    private let url: String
    private let apps: [String: ServerApp]
    private let log: Logger
    private let stopped = NSLock()
    private var isStopped = false
    private var thread: Thread?

    init(url: String, apps: [String: ServerApp], log: Logger) {
        self.url = url
        self.apps = apps
        self.log = log
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "atoll.postgres.listen"
        self.thread = thread
        thread.start()
    }

    func stop() {
        stopped.withLock { isStopped = true }
    }

    private var shouldStop: Bool { stopped.withLock { isStopped } }

    private func catchUp(_ ids: some Sequence<String>) {
        for id in ids {
            guard let app = apps[id] else { continue }
            app.queue.async { app.catchUpQuietly() }
        }
    }

    private func run() {
        var connection: PostgresConnection?
        var idle = 0.0
        // Between attempts to connect again: 0.5 s, doubling up to 8 s while the database is away.
        var backoff = 0.5
        while !shouldStop {
            do {
                if connection == nil || connection?.isOpen == false {
                    let c = try PostgresConnection(url: url)
                    try c.execute("LISTEN \(PostgresSyncStorage.channel)")
                    connection = c
                    if backoff > 0.5 { log.info("PostgreSQL notifications: connected again") }
                    backoff = 0.5
                    catchUp(apps.keys)
                }
                let notes = try connection?.notifications(waiting: 0.5) ?? []
                if notes.isEmpty {
                    idle += 0.5
                    if idle >= 2 { idle = 0; catchUp(apps.keys) }
                } else {
                    idle = 0
                    var versions = Set<String>()
                    for note in notes {
                        let parts = note.payload.split(separator: " ", maxSplits: 2).map(String.init)
                        if parts.count == 3, parts[1] == "disabled", let app = apps[parts[0]] {
                            let user = parts[2]
                            app.queue.async { _ = app.closeConnections(ofUser: user) }
                        } else if parts.count == 3, parts[1] == "ended", let app = apps[parts[0]] {
                            let rest = parts[2].split(separator: " ", maxSplits: 1).map(String.init)
                            guard rest.count == 2 else { continue }
                            let session = rest[0] == "*" ? nil : rest[0], user = rest[1]
                            app.queue.async { _ = app.closeConnections(ofUser: user, session: session) }
                        } else {
                            versions.insert(note.payload)
                        }
                    }
                    catchUp(versions)
                }
            } catch {
                if backoff == 0.5 { log.warning("PostgreSQL notifications: reconnecting", ["error": "\(error)"]) }
                connection = nil
                // Sliced, so that a stop is not held up by a long wait.
                var waited = 0.0
                while waited < backoff, !shouldStop {
                    Thread.sleep(forTimeInterval: 0.1)
                    waited += 0.1
                }
                backoff = min(backoff * 2, 8)
            }
        }
        connection?.close()
    }
}
