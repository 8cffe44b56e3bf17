import Foundation
import Synchronization

/// What a peer of the sync protocol uses of a WebSocket: text out, events in, a close. A
/// `WebSocket` is one; a `MemorySocket` (one end of a pipe inside the process) is another.
public protocol MessageSocket: AnyObject, Sendable {
    /// The handler of the socket's events. Events that came before it was set are delivered
    /// first, in order; `.closed` is the last.
    var onEvent: (@Sendable (WebSocketEvent) -> Void)? { get set }
    /// Bytes given to `send` and not yet taken by the peer.
    var queuedBytes: Int { get }
    /// Queues a text message; throws `NetError.closed` once the socket is closing or closed.
    func send(_ text: String) throws
    /// Ends the connection with `code` (1000 normal, 1001 going away, 4000–4999 the
    /// application's own).
    func close(code: UInt16, reason: String)
}

extension WebSocket: MessageSocket {}

/// How a sync client reaches its server: the app API's HTTP requests and the sync connection.
///
/// `.network` (the default) uses this layer's sockets. A server in the same process gives one
/// that calls it directly (`SyncServer.inProcessTransport`): requests go through the server's
/// HTTP parser and routes, the connection through a `MemorySocket`, and no port is opened.
/// Two transports are equal when they are the same object.
public final class ClientTransport: Sendable, Equatable {
    /// One request (method, URL, headers, body, timeout in seconds, TLS settings); any status
    /// is an answer. Throws `NetError` when there is no answer.
    public let request: @Sendable (_ method: String, _ url: String, _ headers: HTTPHeaders, _ body: [UInt8], _ timeout: Double,
                                   _ tls: TLSClientConfiguration) async throws -> HTTPClientResponse
    /// Opens the connection to a `ws(s)://` or `http(s)://` URL. Throws
    /// `NetError.upgradeRefused(status)` when the server refuses it, `.timeout` when it takes
    /// longer than the options' `connectTimeout`.
    public let connect: @Sendable (_ url: String, _ options: WebSocketClientOptions) async throws -> any MessageSocket

    public init(request: @escaping @Sendable (_ method: String, _ url: String, _ headers: HTTPHeaders, _ body: [UInt8], _ timeout: Double,
                                              _ tls: TLSClientConfiguration) async throws -> HTTPClientResponse,
                connect: @escaping @Sendable (_ url: String, _ options: WebSocketClientOptions) async throws -> any MessageSocket) {
        self.request = request
        self.connect = connect
    }

    /// Over the network, with `HTTPClient` and `WebSocket`.
    public static let network = ClientTransport(
        request: { method, url, headers, body, timeout, tls in
            try await HTTPClient.request(method, url, headers: headers, body: body, timeout: timeout, tls: tls)
        },
        connect: { url, options in try await WebSocket.connect(to: url, options: options) })

    /// A transport that asks `current`, at each request and connection, which transport to use
    /// (nil: `NetError.closed`): a server restarted in process is then reached by the clients
    /// of the one before, as a server restarted on the same port is.
    public static func forwarding(to current: @escaping @Sendable () -> ClientTransport?) -> ClientTransport {
        ClientTransport(
            request: { method, url, headers, body, timeout, tls in
                guard let transport = current() else { throw NetError.closed("no transport to forward to") }
                return try await transport.request(method, url, headers, body, timeout, tls)
            },
            connect: { url, options in
                guard let transport = current() else { throw NetError.closed("no transport to forward to") }
                return try await transport.connect(url, options)
            })
    }

    public static func == (a: ClientTransport, b: ClientTransport) -> Bool { a === b }
}

/// One end of a message pipe inside the process, in place of a WebSocket where both peers live
/// in one process (tests; an app that embeds its server). What one end sends, the other
/// receives as `.text`, in order, on its own serial queue; `close` ends both ends, each of which
/// then gets `.closed` with the code and reason as its last event.
public final class MemorySocket: MessageSocket, @unchecked Sendable {
    private let queue: DispatchQueue
    private struct State {
        var handler: (@Sendable (WebSocketEvent) -> Void)?
        var buffered: [WebSocketEvent] = []
        /// No more sends: this end closed, or its peer did.
        var closed = false
        /// `.closed` was delivered to this end.
        var ended = false
        /// The other end, until the pipe closes (each end holds the other while it is open).
        var peer: MemorySocket?
    }
    private let state = Mutex(State())
    /// Bytes this end sent that the peer's handler has not taken yet.
    private let inFlight = Atomic<Int>(0)

    private init(label: String) { queue = DispatchQueue(label: label) }

    /// The two ends of a new pipe.
    public static func pair(label: String = "atoll.memory-socket") -> (MemorySocket, MemorySocket) {
        let a = MemorySocket(label: label + ".a"), b = MemorySocket(label: label + ".b")
        a.state.withLock { $0.peer = b }
        b.state.withLock { $0.peer = a }
        return (a, b)
    }

    public var onEvent: (@Sendable (WebSocketEvent) -> Void)? {
        get { state.withLock { $0.handler } }
        set {
            state.withLock { s in
                s.handler = newValue
                guard let handler = newValue, !s.buffered.isEmpty else { return }
                let events = s.buffered
                s.buffered = []
                queue.async { for e in events { handler(e) } }
            }
        }
    }

    public var queuedBytes: Int { inFlight.load(ordering: .relaxed) }

    public func send(_ text: String) throws {
        let peer = try state.withLock { s -> MemorySocket in
            guard !s.closed, let peer = s.peer else { throw NetError.closed("the socket is closed") }
            return peer
        }
        let bytes = text.utf8.count
        inFlight.add(bytes, ordering: .relaxed)
        peer.deliver(.text(text)) { [self] in inFlight.subtract(bytes, ordering: .relaxed) }
    }

    public func close(code: UInt16 = 1000, reason: String = "") {
        let peer = state.withLock { s -> MemorySocket? in
            guard !s.closed else { return nil }
            s.closed = true
            defer { s.peer = nil }
            return s.peer
        }
        guard let peer else { return }
        peer.closedByPeer(code: code, reason: reason)
        deliver(.closed(code: code, reason: reason))
    }

    /// The peer closed: no more sends, and `.closed` after what was sent before it.
    private func closedByPeer(code: UInt16, reason: String) {
        state.withLock { s in
            s.closed = true
            s.peer = nil
        }
        deliver(.closed(code: code, reason: reason))
    }

    /// Hands an event to the handler on this end's queue (or keeps it until there is one);
    /// `taken` runs when the handler has it.
    private func deliver(_ event: WebSocketEvent, taken: (@Sendable () -> Void)? = nil) {
        state.withLock { s in
            guard !s.ended else {
                taken?()
                return
            }
            if case .closed = event { s.ended = true }
            guard let handler = s.handler else {
                s.buffered.append(event)
                taken?()
                return
            }
            queue.async {
                taken?()
                handler(event)
            }
        }
    }
}
