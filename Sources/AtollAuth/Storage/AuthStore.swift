import AtollJSON
import AtollStore
import Foundation
import Glibc

/// The app API's data in the service's directory: an Atoll store of its own, `auth.realm`, with
/// users, their identities, refresh tokens, API keys and pending confirmation/reset tokens; and
/// `auth.key`, the 32-byte key that signs access tokens (mode 0600).
///
/// Every method takes the store's lock for its whole run; `transaction` groups several calls
/// into one atomic write that no other thread's call interleaves with (so a body runs once).
final class AuthStore: AuthStorage, @unchecked Sendable {
    let store: Store
    let directory: String

    /// The file names in the service's directory.
    static let storeFile = "auth.realm"
    static let keyFile = "auth.key"

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

    /// Opens (or creates) the directory (mode 0700) and the store in it (mode 0600).
    /// - Throws: `AtollError(.file)` when the directory cannot be made, the store's `AtollError`
    ///   (`.file`, `.schemaMismatch`…).
    init(directory: String) throws {
        // Password hashes and token hashes: mode 0600 in a directory of mode 0700.
        try PrivateFiles.directory(directory, tighten: true)
        self.directory = directory
        let path = (directory as NSString).appendingPathComponent(Self.storeFile)
        try PrivateFiles.file(path)
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

    // MARK: - The signing key

    /// Reads `auth.key`, or makes it with `RAND_bytes` (mode 0600) when there is none. `O_EXCL`
    /// keeps two processes starting at once from writing different keys.
    func signingKey() throws -> [UInt8] {
        let path = (directory as NSString).appendingPathComponent(Self.keyFile)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            defer { Glibc.close(fd) }
            let key = try AuthRecord.newSigningKey()
            let written = key.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written == key.count, fsync(fd) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(path)
                throw AtollError(.file, "cannot write the signing key '\(path)': \(reason)")
            }
            return key
        }
        guard errno == EEXIST else {
            throw AtollError(.file, "cannot create the signing key '\(path)': \(String(cString: strerror(errno)))")
        }
        guard let data = FileManager.default.contents(atPath: path), data.count == AuthRecord.signingKeyLength else {
            throw AtollError(.file, "the signing key '\(path)' is unreadable or not 32 bytes (delete it to make a new one; every token it signed becomes invalid)")
        }
        return Array(data)
    }

    // MARK: - Users

    static func user(_ doc: Document) -> AuthRecord.User {
        AuthRecord.User(id: doc["_id"]?.stringValue ?? "", createdAt: timestamp(doc["createdAt"]),
                        disabled: doc["disabled"]?.boolValue ?? false, data: AuthRecord.profile(doc["data"]?.stringValue ?? "{}"))
    }

    static func timestamp(_ value: Value?) -> Timestamp {
        if case .date(let t)? = value { return t }
        return Timestamp(milliseconds: 0)
    }

    func createUser(data: Document) throws -> AuthRecord.User {
        let doc: Document = ["_id": .string(AuthRecord.newId()), "createdAt": .date(AuthRecord.now()), "disabled": .bool(false),
                             "data": .string(AuthRecord.profileText(data))]
        try store.create("User", doc)
        return Self.user(doc)
    }

    func user(_ id: String) throws -> AuthRecord.User? {
        try store.object("User", primaryKey: .string(id)).map(Self.user)
    }

    func users() throws -> [AuthRecord.User] {
        try store.objects("User", where: "TRUEPREDICATE SORT(createdAt ASC)").documents().map(Self.user)
    }

    func setUserDisabled(_ id: String, _ disabled: Bool) throws {
        try store.create("User", ["_id": .string(id), "disabled": .bool(disabled)], update: .modified)
    }

    func setUserData(_ id: String, _ data: Document) throws {
        try store.create("User", ["_id": .string(id), "data": .string(AuthRecord.profileText(data))], update: .modified)
    }

    /// Call inside `transaction`.
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

    static func identity(_ doc: Document) -> AuthRecord.Identity {
        AuthRecord.Identity(key: doc["_id"]?.stringValue ?? "", userId: doc["userId"]?.stringValue ?? "",
                            providerType: doc["providerType"]?.stringValue ?? "", externalId: doc["externalId"]?.stringValue ?? "",
                            email: doc["email"]?.stringValue, passwordHash: doc["passwordHash"]?.stringValue,
                            confirmed: doc["confirmed"]?.boolValue ?? false)
    }

    /// Call inside `transaction`: the checks and the write are one.
    func createIdentity(userId: String, providerType: String, externalId: String, email: String?,
                        passwordHash: String?, confirmed: Bool) throws -> AuthRecord.Identity {
        let key = AuthRecord.identityKey(providerType, externalId)
        guard try identity(key: key) == nil else { throw AuthRecord.identityExists(key) }
        if let email, try identity(email: email) != nil { throw AuthRecord.emailInUse }
        var doc: Document = ["_id": .string(key), "userId": .string(userId),
                             "providerType": .string(providerType), "externalId": .string(externalId),
                             "confirmed": .bool(confirmed), "createdAt": .date(AuthRecord.now())]
        if let email { doc["email"] = .string(email) }
        if let passwordHash { doc["passwordHash"] = .string(passwordHash) }
        try store.create("Identity", doc)
        return Self.identity(doc)
    }

    func identity(key: String) throws -> AuthRecord.Identity? {
        try store.object("Identity", primaryKey: .string(key)).map(Self.identity)
    }

    func identity(email: String) throws -> AuthRecord.Identity? {
        try store.objects("Identity", where: "email == $0", [.string(email)]).documents(limit: 1).first.map(Self.identity)
    }

    func identities(ofUser userId: String) throws -> [AuthRecord.Identity] {
        try store.objects("Identity", where: "userId == $0 SORT(createdAt ASC)", [.string(userId)]).documents().map(Self.identity)
    }

    func setIdentityConfirmed(_ key: String) throws {
        try store.create("Identity", ["_id": .string(key), "confirmed": .bool(true)], update: .modified)
    }

    func setIdentityPasswordHash(_ key: String, _ passwordHash: String) throws {
        try store.create("Identity", ["_id": .string(key), "passwordHash": .string(passwordHash)], update: .modified)
    }

    // MARK: - Refresh tokens

    func addRefreshToken(hash: String, userId: String, expiresAt: Timestamp) throws {
        try store.create("RefreshToken", ["_id": .string(hash), "userId": .string(userId), "createdAt": .date(AuthRecord.now()),
                                          "expiresAt": .date(expiresAt)])
    }

    func refreshToken(hash: String) throws -> (userId: String, expiresAt: Timestamp)? {
        guard let doc = try store.object("RefreshToken", primaryKey: .string(hash)),
              let userId = doc["userId"]?.stringValue, case .date(let expiry)? = doc["expiresAt"] else { return nil }
        return (userId, expiry)
    }

    @discardableResult
    func deleteRefreshToken(hash: String) throws -> Bool {
        guard try store.object("RefreshToken", primaryKey: .string(hash)) != nil else { return false }
        try store.delete("RefreshToken", primaryKey: .string(hash))
        return true
    }

    func deleteRefreshTokens(ofUser userId: String) throws {
        _ = try store.objects("RefreshToken", where: "userId == $0", [.string(userId)]).deleteAll()
    }

    func refreshTokenCount(ofUser userId: String) throws -> Int {
        try store.objects("RefreshToken", where: "userId == $0", [.string(userId)]).count()
    }

    func deleteExpired() throws {
        let now: [Value] = [.date(AuthRecord.now())]
        _ = try store.objects("RefreshToken", where: "expiresAt < $0", now).deleteAll()
        _ = try store.objects("PendingToken", where: "expiresAt < $0", now).deleteAll()
    }

    // MARK: - API keys

    static func apiKey(_ doc: Document) -> AuthRecord.APIKey {
        AuthRecord.APIKey(id: doc["_id"]?.stringValue ?? "", userId: doc["userId"]?.stringValue ?? "",
                          name: doc["name"]?.stringValue ?? "", disabled: doc["disabled"]?.boolValue ?? false)
    }

    /// Call inside `transaction`: the check and the write are one.
    func createAPIKey(userId: String, name: String, keyHash: String) throws -> AuthRecord.APIKey {
        guard try !apiKeys(ofUser: userId).contains(where: { $0.name == name }) else { throw AuthRecord.apiKeyExists(name) }
        let doc: Document = ["_id": .string(AuthRecord.newId()), "userId": .string(userId), "name": .string(name),
                             "keyHash": .string(keyHash), "disabled": .bool(false), "createdAt": .date(AuthRecord.now())]
        try store.create("ApiKey", doc)
        return Self.apiKey(doc)
    }

    func apiKeys(ofUser userId: String) throws -> [AuthRecord.APIKey] {
        try store.objects("ApiKey", where: "userId == $0 SORT(createdAt ASC)", [.string(userId)]).documents().map(Self.apiKey)
    }

    func apiKey(id: String, userId: String) throws -> AuthRecord.APIKey? {
        guard let doc = try store.object("ApiKey", primaryKey: .string(id)) else { return nil }
        let key = Self.apiKey(doc)
        return key.userId == userId ? key : nil
    }

    func apiKey(hash: String) throws -> AuthRecord.APIKey? {
        try store.objects("ApiKey", where: "keyHash == $0", [.string(hash)]).documents(limit: 1).first.map(Self.apiKey)
    }

    func setAPIKeyDisabled(_ id: String, _ disabled: Bool) throws {
        try store.create("ApiKey", ["_id": .string(id), "disabled": .bool(disabled)], update: .modified)
    }

    func deleteAPIKey(_ id: String) throws {
        try store.delete("ApiKey", primaryKey: .string(id))
    }

    // MARK: - Confirmation and reset tokens

    /// Call inside `transaction`.
    func addPendingToken(id: String, purpose: String, identityKey: String, tokenHash: String, expiresAt: Timestamp) throws {
        try deletePendingTokens(identityKey: identityKey, purpose: purpose)
        try store.create("PendingToken", ["_id": .string(id), "purpose": .string(purpose), "identityId": .string(identityKey),
                                          "tokenHash": .string(tokenHash), "expiresAt": .date(expiresAt)])
    }

    func pendingToken(id: String) throws -> AuthRecord.PendingToken? {
        guard let doc = try store.object("PendingToken", primaryKey: .string(id)) else { return nil }
        return AuthRecord.PendingToken(id: doc["_id"]?.stringValue ?? "", purpose: doc["purpose"]?.stringValue ?? "",
                                       identityKey: doc["identityId"]?.stringValue ?? "", tokenHash: doc["tokenHash"]?.stringValue ?? "",
                                       expiresAt: Self.timestamp(doc["expiresAt"]))
    }

    func deletePendingTokens(identityKey: String, purpose: String) throws {
        _ = try store.objects("PendingToken", where: "identityId == $0 AND purpose == $1",
                              [.string(identityKey), .string(purpose)]).deleteAll()
    }
}
