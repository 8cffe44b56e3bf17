import CSQLite

// Consistent reads across many calls: a read transaction on the store's connection.

extension Store {
    /// Runs `body` so that every read in it sees the data as of one moment, while other handles
    /// and processes go on committing: SQLite's read transaction (in WAL mode, a snapshot).
    /// A store on a file always reads from its snapshot (as of its last refresh, see
    /// `refresh()`); for it this only holds the lock. For an in-memory store, it opens a read
    /// transaction for the duration of `body`.
    ///
    /// ```swift
    /// let (count, first) = try store.readSnapshot {
    ///     let all = try store.objects("Dog")
    ///     return (try all.count(), try all.documents(offset: 0, limit: 10))
    /// }
    /// ```
    ///
    /// Reading a large result page by page inside one snapshot gives pages that fit together.
    /// Inside a write transaction (or a snapshot already), `body` simply runs: it sees that
    /// transaction's data. The store's lock is held while `body` runs, so other threads' calls
    /// on this store wait. Do not begin a write transaction inside `body`.
    /// - Throws: `.closed`, and whatever `body` throws.
    public func readSnapshot<T>(_ body: () throws -> T) throws -> T {
        try locked { conn in
            guard write == nil, sqlite3_get_autocommit(conn.db) != 0 else { return try body() }
            try conn.execute("BEGIN DEFERRED")
            defer {
                // Ends the read transaction; a read-only transaction has nothing to lose.
                if (try? conn.execute("COMMIT")) == nil { try? conn.execute("ROLLBACK") }
            }
            return try body()
        }
    }
}
