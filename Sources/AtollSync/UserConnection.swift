import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import Foundation

/// What carries a session's messages and runs its work, one piece at a time: the user's WebSocket
/// connection (`UserConnection`), or a link of the deterministic sync simulation
/// (Tests/AtollSyncTests/Simulation), whose seeded scheduler decides what is delivered and run when.
/// Sessions call it only from its own work, but `async`, `sync` and `stop`.
protocol SessionConnection: AnyObject, Sendable {
    /// Runs `work` later, after the work queued before it.
    func async(_ work: @escaping @Sendable () -> Void)
    /// Runs `work` in turn with the connection's other work and waits for it (at once when called
    /// from that work).
    func sync<T>(_ work: () throws -> T) rethrows -> T
    /// Adds a session: it is bound as soon as the connection is up (`ClientSession.didConnect`).
    func attach(_ session: ClientSession)
    /// Removes a session (unbinding it); the connection closes with the last.
    func detach(_ session: ClientSession)
    /// Binds a session again under a new number (after a client reset).
    func rebind(_ session: ClientSession)
    /// Drops the connection and connects again.
    func reconnectNow()
    func send(_ message: ClientMessage)
    /// Closes for good (the user logged out).
    func stop()
}

/// The one WebSocket of a user to the server (or, with an in-process transport, its pipe),
/// carrying the sessions of all its synced realms (docs/protocol.md, "Connection"). Connects
/// when a session needs it, reconnects with backoff after a cut, refreshes the access token when
/// the server refuses it. Everything happens on `queue`.
final class UserConnection: SessionConnection, @unchecked Sendable {
    let queue: DispatchQueue
    let user: ClientUser
    private let url: String
    private let configuration: ClientAppConfiguration
    private var socket: (any MessageSocket)?
    /// Large messages decoded on another core while the queue is busy.
    private let parseAhead = ParseAhead()
    /// The generation of the connection attempt in flight, if any. An attempt whose generation
    /// is no longer this one (a detach, a reconnect or a stop came since) is stale: its outcome
    /// is ignored, and a new attempt may start meanwhile.
    private var connectingGeneration: Int?
    private var sessions: [Int64: ClientSession] = [:]
    private var nextNumber: Int64 = 0
    private var attempt = 0
    private var generation = 0
    private var stopped = false
    private var retryScheduled = false
    /// No reconnect before this (the server's `retryAfter`), on the uptime clock (seconds).
    private var notBefore = 0.0
    /// The longest a server's `retryAfter` holds the connection back.
    static let longestHoldOff = 300.0
    /// Called (on the queue) when the last session left: the app forgets the connection.
    var onIdle: (@Sendable () -> Void)?

    init(app: ClientApp, user: ClientUser) {
        self.user = user
        url = app.syncURL
        configuration = app.configuration
        queue = DispatchQueue(label: "atoll.sync.user.\(user.id)")
        queue.setSpecific(key: Self.queueKey, value: self)
    }

    /// Marks the connection's queue, so that code can tell whether it runs on it.
    static let queueKey = DispatchSpecificKey<UserConnection>()

    func async(_ work: @escaping @Sendable () -> Void) { queue.async(execute: work) }

    func sync<T>(_ work: () throws -> T) rethrows -> T {
        if DispatchQueue.getSpecific(key: Self.queueKey) === self { return try work() }
        return try queue.sync(execute: work)
    }

    /// Adds a session (on the queue): it is bound as soon as the connection is up.
    func attach(_ session: ClientSession) {
        guard !sessions.values.contains(where: { $0 === session }) else { return }
        nextNumber += 1
        session.number = nextNumber
        sessions[nextNumber] = session
        if socket != nil {
            session.didConnect()
        } else {
            session.setConnectionState(.connecting)
            connect()
        }
    }

    /// Removes a session (on the queue); the connection closes with the last.
    func detach(_ session: ClientSession) {
        guard sessions[session.number] === session else { return }
        if session.bound { send(.unbind(session: session.number)) }
        sessions[session.number] = nil
        session.didDisconnect()
        if sessions.isEmpty {
            generation += 1
            connectingGeneration = nil
            socket?.close(code: 1000, reason: "no sessions")
            socket = nil
            onIdle?()
        }
    }

    /// Binds a session again under a new number (after a client reset).
    func rebind(_ session: ClientSession) {
        guard sessions[session.number] === session else { return }
        if session.bound { send(.unbind(session: session.number)) }
        sessions[session.number] = nil
        session.didDisconnect()
        attach(session)
    }

    func stop() {
        queue.async { [self] in
            stopped = true
            drop(code: 1000, reason: "logged out")
        }
    }

    func send(_ message: ClientMessage) {
        guard let socket else { return }
        do { try socket.send(message.text) } catch {
            socket.close(code: 1001, reason: "send failed")
        }
    }

    /// Drops the connection and connects again.
    func reconnectNow() {
        drop(code: 1000, reason: "reconnect")
        attempt = 0
        connect()
    }

    /// Closes the socket (or forgets the attempt in flight) and tells the sessions: what the
    /// socket still reports is stale.
    private func drop(code: UInt16, reason: String) {
        generation += 1
        connectingGeneration = nil
        socket?.close(code: code, reason: reason)
        socket = nil
        for s in sessions.values { s.didDisconnect() }
    }

    private var wanted: Bool { !stopped && sessions.values.contains { $0.state == .active } }

    private func connect() {
        guard socket == nil, connectingGeneration == nil, wanted else { return }
        for s in sessions.values { s.setConnectionState(.connecting) }
        generation += 1
        let gen = generation
        connectingGeneration = gen
        let url = self.url
        var options = WebSocketClientOptions()
        options.subprotocols = [syncSubprotocol]
        options.connectTimeout = configuration.connectTimeout
        options.tls = configuration.tls
        options.webSocket.maxMessageBytes = 64 << 20
        options.webSocket.pingInterval = 30
        let user = self.user, transport = configuration.transport
        Task { [self] in
            do {
                var token = try await user.validAccessToken()
                options.headers = ["Authorization": "Bearer \(token)"]
                let ws: any MessageSocket
                do {
                    ws = try await transport.connect(url, options)
                } catch NetError.upgradeRefused(401) {
                    // The token was refused (revoked signing key, clock skew): refresh once.
                    try await user.refreshAccessToken()
                    token = user.accessToken
                    options.headers = ["Authorization": "Bearer \(token)"]
                    ws = try await transport.connect(url, options)
                }
                queue.async { self.opened(ws, gen) }
            } catch {
                queue.async { self.failed(error, gen) }
            }
        }
    }

    private func opened(_ ws: any MessageSocket, _ gen: Int) {
        guard gen == connectingGeneration else {
            // A stale attempt: the connection was dropped or made again since it started.
            ws.close(code: 1000, reason: "not needed")
            return
        }
        connectingGeneration = nil
        guard wanted else {
            ws.close(code: 1000, reason: "not needed")
            return
        }
        socket = ws
        attempt = 0
        ws.onEvent = { [weak self] event in
            guard let self else { return }
            // A large message is parsed on another core meanwhile; the queue handles the
            // messages in order all the same.
            let message: ParsedMessage<ServerMessage>? = if case .text(let text) = event { ParsedMessage(text, ahead: self.parseAhead) } else { nil }
            self.queue.async { self.event(event, message, ws) }
        }
        for s in sessions.values.sorted(by: { $0.number < $1.number }) { s.didConnect() }
    }

    private func failed(_ error: Error, _ gen: Int) {
        guard gen == connectingGeneration else { return }
        connectingGeneration = nil
        let syncError: SyncError
        switch error {
        case let e as SyncError: syncError = e
        case NetError.timeout(let what): syncError = SyncError(.timeout, "connecting to the server timed out (\(what))")
        case NetError.upgradeRefused(let status):
            syncError = SyncError(status == 401 ? .authFailed : .connectionFailed, "the server refused the sync connection (HTTP \(status))", status: status)
        default: syncError = SyncError(.connectionFailed, "cannot connect to the server: \(error)")
        }
        for s in sessions.values {
            s.setConnectionState(.disconnected)
            s.connectFailed(syncError)
        }
        if syncError.code == .authFailed && syncError.status == 401 && !user.isLoggedIn { return }
        scheduleRetry()
    }

    private func scheduleRetry() {
        guard wanted, !retryScheduled else { return }
        retryScheduled = true
        attempt += 1
        // 0.25 s, 0.5, 1, 2 … up to 30 s, with jitter; not before the server said to try again.
        let backoff = min(30, 0.25 * pow(2, Double(min(attempt - 1, 7)))) * Double.random(in: 0.8...1.2)
        let delay = max(backoff, notBefore - Self.uptime())
        queue.asyncAfter(deadline: .now() + delay) { [self] in
            retryScheduled = false
            connect()
        }
    }

    private func event(_ event: WebSocketEvent, _ message: ParsedMessage<ServerMessage>?, _ ws: any MessageSocket) {
        guard ws === socket else { return }
        switch event {
        case .text:
            guard let message else { return }
            let decoded = Result { try message.message() }
            if let seconds = Self.retryAfter(decoded) {
                // Before the close that follows: the reconnect it schedules waits this long.
                notBefore = max(notBefore, Self.uptime() + min(Double(seconds), Self.longestHoldOff))
            }
            guard Self.deliver(decoded, to: sessions) else {
                // As the server does with a client's message outside the protocol: closed (the
                // sessions were told), and made again after the backoff.
                drop(code: 1002, reason: "bad message")
                scheduleRetry()
                return
            }
        case .closed(let code, let reason):
            socket = nil
            for s in sessions.values { s.didDisconnect() }
            if code != 1000 && code != 1001 {
                for s in sessions.values { s.report(SyncError(.connectionFailed, "the connection closed (\(code) \(reason))")) }
            }
            scheduleRetry()
        case .binary, .pong:
            break
        }
    }
}

extension SessionConnection {
    /// Hands a message from the server to the session it names (of `sessions`, the
    /// connection's); an `error` for no session, or for a session the connection no longer has,
    /// goes to every session. A message that does not decode (not JSON, a type the protocol does
    /// not have, a field missing or of the wrong kind) is refused as the server refuses a
    /// client's (docs/protocol.md, "Unknown messages"): every session hears `badMessage`, and
    /// the result is false: the connection must close.
    static func deliver(_ decoded: Result<ServerMessage, Error>, to sessions: [Int64: ClientSession]) -> Bool {
        switch decoded {
        case .success(let message):
            if let n = message.session, let s = sessions[n] {
                s.handle(message)
            } else if case .error(let e) = message {
                for s in sessions.values { s.report(SyncError(e.code, e.message)) }
            }
            return true
        case .failure(let error):
            let what = (error as? ProtocolError)?.message ?? "\(error)"
            for s in sessions.values { s.report(SyncError(.badMessage, "the server sent a message outside the protocol: \(what)")) }
            return false
        }
    }

    /// The seconds a server's error asks the client to wait before it connects again.
    static func retryAfter(_ decoded: Result<ServerMessage, Error>) -> Int64? {
        guard case .success(.error(let e)) = decoded, let seconds = e.retryAfter, seconds > 0 else { return nil }
        return seconds
    }
}

extension UserConnection {
    /// Seconds on a clock that does not jump with the wall clock.
    static func uptime() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}

/// The sync protocol's WebSocket subprotocol (docs/protocol.md).
let syncSubprotocol = "atoll-sync.1"
