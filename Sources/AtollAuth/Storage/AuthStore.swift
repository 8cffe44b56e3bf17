import AtollJSON
import AtollStore
import Foundation

/// The app API's data, in an Atoll store of its own (`auth.realm` in the service's directory):
/// users, their identities, refresh tokens, API keys and pending confirmation/reset tokens.
/// Secrets are never stored: tokens and keys as SHA-256 hex, passwords as scrypt hashes.
///
/// Every method takes the store's lock for its whole run; `transaction` groups several calls
/// into one atomic write that no other thread's call interleaves with.
final class AuthStore: @unchecked Sendable {
    let store: Store

    static let schema = Schema([
        ObjectSchema(name: "User", primaryKey: "_id", properties: [
            Property(name: "_id", type: .string),
            Property(name: "createdAt", type: .date),
            Property(name: "disabled", type: .bool, defaultValue: .bool(false)),
            // The profile (`data`) as JSON text: its fields come from the providers.
            Property(name: "data", type: .string, defaultValue: .string("{}")),
        ]),
        // `_id` is "<providerType>:<externalId>", so that one external id is one identity.
        ObjectSchema(name: "Identity", primaryKey: "_id", properties: [
            Property(name: "_id", type: .string),
            Property(name: "userId", type: .string, isIndexed: true),
            Property(name: "providerType", type: .string),
            Property(name: "externalId", type: .string),
            Property(name: "email", type: .string, isOptional: true, isIndexed: true),
            Property(name: "passwordHash", type: .string, isOptional: true),
            Property(name: "confirmed", type: .bool, defaultValue: .bool(true)),
            Property(name: "createdAt", type: .date),
        ]),
        ObjectSchema(name: "RefreshToken", primaryKey: "_id", properties: [
            Property(name: "_id", type: .string),          // SHA-256 hex of the token
            Property(name: "userId", type: .string, isIndexed: true),
            Property(name: "createdAt", type: .date),
            Property(name: "expiresAt", type: .date),
        ]),
        ObjectSchema(name: "ApiKey", primaryKey: "_id", properties: [
            Property(name: "_id", type: .string),
            Property(name: "userId", type: .string, isIndexed: true),
            Property(name: "name", type: .string),
            Property(name: "keyHash", type: .string, isIndexed: true),
            Property(name: "disabled", type: .bool, defaultValue: .bool(false)),
            Property(name: "createdAt", type: .date),
        ]),
        // Email confirmation and password reset tokens; `_id` is the token id.
        ObjectSchema(name: "PendingToken", primaryKey: "_id", properties: [
            Property(name: "_id", type: .string),
            Property(name: "purpose", type: .string),      // "confirm" or "reset"
            Property(name: "identityId", type: .string, isIndexed: true),
            Property(name: "tokenHash", type: .string),
            Property(name: "expiresAt", type: .date),
        ]),
    ])

    /// Opens (or creates) the store at `path`.
    /// - Throws: the store's `AtollError` (`.file`, `.schemaMismatch`…).
    init(path: String) throws {
        store = try Store(Configuration(path: path, schema: Self.schema))
    }

    func close() { store.close() }

    /// Runs `body` as one write transaction, holding the store's lock throughout.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try store.withLock { try store.write(body) }
    }

    /// Runs reads under the store's lock, so that they see one state.
    func reading<T>(_ body: () throws -> T) throws -> T {
        try store.withLock(body)
    }

    static func now() -> Timestamp { Timestamp(Date()) }

    static func newId() -> String { ObjectId.generate().hex }

    // MARK: - Users

    struct User {
        var id: String
        var createdAt: Timestamp
        var disabled: Bool
        var data: Document

        init(_ doc: Document) {
            id = doc["_id"]?.stringValue ?? ""
            if case .date(let t)? = doc["createdAt"] { createdAt = t } else { createdAt = Timestamp(milliseconds: 0) }
            disabled = doc["disabled"]?.boolValue ?? false
            let text = doc["data"]?.stringValue ?? "{}"
            data = (try? EJSON.parse(text))?.documentValue ?? [:]
        }
    }

    /// A new user with a new id.
    func createUser(data: Document = [:]) throws -> User {
        let doc: Document = ["_id": .string(Self.newId()), "createdAt": .date(Self.now()), "disabled": .bool(false),
                             "data": .string(EJSON.serialize(.object(data)))]
        try store.create("User", doc)
        return User(doc)
    }

    func user(_ id: String) throws -> User? {
        try store.object("User", primaryKey: .string(id)).map(User.init)
    }

    func users() throws -> [User] {
        try store.objects("User", where: "TRUEPREDICATE SORT(createdAt ASC)").documents().map(User.init)
    }

    func setUserDisabled(_ id: String, _ disabled: Bool) throws {
        try store.create("User", ["_id": .string(id), "disabled": .bool(disabled)], update: .modified)
    }

    func setUserData(_ id: String, _ data: Document) throws {
        try store.create("User", ["_id": .string(id), "data": .string(EJSON.serialize(.object(data)))], update: .modified)
    }

    /// Deletes a user and everything of it: identities, their pending tokens, API keys, refresh
    /// tokens. Call inside `transaction`.
    func deleteUser(_ id: String) throws {
        let key: [Value] = [.string(id)]
        for identity in try identities(ofUser: id) {
            _ = try store.objects("PendingToken", where: "identityId == $0", [.string(identity.key)]).deleteAll()
        }
        _ = try store.objects("Identity", where: "userId == $0", key).deleteAll()
        _ = try store.objects("ApiKey", where: "userId == $0", key).deleteAll()
        _ = try store.objects("RefreshToken", where: "userId == $0", key).deleteAll()
        try store.delete("User", primaryKey: .string(id))
    }

    // MARK: - Identities

    struct Identity {
        var key: String
        var userId: String
        var providerType: String
        var externalId: String
        var email: String?
        var passwordHash: String?
        var confirmed: Bool

        init(_ doc: Document) {
            key = doc["_id"]?.stringValue ?? ""
            userId = doc["userId"]?.stringValue ?? ""
            providerType = doc["providerType"]?.stringValue ?? ""
            externalId = doc["externalId"]?.stringValue ?? ""
            email = doc["email"]?.stringValue
            passwordHash = doc["passwordHash"]?.stringValue
            confirmed = doc["confirmed"]?.boolValue ?? false
        }
    }

    static func identityKey(_ providerType: String, _ externalId: String) -> String { "\(providerType):\(externalId)" }

    func createIdentity(userId: String, providerType: String, externalId: String, email: String? = nil,
                        passwordHash: String? = nil, confirmed: Bool = true) throws -> Identity {
        var doc: Document = ["_id": .string(Self.identityKey(providerType, externalId)), "userId": .string(userId),
                             "providerType": .string(providerType), "externalId": .string(externalId),
                             "confirmed": .bool(confirmed), "createdAt": .date(Self.now())]
        if let email { doc["email"] = .string(email) }
        if let passwordHash { doc["passwordHash"] = .string(passwordHash) }
        try store.create("Identity", doc)
        return Identity(doc)
    }

    func identity(_ providerType: String, _ externalId: String) throws -> Identity? {
        try identity(key: Self.identityKey(providerType, externalId))
    }

    func identity(key: String) throws -> Identity? {
        try store.object("Identity", primaryKey: .string(key)).map(Identity.init)
    }

    /// The email/password identity of an email (already normalized).
    func identity(email: String) throws -> Identity? {
        try store.objects("Identity", where: "email == $0", [.string(email)]).documents(limit: 1).first.map(Identity.init)
    }

    func identities(ofUser userId: String) throws -> [Identity] {
        try store.objects("Identity", where: "userId == $0 SORT(createdAt ASC)", [.string(userId)]).documents().map(Identity.init)
    }

    func updateIdentity(_ key: String, _ fields: Document) throws {
        var doc = fields
        doc["_id"] = .string(key)
        try store.create("Identity", doc, update: .modified)
    }

    // MARK: - Refresh tokens

    func addRefreshToken(hash: String, userId: String, expiresAt: Timestamp) throws {
        try store.create("RefreshToken", ["_id": .string(hash), "userId": .string(userId), "createdAt": .date(Self.now()),
                                          "expiresAt": .date(expiresAt)])
    }

    /// The user and expiry of a stored refresh token.
    func refreshToken(hash: String) throws -> (userId: String, expiresAt: Timestamp)? {
        guard let doc = try store.object("RefreshToken", primaryKey: .string(hash)),
              let userId = doc["userId"]?.stringValue, case .date(let expiry)? = doc["expiresAt"] else { return nil }
        return (userId, expiry)
    }

    /// Deletes a refresh token; whether there was one.
    @discardableResult
    func deleteRefreshToken(hash: String) throws -> Bool {
        guard try store.object("RefreshToken", primaryKey: .string(hash)) != nil else { return false }
        try store.delete("RefreshToken", primaryKey: .string(hash))
        return true
    }

    func deleteRefreshTokens(ofUser userId: String) throws {
        _ = try store.objects("RefreshToken", where: "userId == $0", [.string(userId)]).deleteAll()
    }

    /// Drops expired refresh and pending tokens.
    func deleteExpired() throws {
        let now: [Value] = [.date(Self.now())]
        _ = try store.objects("RefreshToken", where: "expiresAt < $0", now).deleteAll()
        _ = try store.objects("PendingToken", where: "expiresAt < $0", now).deleteAll()
    }

    // MARK: - API keys

    struct APIKey {
        var id: String
        var userId: String
        var name: String
        var disabled: Bool

        init(_ doc: Document) {
            id = doc["_id"]?.stringValue ?? ""
            userId = doc["userId"]?.stringValue ?? ""
            name = doc["name"]?.stringValue ?? ""
            disabled = doc["disabled"]?.boolValue ?? false
        }
    }

    func createAPIKey(userId: String, name: String, keyHash: String) throws -> APIKey {
        let doc: Document = ["_id": .string(Self.newId()), "userId": .string(userId), "name": .string(name),
                             "keyHash": .string(keyHash), "disabled": .bool(false), "createdAt": .date(Self.now())]
        try store.create("ApiKey", doc)
        return APIKey(doc)
    }

    func apiKeys(ofUser userId: String) throws -> [APIKey] {
        try store.objects("ApiKey", where: "userId == $0 SORT(createdAt ASC)", [.string(userId)]).documents().map(APIKey.init)
    }

    /// A key of a user by id (nil when it is another user's).
    func apiKey(id: String, userId: String) throws -> APIKey? {
        guard let doc = try store.object("ApiKey", primaryKey: .string(id)) else { return nil }
        let key = APIKey(doc)
        return key.userId == userId ? key : nil
    }

    func apiKey(hash: String) throws -> APIKey? {
        try store.objects("ApiKey", where: "keyHash == $0", [.string(hash)]).documents(limit: 1).first.map(APIKey.init)
    }

    func setAPIKeyDisabled(_ id: String, _ disabled: Bool) throws {
        try store.create("ApiKey", ["_id": .string(id), "disabled": .bool(disabled)], update: .modified)
    }

    func deleteAPIKey(_ id: String) throws {
        try store.delete("ApiKey", primaryKey: .string(id))
    }

    // MARK: - Confirmation and reset tokens

    struct PendingToken {
        var id: String
        var purpose: String
        var identityKey: String
        var tokenHash: String
        var expiresAt: Timestamp

        init(_ doc: Document) {
            id = doc["_id"]?.stringValue ?? ""
            purpose = doc["purpose"]?.stringValue ?? ""
            identityKey = doc["identityId"]?.stringValue ?? ""
            tokenHash = doc["tokenHash"]?.stringValue ?? ""
            if case .date(let t)? = doc["expiresAt"] { expiresAt = t } else { expiresAt = Timestamp(milliseconds: 0) }
        }
    }

    /// Stores a token for `purpose`, replacing the identity's earlier ones for it.
    func addPendingToken(id: String, purpose: String, identityKey: String, tokenHash: String, expiresAt: Timestamp) throws {
        try deletePendingTokens(identityKey: identityKey, purpose: purpose)
        try store.create("PendingToken", ["_id": .string(id), "purpose": .string(purpose), "identityId": .string(identityKey),
                                          "tokenHash": .string(tokenHash), "expiresAt": .date(expiresAt)])
    }

    func pendingToken(id: String) throws -> PendingToken? {
        try store.object("PendingToken", primaryKey: .string(id)).map(PendingToken.init)
    }

    func deletePendingTokens(identityKey: String, purpose: String) throws {
        _ = try store.objects("PendingToken", where: "identityId == $0 AND purpose == $1",
                              [.string(identityKey), .string(purpose)]).deleteAll()
    }
}
