import AtollProtocol
import AtollStore
import Foundation

/// One version of an app's history: what one integrated changeset changed, as clients
/// download it.
struct HistoryEntry {
    /// The server version it made.
    var version: UInt64
    /// The client file that uploaded it (0 for an edit made in the admin console), and the
    /// changeset's version on that file.
    var file: Int64, clientVersion: UInt64
    var clock: Clock
    /// The user who sent it.
    var user: String
    /// The changeset's text (`{"serverVersion", "clock", "instructions"}`, docs/protocol.md).
    var changeset: String
}

/// A client file the server handed out (`ident` message): whose it is, and how far its uploads
/// are integrated.
struct ClientFile {
    var ident: Int64
    var salt: Int64
    var user: String
    var uploadCursor: UInt64
}

/// What one write of the sync engine keeps: at most one new history version (with the objects it
/// touched), and how far a client file's uploads are now integrated.
struct SyncCommit {
    var entry: HistoryEntry?
    var touched: [ObjectID] = []
    var uploadCursor: (file: Int64, clientVersion: UInt64)?
}

/// Where an app's sync state is kept for good: its history, its client files, and — through
/// the app's store — its objects and their clocks. `ServerApp` integrates, evaluates views and
/// fans out on its own store and does not know which storage is underneath:
///
/// - `LocalSyncStorage`: everything in the app's SQLite store (one `atoll-server`, the default).
/// - `PostgresSyncStorage`: PostgreSQL holds the history, the client files, the schema and
///   every object with its clocks; the app's store is this instance's cache of them, and several
///   instances share one database (docs/deploy.md).
///
/// Every method is called on the app's queue.
protocol SyncStorage: AnyObject {
    /// Brings the app's store up to date at start and returns the newest history version.
    func open(_ app: ServerApp) throws -> UInt64

    /// The history after `version`, oldest first, leaving out the versions uploaded by `file`.
    func history(after version: UInt64, excludingFile file: Int64) throws -> [HistoryEntry]

    func file(_ ident: Int64) throws -> ClientFile?

    /// Hands out a new client file to `user`; returns its ident.
    func createFile(user: String, salt: Int64) throws -> Int64

    /// Gives a clock node to `user` if no one has it yet; returns the user whose it is.
    func claimNode(_ node: Int64, user: String) throws -> String

    /// Runs one write of the sync engine: an upload's integration, an admin edit, a schema change.
    /// Writes run one at a time across everything that shares the storage; before `body` runs,
    /// the app's store has every version another instance committed (and the app has fanned them
    /// out). `body` runs inside the store's write transaction and gets the upload cursor of
    /// `file` as the storage has it. What it returns is kept for good together with the store's
    /// transaction; when either fails, neither is kept and the error is thrown.
    func write(_ app: ServerApp, file: Int64?, _ body: (_ uploadCursor: UInt64) throws -> SyncCommit) throws

    /// Applies what other instances committed since the app's latest version (nothing for a
    /// storage that only this process writes).
    func catchUp(_ app: ServerApp) throws

    /// Keeps a schema the app adopted (development mode), for the other instances.
    func saveSchema(_ app: ServerApp, _ schema: Schema) throws

    /// Tells the other instances that a user was disabled, so that they close its connections.
    func announceDisabled(user: String) throws

    /// Tells the other instances that a user's sessions ended (a logout: `session`; a password
    /// reset: all, nil), so that they close the connections those sessions' tokens opened.
    func announceSessionsEnded(user: String, session: String?) throws

    func close()
}

/// The sync state in the app's own SQLite store: history and client files in metadata tables
/// beside the objects, written in the same transaction as the objects they describe.
final class LocalSyncStorage: SyncStorage {
    private weak var app: ServerApp?

    func open(_ app: ServerApp) throws -> UInt64 {
        self.app = app
        return try app.store.withMetadata { sql in
            guard case .int(let v)? = try sql.rows("SELECT coalesce(max(version), 0) FROM _atoll_sync_history").first?.first else { return 0 }
            return UInt64(v)
        }
    }

    func history(after version: UInt64, excludingFile file: Int64) throws -> [HistoryEntry] {
        guard let store = app?.store else { return [] }
        return try store.withMetadata { sql in
            try sql.rows("SELECT version, file, client_version, clock, user, changeset FROM _atoll_sync_history WHERE version > ? AND file != ? ORDER BY version",
                         [.int(Int64(clamping: version)), .int(file)])
        }.map { row in
            guard case .int(let v) = row[0], case .int(let f) = row[1], case .int(let cv) = row[2], case .string(let clockText) = row[3],
                  let clock = Clock(text: clockText), case .string(let user) = row[4], case .string(let text) = row[5] else {
                throw AtollError(.file, "a history row in _atoll_sync_history cannot be read (version \(row.first?.intValue.map(String.init) ?? "?"))")
            }
            return HistoryEntry(version: UInt64(v), file: f, clientVersion: UInt64(cv), clock: clock, user: user, changeset: text)
        }
    }

    func file(_ ident: Int64) throws -> ClientFile? {
        guard let store = app?.store else { return nil }
        let rows = try store.withMetadata { sql in
            try sql.rows("SELECT salt, user, upload_cursor FROM _atoll_sync_files WHERE ident = ?", [.int(ident)])
        }
        guard let row = rows.first, case .int(let salt) = row[0], case .string(let user) = row[1], case .int(let cursor) = row[2] else { return nil }
        return ClientFile(ident: ident, salt: salt, user: user, uploadCursor: UInt64(cursor))
    }

    func createFile(user: String, salt: Int64) throws -> Int64 {
        guard let store = app?.store else { throw AtollError(.file, "the app is closed") }
        return try store.write {
            try store.withMetadata { sql -> Int64 in
                try sql.execute("INSERT INTO _atoll_sync_files (salt, user, upload_cursor, created) VALUES (?, ?, 0, ?)",
                                [.int(salt), .string(user), .int(Int64(Date().timeIntervalSince1970 * 1000))])
                guard case .int(let ident)? = try sql.rows("SELECT last_insert_rowid()").first?.first else {
                    throw AtollError(.file, "no client file identity")
                }
                return ident
            }
        }
    }

    func claimNode(_ node: Int64, user: String) throws -> String {
        guard let store = app?.store else { throw AtollError(.file, "the app is closed") }
        return try store.write {
            try store.withMetadata { sql -> String in
                try sql.execute("INSERT OR IGNORE INTO _atoll_sync_nodes (node, user) VALUES (?, ?)", [.int(node), .string(user)])
                guard case .string(let owner)? = try sql.rows("SELECT user FROM _atoll_sync_nodes WHERE node = ?", [.int(node)]).first?.first else {
                    throw AtollError(.file, "the clock node \(node) was not recorded")
                }
                return owner
            }
        }
    }

    func write(_ app: ServerApp, file: Int64?, _ body: (UInt64) throws -> SyncCommit) throws {
        let store = app.store
        try store.write {
            let cursor = try file.flatMap { try self.file($0)?.uploadCursor } ?? 0
            let commit = try body(cursor)
            try store.withMetadata { sql in
                if let e = commit.entry {
                    try sql.execute("INSERT INTO _atoll_sync_history VALUES (?, ?, ?, ?, ?, ?, ?)",
                                    [.int(Int64(e.version)), .int(e.file), .int(Int64(e.clientVersion)), .string(e.clock.description),
                                     .string(e.user), .int(Int64(Date().timeIntervalSince1970 * 1000)), .string(e.changeset)])
                }
                if let u = commit.uploadCursor {
                    try sql.execute("UPDATE _atoll_sync_files SET upload_cursor = ? WHERE ident = ?", [.int(Int64(u.clientVersion)), .int(u.file)])
                }
            }
        }
    }

    func catchUp(_ app: ServerApp) throws {}

    func saveSchema(_ app: ServerApp, _ schema: Schema) throws {}

    func announceDisabled(user: String) throws {}

    func announceSessionsEnded(user: String, session: String?) throws {}

    func close() {}
}
