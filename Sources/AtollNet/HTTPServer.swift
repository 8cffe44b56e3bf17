import CEpoll
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// One file over 600 lines: the server and its connection class share the loop-thread state
// (limits, shutdown, counters) through fileprivate members that a split would have to open up.

/// How a server listens and what it allows.
public struct HTTPServerConfiguration: Sendable {
    /// The address to listen on (a name or numeric address). Loopback by default.
    public var host = "127.0.0.1"
    /// The port; 0 picks a free one (read it back from `HTTPServer.port`).
    public var port = 0
    /// TLS (https and wss) when set; plain otherwise.
    public var tls: TLSServerConfiguration?
    /// The request line and header fields together, in bytes (over: 431, or 414 for the target).
    public var maxHeaderBytes = 16 * 1024
    /// A request body, in bytes (over: 413).
    public var maxBodyBytes = 16 << 20
    /// Seconds a client has to send a whole request head once it started one (over: 408), and
    /// to send its first byte after the connection was accepted (over: closed). A socket that
    /// says nothing holds a connection slot for this long only, not `idleTimeout`.
    public var headerTimeout = 10.0
    /// Seconds a client has to send a whole request, head and body (over: 408).
    public var requestTimeout = 60.0
    /// Seconds a keep-alive connection may sit idle between requests before it is closed.
    public var idleTimeout = 60.0
    /// Seconds a TLS handshake may take.
    public var handshakeTimeout = 10.0
    /// Connections beyond this are accepted and closed at once (with a 503 for HTTP).
    public var maxConnections = 10_000
    /// Connections from one address (IP, without the port) beyond this are accepted and closed
    /// at once (with a 503 for HTTP), so that one host cannot take every slot; 0: no limit.
    /// Behind a reverse proxy every client has the proxy's address.
    public var maxConnectionsPerAddress = 256
    /// The settings of upgraded WebSocket connections.
    public var webSocket = WebSocketOptions()
    /// How long `shutdown` waits for connections to finish before closing them.
    public var shutdownGrace = 5.0
    public init() {}
}

/// A request handler: runs as a task, may take its time; an `HTTPError` it throws becomes
/// that status with a JSON error body, any other error a 500.
public typealias HTTPHandler = @Sendable (HTTPRequest) async throws -> HTTPResponse

/// An HTTP/1.1 server with WebSocket upgrades, on one event loop thread (docs/net.md).
///
/// Add routes, then `start()`; `shutdown()` closes every connection (WebSockets with 1001).
public final class HTTPServer: @unchecked Sendable {
    public let configuration: HTTPServerConfiguration
    public let loop: EventLoop
    private let ownsLoop: Bool
    private let router = Mutex(Router())
    private struct State {
        var listener: Listener?
        var port = 0
        var started = false
        var stopping = false
        var stopped = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())
    private var tlsContext: TLSContext?
    /// Loop-thread set of the open connections.
    fileprivate var connections: [ObjectIdentifier: ServerConnection] = [:]
    /// Loop-thread count of the open connections per address (`maxConnectionsPerAddress`).
    private var connectionsPerAddress: [String: Int] = [:]
    private let counterStore = Mutex(Counters())

    /// Numbers for metrics.
    public struct Counters: Sendable {
        public var acceptedConnections = 0
        public var openConnections = 0
        public var openWebSockets = 0
        public var requests = 0
        public var rejectedRequests = 0
    }

    /// A server on its own loop thread (or on `loop`, shared with other servers or clients).
    public init(configuration: HTTPServerConfiguration = HTTPServerConfiguration(), loop: EventLoop? = nil) throws {
        self.configuration = configuration
        if let loop {
            self.loop = loop
            ownsLoop = false
        } else {
            self.loop = try EventLoop(name: "atoll-http-server")
            ownsLoop = true
        }
    }

    /// The port the server listens on (after `start`).
    public var port: Int { state.withLock { $0.port } }

    /// "http://127.0.0.1:PORT" (https when TLS is on).
    public var url: String {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "\(configuration.tls == nil ? "http" : "https")://\(host):\(port)"
    }

    public var counters: Counters { counterStore.withLock { $0 } }

    // MARK: routes

    /// Routes `method` and `path` to `handler`. A path segment `:name` matches any one segment
    /// (its value in `request.pathParameters`); a final `*` matches the rest.
    public func route(_ method: String, _ path: String, _ handler: @escaping HTTPHandler) {
        router.withLock { $0.add(method: method.uppercased(), pattern: path, handler: handler) }
    }

    /// Upgrades GET requests on `path` to WebSocket. `subprotocols` are the server's, in order of
    /// preference: the first one the client also offers is chosen; a client that offers none of
    /// them is refused (400) unless `subprotocolRequired` is false (then it gets none). `authorize` may refuse the upgrade with
    /// a response (e.g. 401); `onOpen` gets the open socket on the loop thread.
    public func webSocket(_ path: String, subprotocols: [String] = [], subprotocolRequired: Bool = true,
                          authorize: (@Sendable (HTTPRequest) -> HTTPResponse?)? = nil,
                          onOpen: @escaping @Sendable (WebSocket) -> Void) {
        let route = WebSocketRoute(subprotocols: subprotocols, subprotocolRequired: subprotocolRequired,
                                   authorize: authorize, onOpen: onOpen)
        router.withLock { $0.addWebSocket(pattern: path, route: route) }
    }

    // MARK: life cycle

    /// Binds and starts accepting. Throws when the address cannot be bound or TLS cannot load.
    public func start() throws {
        try loop.checkRunning()
        try state.withLock { state in
            guard !state.started else { throw NetError.protocolError("the server is already started") }
            state.started = true
        }
        var listening = false
        defer { if !listening { state.withLock { $0.started = false } } }
        if let tls = configuration.tls { tlsContext = try TLSContext.server(tls) }
        let (fd, port) = try Socket.listen(host: configuration.host, port: configuration.port, backlog: 1024)
        let listener = Listener(fd: fd, server: self)
        let registered = Mutex<Error?>(nil)
        let ready = DispatchSemaphore(value: 0)
        loop.execute {
            do { try self.loop.register(fd, events: EPOLLIN.rawValue, handler: listener) } catch {
                registered.withLock { $0 = error }
            }
            ready.signal()
        }
        ready.wait()
        if let error = registered.withLock({ $0 }) {
            close(fd)
            throw error
        }
        listening = true
        state.withLock {
            $0.listener = listener
            $0.port = port
        }
    }

    /// Stops accepting, closes idle connections, lets requests in progress finish, closes
    /// WebSockets with 1001 (going away), and after `shutdownGrace` closes what is left.
    /// Returns when every connection is closed (and the server's own loop stopped).
    public func shutdown() async {
        // The first call does the work; later calls wait for it to finish.
        let first = state.withLock { state -> Bool in
            defer { state.stopping = true }
            return !state.stopping
        }
        guard first else {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state -> Bool in
                    if !state.stopped { state.waiters.append(continuation) }
                    return state.stopped
                }
                if done { continuation.resume() }
            }
            return
        }
        let listener = state.withLock { state -> Listener? in
            defer { state.listener = nil }
            return state.listener
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let accepted = loop.execute {
                listener?.close()
                self.beginShutdown { continuation.resume() }
            }
            // A loop already stopped has closed every connection (and the listener) itself.
            if !accepted { continuation.resume() }
        }
        // Stopped from here, not from the loop's thread, so that the thread has ended (and its
        // libraries' thread-local state is freed) when this returns.
        if ownsLoop { loop.stop() }
        // A stopped server serves nothing more: dropping its routes also frees handlers that
        // capture the server itself (a cycle otherwise).
        router.withLock { $0 = Router() }
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.stopped = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private var shutdownDone: (() -> Void)?
    private var shutdownDeadline = 0.0

    private func beginShutdown(_ done: @escaping () -> Void) {
        shutdownDone = done
        shutdownDeadline = EventLoop.now() + configuration.shutdownGrace
        for connection in Array(connections.values) { connection.shutdown() }
        checkShutdownDone()
    }

    fileprivate func checkShutdownDone() {
        guard let done = shutdownDone else { return }
        if connections.isEmpty {
            shutdownDone = nil
            done()
        } else if EventLoop.now() >= shutdownDeadline && !forceClosing {
            // Each close reports back through `closed`; check once at the end, not once per close.
            forceClosing = true
            for connection in Array(connections.values) { connection.close() }
            forceClosing = false
            checkShutdownDone()
        }
    }

    private var forceClosing = false

    var isStopping: Bool { state.withLock { $0.stopping } }

    // MARK: loop side

    fileprivate func accept(listenerFD: Int32) {
        while true {
            let fd = atoll_accept_nonblocking(listenerFD)
            if fd < 0 {
                // Out of descriptors: the pending connection stays readable, so stop listening until
                // a connection closes or the next tick, instead of waking the loop without end.
                if errno == EMFILE || errno == ENFILE { listener?.pause() }
                return
            }
            counterStore.withLock { $0.acceptedConnections += 1 }
            Socket.setNoDelay(fd)
            let remote = Socket.peerName(fd)
            let address = Self.address(of: remote)
            let fromAddress = connectionsPerAddress[address, default: 0]
            let perAddress = configuration.maxConnectionsPerAddress
            if connections.count >= configuration.maxConnections || isStopping || (perAddress > 0 && fromAddress >= perAddress) {
                // A plain-text answer means nothing to a TLS client: just close.
                if tlsContext == nil {
                    let busy = HTTPResponse.error(.serviceUnavailable, "server busy").serialized(keepAlive: false)
                    _ = busy.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                }
                close(fd)
                continue
            }
            let transport: Transport
            if let tlsContext {
                guard let tls = try? TLSTransport(fd: fd, context: tlsContext, serverName: nil) else {
                    close(fd)
                    continue
                }
                transport = tls
            } else {
                transport = PlainTransport(fd: fd)
            }
            let connection = ServerConnection(server: self, transport: transport, remote: remote, address: address)
            do {
                try connection.start()
            } catch {
                transport.close()
                continue
            }
            connections[ObjectIdentifier(connection)] = connection
            connectionsPerAddress[address] = fromAddress + 1
            let open = connections.count
            counterStore.withLock { $0.openConnections = open }
        }
    }

    /// The address part of a peer name ("127.0.0.1:40123", "::1:40123"): what
    /// `maxConnectionsPerAddress` counts by.
    public static func address(of peer: String) -> String {
        guard let colon = peer.lastIndex(of: ":") else { return peer }
        return String(peer[..<colon])
    }

    fileprivate func closed(_ connection: ServerConnection) {
        if connections.removeValue(forKey: ObjectIdentifier(connection)) != nil {
            let left = connectionsPerAddress[connection.address, default: 1] - 1
            connectionsPerAddress[connection.address] = left > 0 ? left : nil
        }
        let open = connections.count
        counterStore.withLock { $0.openConnections = open }
        if !forceClosing { checkShutdownDone() }
        listener?.resume()
    }

    /// The listener, for the loop thread (paused while the process is out of descriptors).
    private var listener: Listener? { state.withLock { $0.listener } }

    fileprivate func match(method: String, path: String) -> RouteMatch {
        router.withLock { $0.match(method: method, path: path) }
    }

    fileprivate func matchWebSocket(path: String) -> (WebSocketRoute, [String: String])? {
        router.withLock { $0.matchWebSocket(path: path) }
    }

    /// What routing made of a request: an answer at once (no route, a method not allowed, a
    /// bad target), or the handler to run with the request and its path parameters.
    enum Routed {
        case answer(HTTPResponse, keepOpen: Bool)
        case handler(HTTPHandler, HTTPRequest)
    }

    /// Routes a request whose path is `rawPath` as received (percent-encoded).
    func route(_ request: HTTPRequest, rawPath: String) -> Routed {
        guard rawPath.hasPrefix("/") else {
            return .answer(.error(.badRequest, "request target must be a path"), keepOpen: false)
        }
        switch match(method: request.method, path: rawPath) {
        case .notFound:
            let status: HTTPStatus = matchWebSocket(path: rawPath) != nil ? .upgradeRequired : .notFound
            var response = HTTPResponse.error(status, status == .notFound ? "no route for \(request.path)" : "this path takes WebSocket upgrades")
            if status == .upgradeRequired { response.headers["Upgrade"] = "websocket" }
            return .answer(response, keepOpen: true)
        case let .methodNotAllowed(allowed):
            var response = HTTPResponse.error(.methodNotAllowed, "\(request.method) is not allowed on \(request.path)")
            response.headers["Allow"] = allowed.joined(separator: ", ")
            return .answer(response, keepOpen: true)
        case let .handler(handler, parameters):
            var routed = request
            routed.pathParameters = parameters
            return .handler(handler, routed)
        }
    }

    /// Runs a route's handler; a thrown `HTTPError` becomes its status and message, anything
    /// else a 500 that does not show the internal error.
    static func run(_ handler: HTTPHandler, _ request: HTTPRequest) async -> HTTPResponse {
        do {
            return try await handler(request)
        } catch let error as HTTPError {
            return .error(error.status, error.message)
        } catch {
            return .error(.internalServerError, "internal error")
        }
    }

    /// The request, and its path as received (percent-encoded), which routing splits into
    /// segments before decoding them (so that `%2F` stays inside a segment).
    static func request(from message: ParsedMessage, remote: String) -> (HTTPRequest, rawPath: String) {
        var target = Substring(message.target)
        // The absolute form (RFC 9112 §3.2.2), "http://host/path": keep the path.
        for scheme in ["http://", "https://"] where target.lowercased().hasPrefix(scheme) {
            let rest = target.dropFirst(scheme.count)
            target = rest.firstIndex(where: { $0 == "/" || $0 == "?" }).map { rest[$0...] } ?? "/"
            if target.hasPrefix("?") { target = "/" + target }
        }
        let (rawPath, query): (Substring, Substring) = {
            if let mark = target.firstIndex(of: "?") { return (target[..<mark], target[target.index(after: mark)...]) }
            return (target, "")
        }()
        let path = String(rawPath).removingPercentEncoding ?? String(rawPath)
        let request = HTTPRequest(method: message.method, path: path, query: String(query), headers: message.headers,
                                  body: message.body, remoteAddress: remote)
        return (request, String(rawPath))
    }

    /// Answers one request given as the bytes a client would send (head and body), in process:
    /// parsed with the connections' parser and limits, routed and handled as a connection does,
    /// without a socket or the event loop (the fuzz target tests/fuzz uses it). A WebSocket
    /// upgrade is answered 501 here; bytes after the first request are ignored.
    package func answer(raw bytes: [UInt8], remoteAddress: String = "127.0.0.1:1") async -> HTTPResponse {
        let parser = HTTPMessageParser(request: true, maxHeaderBytes: configuration.maxHeaderBytes,
                                       maxBodyBytes: configuration.maxBodyBytes)
        var result = bytes.withUnsafeBytes { parser.feed($0) }
        if case .needMore = result {
            // The client closed after its bytes: a body read until close ends here.
            result = parser.feed(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        switch result {
        case .needMore:
            return .error(.badRequest, "incomplete request")
        case let .failure(status, message):
            return .error(status, message)
        case let .message(message, _):
            if message.upgrade {
                return .error(.notImplemented, "upgrades are not answered in process")
            }
            let (request, rawPath) = Self.request(from: message, remote: remoteAddress)
            switch route(request, rawPath: rawPath) {
            case let .answer(response, _): return response
            case let .handler(handler, routed): return await Self.run(handler, routed)
            }
        }
    }

    fileprivate func count(_ update: (inout Counters) -> Void) { counterStore.withLock { update(&$0) } }
    fileprivate var tls: Bool { tlsContext != nil }
}

// MARK: - listener

private final class Listener: LoopHandler, @unchecked Sendable {
    let fd: Int32
    /// A started server lives until its shutdown, like the thread it runs on.
    let server: HTTPServer
    private var closed = false
    init(fd: Int32, server: HTTPServer) {
        self.fd = fd
        self.server = server
    }
    private var paused = false
    func handleEvents(_ events: UInt32) { server.accept(listenerFD: fd) }
    func tick(now: Double) {
        resume()
        server.checkShutdownDone()
    }
    func loopStopped() { close() }
    func pause() {
        guard !paused, !closed else { return }
        paused = true
        server.loop.modify(fd, events: 0)
    }
    func resume() {
        guard paused, !closed else { return }
        paused = false
        server.loop.modify(fd, events: EPOLLIN.rawValue)
    }
    func close() {
        guard !closed else { return }
        closed = true
        server.loop.unregister(fd)
        Glibc.close(fd)
    }
}

// MARK: - routing

struct WebSocketRoute {
    var subprotocols: [String]
    var subprotocolRequired: Bool
    var authorize: (@Sendable (HTTPRequest) -> HTTPResponse?)?
    var onOpen: @Sendable (WebSocket) -> Void
}

enum RouteMatch {
    case handler(HTTPHandler, [String: String])
    case methodNotAllowed([String])
    case notFound
}

struct Router {
    private struct Entry<Value> {
        var segments: [Substring]
        var value: Value
    }
    private var routes: [(method: String, entry: Entry<HTTPHandler>)] = []
    private var webSockets: [Entry<WebSocketRoute>] = []

    private static func segments(_ path: String) -> [Substring] { path.split(separator: "/", omittingEmptySubsequences: true) }

    /// A received path's segments, each percent-decoded.
    private static func decodedSegments(_ rawPath: String) -> [Substring] {
        segments(rawPath).map { Substring($0.removingPercentEncoding ?? String($0)) }
    }

    mutating func add(method: String, pattern: String, handler: @escaping HTTPHandler) {
        routes.append((method, Entry(segments: Self.segments(pattern), value: handler)))
    }

    mutating func addWebSocket(pattern: String, route: WebSocketRoute) {
        webSockets.append(Entry(segments: Self.segments(pattern), value: route))
    }

    private static func match(_ pattern: [Substring], _ path: [Substring]) -> [String: String]? {
        var parameters: [String: String] = [:]
        for (index, part) in pattern.enumerated() {
            if part == "*" {
                parameters["*"] = path.dropFirst(index).joined(separator: "/")
                return parameters
            }
            guard index < path.count else { return nil }
            if part.hasPrefix(":") {
                parameters[String(part.dropFirst())] = String(path[index])
            } else if part != path[index] {
                return nil
            }
        }
        return pattern.count == path.count ? parameters : nil
    }

    func match(method: String, path: String) -> RouteMatch {
        let parts = Self.decodedSegments(path)
        var allowed: [String] = []
        for (routeMethod, entry) in routes {
            guard let parameters = Self.match(entry.segments, parts) else { continue }
            if routeMethod == method || (method == "HEAD" && routeMethod == "GET") {
                return .handler(entry.value, parameters)
            }
            allowed.append(routeMethod)
            if routeMethod == "GET" { allowed.append("HEAD") }
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed)
    }

    func matchWebSocket(path: String) -> (WebSocketRoute, [String: String])? {
        let parts = Self.decodedSegments(path)
        for entry in webSockets {
            if let parameters = Self.match(entry.segments, parts) { return (entry.value, parameters) }
        }
        return nil
    }
}

// MARK: - one server connection

/// A server-side connection: HTTP/1.1 requests one at a time (keep-alive, pipelined requests
/// wait their turn), or after an upgrade a WebSocket.
private final class ServerConnection: Channel {
    let server: HTTPServer
    let remote: String
    /// The peer's address without its port (`maxConnectionsPerAddress`).
    let address: String
    private var parser: HTTPMessageParser
    /// Bytes received after the current request, kept while it is handled.
    private var pending: [UInt8] = []
    private var handling = false
    private var messageStartedAt: Double?
    private var lastActivity = EventLoop.now()
    private let acceptedAt = EventLoop.now()
    /// Nothing received since the accept: such a connection has `headerTimeout` to speak, not
    /// `idleTimeout`, so that silent sockets cannot hold the connection slots.
    private var silentSinceAccept = true
    private var shuttingDown = false

    init(server: HTTPServer, transport: Transport, remote: String, address: String) {
        self.server = server
        self.remote = remote
        self.address = address
        let configuration = server.configuration
        parser = HTTPMessageParser(request: true, maxHeaderBytes: configuration.maxHeaderBytes,
                                   maxBodyBytes: configuration.maxBodyBytes)
        super.init(loop: server.loop, transport: transport, handshakeDone: !(transport is TLSTransport))
    }

    override func received(_ bytes: UnsafeRawBufferPointer) {
        lastActivity = EventLoop.now()
        if !bytes.isEmpty { silentSinceAccept = false }
        if let webSocket {
            webSocket.received(bytes)
            return
        }
        if handling {
            pending.append(contentsOf: bytes)
            readPaused = true
            return
        }
        parse(bytes)
    }

    private func parse(_ bytes: UnsafeRawBufferPointer) {
        if messageStartedAt == nil && !bytes.isEmpty { messageStartedAt = EventLoop.now() }
        switch parser.feed(bytes) {
        case .needMore:
            if parser.wantsContinue {
                // The client waits for leave to send its body (RFC 9110 §10.1.1).
                parser.wantsContinue = false
                write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            }
            return
        case let .failure(status, message):
            server.count { $0.rejectedRequests += 1 }
            reject(status, message)
        case let .message(message, consumed):
            messageStartedAt = nil
            let rest = UnsafeRawBufferPointer(rebasing: bytes[consumed...])
            if message.upgrade && message.headers.tokens("Upgrade").contains("websocket") {
                upgrade(message, leftover: rest)
            } else if message.upgrade && (message.headers["Content-Length"].map { $0 != "0" } ?? false
                                          || message.headers["Transfer-Encoding"] != nil) {
                // Another protocol (h2c…) may be ignored (RFC 9110 §7.8), but the parser stops at the
                // head of an upgrade request, so a body would be taken for the next request.
                reject(.badRequest, "an Upgrade to \(message.headers["Upgrade"] ?? "?") with a body is not supported")
            } else {
                pending = Array(rest)
                dispatch(message)
            }
        }
    }

    /// Answers a request the server cannot take and closes (the connection's state is unknown).
    private func reject(_ status: HTTPStatus, _ message: String) {
        readPaused = true
        write(HTTPResponse.error(status, message).serialized(keepAlive: false))
        closeAfterFlush(linger: status != .requestTimeout)
    }

    private func dispatch(_ message: ParsedMessage) {
        handling = true
        readPaused = true
        server.count { $0.requests += 1 }
        let (request, rawPath) = HTTPServer.request(from: message, remote: remote)
        let keepAlive = message.keepAlive && !shuttingDown
        let isHead = message.method == "HEAD"
        switch server.route(request, rawPath: rawPath) {
        case let .answer(response, keepOpen):
            respond(response, keepAlive: keepAlive && keepOpen, head: isHead)
        case let .handler(handler, finalRequest):
            let loop = self.loop
            let box = UncheckedBox(self)
            Task {
                let response = await HTTPServer.run(handler, finalRequest)
                loop.execute { box.value.respond(response, keepAlive: keepAlive, head: isHead) }
            }
        }
    }

    private func respond(_ response: HTTPResponse, keepAlive: Bool, head: Bool) {
        guard !isClosed else { return }
        let keep = keepAlive && !shuttingDown
        write(response.serialized(keepAlive: keep, head: head))
        handling = false
        lastActivity = EventLoop.now()
        if !keep {
            closeAfterFlush()
            return
        }
        resumeRequests()
    }

    /// Bytes of answers waiting to be written above which the next request waits (a client that
    /// pipelines requests without reading the answers does not grow the server's memory).
    private static let responseHighMark = 1 << 20

    private func resumeRequests() {
        guard !handling, !closeWhenFlushed, !isClosed, webSocket == nil else { return }
        if pendingOutgoing > Self.responseHighMark {
            readPaused = true
            return
        }
        readPaused = false
        if !pending.isEmpty {
            let rest = pending
            pending = []
            rest.withUnsafeBytes { parse($0) }
        }
    }

    override func writable() {
        if webSocket != nil { return super.writable() }
        if readPaused && !handling { resumeRequests() }
    }

    private func upgrade(_ message: ParsedMessage, leftover: UnsafeRawBufferPointer) {
        var (request, rawPath) = HTTPServer.request(from: message, remote: remote)
        let headers = message.headers
        guard let (route, parameters) = server.matchWebSocket(path: rawPath) else {
            reject(.notFound, "no WebSocket route for \(request.path)")
            return
        }
        request.pathParameters = parameters
        guard message.method == "GET", headers.tokens("Upgrade").contains("websocket"),
              headers.tokens("Connection").contains("upgrade") else {
            reject(.badRequest, "not a WebSocket upgrade (GET with Upgrade: websocket and Connection: Upgrade)")
            return
        }
        guard headers["Sec-WebSocket-Version"] == "13" else {
            readPaused = true
            var response = HTTPResponse.error(.upgradeRequired, "unsupported WebSocket version")
            response.headers["Sec-WebSocket-Version"] = "13"
            write(response.serialized(keepAlive: false))
            closeAfterFlush()
            return
        }
        guard let key = headers["Sec-WebSocket-Key"], let decoded = Data(base64Encoded: key), decoded.count == 16 else {
            reject(.badRequest, "missing or invalid Sec-WebSocket-Key")
            return
        }
        let offered = headers.tokens("Sec-WebSocket-Protocol")
        var chosen: String?
        if !route.subprotocols.isEmpty {
            chosen = route.subprotocols.first { offered.contains($0.lowercased()) }
            if chosen == nil && route.subprotocolRequired {
                reject(.badRequest, "no supported subprotocol offered (supported: \(route.subprotocols.joined(separator: ", ")))")
                return
            }
        }
        if let authorize = route.authorize, let refusal = authorize(request) {
            readPaused = true
            write(refusal.serialized(keepAlive: false))
            closeAfterFlush()
            return
        }
        var response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        response += "Sec-WebSocket-Accept: \(Crypto.webSocketAccept(key: key))\r\n"
        if let chosen { response += "Sec-WebSocket-Protocol: \(chosen)\r\n" }
        response += "\r\n"
        write(Array(response.utf8))
        let socket: WebSocket
        do {
            socket = try WebSocket(channel: self, isServer: true, subprotocol: chosen, request: request,
                                   options: server.configuration.webSocket)
        } catch {
            close()
            return
        }
        webSocket = socket
        server.count { $0.openWebSockets += 1 }
        route.onOpen(socket)
        if shuttingDown { socket.close(code: 1001, reason: "server shutting down") }
        socket.start(leftover: leftover)
    }

    override func tick(now: Double) {
        // During a shutdown, the connections' ticks enforce its grace period.
        server.checkShutdownDone()
        if isClosed || lingerTick(now: now) { return }
        if let webSocket {
            webSocket.tick(now: now)
            return
        }
        let configuration = server.configuration
        if !handshakeDone {
            if now - acceptedAt > configuration.handshakeTimeout { close() }
            return
        }
        // Idle means nothing in either direction: a slow download is not idle.
        let idleSince = max(lastActivity, lastWrite)
        if closeWhenFlushed {
            // Closing once the answer is written, to a client that does not read it.
            if now - idleSince > configuration.idleTimeout { close() }
            return
        }
        if handling { return }
        if silentSinceAccept {
            // Accepted (and through TLS) and not a byte since: a slot held by a socket that
            // may never speak.
            if now - acceptedAt > configuration.headerTimeout {
                server.count { $0.rejectedRequests += 1 }
                close()
            }
            return
        }
        if let started = messageStartedAt {
            // A slow client (slowloris): the head, or the whole request, takes too long.
            let limit = parser.headComplete ? configuration.requestTimeout : configuration.headerTimeout
            if now - started > limit {
                server.count { $0.rejectedRequests += 1 }
                reject(.requestTimeout, "request not received in time")
            }
        } else if now - idleSince > configuration.idleTimeout {
            close()
        }
    }

    func shutdown() {
        shuttingDown = true
        if let webSocket {
            webSocket.close(code: 1001, reason: "server shutting down")
        } else if !handling && messageStartedAt == nil {
            closeAfterFlush()
        }
    }

    override func didClose() {
        if webSocket != nil { server.count { $0.openWebSockets -= 1 } }
        super.didClose()
        server.closed(self)
    }
}

/// Carries a loop-thread object through a task; it is only touched again on the loop thread.
struct UncheckedBox<Value: AnyObject>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
