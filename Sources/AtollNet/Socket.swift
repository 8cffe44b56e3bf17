import CEpoll
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What can go wrong in the network layer. Every case carries a message fit for a log.
public enum NetError: Error, Equatable, CustomStringConvertible, Sendable {
    /// A system call failed (`call`, errno).
    case system(String, Int32)
    /// A host name did not resolve.
    case resolve(String)
    /// A URL that this layer cannot use (scheme, host or port).
    case invalidURL(String)
    /// A connect, handshake or request took longer than allowed.
    case timeout(String)
    /// TLS set-up or handshake failed.
    case tls(String)
    /// The peer answered in a way the protocol does not allow.
    case protocolError(String)
    /// The peer refused a WebSocket upgrade with this HTTP status.
    case upgradeRefused(Int)
    /// The connection closed before the operation finished.
    case closed(String)
    /// The event loop is stopped.
    case loopStopped
    /// A send would exceed the connection's outgoing queue limit (backpressure).
    case queueFull(Int)

    public var description: String {
        switch self {
        case let .system(call, code): return "\(call): \(String(cString: strerror(code)))"
        case let .resolve(host): return "cannot resolve host '\(host)'"
        case let .invalidURL(url): return "invalid URL: \(url)"
        case let .timeout(what): return "timed out: \(what)"
        case let .tls(message): return "TLS: \(message)"
        case let .protocolError(message): return "protocol error: \(message)"
        case let .upgradeRefused(status): return "WebSocket upgrade refused with HTTP \(status)"
        case let .closed(message): return "connection closed: \(message)"
        case .loopStopped: return "the event loop is stopped"
        case let .queueFull(limit): return "outgoing queue full (limit \(limit) bytes)"
        }
    }
}

/// Low-level socket helpers (non-blocking, close-on-exec).
enum Socket {
    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Resolves `host:port` (numeric or by name) to socket addresses, IPv4 first.
    static func resolve(host: String, port: Int, passive: Bool) throws -> [(family: Int32, address: [UInt8])] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        if passive { hints.ai_flags = AI_PASSIVE }
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host.isEmpty ? nil : host, String(port), &hints, &list)
        guard status == 0, let first = list else { throw NetError.resolve(host) }
        defer { freeaddrinfo(first) }
        var result: [(family: Int32, address: [UInt8])] = []
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let current = node {
            let info = current.pointee
            if let address = info.ai_addr {
                let bytes = [UInt8](UnsafeRawBufferPointer(start: address, count: Int(info.ai_addrlen)))
                result.append((info.ai_family, bytes))
            }
            node = info.ai_next
        }
        return result.sorted { $0.family == AF_INET && $1.family != AF_INET }
    }

    /// A listening socket on `host:port`; returns it and the port it got (for port 0).
    static func listen(host: String, port: Int, backlog: Int32) throws -> (fd: Int32, port: Int) {
        guard (0...65535).contains(port) else { throw NetError.invalidURL("port \(port) is out of range") }
        var lastError = NetError.resolve(host)
        for (family, address) in try resolve(host: host, port: port, passive: true) {
            let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd < 0 { lastError = .system("socket", errno); continue }
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            let bound = address.withUnsafeBytes {
                bind(fd, $0.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count))
            }
            guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
                lastError = .system("bind/listen \(host):\(port)", errno)
                close(fd)
                continue
            }
            setNonBlocking(fd)
            return (fd, localPort(fd))
        }
        throw lastError
    }

    static func localPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard got == 0 else { return 0 }
        let family = storage.ss_family
        return withUnsafePointer(to: &storage) { pointer -> Int in
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    /// The peer's address as text ("127.0.0.1:5123"), for logs.
    static func peerName(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard got == 0 else { return "?" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let status = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                            NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard status == 0 else { return "?" }
        return "\(nulTerminated(host)):\(nulTerminated(service))"
    }

    /// Starts a non-blocking connect; the socket is writable when it finishes (check `connectError`).
    static func startConnect(family: Int32, address: [UInt8]) throws -> Int32 {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw NetError.system("socket", errno) }
        let status = address.withUnsafeBytes {
            connect(fd, $0.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count))
        }
        if status != 0 && errno != EINPROGRESS {
            let code = errno
            close(fd)
            throw NetError.system("connect", code)
        }
        setNoDelay(fd)
        return fd
    }

    static func connectError(_ fd: Int32) -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        return error
    }
}

/// The result of one read or write on a transport.
enum IOResult {
    case done(Int)
    case wouldBlock
    case closed
    case failed(String)
}

/// Bytes over a socket, plain or TLS. Loop thread only.
protocol Transport: AnyObject {
    var fd: Int32 { get }
    /// Finishes a TLS handshake: true when done; `wouldBlock` while it needs more I/O.
    func handshake() -> IOResult
    func read(into buffer: UnsafeMutableRawBufferPointer) -> IOResult
    func write(_ bytes: UnsafeRawBufferPointer) -> IOResult
    /// Whether the transport waits for the socket to be writable to make progress.
    var wantsWrite: Bool { get }
    func close()
}

final class PlainTransport: Transport {
    let fd: Int32
    private var isClosed = false
    init(fd: Int32) { self.fd = fd }

    func handshake() -> IOResult { .done(0) }
    var wantsWrite: Bool { false }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        let n = recv(fd, buffer.baseAddress, buffer.count, 0)
        if n > 0 { return .done(n) }
        if n == 0 { return .closed }
        if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return .wouldBlock }
        return .failed(String(cString: strerror(errno)))
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> IOResult {
        let n = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        if n >= 0 { return .done(n) }
        if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return .wouldBlock }
        return .failed(String(cString: strerror(errno)))
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }
}

/// The text of a NUL-terminated C buffer.
func nulTerminated(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

extension NetError: LocalizedError {
    /// The message, as `localizedDescription` gives it (Foundation's default names only the type).
    public var errorDescription: String? { description }
}
