// Sync (the package trait `Sync`, on by default): absent from a local-only build.
#if Sync
import AtollNet
import AtollProtocol
import AtollStore
import AtollSync
import Foundation

// Realm Swift's app and user API over the sync engine (AtollSync): `App`, `AppConfiguration`,
// `Credentials`, `User`, `EmailPasswordAuth`, `SyncManager`. The engine's types have the same
// names; each type here wraps its engine counterpart, so that code written for Realm Swift
// reads as it does there.
//
//     let app = App(id: "default", configuration: AppConfiguration(baseURL: "http://127.0.0.1:9090"))
//     let user = try await app.login(credentials: .anonymous)
//
// Who calls what: the user's code calls `App` and `User`; `App` keeps one engine app per app
// id, server and metadata directory (as Realm keeps one app per id), and the engine calls back
// the `SyncManager`'s error handler on its connection queue.

/// An error of sync: of the app API, the connection, or the server (with its code, whether it
/// is fatal, and for a `writeRejected` error the writes the server undid).
public typealias SyncError = AtollSync.SyncError
/// The codes of `SyncError` (Realm's sync error codes where they apply).
public typealias SyncErrorCode = AtollProtocol.SyncErrorCode
/// A write the server refused and undid (`SyncError.compensatingWrites`).
public typealias CompensatingWrite = AtollProtocol.CompensatingWrite
/// How an app reaches its server (`AppConfiguration.transport`).
public typealias ClientTransport = AtollNet.ClientTransport

// MARK: - Configuration

/// How long sync may wait for the server (Realm's `SyncTimeoutOptions`, in seconds instead of
/// milliseconds).
public struct SyncTimeoutOptions: Sendable, Equatable {
    /// How long connecting the sync connection may take before it counts as failed.
    public var connectTimeout: TimeInterval
    /// How long a wait for the server may take when the call names no timeout of its own:
    /// download before open, `subscriptions.update`, `subscribe(waitForSync:)`, `wait(for:)`.
    public var downloadTimeout: TimeInterval

    public init(connectTimeout: TimeInterval = 10, downloadTimeout: TimeInterval = 60) {
        self.connectTimeout = connectTimeout
        self.downloadTimeout = downloadTimeout
    }
}

/// Where an app's server is and where the app keeps its users (Realm's `AppConfiguration`).
///
/// ```swift
/// let configuration = AppConfiguration(baseURL: "http://127.0.0.1:9090", metadataDirectory: "/var/lib/myapp")
/// ```
public struct AppConfiguration: Sendable, Equatable {
    /// `http://host:port` (or `https://`) of the `atoll-server`; nil: `http://127.0.0.1:9090`.
    public var baseURL: String?
    /// The directory of the users file and, by default, of the synced realm files; nil: the
    /// current directory.
    public var metadataDirectory: String?
    /// How long one app API request (log in, register) may take, in seconds.
    public var defaultRequestTimeout: TimeInterval
    /// How long sync may wait for the server.
    public var syncTimeouts: SyncTimeoutOptions
    /// How requests and the sync connection reach the server (Realm's `transport`): the network
    /// by default; a server in the same process offers `SyncServer.inProcessTransport`.
    public var transport: ClientTransport

    public init(baseURL: String? = nil, metadataDirectory: String? = nil, defaultRequestTimeout: TimeInterval = 60,
                syncTimeouts: SyncTimeoutOptions = SyncTimeoutOptions(), transport: ClientTransport = .network) {
        self.baseURL = baseURL
        self.metadataDirectory = metadataDirectory
        self.defaultRequestTimeout = defaultRequestTimeout
        self.syncTimeouts = syncTimeouts
        self.transport = transport
    }

    var resolvedBaseURL: String { baseURL ?? "http://127.0.0.1:9090" }
    var resolvedMetadataDirectory: String { metadataDirectory ?? FileManager.default.currentDirectoryPath }

    /// The engine's configuration of an app.
    func engine(appId: String) -> AtollSync.ClientAppConfiguration {
        AtollSync.ClientAppConfiguration(appId: appId, baseURL: resolvedBaseURL, metadataDirectory: resolvedMetadataDirectory,
                                   requestTimeout: defaultRequestTimeout, connectTimeout: syncTimeouts.connectTimeout, transport: transport)
    }
}

/// How a user proves who they are (Realm's `Credentials`).
public enum Credentials: Sendable, Hashable {
    /// A new anonymous user.
    case anonymous
    /// A user registered with `app.emailPasswordAuth.registerUser(email:password:)`.
    case emailPassword(email: String, password: String)
    /// A user API key.
    case userAPIKey(String)
    /// A JSON Web Token signed with the key the server's app is configured with.
    case jwt(token: String)

    var engine: AtollSync.ClientCredentials {
        switch self {
        case .anonymous: return .anonymous
        case let .emailPassword(email, password): return .emailPassword(email: email, password: password)
        case .userAPIKey(let key): return .apiKey(key)
        case .jwt(let token): return .jwt(token)
        }
    }
}

// MARK: - The app

/// What the `App` values of one app id, server and metadata directory share: the engine's app,
/// the user wrappers, the error handler, the observers of logins.
final class AppCore: @unchecked Sendable {
    let id: String
    let configuration: AppConfiguration
    let engine: AtollSync.ClientApp
    private let lock = NSLock()
    /// Weak: a user holds its core, not the other way round.
    private var users: [String: WeakUser] = [:]
    private var loginObservers: [UUID: @Sendable (User) -> Void] = [:]
    private var errorHandlerToken: Int?
    private var _errorHandler: (@Sendable (Error, SyncSession?) -> Void)?

    private struct WeakUser { weak var user: User? }

    private init(id: String, configuration: AppConfiguration) throws {
        self.id = id
        self.configuration = configuration
        engine = try AtollSync.ClientApp(configuration: configuration.engine(appId: id))
    }

    private static let cacheLock = NSLock()
    nonisolated(unsafe) private static var cache: [String: WeakCore] = [:]
    private struct WeakCore { weak var core: AppCore? }

    /// The core of an app: the one that is alive, or a new one. Two engine apps on one users
    /// file would each make their own user objects and connections; Realm too keeps one app
    /// per id.
    static func shared(id: String, configuration: AppConfiguration) throws -> AppCore {
        let key = [id, configuration.resolvedBaseURL, configuration.resolvedMetadataDirectory].joined(separator: "\n")
        return try cacheLock.withLock {
            if let core = cache[key]?.core { return core }
            let core = try AppCore(id: id, configuration: configuration)
            cache = cache.filter { $0.value.core != nil }
            cache[key] = WeakCore(core: core)
            return core
        }
    }

    /// The wrapper of an engine user (the same one while it lives).
    func user(_ engineUser: AtollSync.ClientUser) -> User {
        lock.withLock {
            if let known = users[engineUser.id]?.user, known.engine === engineUser { return known }
            let user = User(engine: engineUser, core: self)
            users[engineUser.id] = WeakUser(user: user)
            return user
        }
    }

    // MARK: Logins

    func observeLogins(_ observer: @escaping @Sendable (User) -> Void) -> UUID {
        let id = UUID()
        lock.withLock { loginObservers[id] = observer }
        return id
    }

    func removeLoginObserver(_ id: UUID) { _ = lock.withLock { loginObservers.removeValue(forKey: id) } }

    func didLogIn(_ user: User) {
        let observers = lock.withLock { Array(loginObservers.values) }
        for observer in observers { observer(user) }
    }

    // MARK: Errors

    var errorHandler: (@Sendable (Error, SyncSession?) -> Void)? {
        get { lock.withLock { _errorHandler } }
        set {
            let old = lock.withLock { () -> Int? in
                _errorHandler = newValue
                defer { errorHandlerToken = nil }
                return errorHandlerToken
            }
            if let old { engine.removeErrorHandler(old) }
            guard let handler = newValue else { return }
            let token = engine.addErrorHandler { [weak self] error, engineSession in
                guard let self else { return }
                handler(error, engineSession.map { SyncSession(engine: $0, user: self.user($0.user), configuration: nil) })
            }
            lock.withLock { errorHandlerToken = token }
        }
    }
}

/// An app on an `atoll-server`: logs users in and keeps them (Realm's `App`).
///
/// ```swift
/// let app = App(id: "default", configuration: AppConfiguration(baseURL: "http://127.0.0.1:9090"))
/// let user = try await app.login(credentials: .emailPassword(email: "ann@example.com", password: "secret12"))
/// app.syncManager.errorHandler = { error, session in print(error) }
/// ```
///
/// `App` values of the same id, server and metadata directory share their users. An app whose
/// id or base URL is not valid, or whose metadata directory cannot be written, is made anyway
/// (as in Realm, making one does not throw): each call that needs the server throws that error,
/// and `currentUser` is nil.
public final class App: @unchecked Sendable {
    /// The app's id on the server.
    public let appId: String
    /// Where the server is and where the users are kept.
    public let configuration: AppConfiguration
    private let core: Result<AppCore, Error>

    /// The app of an id on the server that `configuration` names (`http://127.0.0.1:9090`
    /// and the current directory when nil).
    public init(id: String, configuration: AppConfiguration? = nil) {
        let configuration = configuration ?? AppConfiguration()
        appId = id
        self.configuration = configuration
        core = Result { try AppCore.shared(id: id, configuration: configuration) }
    }

    func requireCore() throws -> AppCore { try core.get() }

    /// Logs a user in; it becomes the current user.
    /// - Throws: `SyncError` — `.authFailed` (with the server's message and HTTP status) for
    ///   refused credentials, `.connectionFailed` or `.timeout` when the server cannot be reached;
    ///   the app's own error when it could not be made.
    public func login(credentials: Credentials) async throws -> User {
        let core = try requireCore()
        let user = core.user(try await core.engine.login(credentials.engine))
        core.didLogIn(user)
        return user
    }

    /// The current user: the one last logged in or switched to, while logged in.
    public var currentUser: User? {
        guard case .success(let core) = core else { return nil }
        return core.engine.currentUser.map(core.user)
    }

    /// Every user of the app on this device (logged in or out), by id.
    public var allUsers: [String: User] {
        guard case .success(let core) = core else { return [:] }
        return Dictionary(core.engine.allUsers.map { ($0.id, core.user($0)) }, uniquingKeysWith: { a, _ in a })
    }

    /// Makes a logged-in user the current one.
    /// - Throws: `SyncError(.authFailed)` when the user is logged out.
    public func `switch`(to user: User) throws {
        try requireCore().engine.switchUser(user.engine)
    }

    /// Registering and managing email/password users.
    public var emailPasswordAuth: EmailPasswordAuth { EmailPasswordAuth(app: self) }

    /// The error handler of the app's sync sessions.
    public var syncManager: SyncManager { SyncManager(app: self) }
}

/// Email/password users of an app (Realm's `EmailPasswordAuth`).
public struct EmailPasswordAuth: Sendable {
    let app: App

    /// Registers a user, who then logs in with `.emailPassword(email:password:)`.
    /// - Throws: `SyncError(.authFailed)` with the server's reason (a taken email, a short
    ///   password), `.connectionFailed`.
    public func registerUser(email: String, password: String) async throws {
        try await app.requireCore().engine.registerEmail(email, password: password)
    }
}

/// The sync side of an app (Realm's `SyncManager`): where its sessions report errors.
public struct SyncManager: Sendable {
    let app: App

    /// Called with each sync error of the app's sessions, and the session when one is
    /// concerned. The error is a `SyncError` (`code`, `message`, `isFatal`,
    /// `compensatingWrites`). It runs on the user's sync connection queue (Realm runs it on the
    /// main thread): do not wait there for sync.
    ///
    /// ```swift
    /// app.syncManager.errorHandler = { error, session in
    ///     guard let error = error as? SyncError else { return }
    ///     if error.code == .writeRejected { print(error.compensatingWrites) }
    /// }
    /// ```
    public var errorHandler: (@Sendable (Error, SyncSession?) -> Void)? {
        get { (try? app.requireCore())?.errorHandler }
        nonmutating set { (try? app.requireCore())?.errorHandler = newValue }
    }
}

// MARK: - Users

/// A user of an app, logged in on this device (Realm's `User`). Its synced realms come from
/// `flexibleSyncConfiguration(...)` and `configuration(partitionValue:)`.
public final class User: @unchecked Sendable, Hashable, CustomStringConvertible {
    /// Whether the user is logged in, logged out (its data stays), or removed.
    public typealias State = AtollSync.ClientUser.State

    let engine: AtollSync.ClientUser
    let core: AppCore

    init(engine: AtollSync.ClientUser, core: AppCore) {
        self.engine = engine
        self.core = core
    }

    /// The user's id on the server.
    public var id: String { engine.id }
    /// Whether the user is logged in.
    public var isLoggedIn: Bool { engine.isLoggedIn }
    /// Logged in, logged out or removed.
    public var state: State { engine.state }
    /// The current access token (nil when logged out).
    public var accessToken: String? { engine.accessToken.isEmpty ? nil : engine.accessToken }
    /// The current refresh token (nil when logged out).
    public var refreshToken: String? { engine.refreshToken.isEmpty ? nil : engine.refreshToken }
    /// The id of the app the user belongs to.
    public var appId: String { core.id }

    /// Logs the user out: its sync sessions stop; its realm files stay on the device.
    /// - Throws: `AtollError(.file)` when the users file cannot be written.
    public func logOut() async throws { try await core.engine.logOut(engine) }

    /// Logs the user out and removes it from the device's users.
    public func remove() async throws { try await core.engine.remove(engine) }

    /// Deletes the user on the server, then removes it here.
    /// - Throws: `SyncError` when the server refuses or cannot be reached.
    public func delete() async throws { try await core.engine.delete(engine) }

    public static func == (a: User, b: User) -> Bool { a.engine === b.engine }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(engine)) }
    public var description: String { "User(\(id), \(state.rawValue))" }
}
#endif
