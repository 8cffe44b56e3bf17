import CSQLite

// What a realm file holds, by SQLite's own counts: pages, free pages, the change log's size.
// Read-only: nothing here writes.

/// The sizes of a realm, as `Store.statistics()` reads them.
///
/// Page counts are SQLite's (`PRAGMA page_count`, `freelist_count`, `page_size`): the size of the
/// database as this store sees it, which includes pages still in the `-wal` file; the file on disk
/// reaches that size when the WAL is checkpointed.
public struct StoreStatistics: Hashable, Sendable {
    /// The size of one database page, in bytes.
    public var pageSize: Int64
    /// The pages of the database.
    public var pageCount: Int64
    /// The pages on SQLite's free list: space the file keeps but no data uses. Compacting gives
    /// it back to the file system.
    public var freePageCount: Int64
    /// Change-log entries: one per committed write transaction that changed something (rows of
    /// `_atoll_versions`).
    public var changeLogEntries: Int64
    /// Chunks of encoded instructions (rows of `_atoll_changes`); an entry has one or more.
    public var changeLogChunks: Int64
    /// The bytes of encoded instructions in `_atoll_changes` (the sum of the chunks' lengths).
    public var changeLogBytes: Int64
    /// The newest change-log version (0 when nothing was ever written).
    public var version: UInt64

    /// `pageCount × pageSize`.
    public var totalBytes: Int64 { pageCount * pageSize }
    /// `freePageCount × pageSize`.
    public var freeBytes: Int64 { freePageCount * pageSize }
    /// The bytes that hold data: `totalBytes − freeBytes`.
    public var usedBytes: Int64 { totalBytes - freeBytes }
}

extension Store {
    /// The realm's page counts and change-log size, read in one snapshot.
    ///
    /// ```swift
    /// let stats = try store.statistics()
    /// print("\(stats.usedBytes) of \(stats.totalBytes) bytes used; change log \(stats.changeLogBytes) bytes")
    /// ```
    /// A file without Atoll's tables (see `isRealm()`) has an empty change log.
    /// - Throws: `.closed`, `.file` when SQLite cannot read the file.
    public func statistics() throws -> StoreStatistics {
        try readSnapshot {
            try locked { conn in
                func integer(_ sql: String) throws -> Int64 {
                    let s = try conn.statement(sql)
                    defer { s.reset() }
                    return try s.step() ? s.int64(0) : 0
                }
                let hasLog = try hasMetadata(conn)
                return StoreStatistics(
                    pageSize: try integer("PRAGMA page_size"),
                    pageCount: try integer("PRAGMA page_count"),
                    freePageCount: try integer("PRAGMA freelist_count"),
                    changeLogEntries: hasLog ? try integer("SELECT count(*) FROM _atoll_versions") : 0,
                    changeLogChunks: hasLog ? try integer("SELECT count(*) FROM _atoll_changes") : 0,
                    changeLogBytes: hasLog ? try integer("SELECT coalesce(sum(length(instructions)), 0) FROM _atoll_changes") : 0,
                    version: hasLog ? UInt64(max(0, try integer("SELECT coalesce(max(version), 0) FROM _atoll_versions"))) : 0)
            }
        }
    }

    /// Whether the file holds Atoll's tables. False for an SQLite file that Atoll never wrote
    /// to (opened read-only, or by another program): such a file has no schema and no change log.
    /// - Throws: `.closed`, `.file` when SQLite cannot read the file.
    public func isRealm() throws -> Bool {
        try locked { conn in try hasMetadata(conn) }
    }

    private func hasMetadata(_ conn: Connection) throws -> Bool {
        let s = try conn.statement(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('_atoll_meta', '_atoll_versions', '_atoll_changes')")
        defer { s.reset() }
        return try s.step() && s.int64(0) == 3
    }
}
