// atoll-net-peer: AtollNet as a process, for the tests against peers no one here wrote
// (tests/net: Python's websockets, curl, raw sockets) and for the load benchmark (bench/net).
//
//   atoll-net-peer serve [--host H] [--port P] [--tls-cert F --tls-key F] [--max-message N]
//                        [--max-header N] [--max-body N] [--header-timeout S] [--request-timeout S]
//                        [--idle-timeout S] [--ping-interval S] [--max-queue N]
//       Prints "listening on http(s)://HOST:PORT" (flushed), serves until SIGTERM/SIGINT, then shuts
//       down gracefully (WebSockets closed with 1001) and prints "stopped". Routes:
//         GET  /health           {"ok": true}
//         POST /echo             {"method", "path", "query", "length", "body": <the JSON body>}
//         GET  /headers          the request's headers as a JSON object (lowercased names)
//         GET  /items/:id        {"id": <id>}
//         GET  /slow?ms=N        answers after N ms
//         GET  /stats            {"connections", "websockets", "requests", "rejected", "rss_kb"}
//         WS   /ws/echo          subprotocols echo.v2, echo.v1 (optional); echoes every message with
//                                its type; the text "close:CODE:REASON" makes the server close with
//                                CODE; "ping:PAYLOAD" makes it ping (the pong is reported back as
//                                text "pong:PAYLOAD"); "fragments:N:TEXT" answers TEXT in N frames
//         WS   /ws/strict       requires subprotocol atoll.v1; echoes
//
//   atoll-net-peer client URL [--subprotocol P]... [--ca FILE] [--connect-timeout S] [--ping-interval S]
//       Connects with AtollNet's client and reads commands from stdin, one JSON object per line:
//         {"text": "..."}  {"binary_hex": "..."}  {"repeat": BYTE, "size": N, "type": "binary"|"text"}
//         {"fragments": ["a", "b"], "type": "text"|"binary"}  {"ping": "payload"}
//         {"close": CODE, "reason": "..."}
//       and prints events, one JSON object per line (flushed):
//         {"event": "open", "subprotocol": P|null}
//         {"event": "text"|"binary", "length": N, "sha256": HEX, "data": TEXT-or-HEX (when N <= 1024)}
//         {"event": "pong", "data": HEX}  {"event": "closed", "code": C, "reason": R}
//         {"event": "error", "message": M}   (connect failures; exits 2)
//       Exits 0 after "closed".
//
//   atoll-net-peer http METHOD URL [--body TEXT] [--ca FILE] [--timeout S]
//       Prints {"status": S, "headers": {...}, "body": TEXT} and exits 0, or {"error": M} and exits 2.
@preconcurrency import Glibc
import AtollNet
import COpenSSL
import Foundation

/// SIGTERM and SIGINT, which `serve` takes with sigwait.
func stopSignals() -> sigset_t {
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGTERM)
    sigaddset(&set, SIGINT)
    return set
}

// For `serve`, blocked on this thread before any other starts (threads inherit the mask). A
// dispatch signal source is not enough on Linux: it reads the signal from a signalfd that only its
// own thread blocks, so a signal the kernel hands to another thread is lost (SIG_IGN) or kills the
// process.
if CommandLine.arguments.dropFirst().first == "serve" {
    var blocked = stopSignals()
    pthread_sigmask(SIG_BLOCK, &blocked, nil)
}

/// Writes one line to stdout at once, without stdio's buffer (whose flush would wait for the
/// stdin lock that the command thread holds while it waits in readLine).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func emit(_ object: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]),
          let line = String(data: data, encoding: .utf8) else { return }
    say(line)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("atoll-net-peer: \(message)\n".utf8))
    exit(2)
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

func unhex(_ text: String) -> [UInt8]? {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex) ?? text.endIndex
        guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
        bytes.append(byte)
        index = next
    }
    return bytes
}

func sha256(_ bytes: [UInt8]) -> String {
    var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
    _ = SHA256(bytes, bytes.count, &digest)
    return hex(digest)
}

func residentKB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}

/// Lets a process hold thousands of sockets (the soft limit is often 1024).
func raiseFileLimit() {
    var limit = rlimit()
    if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 && limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

struct Options {
    var positional: [String] = []
    var values: [String: [String]] = [:]
    init(_ arguments: ArraySlice<String>) {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if argument.hasPrefix("--") {
                guard let value = iterator.next() else { fail("\(argument) needs a value") }
                values[String(argument.dropFirst(2)), default: []].append(value)
            } else {
                positional.append(argument)
            }
        }
    }
    func string(_ name: String) -> String? { values[name]?.last }
    func double(_ name: String) -> Double? {
        guard let text = string(name) else { return nil }
        guard let value = Double(text) else { fail("--\(name) must be a number") }
        return value
    }
    func int(_ name: String) -> Int? {
        guard let text = string(name) else { return nil }
        guard let value = Int(text) else { fail("--\(name) must be an integer") }
        return value
    }
}

func describe(_ event: WebSocketEvent) -> [String: Any] {
    switch event {
    case let .text(text):
        let bytes = Array(text.utf8)
        var object: [String: Any] = ["event": "text", "length": bytes.count, "sha256": sha256(bytes)]
        if bytes.count <= 1024 { object["data"] = text }
        return object
    case let .binary(bytes):
        var object: [String: Any] = ["event": "binary", "length": bytes.count, "sha256": sha256(bytes)]
        if bytes.count <= 1024 { object["data"] = hex(bytes) }
        return object
    case let .pong(bytes):
        return ["event": "pong", "data": hex(bytes)]
    case let .closed(code, reason):
        return ["event": "closed", "code": Int(code), "reason": reason]
    }
}

// MARK: serve

func serve(_ options: Options) -> Int32 {
    raiseFileLimit()
    var configuration = HTTPServerConfiguration()
    configuration.host = options.string("host") ?? "127.0.0.1"
    configuration.port = options.int("port") ?? 0
    if let cert = options.string("tls-cert") {
        guard let key = options.string("tls-key") else { fail("--tls-cert needs --tls-key") }
        configuration.tls = TLSServerConfiguration(certificateFile: cert, privateKeyFile: key)
    }
    configuration.maxHeaderBytes = options.int("max-header") ?? configuration.maxHeaderBytes
    configuration.maxBodyBytes = options.int("max-body") ?? configuration.maxBodyBytes
    configuration.headerTimeout = options.double("header-timeout") ?? configuration.headerTimeout
    configuration.requestTimeout = options.double("request-timeout") ?? configuration.requestTimeout
    configuration.idleTimeout = options.double("idle-timeout") ?? configuration.idleTimeout
    configuration.webSocket.maxMessageBytes = options.int("max-message") ?? configuration.webSocket.maxMessageBytes
    configuration.webSocket.maxQueuedBytes = options.int("max-queue") ?? configuration.webSocket.maxQueuedBytes
    configuration.webSocket.pingInterval = options.double("ping-interval") ?? 0

    let server: HTTPServer
    do {
        server = try HTTPServer(configuration: configuration)
    } catch {
        fail("\(error)")
    }
    server.route("GET", "/health") { _ in HTTPResponse(jsonText: #"{"ok":true}"#) }
    server.route("POST", "/echo") { request in
        let body = try request.jsonObject()
        let object: [String: Any] = ["method": request.method, "path": request.path, "query": request.query,
                                     "length": request.body.count, "body": body]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
        return HTTPResponse(headers: ["Content-Type": "application/json"], body: Array(data))
    }
    server.route("GET", "/headers") { request in
        var object: [String: String] = [:]
        for (name, value) in request.headers { object[name.lowercased()] = value }
        return try HTTPResponse(json: object)
    }
    server.route("GET", "/items/:id") { request in
        try HTTPResponse(json: ["id": request.pathParameters["id"] ?? ""])
    }
    server.route("GET", "/slow") { request in
        let ms = Int(request.queryItems["ms"] ?? "100") ?? 100
        try await Task.sleep(nanoseconds: UInt64(max(0, ms)) * 1_000_000)
        return try HTTPResponse(json: ["slept_ms": ms])
    }
    server.route("GET", "/stats") { _ in
        let counters = server.counters
        return try HTTPResponse(json: ["connections": counters.openConnections, "websockets": counters.openWebSockets,
                                       "requests": counters.requests, "rejected": counters.rejectedRequests,
                                       "rss_kb": residentKB()])
    }
    let echo: @Sendable (WebSocket) -> Void = { socket in
        socket.onEvent = { event in
            switch event {
            case let .text(text):
                if text.hasPrefix("close:") {
                    let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
                    socket.close(code: UInt16(parts.count > 1 ? String(parts[1]) : "1000") ?? 1000,
                                 reason: parts.count > 2 ? String(parts[2]) : "")
                } else if text.hasPrefix("ping:") {
                    try? socket.ping(Array(text.dropFirst(5).utf8))
                } else if text.hasPrefix("fragments:") {
                    let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
                    let count = max(1, Int(parts.count > 1 ? String(parts[1]) : "1") ?? 1)
                    let payload = Array((parts.count > 2 ? String(parts[2]) : "").utf8)
                    let size = max(1, (payload.count + count - 1) / count)
                    let pieces = stride(from: 0, to: payload.count, by: size).map { Array(payload[$0..<min($0 + size, payload.count)]) }
                    try? socket.send(fragments: pieces, text: true)
                } else {
                    try? socket.send(text)
                }
            case let .binary(bytes):
                try? socket.send(bytes)
            case let .pong(bytes):
                try? socket.send("pong:" + String(decoding: bytes, as: UTF8.self))
            case .closed:
                break
            }
        }
    }
    server.webSocket("/ws/echo", subprotocols: ["echo.v2", "echo.v1"], subprotocolRequired: false, onOpen: echo)
    server.webSocket("/ws/strict", subprotocols: ["atoll.v1"], onOpen: echo)

    do {
        try server.start()
    } catch {
        fail("\(error)")
    }
    say("listening on \(server.url)")

    // Graceful shutdown on SIGTERM / SIGINT, blocked since the first line and taken here.
    var stop = stopSignals()
    var received: Int32 = 0
    while sigwait(&stop, &received) != 0 {}
    let done = DispatchSemaphore(value: 0)
    Task {
        await server.shutdown()
        done.signal()
    }
    done.wait()
    say("stopped")
    return 0
}

// MARK: client

func runClient(_ options: Options) async -> Int32 {
    guard let url = options.positional.first else { fail("client needs a URL") }
    var clientOptions = WebSocketClientOptions()
    clientOptions.subprotocols = options.values["subprotocol"] ?? []
    clientOptions.connectTimeout = options.double("connect-timeout") ?? 10
    clientOptions.webSocket.pingInterval = options.double("ping-interval") ?? 0
    if let ca = options.string("ca") { clientOptions.tls = TLSClientConfiguration(trustedCertificatesFile: ca) }
    let socket: WebSocket
    do {
        socket = try await WebSocket.connect(to: url, options: clientOptions)
    } catch {
        emit(["event": "error", "message": "\(error)"])
        return 2
    }
    emit(["event": "open", "subprotocol": socket.subprotocol ?? NSNull()])
    let events = socket.events()
    // Commands from stdin on their own thread; events printed here.
    Thread.detachNewThread {
        while let line = readLine() {
            guard let data = line.data(using: .utf8),
                  let command = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
                emit(["event": "error", "message": "bad command: \(line)"])
                continue
            }
            do {
                if let text = command["text"] as? String {
                    try socket.send(text)
                } else if let hexText = command["binary_hex"] as? String {
                    guard let bytes = unhex(hexText) else { throw NetError.protocolError("bad hex") }
                    try socket.send(bytes)
                } else if let byte = command["repeat"] as? Int, let size = command["size"] as? Int {
                    let bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: byte), count: size)
                    if command["type"] as? String == "text" {
                        try socket.send(String(decoding: bytes, as: UTF8.self))
                    } else {
                        try socket.send(bytes)
                    }
                } else if let parts = command["fragments"] as? [String] {
                    try socket.send(fragments: parts.map { Array($0.utf8) }, text: command["type"] as? String != "binary")
                } else if let payload = command["ping"] as? String {
                    try socket.ping(Array(payload.utf8))
                } else if let code = command["close"] as? Int {
                    socket.close(code: UInt16(clamping: code), reason: command["reason"] as? String ?? "")
                } else {
                    emit(["event": "error", "message": "unknown command: \(line)"])
                }
            } catch {
                emit(["event": "error", "message": "\(error)"])
            }
        }
    }
    for await event in events {
        emit(describe(event))
    }
    return 0
}

func runHTTP(_ options: Options) async -> Int32 {
    guard options.positional.count >= 2 else { fail("http needs METHOD URL") }
    var tls = TLSClientConfiguration()
    if let ca = options.string("ca") { tls.trustedCertificatesFile = ca }
    let body = Array((options.string("body") ?? "").utf8)
    do {
        let response = try await HTTPClient.request(options.positional[0], options.positional[1],
                                                    headers: body.isEmpty ? [:] : ["Content-Type": "application/json"],
                                                    body: body, timeout: options.double("timeout") ?? 30, tls: tls)
        var headers: [String: String] = [:]
        for (name, value) in response.headers { headers[name.lowercased()] = value }
        emit(["status": response.status, "headers": headers, "body": response.text])
        return 0
    } catch {
        emit(["error": "\(error)"])
        return 2
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else { fail("usage: atoll-net-peer serve|client|http …") }
let options = Options(arguments.dropFirst(2))
switch arguments[1] {
case "serve":
    // serve returns (rather than exiting inside) so that its objects are freed before the exit,
    // which keeps leak checkers' reports to real leaks.
    exit(serve(options))
case "client":
    exit(await runClient(options))
case "http":
    exit(await runHTTP(options))
default:
    fail("unknown mode \(arguments[1])")
}
