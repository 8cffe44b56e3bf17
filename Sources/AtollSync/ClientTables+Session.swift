import AtollJSON
import AtollStore

// The statements a sync session runs on its own tables: the change-log versions it wrote itself,
// its pending changesets, its subscription sets, and what a client reset clears. Every one of
// them is here, so that `ClientSession` reads as what it does.

extension ClientTables {
    // MARK: Applied (change-log versions written by the session itself: downloads)

    static func markApplied(_ sql: MetadataSQL, _ version: UInt64) throws {
        try sql.execute("INSERT OR REPLACE INTO _atoll_sync_applied VALUES (?)", [.int(Int64(version))])
    }

    static func applied(_ sql: MetadataSQL, after version: UInt64) throws -> Set<UInt64> {
        var out = Set<UInt64>()
        for row in try sql.rows("SELECT version FROM _atoll_sync_applied WHERE version > ?", [.int(Int64(version))]) {
            if case .int(let v) = row[0] { out.insert(UInt64(v)) }
        }
        return out
    }

    static func forgetApplied(_ sql: MetadataSQL, through version: UInt64) throws {
        try sql.execute("DELETE FROM _atoll_sync_applied WHERE version <= ?", [.int(Int64(version))])
    }

    // MARK: Pending (local changesets the server has not acknowledged)

    /// A stored pending changeset: its local version, its text (one changeset, or its parts one
    /// per line) and the text's size.
    struct Pending {
        var version: UInt64
        var text: String
        var bytes: Int
    }

    static func addPending(_ sql: MetadataSQL, version: UInt64, text: String) throws {
        try sql.execute("INSERT OR REPLACE INTO _atoll_sync_pending VALUES (?, ?, ?)",
                        [.int(Int64(version)), .string(text), .int(Int64(text.utf8.count))])
    }

    /// The pending changesets after `version`, oldest first (at most `limit`).
    static func pending(_ sql: MetadataSQL, after version: UInt64, limit: Int? = nil) throws -> [Pending] {
        let query = "SELECT version, changeset, bytes FROM _atoll_sync_pending WHERE version > ? ORDER BY version" + (limit.map { " LIMIT \($0)" } ?? "")
        return try sql.rows(query, [.int(Int64(version))]).compactMap { row in
            guard case .int(let v) = row[0], case .string(let text) = row[1] else { return nil }
            return Pending(version: UInt64(v), text: text, bytes: Int(row[2].intValue ?? 0))
        }
    }

    /// The bytes of every pending changeset together.
    static func pendingBytes(_ sql: MetadataSQL) throws -> Int {
        Int(try sql.rows("SELECT coalesce(sum(bytes), 0) FROM _atoll_sync_pending").first?.first?.intValue ?? 0)
    }

    /// The newest pending version (0: none).
    static func newestPending(_ sql: MetadataSQL) throws -> UInt64 {
        UInt64(max(0, try sql.rows("SELECT coalesce(max(version), 0) FROM _atoll_sync_pending").first?.first?.intValue ?? 0))
    }

    /// Drops what the server acknowledged.
    static func dropPending(_ sql: MetadataSQL, through version: UInt64) throws {
        try sql.execute("DELETE FROM _atoll_sync_pending WHERE version <= ?", [.int(Int64(version))])
    }

    // MARK: Subscription sets

    /// A stored subscription set version: its state (`pending`, `complete`, `superseded`,
    /// `error`), the server's error, and its queries as wire text.
    struct SubscriptionSet {
        var version: Int64
        var state: String
        var error: String?
        var queries: String
    }

    static func subscriptionSetCount(_ sql: MetadataSQL) throws -> Int64 {
        try sql.rows("SELECT count(*) FROM _atoll_sync_subscriptions").first?.first?.intValue ?? 0
    }

    /// The newest set; with `usable`, the newest the server has not refused.
    static func newestSubscriptionSet(_ sql: MetadataSQL, usable: Bool = false) throws -> SubscriptionSet? {
        let filter = usable ? " WHERE state != 'error'" : ""
        guard let row = try sql.rows("SELECT version, state, error, queries FROM _atoll_sync_subscriptions\(filter) ORDER BY version DESC LIMIT 1").first else {
            return nil
        }
        return SubscriptionSet(version: row[0].intValue ?? 0, state: row[1].stringValue ?? "pending", error: row[2].stringValue,
                               queries: row[3].stringValue ?? "[]")
    }

    /// The newest complete version (-1: none).
    static func newestCompleteSubscriptionVersion(_ sql: MetadataSQL) throws -> Int64 {
        try sql.rows("SELECT coalesce(max(version), -1) FROM _atoll_sync_subscriptions WHERE state = 'complete'").first?.first?.intValue ?? -1
    }

    /// The queries (wire text) of every stored set.
    static func subscriptionQueries(_ sql: MetadataSQL) throws -> [String] {
        try sql.rows("SELECT queries FROM _atoll_sync_subscriptions").compactMap { $0[0].stringValue }
    }

    static func addSubscriptionSet(_ sql: MetadataSQL, version: Int64, queries: String) throws {
        try sql.execute("INSERT INTO _atoll_sync_subscriptions VALUES (?, 'pending', NULL, ?)", [.int(version), .string(queries)])
    }

    /// The server completed `version`: older ones are superseded, and only the newest of those
    /// is kept.
    static func completeSubscriptionSet(_ sql: MetadataSQL, _ version: Int64) throws {
        try sql.execute("UPDATE _atoll_sync_subscriptions SET state = 'complete', error = NULL WHERE version = ?", [.int(version)])
        try sql.execute("UPDATE _atoll_sync_subscriptions SET state = 'superseded' WHERE version < ? AND state != 'error'", [.int(version)])
        try sql.execute("""
            DELETE FROM _atoll_sync_subscriptions WHERE version < ? AND state = 'superseded'
                AND version NOT IN (SELECT max(version) FROM _atoll_sync_subscriptions WHERE version < ?)
            """, [.int(version), .int(version)])
    }

    static func refuseSubscriptionSet(_ sql: MetadataSQL, _ version: Int64, error: String) throws {
        try sql.execute("UPDATE _atoll_sync_subscriptions SET state = 'error', error = ? WHERE version = ?", [.string(error), .int(version)])
    }

    // MARK: Client reset

    /// Forgets the client file: its pending changesets, list identities and cursors go, and the
    /// complete subscription sets are to be bootstrapped again under the new file.
    static func forgetClientFile(_ sql: MetadataSQL) throws {
        for table in ["_atoll_sync_pending", "_atoll_sync_lists"] { try sql.execute("DELETE FROM \(table)") }
        for key in ["ident", "salt", "downloadCursor", "uploadCursor", "downloadedOnce"] {
            try sql.execute("DELETE FROM _atoll_sync_state WHERE key = ?", [.string(key)])
        }
        try sql.execute("UPDATE _atoll_sync_subscriptions SET state = 'pending' WHERE state = 'complete'")
    }
}
