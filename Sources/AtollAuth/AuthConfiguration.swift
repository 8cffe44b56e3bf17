import AtollStore
import Foundation

/// What the app API serves: the app id in its paths, which providers log users in, and how long
/// tokens live. Build it in code, or from the server's config file (`init(appId:json:)`).
///
/// ```swift
/// var configuration = AuthConfiguration(appId: "todo-abcde")
/// configuration.emailPassword?.autoConfirm = false
/// configuration.emailPassword?.confirmationHook = { email, token, tokenId in mail(email, token, tokenId) }
/// configuration.customJWT = CustomJWTConfiguration(algorithm: .hs256, signingKeys: [secret])
/// ```
public struct AuthConfiguration: Sendable {
    /// The `:app` of every path (`/api/client/v2.0/app/:app/…`) and the `aud` of access tokens.
    public var appId: String
    /// Anonymous logins (`anon-user`).
    public var anonymous = true
    /// Email/password users (`local-userpass`); nil turns the provider off.
    public var emailPassword: EmailPasswordConfiguration? = EmailPasswordConfiguration()
    /// User API keys: the `auth/api_keys` routes and `api-key` logins.
    public var apiKeys = true
    /// Logins with a JWT from another identity provider (`custom-token`); nil (the default) is off.
    public var customJWT: CustomJWTConfiguration?
    /// Seconds an access token is valid.
    public var accessTokenLifetime: Double = 30 * 60
    /// Seconds a refresh token is valid.
    public var refreshTokenLifetime: Double = 60 * 24 * 3600

    /// The defaults: anonymous, email/password (auto-confirmed) and API keys on, custom JWT off.
    public init(appId: String) { self.appId = appId }

    /// The longest lifetime allowed: 100 years keeps every expiry a valid date.
    static let maxLifetime: Double = 100 * 365 * 24 * 3600

    /// Checks values the types cannot: lifetimes, the custom-JWT keys.
    /// - Throws: `AtollError(.invalidArgument)` naming the bad setting.
    package func validate() throws {
        guard !appId.isEmpty, !appId.contains("/") else {
            throw AtollError(.invalidArgument, "auth: the app id must be non-empty and without '/', got '\(appId)'")
        }
        var lifetimes = [("accessTokenLifetime", accessTokenLifetime), ("refreshTokenLifetime", refreshTokenLifetime)]
        if let emailPassword { lifetimes.append(("emailPassword.tokenLifetime", emailPassword.tokenLifetime)) }
        for (name, seconds) in lifetimes where !(seconds >= 1 && seconds <= Self.maxLifetime) {
            throw AtollError(.invalidArgument, "auth.\(name): expected seconds from 1 to \(Int(Self.maxLifetime)) (100 years), got \(seconds)")
        }
        _ = try customJWT?.verifier()
    }
}

/// The email/password provider (`local-userpass`).
public struct EmailPasswordConfiguration: Sendable {
    /// Called with a user's email and a confirmation or reset token (and its id) to send them,
    /// on the handling task; the service sends no mail itself.
    public typealias Hook = @Sendable (_ email: String, _ token: String, _ tokenId: String) -> Void

    /// Whether new users may log in at once; otherwise a confirmation token goes to
    /// `confirmationHook` and the user logs in after `auth/providers/local-userpass/confirm`.
    public var autoConfirm: Bool
    /// Given each new confirmation token (at registration without `autoConfirm`, and on
    /// `confirm/send`).
    public var confirmationHook: Hook?
    /// Given each password reset token (`reset/send`).
    public var resetHook: Hook?
    /// Where the hook's mail should point (App Services' `emailConfirmationUrl`): kept for the
    /// hook's owner, not used by the service.
    public var emailConfirmationUrl: String?
    /// Likewise App Services' `resetPasswordUrl`.
    public var resetPasswordUrl: String?
    /// Seconds a confirmation or reset token is valid (30 minutes, as App Services).
    public var tokenLifetime: Double = 30 * 60

    /// Email/password users, confirmed at once by default.
    public init(autoConfirm: Bool = true, confirmationHook: Hook? = nil, resetHook: Hook? = nil) {
        self.autoConfirm = autoConfirm
        self.confirmationHook = confirmationHook
        self.resetHook = resetHook
    }
}

/// The custom-JWT provider (`custom-token`): a JWT signed by another identity provider logs its
/// subject in.
public struct CustomJWTConfiguration: Sendable {
    /// How tokens are signed (JWS `alg`, RFC 7518 §3.1).
    public enum Algorithm: String, Sendable, CaseIterable {
        /// HMAC-SHA256 with a shared secret.
        case hs256 = "HS256"
        /// RSA PKCS#1 v1.5 with SHA-256, checked with a PEM public key.
        case rs256 = "RS256"
    }

    /// A claim copied into the user's profile (`data`) at every login.
    public struct MetadataField: Sendable, Hashable {
        /// The claim's path, dots between levels: `"name.first"`.
        public var claim: String
        /// The profile field it becomes.
        public var field: String
        /// Whether a token without the claim is refused.
        public var required: Bool

        /// A claim copied to `field` (by default the claim's path itself).
        public init(claim: String, field: String? = nil, required: Bool = false) {
            self.claim = claim
            self.field = field ?? claim
            self.required = required
        }
    }

    /// The one algorithm accepted: a token whose `alg` says another (or `none`) is refused.
    public var algorithm: Algorithm
    /// HS256 secrets (each at least 32 bytes), or RS256 PEM public keys (or certificates). A token
    /// signed with any of them is accepted, so that keys can be rotated.
    public var signingKeys: [String]
    /// Accepted `aud` values; empty: `aud` is not checked.
    public var audience: [String] = []
    /// The required `iss`; nil: not checked.
    public var issuer: String?
    /// The claim (a path, like `metadataFields`) whose value identifies the user.
    public var idClaim = "sub"
    /// Claims copied into the user's profile.
    public var metadataFields: [MetadataField] = []

    /// A provider checking tokens with `signingKeys`; audience, issuer and metadata are set after.
    public init(algorithm: Algorithm, signingKeys: [String]) {
        self.algorithm = algorithm
        self.signingKeys = signingKeys
    }

    /// The keys in usable form.
    /// - Throws: `AtollError(.invalidArgument)` for a short secret or a key that is not RSA PEM.
    func verifier() throws -> JWTVerifier {
        let prefix = "auth.customJWT"
        guard !signingKeys.isEmpty else { throw AtollError(.invalidArgument, "\(prefix): no signing key") }
        guard !idClaim.isEmpty else { throw AtollError(.invalidArgument, "\(prefix).idClaim: empty") }
        var fields = Set<String>()
        for field in metadataFields {
            guard !field.claim.isEmpty, !field.field.isEmpty else {
                throw AtollError(.invalidArgument, "\(prefix).metadataFields: a claim or field name is empty")
            }
            guard fields.insert(field.field).inserted else {
                throw AtollError(.invalidArgument, "\(prefix).metadataFields: the field '\(field.field)' is given twice")
            }
        }
        switch algorithm {
        case .hs256:
            // RFC 7518 §3.2: an HS256 key must be at least as long as the hash, 256 bits.
            for key in signingKeys where key.utf8.count < 32 {
                throw AtollError(.invalidArgument, "\(prefix): an HS256 signing key must be at least 32 bytes (RFC 7518 §3.2), got \(key.utf8.count)")
            }
            return .hs256(signingKeys.map { Array($0.utf8) })
        case .rs256:
            return .rs256(try signingKeys.enumerated().map { i, pem in
                do { return try RSAPublicKey(pem: pem) } catch let e as AtollError { throw e.prefixed("\(prefix): signing key \(i)") }
            })
        }
    }
}

// MARK: - From JSON

extension AuthConfiguration {
    /// A configuration from the config file's `"auth"` value, in Atoll's shape or in App Services'
    /// export shape (its `auth/providers.json`), described in docs/app-api.md.
    ///
    /// Atoll's shape: `{"anonymous": true, "emailPassword": {"autoConfirm": false}, "apiKeys": true,
    /// "customJWT": {"algorithm": "HS256", "secret": "…"}, "accessTokenLifetime": 1800}`; keys left
    /// out keep their defaults. The export shape — an array of providers, or an object of them by
    /// name, or `{"providers": …}` beside the lifetimes — turns on exactly the providers it lists
    /// and does not disable.
    ///
    /// `keyFiles` says whether `customJWT.publicKeyFile` may name a file to read: yes for the
    /// operator's config file, no for settings from the admin console (its API would otherwise
    /// open any path the server's user may read and tell what it found there).
    /// - Throws: `AtollError(.invalidArgument)` naming the setting that is wrong.
    public init(appId: String, json: Value, keyFiles: Bool = true) throws {
        self.init(appId: appId)
        var reader = ConfigReader(path: "auth")
        reader.allowsKeyFiles = keyFiles
        switch json {
        case .list:
            try applyProviders(json, reader)
        case .object(let doc):
            let ours: Set<String> = ["anonymous", "emailPassword", "apiKeys", "customJWT", "accessTokenLifetime",
                                     "refreshTokenLifetime", "providers"]
            if doc.keys.allSatisfy(ours.contains) {
                try applyOurs(doc, reader)
            } else if doc.values.allSatisfy({ $0.documentValue != nil }) {
                try applyProviders(json, reader)
            } else {
                let unknown = doc.keys.filter { !ours.contains($0) }.joined(separator: ", ")
                throw AtollError(.invalidArgument, "auth: unknown key(s) \(unknown) (expected \(ours.sorted().joined(separator: ", ")), or App Services providers)")
            }
        default:
            throw AtollError(.invalidArgument, "auth: expected an object or an array of providers, got \(json.kindName)")
        }
        try validate()
    }

    private mutating func applyOurs(_ doc: Document, _ reader: ConfigReader) throws {
        if let v = try reader.number(doc, "accessTokenLifetime") { accessTokenLifetime = v }
        if let v = try reader.number(doc, "refreshTokenLifetime") { refreshTokenLifetime = v }
        if let providers = doc["providers"] {
            let own = ["anonymous", "emailPassword", "apiKeys", "customJWT"].filter { doc[$0] != nil }
            guard own.isEmpty else {
                throw AtollError(.invalidArgument, "auth: give either \"providers\" or \(own.joined(separator: ", ")), not both")
            }
            try applyProviders(providers, reader.at("providers"))
            return
        }
        if let v = try reader.bool(doc, "anonymous") { anonymous = v }
        if let v = try reader.bool(doc, "apiKeys") { apiKeys = v }
        switch doc["emailPassword"] {
        case nil: break
        case .null?, .bool(false)?: emailPassword = nil
        case .bool(true)?: emailPassword = EmailPasswordConfiguration()
        case .object(let settings)?:
            let r = reader.at("emailPassword")
            try r.checkKeys(settings, ["autoConfirm", "emailConfirmationUrl", "resetPasswordUrl", "tokenLifetime"])
            var email = EmailPasswordConfiguration(autoConfirm: try r.bool(settings, "autoConfirm") ?? true)
            email.emailConfirmationUrl = try r.string(settings, "emailConfirmationUrl")
            email.resetPasswordUrl = try r.string(settings, "resetPasswordUrl")
            if let v = try r.number(settings, "tokenLifetime") { email.tokenLifetime = v }
            emailPassword = email
        case let other?:
            throw reader.at("emailPassword").error("expected true, false or an object, got \(other.kindName)")
        }
        switch doc["customJWT"] {
        case nil, .null?, .bool(false)?: break
        case .object(let settings)?: customJWT = try Self.ourCustomJWT(settings, reader.at("customJWT"))
        case let other?: throw reader.at("customJWT").error("expected an object or false, got \(other.kindName)")
        }
    }

    private static func ourCustomJWT(_ doc: Document, _ r: ConfigReader) throws -> CustomJWTConfiguration {
        try r.checkKeys(doc, ["algorithm", "secret", "signingKeys", "publicKey", "publicKeyFile", "audience", "issuer",
                              "idClaim", "metadataFields"])
        let algorithm = try algorithm(try r.string(doc, "algorithm") ?? "HS256", r.at("algorithm"))
        var keys = try r.strings(doc, "signingKeys") ?? []
        if let secret = try r.string(doc, "secret") { keys.append(secret) }
        if let pem = try r.string(doc, "publicKey") { keys.append(pem) }
        if let file = try r.string(doc, "publicKeyFile") {
            guard r.allowsKeyFiles else {
                throw r.at("publicKeyFile").error("not taken from the admin console: give the key's PEM text as \"publicKey\" (or name the file in the config file)")
            }
            guard let data = FileManager.default.contents(atPath: file), let pem = String(data: data, encoding: .utf8) else {
                throw r.at("publicKeyFile").error("cannot read '\(file)'")
            }
            keys.append(pem)
        }
        guard !keys.isEmpty else { throw r.error("give \"secret\" (HS256), \"publicKey\" or \"publicKeyFile\" (RS256), or \"signingKeys\"") }
        var jwt = CustomJWTConfiguration(algorithm: algorithm, signingKeys: keys)
        jwt.audience = try r.strings(doc, "audience") ?? []
        jwt.issuer = try r.string(doc, "issuer")
        if let claim = try r.string(doc, "idClaim") { jwt.idClaim = claim }
        if let fields = doc["metadataFields"] { jwt.metadataFields = try metadataFields(fields, r.at("metadataFields")) }
        return jwt
    }

    /// `[{"claim"|"name": "name.first", "field"|"field_name": "firstName", "required": false}]`,
    /// or `{"name.first": "firstName"}`.
    private static func metadataFields(_ value: Value, _ r: ConfigReader) throws -> [CustomJWTConfiguration.MetadataField] {
        switch value {
        case .object(let map):
            return try map.map { claim, field in
                guard let name = field.stringValue else { throw r.at(claim).error("expected a field name, got \(field.kindName)") }
                return CustomJWTConfiguration.MetadataField(claim: claim, field: name)
            }
        case .list(let items):
            return try items.enumerated().map { i, item in
                let ri = r.at("\(i)")
                guard let doc = item.documentValue else { throw ri.error("expected an object, got \(item.kindName)") }
                try ri.checkKeys(doc, ["claim", "name", "field", "field_name", "required"])
                guard let claim = try ri.string(doc, "claim") ?? ri.string(doc, "name") else {
                    throw ri.error("missing \"name\" (the claim's path)")
                }
                let field = try ri.string(doc, "field") ?? ri.string(doc, "field_name")
                return CustomJWTConfiguration.MetadataField(claim: claim, field: field, required: try ri.bool(doc, "required") ?? false)
            }
        default:
            throw r.error("expected an array or an object, got \(value.kindName)")
        }
    }

    private static func algorithm(_ name: String, _ r: ConfigReader) throws -> CustomJWTConfiguration.Algorithm {
        guard let algorithm = CustomJWTConfiguration.Algorithm(rawValue: name.uppercased()) else {
            throw r.error("expected \"HS256\" or \"RS256\", got \"\(name)\"")
        }
        return algorithm
    }

    // MARK: App Services' export shape

    /// Turns on exactly the providers listed (and not `"disabled": true`).
    private mutating func applyProviders(_ value: Value, _ reader: ConfigReader) throws {
        var entries = [(ConfigReader, Document)]()
        switch value {
        case .list(let items):
            for (i, item) in items.enumerated() {
                guard let doc = item.documentValue else { throw reader.at("\(i)").error("expected a provider object, got \(item.kindName)") }
                entries.append((reader.at("\(i)"), doc))
            }
        case .object(let map):
            for (name, item) in map {
                guard let doc = item.documentValue else { throw reader.at(name).error("expected a provider object, got \(item.kindName)") }
                entries.append((reader.at(name), doc))
            }
        default:
            throw reader.error("expected an array or an object of providers, got \(value.kindName)")
        }
        anonymous = false
        emailPassword = nil
        apiKeys = false
        customJWT = nil
        var seen = Set<String>()
        for (r, doc) in entries {
            guard let type = try r.string(doc, "type") ?? r.string(doc, "name") else {
                throw r.error("a provider needs a \"type\" (anon-user, local-userpass, api-key, custom-token)")
            }
            if try r.bool(doc, "disabled") == true { continue }
            guard seen.insert(type).inserted else { throw r.error("the provider type '\(type)' is given twice") }
            let config = try r.object(doc, "config") ?? [:]
            let rc = r.at("config")
            switch type {
            case "anon-user":
                anonymous = true
            case "api-key":
                apiKeys = true
            case "local-userpass":
                // App Services' own default is to require confirmation.
                var email = EmailPasswordConfiguration(autoConfirm: try rc.bool(config, "autoConfirm") ?? false)
                email.emailConfirmationUrl = try rc.string(config, "emailConfirmationUrl")
                email.resetPasswordUrl = try rc.string(config, "resetPasswordUrl")
                emailPassword = email
            case "custom-token":
                customJWT = try Self.exportedCustomJWT(doc, config, r)
            default:
                throw r.error("the provider type '\(type)' is not supported (Atoll serves anon-user, local-userpass, api-key and custom-token)")
            }
        }
    }

    private static func exportedCustomJWT(_ doc: Document, _ config: Document, _ r: ConfigReader) throws -> CustomJWTConfiguration {
        let rc = r.at("config")
        if try rc.bool(config, "useJWKURI") == true {
            throw rc.at("useJWKURI").error("JWK URIs are not supported: give the keys in secret_config.signingKeys")
        }
        let algorithm = try algorithm(try rc.string(config, "signingAlgorithm") ?? "HS256", rc.at("signingAlgorithm"))
        // Atlas exports name secrets here; Atoll has no secret store, so the entries are the keys.
        let secrets = try r.object(doc, "secret_config") ?? [:]
        guard let keys = try r.at("secret_config").strings(secrets, "signingKeys"), !keys.isEmpty else {
            throw r.at("secret_config").error("missing \"signingKeys\" (the HS256 secrets or RS256 PEM public keys)")
        }
        var jwt = CustomJWTConfiguration(algorithm: algorithm, signingKeys: keys)
        jwt.audience = try rc.strings(config, "audience") ?? []
        if let fields = doc["metadata_fields"] { jwt.metadataFields = try metadataFields(fields, r.at("metadata_fields")) }
        return jwt
    }
}

/// Typed reads of config values, with errors that say where (`auth.customJWT.audience: …`).
struct ConfigReader {
    var path: String
    /// Whether settings may name files to read (`publicKeyFile`): the config file's may, the
    /// admin console's may not.
    var allowsKeyFiles = true

    func at(_ key: String) -> ConfigReader {
        var next = self
        next.path = "\(path).\(key)"
        return next
    }

    func error(_ message: String) -> AtollError { AtollError(.invalidArgument, "\(path): \(message)") }

    func checkKeys(_ doc: Document, _ allowed: Set<String>) throws {
        if let unknown = doc.keys.first(where: { !allowed.contains($0) }) {
            throw error("unknown key '\(unknown)' (expected \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    func string(_ doc: Document, _ key: String) throws -> String? {
        switch doc[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case let other?: throw at(key).error("expected a string, got \(other.kindName)")
        }
    }

    /// A string or an array of strings.
    func strings(_ doc: Document, _ key: String) throws -> [String]? {
        switch doc[key] {
        case nil, .null?: return nil
        case .string(let s)?: return [s]
        case .list(let items)?:
            return try items.map {
                guard let s = $0.stringValue else { throw at(key).error("expected strings, got \($0.kindName)") }
                return s
            }
        case let other?: throw at(key).error("expected a string or an array of strings, got \(other.kindName)")
        }
    }

    func bool(_ doc: Document, _ key: String) throws -> Bool? {
        switch doc[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        case let other?: throw at(key).error("expected true or false, got \(other.kindName)")
        }
    }

    func number(_ doc: Document, _ key: String) throws -> Double? {
        switch doc[key] {
        case nil, .null?: return nil
        case let v?:
            guard let d = v.doubleValue else { throw at(key).error("expected a number, got \(v.kindName)") }
            return d
        }
    }

    func object(_ doc: Document, _ key: String) throws -> Document? {
        switch doc[key] {
        case nil, .null?: return nil
        case .object(let d)?: return d
        case let other?: throw at(key).error("expected an object, got \(other.kindName)")
        }
    }
}
