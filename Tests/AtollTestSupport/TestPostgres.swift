import AtollPostgres
import Foundation

/// The PostgreSQL the sync tests may run on (docs/testing.md): `make test` starts a throwaway
/// cluster and runs the sync suites a second time with `ATOLL_SYNC_STORE=postgres` and
/// `ATOLL_TEST_POSTGRES=postgresql://…` set.
public enum TestPostgres {
    /// Whether the sync servers of this run keep their data in PostgreSQL.
    public static var syncOnPostgres: Bool { ProcessInfo.processInfo.environment["ATOLL_SYNC_STORE"] == "postgres" }

    /// The URL of a new, empty database for one server (or several sharing it) when the run is on
    /// PostgreSQL; nil when it is on SQLite.
    /// - Throws: when the run is on PostgreSQL and no cluster is reachable.
    public static func syncStoreURL() throws -> String? {
        guard syncOnPostgres else { return nil }
        return try freshDatabase()
    }

    /// A new database on the cluster of `ATOLL_TEST_POSTGRES`.
    public static func freshDatabase() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["ATOLL_TEST_POSTGRES"], var parts = URLComponents(string: url) else {
            throw PostgresError("ATOLL_SYNC_STORE=postgres needs ATOLL_TEST_POSTGRES=postgresql://… (make test sets both)")
        }
        let name = "atoll_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try PostgresConnection(url: url)
        defer { admin.close() }
        try admin.execute("CREATE DATABASE \(name)")
        parts.path = "/" + name
        guard let fresh = parts.string else { throw PostgresError("cannot make a URL for database \(name) from \(url)") }
        return fresh
    }

    /// Forgets an app's sync data in a database (history, objects, client files, schema), as a
    /// server whose data was lost; its users stay.
    public static func forgetSyncData(_ url: String, app: String) throws {
        let db = try PostgresConnection(url: url)
        defer { db.close() }
        try db.transaction {
            for table in ["atoll_sync_history", "atoll_sync_objects", "atoll_sync_files"] {
                try db.execute("DELETE FROM \(table) WHERE app = $1", [app])
            }
            try db.execute("UPDATE atoll_sync_apps SET schema = NULL, schema_version = schema_version + 1 WHERE app = $1", [app])
        }
    }
}
