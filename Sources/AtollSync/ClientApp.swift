import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import Foundation
import Synchronization

/// How a user proves who they are (docs/app-api.md).
public enum ClientCredentials: Sendable, Hashable {
    case anonymous
    case emailPassword(email: String, password: String)
    case apiKey(String)
    case jwt(String)

    /// The provider's name in the app API's paths.
    var provider: String {
        switch self {
        case .anonymous: return "anon-user"
        case .emailPassword: return "local-userpass"
        case .apiKey: return "api-key"
        case .jwt: return "custom-token"
        }
    }

    var body: Value {
        switch self {
        case .anonymous: return .doc([:])
        case let .emailPassword(email, password): return .doc(["username": .string(email), "password": .string(password)])
        case .apiKey(let key): return .doc(["key": .string(key)])
        case .jwt(let token): return .doc(["token": .string(token)])
        }
    }
}

/// An error of the client side of sync: the app API, the connection, the server's sync errors.
public struct SyncError: Error, Sendable, CustomStringConvertible {
    public var code: SyncErrorCode
    public var message: String
    public var isFatal: Bool
    public var action: String
    public var compensatingWrites: [CompensatingWrite]
    /// The HTTP status of a failed app API call, when there was one.
    public var status: Int?

    public init(_ code: SyncErrorCode, _ message: String, status: Int? = nil, compensatingWrites: [CompensatingWrite] = []) {
        self.code = code
        self.message = message
        self.isFatal = code.isFatal
        self.action = code.action
        self.compensatingWrites = compensatingWrites
        self.status = status
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// What `ClientApp` needs to reach its server.
public struct ClientAppConfiguration: Sendable {
    public var appId: String
    /// `http://host:port` of the server (https:// with TLS).
    public var baseURL: String
    /// Where the users file lives (default: the current directory).
    public var metadataDirectory: String
    /// How long one app API request may take.
    public var requestTimeout: Double
    /// How long connecting the sync WebSocket may take before a `timeout` error.
    public var connectTimeout: Double
    public var tls: TLSClientConfiguration
    /// How requests and the sync connection reach the server: the network by default; a server
    /// in the same process offers `SyncServer.inProcessTransport`.
    public var transport: ClientTransport

    public init(appId: String, baseURL: String = "http://127.0.0.1:9090", metadataDirectory: String = ".",
                requestTimeout: Double = 60, connectTimeout: Double = 10, transport: ClientTransport = .network) {
        self.appId = appId
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.metadataDirectory = metadataDirectory
        self.requestTimeout = requestTimeout
        self.connectTimeout = connectTimeout
        tls = TLSClientConfiguration()
        self.transport = transport
    }
}

/// An app on an `atoll-server`: its users (kept in a metadata file, so that a restarted app is
/// still logged in), their tokens, and the error handler of its sync sessions.
public final class ClientApp: @unchecked Sendable {
    public let configuration: ClientAppConfiguration
    let metadata: Store
    let lock = NSRecursiveLock()
    /// The users handed out, weakly: a user keeps its app alive, not the other way round.
    private var users: [String: WeakUser] = [:]
    private var errorHandlers: [Int: @Sendable (SyncError, ClientSession?) -> Void] = [:]
    private var nextHandler = 0
    /// One sync connection per user (one WebSocket per user and server, docs/protocol.md).
    var connections: [String: any SessionConnection] = [:]
    /// Makes a user's connection: a WebSocket by default; the deterministic simulation's tests
    /// give an in-memory link instead.
    var makeConnection: (ClientApp, ClientUser) -> any SessionConnection = { app, user in UserConnection(app: app, user: user) }

    static let metadataSchema = Schema([
        ObjectSchema(name: "User", primaryKey: "id", properties: [
            Property(name: "id", type: .string),
            Property(name: "provider", type: .string),
            Property(name: "state", type: .string),
            Property(name: "accessToken", type: .string),
            Property(name: "refreshToken", type: .string),
            Property(name: "profile", type: .string),
            Property(name: "lastUsed", type: .int),
        ]),
        ObjectSchema(name: "Setting", primaryKey: "key", properties: [
            Property(name: "key", type: .string),
            Property(name: "value", type: .string),
        ]),
    ])

    /// Opens (creating) the app's users file in the metadata directory.
    /// - Throws: `AtollError(.invalidArgument)` for an empty app id or a base URL that is not
    ///   http(s); `.file` when the metadata directory cannot be written.
    public init(configuration: ClientAppConfiguration) throws {
        guard !configuration.appId.isEmpty,
              configuration.appId.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
            throw AtollError(.invalidArgument, "appId must be letters, digits, - and _")
        }
        guard configuration.baseURL.hasPrefix("http://") || configuration.baseURL.hasPrefix("https://") else {
            throw AtollError(.invalidArgument, "baseUrl must start with http:// or https://")
        }
        self.configuration = configuration
        // The users file holds refresh tokens: mode 0600, in a directory made with mode 0700 (one
        // that exists, the working directory by default, is left as it is).
        let path = configuration.metadataDirectory + "/atoll-users-\(configuration.appId).realm"
        try PrivateFiles.directory(configuration.metadataDirectory, tighten: false)
        try PrivateFiles.file(path)
        metadata = try Store(Configuration(path: path, schema: Self.metadataSchema))
    }

    deinit {
        for c in connections.values { c.stop() }
        metadata.close()
    }

    private static let sharedLock = NSLock()
    nonisolated(unsafe) private static var sharedApps: [String: WeakApp] = [:]

    /// The app of a configuration, shared in the process: the same app id, server and metadata
    /// directory give the same `ClientApp` while it lives (one users cache, one connection per user),
    /// as Realm's `ClientApp(id:)` does. The timeouts of the first caller's configuration stay.
    public static func shared(configuration: ClientAppConfiguration) throws -> ClientApp {
        let directory = URL(fileURLWithPath: configuration.metadataDirectory).standardizedFileURL.path
        let key = "\(configuration.appId)\u{0}\(configuration.baseURL)\u{0}\(directory)"
        return try sharedLock.withLock {
            if let app = sharedApps[key]?.app { return app }
            let app = try ClientApp(configuration: configuration)
            sharedApps = sharedApps.filter { $0.value.app != nil }
            sharedApps[key] = WeakApp(app: app)
            return app
        }
    }

    // MARK: - The app API

    var apiBase: String { "\(configuration.baseURL)/api/client/v2.0/app/\(configuration.appId)" }

    /// One app API call: JSON in, JSON out; a non-2xx answer throws with the server's message.
    func call(_ method: String, _ path: String, body: Value? = nil, bearer: String? = nil) async throws -> Document {
        var headers: HTTPHeaders = ["Accept": "application/json"]
        if body != nil { headers["Content-Type"] = "application/json" }
        if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
        let response: HTTPClientResponse
        do {
            response = try await configuration.transport.request(method, apiBase + path, headers, body.map { Array(Wire.encode($0).utf8) } ?? [],
                                                                 configuration.requestTimeout, configuration.tls)
        } catch let e as NetError {
            if case .timeout = e { throw SyncError(.timeout, "the app API did not answer in time: \(e)") }
            throw SyncError(.connectionFailed, "cannot reach \(configuration.baseURL): \(e)")
        }
        let document: Document = {
            guard !response.body.isEmpty, case .object(let d)? = try? EJSON.parse(response.text) else { return Document() }
            return d
        }()
        guard (200..<300).contains(response.status) else {
            let message = document["error"]?.stringValue ?? "HTTP \(response.status)"
            throw SyncError(.authFailed, message, status: response.status)
        }
        return document
    }

    // MARK: - Users

    /// Logs a user in; the user becomes the current user.
    /// - Throws: `SyncError` — `.authFailed` (with the server's message and HTTP status) for
    ///   refused credentials, `.connectionFailed` or `.timeout` when the server cannot be reached.
    public func login(_ credentials: ClientCredentials) async throws -> ClientUser {
        let tokens = try await call("POST", "/auth/providers/\(credentials.provider)/login", body: credentials.body)
        guard let access = tokens["access_token"]?.stringValue, let refresh = tokens["refresh_token"]?.stringValue,
              let id = tokens["user_id"]?.stringValue else {
            throw SyncError(.authFailed, "the server's login answer lacks tokens")
        }
        let profile = (try? await call("GET", "/auth/profile", bearer: access)) ?? Document()
        let user = lock.withLock { () -> ClientUser in
            if let known = users[id]?.user { return known }
            let u = ClientUser(app: self, id: id)
            users[id] = WeakUser(u)
            return u
        }
        user.update(access: access, refresh: refresh, state: .loggedIn, provider: credentials.provider, profile: profile)
        try persist(user)
        try setCurrent(user.id)
        return user
    }

    /// Registers an email/password user (log in afterwards).
    public func registerEmail(_ email: String, password: String) async throws {
        _ = try await call("POST", "/auth/providers/local-userpass/register",
                           body: .doc(["email": .string(email), "password": .string(password)]))
    }

    /// The current user: the one last logged in or switched to, if still logged in.
    public var currentUser: ClientUser? {
        lock.withLock {
            guard let id = try? setting("currentUser"), let user = try? loadUser(id), user.state == .loggedIn else {
                return allUsers.first { $0.state == .loggedIn }
            }
            return user
        }
    }

    /// Every user of the users file (logged in or out), most recently used first.
    public var allUsers: [ClientUser] {
        lock.withLock {
            let docs = (try? metadata.objects("User", where: "state != 'removed'").documents()) ?? []
            return docs.sorted { ($0["lastUsed"]?.intValue ?? 0) > ($1["lastUsed"]?.intValue ?? 0) }
                .compactMap { $0["id"]?.stringValue }.compactMap { try? loadUser($0) }
        }
    }

    /// Makes a logged-in user the current one.
    public func switchUser(_ user: ClientUser) throws {
        guard user.state == .loggedIn else { throw SyncError(.authFailed, "user \(user.id) is not logged in") }
        try setCurrent(user.id)
    }

    /// Logs a user out: the refresh token is revoked on the server (best effort), the tokens
    /// are forgotten, its sync sessions stop.
    public func logOut(_ user: ClientUser) async throws {
        let refresh = user.refreshToken
        stopConnection(user.id)
        user.update(access: "", refresh: "", state: .loggedOut)
        try persist(user)
        if !refresh.isEmpty { _ = try? await call("DELETE", "/auth/session", bearer: refresh) }
    }

    /// Logs the user out and removes it from the users file.
    public func remove(_ user: ClientUser) async throws {
        try await logOut(user)
        user.update(access: "", refresh: "", state: .removed)
        try persist(user)
        _ = lock.withLock { users.removeValue(forKey: user.id) }
    }

    /// Deletes the user on the server, then removes it here.
    public func delete(_ user: ClientUser) async throws {
        _ = try await user.authorizedCall("DELETE", "/auth/delete")
        try await remove(user)
    }

    func loadUser(_ id: String) throws -> ClientUser? {
        if let known = users[id]?.user { return known }
        guard let doc = try metadata.object("User", primaryKey: .string(id)) else { return nil }
        let user = ClientUser(app: self, id: id)
        let profile: Document = {
            if let text = doc["profile"]?.stringValue, case .object(let d)? = try? EJSON.parse(text) { return d }
            return Document()
        }()
        user.update(access: doc["accessToken"]?.stringValue ?? "", refresh: doc["refreshToken"]?.stringValue ?? "",
                    state: ClientUser.State(rawValue: doc["state"]?.stringValue ?? "") ?? .loggedOut,
                    provider: doc["provider"]?.stringValue ?? "", profile: profile)
        users[id] = WeakUser(user)
        return user
    }

    func persist(_ user: ClientUser) throws {
        let snapshot = user.snapshot
        try metadata.write {
            _ = try metadata.create("User", [
                "id": .string(user.id), "provider": .string(snapshot.provider), "state": .string(snapshot.state.rawValue),
                "accessToken": .string(snapshot.access), "refreshToken": .string(snapshot.refresh),
                "profile": .string(Wire.encode(.object(snapshot.profile))),
                "lastUsed": .int(Int64(Date().timeIntervalSince1970 * 1000)),
            ], update: .modified)
        }
    }

    func setting(_ key: String) throws -> String? {
        try metadata.object("Setting", primaryKey: .string(key))?["value"]?.stringValue
    }

    func setCurrent(_ id: String) throws {
        try metadata.write { _ = try metadata.create("Setting", ["key": .string("currentUser"), "value": .string(id)], update: .modified) }
    }

    // MARK: - Errors

    /// Registers a handler that receives every sync error of this app's sessions (with the
    /// session, when one is concerned). Returns a token for `removeErrorHandler`.
    @discardableResult
    public func addErrorHandler(_ handler: @escaping @Sendable (SyncError, ClientSession?) -> Void) -> Int {
        lock.withLock {
            nextHandler += 1
            errorHandlers[nextHandler] = handler
            return nextHandler
        }
    }

    public func removeErrorHandler(_ token: Int) { _ = lock.withLock { errorHandlers.removeValue(forKey: token) } }

    func report(_ error: SyncError, _ session: ClientSession?) {
        let handlers = lock.withLock { Array(errorHandlers.values) }
        for h in handlers { h(error, session) }
    }

    // MARK: - Connections

    func connection(for user: ClientUser) -> any SessionConnection {
        lock.withLock {
            if let c = connections[user.id] { return c }
            let c = makeConnection(self, user)
            if let socket = c as? UserConnection {
                let id = user.id
                socket.onIdle = { [weak self, weak socket] in
                    guard let self else { return }
                    self.lock.withLock { if self.connections[id] === socket { self.connections[id] = nil } }
                }
            }
            connections[user.id] = c
            return c
        }
    }

    func stopConnection(_ userId: String) {
        let c = lock.withLock { connections.removeValue(forKey: userId) }
        c?.stop()
    }

    /// The sync endpoint's URL (ws:// or wss://).
    var syncURL: String {
        let base = configuration.baseURL.replacingOccurrences(of: "https://", with: "wss://").replacingOccurrences(of: "http://", with: "ws://")
        return "\(base)/api/client/v2.0/app/\(configuration.appId)/realm-sync"
    }
}

struct WeakApp {
    weak var app: ClientApp?
}

struct WeakUser {
    weak var user: ClientUser?
    init(_ user: ClientUser) { self.user = user }
}

/// A user of an app, with its tokens. Tokens are refreshed before they expire and after a 401.
/// A user keeps its app alive (its sessions need it).
public final class ClientUser: @unchecked Sendable, Hashable {
    public enum State: String, Sendable { case loggedIn, loggedOut, removed }

    public let id: String
    public let app: ClientApp
    private let lock = NSLock()
    private var access = ""
    private var refresh = ""
    private var _state = State.loggedOut
    private var _provider = ""
    private var _profile = Document()

    init(app: ClientApp, id: String) {
        self.app = app
        self.id = id
    }

    public static func == (a: ClientUser, b: ClientUser) -> Bool { a === b }
    public func hash(into h: inout Hasher) { h.combine(ObjectIdentifier(self)) }

    public var state: State { lock.withLock { _state } }
    public var provider: String { lock.withLock { _provider } }
    /// The server's profile: `identities`, `data` (email, custom-JWT fields).
    public var profile: Document { lock.withLock { _profile } }
    public var accessToken: String { lock.withLock { access } }
    public var refreshToken: String { lock.withLock { refresh } }
    public var isLoggedIn: Bool { state == .loggedIn }

    struct Snapshot { var access, refresh: String; var state: State; var provider: String; var profile: Document }
    var snapshot: Snapshot { lock.withLock { Snapshot(access: access, refresh: refresh, state: _state, provider: _provider, profile: _profile) } }

    func update(access: String, refresh: String, state: State, provider: String? = nil, profile: Document? = nil) {
        lock.withLock {
            self.access = access
            self.refresh = refresh
            _state = state
            if let provider { _provider = provider }
            if let profile { _profile = profile }
        }
    }

    /// The user as JSON: `{"id", "state", "provider", "profile"}`.
    public var json: Value {
        let s = snapshot
        return .doc(["id": .string(id), "state": .string(s.state.rawValue), "provider": .string(s.provider), "profile": .object(s.profile)])
    }

    /// Seconds since 1970 at which the access token expires (its `exp` claim), or 0.
    var accessTokenExpiry: Double {
        let parts = accessToken.split(separator: ".")
        guard parts.count == 3 else { return 0 }
        var b64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64), case .object(let claims)? = try? EJSON.parse(String(decoding: data, as: UTF8.self)),
              case .int(let exp)? = claims["exp"] else { return 0 }
        return Double(exp)
    }

    /// An access token valid for at least another minute, refreshed if needed.
    public func validAccessToken() async throws -> String {
        if state != .loggedIn { throw SyncError(.authFailed, "user \(id) is logged out") }
        if accessTokenExpiry > Date().timeIntervalSince1970 + 60 { return accessToken }
        try await refreshAccessToken()
        return accessToken
    }

    /// Gets a new access token with the refresh token. A refused refresh token logs the user out.
    public func refreshAccessToken() async throws {
        let r = refreshToken
        guard !r.isEmpty else { throw SyncError(.authFailed, "user \(id) has no refresh token") }
        do {
            let answer = try await app.call("POST", "/auth/session", bearer: r)
            guard let access = answer["access_token"]?.stringValue else { throw SyncError(.authFailed, "no access token in the answer") }
            update(access: access, refresh: r, state: .loggedIn)
            try app.persist(self)
        } catch let e as SyncError where e.status == 401 {
            update(access: "", refresh: "", state: .loggedOut)
            try? app.persist(self)
            throw e
        }
    }

    /// An app API call with the access token, refreshed and retried once after a 401.
    func authorizedCall(_ method: String, _ path: String, body: Value? = nil) async throws -> Document {
        let token = try await validAccessToken()
        do {
            return try await app.call(method, path, body: body, bearer: token)
        } catch let e as SyncError where e.status == 401 {
            try await refreshAccessToken()
            return try await app.call(method, path, body: body, bearer: accessToken)
        }
    }
}

extension SyncError: LocalizedError {
    /// The message, as `localizedDescription` gives it (Foundation's default names only the type).
    public var errorDescription: String? { description }
}
