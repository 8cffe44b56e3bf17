import CEpoll
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One socket on an event loop: the transport (plain or TLS), an outgoing byte buffer, the
/// epoll interest, and the way it closes. Subclasses speak HTTP on it (server or client side);
/// after an upgrade, its `webSocket` speaks WebSocket. Loop thread only.
class Channel: LoopHandler {
    let loop: EventLoop
    let transport: Transport
    private(set) var handshakeDone: Bool
    private(set) var isClosed = false
    /// Reading is paused (a request being handled, or the outgoing queue over its high mark).
    var readPaused = false { didSet { if readPaused != oldValue { updateInterest() } } }
    private var interest: UInt32 = 0
    private var outgoing: [UInt8] = []
    private var outgoingOffset = 0
    /// After an upgrade, the WebSocket on this channel.
    var webSocket: WebSocket?
    /// When set, the channel closes once everything queued is written.
    private(set) var closeWhenFlushed = false
    /// When bytes last went out (for timeouts that must not cut a slow download short).
    private(set) var lastWrite = EventLoop.now()

    init(loop: EventLoop, transport: Transport, handshakeDone: Bool) {
        self.loop = loop
        self.transport = transport
        self.handshakeDone = handshakeDone
    }

    /// Registers with the loop, interested in reading (and in writing while connecting).
    func start(waitingForConnect: Bool = false) throws {
        interest = EPOLLIN.rawValue | (waitingForConnect ? EPOLLOUT.rawValue : 0)
        try loop.register(transport.fd, events: interest, handler: self)
    }

    var pendingOutgoing: Int { outgoing.count - outgoingOffset }

    // MARK: events

    func handleEvents(_ events: UInt32) {
        if isClosed { return }
        var events = events
        if !handshakeDone {
            continueHandshake()
            if !handshakeDone || isClosed { return }
            // The peer's first data may have come with the handshake's last flight and been read
            // into the TLS layer's buffer with it: no readiness event would announce it (the
            // socket is empty), and the request would wait for the header timeout. Read now.
            events |= EPOLLIN.rawValue
        }
        if events & EPOLLOUT.rawValue != 0 {
            flush()
            if isClosed { return }
            writable()
            if isClosed { return }
        }
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            if readPaused && events & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                // epoll reports these even with no interest: a reset peer while reading is paused
                // would wake the loop on every pass.
                failed("connection reset")
                return
            }
            readAvailable()
        }
        if !isClosed { updateInterest() }
    }

    func tick(now: Double) {}

    /// The loop is stopping with this channel still open: close it, telling its owner.
    func loopStopped() { close() }

    /// Connected (TCP connect finished, for clients): overridden.
    func connected() {}
    /// The TLS handshake (or nothing, for plain sockets) finished.
    func handshakeFinished() {}
    /// Bytes arrived.
    func received(_ bytes: UnsafeRawBufferPointer) {}
    /// The socket can take more bytes (after the outgoing buffer drained).
    func writable() { webSocket?.writable() }
    /// The peer closed its side (EOF).
    func peerClosed() { close() }
    /// A read or write failed.
    func failed(_ message: String) { close() }
    /// The channel closed (socket gone); called once.
    func didClose() { webSocket?.channelClosed() }

    private func continueHandshake() {
        switch transport.handshake() {
        case .done:
            handshakeDone = true
            handshakeFinished()
        case .wouldBlock:
            updateInterest()
        case .closed:
            failed("closed during the TLS handshake")
        case let .failed(message):
            failed(message)
        }
    }

    /// Starts the TLS handshake (clients, once connected).
    func beginHandshake() { continueHandshake() }

    func readAvailable() {
        let buffer = loop.readBuffer
        while !isClosed && !readPaused {
            switch transport.read(into: buffer) {
            case let .done(count):
                if lingerDeadline != nil {
                    lingerDropped += count
                    if lingerDropped > Self.lingerBytes { close() }
                    continue
                }
                received(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            case .wouldBlock:
                return
            case .closed:
                if lingerDeadline != nil { close() } else { peerClosed() }
                return
            case let .failed(message):
                if lingerDeadline != nil { close() } else { failed(message) }
                return
            }
        }
    }

    // MARK: writing

    /// Queues bytes after those already queued and writes what the socket takes now.
    func write(_ bytes: [UInt8]) {
        guard !isClosed, !bytes.isEmpty else { return }
        if pendingOutgoing == 0 {
            outgoing = bytes
            outgoingOffset = 0
        } else {
            outgoing.append(contentsOf: bytes)
        }
        flush()
        if !isClosed { updateInterest() }
    }

    /// Writes queued bytes until the socket would block; true when nothing is left.
    @discardableResult
    func flush() -> Bool {
        while pendingOutgoing > 0 && !isClosed {
            let result = outgoing.withUnsafeBytes { transport.write(UnsafeRawBufferPointer(rebasing: $0[outgoingOffset...])) }
            switch result {
            case let .done(count):
                if count == 0 { return false }
                outgoingOffset += count
                lastWrite = EventLoop.now()
            case .wouldBlock:
                return false
            case .closed:
                failed("peer closed while writing")
                return false
            case let .failed(message):
                failed(message)
                return false
            }
        }
        if !isClosed && pendingOutgoing == 0 {
            outgoing = []
            outgoingOffset = 0
            if closeWhenFlushed && lingerDeadline == nil { finishClose() }
        }
        return true
    }

    /// Writes to the transport directly when nothing is queued ahead (the WebSocket's path);
    /// returns how many bytes went, or nil when the socket would block, or -1 on failure.
    func writeDirect(_ bytes: UnsafeRawBufferPointer) -> Int? {
        if pendingOutgoing > 0 && !flush() { return nil }
        if isClosed { return -1 }
        switch transport.write(bytes) {
        case let .done(count): return count == 0 ? nil : count
        case .wouldBlock: return nil
        case .closed, .failed: return -1
        }
    }

    func updateInterest() {
        guard !isClosed else { return }
        var wanted: UInt32 = readPaused ? 0 : EPOLLIN.rawValue
        // During a TLS handshake, OpenSSL says which way it waits (asking for writability while it
        // waits to read would wake the loop over and over).
        if !handshakeDone { wanted = transport.wantsWrite ? EPOLLOUT.rawValue : EPOLLIN.rawValue }
        if pendingOutgoing > 0 || transport.wantsWrite || (webSocket?.wantsWrite ?? false) {
            wanted |= EPOLLOUT.rawValue
        }
        if wanted != interest {
            interest = wanted
            loop.modify(transport.fd, events: wanted)
        }
    }

    /// Closes once the queued bytes are written (at once when nothing is queued). With `linger`,
    /// it first stops sending and reads (and drops) what the peer still sends for a moment, so
    /// that a client still uploading a body reads the answer instead of a reset (RFC 9112 §9.6).
    func closeAfterFlush(linger: Bool = false) {
        guard !isClosed else { return }
        closeWhenFlushed = true
        lingerWanted = linger
        readPaused = true
        if pendingOutgoing == 0 { finishClose() }
    }

    private var lingerWanted = false
    private var lingerDeadline: Double?
    private var lingerDropped = 0
    /// How long, and how many bytes, a lingering close reads and drops before it closes.
    static let lingerSeconds = 2.0
    static let lingerBytes = 8 << 20

    private func finishClose() {
        guard lingerWanted else { return close() }
        lingerDeadline = EventLoop.now() + Self.lingerSeconds
        if transport is PlainTransport { _ = Glibc.shutdown(transport.fd, Int32(SHUT_WR)) }
        readPaused = false
    }

    /// While lingering: drops what arrives and closes at the deadline or the peer's end.
    /// Returns true when the channel is lingering (subclasses then do nothing else on a tick).
    func lingerTick(now: Double) -> Bool {
        guard let deadline = lingerDeadline else { return false }
        if now > deadline { close() }
        return true
    }

    /// Closes the socket now.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        loop.unregister(transport.fd)
        transport.close()
        outgoing = []
        didClose()
    }
}
