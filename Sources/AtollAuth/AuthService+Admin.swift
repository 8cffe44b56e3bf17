import AtollStore

/// A user as the admin console shows it: what `AuthenticatedUser` has, and when it was made,
/// its emails and how many API keys and refresh tokens (sessions) it has.
public struct AdminUser: Sendable {
    public var id: String
    public var createdAt: Timestamp
    public var disabled: Bool
    public var identities: [UserIdentity]
    /// The email of its email/password identity, if it has one.
    public var email: String?
    public var data: Document
    public var apiKeyCount: Int
    public var refreshTokenCount: Int
}

/// A user's API key without the key (which is shown only when it is made).
public struct AdminAPIKey: Sendable {
    public var id: String
    public var name: String
    public var disabled: Bool
}

/// What the admin console and admin API (docs/admin-api.md) need of the app API's users beyond
/// `allUsers`, `setDisabled` and `deleteUser`.
extension AuthService {
    /// Every user, oldest first, with emails and counts; `search` (when not empty) keeps those
    /// whose id, email or provider contains it, without case.
    /// - Throws: `AuthError(.internal)` when the store fails.
    public func adminUsers(search: String = "") throws -> [AdminUser] {
        let needle = search.lowercased()
        do {
            return try store.reading {
                try store.users().compactMap { user -> AdminUser? in
                    let identities = try store.identities(ofUser: user.id)
                    let email = identities.compactMap(\.email).first
                    if !needle.isEmpty {
                        let haystack = [user.id, email ?? ""] + identities.map(\.providerType)
                        guard haystack.contains(where: { $0.lowercased().contains(needle) }) else { return nil }
                    }
                    let keys = try store.apiKeys(ofUser: user.id).count
                    let tokens = try store.refreshTokenCount(ofUser: user.id)
                    return AdminUser(id: user.id, createdAt: user.createdAt, disabled: user.disabled,
                                     identities: identities.map { UserIdentity(id: $0.externalId, providerType: $0.providerType) },
                                     email: email, data: user.data, apiKeyCount: keys, refreshTokenCount: tokens)
                }
            }
        } catch { throw AuthError.wrap(error) }
    }

    /// Revokes every refresh token of a user: it must log in again once its access token expires.
    /// - Throws: `AuthError(.userNotFound)`, `.internal`.
    public func revokeSessions(_ userId: String) throws {
        do {
            try store.transaction {
                guard try store.user(userId) != nil else { throw AuthError(.userNotFound, "no user with id '\(userId)'") }
                try store.deleteRefreshTokens(ofUser: userId)
            }
        } catch { throw AuthError.wrap(error) }
    }

    /// A user's API keys, oldest first.
    /// - Throws: `AuthError(.userNotFound)`, `.internal`.
    public func apiKeys(ofUser userId: String) throws -> [AdminAPIKey] {
        do {
            return try store.reading {
                guard try store.user(userId) != nil else { throw AuthError(.userNotFound, "no user with id '\(userId)'") }
                return try store.apiKeys(ofUser: userId).map { AdminAPIKey(id: $0.id, name: $0.name, disabled: $0.disabled) }
            }
        } catch { throw AuthError.wrap(error) }
    }

    /// Deletes one API key of a user.
    /// - Throws: `AuthError(.apiKeyNotFound)`, `.internal`.
    public func deleteAPIKey(_ userId: String, _ keyId: String) throws {
        do {
            try store.transaction {
                guard try store.apiKey(id: keyId, userId: userId) != nil else {
                    throw AuthError(.apiKeyNotFound, "no API key '\(keyId)' of user '\(userId)'")
                }
                try store.deleteAPIKey(keyId)
            }
        } catch { throw AuthError.wrap(error) }
    }
}
