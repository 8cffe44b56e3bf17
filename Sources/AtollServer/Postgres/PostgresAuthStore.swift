import AtollAuth
import AtollPostgres
import AtollStore
import Foundation

/// The app API's data in PostgreSQL (docs/app-api.md, "Storage"), shared by every `atoll-server`
/// process that points at the same database: a client logs in on one and uses its tokens on any
/// other. Users, identities, refresh tokens, API keys, pending tokens and the signing key live in
/// the `atoll_auth_*` tables, every row keyed by its app id, so several apps share one database.
///
/// ```swift
/// let auth = try PostgresAuthStore.service(configuration: AuthConfiguration(appId: "todo"),
///                                          url: "postgresql://atoll@db.example/atoll")
/// ```
///
/// One connection per app and process, used by one call at a time (a lock serialises the
/// threads). A `transaction` body runs in one SERIALIZABLE transaction on it, so what the SQLite
/// store's lock gives within one process holds across processes: a transaction that conflicts
/// with another process's is rolled back and its body run again (up to `maxConflictRetries`
/// times), and unique constraints keep an identity key, an email and a user's API key names to
/// one row even when two processes write them at the same moment. A connection that broke (the
/// server restarted, a failover) is replaced once per call and the call run again, except when
/// it broke during COMMIT: then whether the change was made is unknown, and the call fails.
public final class PostgresAuthStore: AuthStorage, @unchecked Sendable {
    /// The app whose rows this store reads and writes.
    public let appId: String
    private let url: String
    /// Serialises the use of `connection`. Recursive: the calls inside a `transaction` body run
    /// on the transaction in progress.
    private let lock = NSRecursiveLock()
    /// nil before the first call after a broken connection (and once closed). Guarded by `lock`.
    private var connection: PostgresConnection?
    private var closed = false
    /// How deep the thread holding `lock` is in `transaction` or `reading` bodies.
    private var depth = 0

    /// How many times a transaction that lost a conflict with another process is run again.
    static let maxConflictRetries = 10

    /// An `AuthService` whose data is in the PostgreSQL database at `url` (libpq's
    /// `postgresql://user:password@host:port/db?…` or `key=value` form): the tables are made
    /// when the database has none, and the app's signing key when it has none.
    /// - Throws: `AtollError(.invalidArgument)` for a bad configuration, `PostgresError` when the
    ///   database cannot be reached or refuses.
    public static func service(configuration: AuthConfiguration, url: String) throws -> AuthService {
        // Checked first, so that a bad configuration connects to nothing.
        try configuration.validate()
        return try AuthService(configuration: configuration, storage: PostgresAuthStore(appId: configuration.appId, url: url))
    }

    /// Connects, and makes the tables when the database has none.
    /// - Throws: `PostgresError`.
    package init(appId: String, url: String) throws {
        self.appId = appId
        self.url = url
        let connection = try Self.connect(url, appId: appId)
        try Self.createTables(on: connection)
        self.connection = connection
    }

    public func close() {
        lock.lock()
        defer { lock.unlock() }
        closed = true
        connection?.close()
        connection = nil
    }

    /// What the connection is called in `pg_stat_activity` (PostgreSQL keeps 63 bytes of it).
    package static func applicationName(appId: String) -> String { "atoll-auth \(appId)" }

    private static func connect(_ url: String, appId: String) throws -> PostgresConnection {
        let connection = try PostgresConnection(url: url)
        try connection.execute("SELECT set_config('application_name', $1, false)", [applicationName(appId: appId)])
        return connection
    }

    // MARK: - Transactions

    private enum Mode {
        case write, read

        var begin: String {
            switch self {
            case .write: return "BEGIN ISOLATION LEVEL SERIALIZABLE"
            case .read: return "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
            }
        }
    }

    package func transaction<T>(_ body: () throws -> T) throws -> T { try run(.write, body) }

    package func reading<T>(_ body: () throws -> T) throws -> T { try run(.read, body) }

    /// Runs `body` in a transaction of its own, or inside the one in progress on this thread.
    /// Runs it again after a serialization failure or a deadlock, and once after the connection
    /// broke (not during COMMIT).
    private func run<T>(_ mode: Mode, _ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        if depth > 0 { return try body() }
        var conflicts = 0, reconnected = false
        while true {
            let connection = try openConnection()
            do {
                return try attempt(mode, on: connection, body)
            } catch let error as PostgresError {
                if !connection.isOpen {
                    self.connection = nil
                    guard !reconnected else { throw error }
                    reconnected = true
                } else if ["40001", "40P01"].contains(error.sqlState), conflicts < Self.maxConflictRetries {
                    conflicts += 1
                    // A few milliseconds, growing and jittered, so that the two sides part.
                    usleep(UInt32(conflicts) * UInt32.random(in: 500...2_000))
                } else if error.sqlState == "23503" {
                    throw AuthError(.userNotFound, "the user no longer exists: it was deleted meanwhile")
                } else {
                    throw error
                }
            }
        }
    }

    /// BEGIN, `body`, COMMIT; ROLLBACK when `body` throws.
    /// - Throws: what `body` throws, `PostgresError`, and `AtollError(.network)` when the
    ///   connection broke during COMMIT (the change may or may not have been made).
    private func attempt<T>(_ mode: Mode, on connection: PostgresConnection, _ body: () throws -> T) throws -> T {
        try connection.execute(mode.begin)
        let value: T
        do {
            depth += 1
            defer { depth -= 1 }
            value = try body()
        } catch {
            if connection.isOpen { _ = try? connection.execute("ROLLBACK") }
            throw error
        }
        do {
            try connection.execute("COMMIT")
        } catch let error as PostgresError where !connection.isOpen {
            self.connection = nil
            throw AtollError(.network, "the connection to PostgreSQL broke during COMMIT; the change may or may not have been made: \(error.message)")
        }
        return value
    }

    /// The connection, made again when the last one broke.
    /// - Throws: `AtollError(.closed)` once closed, `PostgresError` when it cannot connect.
    private func openConnection() throws -> PostgresConnection {
        guard !closed else { throw AtollError(.closed, "the auth storage of app '\(appId)' is closed") }
        if let connection { return connection }
        let fresh = try Self.connect(url, appId: appId)
        connection = fresh
        return fresh
    }

    /// Runs a statement that reads, in the transaction in progress (or a read-only one).
    private func query(_ sql: String, _ parameters: [String?]) throws -> [Row] {
        try run(.read) { try openConnection().execute(sql, [appId] + parameters).map(Row.init) }
    }

    /// Runs a statement that writes, in the transaction in progress (or one of its own).
    @discardableResult
    private func update(_ sql: String, _ parameters: [String?]) throws -> [Row] {
        try run(.write) { try openConnection().execute(sql, [appId] + parameters).map(Row.init) }
    }

    /// A result row; its columns are those the statement selected, as libpq's text.
    private struct Row {
        let values: [String?]

        init(_ values: [String?]) { self.values = values }

        func optional(_ i: Int) -> String? { i < values.count ? values[i] : nil }
        func text(_ i: Int) -> String { optional(i) ?? "" }
        func bool(_ i: Int) -> Bool { text(i) == "t" }
        /// A column selected with `millis(_:)`.
        func timestamp(_ i: Int) -> Timestamp { Timestamp(milliseconds: Int64(text(i)) ?? 0) }
    }

    /// SQL of a `timestamptz` column read as milliseconds since 1970.
    private static func millis(_ column: String) -> String { "(extract(epoch FROM \(column)) * 1000)::bigint" }

    /// SQL of parameter `$n`, milliseconds since 1970, as a `timestamptz`.
    private static func at(_ n: Int) -> String { "to_timestamp($\(n)::bigint / 1000.0)" }

    private static func text(_ t: Timestamp) -> String { String(t.milliseconds) }

    // MARK: - Tables

    /// The tables, in one transaction. Every statement says IF NOT EXISTS: a process that finds
    /// them made by another goes on.
    static let schema = """
        CREATE TABLE IF NOT EXISTS atoll_auth_signing_keys (
            app_id text PRIMARY KEY,
            key bytea NOT NULL CHECK (octet_length(key) = \(AuthRecord.signingKeyLength)),
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE IF NOT EXISTS atoll_auth_users (
            app_id text NOT NULL,
            id text NOT NULL,
            created_at timestamptz NOT NULL,
            disabled boolean NOT NULL DEFAULT false,
            data text NOT NULL DEFAULT '{}',
            seq bigint GENERATED ALWAYS AS IDENTITY,
            PRIMARY KEY (app_id, id)
        );
        CREATE INDEX IF NOT EXISTS atoll_auth_users_created ON atoll_auth_users (app_id, created_at, seq);
        CREATE TABLE IF NOT EXISTS atoll_auth_identities (
            app_id text NOT NULL,
            key text NOT NULL,
            user_id text NOT NULL,
            provider_type text NOT NULL,
            external_id text NOT NULL,
            email text,
            password_hash text,
            confirmed boolean NOT NULL,
            created_at timestamptz NOT NULL,
            seq bigint GENERATED ALWAYS AS IDENTITY,
            PRIMARY KEY (app_id, key),
            UNIQUE (app_id, email),
            FOREIGN KEY (app_id, user_id) REFERENCES atoll_auth_users (app_id, id) ON DELETE CASCADE
        );
        CREATE INDEX IF NOT EXISTS atoll_auth_identities_user ON atoll_auth_identities (app_id, user_id);
        CREATE TABLE IF NOT EXISTS atoll_auth_refresh_tokens (
            app_id text NOT NULL,
            hash text NOT NULL,
            user_id text NOT NULL,
            created_at timestamptz NOT NULL,
            expires_at timestamptz NOT NULL,
            PRIMARY KEY (app_id, hash),
            FOREIGN KEY (app_id, user_id) REFERENCES atoll_auth_users (app_id, id) ON DELETE CASCADE
        );
        CREATE INDEX IF NOT EXISTS atoll_auth_refresh_tokens_user ON atoll_auth_refresh_tokens (app_id, user_id);
        CREATE INDEX IF NOT EXISTS atoll_auth_refresh_tokens_expiry ON atoll_auth_refresh_tokens (app_id, expires_at);
        CREATE TABLE IF NOT EXISTS atoll_auth_api_keys (
            app_id text NOT NULL,
            id text NOT NULL,
            user_id text NOT NULL,
            name text NOT NULL,
            key_hash text NOT NULL,
            disabled boolean NOT NULL DEFAULT false,
            created_at timestamptz NOT NULL,
            seq bigint GENERATED ALWAYS AS IDENTITY,
            PRIMARY KEY (app_id, id),
            UNIQUE (app_id, user_id, name),
            UNIQUE (app_id, key_hash),
            FOREIGN KEY (app_id, user_id) REFERENCES atoll_auth_users (app_id, id) ON DELETE CASCADE
        );
        CREATE TABLE IF NOT EXISTS atoll_auth_pending_tokens (
            app_id text NOT NULL,
            id text NOT NULL,
            purpose text NOT NULL,
            identity_key text NOT NULL,
            token_hash text NOT NULL,
            expires_at timestamptz NOT NULL,
            PRIMARY KEY (app_id, id),
            UNIQUE (app_id, identity_key, purpose),
            FOREIGN KEY (app_id, identity_key) REFERENCES atoll_auth_identities (app_id, key) ON DELETE CASCADE
        );
        CREATE INDEX IF NOT EXISTS atoll_auth_pending_tokens_expiry ON atoll_auth_pending_tokens (app_id, expires_at);
        """

    /// The key of the advisory lock taken while the tables are made: "atoll_au" in ASCII.
    static let schemaLock: Int64 = 0x6174_6f6c_6c5f_6175

    /// Makes the tables when the database has none. The last table is made in the same
    /// transaction as the others, so finding it means finding them all.
    private static func createTables(on connection: PostgresConnection) throws {
        guard try connection.value("SELECT to_regclass('atoll_auth_pending_tokens') IS NULL") == "t" else { return }
        try connection.transaction {
            // Processes starting at once on an empty database: one makes the tables while the
            // others wait here, then find them (IF NOT EXISTS) instead of colliding in the catalog.
            try connection.execute("SELECT pg_advisory_xact_lock(\(schemaLock))")
            try connection.execute(schema)
        }
    }

    // MARK: - The signing key

    /// The app's key; the first process to store one wins (INSERT … ON CONFLICT DO NOTHING), and
    /// every process reads the winner's.
    package func signingKey() throws -> [UInt8] {
        let fresh = try AuthRecord.newSigningKey()
        let stored = try run(.write) { () -> String? in
            try update("INSERT INTO atoll_auth_signing_keys (app_id, key) VALUES ($1, decode($2, 'hex')) ON CONFLICT (app_id) DO NOTHING",
                       [Self.hex(fresh)])
            return try query("SELECT encode(key, 'hex') FROM atoll_auth_signing_keys WHERE app_id = $1", []).first?.optional(0)
        }
        guard let stored, let key = Self.bytes(hex: stored), key.count == AuthRecord.signingKeyLength else {
            throw AtollError(.internal, "the signing key of app '\(appId)' in atoll_auth_signing_keys is missing or not \(AuthRecord.signingKeyLength) bytes")
        }
        return key
    }

    private static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// The bytes of hex text, or nil for anything else.
    private static func bytes(hex: String) -> [UInt8]? {
        var out = [UInt8](), high: UInt8?
        for c in hex.unicodeScalars {
            guard let nibble = Character(c).hexDigitValue.map(UInt8.init) else { return nil }
            if let h = high {
                out.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return high == nil ? out : nil
    }

    package func deleteExpired() throws {
        let now = Self.text(AuthRecord.now())
        try run(.write) {
            try update("DELETE FROM atoll_auth_refresh_tokens WHERE app_id = $1 AND expires_at < \(Self.at(2))", [now])
            try update("DELETE FROM atoll_auth_pending_tokens WHERE app_id = $1 AND expires_at < \(Self.at(2))", [now])
        }
    }

    // MARK: - Users

    private static let userColumns = "id, \(millis("created_at")), disabled, data"

    private static func user(_ row: Row) -> AuthRecord.User {
        AuthRecord.User(id: row.text(0), createdAt: row.timestamp(1), disabled: row.bool(2), data: AuthRecord.profile(row.text(3)))
    }

    package func createUser(data: Document) throws -> AuthRecord.User {
        let user = AuthRecord.User(id: AuthRecord.newId(), createdAt: AuthRecord.now(), disabled: false, data: data)
        try update("INSERT INTO atoll_auth_users (app_id, id, created_at, data) VALUES ($1, $2, \(Self.at(3)), $4)",
                   [user.id, Self.text(user.createdAt), AuthRecord.profileText(data)])
        return user
    }

    package func user(_ id: String) throws -> AuthRecord.User? {
        try query("SELECT \(Self.userColumns) FROM atoll_auth_users WHERE app_id = $1 AND id = $2", [id]).first.map(Self.user)
    }

    package func users() throws -> [AuthRecord.User] {
        try query("SELECT \(Self.userColumns) FROM atoll_auth_users WHERE app_id = $1 ORDER BY created_at, seq", []).map(Self.user)
    }

    package func setUserDisabled(_ id: String, _ disabled: Bool) throws {
        try update("UPDATE atoll_auth_users SET disabled = $3 WHERE app_id = $1 AND id = $2", [id, disabled ? "true" : "false"])
    }

    package func setUserData(_ id: String, _ data: Document) throws {
        try update("UPDATE atoll_auth_users SET data = $3 WHERE app_id = $1 AND id = $2", [id, AuthRecord.profileText(data)])
    }

    /// Its identities, their pending tokens, API keys and refresh tokens go with it (ON DELETE
    /// CASCADE).
    package func deleteUser(_ id: String) throws {
        try update("DELETE FROM atoll_auth_users WHERE app_id = $1 AND id = $2", [id])
    }

    // MARK: - Identities

    private static let identityColumns = "key, user_id, provider_type, external_id, email, password_hash, confirmed"

    private static func identity(_ row: Row) -> AuthRecord.Identity {
        AuthRecord.Identity(key: row.text(0), userId: row.text(1), providerType: row.text(2), externalId: row.text(3),
                            email: row.optional(4), passwordHash: row.optional(5), confirmed: row.bool(6))
    }

    package func createIdentity(userId: String, providerType: String, externalId: String, email: String?,
                                passwordHash: String?, confirmed: Bool) throws -> AuthRecord.Identity {
        let identity = AuthRecord.Identity(key: AuthRecord.identityKey(providerType, externalId), userId: userId,
                                           providerType: providerType, externalId: externalId, email: email,
                                           passwordHash: passwordHash, confirmed: confirmed)
        return try run(.write) {
            // A key or email taken by a committed row: nothing inserted, and the transaction goes
            // on to say which. Taken by another process's transaction in progress: this waits for
            // it, and when it commits, fails with a serialization failure, and `run` runs the
            // whole body again, now seeing that row.
            let inserted = try update("""
                INSERT INTO atoll_auth_identities (app_id, key, user_id, provider_type, external_id, email, password_hash, confirmed, created_at)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, \(Self.at(9))) ON CONFLICT DO NOTHING RETURNING 1
                """, [identity.key, userId, providerType, externalId, email, passwordHash, confirmed ? "true" : "false",
                      Self.text(AuthRecord.now())])
            guard inserted.isEmpty else { return identity }
            if try self.identity(key: identity.key) != nil { throw AuthRecord.identityExists(identity.key) }
            throw AuthRecord.emailInUse
        }
    }

    package func identity(key: String) throws -> AuthRecord.Identity? {
        try query("SELECT \(Self.identityColumns) FROM atoll_auth_identities WHERE app_id = $1 AND key = $2", [key])
            .first.map(Self.identity)
    }

    package func identity(email: String) throws -> AuthRecord.Identity? {
        try query("SELECT \(Self.identityColumns) FROM atoll_auth_identities WHERE app_id = $1 AND email = $2", [email])
            .first.map(Self.identity)
    }

    package func identities(ofUser userId: String) throws -> [AuthRecord.Identity] {
        try query("SELECT \(Self.identityColumns) FROM atoll_auth_identities WHERE app_id = $1 AND user_id = $2 ORDER BY created_at, seq",
                  [userId]).map(Self.identity)
    }

    package func setIdentityConfirmed(_ key: String) throws {
        try update("UPDATE atoll_auth_identities SET confirmed = true WHERE app_id = $1 AND key = $2", [key])
    }

    package func setIdentityPasswordHash(_ key: String, _ passwordHash: String) throws {
        try update("UPDATE atoll_auth_identities SET password_hash = $3 WHERE app_id = $1 AND key = $2", [key, passwordHash])
    }

    // MARK: - Refresh tokens

    package func addRefreshToken(hash: String, userId: String, expiresAt: Timestamp) throws {
        try update("INSERT INTO atoll_auth_refresh_tokens (app_id, hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, \(Self.at(4)), \(Self.at(5)))",
                   [hash, userId, Self.text(AuthRecord.now()), Self.text(expiresAt)])
    }

    package func refreshToken(hash: String) throws -> (userId: String, expiresAt: Timestamp)? {
        try query("SELECT user_id, \(Self.millis("expires_at")) FROM atoll_auth_refresh_tokens WHERE app_id = $1 AND hash = $2", [hash])
            .first.map { ($0.text(0), $0.timestamp(1)) }
    }

    @discardableResult
    package func deleteRefreshToken(hash: String) throws -> Bool {
        try !update("DELETE FROM atoll_auth_refresh_tokens WHERE app_id = $1 AND hash = $2 RETURNING 1", [hash]).isEmpty
    }

    package func deleteRefreshTokens(ofUser userId: String) throws {
        try update("DELETE FROM atoll_auth_refresh_tokens WHERE app_id = $1 AND user_id = $2", [userId])
    }

    package func refreshTokenCount(ofUser userId: String) throws -> Int {
        Int(try query("SELECT count(*) FROM atoll_auth_refresh_tokens WHERE app_id = $1 AND user_id = $2", [userId])
            .first?.text(0) ?? "") ?? 0
    }

    // MARK: - API keys

    private static let apiKeyColumns = "id, user_id, name, disabled"

    private static func apiKey(_ row: Row) -> AuthRecord.APIKey {
        AuthRecord.APIKey(id: row.text(0), userId: row.text(1), name: row.text(2), disabled: row.bool(3))
    }

    package func createAPIKey(userId: String, name: String, keyHash: String) throws -> AuthRecord.APIKey {
        let key = AuthRecord.APIKey(id: AuthRecord.newId(), userId: userId, name: name, disabled: false)
        return try run(.write) {
            // As in createIdentity: a name taken by a committed row inserts nothing.
            let inserted = try update("""
                INSERT INTO atoll_auth_api_keys (app_id, id, user_id, name, key_hash, created_at)
                VALUES ($1, $2, $3, $4, $5, \(Self.at(6))) ON CONFLICT DO NOTHING RETURNING 1
                """, [key.id, userId, name, keyHash, Self.text(AuthRecord.now())])
            guard inserted.isEmpty else { return key }
            if try apiKeys(ofUser: userId).contains(where: { $0.name == name }) { throw AuthRecord.apiKeyExists(name) }
            throw AtollError(.duplicatePrimaryKey, "an API key with id '\(key.id)' or that key exists already")
        }
    }

    package func apiKeys(ofUser userId: String) throws -> [AuthRecord.APIKey] {
        try query("SELECT \(Self.apiKeyColumns) FROM atoll_auth_api_keys WHERE app_id = $1 AND user_id = $2 ORDER BY created_at, seq",
                  [userId]).map(Self.apiKey)
    }

    package func apiKey(id: String, userId: String) throws -> AuthRecord.APIKey? {
        try query("SELECT \(Self.apiKeyColumns) FROM atoll_auth_api_keys WHERE app_id = $1 AND id = $2 AND user_id = $3", [id, userId])
            .first.map(Self.apiKey)
    }

    package func apiKey(hash: String) throws -> AuthRecord.APIKey? {
        try query("SELECT \(Self.apiKeyColumns) FROM atoll_auth_api_keys WHERE app_id = $1 AND key_hash = $2", [hash])
            .first.map(Self.apiKey)
    }

    package func setAPIKeyDisabled(_ id: String, _ disabled: Bool) throws {
        try update("UPDATE atoll_auth_api_keys SET disabled = $3 WHERE app_id = $1 AND id = $2", [id, disabled ? "true" : "false"])
    }

    package func deleteAPIKey(_ id: String) throws {
        try update("DELETE FROM atoll_auth_api_keys WHERE app_id = $1 AND id = $2", [id])
    }

    // MARK: - Confirmation and reset tokens

    /// One row per identity and purpose (a unique constraint): a new token replaces the earlier
    /// one, also when two processes make one at the same moment.
    package func addPendingToken(id: String, purpose: String, identityKey: String, tokenHash: String, expiresAt: Timestamp) throws {
        try update("""
            INSERT INTO atoll_auth_pending_tokens (app_id, id, purpose, identity_key, token_hash, expires_at)
            VALUES ($1, $2, $3, $4, $5, \(Self.at(6)))
            ON CONFLICT (app_id, identity_key, purpose)
            DO UPDATE SET id = EXCLUDED.id, token_hash = EXCLUDED.token_hash, expires_at = EXCLUDED.expires_at
            """, [id, purpose, identityKey, tokenHash, Self.text(expiresAt)])
    }

    package func pendingToken(id: String) throws -> AuthRecord.PendingToken? {
        try query("SELECT id, purpose, identity_key, token_hash, \(Self.millis("expires_at")) FROM atoll_auth_pending_tokens WHERE app_id = $1 AND id = $2",
                  [id]).first.map {
            AuthRecord.PendingToken(id: $0.text(0), purpose: $0.text(1), identityKey: $0.text(2), tokenHash: $0.text(3),
                                    expiresAt: $0.timestamp(4))
        }
    }

    package func deletePendingTokens(identityKey: String, purpose: String) throws {
        try update("DELETE FROM atoll_auth_pending_tokens WHERE app_id = $1 AND identity_key = $2 AND purpose = $3", [identityKey, purpose])
    }
}
