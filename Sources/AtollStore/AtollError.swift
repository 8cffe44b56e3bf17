import Foundation

/// An error from the store: a stable code, a message that names the problem, and, for errors
/// that come from SQLite, the SQL that failed.
///
/// The codes mirror the C ABI's `atoll_status_e` one for one, so that the ABI layer translates
/// without a table of its own.
public struct AtollError: Error, CustomStringConvertible, Sendable, Hashable {
    /// A closed set of failure kinds. Raw values are the C ABI's status codes: never renumber.
    public enum Code: Int32, Sendable, CaseIterable {
        case invalidArgument = 1
        case invalidJSON = 2
        case schema = 3
        case schemaMismatch = 4
        case notFound = 5
        case duplicatePrimaryKey = 6
        case querySyntax = 7
        case queryInvalid = 8
        case notInWrite = 9
        case alreadyInWrite = 10
        case file = 11
        case closed = 12
        case readOnly = 13
        case busy = 14
        case noSuchClass = 15
        case noSuchProperty = 16
        case typeMismatch = 17
        case missingValue = 18
        case `internal` = 19
        /// The migration callback failed (returned an error); the file is left as it was.
        case migration = 20
        // Sync (the C ABI's names; AtollSync reports its own errors, which the ABI maps to these).
        /// Logging in failed, or the user is logged out.
        case auth = 21
        /// A wait (download, upload, subscriptions, connect) did not end in time.
        case timeout = 22
        /// The server could not be reached.
        case network = 23
        /// A subscription with this name exists already.
        case subscriptionExists = 24
        /// The server refused a subscription set.
        case subscription = 25
        /// Any other sync error (its code is in the message).
        case sync = 26
    }

    public var code: Code
    public var message: String
    /// The SQL statement that failed, for errors reported by SQLite.
    public var sql: String?

    public init(_ code: Code, _ message: String, sql: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
    }

    public var description: String {
        if let sql { return "\(message) (SQL: \(sql))" }
        return message
    }

    /// The same error with context put in front of its message ("object 3: ...").
    public func prefixed(_ context: String) -> AtollError {
        var copy = self
        copy.message = "\(context): \(message)"
        return copy
    }
}

extension AtollError: LocalizedError {
    /// The message, as `localizedDescription` gives it (Foundation's default names only the type).
    public var errorDescription: String? { description }
}
