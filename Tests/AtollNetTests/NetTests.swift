@preconcurrency import Glibc
@testable import AtollNet
import Foundation
import XCTest

/// AtollNet's server and client against each other, and against raw peers that misbehave on
/// purpose. The tests against outside peers (Python's websockets, curl) are in tests/net.
final class HTTPServerTests: XCTestCase {
    func testRoutesParametersErrorsAndMethods() async throws {
        struct Failure: Error {}
        let server = try startServer { server in
            server.route("GET", "/items/:id") { request in
                try HTTPResponse(json: ["id": request.pathParameters["id"] ?? "", "q": request.queryItems["q"] ?? ""])
            }
            server.route("POST", "/items") { request in
                struct Item: Codable { var name: String }
                let item = try request.decodeJSON(Item.self)
                return try HTTPResponse(status: .created, json: item)
            }
            server.route("GET", "/files/*") { request in HTTPResponse(text: request.pathParameters["*"] ?? "") }
            server.route("GET", "/refuse") { _ in throw HTTPError(.forbidden, "not yours") }
            server.route("GET", "/crash") { _ in throw Failure() }
        }
        defer { Task { await server.shutdown() } }
        let base = server.url

        var response = try await HTTPClient.request("GET", "\(base)/items/42?q=a%20b")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.text, #"{"id":"42","q":"a b"}"#)

        response = try await HTTPClient.request("POST", "\(base)/items", headers: ["Content-Type": "application/json"],
                                                body: Array(#"{"name":"Rex"}"#.utf8))
        XCTAssertEqual(response.status, 201)
        XCTAssertEqual(response.text, #"{"name":"Rex"}"#)

        response = try await HTTPClient.request("POST", "\(base)/items", headers: ["Content-Type": "application/json"],
                                                body: Array("{not json".utf8))
        XCTAssertEqual(response.status, 400)
        response = try await HTTPClient.request("POST", "\(base)/items", headers: ["Content-Type": "text/plain"],
                                                body: Array("x".utf8))
        XCTAssertEqual(response.status, 415)

        response = try await HTTPClient.request("GET", "\(base)/files/a/b/c.txt")
        XCTAssertEqual(response.text, "a/b/c.txt")
        response = try await HTTPClient.request("GET", "\(base)/refuse")
        XCTAssertEqual(response.status, 403)
        XCTAssertEqual(response.text, #"{"error":"not yours","status":403}"#)
        response = try await HTTPClient.request("GET", "\(base)/crash")
        XCTAssertEqual(response.status, 500)
        response = try await HTTPClient.request("GET", "\(base)/nothing")
        XCTAssertEqual(response.status, 404)
        response = try await HTTPClient.request("DELETE", "\(base)/items/1")
        XCTAssertEqual(response.status, 405)
        XCTAssertEqual(response.headers["Allow"], "GET, HEAD")
        response = try await HTTPClient.request("HEAD", "\(base)/items/1")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.body, [])
        XCTAssertEqual(response.headers["Content-Length"], "17", "HEAD has the length GET would have")
    }

    func testLimitsAnswerWithTheirStatus() async throws {
        let server = try startServer({ configuration in
            configuration.maxBodyBytes = 100
            configuration.maxHeaderBytes = 1024
        }) { server in
            server.route("POST", "/echo") { request in HTTPResponse(body: request.body) }
        }
        defer { Task { await server.shutdown() } }
        var response = try await HTTPClient.request("POST", "\(server.url)/echo", body: [UInt8](repeating: 65, count: 100))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.body.count, 100)
        response = try await HTTPClient.request("POST", "\(server.url)/echo", body: [UInt8](repeating: 65, count: 101))
        XCTAssertEqual(response.status, 413)
        response = try await HTTPClient.request("POST", "\(server.url)/echo", headers: ["X-Big": String(repeating: "b", count: 2000)])
        XCTAssertEqual(response.status, 431)
        response = try await HTTPClient.request("GET", "\(server.url)/" + String(repeating: "p", count: 2000))
        XCTAssertEqual(response.status, 414)
        XCTAssertEqual(server.counters.rejectedRequests, 3)
    }

    func testTargetsEncodedSegmentsAndAbsoluteForm() throws {
        let server = try startServer { server in
            server.route("GET", "/items/:id") { request in HTTPResponse(text: request.pathParameters["id"] ?? "") }
        }
        defer { Task { await server.shutdown() } }
        func ask(_ head: String) throws -> String {
            let fd = try connectRaw(port: server.port)
            defer { close(fd) }
            sendAll(fd, Array(head.utf8))
            return String(decoding: readUntilClosed(fd), as: UTF8.self)
        }
        // %2F stays inside its segment: one parameter "a/b", not two segments.
        let encoded = try ask("GET /items/a%2Fb HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(encoded.hasPrefix("HTTP/1.1 200 OK") && encoded.hasSuffix("a/b"), encoded)
        // The absolute form (RFC 9112 §3.2.2) is served by the path's route.
        let absolute = try ask("GET http://127.0.0.1:\(server.port)/items/5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(absolute.hasPrefix("HTTP/1.1 200 OK") && absolute.hasSuffix("5"), absolute)
        // A bad protocol name, two Host headers: 400.
        XCTAssertTrue(try ask("GET /items/1 HTTX/1.1\r\nHost: x\r\n\r\n").hasPrefix("HTTP/1.1 400 "))
        XCTAssertTrue(try ask("GET /items/1 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").hasPrefix("HTTP/1.1 400 "))
    }

    func testTrailersBodilessStatusesAndOtherUpgrades() throws {
        let server = try startServer { server in
            server.route("POST", "/sum") { request in HTTPResponse(text: "\(request.body.count)") }
            server.route("GET", "/trailer") { request in HTTPResponse(text: request.headers["X-Trailer"] ?? "none") }
            server.route("GET", "/empty") { _ in HTTPResponse(status: .noContent, body: Array("ignored".utf8)) }
        }
        defer { Task { await server.shutdown() } }
        let fd = try connectRaw(port: server.port)
        defer { close(fd) }
        // A chunked body with a trailer field, then a request that must not inherit it; a 204
        // whose handler gave a body (dropped: it would be read as the next response); and an
        // Upgrade to another protocol, which is ignored.
        let requests = "POST /sum HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "3\r\nabc\r\n0\r\nX-Trailer: leaked\r\n\r\n"
            + "GET /trailer HTTP/1.1\r\nHost: x\r\n\r\n"
            + "GET /empty HTTP/1.1\r\nHost: x\r\n\r\n"
            + "GET /trailer HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, close\r\nUpgrade: h2c\r\n\r\n"
        sendAll(fd, Array(requests.utf8))
        let answer = String(decoding: readUntilClosed(fd), as: UTF8.self)
        let bodies = answer.components(separatedBy: "\r\n\r\n").dropFirst().map { $0.prefix { $0 != "H" } }
        XCTAssertEqual(Array(bodies), ["3", "none", "", "none"], answer)
        XCTAssertTrue(answer.contains("HTTP/1.1 204 No Content\r\n"), answer)
        XCTAssertFalse(answer.contains("ignored"), answer)
    }

    func testPipelinedRequestsAnswerInOrder() throws {
        let server = try startServer { server in
            server.route("GET", "/slow") { _ in
                try await Task.sleep(nanoseconds: 100_000_000)
                return HTTPResponse(text: "slow")
            }
            server.route("GET", "/fast") { _ in HTTPResponse(text: "fast") }
        }
        defer { Task { await server.shutdown() } }
        let fd = try connectRaw(port: server.port)
        defer { close(fd) }
        let requests = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /fast HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        sendAll(fd, Array(requests.utf8))
        let answer = String(decoding: readUntilClosed(fd), as: UTF8.self)
        let slow = try XCTUnwrap(answer.range(of: "slow"))
        let fast = try XCTUnwrap(answer.range(of: "fast"))
        XCTAssertLessThan(slow.lowerBound, fast.lowerBound)
        XCTAssertEqual(answer.components(separatedBy: "HTTP/1.1 200 OK").count, 3)
    }

    func testSlowHandlerDoesNotHoldUpOtherConnections() async throws {
        let server = try startServer { server in
            server.route("GET", "/slow") { _ in
                try await Task.sleep(nanoseconds: 1_500_000_000)
                return HTTPResponse(text: "slow")
            }
            server.route("GET", "/fast") { _ in HTTPResponse(text: "fast") }
        }
        defer { Task { await server.shutdown() } }
        let url = server.url
        async let slow = HTTPClient.request("GET", "\(url)/slow")
        try await Task.sleep(nanoseconds: 100_000_000)
        let started = Date()
        let fast = try await HTTPClient.request("GET", "\(url)/fast")
        XCTAssertEqual(fast.text, "fast")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.0, "the fast request waited for the slow one")
        let slowResponse = try await slow
        XCTAssertEqual(slowResponse.text, "slow")
    }

    func testSlowClientGets408AndIdleConnectionsClose() throws {
        let server = try startServer({ configuration in
            configuration.headerTimeout = 0.3
            configuration.idleTimeout = 0.3
        }) { server in
            server.route("GET", "/", { _ in HTTPResponse(text: "ok") })
        }
        defer { Task { await server.shutdown() } }
        let slow = try connectRaw(port: server.port)
        defer { close(slow) }
        sendAll(slow, Array("GET / HTTP/1.1\r\nHo".utf8))
        let answer = String(decoding: readUntilClosed(slow), as: UTF8.self)
        XCTAssertTrue(answer.hasPrefix("HTTP/1.1 408 Request Timeout"), answer)

        let idle = try connectRaw(port: server.port)
        defer { close(idle) }
        sendAll(idle, Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        let idleAnswer = String(decoding: readUntilClosed(idle), as: UTF8.self)
        XCTAssertTrue(idleAnswer.hasPrefix("HTTP/1.1 200 OK"), idleAnswer)
        XCTAssertTrue(idleAnswer.hasSuffix("ok"), "closed after the idle timeout, once the answer was sent")
    }

    func testBindErrorsAreThrown() throws {
        let first = try startServer { _ in }
        defer { Task { await first.shutdown() } }
        var configuration = HTTPServerConfiguration()
        configuration.port = first.port
        let second = try HTTPServer(configuration: configuration)
        XCTAssertThrowsError(try second.start())
        configuration.port = 70000
        XCTAssertThrowsError(try HTTPServer(configuration: configuration).start())
        configuration.port = 0
        configuration.tls = TLSServerConfiguration(certificateFile: "/nonexistent.pem", privateKeyFile: "/nonexistent.key")
        XCTAssertThrowsError(try HTTPServer(configuration: configuration).start()) { error in
            XCTAssertTrue("\(error)".contains("certificate"), "\(error)")
        }
    }

    func testShutdownReturnsWhenItsLoopWasStoppedFirst() async throws {
        let loop = try EventLoop(name: "test-server")
        let server = try HTTPServer(loop: loop)
        server.route("GET", "/") { _ in HTTPResponse(text: "ok") }
        try server.start()
        let response = try await HTTPClient.request("GET", server.url + "/")
        XCTAssertEqual(response.text, "ok")
        loop.stop()
        XCTAssertFalse(loop.execute {}, "a stopped loop refuses work")
        await server.shutdown()
        XCTAssertEqual(server.counters.openConnections, 0)
    }

    func testClientErrors() async throws {
        do {
            _ = try await HTTPClient.request("GET", "ftp://example.com/")
            XCTFail("an ftp URL was accepted")
        } catch let error as NetError {
            guard case .invalidURL = error else { return XCTFail("\(error)") }
        }
        let listener = try RawListener()
        do {
            _ = try await HTTPClient.request("GET", "http://127.0.0.1:\(listener.port)/", timeout: 0.5)
            XCTFail("no timeout")
        } catch let error as NetError {
            guard case .timeout = error else { return XCTFail("\(error)") }
        }
    }
}

final class WebSocketTests: XCTestCase {
    func echoServer(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in }) throws -> HTTPServer {
        try startServer(configure) { server in
            server.webSocket("/echo", subprotocols: ["echo.v2", "echo.v1"]) { socket in
                socket.onEvent = { event in
                    switch event {
                    case let .text(text): try? socket.send(text)
                    case let .binary(bytes): try? socket.send(bytes)
                    default: break
                    }
                }
            }
            server.webSocket("/private", authorize: { request in
                request.headers["Authorization"] == "Bearer good" ? nil : .error(.unauthorized, "no token")
            }) { socket in try? socket.send("welcome") }
        }
    }

    func wsURL(_ server: HTTPServer, _ path: String) -> String {
        server.url.replacingOccurrences(of: "http", with: "ws") + path
    }

    func testEchoSubprotocolAndOrderFromManyThreads() async throws {
        let server = try echoServer()
        defer { Task { await server.shutdown() } }
        var options = WebSocketClientOptions()
        options.subprotocols = ["echo.v1", "echo.v2"]
        let socket = try await WebSocket.connect(to: wsURL(server, "/echo"), options: options)
        XCTAssertEqual(socket.subprotocol, "echo.v2", "the server's preference wins")
        XCTAssertNil(socket.request)
        let reader = EventReader(socket)

        try socket.send("héllo")
        try await reader.expect(.text("héllo"))
        try socket.send([0, 1, 2, 255])
        try await reader.expect(.binary([0, 1, 2, 255]))
        try socket.send(fragments: [Array("frag".utf8), Array("men".utf8), Array("ted".utf8)], text: true)
        try await reader.expect(.text("fragmented"))
        try socket.ping(Array("p".utf8))
        try await reader.expect(.pong(Array("p".utf8)))

        // Four threads send 200 messages each; each thread's messages come back in its order.
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for index in 0..<200 { try? socket.send("\(thread):\(index)") }
        }
        var next = [0, 0, 0, 0]
        for _ in 0..<800 {
            guard case let .text(text) = try await reader.next() else { return XCTFail("not text") }
            let parts = text.split(separator: ":").compactMap { Int($0) }
            XCTAssertEqual(parts[1], next[parts[0]], "out of order for thread \(parts[0])")
            next[parts[0]] += 1
        }
        XCTAssertEqual(next, [200, 200, 200, 200])

        socket.close(code: 4000, reason: "done")
        let closed = try await reader.closed()
        XCTAssertEqual(closed.code, 4000, "the server answers our close with our code")
        XCTAssertThrowsError(try socket.send("late")) { error in
            guard case NetError.closed = error else { return XCTFail("\(error)") }
        }
    }

    func testEmptyFragmentsAndEmptyMessages() async throws {
        let server = try echoServer()
        defer { Task { await server.shutdown() } }
        var options = WebSocketClientOptions()
        options.subprotocols = ["echo.v1"]
        let socket = try await WebSocket.connect(to: wsURL(server, "/echo"), options: options)
        let reader = EventReader(socket)
        try socket.send(fragments: [[1, 2], [], [3]])
        try await reader.expect(.binary([1, 2, 3]))
        try socket.send(fragments: [[1, 2], []])
        try await reader.expect(.binary([1, 2]))
        try socket.send(fragments: [], text: true)
        try await reader.expect(.text(""))
        try socket.send(fragments: [[]])
        try await reader.expect(.binary([]))
        XCTAssertEqual(socket.queuedBytes, 0)
        socket.close()
        _ = try await reader.closed()
    }

    func testEventsAreDeliveredOneAtATimeEvenWhenTheHandlerSends() async throws {
        // A peer sends two messages and its close in one write; the handler answers each message.
        // It must see a, b, then .closed — never an event from inside its own call.
        let listener = try RawListener()
        let accepted = Task.detached { listener.acceptWebSocket() }
        let socket = try await WebSocket.connect(to: "ws://127.0.0.1:\(listener.port)/")
        let peer = await accepted.value
        defer { close(peer) }
        final class Log: @unchecked Sendable {
            let lock = NSLock()
            var events: [WebSocketEvent] = []
            var depth = 0
            var maxDepth = 0
        }
        let log = Log()
        socket.onEvent = { event in
            log.lock.withLock {
                log.depth += 1
                log.maxDepth = max(log.maxDepth, log.depth)
                log.events.append(event)
            }
            if case let .text(text) = event { try? socket.send("re:" + text) }
            log.lock.withLock { log.depth -= 1 }
        }
        // Unmasked server frames: text "a", text "b", close 1000.
        sendAll(peer, [0x81, 1, 0x61, 0x81, 1, 0x62, 0x88, 2, 0x03, 0xE8])
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, log.lock.withLock({ log.events.count }) < 3 { try await Task.sleep(nanoseconds: 5_000_000) }
        log.lock.withLock {
            XCTAssertEqual(log.events, [.text("a"), .text("b"), .closed(code: 1000, reason: "")])
            XCTAssertEqual(log.maxDepth, 1, "an event was delivered inside the handler's own call")
        }
    }

    func testStoppingALoopClosesItsSockets() async throws {
        let server = try echoServer()
        defer { Task { await server.shutdown() } }
        let loop = try EventLoop(name: "test-client")
        var options = WebSocketClientOptions()
        options.subprotocols = ["echo.v1"]
        let socket = try await WebSocket.connect(to: wsURL(server, "/echo"), options: options, loop: loop)
        let reader = EventReader(socket)
        loop.stop()
        let closed = try await reader.closed()
        XCTAssertEqual(closed.code, 1006)
        do {
            _ = try await WebSocket.connect(to: wsURL(server, "/echo"), options: options, loop: loop)
            XCTFail("connected on a stopped loop")
        } catch NetError.loopStopped {}
    }

    func testUpgradeRefusals() async throws {
        let server = try echoServer()
        defer { Task { await server.shutdown() } }
        do {
            _ = try await WebSocket.connect(to: wsURL(server, "/echo"))
            XCTFail("connected without a subprotocol the route requires")
        } catch NetError.upgradeRefused(let status) {
            XCTAssertEqual(status, 400)
        }
        do {
            _ = try await WebSocket.connect(to: wsURL(server, "/private"))
            XCTFail("connected without a token")
        } catch NetError.upgradeRefused(let status) {
            XCTAssertEqual(status, 401)
        }
        do {
            _ = try await WebSocket.connect(to: wsURL(server, "/none"))
            XCTFail("connected to a path without a route")
        } catch NetError.upgradeRefused(let status) {
            XCTAssertEqual(status, 404)
        }
        var options = WebSocketClientOptions()
        options.headers = ["Authorization": "Bearer good"]
        let socket = try await WebSocket.connect(to: wsURL(server, "/private"), options: options)
        let reader = EventReader(socket)
        try await reader.expect(.text("welcome"), "a message sent in onOpen arrives")
        socket.close()
        _ = try await reader.closed()
    }

    func testMessageTooBigClosesWith1009() async throws {
        let server = try echoServer { $0.webSocket.maxMessageBytes = 1000 }
        defer { Task { await server.shutdown() } }
        var options = WebSocketClientOptions()
        options.subprotocols = ["echo.v1"]
        let socket = try await WebSocket.connect(to: wsURL(server, "/echo"), options: options)
        let reader = EventReader(socket)
        try socket.send([UInt8](repeating: 1, count: 1000))
        try await reader.expect(.binary([UInt8](repeating: 1, count: 1000)))
        try socket.send([UInt8](repeating: 1, count: 1001))
        let closed = try await reader.closed()
        XCTAssertEqual(closed.code, 1009)
    }

    func testShutdownClosesWebSocketsWith1001() async throws {
        let server = try echoServer()
        var options = WebSocketClientOptions()
        options.subprotocols = ["echo.v1"]
        let sockets = try await withThrowingTaskGroup(of: WebSocket.self) { group in
            let url = wsURL(server, "/echo")
            let clientOptions = options
            for _ in 0..<20 { group.addTask { try await WebSocket.connect(to: url, options: clientOptions) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let readers = sockets.map(EventReader.init)
        // The server counts a WebSocket once it has sent the 101, which a client may read first.
        let deadline = Date().addingTimeInterval(10)
        while server.counters.openWebSockets < 20, Date() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
        XCTAssertEqual(server.counters.openWebSockets, 20)
        XCTAssertThrowsError(try server.start(), "a started server cannot start again")
        // Two shutdowns at once both return when it is done; a later one returns at once.
        async let first: Void = server.shutdown()
        async let second: Void = server.shutdown()
        _ = await (first, second)
        await server.shutdown()
        for reader in readers {
            let closed = try await reader.closed()
            XCTAssertEqual(closed.code, 1001)
            XCTAssertEqual(closed.reason, "server shutting down")
        }
        XCTAssertEqual(server.counters.openConnections, 0)
    }

    func testBackpressureFailsSendsWhenThePeerStopsReading() async throws {
        let listener = try RawListener()
        let accepted = Task.detached { listener.acceptWebSocket() }
        var options = WebSocketClientOptions()
        options.webSocket.maxQueuedBytes = 4 << 20
        let socket = try await WebSocket.connect(to: "ws://127.0.0.1:\(listener.port)/", options: options)
        let peer = await accepted.value
        defer { close(peer) }
        // The peer never reads: the kernel's buffers fill, then our queue, then sends fail.
        let chunk = [UInt8](repeating: 7, count: 256 * 1024)
        var sent = 0
        var refused: Error?
        for _ in 0..<4096 {
            do {
                try socket.send(chunk)
                sent += chunk.count
            } catch {
                refused = error
                break
            }
            if sent % (8 << 20) == 0 { try await Task.sleep(nanoseconds: 20_000_000) }
        }
        guard case NetError.queueFull(let limit)? = refused else { return XCTFail("no backpressure after \(sent) bytes") }
        XCTAssertEqual(limit, 4 << 20)
        XCTAssertLessThanOrEqual(socket.queuedBytes, 4 << 20)
        socket.close()
    }

    func testPingKeepAliveDetectsASilentPeer() async throws {
        let listener = try RawListener()
        let accepted = Task.detached { listener.acceptWebSocket() }
        var options = WebSocketClientOptions()
        options.webSocket.pingInterval = 0.2
        options.webSocket.pongTimeout = 0.3
        let socket = try await WebSocket.connect(to: "ws://127.0.0.1:\(listener.port)/", options: options)
        let peer = await accepted.value
        defer { close(peer) }
        let reader = EventReader(socket)
        let closed = try await reader.closed(timeout: 5)
        XCTAssertEqual(closed.code, 1006)
        XCTAssertTrue(closed.reason.contains("ping"), closed.reason)
        // The ping went out: the peer's socket holds a masked ping frame (0x89).
        var frame = [UInt8](repeating: 0, count: 16)
        let count = recv(peer, &frame, frame.count, Int32(MSG_DONTWAIT))
        XCTAssertGreaterThanOrEqual(count, 2)
        XCTAssertEqual(frame[0], 0x89)
    }

    func testConnectTimeoutWhenTheServerNeverAnswers() async throws {
        let listener = try RawListener()
        var options = WebSocketClientOptions()
        options.connectTimeout = 0.4
        let started = Date()
        do {
            _ = try await WebSocket.connect(to: "ws://127.0.0.1:\(listener.port)/", options: options)
            XCTFail("connected to a server that never answered")
        } catch NetError.timeout {
            XCTAssertLessThan(Date().timeIntervalSince(started), 3)
        }
        do {
            _ = try await WebSocket.connect(to: "ws://127.0.0.1:1/")
            XCTFail("connected to a closed port")
        } catch NetError.system(let call, let code) {
            XCTAssertTrue(call.hasPrefix("connect"))
            XCTAssertEqual(code, ECONNREFUSED)
        }
    }

    func testTLSForHTTPAndWebSocket() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (certificate, key) = try makeCertificate(in: directory)
        let server = try echoServer { $0.tls = TLSServerConfiguration(certificateFile: certificate, privateKeyFile: key) }
        server.route("GET", "/hello") { _ in HTTPResponse(text: "secure") }
        defer { Task { await server.shutdown() } }
        XCTAssertTrue(server.url.hasPrefix("https://"))
        let trust = TLSClientConfiguration(trustedCertificatesFile: certificate)

        let response = try await HTTPClient.request("GET", "\(server.url)/hello", tls: trust)
        XCTAssertEqual(response.text, "secure")

        var options = WebSocketClientOptions()
        options.subprotocols = ["echo.v1"]
        options.tls = trust
        let socket = try await WebSocket.connect(to: wsURL(server, "/echo"), options: options)
        let reader = EventReader(socket)
        let big = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try socket.send(big)
        try await reader.expect(.binary(big))
        socket.close()
        let closedCode = try await reader.closed().code
        XCTAssertEqual(closedCode, 1000)

        // Without trusting the certificate, both refuse to talk.
        do {
            _ = try await HTTPClient.request("GET", "\(server.url)/hello")
            XCTFail("an untrusted certificate was accepted")
        } catch NetError.tls(let message) {
            XCTAssertTrue(message.contains("certificate"), message)
        }
        options.tls = TLSClientConfiguration()
        do {
            _ = try await WebSocket.connect(to: wsURL(server, "/echo"), options: options)
            XCTFail("an untrusted certificate was accepted")
        } catch NetError.tls {}
        // A plain client talking to the TLS port gets no answer it can take.
        let plain = try? await HTTPClient.request("GET", "http://127.0.0.1:\(server.port)/hello", timeout: 2)
        XCTAssertNotEqual(plain?.status, 200)
    }
}

// MARK: raw socket helpers

func connectRaw(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let status = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard status == 0 else { throw NetError.system("connect", errno) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    return fd
}

func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if n <= 0 { return }
        offset += n
    }
}

func readUntilClosed(_ fd: Int32) -> [UInt8] {
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { return result }
        result += buffer[0..<n]
    }
}
