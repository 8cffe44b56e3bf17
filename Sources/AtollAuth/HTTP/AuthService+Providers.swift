import AtollNet
import AtollStore
import Foundation

// The providers' routes: logins of each provider, and email/password's registration,
// confirmation and password reset.

extension AuthService {
    /// The provider types, as they appear in paths and identities.
    enum Provider {
        static let anonymous = "anon-user"
        static let emailPassword = "local-userpass"
        static let apiKey = "api-key"
        static let customToken = "custom-token"
    }

    /// The path's provider, when it is on.
    /// - Throws: `AuthError(.providerNotFound)` for an unknown provider or one turned off.
    private func provider(_ request: HTTPRequest) throws -> String {
        let name = request.pathParameters["provider"] ?? ""
        let on: Bool
        switch name {
        case Provider.anonymous: on = configuration.anonymous
        case Provider.emailPassword: on = configuration.emailPassword != nil
        case Provider.apiKey: on = configuration.apiKeys
        case Provider.customToken: on = customJWTVerifier != nil
        default: on = false
        }
        guard on else { throw AuthError(.providerNotFound, "authentication provider '\(name)' not found") }
        return name
    }

    /// The email/password configuration, when the path's provider is `local-userpass` and it is on.
    private func emailPasswordProvider(_ request: HTTPRequest) throws -> EmailPasswordConfiguration {
        let name = try provider(request)
        guard name == Provider.emailPassword, let settings = configuration.emailPassword else {
            throw AuthError(.providerNotFound, "authentication provider '\(name)' has no such route")
        }
        return settings
    }

    // MARK: - Logins

    /// `POST auth/providers/:provider/login` → `{"access_token", "refresh_token", "user_id", "device_id"}`.
    func login(_ request: HTTPRequest) throws -> HTTPResponse {
        let name = try provider(request)
        let address = HTTPServer.address(of: request.remoteAddress)
        let guards = self.guards
        do {
            let body = try RequestBody(request, emptyIsObject: name == Provider.anonymous)
            // Each anonymous login is a new user.
            if name == Provider.anonymous { try guards.admitSignup(address: address) }
            let account = name == Provider.emailPassword
                ? try (body.optionalString("username") ?? body.optionalString("email")).map(Self.normalize) : nil
            try guards.admitLogin(account: account, address: address)
            let userId: String
            do {
                switch name {
                case Provider.anonymous: userId = try loginAnonymous()
                case Provider.emailPassword: userId = try loginEmailPassword(body)
                case Provider.apiKey: userId = try loginAPIKey(body)
                default: userId = try loginCustomToken(body)
                }
            } catch let error as AuthError where error.kind == .invalidPassword || error.kind == .invalidCredentials {
                guards.failedLogin(account: account, address: address)
                throw error
            }
            let response = try loginResponse(userId: userId, deviceId: body.deviceId)
            count { $0.logins[name, default: 0] += 1 }
            return Self.json(.object(response))
        } catch let error as AuthError {
            if error.kind != .internal { count { $0.loginFailures += 1 } }
            throw error
        }
    }

    /// A new user with a new anonymous identity, each time.
    private func loginAnonymous() throws -> String {
        try store.transaction {
            let user = try store.createUser()
            _ = try store.createIdentity(userId: user.id, providerType: Provider.anonymous, externalId: AuthRecord.newId())
            return user.id
        }
    }

    /// `{"username" | "email", "password"}`.
    private func loginEmailPassword(_ body: RequestBody) throws -> String {
        guard let name = try body.optionalString("username") ?? body.optionalString("email") else {
            throw AuthError(.badRequest, "missing \"username\" in the body")
        }
        let password = try body.string("password")
        let identity = try store.reading { try store.identity(email: Self.normalize(name)) }
        // An unknown user costs a hash too, so that the time does not tell it from a wrong password.
        guard PasswordHash.verify(password, against: identity?.passwordHash ?? PasswordHash.decoy), let identity else {
            throw AuthError(.invalidPassword, "invalid username/password")
        }
        guard identity.confirmed else {
            throw AuthError(.userNotConfirmed, "the user has not confirmed its email yet")
        }
        return try enabledUser(identity.userId)
    }

    /// `{"key"}`: the user whose enabled API key it is.
    private func loginAPIKey(_ body: RequestBody) throws -> String {
        let key = try body.string("key")
        guard let stored = try store.reading({ try store.apiKey(hash: Crypto.sha256Hex(key)) }), !stored.disabled else {
            throw AuthError(.invalidCredentials, "invalid API key")
        }
        return try enabledUser(stored.userId)
    }

    /// `{"token"}`: a JWT the custom-JWT provider's keys signed. The id claim names the user (the
    /// same id, the same user); the metadata fields are copied into the profile at each login.
    private func loginCustomToken(_ body: RequestBody) throws -> String {
        guard let verifier = customJWTVerifier, let settings = configuration.customJWT else {
            throw AuthError(.providerNotFound, "authentication provider '\(Provider.customToken)' not found")
        }
        let jwt = try JWT(try body.string("token"), failing: .invalidCredentials)
        guard verifier.verifies(jwt) else {
            throw AuthError(.invalidCredentials, "invalid custom token: the signature does not match (expected \(verifier.algorithm))")
        }
        let now = Date().timeIntervalSince1970
        guard let exp = try jwt.seconds("exp", failing: .invalidCredentials, "invalid custom token") else {
            throw AuthError(.invalidCredentials, "invalid custom token: no exp claim")
        }
        guard now < exp else { throw AuthError(.invalidCredentials, "invalid custom token: expired") }
        // A token that stays good for years is one whose theft is forever: refused, whatever signed it.
        guard exp <= now + Self.maxCustomTokenLifetime else {
            throw AuthError(.invalidCredentials, "invalid custom token: exp is more than \(Int(Self.maxCustomTokenLifetime / 86_400)) days ahead")
        }
        if let nbf = try jwt.seconds("nbf", failing: .invalidCredentials, "invalid custom token"), now < nbf {
            throw AuthError(.invalidCredentials, "invalid custom token: not valid yet (nbf)")
        }
        if !settings.audience.isEmpty, !Self.audience(jwt, contains: settings.audience) {
            throw AuthError(.invalidCredentials, "invalid custom token: aud is not \(settings.audience.joined(separator: " or "))")
        }
        if let issuer = settings.issuer, jwt.claims["iss"]?.stringValue != issuer {
            throw AuthError(.invalidCredentials, "invalid custom token: iss is not '\(issuer)'")
        }
        let externalId: String
        switch jwt.claim(settings.idClaim) {
        case .string(let s)? where !s.isEmpty: externalId = s
        case .int(let i)?: externalId = String(i)
        default: throw AuthError(.invalidCredentials, "invalid custom token: no string claim '\(settings.idClaim)' to identify the user")
        }
        var metadata = Document()
        for field in settings.metadataFields {
            if let value = jwt.claim(field.claim), !value.isNull {
                metadata[field.field] = value
            } else if field.required {
                throw AuthError(.invalidCredentials, "invalid custom token: the required claim '\(field.claim)' is missing")
            }
        }
        let userId = try store.transaction {
            if let identity = try store.identity(Provider.customToken, externalId) {
                guard var user = try store.user(identity.userId) else {
                    throw AuthError(.invalidCredentials, "the identity's user no longer exists")
                }
                if !metadata.isEmpty {
                    for (key, value) in metadata { user.data[key] = value }
                    try store.setUserData(user.id, user.data)
                }
                return user.id
            }
            let user = try store.createUser(data: metadata)
            _ = try store.createIdentity(userId: user.id, providerType: Provider.customToken, externalId: externalId)
            return user.id
        }
        return try enabledUser(userId)
    }

    /// The id of a user that exists and is enabled.
    private func enabledUser(_ id: String) throws -> String {
        guard let user = try store.reading({ try store.user(id) }) else {
            throw AuthError(.invalidCredentials, "the user no longer exists")
        }
        guard !user.disabled else { throw AuthError(.userDisabled, "the user is disabled") }
        return user.id
    }

    // MARK: - Email/password users

    /// Passwords are 6 to 128 characters, as App Services'.
    static let passwordLengths = 6...128

    /// How far ahead a custom JWT's `exp` may be: a year. The provider's tokens are for logging
    /// in (the session then lives on refresh tokens), and one good for longer would let whoever
    /// copied it log in long after its holder lost access.
    static let maxCustomTokenLifetime: Double = 366 * 86_400

    /// `POST …/local-userpass/register` `{"email", "password"}` → 201 `{}`.
    func register(_ request: HTTPRequest) throws -> HTTPResponse {
        let settings = try emailPasswordProvider(request)
        let body = try RequestBody(request)
        let email = try Self.validEmail(try body.string("email"))
        let password = try Self.validPassword(try body.string("password"))
        try guards.admitSignup(address: HTTPServer.address(of: request.remoteAddress))
        // Hashed before the transaction: scrypt takes its time, the store's lock should not.
        let hash = try PasswordHash.make(password)
        // The storage refuses an email that has an identity (409 AccountNameInUse), also when
        // another server process registers it at the same moment.
        let pending = try store.transaction { () -> (token: String, id: String)? in
            let user = try store.createUser(data: ["email": .string(email)])
            let identity = try store.createIdentity(userId: user.id, providerType: Provider.emailPassword,
                                                    externalId: AuthRecord.newId(), email: email, passwordHash: hash,
                                                    confirmed: settings.autoConfirm)
            return settings.autoConfirm ? nil : try makePendingToken("confirm", identity, settings)
        }
        count { $0.registrations += 1 }
        if let pending { settings.confirmationHook?(email, pending.token, pending.id) }
        return Self.json(.object([:]), status: .created)
    }

    /// `POST …/local-userpass/confirm` `{"token", "tokenId"}` → `{}`.
    func confirm(_ request: HTTPRequest) throws -> HTTPResponse {
        _ = try emailPasswordProvider(request)
        let body = try RequestBody(request)
        let token = try body.string("token"), tokenId = try body.string("tokenId")
        try store.transaction {
            let identity = try redeem("confirm", token: token, tokenId: tokenId)
            try store.setIdentityConfirmed(identity.key)
        }
        return Self.json(.object([:]))
    }

    /// `POST …/local-userpass/confirm/send` `{"email"}` → `{}`: a new confirmation token to the hook.
    func sendConfirmation(_ request: HTTPRequest) throws -> HTTPResponse {
        let settings = try emailPasswordProvider(request)
        let email = Self.normalize(try RequestBody(request).string("email"))
        let pending = try store.transaction {
            guard let identity = try store.identity(email: email) else { throw AuthError(.userNotFound, "user not found") }
            guard !identity.confirmed else { throw AuthError(.userAlreadyConfirmed, "the user is confirmed already") }
            return try makePendingToken("confirm", identity, settings)
        }
        settings.confirmationHook?(email, pending.token, pending.id)
        return Self.json(.object([:]))
    }

    /// `POST …/local-userpass/reset/send` `{"email"}` → `{}`: a reset token to the reset hook.
    func sendReset(_ request: HTTPRequest) throws -> HTTPResponse {
        let settings = try emailPasswordProvider(request)
        let email = Self.normalize(try RequestBody(request).string("email"))
        let pending = try store.transaction {
            guard let identity = try store.identity(email: email) else { throw AuthError(.userNotFound, "user not found") }
            return try makePendingToken("reset", identity, settings)
        }
        settings.resetHook?(email, pending.token, pending.id)
        return Self.json(.object([:]))
    }

    /// `POST …/local-userpass/reset` `{"token", "tokenId", "password"}` → `{}`. The new password
    /// also confirms the email (the token came through it), and the user's refresh tokens are
    /// revoked: a reset often follows a leak.
    func resetPassword(_ request: HTTPRequest) throws -> HTTPResponse {
        _ = try emailPasswordProvider(request)
        let body = try RequestBody(request)
        let token = try body.string("token"), tokenId = try body.string("tokenId")
        let hash = try PasswordHash.make(try Self.validPassword(try body.string("password")))
        let userId = try store.transaction {
            let identity = try redeem("reset", token: token, tokenId: tokenId)
            try store.setIdentityPasswordHash(identity.key, hash)
            try store.setIdentityConfirmed(identity.key)
            try store.deleteRefreshTokens(ofUser: identity.userId)
            return identity.userId
        }
        sessionsEnded(userId: userId, session: nil)
        return Self.json(.object([:]))
    }

    /// A new token for `purpose` ("confirm", "reset"), replacing the identity's earlier ones;
    /// only its hash is stored. Call inside a transaction.
    private func makePendingToken(_ purpose: String, _ identity: AuthRecord.Identity,
                                  _ settings: EmailPasswordConfiguration) throws -> (token: String, id: String) {
        let token = Crypto.hex(try Crypto.randomBytes(32))
        let id = AuthRecord.newId()
        try store.addPendingToken(id: id, purpose: purpose, identityKey: identity.key, tokenHash: Crypto.sha256Hex(token),
                                  expiresAt: Timestamp(Date().addingTimeInterval(settings.tokenLifetime)))
        return (token, id)
    }

    /// Checks and uses up a pending token; the identity it was made for. Call inside a transaction.
    private func redeem(_ purpose: String, token: String, tokenId: String) throws -> AuthRecord.Identity {
        let invalid = AuthError(.invalidUserpassToken, "invalid token data")
        guard let pending = try store.pendingToken(id: tokenId), pending.purpose == purpose,
              Crypto.constantTimeEqual(Array(Crypto.sha256Hex(token).utf8), Array(pending.tokenHash.utf8)) else { throw invalid }
        try store.deletePendingTokens(identityKey: pending.identityKey, purpose: purpose)
        guard AuthRecord.now() < pending.expiresAt, let identity = try store.identity(key: pending.identityKey) else { throw invalid }
        return identity
    }

    // MARK: - Checks

    /// Emails compare without case.
    static func normalize(_ email: String) -> String { email.lowercased() }

    /// A normalized email, when it looks like one: `local@domain.tld`, at most 254 bytes, no
    /// spaces, quotes or brackets.
    static func validEmail(_ raw: String) throws -> String {
        let email = normalize(raw)
        let invalid = AuthError(.invalidParameter, "invalid email address '\(raw)'")
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard email.utf8.count <= 254, parts.count == 2, !parts[0].isEmpty, parts[0].utf8.count <= 64 else { throw invalid }
        let forbidden = Set(" \t\r\n\"(),:;<>[\\]")
        guard !email.contains(where: { forbidden.contains($0) || $0.isNewline || ($0.asciiValue.map { $0 < 0x20 || $0 == 0x7f } ?? false) })
        else { throw invalid }
        let labels = parts[1].split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, labels.allSatisfy({ !$0.isEmpty && !$0.hasPrefix("-") && !$0.hasSuffix("-") }),
              labels.allSatisfy({ $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" } })
        else { throw invalid }
        return email
    }

    static func validPassword(_ password: String) throws -> String {
        guard passwordLengths.contains(password.count) else {
            throw AuthError(.invalidParameter, "password must be between \(passwordLengths.lowerBound) and \(passwordLengths.upperBound) characters")
        }
        return password
    }
}
