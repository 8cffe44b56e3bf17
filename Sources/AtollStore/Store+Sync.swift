import CSQLite
import Foundation

// What the sync engines (AtollSync, AtollServer) need of a store beyond objects: tables of their
// own in the same file, written in the same transactions as the data, the version a write will
// commit as, and a hold on the change log. The SQL access is `package`: the sync engines' own
// types (`ClientTables`, `ServerSyncTables`, the sync storage) use it; applications cannot.

/// Parameter lists for `IN (…)` of up to 500 values, in statements of 8, 64 or 500 places: a
/// few prepared statements serve every count. The places past the values stay NULL (a cached
/// statement's bindings are cleared when it is reset), which `IN` matches to nothing.
package enum SQLPlaces {
    /// The most values one list takes.
    package static let most = 500

    /// The places of the statement for `count` values.
    package static func size(for count: Int) -> Int { count <= 8 ? 8 : count <= 64 ? 64 : most }

    /// `?,?,…` with `size(for: count)` places (made once per size).
    package static func list(for count: Int) -> String { count <= 8 ? eight : count <= 64 ? sixtyFour : fiveHundred }

    private static let eight = Array(repeating: "?", count: 8).joined(separator: ",")
    private static let sixtyFour = Array(repeating: "?", count: 64).joined(separator: ",")
    private static let fiveHundred = Array(repeating: "?", count: most).joined(separator: ",")
}

/// SQL over a store's own metadata tables, inside the store's lock (and its write transaction,
/// when one is open). Values bind as parameters; nothing is spliced into the SQL.
package struct MetadataSQL {
    let conn: Connection

    /// Whether the change log holds an entry recorded without values (a file that was local:
    /// `Configuration.changeLogValues`), which no upload could send.
    package func changeLogHasEntriesWithoutValues() throws -> Bool {
        try !rows("SELECT 1 FROM _atoll_changes WHERE chunk >= 0 AND substr(instructions, 1, 1) = ? LIMIT 1",
                  [.data([changeLogFormatWithoutValues])]).isEmpty
    }

    /// Runs a statement that returns no rows.
    package func execute(_ sql: String, _ arguments: [Value] = []) throws {
        let s = try conn.statement(sql)
        defer { s.reset() }
        bind(s, arguments)
        try s.run()
    }

    /// Runs a query; each row's columns as values (INTEGER → .int, REAL → .double, TEXT →
    /// .string, BLOB → .data, NULL → .null).
    package func rows(_ sql: String, _ arguments: [Value] = []) throws -> [[Value]] {
        let s = try conn.statement(sql)
        defer { s.reset() }
        bind(s, arguments)
        var out = [[Value]]()
        let n = sqlite3_column_count(s.stmt)
        while try s.step() {
            var row = [Value]()
            row.reserveCapacity(Int(n))
            for i in 0..<n {
                switch s.sqlValue(i) {
                case .null: row.append(.null)
                case .integer(let x): row.append(.int(x))
                case .real(let x): row.append(.double(x))
                case .text(let x): row.append(.string(x))
                case .blob(let x): row.append(.data(x))
                }
            }
            out.append(row)
        }
        return out
    }

    /// Runs `execute` for each argument list with one prepared statement.
    package func executeMany(_ sql: String, _ argumentLists: [[Value]]) throws {
        let s = try conn.statement(sql)
        defer { s.reset() }
        for arguments in argumentLists {
            s.reset()
            bind(s, arguments)
            try s.run()
        }
    }

    /// Inserts rows of values (all as wide as the first) with `head` (`INSERT … INTO t`): up to
    /// `perStatement` rows to a statement (`VALUES (…),(…),…`), which costs SQLite less than a
    /// statement each; the rows past the last whole statement go one at a time.
    /// - Throws: `.invalidArgument` for rows of different widths, before anything is written.
    package func insertMany(_ head: String, _ rows: [[Value]], perStatement: Int = 64) throws {
        guard let width = rows.first?.count, width > 0 else { return }
        guard rows.allSatisfy({ $0.count == width }) else { throw AtollError(.invalidArgument, "insertMany: rows of different widths") }
        // Within SQLite's limit on a statement's parameters.
        let perStatement = max(1, min(perStatement, 32_000 / width))
        let row = "(" + Array(repeating: "?", count: width).joined(separator: ",") + ")"
        var start = 0
        if rows.count >= perStatement, perStatement > 1 {
            let many = try conn.statement(head + " VALUES " + Array(repeating: row, count: perStatement).joined(separator: ","))
            defer { many.reset() }
            while rows.count - start >= perStatement {
                many.reset()
                for (k, r) in rows[start..<start + perStatement].enumerated() { bind(many, r, from: Int32(k * width + 1)) }
                try many.run()
                start += perStatement
            }
        }
        try executeMany(head + " VALUES " + row, Array(rows[start...]))
    }

    private func bind(_ s: Statement, _ arguments: [Value], from first: Int32 = 1) {
        for (i, v) in arguments.enumerated() {
            let at = first + Int32(i)
            switch v {
            case .null: s.bindNull(at)
            case .bool(let b): s.bind(at, Int64(b ? 1 : 0))
            case .int(let x): s.bind(at, x)
            case .float(let x): s.bind(at, Double(x))
            case .double(let x): s.bind(at, x)
            case .string(let x): s.bind(at, x)
            case .data(let x): s.bind(at, x)
            case .date(let t): s.bind(at, t.milliseconds)
            default: s.bind(at, "\(v)")
            }
        }
    }
}

extension Store {
    /// Runs `body` with SQL access to the store's metadata tables, under the store's lock (in the
    /// open write transaction, if any; otherwise in the current read snapshot or autocommit).
    package func withMetadata<T>(_ body: (MetadataSQL) throws -> T) throws -> T {
        try locked { conn in try body(MetadataSQL(conn: conn)) }
    }

    /// The change-log version the open write transaction will commit as (if it changes
    /// anything); nil outside a write. The sync client notes the versions of its own writes
    /// (downloads) so that it does not upload them.
    public var writeVersion: UInt64? {
        lock.lock()
        defer { lock.unlock() }
        return write?.version
    }

    /// Keeps the change log from being pruned past `version` (the sync client's upload cursor):
    /// a permanent hold, unlike an observer's, which ends with its process. Call in a write.
    public func holdChangeLog(from version: UInt64) throws {
        try locked { conn in
            try conn.execute("CREATE TABLE IF NOT EXISTS _atoll_holds (holder TEXT PRIMARY KEY, version INTEGER NOT NULL) STRICT")
            let s = try conn.statement("INSERT OR REPLACE INTO _atoll_holds VALUES ('\(Self.syncHolder)', ?)")
            s.bind(1, Int64(clamping: version))
            try s.run()
        }
    }

    /// The holder name of the sync client's hold in `_atoll_holds`.
    static let syncHolder = "sync"
}

extension Store {
    /// Whether the open write transaction has changed data so far (it will add a change-log
    /// entry at commit); false outside a write.
    public var writeHasChanges: Bool {
        lock.lock()
        defer { lock.unlock() }
        return (write?.recorder.total ?? 0) > 0
    }
}

extension Store {
    /// The primary keys of a class's objects (all, or those among `keys` that exist), without
    /// reading the objects: what sync needs to tell which objects a device holds.
    /// - Throws: `.noSuchClass`, `.typeMismatch` (a class without primary key).
    public func primaryKeys(_ className: String, among keys: [Value]? = nil) throws -> [Value] {
        try locked { conn in
            let info = try classInfo(className)
            guard let pk = info.primaryKey else {
                throw AtollError(.typeMismatch, "class '\(className)' has no primary key")
            }
            let column = quote(pk.name)
            var out = [Value]()
            // Many keys against a table not much larger (a bootstrap, a large upload): one pass
            // over the table's keys beats looking each up. The smaller side goes into the set.
            if let keys, keys.count >= 2_000 {
                let count = try conn.statement("SELECT count(*) FROM \(info.table)")
                defer { count.reset() }
                if try count.step(), case .integer(let n) = count.sqlValue(0), n <= 2 * keys.count {
                    if n == 0 { return [] }
                    let s = try conn.statement("SELECT \(column) FROM \(info.table)")
                    defer { s.reset() }
                    if n < keys.count {
                        var stored = Set<Value>(minimumCapacity: Int(n))
                        while try s.step() { stored.insert(pk.type.value(s.sqlValue(0))) }
                        var found = Set<Value>()
                        for key in keys {
                            if let checked = try? checkedPrimaryKey(info, key), stored.contains(checked), found.insert(checked).inserted {
                                out.append(checked)
                            }
                        }
                        return out
                    }
                    var wanted = Set<Value>(minimumCapacity: keys.count)
                    for key in keys { if let checked = try? checkedPrimaryKey(info, key) { wanted.insert(checked) } }
                    while try s.step() {
                        let v = pk.type.value(s.sqlValue(0))
                        if wanted.contains(v) { out.append(v) }
                    }
                    return out
                }
            }
            if let keys {
                for start in stride(from: 0, to: keys.count, by: SQLPlaces.most) {
                    let part = keys[start..<min(start + SQLPlaces.most, keys.count)]
                    // Reset clears the bindings: the places past the keys are NULL.
                    let s = try conn.statement("SELECT \(column) FROM \(info.table) WHERE \(column) IN (\(SQLPlaces.list(for: part.count)))")
                    defer { s.reset() }
                    for (i, key) in part.enumerated() {
                        guard let checked = try? checkedPrimaryKey(info, key) else { continue }
                        s.bind(Int32(i + 1), pk.type.sqlValue(checked))
                    }
                    while try s.step() { out.append(pk.type.value(s.sqlValue(0))) }
                }
            } else {
                let s = try conn.statement("SELECT \(column) FROM \(info.table)")
                defer { s.reset() }
                while try s.step() { out.append(pk.type.value(s.sqlValue(0))) }
            }
            return out
        }
    }
}
