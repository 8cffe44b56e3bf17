import AtollJSON
import AtollNet
import AtollStore
import Foundation
import Synchronization

/// The sync server's app API: users, their credentials and tokens, served over HTTP in the shape
/// of App Services' client API (docs/app-api.md), and checked by the sync server for every
/// connection with `verifyAccessToken`.
///
/// ```swift
/// let auth = try AuthService(configuration: AuthConfiguration(appId: "todo"), directory: dataDirectory)
/// auth.install(on: server)                       // routes under /api/client/v2.0/app/todo/
/// let user = try auth.verifyAccessToken(bearer)  // throws AuthError
/// ```
///
/// Its data lives in a storage: with `init(configuration:directory:)`, in `directory` (`auth.realm`,
/// an Atoll store, and `auth.key`, the 32-byte key that signs access tokens, made on first start
/// with mode 0600); the sync server can keep it in PostgreSQL instead (`PostgresAuthStore`), shared
/// by several server processes. Any thread may call it; route handlers run on several at once.
public final class AuthService: @unchecked Sendable {
    /// The configuration in force (checked): the one it was opened with, or the last one
    /// `reconfigure` put in force.
    public var configuration: AuthConfiguration { settings.withLock { $0.configuration } }
    let store: any AuthStorage
    /// The HMAC-SHA256 key of access tokens.
    let signingKey: [UInt8]
    /// The custom-JWT provider's keys, when it is on.
    var customJWTVerifier: JWTVerifier? { settings.withLock { $0.verifier } }
    private let settings: Mutex<Settings>

    private struct Settings: @unchecked Sendable {
        var configuration: AuthConfiguration
        var verifier: JWTVerifier?
    }
    private let counterStore = Mutex(AuthCounters())
    private let sessionsEndedHandler = Mutex<(@Sendable (_ userId: String, _ session: String?) -> Void)?>(nil)
    private let attemptGuards = Mutex(AttemptGuards(AttemptLimits()))

    /// Limits failed logins and new users (429 with `Retry-After` over them). A service has none
    /// until this is called; the sync server sets its config's.
    public func limitAttempts(_ limits: AttemptLimits) {
        attemptGuards.withLock { $0 = AttemptGuards(limits) }
    }

    var guards: AttemptGuards { attemptGuards.withLock { $0 } }

    /// Opens (creating when needed) the service's data in `directory`.
    /// - Throws: `AtollError(.invalidArgument)` for a bad configuration, `AtollError(.file)` when
    ///   the directory, key or store cannot be made or read, and the store's errors.
    public convenience init(configuration: AuthConfiguration, directory: String) throws {
        // Checked first, so that a bad configuration makes nothing on disk.
        try configuration.validate()
        try self.init(configuration: configuration, storage: try AuthStore(directory: directory))
    }

    /// Opens the service on `storage`, which it owns from then on: `close()` closes it, and so
    /// does a failed initializer. Reads (or makes) the signing key and drops expired tokens.
    /// - Throws: `AtollError(.invalidArgument)` for a bad configuration, the storage's errors.
    package init(configuration: AuthConfiguration, storage: any AuthStorage) throws {
        do {
            try configuration.validate()
            settings = Mutex(Settings(configuration: configuration, verifier: try configuration.customJWT?.verifier()))
            signingKey = try storage.signingKey()
            try storage.transaction { try storage.deleteExpired() }
        } catch {
            storage.close()
            throw error
        }
        store = storage
    }

    /// Puts new settings in force at once (the admin console's auth edits): providers, token
    /// lifetimes, custom-JWT keys. Tokens already issued stay valid until they expire. The
    /// process's hooks (confirmation and reset) are kept when the new settings name none.
    /// - Throws: `AtollError(.invalidArgument)` for a bad configuration; nothing changes then.
    public func reconfigure(_ new: AuthConfiguration) throws {
        var new = new
        try new.validate()
        let verifier = try new.customJWT?.verifier()
        settings.withLock { current in
            if var email = new.emailPassword, let old = current.configuration.emailPassword {
                if email.confirmationHook == nil { email.confirmationHook = old.confirmationHook }
                if email.resetHook == nil { email.resetHook = old.resetHook }
                new.emailPassword = email
            }
            current = Settings(configuration: new, verifier: verifier)
        }
    }

    /// Sets what to do when sessions end through the app API: a logout ends one (`session`, its
    /// refresh token's stored id), a password reset all of the user's (`session` nil). Their
    /// access tokens are refused from then on; the sync server closes the connections they
    /// opened. (The admin API's disable, delete and revoke close those connections themselves.)
    public func onSessionsEnded(_ handler: @escaping @Sendable (_ userId: String, _ session: String?) -> Void) {
        sessionsEndedHandler.withLock { $0 = handler }
    }

    func sessionsEnded(userId: String, session: String?) {
        sessionsEndedHandler.withLock { $0 }?(userId, session)
    }

    /// Closes the store. Later calls fail (`AuthError(.internal)`; over HTTP, 500).
    public func close() { store.close() }

    /// Numbers for metrics, since the service started.
    public var counters: AuthCounters { counterStore.withLock { $0 } }

    func count(_ change: (inout AuthCounters) -> Void) { counterStore.withLock { change(&$0) } }

    // MARK: - Access tokens

    /// A new access token for a user: HS256, `sub`, `aud` (the app id), `typ` "access", `iat`,
    /// `exp`, a token id `jti`, and `sid`, the session it belongs to: the stored id (SHA-256 hex)
    /// of the refresh token it was issued with. The token is good only while that refresh token
    /// is stored, so that a logout, a disable or a delete (each deletes refresh tokens) ends it
    /// for good: enabling the user again does not bring it back.
    func makeAccessToken(userId: String, session: String) -> String {
        let now = Date().timeIntervalSince1970
        let claims: Document = [
            "sub": .string(userId), "aud": .string(configuration.appId), "typ": .string("access"),
            "iat": .int(Int64(now)), "exp": .int(Int64(now + configuration.accessTokenLifetime)),
            "jti": .string(AuthRecord.newId()), "sid": .string(session),
        ]
        return JWT.signHS256(claims, key: signingKey)
    }

    /// The user an access token belongs to, when the token is this service's, unexpired, the
    /// user still exists and is enabled, and the token's session (its refresh token) was not
    /// logged out or revoked.
    ///
    /// ```swift
    /// let user = try auth.verifyAccessToken(token)   // user.id, user.data
    /// ```
    /// - Throws: `AuthError` `.invalidSession` (malformed, forged, another app's, the user deleted),
    ///   `.expired`, `.userDisabled`; `.internal` when the store fails.
    public func verifyAccessToken(_ token: String) throws -> AuthenticatedUser {
        try verifyAccess(token).user
    }

    /// What a verified access token grants, and until when: the sync server keeps a connection
    /// open only as long as the token it was opened with (its expiry, its session).
    public struct AccessGrant: Sendable {
        public var user: AuthenticatedUser
        /// The token's session (`sid`): its refresh token's stored id.
        public var session: String
        /// The token's `exp`, seconds since 1970.
        public var expiresAt: Double
    }

    /// `verifyAccessToken`, with the token's session and expiry.
    /// - Throws: as `verifyAccessToken`.
    public func verifyAccess(_ token: String) throws -> AccessGrant {
        do {
            let (userId, session, expiresAt) = try accessTokenSubject(token)
            return try store.reading {
                guard let user = try store.user(userId) else {
                    throw AuthError(.invalidSession, "invalid session: the token's user no longer exists")
                }
                guard !user.disabled else { throw AuthError(.userDisabled, "the user is disabled") }
                guard let stored = try store.refreshToken(hash: session), stored.userId == userId else {
                    throw AuthError(.invalidSession, "invalid session: the token's session was logged out or revoked")
                }
                return AccessGrant(user: try authenticatedUser(user), session: session, expiresAt: expiresAt)
            }
        } catch {
            let failure = AuthError.wrap(error)
            if failure.kind != .internal { count { $0.invalidTokens += 1 } }
            throw failure
        }
    }

    /// The `sub` and `sid` of a valid access token (signature, `typ`, `aud` and `exp` checked;
    /// not the user, not the session).
    private func accessTokenSubject(_ token: String) throws -> (user: String, session: String, expiresAt: Double) {
        let jwt = try JWT(token, failing: .invalidSession)
        guard JWTVerifier.hs256([signingKey]).verifies(jwt) else {
            throw AuthError(.invalidSession, "invalid session: the access token's signature does not match")
        }
        guard jwt.claims["typ"]?.stringValue == "access" else {
            throw AuthError(.invalidSession, "invalid session: not an access token")
        }
        guard Self.audience(jwt, contains: [configuration.appId]) else {
            throw AuthError(.invalidSession, "invalid session: the token is for another app")
        }
        guard let exp = try jwt.seconds("exp", failing: .invalidSession, "invalid session") else {
            throw AuthError(.invalidSession, "invalid session: the token has no exp")
        }
        guard Date().timeIntervalSince1970 < exp else { throw AuthError(.expired, "invalid session: access token expired") }
        guard let sub = jwt.claims["sub"]?.stringValue, !sub.isEmpty else {
            throw AuthError(.invalidSession, "invalid session: the token has no sub")
        }
        guard let sid = jwt.claims["sid"]?.stringValue, !sid.isEmpty else {
            throw AuthError(.invalidSession, "invalid session: the token names no session (sid); refresh it")
        }
        return (sub, sid, exp)
    }

    /// Whether a token's `aud` (a string or an array of them) names one of `accepted`.
    static func audience(_ jwt: JWT, contains accepted: [String]) -> Bool {
        switch jwt.claims["aud"] {
        case .string(let aud)?: return accepted.contains(aud)
        case .list(let items)?: return items.contains { $0.stringValue.map(accepted.contains) ?? false }
        default: return false
        }
    }

    // MARK: - Refresh tokens

    /// A new refresh token (32 random bytes, base64url) for a user; only its SHA-256 is stored.
    /// Call inside a transaction.
    func makeRefreshToken(userId: String) throws -> String {
        let token = Base64URL.encode(try Crypto.randomBytes(32))
        let expiry = Date().addingTimeInterval(configuration.refreshTokenLifetime)
        try store.addRefreshToken(hash: Crypto.sha256Hex(token), userId: userId, expiresAt: Timestamp(expiry))
        return token
    }

    /// The user of a stored, unexpired refresh token (an expired one is deleted).
    /// - Throws: `AuthError` `.invalidSession`, `.expired`, `.userDisabled`.
    func refreshTokenUser(_ token: String) throws -> AuthRecord.User {
        let hash = Crypto.sha256Hex(token)
        return try store.transaction {
            guard let stored = try store.refreshToken(hash: hash) else {
                throw AuthError(.invalidSession, "invalid session: unknown or revoked refresh token")
            }
            guard AuthRecord.now() < stored.expiresAt else {
                try store.deleteRefreshToken(hash: hash)
                throw AuthError(.expired, "invalid session: refresh token expired")
            }
            guard let user = try store.user(stored.userId) else {
                throw AuthError(.invalidSession, "invalid session: the token's user no longer exists")
            }
            guard !user.disabled else { throw AuthError(.userDisabled, "the user is disabled") }
            return user
        }
    }

    /// The body of a successful login: new access and refresh tokens for the user.
    func loginResponse(userId: String, deviceId: String) throws -> Document {
        let refresh = try store.transaction { try makeRefreshToken(userId: userId) }
        let session = Crypto.sha256Hex(refresh)
        return ["access_token": .string(makeAccessToken(userId: userId, session: session)), "refresh_token": .string(refresh),
                "user_id": .string(userId), "device_id": .string(deviceId)]
    }

    // MARK: - Users

    /// A user by id, or nil.
    /// - Throws: `AuthError(.internal)` when the store fails.
    public func user(id: String) throws -> AuthenticatedUser? {
        do {
            return try store.reading { try store.user(id).map(authenticatedUser) }
        } catch { throw AuthError.wrap(error) }
    }

    /// Every user, oldest first.
    /// - Throws: `AuthError(.internal)` when the store fails.
    public func allUsers() throws -> [AuthenticatedUser] {
        do {
            return try store.reading { try store.users().map(authenticatedUser) }
        } catch { throw AuthError.wrap(error) }
    }

    /// Disables or enables a user. Disabling revokes its refresh tokens; its access tokens stop
    /// verifying at once. Enabling does not bring the refresh tokens back.
    /// - Throws: `AuthError(.userNotFound)`, `.internal`.
    public func setDisabled(_ userId: String, _ disabled: Bool) throws {
        do {
            try store.transaction {
                guard try store.user(userId) != nil else { throw AuthError(.userNotFound, "no user with id '\(userId)'") }
                try store.setUserDisabled(userId, disabled)
                if disabled { try store.deleteRefreshTokens(ofUser: userId) }
            }
        } catch { throw AuthError.wrap(error) }
    }

    /// Deletes a user with its identities, API keys and refresh tokens; its access tokens stop
    /// verifying at once.
    /// - Throws: `AuthError(.userNotFound)`, `.internal`.
    public func deleteUser(_ userId: String) throws {
        do {
            try store.transaction {
                guard try store.user(userId) != nil else { throw AuthError(.userNotFound, "no user with id '\(userId)'") }
                try store.deleteUser(userId)
            }
        } catch { throw AuthError.wrap(error) }
    }

    func authenticatedUser(_ user: AuthRecord.User) throws -> AuthenticatedUser {
        let identities = try store.identities(ofUser: user.id).map { UserIdentity(id: $0.externalId, providerType: $0.providerType) }
        return AuthenticatedUser(id: user.id, provider: identities.first?.providerType ?? "", identities: identities,
                                 data: user.data, customData: [:], disabled: user.disabled)
    }
}
