import CSQLite
import Foundation

/// SQLite's `SQLITE_TRANSIENT`, which the macro form does not bring into Swift.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection with a cache of prepared statements.
///
/// Not thread-safe by itself: `Store` serializes every use. Closing finalizes every statement.
final class Connection {
    private(set) var db: OpaquePointer?
    private var cache: [String: Statement] = [:]
    /// The statement asked for last: a bulk write asks for the same one for every object, and
    /// comparing the text it passes again costs less than hashing it.
    private var last: (sql: String, statement: Statement)?
    let path: String

    /// Opens the database at `path` (an SQLite filename or URI) with SQLite's open flags.
    init(path: String, flags: Int32) throws {
        self.path = path
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, flags | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nil)
        if rc != SQLITE_OK {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            throw AtollError(.file, "cannot open '\(path)': \(message)")
        }
        db = handle
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit { close() }

    func close() {
        last = nil
        for statement in cache.values { statement.finalize() }
        cache.removeAll()
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    /// A prepared statement for `sql`, from the cache when it was prepared before. Reset and
    /// with its bindings cleared.
    func statement(_ sql: String) throws -> Statement {
        if let last, last.sql == sql {
            last.statement.reset()
            return last.statement
        }
        if let cached = cache[sql] {
            cached.reset()
            last = (sql, cached)
            return cached
        }
        let statement = try prepare(sql)
        cache[sql] = statement
        last = (sql, statement)
        return statement
    }

    /// A new prepared statement that the caller owns (not cached).
    func prepare(_ sql: String) throws -> Statement {
        guard let db else { throw AtollError(.closed, "the realm is closed") }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, sql: sql) }
        return Statement(stmt, connection: self)
    }

    /// Runs one or more statements without results.
    func execute(_ sql: String) throws {
        guard let db else { throw AtollError(.closed, "the realm is closed") }
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql: sql) }
    }

    /// Drops cached statements (after the schema changed).
    func clearCache() {
        last = nil
        for statement in cache.values { statement.finalize() }
        cache.removeAll()
    }

    var changes: Int { db.map { Int(sqlite3_changes64($0)) } ?? 0 }
    /// Rows changed on this connection since it opened (a failed `OR FAIL` statement's rows
    /// before the failing one count).
    var totalChanges: Int64 { db.map { sqlite3_total_changes64($0) } ?? 0 }
    var lastInsertRowID: Int64 { db.map { sqlite3_last_insert_rowid($0) } ?? 0 }

    /// When a statement running now must stop (`withDeadline`), as the store's SQL functions
    /// see it (their user data) and SQLite's progress handler too: a function that runs long (a
    /// match over a large text) checks it itself, since the handler only runs between SQLite's
    /// own instructions.
    final class Clock: @unchecked Sendable {
        /// In uptime nanoseconds; nil: no deadline.
        var deadline: UInt64?
        /// The budget the deadline was set from, for the error's message.
        var seconds: Double = 0
        /// Whether the deadline has passed (never, without one).
        var expired: Bool { deadline.map { DispatchTime.now().uptimeNanoseconds > $0 } ?? false }
    }
    let clock = Clock()

    /// Runs `body` with SQLite stopping any statement still running `seconds` from now: the
    /// step then throws `.timeout`. Checked every few thousand virtual machine instructions
    /// (SQLite's progress handler), so the cost of a check is nothing next to a query's.
    func withDeadline<T>(seconds: Double, _ body: () throws -> T) rethrows -> T {
        guard let db, clock.deadline == nil else { return try body() }
        let (at, overflow) = DispatchTime.now().uptimeNanoseconds.addingReportingOverflow(UInt64(max(0, min(seconds, 1e9)) * 1e9))
        clock.deadline = overflow ? .max : at
        clock.seconds = seconds
        sqlite3_progress_handler(db, 4096, { context in
            guard let context else { return 0 }
            return Unmanaged<Clock>.fromOpaque(context).takeUnretainedValue().expired ? 1 : 0
        }, Unmanaged.passUnretained(clock).toOpaque())
        defer {
            sqlite3_progress_handler(db, 0, nil, nil)
            clock.deadline = nil
        }
        return try body()
    }

    /// Translates an SQLite result code into the store's error, with SQLite's message.
    func error(_ rc: Int32, sql: String? = nil) -> AtollError {
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
        // Stopped at the deadline: by SQLite's progress handler, or by a function of the store's
        // that checks it (an error then).
        if clock.deadline != nil, rc & 0xFF == SQLITE_INTERRUPT || clock.expired {
            return AtollError(.timeout, "the query ran longer than its budget of \(clock.seconds) s and was stopped", sql: sql)
        }
        switch rc & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED:
            return AtollError(.busy, "the database is locked by another writer: \(message)", sql: sql)
        case SQLITE_READONLY:
            return AtollError(.readOnly, "the realm is read-only: \(message)", sql: sql)
        case SQLITE_CANTOPEN, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_FULL, SQLITE_PERM:
            return AtollError(.file, "\(message) (file '\(path)')", sql: sql)
        case SQLITE_CONSTRAINT where rc == SQLITE_CONSTRAINT | (8 << 8) || rc == SQLITE_CONSTRAINT | (6 << 8):
            return AtollError(.duplicatePrimaryKey, message, sql: sql)
        default:
            return AtollError(.internal, "SQLite error \(rc): \(message)", sql: sql)
        }
    }
}

/// A prepared statement. Bind with 1-based indexes, step, read columns with 0-based indexes.
final class Statement {
    private(set) var stmt: OpaquePointer?
    unowned let connection: Connection

    init(_ stmt: OpaquePointer, connection: Connection) {
        self.stmt = stmt
        self.connection = connection
    }

    deinit { finalize() }

    func finalize() {
        if let stmt { sqlite3_finalize(stmt) }
        stmt = nil
    }

    func reset() {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
    }

    var sql: String { stmt.flatMap { sqlite3_sql($0) }.map { String(cString: $0) } ?? "" }

    // MARK: - Binding

    func bindNull(_ i: Int32) { sqlite3_bind_null(stmt, i) }
    func bind(_ i: Int32, _ v: Int64) { sqlite3_bind_int64(stmt, i, v) }
    func bind(_ i: Int32, _ v: Double) { sqlite3_bind_double(stmt, i, v) }
    func bind(_ i: Int32, _ v: String) {
        // With the byte length, not -1: a string may contain U+0000.
        var v = v
        v.withUTF8 { buf in
            guard let base = buf.baseAddress, buf.count > 0 else {
                sqlite3_bind_text(stmt, i, "", 0, sqliteTransient)
                return
            }
            _ = base.withMemoryRebound(to: CChar.self, capacity: buf.count) {
                sqlite3_bind_text(stmt, i, $0, Int32(buf.count), sqliteTransient)
            }
        }
    }
    func bind(_ i: Int32, _ v: [UInt8]) {
        _ = v.withUnsafeBytes { raw in
            // A zero-length blob must still be a blob, not NULL: bind_zeroblob gives that.
            if raw.count == 0 { sqlite3_bind_zeroblob(stmt, i, 0) } else {
                sqlite3_bind_blob(stmt, i, raw.baseAddress, Int32(raw.count), sqliteTransient)
            }
        }
    }

    /// Binds a value already in its SQL form (see `SQLValue`).
    func bind(_ i: Int32, _ v: SQLValue) {
        switch v {
        case .null: bindNull(i)
        case .integer(let x): bind(i, x)
        case .real(let x): bind(i, x)
        case .text(let x): bind(i, x)
        case .blob(let x): bind(i, x)
        }
    }

    /// Binds as many of `values` as the statement has parameters.
    func bindAvailable(_ values: [SQLValue]) {
        let n = Int(sqlite3_bind_parameter_count(stmt))
        for (k, v) in values.prefix(n).enumerated() { bind(Int32(k + 1), v) }
    }

    func bind(_ values: [SQLValue]) {
        for (k, v) in values.enumerated() { bind(Int32(k + 1), v) }
    }

    // MARK: - Stepping

    /// Steps once: true when a row is ready, false when done.
    @discardableResult
    func step() throws -> Bool {
        let rc = sqlite3_step(stmt)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        let error = connection.error(rc, sql: sql)
        sqlite3_reset(stmt)
        throw error
    }

    /// Runs to completion, ignoring rows.
    func run() throws {
        while try step() {}
    }

    // MARK: - Columns

    func isNull(_ i: Int32) -> Bool { sqlite3_column_type(stmt, i) == SQLITE_NULL }
    func int64(_ i: Int32) -> Int64 { sqlite3_column_int64(stmt, i) }
    func double(_ i: Int32) -> Double { sqlite3_column_double(stmt, i) }
    func string(_ i: Int32) -> String {
        guard let p = sqlite3_column_text(stmt, i) else { return "" }
        let n = Int(sqlite3_column_bytes(stmt, i))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }
    func blob(_ i: Int32) -> [UInt8] {
        let n = Int(sqlite3_column_bytes(stmt, i))
        guard n > 0, let p = sqlite3_column_blob(stmt, i) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    /// The column in its SQL form.
    func sqlValue(_ i: Int32) -> SQLValue {
        switch sqlite3_column_type(stmt, i) {
        case SQLITE_INTEGER: return .integer(int64(i))
        case SQLITE_FLOAT: return .real(double(i))
        case SQLITE_TEXT: return .text(string(i))
        case SQLITE_BLOB: return .blob(blob(i))
        default: return .null
        }
    }
}

/// A value as SQLite stores it; text equals as SQLite compares it, byte for byte (`ExactText`).
enum SQLValue: Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    static func == (a: SQLValue, b: SQLValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.integer(let x), .integer(let y)): return x == y
        case (.real(let x), .real(let y)): return x == y
        case (.text(let x), .text(let y)): return ExactText.same(x, y)
        case (.blob(let x), .blob(let y)): return x == y
        default: return false
        }
    }

    func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .integer(let x): hasher.combine(1); hasher.combine(x)
        case .real(let x): hasher.combine(2); hasher.combine(x)
        case .text(let x): hasher.combine(3); ExactText.hash(x, into: &hasher)
        case .blob(let x): hasher.combine(4); hasher.combine(x)
        }
    }
}

/// Quotes an identifier for SQL (names are validated not to contain quotes, but quote anyway).
func quote(_ identifier: String) -> String {
    guard identifier.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + identifier + "\"" }
    return "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}
