import CEpoll
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How a WebSocket client connects.
public struct WebSocketClientOptions: Sendable {
    /// Subprotocols to offer, in order of preference (`Sec-WebSocket-Protocol`).
    public var subprotocols: [String] = []
    /// Extra request headers (e.g. `Authorization`).
    public var headers: HTTPHeaders = [:]
    /// Seconds for the TCP connect, the TLS handshake and the upgrade together.
    public var connectTimeout = 10.0
    /// TLS settings for `wss://` (default: the system's trusted roots, peer verified).
    public var tls = TLSClientConfiguration()
    /// The connection's settings once open (message size, queue limit, ping keep-alive).
    public var webSocket = WebSocketOptions()
    public init() {}
}

/// A response to an `HTTPClient` request.
public struct HTTPClientResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as UTF-8 text ("" if it is not UTF-8).
    public var text: String { String(validating: body, as: UTF8.self) ?? "" }
    /// Decodes a JSON body.
    public func decodeJSON<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: Data(body))
    }
}

/// HTTP/1.1 requests over this layer's own sockets (one connection per request, closed after
/// the response), so that `https://` can trust a given certificate the way `wss://` does.
public enum HTTPClient {
    /// Sends one request and returns the response (any status). Throws `NetError` when the
    /// server cannot be reached, the exchange times out, or the answer is not HTTP.
    public static func request(_ method: String, _ url: String, headers: HTTPHeaders = [:], body: [UInt8] = [],
                               timeout: Double = 30, tls: TLSClientConfiguration = TLSClientConfiguration(),
                               maxResponseBytes: Int = 64 << 20, loop: EventLoop = .shared) async throws -> HTTPClientResponse {
        let (target, method, request) = try encode(method, url, headers: headers, body: body)
        let outcome = try await ClientConnection.open(
            target: target, request: request, purpose: .http(head: method == "HEAD"),
            timeout: timeout, tls: tls, maxBodyBytes: maxResponseBytes, loop: loop)
        guard case let .response(response) = outcome else { throw NetError.protocolError("unexpected upgrade") }
        return response
    }

    /// The bytes `request` sends for these arguments (for a server answering in process).
    public static func requestBytes(_ method: String, _ url: String, headers: HTTPHeaders = [:], body: [UInt8] = []) throws -> [UInt8] {
        try encode(method, url, headers: headers, body: body).request
    }

    private static func encode(_ method: String, _ url: String, headers: HTTPHeaders,
                               body: [UInt8]) throws -> (target: Target, method: String, request: [UInt8]) {
        let target = try Target(url, webSocket: false)
        let method = method.uppercased()
        guard !method.isEmpty, method.allSatisfy({ $0.isLetter || $0 == "-" }) else {
            throw NetError.protocolError("invalid method '\(method)'")
        }
        var head = "\(method) \(target.requestPath) HTTP/1.1\r\nHost: \(target.hostHeader)\r\n"
        var extra = headers
        if extra["User-Agent"] == nil { extra["User-Agent"] = "atoll-net" }
        if extra["Accept"] == nil { extra["Accept"] = "*/*" }
        for (name, value) in extra.fields where !["host", "content-length", "connection", "transfer-encoding"].contains(name.lowercased()) {
            head += "\(withoutLineBreaks(name)): \(withoutLineBreaks(value))\r\n"
        }
        if !body.isEmpty || ["POST", "PUT", "PATCH"].contains(method) { head += "Content-Length: \(body.count)\r\n" }
        head += "Connection: close\r\n\r\n"
        return (target, method, Array(head.utf8) + body)
    }
}

extension WebSocket {
    /// Connects to a `ws://` or `wss://` URL (http/https are accepted as the same) and
    /// completes the upgrade. Throws `NetError.timeout` when it takes longer than the options'
    /// `connectTimeout`, `.upgradeRefused(status)` when the server answers without upgrading.
    /// Reconnecting is left to the caller.
    public static func connect(to url: String, options: WebSocketClientOptions = WebSocketClientOptions(),
                               loop: EventLoop = .shared) async throws -> WebSocket {
        let target = try Target(url, webSocket: true)
        let key = Data(Crypto.randomBytes(16)).base64EncodedString()
        var head = "GET \(target.requestPath) HTTP/1.1\r\nHost: \(target.hostHeader)\r\n"
        head += "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        if !options.subprotocols.isEmpty { head += "Sec-WebSocket-Protocol: \(options.subprotocols.joined(separator: ", "))\r\n" }
        for (name, value) in options.headers.fields {
            head += "\(withoutLineBreaks(name)): \(withoutLineBreaks(value))\r\n"
        }
        head += "\r\n"
        let outcome = try await ClientConnection.open(
            target: target, request: Array(head.utf8),
            purpose: .webSocket(key: key, subprotocols: options.subprotocols, options: options.webSocket),
            timeout: options.connectTimeout, tls: options.tls, maxBodyBytes: 1 << 20, loop: loop)
        guard case let .webSocket(socket) = outcome else { throw NetError.protocolError("no upgrade") }
        return socket
    }
}

/// A header name or value without CR and LF (which would split the request: header injection).
func withoutLineBreaks(_ text: String) -> String { text.filter { $0 != "\r" && $0 != "\n" } }

/// A parsed client URL.
struct Target {
    var host: String
    var port: Int
    var secure: Bool
    var requestPath: String
    var hostHeader: String

    init(_ text: String, webSocket: Bool) throws {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw NetError.invalidURL(text)
        }
        switch scheme {
        case "ws", "http": secure = false
        case "wss", "https": secure = true
        default: throw NetError.invalidURL("\(text): scheme must be ws, wss, http or https")
        }
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        port = url.port ?? (secure ? 443 : 80)
        guard (1...65535).contains(port) else { throw NetError.invalidURL("\(text): port out of range") }
        let path = url.path(percentEncoded: true)
        requestPath = (path.isEmpty ? "/" : path) + (url.query(percentEncoded: true).map { "?\($0)" } ?? "")
        let bracketed = self.host.contains(":") ? "[\(self.host)]" : self.host
        hostHeader = url.port == nil ? bracketed : "\(bracketed):\(port)"
    }
}

/// A client-side connection: connect, TLS, one request, then either a response or a WebSocket.
final class ClientConnection: Channel {
    enum Purpose {
        case http(head: Bool)
        case webSocket(key: String, subprotocols: [String], options: WebSocketOptions)
    }
    enum Outcome: @unchecked Sendable {
        case response(HTTPClientResponse)
        case webSocket(WebSocket)
    }

    private let purpose: Purpose
    private let request: [UInt8]
    private let deadline: Double
    private let what: String
    private var tcpConnected = false
    private var parser: HTTPMessageParser
    private var completion: ((Result<Outcome, NetError>) -> Void)?

    private init(loop: EventLoop, transport: Transport, purpose: Purpose, request: [UInt8], timeout: Double,
                 what: String, maxBodyBytes: Int) {
        self.purpose = purpose
        self.request = request
        self.deadline = EventLoop.now() + timeout
        self.what = what
        parser = HTTPMessageParser(request: false, maxHeaderBytes: 64 * 1024, maxBodyBytes: maxBodyBytes)
        if case .http(head: true) = purpose { parser.expectsNoBody = true }
        super.init(loop: loop, transport: transport, handshakeDone: !(transport is TLSTransport))
    }

    static func open(target: Target, request: [UInt8], purpose: Purpose, timeout: Double,
                     tls: TLSClientConfiguration, maxBodyBytes: Int, loop: EventLoop) async throws -> Outcome {
        try loop.checkRunning()
        let tlsContext = target.secure ? try TLSContext.client(tls) : nil
        guard let address = try Socket.resolve(host: target.host, port: target.port, passive: false).first else {
            throw NetError.resolve(target.host)
        }
        let what = "\(target.secure ? "TLS " : "")connection to \(target.host):\(target.port)"
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Outcome, Error>) in
            let once = Mutex(Optional(continuation))
            let finish: @Sendable (Result<Outcome, NetError>) -> Void = { result in
                once.withLock { $0.take() }?.resume(with: result.mapError { $0 as Error })
            }
            let tlsBox = UncheckedSendable(tlsContext)
            let accepted = loop.execute {
                do {
                    let fd = try Socket.startConnect(family: address.family, address: address.address)
                    let transport: Transport
                    if let context = tlsBox.value {
                        do {
                            transport = try TLSTransport(fd: fd, context: context, serverName: target.host)
                        } catch {
                            Glibc.close(fd)
                            throw error
                        }
                    } else {
                        transport = PlainTransport(fd: fd)
                    }
                    let connection = ClientConnection(loop: loop, transport: transport, purpose: purpose, request: request,
                                                      timeout: timeout, what: what, maxBodyBytes: maxBodyBytes)
                    connection.completion = finish
                    do {
                        try connection.start(waitingForConnect: true)
                    } catch {
                        transport.close()
                        throw error
                    }
                } catch let error as NetError {
                    finish(.failure(error))
                } catch {
                    finish(.failure(.closed("\(error)")))
                }
            }
            // The loop stopped after the check above: the connect will never start.
            if !accepted { finish(.failure(.loopStopped)) }
        }
    }

    private func complete(_ result: Result<Outcome, NetError>) {
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }

    private func fail(_ error: NetError) {
        complete(.failure(error))
        close()
    }

    override func handleEvents(_ events: UInt32) {
        if !tcpConnected {
            guard events & (EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 else { return }
            let error = Socket.connectError(transport.fd)
            if error != 0 {
                fail(.system("connect to \(what.split(separator: " ").last ?? "")", error))
                return
            }
            tcpConnected = true
            if handshakeDone {
                handshakeFinished()
            } else {
                beginHandshake()
            }
            if !isClosed { updateInterest() }
            return
        }
        super.handleEvents(events)
    }

    override func handshakeFinished() { write(request) }

    override func received(_ bytes: UnsafeRawBufferPointer) {
        if let webSocket {
            webSocket.received(bytes)
            return
        }
        guard completion != nil else { return }
        handle(parser.feed(bytes), bytes)
    }

    private func handle(_ result: ParseResult, _ bytes: UnsafeRawBufferPointer) {
        switch result {
        case .needMore:
            return
        case let .failure(_, message):
            fail(.protocolError("bad HTTP response: \(message)"))
        case let .message(message, consumed):
            switch purpose {
            case .http:
                complete(.success(.response(HTTPClientResponse(status: message.status, headers: message.headers, body: message.body))))
                close()
            case let .webSocket(key, offered, options):
                upgraded(message, key: key, offered: offered, options: options,
                         leftover: UnsafeRawBufferPointer(rebasing: bytes[consumed...]))
            }
        }
    }

    private func upgraded(_ message: ParsedMessage, key: String, offered: [String], options: WebSocketOptions,
                          leftover: UnsafeRawBufferPointer) {
        guard message.status == 101 else {
            fail(.upgradeRefused(message.status))
            return
        }
        guard message.headers.tokens("Upgrade").contains("websocket"),
              message.headers.tokens("Connection").contains("upgrade"),
              message.headers["Sec-WebSocket-Accept"] == Crypto.webSocketAccept(key: key) else {
            fail(.protocolError("the server's upgrade answer is not a valid WebSocket handshake"))
            return
        }
        let chosen = message.headers["Sec-WebSocket-Protocol"]
        if let chosen, !offered.contains(chosen) {
            fail(.protocolError("the server chose subprotocol '\(chosen)', which was not offered"))
            return
        }
        guard message.headers["Sec-WebSocket-Extensions"] == nil else {
            fail(.protocolError("the server chose an extension that was not offered"))
            return
        }
        let socket: WebSocket
        do {
            socket = try WebSocket(channel: self, isServer: false, subprotocol: chosen, request: nil, options: options)
        } catch {
            fail(.closed("cannot create the WebSocket"))
            return
        }
        webSocket = socket
        complete(.success(.webSocket(socket)))
        // Frames that came in the same read as the answer's head.
        socket.start(leftover: leftover)
    }

    override func peerClosed() {
        if webSocket == nil, completion != nil {
            // A response without a length ends with the connection.
            let none = UnsafeRawBufferPointer(start: nil, count: 0)
            handle(parser.feed(none), none)
            if completion != nil { fail(.closed("\(what) closed before a whole response")) }
            return
        }
        super.peerClosed()
    }

    override func failed(_ message: String) {
        if completion != nil {
            let tls = message.hasPrefix("handshake")
            fail(tls ? .tls(message) : .closed("\(what): \(message)"))
            return
        }
        super.failed(message)
    }

    override func tick(now: Double) {
        if completion != nil, now > deadline {
            fail(.timeout(what))
            return
        }
        webSocket?.tick(now: now)
    }

    override func loopStopped() {
        complete(.failure(.loopStopped))
        super.loopStopped()
    }

    override func didClose() {
        complete(.failure(.closed("\(what) closed")))
        super.didClose()
    }
}

/// Moves a value the caller knows is safe across a concurrency boundary.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
