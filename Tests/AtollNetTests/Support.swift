@preconcurrency import Glibc
import AtollNet
import Foundation
import XCTest

/// A server on a free loopback port with the routes a test adds, shut down by `stop()`.
func startServer(_ configure: (inout HTTPServerConfiguration) -> Void = { _ in },
                 routes: (HTTPServer) -> Void) throws -> HTTPServer {
    var configuration = HTTPServerConfiguration()
    configure(&configuration)
    let server = try HTTPServer(configuration: configuration)
    routes(server)
    try server.start()
    return server
}

/// Keeps a socket's events as they arrive; the test takes them in order, waiting up to a timeout.
final class EventReader: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [WebSocketEvent] = []

    init(_ socket: WebSocket) {
        socket.onEvent = { [self] event in
            lock.lock()
            events.append(event)
            lock.unlock()
        }
    }

    func next(timeout: Double = 10) async throws -> WebSocketEvent {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let event = lock.withLock { events.isEmpty ? nil : events.removeFirst() }
            if let event { return event }
            try await Task.sleep(nanoseconds: 2_000_000)
        }
        throw NetError.timeout("no event within \(timeout) s")
    }

    /// Takes the next event and checks it is `expected`.
    func expect(_ expected: WebSocketEvent, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) async throws {
        let event = try await next()
        XCTAssertEqual(event, expected, message, file: file, line: line)
    }

    /// Waits for the close event, skipping messages.
    func closed(timeout: Double = 10) async throws -> (code: UInt16, reason: String) {
        while true {
            if case let .closed(code, reason) = try await next(timeout: timeout) { return (code, reason) }
        }
    }
}

/// A raw TCP listener for peers that misbehave on purpose (never answer, stop reading).
final class RawListener: @unchecked Sendable {
    let fd: Int32
    let port: Int
    init(backlog: Int32 = 16) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, backlog) == 0 else { throw NetError.system("bind", errno) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Accepts one connection (blocking).
    func acceptOne() -> Int32 { accept(fd, nil, nil) }

    /// Accepts one connection, answers its WebSocket upgrade by hand, and returns the socket;
    /// after that it reads or writes nothing unless the test does.
    func acceptWebSocket() -> Int32 {
        let client = acceptOne()
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) && recv(client, &byte, 1, 0) == 1 { head.append(byte) }
        let text = String(decoding: head, as: UTF8.self)
        let key = text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
            .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) } ?? ""
        let answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(webSocketAccept(key))\r\n\r\n"
        _ = Array(answer.utf8).withUnsafeBytes { send(client, $0.baseAddress, $0.count, 0) }
        return client
    }

    deinit { close(fd) }
}

/// Sec-WebSocket-Accept computed independently of AtollNet (SHA-1 via the openssl command).
func webSocketAccept(_ key: String) -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = ["dgst", "-sha1", "-binary"]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    guard (try? process.run()) != nil else { return "" }
    input.fileHandleForWriting.write(Data((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))
    try? input.fileHandleForWriting.close()
    let digest = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return digest.base64EncodedString()
}

/// A self-signed certificate for 127.0.0.1 and localhost, made with the openssl command.
func makeCertificate(in directory: URL) throws -> (certificate: String, key: String) {
    let certificate = directory.appendingPathComponent("cert.pem").path
    let key = directory.appendingPathComponent("key.pem").path
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-days", "1",
                         "-keyout", key, "-out", certificate]
    process.standardError = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw NetError.tls("openssl req failed") }
    return (certificate, key)
}

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("atoll-net-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
