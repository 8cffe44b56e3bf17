import AtollJSON
import AtollStore
import Foundation

/// Where an `AuthService` keeps its data: users, their identities, refresh tokens, API keys,
/// pending confirmation/reset tokens, and the key that signs access tokens. `AuthStore` keeps
/// them in the app's directory (SQLite); the sync server's `PostgresAuthStore` keeps them in
/// PostgreSQL, where several server processes share them.
///
/// Secrets are never stored: tokens and keys as SHA-256 hex, passwords as scrypt hashes.
///
/// Any thread may call a storage. `transaction` runs its body as one atomic write that no other
/// call interleaves with, `reading` its body on one state of the data; a method called outside
/// both runs on its own. A body may run more than once: a storage shared by several processes
/// runs it again after a conflict with another process's transaction, so a body only reads and
/// writes the storage (and makes any random values it needs itself); what it returns is that
/// of the run that committed.
///
/// Package-wide rather than public: it is the seam between AtollAuth and the server's
/// PostgreSQL backend, not an API for apps.
package protocol AuthStorage: AnyObject, Sendable {
    /// The 32-byte HMAC-SHA256 key of access tokens: the stored one, or a new one
    /// (`AuthRecord.newSigningKey()`) stored once, even when several processes start at once.
    /// - Throws: the storage's errors (`AtollError(.file)` for a key file that cannot be made or
    ///   read).
    func signingKey() throws -> [UInt8]

    /// Closes the storage; later calls fail.
    func close()

    func transaction<T>(_ body: () throws -> T) throws -> T
    func reading<T>(_ body: () throws -> T) throws -> T

    /// Drops expired refresh and pending tokens.
    func deleteExpired() throws

    // MARK: - Users

    /// A new user with a new id.
    func createUser(data: Document) throws -> AuthRecord.User
    func user(_ id: String) throws -> AuthRecord.User?
    /// Every user, oldest first.
    func users() throws -> [AuthRecord.User]
    func setUserDisabled(_ id: String, _ disabled: Bool) throws
    func setUserData(_ id: String, _ data: Document) throws
    /// Deletes a user and everything of it: identities, their pending tokens, API keys, refresh
    /// tokens.
    func deleteUser(_ id: String) throws

    // MARK: - Identities

    /// A new identity, keyed `"<providerType>:<externalId>"`.
    /// - Throws: `AtollError(.duplicatePrimaryKey)` when that key has an identity already,
    ///   `AuthError(.accountNameInUse)` when `email` has one.
    func createIdentity(userId: String, providerType: String, externalId: String, email: String?,
                        passwordHash: String?, confirmed: Bool) throws -> AuthRecord.Identity
    func identity(key: String) throws -> AuthRecord.Identity?
    /// The identity of an email (already normalized).
    func identity(email: String) throws -> AuthRecord.Identity?
    /// A user's identities, oldest first.
    func identities(ofUser userId: String) throws -> [AuthRecord.Identity]
    func setIdentityConfirmed(_ key: String) throws
    func setIdentityPasswordHash(_ key: String, _ passwordHash: String) throws

    // MARK: - Refresh tokens

    func addRefreshToken(hash: String, userId: String, expiresAt: Timestamp) throws
    /// The user and expiry of a stored refresh token.
    func refreshToken(hash: String) throws -> (userId: String, expiresAt: Timestamp)?
    /// Deletes a refresh token; whether there was one.
    @discardableResult
    func deleteRefreshToken(hash: String) throws -> Bool
    func deleteRefreshTokens(ofUser userId: String) throws
    func refreshTokenCount(ofUser userId: String) throws -> Int

    // MARK: - API keys

    /// A new key of a user, with a new id.
    /// - Throws: `AuthError(.apiKeyAlreadyExists)` when the user has a key of that name.
    func createAPIKey(userId: String, name: String, keyHash: String) throws -> AuthRecord.APIKey
    /// A user's keys, oldest first.
    func apiKeys(ofUser userId: String) throws -> [AuthRecord.APIKey]
    /// A key of a user by id (nil when it is another user's).
    func apiKey(id: String, userId: String) throws -> AuthRecord.APIKey?
    func apiKey(hash: String) throws -> AuthRecord.APIKey?
    func setAPIKeyDisabled(_ id: String, _ disabled: Bool) throws
    func deleteAPIKey(_ id: String) throws

    // MARK: - Confirmation and reset tokens

    /// Stores a token for `purpose`, replacing the identity's earlier one for it.
    func addPendingToken(id: String, purpose: String, identityKey: String, tokenHash: String, expiresAt: Timestamp) throws
    func pendingToken(id: String) throws -> AuthRecord.PendingToken?
    func deletePendingTokens(identityKey: String, purpose: String) throws
}

extension AuthStorage {
    func createUser() throws -> AuthRecord.User { try createUser(data: [:]) }

    /// A new identity without email or password, confirmed.
    func createIdentity(userId: String, providerType: String, externalId: String) throws -> AuthRecord.Identity {
        try createIdentity(userId: userId, providerType: providerType, externalId: externalId, email: nil,
                           passwordHash: nil, confirmed: true)
    }

    func identity(_ providerType: String, _ externalId: String) throws -> AuthRecord.Identity? {
        try identity(key: AuthRecord.identityKey(providerType, externalId))
    }
}

/// The rows of an `AuthStorage`, and what every storage makes the same way.
package enum AuthRecord {
    package struct User: Sendable {
        package var id: String
        package var createdAt: Timestamp
        package var disabled: Bool
        /// The profile: its fields come from the providers.
        package var data: Document

        package init(id: String, createdAt: Timestamp, disabled: Bool, data: Document) {
            self.id = id
            self.createdAt = createdAt
            self.disabled = disabled
            self.data = data
        }
    }

    package struct Identity: Sendable {
        /// `"<providerType>:<externalId>"`: one external id is one identity.
        package var key: String
        package var userId: String
        package var providerType: String
        package var externalId: String
        package var email: String?
        package var passwordHash: String?
        package var confirmed: Bool

        package init(key: String, userId: String, providerType: String, externalId: String, email: String?,
                     passwordHash: String?, confirmed: Bool) {
            self.key = key
            self.userId = userId
            self.providerType = providerType
            self.externalId = externalId
            self.email = email
            self.passwordHash = passwordHash
            self.confirmed = confirmed
        }
    }

    package struct APIKey: Sendable {
        package var id: String
        package var userId: String
        package var name: String
        package var disabled: Bool

        package init(id: String, userId: String, name: String, disabled: Bool) {
            self.id = id
            self.userId = userId
            self.name = name
            self.disabled = disabled
        }
    }

    package struct PendingToken: Sendable {
        package var id: String
        /// "confirm" or "reset".
        package var purpose: String
        package var identityKey: String
        package var tokenHash: String
        package var expiresAt: Timestamp

        package init(id: String, purpose: String, identityKey: String, tokenHash: String, expiresAt: Timestamp) {
            self.id = id
            self.purpose = purpose
            self.identityKey = identityKey
            self.tokenHash = tokenHash
            self.expiresAt = expiresAt
        }
    }

    package static func now() -> Timestamp { Timestamp(Date()) }

    /// The length of the signing key: 32 bytes, the output size of SHA-256 (RFC 2104's advice).
    package static let signingKeyLength = 32

    /// A new signing key, from OpenSSL's CSPRNG.
    /// - Throws: `AuthError(.internal)` when OpenSSL cannot give the bytes (it never should).
    package static func newSigningKey() throws -> [UInt8] { try Crypto.randomBytes(signingKeyLength) }

    /// A new id: 24 hex digits (an ObjectId).
    package static func newId() -> String { ObjectId.generate().hex }

    package static func identityKey(_ providerType: String, _ externalId: String) -> String { "\(providerType):\(externalId)" }

    /// A profile as stored: Extended JSON text.
    package static func profileText(_ data: Document) -> String { EJSON.serialize(.object(data)) }

    /// A stored profile; text that is not a JSON object reads as an empty one.
    package static func profile(_ text: String) -> Document { (try? EJSON.parse(text))?.documentValue ?? [:] }

    /// What `createIdentity` throws for an email that has an identity.
    package static let emailInUse = AuthError(.accountNameInUse, "name already in use")

    /// What `createIdentity` throws for a key that has an identity.
    package static func identityExists(_ key: String) -> AtollError {
        AtollError(.duplicatePrimaryKey, "an object of class 'Identity' with primary key '\(key)' exists already")
    }

    /// What `createAPIKey` throws for a name the user has a key of.
    package static func apiKeyExists(_ name: String) -> AuthError {
        AuthError(.apiKeyAlreadyExists, "an API key named '\(name)' exists already")
    }
}
