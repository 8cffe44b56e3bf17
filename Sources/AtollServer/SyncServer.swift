import AtollAuth
import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import Foundation
import Synchronization

/// The sync protocol's WebSocket subprotocol (docs/protocol.md).
public let syncSubprotocol = "atoll-sync.1"

/// Where a connection's messages go: its WebSocket, or an in-memory peer (the fuzz target in
/// tests/fuzz drives `ServerApp.handle` through one, without sockets).
package protocol SyncTransport: AnyObject, Sendable {
    /// Queues a text message; throws `NetError.queueFull` for a peer that does not keep up.
    func send(_ text: String) throws
    func close(code: UInt16, reason: String)
    /// The peer's address, for the admin console.
    var remoteAddress: String { get }
    /// Bytes queued for the peer and not written yet.
    var queuedBytes: Int { get }
    /// Ends the connection at once, dropping what is queued (a peer that does not read).
    func drop(reason: String)
}

extension SyncTransport {
    /// A transport without a queue of its own (an in-memory peer) holds nothing.
    package var queuedBytes: Int { 0 }
    package func drop(reason: String) { close(code: 1008, reason: reason) }
}

extension WebSocket: SyncTransport {
    package var remoteAddress: String { request?.remoteAddress ?? "" }
}

extension MemorySocket: SyncTransport {
    package var remoteAddress: String { "in-process" }
}

/// One client's connection: a user of one app, carrying any number of sessions.
package final class SyncConnection: @unchecked Sendable {
    let transport: any SyncTransport
    let user: RuleUser
    let app: ServerApp
    /// The session (`sid`) of the access token that opened the connection: a logout of it closes
    /// the connection. Nil for connections made without a token (the fuzz target's).
    let session: String?
    /// When that token expires (seconds since 1970): the connection closes then, and a message
    /// read after it is not handled. Nil: never.
    let expiresAt: Double?

    /// Uploads this connection may still send now (`maxUploadsPerSecond`). Changed on the app's queue.
    private var uploads: TokenBucket
    /// `bind` and `query` messages (each may start a catch-up or a bootstrap) it may still send
    /// now (`maxQueriesPerSecond`). Changed on the app's queue.
    private var queries: TokenBucket
    /// Set on the app's queue when the connection was refused for flooding: its messages still
    /// waiting on the queue are dropped (an upload after a dropped one must not be integrated
    /// over the gap; the client resends both from its upload cursor when it reconnects).
    private(set) var throttled = false
    /// Bytes of messages read and not yet handled on the app's queue.
    let pendingBytes = Atomic<Int>(0)

    package init(transport: any SyncTransport, user: RuleUser, app: ServerApp, session: String? = nil,
                 expiresAt: Double? = nil) {
        self.transport = transport
        self.user = user
        self.app = app
        self.session = session
        self.expiresAt = expiresAt
        uploads = TokenBucket(rate: app.limits.maxUploadsPerSecond)
        queries = TokenBucket(rate: app.limits.maxQueriesPerSecond)
    }

    /// Reads the messages of its socket: a WebSocket, or the server's end of an in-process pipe
    /// (this connection's transport).
    func start(on socket: any MessageSocket) {
        app.metrics.update { c in
            c.connections += 1
            c.connectionsOpened += 1
        }
        app.connectionOpened(self)
        app.queued.opened(self)
        if let expiresAt {
            // The token's end, on the app's queue like every message: the connection lives no
            // longer than the token it was opened with (the client reconnects with a fresh one).
            let left = max(0, expiresAt - Date().timeIntervalSince1970)
            app.queue.asyncAfter(wallDeadline: .now() + left) { [weak self] in self?.endIfExpired() }
        }
        socket.onEvent = { [self] event in
            switch event {
            case .text(let text):
                // Parsed on the app's queue: a large upload does not hold up the loop. What waits
                // there is bounded: a client that sends faster than the server handles its
                // messages is dropped instead of growing the queue without end.
                let size = text.utf8.count
                let waiting = pendingBytes.add(size, ordering: .relaxed).newValue
                let waitingInApp = app.pendingBytes.add(size, ordering: .relaxed).newValue
                if waiting > app.limits.maxPendingBytes || waitingInApp > app.limits.maxPendingBytesPerApp {
                    let what = waiting > app.limits.maxPendingBytes
                        ? "more than \(app.limits.maxPendingBytes) bytes of this connection's messages wait to be handled"
                        : "more than \(app.limits.maxPendingBytesPerApp) bytes of messages wait to be handled in this app"
                    app.log.warning("dropping a connection whose messages pile up", ["user": user.id, "bytes": "\(waiting)", "app bytes": "\(waitingInApp)"])
                    app.metrics.error(SyncErrorCode.tooManyMessages.rawValue)
                    send(.error(SyncErrorMessage(.tooManyMessages, what, retryAfter: 1)))
                    close(code: 1008, reason: "too many messages")
                    pendingBytes.subtract(size, ordering: .relaxed)
                    app.pendingBytes.subtract(size, ordering: .relaxed)
                    return
                }
                // A large message is parsed on another core meanwhile; the queue handles the
                // messages in order all the same.
                let message = ParsedMessage<ClientMessage>(text, ahead: app.parseAhead)
                app.queue.async { [self] in
                    defer {
                        pendingBytes.subtract(size, ordering: .relaxed)
                        app.pendingBytes.subtract(size, ordering: .relaxed)
                    }
                    receive(message, bytes: size)
                }
            case .binary:
                send(.error(SyncErrorMessage(.badMessage, "messages are JSON text, not binary")))
                close(code: 1003, reason: "text only")
            case .closed:
                app.queued.closed(self)
                app.metrics.update { $0.connections -= 1 }
                app.connectionClosed(self)
            case .pong:
                break
            }
        }
    }

    /// Handles one text message of the client; call on the app's queue.
    package func receive(_ text: String) { receive(ParsedMessage(text), bytes: text.utf8.count) }

    private func receive(_ message: ParsedMessage<ClientMessage>, bytes: Int) {
        guard !throttled, !endIfExpired() else { return }
        let decoded: ClientMessage
        do { decoded = try message.message() } catch {
            app.refuseUndecodable(error, from: self)
            return
        }
        app.handle(decoded, from: self, bytes: bytes)
    }

    /// Sends a message; returns its size in bytes.
    @discardableResult
    func send(_ message: ServerMessage) -> Int {
        let text = message.text
        send(text: text)
        return text.utf8.count
    }

    private func send(text: String) {
        do {
            try transport.send(text)
            // What this user's connections hold together, looked at once this one holds a
            // fair amount (most never do: a client reads as fast as it is sent to).
            if transport.queuedBytes > UserQueues.lookAbove, app.queued.bytes(of: user.id) > app.limits.maxQueuedBytesPerUser {
                app.log.warning("dropping a connection: its user's connections hold too much unread", ["user": user.id])
                transport.drop(reason: "its user's connections hold too much unread")
            }
        } catch NetError.queueFull(_) {
            // A client that does not read its downloads is dropped, and what waits for it freed
            // at once; it resumes from its cursor.
            app.log.warning("dropping a connection that does not keep up", ["user": user.id])
            transport.drop(reason: "too far behind")
        } catch {
            // The connection is closing: the client resumes from its cursor when it comes back.
            app.log.debug("a message to a closing connection was dropped", ["user": user.id, "error": "\(error)"])
        }
    }

    func close(code: UInt16, reason: String) { transport.close(code: code, reason: reason) }

    /// Takes one upload from its bucket (on the app's queue); false when the connection is over
    /// `maxUploadsPerSecond`.
    func takeUpload() -> Bool { uploads.take() }

    /// Takes one `bind` or `query` from its bucket (on the app's queue); false when the
    /// connection is over `maxQueriesPerSecond`.
    func takeQuery() -> Bool { queries.take() }

    /// Closes the connection once its access token has expired (on the app's queue), dropping
    /// what it sent after; true when it did (or had). 1008 without an error message: the client
    /// reconnects after its backoff, refreshing its token first, and resumes from its cursors.
    @discardableResult
    func endIfExpired() -> Bool {
        guard let expiresAt, Date().timeIntervalSince1970 >= expiresAt else { return false }
        guard !throttled else { return true }
        throttled = true
        app.log.info("closing a connection whose access token expired", ["user": user.id])
        close(code: 1008, reason: "access token expired")
        return true
    }

    /// Refuses the rest of what the connection sent (on the app's queue): the error, then a close
    /// with 1008 (policy violation; not 1013, which wslay, on our own clients too, refuses as a
    /// protocol error). Its messages still on the queue are dropped, so that no upload after a
    /// refused one is integrated over the gap; the client resends from its upload cursor.
    func refuse(_ error: SyncErrorMessage, reason: String) {
        guard !throttled else { return }
        throttled = true
        send(.error(error))
        close(code: 1008, reason: reason)
    }
}

/// A token bucket: it refills at `rate` tokens a second and holds at most one second of them. A
/// rate of 0 lets everything through.
struct TokenBucket {
    let rate: Double
    private var tokens: Double
    private var updated = DispatchTime.now().uptimeNanoseconds

    init(rate: Int) {
        self.rate = Double(max(0, rate))
        tokens = self.rate
    }

    /// Takes a token; false when none is left.
    mutating func take() -> Bool {
        guard rate > 0 else { return true }
        let now = DispatchTime.now().uptimeNanoseconds
        tokens = min(rate, tokens + rate * Double(now - updated) / 1e9)
        updated = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// Per-connection limits of the sync endpoint (docs/server.md, "Limits").
struct SyncLimits: Sendable {
    /// Upload messages per second per connection (a bucket of one second); 0: no limit.
    var maxUploadsPerSecond: Int
    /// `bind` and `query` messages per second per connection (a bucket of one second); 0: no limit.
    var maxQueriesPerSecond: Int = 0
    /// Bytes of a connection's messages that may wait to be handled before it is dropped.
    var maxPendingBytes: Int
    /// How far a changeset's clock may be ahead of the server's wall clock (milliseconds); 0: no limit.
    var maxClockAheadMilliseconds: Int64 = 0
    /// Bytes queued for all the connections of one user together (`maxQueuedBytesPerUser`).
    var maxQueuedBytesPerUser: Int = 256 << 20
    /// Bytes of all the app's connections' messages waiting to be handled (`maxPendingBytesPerApp`).
    var maxPendingBytesPerApp: Int = 256 << 20
    /// Open sync connections of one user (`maxConnectionsPerUser`); 0: no limit.
    var maxConnectionsPerUser: Int = 0

    /// Seconds as milliseconds, at most `Int64.max` (0 or less: no limit, 0).
    static func milliseconds(_ seconds: Int) -> Int64 {
        guard seconds > 0 else { return 0 }
        let (ms, overflow) = Int64(clamping: seconds).multipliedReportingOverflow(by: 1000)
        return overflow ? .max : ms
    }
}

/// The open connections of an app per user, for what they have queued for their clients
/// together (`maxQueuedBytesPerUser`). Used from any thread: a send looks at it.
final class UserQueues: Sendable {
    /// Below this, a connection's own queue is not worth adding up with the others'.
    static let lookAbove = 1 << 20
    private let transports = Mutex<[String: [ObjectIdentifier: any SyncTransport]]>([:])

    func opened(_ c: SyncConnection) {
        transports.withLock { $0[c.user.id, default: [:]][ObjectIdentifier(c)] = c.transport }
    }

    func closed(_ c: SyncConnection) {
        transports.withLock { all in
            all[c.user.id]?[ObjectIdentifier(c)] = nil
            if all[c.user.id]?.isEmpty == true { all[c.user.id] = nil }
        }
    }

    /// How many connections a user has open.
    func count(of user: String) -> Int { transports.withLock { $0[user]?.count ?? 0 } }

    /// The bytes a user's connections have queued, all together.
    func bytes(of user: String) -> Int {
        transports.withLock { $0[user]?.values.reduce(0) { $0 + $1.queuedBytes } ?? 0 }
    }
}

/// `atoll-server`: the app API (users, tokens), the sync endpoint, health and metrics, over one
/// HTTP server (docs/server.md).
public final class SyncServer: @unchecked Sendable {
    public let configuration: ServerConfiguration
    public let log: Logger
    public let metrics = Metrics()
    let http: HTTPServer
    let apps: [String: ServerApp]
    let auth: [String: AuthService]
    /// The admin console's key (docs/admin-api.md); there is always one.
    public let adminKey: AdminKey
    let metricsHistory: MetricsHistory
    /// Other instances' new versions, with a shared PostgreSQL storage.
    let listener: PostgresListener?
    /// This server's hold on its data directory, until `shutdown`.
    let dataLock: DataDirectoryLock

    /// Opens every app's data (creating the directories) and sets up the routes.
    /// - Parameter authHooks: configures an app's auth before it is created (tests give
    ///   confirmation and reset hooks here).
    public init(configuration: ServerConfiguration,
                authHooks: (@Sendable (inout AuthConfiguration) -> Void)? = nil) throws {
        self.configuration = configuration
        // Before anything in the directory is opened: a second server on it stops here.
        dataLock = try DataDirectoryLock(directory: configuration.dataDirectory)
        log = Logger(level: configuration.logLevel)
        var http = HTTPServerConfiguration()
        http.host = configuration.host
        http.port = configuration.port
        http.headerTimeout = configuration.headerTimeoutSeconds
        http.maxConnections = configuration.maxConnections
        http.maxConnectionsPerAddress = configuration.maxConnectionsPerAddress
        http.webSocket.maxMessageBytes = configuration.maxMessageBytes
        http.webSocket.pingInterval = 30
        http.webSocket.maxQueuedBytes = configuration.maxQueuedBytes
        let limits = SyncLimits(maxUploadsPerSecond: configuration.maxUploadsPerSecond,
                                maxQueriesPerSecond: configuration.maxQueriesPerSecond,
                                maxPendingBytes: max(64 << 20, 4 * configuration.maxMessageBytes),
                                maxClockAheadMilliseconds: SyncLimits.milliseconds(configuration.maxClockAheadSeconds),
                                maxQueuedBytesPerUser: configuration.maxQueuedBytesPerUser,
                                maxPendingBytesPerApp: configuration.maxPendingBytesPerApp,
                                maxConnectionsPerUser: configuration.maxConnectionsPerUser)
        self.http = try HTTPServer(configuration: http)
        var apps = [String: ServerApp]()
        var auth = [String: AuthService]()
        for configured in configuration.apps {
            let app = try AdminAPI.applySaved(to: configured, dataDirectory: configuration.dataDirectory,
                                              shared: configuration.postgresURL != nil)
            let directory = configuration.dataDirectory + "/" + app.id
            let storage: SyncStorage = try configuration.postgresURL.map {
                try PostgresSyncStorage(url: $0, appId: app.id, objectsPerBatch: configuration.postgresCatchUpBatch)
            } ?? LocalSyncStorage()
            let syncApp = try ServerApp(configuration: app, directory: directory, log: log, metrics: metrics, storage: storage,
                                        durability: configuration.durability)
            syncApp.limits = limits
            apps[app.id] = syncApp
            var authConfiguration = try app.auth.map { try AuthConfiguration(appId: app.id, json: $0, keyFiles: !app.authFromConsole) }
                ?? AuthConfiguration(appId: app.id)
            authHooks?(&authConfiguration)
            auth[app.id] = try configuration.postgresURL.map { try PostgresAuthStore.service(configuration: authConfiguration, url: $0) }
                ?? AuthService(configuration: authConfiguration, directory: directory)
        }
        self.apps = apps
        self.auth = auth
        for (id, service) in auth {
            service.limitAttempts(configuration.attemptLimits)
            guard let app = apps[id] else { continue }
            // A logout or a password reset: the connections its access tokens opened close now,
            // not when the tokens expire, here and on the instances sharing the storage.
            service.onSessionsEnded { [weak app] userId, session in
                guard let app else { return }
                app.queue.async {
                    _ = app.closeConnections(ofUser: userId, session: session)
                    do { try app.storage.announceSessionsEnded(user: userId, session: session) } catch {
                        app.log.warning("other instances were not told to close an ended session's connections",
                                        ["user": userId, "error": "\(error)"])
                    }
                }
            }
        }
        let log = self.log
        listener = configuration.postgresURL.map { PostgresListener(url: $0, apps: apps, log: log) }
        adminKey = try AdminKey.load(configured: configuration.adminKey, dataDirectory: configuration.dataDirectory)
        metricsHistory = MetricsHistory(metrics: metrics)
        installRoutes()
        AdminAPI(key: adminKey, apps: apps, auth: auth, dataDirectory: configuration.dataDirectory,
                 history: metricsHistory, sharedStorage: configuration.postgresURL != nil).install(on: self.http)
    }

    public var port: Int { http.port }
    public var url: String { http.url }
    /// The admin console's page.
    public var adminURL: String { http.url + "/admin" }

    /// Starts the server's work: its listener (unless `listening` is false: a server reached only
    /// through `inProcessTransport` opens no port), the metrics history, and with a shared
    /// PostgreSQL storage the notifications of other instances.
    public func start(listening: Bool = true) throws {
        if listening { try http.start() }
        metricsHistory.start()
        listener?.start()
        log.info(listening ? "listening" : "started in process",
                 ["url": listening ? url : "", "apps": apps.keys.sorted().joined(separator: ","), "data": configuration.dataDirectory])
    }

    /// Stops accepting, closes WebSockets (clients resume elsewhere or later), waits for the
    /// integration in progress to commit, closes the stores and lets the data directory go.
    public func shutdown() async {
        closeInProcess()
        await http.shutdown()
        metricsHistory.stop()
        listener?.stop()
        for app in apps.values { app.close() }
        for service in auth.values { service.close() }
        dataLock.release()
        log.info("stopped")
    }

    private func installRoutes() {
        AuthService.install(auth, on: http)
        http.route("GET", "/health") { [apps] _ in
            HTTPResponse(jsonText: Wire.encode(.doc(["status": .string("ok"), "apps": .list(apps.keys.sorted().map { .string($0) })])))
        }
        http.route("GET", "/metrics") { [self] _ in
            let extra = apps.values.map { app in
                ("history_version{app=\"\(app.configuration.id)\"}", "The newest server version.", Double(app.queue.sync { app.latestVersion }))
            }
            return HTTPResponse(text: metrics.prometheus(extra: extra), contentType: "text/plain; version=0.0.4")
        }
        http.webSocket("/api/client/v2.0/app/:app/realm-sync", subprotocols: [syncSubprotocol],
                       authorize: { [self] request in
                           do {
                               let (app, user, _) = try authenticate(request)
                               try admit(user, to: app)
                           } catch let e as HTTPError {
                               var response = HTTPResponse.error(e.status, e.message)
                               if e.status == .tooManyRequests { response.headers["Retry-After"] = "10" }
                               return response
                           } catch {
                               return HTTPResponse.error(.unauthorized, "\(error)")
                           }
                           return nil
                       },
                       onOpen: { [self] socket in
                           guard let request = socket.request, let (app, user, grant) = try? authenticate(request) else {
                               socket.close(code: 1008, reason: "not authorized")
                               return
                           }
                           // Upgrades answered at once may pass the check above together.
                           if app.tooManyConnections(of: user.id) {
                               socket.close(code: 1008, reason: "too many connections of this user")
                               return
                           }
                           SyncConnection(transport: socket, user: user, app: app, session: grant.session,
                                          expiresAt: grant.expiresAt).start(on: socket)
                       })
    }

    /// The app and user of a sync request, from its path and access token.
    func authenticate(_ request: HTTPRequest) throws -> (ServerApp, RuleUser, AuthService.AccessGrant) {
        try authenticate(app: request.pathParameters["app"] ?? "", token: Self.bearer(request.headers) ?? request.queryItems["access_token"])
    }

    /// The token of an `Authorization: Bearer` header.
    private static func bearer(_ headers: HTTPHeaders) -> String? {
        guard let header = headers["authorization"], header.lowercased().hasPrefix("bearer ") else { return nil }
        return String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
    }

    /// The app and user of a sync connection: the app's id and the access token it was opened with.
    private func authenticate(app id: String, token: String?) throws -> (ServerApp, RuleUser, AuthService.AccessGrant) {
        guard let app = apps[id], let service = auth[id] else { throw HTTPError(.notFound, "no app '\(id)'") }
        guard let token, !token.isEmpty else { throw HTTPError(.unauthorized, "an access token is needed") }
        do {
            let grant = try service.verifyAccess(token)
            let user = grant.user
            return (app, RuleUser(id: user.id, data: user.data, customData: user.customData), grant)
        } catch {
            throw HTTPError(.unauthorized, "\(error)")
        }
    }

    /// Refuses a user's sync connection past `maxConnectionsPerUser` (`.tooManyRequests`).
    private func admit(_ user: RuleUser, to app: ServerApp) throws {
        guard app.tooManyConnections(of: user.id) else { return }
        throw HTTPError(.tooManyRequests, "this user has \(app.limits.maxConnectionsPerUser) sync connections open already (maxConnectionsPerUser)")
    }

    // MARK: - In process

    /// A client transport that reaches this server inside the process, without a socket: app API
    /// requests are answered as the HTTP server answers them (its parser and routes), and the
    /// sync connection is a `MemorySocket` pipe opened with the checks of the WebSocket endpoint
    /// (app, access token, `maxConnectionsPerUser`; the pipe has no message size limit: its
    /// client is code of the same process). The server need not be started. Tests use it; so
    /// may a host that runs server and clients in one process. There is one per server
    /// (transports are equal when they are the same object).
    public var inProcessTransport: ClientTransport {
        inProcess.withLock { state in
            if let made = state.transport { return made }
            let transport = ClientTransport(
                request: { [weak self] method, url, headers, body, _, _ in
                    // A server that shut down answers no more, as its closed port would not.
                    guard let self, !self.inProcess.withLock({ $0.closed }) else { throw NetError.closed("the server shut down") }
                    let response = await self.http.answer(raw: try HTTPClient.requestBytes(method, url, headers: headers, body: body))
                    return HTTPClientResponse(status: response.status.code, headers: response.headers, body: response.body)
                },
                connect: { [weak self] url, options in
                    guard let self else { throw NetError.closed("the server is gone") }
                    return try self.connectInProcess(url, options)
                })
            state.transport = transport
            return transport
        }
    }

    /// Opens a sync connection in process: the client's end of the pipe. Refusals are the
    /// endpoint's: `NetError.upgradeRefused` with the HTTP status it would answer.
    private func connectInProcess(_ url: String, _ options: WebSocketClientOptions) throws -> MemorySocket {
        // .../app/<id>/realm-sync
        let parts = (URL(string: url)?.path ?? "").split(separator: "/").map(String.init)
        guard parts.count >= 2, parts.last == "realm-sync" else { throw NetError.upgradeRefused(404) }
        let (app, user, grant): (ServerApp, RuleUser, AuthService.AccessGrant)
        do {
            (app, user, grant) = try authenticate(app: parts[parts.count - 2], token: Self.bearer(options.headers))
            try admit(user, to: app)
        } catch let e as HTTPError {
            throw NetError.upgradeRefused(e.status.code)
        }
        let (client, server) = MemorySocket.pair(label: "atoll.sync.in-process")
        // Checked and recorded at once: a connection opened while the server shuts down is
        // either refused or closed by the shutdown.
        try inProcess.withLock { state in
            guard !state.closed else { throw NetError.upgradeRefused(503) }
            state.sockets.removeAll { $0.value == nil }
            state.sockets.append(WeakSocket(value: server))
        }
        SyncConnection(transport: server, user: user, app: app, session: grant.session, expiresAt: grant.expiresAt).start(on: server)
        return client
    }

    /// The in-process transport once made, the server's ends of its connections (closed with
    /// 1001 by `shutdown`, as the WebSockets are), and whether the server shut down.
    private struct InProcess {
        var transport: ClientTransport?
        var sockets: [WeakSocket] = []
        var closed = false
    }
    private struct WeakSocket { weak var value: MemorySocket? }
    private let inProcess = Mutex(InProcess())

    private func closeInProcess() {
        let sockets = inProcess.withLock { state in
            state.closed = true
            defer { state.sockets = [] }
            return state.sockets.compactMap(\.value)
        }
        for s in sockets { s.close(code: 1001, reason: "server shutting down") }
    }

    /// Answers one HTTP request given as raw bytes, in process, as the server's connections do
    /// (`HTTPServer.answer(raw:)`): the app API, the admin API, health and metrics, without a
    /// socket. For the fuzz target tests/fuzz/http; the server need not be started.
    package func answer(raw bytes: [UInt8]) async -> HTTPResponse {
        await http.answer(raw: bytes)
    }

    /// An app's auth service (tests and the admin API).
    public func authService(_ app: String) -> AuthService? { auth[app] }

    /// Counters of an app's engine, for tests: the newest server version and bound sessions.
    public func latestVersion(_ app: String) -> UInt64? {
        guard let a = apps[app] else { return nil }
        return a.queue.sync { a.latestVersion }
    }
}
