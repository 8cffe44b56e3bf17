import CWslay
import Foundation
import Synchronization

/// What a WebSocket reports to its handler, in order, on its loop's thread.
public enum WebSocketEvent: Sendable, Equatable {
    /// A whole text message (fragments joined; always valid UTF-8).
    case text(String)
    /// A whole binary message.
    case binary([UInt8])
    /// A pong arrived (the answer to `ping`, or an unsolicited one).
    case pong([UInt8])
    /// The connection is gone: the peer's close code and reason, or 1006 (abnormal closure)
    /// when it ended without a close frame (or 1005 when the frame had no code). The last event.
    case closed(code: UInt16, reason: String)
}

/// Settings of one WebSocket connection, server or client side.
public struct WebSocketOptions: Sendable {
    /// Messages longer than this (after joining fragments) close the connection with 1009.
    public var maxMessageBytes: Int = 64 << 20
    /// Sends fail with `NetError.queueFull` while this many bytes wait to be written; reading from
    /// the peer pauses while more than half of it waits (backpressure).
    public var maxQueuedBytes: Int = 128 << 20
    /// Send a ping after this many seconds without traffic (0: never).
    public var pingInterval: Double = 0
    /// Close (1006) when no frame answers a ping within this many seconds.
    public var pongTimeout: Double = 10
    /// How long to wait for the peer's close frame after sending ours.
    public var closeTimeout: Double = 5
    public init() {}
}

/// A WebSocket connection (RFC 6455), from the server's upgrade or a client's connect.
///
/// Events go to `onEvent` on the loop thread; events that arrive before a handler is set are
/// kept and delivered when it is. Every method may be called from any thread.
public final class WebSocket: @unchecked Sendable {
    /// The subprotocol both sides agreed on, if any.
    public let subprotocol: String?
    /// For a server-side socket, the upgrade request (path, query, headers); nil for clients.
    public let request: HTTPRequest?
    public let options: WebSocketOptions
    let loop: EventLoop
    private let isServer: Bool

    // Loop-thread state.
    private var channel: Channel?
    private var context: wslay_event_context_ptr?
    private var input: [UInt8] = []
    private var inputOffset = 0
    private var collected: [WebSocketEvent] = []
    /// Depth of wslay calls and event deliveries under way. While it is not zero, writing
    /// (`pump`) and the end of the connection wait: wslay must not be re-entered or freed from a
    /// callback, and a handler must not see `.closed` (or a nested event) from inside its own call.
    private var busy = 0
    private var closeWanted = false
    private var lastReceived: Double
    private var pingSentAt: Double?
    private var closingSince: Double?
    private var peerCloseCode: UInt16?
    private var peerCloseReason = ""
    private var abortReason: String?
    /// A close asked for while messages still wait in wslay: queued once they are written
    /// (wslay sends control frames ahead of data, and drops the data after the close).
    private var pendingClose: (code: UInt16, reason: [UInt8])?
    private var fragmentSources: [Unmanaged<FragmentSource>] = []

    // Any-thread state.
    private let accepting = Atomic<Bool>(true)
    private let handedOff = Atomic<Int>(0)
    private let inLibrary = Atomic<Int>(0)
    private struct Delivery {
        var handler: (@Sendable (WebSocketEvent) -> Void)?
        var buffered: [WebSocketEvent] = []
        var draining = false
    }
    private let delivery = Mutex(Delivery())

    init(channel: Channel, isServer: Bool, subprotocol: String?, request: HTTPRequest?,
         options: WebSocketOptions) throws {
        self.channel = channel
        self.loop = channel.loop
        self.isServer = isServer
        self.subprotocol = subprotocol
        self.request = request
        self.options = options
        self.lastReceived = EventLoop.now()
        var context: wslay_event_context_ptr?
        var callbacks = WebSocket.callbacks
        let me = Unmanaged.passUnretained(self).toOpaque()
        let status = isServer
            ? wslay_event_context_server_init(&context, &callbacks, me)
            : wslay_event_context_client_init(&context, &callbacks, me)
        guard status == 0, let context else { throw NetError.system("wslay_event_context_init", ENOMEM) }
        wslay_event_config_set_max_recv_msg_length(context, UInt64(options.maxMessageBytes))
        self.context = context
    }

    deinit {
        if let context { wslay_event_context_free(context) }
        for source in fragmentSources { source.release() }
    }

    // MARK: public API

    /// The handler of this socket's events (runs on the loop thread). Events that came before
    /// it was set are delivered first, in order.
    public var onEvent: (@Sendable (WebSocketEvent) -> Void)? {
        get { delivery.withLock { $0.handler } }
        set {
            let drain = delivery.withLock { state -> Bool in
                state.handler = newValue
                guard newValue != nil, !state.buffered.isEmpty, !state.draining else { return false }
                state.draining = true
                return true
            }
            if drain { loop.enqueue { [self] in drainBuffered() } }
        }
    }

    /// The events as an async sequence (sets `onEvent`); it ends after `.closed`.
    public func events() -> AsyncStream<WebSocketEvent> {
        AsyncStream { continuation in
            onEvent = { event in
                continuation.yield(event)
                if case .closed = event { continuation.finish() }
            }
        }
    }

    /// Bytes given to `send` and not yet written to the socket.
    public var queuedBytes: Int { handedOff.load(ordering: .relaxed) + inLibrary.load(ordering: .relaxed) }

    /// False once `close` was called or the connection ended.
    public var isOpen: Bool { accepting.load(ordering: .acquiring) }

    /// Sends a text message.
    public func send(_ text: String) throws { try queue(opcode: UInt8(WSLAY_TEXT_FRAME.rawValue), Array(text.utf8)) }

    /// Sends a binary message.
    public func send(_ bytes: [UInt8]) throws { try queue(opcode: UInt8(WSLAY_BINARY_FRAME.rawValue), bytes) }

    /// Sends one message as several frames, one per part (parts over 4 KB are split further).
    /// For a text message the joined parts must be UTF-8; each part need not be.
    public func send(fragments: [[UInt8]], text: Bool = false) throws {
        // Empty parts make no frames (wslay takes a read of 0 bytes for "nothing yet").
        let fragments = fragments.filter { !$0.isEmpty }
        if fragments.isEmpty { return try text ? send("") : send([UInt8]()) }
        let total = fragments.reduce(0) { $0 + $1.count }
        try reserve(total)
        let opcode = UInt8(text ? WSLAY_TEXT_FRAME.rawValue : WSLAY_BINARY_FRAME.rawValue)
        loop.execute { [self] in
            handedOff.subtract(total, ordering: .relaxed)
            guard let context, accepting.load(ordering: .acquiring) else { return }
            let source = Unmanaged.passRetained(FragmentSource(parts: fragments))
            fragmentSources.append(source)
            var message = wslay_event_fragmented_msg()
            message.opcode = opcode
            message.source.data = source.toOpaque()
            message.read_callback = { _, buffer, length, source, eof, _ in
                guard let buffer, let data = source?.pointee.data, let eof else { return -1 }
                let fragments = Unmanaged<FragmentSource>.fromOpaque(data).takeUnretainedValue()
                let count = fragments.read(into: buffer, capacity: length)
                eof.pointee = fragments.finished ? 1 : 0
                return count
            }
            if wslay_event_queue_fragmented_msg(context, &message) != 0 {
                abort("cannot queue a fragmented message")
                return
            }
            pump()
        }
    }

    /// Sends a ping; the answer arrives as `.pong`. Payloads are at most 125 bytes.
    public func ping(_ payload: [UInt8] = []) throws {
        guard payload.count <= 125 else { throw NetError.protocolError("control frame payload over 125 bytes") }
        try queue(opcode: UInt8(WSLAY_PING.rawValue), payload)
    }

    /// Starts the close handshake with `code` (1000 normal, 1001 going away, 4000–4999 the
    /// application's own). The connection ends when the peer answers, or after `closeTimeout`.
    public func close(code: UInt16 = 1000, reason: String = "") {
        guard accepting.exchange(false, ordering: .acquiringAndReleasing) else { return }
        // A reason is at most 123 bytes (the frame's payload is 125 with the code).
        var reasonBytes = Array(reason.utf8.prefix(123))
        while !reasonBytes.isEmpty && String(validating: reasonBytes, as: UTF8.self) == nil { reasonBytes.removeLast() }
        let payload = reasonBytes
        loop.execute { [self] in startClose(code: code, reason: payload) }
    }

    // MARK: sending (any thread)

    private func reserve(_ count: Int) throws {
        guard accepting.load(ordering: .acquiring) else { throw NetError.closed("the WebSocket is closing or closed") }
        let before = handedOff.add(count, ordering: .relaxed).newValue - count
        if before + inLibrary.load(ordering: .relaxed) + count > options.maxQueuedBytes {
            handedOff.subtract(count, ordering: .relaxed)
            throw NetError.queueFull(options.maxQueuedBytes)
        }
    }

    private func queue(opcode: UInt8, _ bytes: [UInt8]) throws {
        try reserve(bytes.count)
        loop.execute { [self] in
            handedOff.subtract(bytes.count, ordering: .relaxed)
            guard let context else { return }
            let status = bytes.withUnsafeBufferPointer { buffer -> Int32 in
                var message = wslay_event_msg(opcode: opcode, msg: buffer.baseAddress, msg_length: buffer.count)
                return wslay_event_queue_msg(context, &message)
            }
            // WSLAY_ERR_NO_MORE_MSG: a close was queued (the peer's or ours); the message is dropped.
            if status != 0 && status != WSLAY_ERR_NO_MORE_MSG.rawValue {
                abort("cannot queue a message (\(status))")
                return
            }
            pump()
        }
    }

    // MARK: the loop side

    var wantsWrite: Bool {
        guard let context else { return false }
        return wslay_event_want_write(context) != 0
    }

    /// Bytes that came with the upgrade's head, before any read.
    func start(leftover: UnsafeRawBufferPointer) {
        if !leftover.isEmpty { received(leftover) } else { pump() }
    }

    func received(_ bytes: UnsafeRawBufferPointer) {
        guard let context else { return }
        // After a close (sent for an error, or received), wslay reads no more: drop the bytes.
        guard wslay_event_want_read(context) != 0 else { return }
        lastReceived = EventLoop.now()
        pingSentAt = nil
        input.append(contentsOf: bytes)
        busy += 1
        let status = wslay_event_recv(context)
        if inputOffset >= input.count {
            input = []
            inputOffset = 0
        } else if inputOffset > 1 << 16 {
            input.removeFirst(inputOffset)
            inputOffset = 0
        }
        deliverCollected()
        busy -= 1
        if status != 0 && !closeWanted { abortReason = "receive failed (\(status))" }
        settle(failed: status != 0)
    }

    /// After the outermost wslay call or delivery: end the connection if it closed meanwhile,
    /// else write what is queued.
    private func settle(failed: Bool = false) {
        guard busy == 0 else { return }
        if closeWanted {
            finishClosed()
        } else if failed {
            channel?.close()
        } else {
            pump()
        }
    }

    func writable() { pump() }

    /// Writes what wslay has queued, then closes the socket when both sides sent their close.
    func pump() {
        guard let context, let channel else { return }
        // Inside a wslay call or a delivery: `settle` pumps once it is over.
        if busy > 0 { return }
        var status: Int32 = 0
        if wslay_event_want_write(context) != 0 {
            busy += 1
            status = wslay_event_send(context)
            busy -= 1
        }
        if closeWanted { return finishClosed() }
        if status != 0 {
            abort("send failed (\(status))")
            return
        }
        if let close = pendingClose, wslay_event_get_queued_msg_count(context) == 0, fragmentSources.isEmpty {
            pendingClose = nil
            let status = close.reason.withUnsafeBufferPointer { wslay_event_queue_close(context, close.code, $0.baseAddress, $0.count) }
            if status != 0 && status != WSLAY_ERR_NO_MORE_MSG.rawValue { abort("cannot queue close"); return }
            return pump()
        }
        if !fragmentSources.isEmpty {
            // wslay reads no more of a source once it reported the end.
            fragmentSources.removeAll { source in
                let done = source.takeUnretainedValue().finished
                if done { source.release() }
                return done
            }
        }
        let fragmentBytes = fragmentSources.reduce(0) { $0 + $1.takeUnretainedValue().remaining }
        let queued = wslay_event_get_queued_msg_length(context) + channel.pendingOutgoing + fragmentBytes
        inLibrary.store(queued, ordering: .relaxed)
        if queued > options.maxQueuedBytes / 2 {
            channel.readPaused = true
        } else if channel.readPaused && queued < options.maxQueuedBytes / 4 && !channel.closeWhenFlushed {
            channel.readPaused = false
        }
        if wslay_event_get_close_received(context) != 0 || wslay_event_get_close_sent(context) != 0 {
            accepting.store(false, ordering: .releasing)
            if closingSince == nil { closingSince = EventLoop.now() }
        }
        if wslay_event_want_read(context) == 0 && wslay_event_want_write(context) == 0 {
            // Both closes are through (or reading stopped on an error and our close went out).
            channel.closeAfterFlush()
        } else {
            channel.updateInterest()
        }
    }

    private func startClose(code: UInt16, reason: [UInt8]) {
        guard let context else { return }
        if wslay_event_get_close_sent(context) == 0, pendingClose == nil,
           wslay_event_get_queued_msg_count(context) > 0 || !fragmentSources.isEmpty {
            // What was sent before `close` goes first: `pump` queues the close after it.
            pendingClose = (code, reason)
        } else if wslay_event_get_close_sent(context) == 0, pendingClose == nil {
            let status = reason.withUnsafeBufferPointer { wslay_event_queue_close(context, code, $0.baseAddress, $0.count) }
            if status != 0 && status != WSLAY_ERR_NO_MORE_MSG.rawValue { abort("cannot queue close"); return }
        }
        closingSince = closingSince ?? EventLoop.now()
        pump()
    }

    /// Ends the connection at once, without a close handshake, and frees what is queued for the
    /// peer (the handler sees 1006): for a peer that does not read, which could not read a close
    /// frame queued behind what it has not read either. Any thread.
    public func drop(reason: String) {
        guard accepting.exchange(false, ordering: .acquiringAndReleasing) else { return }
        loop.execute { [self] in abort(reason) }
    }

    /// Ends the connection without a close handshake (the handler sees 1006).
    func abort(_ reason: String) {
        abortReason = reason
        channel?.close()
    }

    func tick(now: Double) {
        guard let context else { return }
        if let since = closingSince, now - since > options.closeTimeout {
            abort("no close frame from the peer within \(options.closeTimeout) s")
            return
        }
        guard options.pingInterval > 0, closingSince == nil else { return }
        // While reading is paused (backpressure) the peer's pong may wait unread in the kernel.
        if channel?.readPaused == true { pingSentAt = pingSentAt.map { _ in now }; return }
        if let sent = pingSentAt {
            if now - sent > options.pongTimeout { abort("no answer to a ping within \(options.pongTimeout) s") }
        } else if now - lastReceived >= options.pingInterval {
            pingSentAt = now
            var message = wslay_event_msg(opcode: UInt8(WSLAY_PING.rawValue), msg: nil, msg_length: 0)
            _ = wslay_event_queue_msg(context, &message)
            pump()
        }
    }

    /// The socket is gone: report the close and free the framing state (after the wslay call or
    /// delivery under way, if any).
    func channelClosed() {
        if busy > 0 {
            closeWanted = true
            return
        }
        finishClosed()
    }

    private func finishClosed() {
        closeWanted = false
        guard let context else { return }
        accepting.store(false, ordering: .releasing)
        let received = wslay_event_get_close_received(context) != 0
        wslay_event_context_free(context)
        self.context = nil
        channel = nil
        input = []
        for source in fragmentSources { source.release() }
        fragmentSources = []
        inLibrary.store(0, ordering: .relaxed)
        let code: UInt16 = received ? (peerCloseCode.map { $0 == 0 ? 1005 : $0 } ?? 1005) : 1006
        let reason = received ? peerCloseReason : (abortReason ?? "connection lost")
        deliver(.closed(code: code, reason: reason))
        // `.closed` is the last event: drop the handler once it has it, which also breaks the
        // cycle of a handler that captures its own socket (the usual way to answer messages).
        if delivery.withLock({ $0.buffered.isEmpty && !$0.draining }) {
            delivery.withLock { $0.handler = nil }
        } else {
            closedPending = true
        }
    }

    /// `.closed` waits in the buffer for a handler; drop the handler after it is drained.
    private var closedPending = false

    // MARK: events

    private func deliverCollected() {
        guard !collected.isEmpty else { return }
        let events = collected
        collected = []
        for event in events { deliver(event) }
    }

    private func deliver(_ event: WebSocketEvent) {
        let handler = delivery.withLock { state -> (@Sendable (WebSocketEvent) -> Void)? in
            if state.handler == nil || state.draining || !state.buffered.isEmpty {
                state.buffered.append(event)
                return nil
            }
            return state.handler
        }
        handler?(event)
    }

    private func drainBuffered() {
        while true {
            let next = delivery.withLock { state -> (WebSocketEvent, @Sendable (WebSocketEvent) -> Void)? in
                guard let handler = state.handler, !state.buffered.isEmpty else {
                    state.draining = false
                    return nil
                }
                return (state.buffered.removeFirst(), handler)
            }
            guard let (event, handler) = next else {
                if closedPending, delivery.withLock({ $0.buffered.isEmpty && $0.handler != nil }) {
                    closedPending = false
                    delivery.withLock { $0.handler = nil }
                }
                return
            }
            handler(event)
        }
    }

    // MARK: wslay callbacks

    private static func owner(_ data: UnsafeMutableRawPointer?) -> WebSocket? {
        guard let data else { return nil }
        return Unmanaged<WebSocket>.fromOpaque(data).takeUnretainedValue()
    }

    private static let callbacks: wslay_event_callbacks = {
        var callbacks = wslay_event_callbacks()
        callbacks.recv_callback = { context, buffer, length, _, data in
            guard let me = WebSocket.owner(data), let buffer else { return -1 }
            let available = me.input.count - me.inputOffset
            if available == 0 {
                wslay_event_set_error(context, WSLAY_ERR_WOULDBLOCK.rawValue)
                return -1
            }
            let count = min(available, length)
            me.input.withUnsafeBytes { source in
                buffer.update(from: source.baseAddress!.advanced(by: me.inputOffset).assumingMemoryBound(to: UInt8.self), count: count)
            }
            me.inputOffset += count
            return count
        }
        callbacks.send_callback = { context, bytes, length, _, data in
            guard let me = WebSocket.owner(data), let channel = me.channel, let bytes else { return -1 }
            switch channel.writeDirect(UnsafeRawBufferPointer(start: bytes, count: length)) {
            case nil:
                wslay_event_set_error(context, WSLAY_ERR_WOULDBLOCK.rawValue)
                return -1
            case let count? where count < 0:
                wslay_event_set_error(context, WSLAY_ERR_CALLBACK_FAILURE.rawValue)
                return -1
            case let count?:
                return count
            }
        }
        callbacks.genmask_callback = { _, buffer, length, _ in
            guard let buffer else { return -1 }
            let random = Crypto.randomBytes(length)
            buffer.update(from: random, count: length)
            return 0
        }
        callbacks.on_frame_recv_start_callback = { context, argument, _ in
            // A close frame's payload is empty or at least a 2-byte code (RFC 6455 §5.5.1); wslay
            // would answer a 1-byte one with an empty close. Queuing ours first makes it 1002.
            guard let frame = argument?.pointee else { return }
            if UInt32(frame.opcode) == WSLAY_CONNECTION_CLOSE.rawValue && frame.payload_length == 1 {
                _ = wslay_event_queue_close(context, UInt16(WSLAY_CODE_PROTOCOL_ERROR.rawValue), nil, 0)
            }
        }
        callbacks.on_msg_recv_callback = { context, argument, data in
            guard let me = WebSocket.owner(data), let argument else { return }
            let arg = argument.pointee
            let bytes = arg.msg.map { [UInt8](UnsafeBufferPointer(start: $0, count: arg.msg_length)) } ?? []
            switch UInt32(arg.opcode) {
            case WSLAY_TEXT_FRAME.rawValue:
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    // RFC 6455 §8.1: a text message that is not UTF-8 fails the connection with 1007.
                    _ = wslay_event_queue_close(context, UInt16(WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA.rawValue), nil, 0)
                    wslay_event_shutdown_read(context)
                    return
                }
                me.collected.append(.text(text))
            case WSLAY_BINARY_FRAME.rawValue:
                me.collected.append(.binary(bytes))
            case WSLAY_PONG.rawValue:
                me.collected.append(.pong(bytes))
            case WSLAY_CONNECTION_CLOSE.rawValue:
                me.peerCloseCode = arg.status_code
                // wslay has checked the code and the reason's UTF-8 and queued its answer.
                let reasonBytes = bytes.count > 2 ? Array(bytes[2...]) : []
                me.peerCloseReason = String(validating: reasonBytes, as: UTF8.self) ?? ""
            default:
                break
            }
        }
        return callbacks
    }()
}

/// The parts of a fragmented message being sent, read by wslay one frame at a time.
final class FragmentSource {
    private let parts: [[UInt8]]
    private var index = 0
    private var offset = 0
    init(parts: [[UInt8]]) {
        self.parts = parts
        total = parts.reduce(0) { $0 + $1.count }
    }

    private var consumed = 0
    private let total: Int
    var finished: Bool { index >= parts.count }
    /// Bytes not yet handed to wslay (counted in the socket's queued bytes).
    var remaining: Int { total - consumed }

    func read(into buffer: UnsafeMutablePointer<UInt8>, capacity: Int) -> Int {
        while index < parts.count && parts[index].isEmpty { index += 1 }
        guard index < parts.count else { return 0 }
        let part = parts[index]
        let count = min(capacity, part.count - offset)
        part.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress!.advanced(by: offset), count: count) }
        offset += count
        consumed += count
        if offset == part.count {
            index += 1
            offset = 0
        }
        return count
    }
}
