import AtollStore

/// A user of the app as the sync server sees it: who the token belongs to.
public struct AuthenticatedUser: Sendable, Hashable {
    /// The user id: 24 hexadecimal digits (an ObjectId), the JWT's `sub`.
    public var id: String
    /// The provider type of the user's first identity ("anon-user", "local-userpass",
    /// "custom-token").
    public var provider: String
    /// The ways the user logs in, oldest first.
    public var identities: [UserIdentity]
    /// The profile: `email` for email/password users, the mapped claims (`metadataFields`) for
    /// custom-JWT users.
    public var data: Document
    /// Custom user data (App Services' `custom_data`): empty for now, reserved.
    public var customData: Document
    /// Whether the user is disabled (`AuthService.setDisabled`): it cannot log in, and its
    /// tokens do not verify.
    public var disabled: Bool

    /// A user as the service describes it (tests and other hosts may build one).
    public init(id: String, provider: String, identities: [UserIdentity], data: Document = [:],
                customData: Document = [:], disabled: Bool = false) {
        self.id = id
        self.provider = provider
        self.identities = identities
        self.data = data
        self.customData = customData
        self.disabled = disabled
    }
}

/// One way a user logs in: the id the provider knows the user by, and the provider's type.
public struct UserIdentity: Sendable, Hashable {
    /// The provider's id of the user: an ObjectId for anonymous and email/password identities,
    /// the JWT's id claim for custom-JWT ones.
    public var id: String
    /// "anon-user", "local-userpass" or "custom-token".
    public var providerType: String

    /// An identity of a provider.
    public init(id: String, providerType: String) {
        self.id = id
        self.providerType = providerType
    }
}

/// Numbers for metrics, counted since the service started.
public struct AuthCounters: Sendable, Hashable {
    /// Successful logins per provider type ("anon-user", "local-userpass", "api-key", "custom-token").
    public var logins: [String: Int] = [:]
    /// Logins refused: wrong credentials, unconfirmed or disabled users, bad tokens.
    public var loginFailures = 0
    /// New email/password users.
    public var registrations = 0
    /// Access tokens issued from a refresh token (`POST auth/session`).
    public var tokenRefreshes = 0
    /// Requests refused for a missing, invalid or expired token (HTTP routes and `verifyAccessToken`).
    public var invalidTokens = 0

    /// All zero.
    public init() {}
}
