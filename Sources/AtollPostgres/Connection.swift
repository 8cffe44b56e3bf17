import CLibPQ
import Foundation

/// An error from PostgreSQL or from libpq: the server's message and, when the server sent one,
/// its SQLSTATE (`40001` serialization failure, `23505` unique violation…).
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var sqlState: String?

    public init(_ message: String, sqlState: String? = nil) {
        self.message = message
        self.sqlState = sqlState
    }

    public var description: String {
        sqlState.map { "PostgreSQL \($0): \(message)" } ?? "PostgreSQL: \(message)"
    }
}

/// A notification received on a channel the connection listens to (`LISTEN`).
public struct PostgresNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String
}

/// One connection to PostgreSQL through libpq. Parameters and results travel as text (libpq's
/// text format); NULL is nil. A connection is used by one thread at a time: callers serialise.
public final class PostgresConnection: @unchecked Sendable {
    private var conn: OpaquePointer?
    /// The URL it was opened with, without its password (for messages).
    public let displayURL: String

    /// Connects to `url` (`postgresql://user:password@host:port/db?…`, or libpq's `key=value`
    /// form).
    /// - Throws: `PostgresError` with libpq's reason when the server cannot be reached or refuses.
    public init(url: String) throws {
        displayURL = Self.withoutPassword(url)
        conn = PQconnectdb(url)
        guard let conn, PQstatus(conn) == CONNECTION_OK else {
            let reason = conn.map { String(cString: PQerrorMessage($0)).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "out of memory"
            if let conn { PQfinish(conn) }
            self.conn = nil
            throw PostgresError("cannot connect to \(displayURL): \(reason)")
        }
        // Notices (NOTICE: relation already exists…) are not errors; keep them off stderr.
        PQsetNoticeProcessor(conn, { _, _ in }, nil)
    }

    deinit { close() }

    public func close() {
        if let conn { PQfinish(conn) }
        conn = nil
    }

    /// Whether the connection is still up (false after the server went away).
    public var isOpen: Bool { conn.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// Runs one statement with `$1…` parameters and returns its rows (empty for a command).
    /// - Throws: `PostgresError` with the server's message and SQLSTATE.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [String?] = []) throws -> [[String?]] {
        guard let conn else { throw PostgresError("the connection to \(displayURL) is closed") }
        let result: OpaquePointer?
        if parameters.isEmpty {
            result = PQexec(conn, sql)
        } else {
            // Each parameter as a C string kept alive for the call.
            let copies = parameters.map { $0.map { strdup($0) } ?? nil }
            defer { for c in copies { free(c) } }
            result = copies.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
                PQexecParams(conn, sql, Int32(parameters.count), nil, values.baseAddress, nil, nil, 0)
            }
        }
        guard let result else { throw PostgresError(String(cString: PQerrorMessage(conn))) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return []
        case PGRES_TUPLES_OK:
            let rows = PQntuples(result), columns = PQnfields(result)
            var out = [[String?]]()
            out.reserveCapacity(Int(rows))
            for r in 0..<rows {
                var row = [String?]()
                row.reserveCapacity(Int(columns))
                for c in 0..<columns {
                    row.append(PQgetisnull(result, r, c) == 1 ? nil : String(cString: PQgetvalue(result, r, c)))
                }
                out.append(row)
            }
            return out
        default:
            let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PostgresError(message.isEmpty ? String(cString: PQerrorMessage(conn)) : message, sqlState: state)
        }
    }

    /// The first column of the first row, or nil.
    public func value(_ sql: String, _ parameters: [String?] = []) throws -> String? {
        try execute(sql, parameters).first?.first ?? nil
    }

    /// Runs `body` in a transaction (`BEGIN` … `COMMIT`), rolled back when it throws.
    public func transaction<T>(_ isolation: String? = nil, _ body: () throws -> T) throws -> T {
        try execute(isolation.map { "BEGIN ISOLATION LEVEL \($0)" } ?? "BEGIN")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            if isOpen { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Waits up to `timeout` seconds for notifications on the channels this connection listens
    /// to, and returns those that arrived (possibly none).
    /// - Throws: `PostgresError` when the connection broke.
    public func notifications(waiting timeout: Double) throws -> [PostgresNotification] {
        guard let conn else { throw PostgresError("the connection to \(displayURL) is closed") }
        var out = takeNotifications()
        if !out.isEmpty { return out }
        var fd = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
        let ready = poll(&fd, 1, Int32(timeout * 1000))
        if ready < 0, errno != EINTR { throw PostgresError("poll: \(String(cString: strerror(errno)))") }
        guard PQconsumeInput(conn) == 1 else {
            throw PostgresError("the connection to \(displayURL) broke: " + String(cString: PQerrorMessage(conn)).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        out = takeNotifications()
        return out
    }

    private func takeNotifications() -> [PostgresNotification] {
        guard let conn else { return [] }
        var out = [PostgresNotification]()
        while let n = PQnotifies(conn) {
            out.append(PostgresNotification(channel: String(cString: n.pointee.relname), payload: String(cString: n.pointee.extra)))
            PQfreemem(n)
        }
        return out
    }

    /// `url` with any password replaced by `***`.
    static func withoutPassword(_ url: String) -> String {
        guard var parts = URLComponents(string: url), parts.password != nil else { return url }
        parts.password = "***"
        return parts.string ?? url
    }
}

extension PostgresError: LocalizedError {
    /// The message, as `localizedDescription` gives it (Foundation's default names only the type).
    public var errorDescription: String? { description }
}
