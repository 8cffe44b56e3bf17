import AtollJSON
import AtollProtocol
@testable import AtollServer
import AtollStore
@testable import AtollSync
import Foundation

/// One device's connection to the simulated server: the client end is a `SessionConnection` (what
/// a `UserConnection` is to a real session), the server end a `SyncTransport` of a `SyncConnection`
/// (what a WebSocket is to the real server). Nothing moves by itself: messages wait in two queues,
/// and the session's work waits in a task list, until the scheduler says which goes next.
///
/// Everything runs on the test's thread, one step at a time.
final class SimLink: SessionConnection, @unchecked Sendable {
    let device: Int
    /// The messages the client sent and the server has not read yet.
    private(set) var up: [String] = []
    /// What the server sent and the client has not read yet: a message, or the close that
    /// followed it.
    private(set) var down: [Down] = []
    enum Down { case text(String), close(UInt16) }
    /// The session's work not yet run (`async`), in order.
    private(set) var tasks: [@Sendable () -> Void] = []
    private(set) var sessions: [Int64: ClientSession] = [:]
    private var nextNumber: Int64 = 0
    /// The server's end while connected.
    private(set) var serverEnd: SyncConnection?
    private var peer: ServerPeer?
    /// Errors the sessions reported (the app's error handler).
    var errors: [SyncError] = []
    /// The server's `retryAfter` (seconds), which a real connection waits out before it
    /// reconnects: no connect before this simulated time (milliseconds).
    private(set) var notBefore: Int64 = 0
    /// The simulated wall clock.
    var now: () -> Int64 = { 0 }

    init(device: Int) { self.device = device }

    /// ATOLL_SIM_VERBOSE=1 prints every message as it is read.
    static let verbose = ProcessInfo.processInfo.environment["ATOLL_SIM_VERBOSE"] == "1"

    var isConnected: Bool { serverEnd != nil }
    var wantsConnection: Bool { sessions.values.contains { $0.state == .active } }

    // MARK: - SessionConnection

    func async(_ work: @escaping @Sendable () -> Void) { tasks.append(work) }

    func sync<T>(_ work: () throws -> T) rethrows -> T { try work() }

    func attach(_ session: ClientSession) {
        guard !sessions.values.contains(where: { $0 === session }) else { return }
        nextNumber += 1
        session.number = nextNumber
        sessions[nextNumber] = session
        if isConnected { session.didConnect() } else { session.setConnectionState(.connecting) }
    }

    func detach(_ session: ClientSession) {
        guard sessions[session.number] === session else { return }
        if session.bound { send(.unbind(session: session.number)) }
        sessions[session.number] = nil
        session.didDisconnect()
        if sessions.isEmpty { disconnect(notifyServer: true) }
    }

    func rebind(_ session: ClientSession) {
        guard sessions[session.number] === session else { return }
        if session.bound { send(.unbind(session: session.number)) }
        sessions[session.number] = nil
        session.didDisconnect()
        attach(session)
    }

    /// A real connection drops and dials again at once; here the scheduler's connect step dials.
    func reconnectNow() { disconnect(notifyServer: true) }

    func send(_ message: ClientMessage) {
        guard isConnected else { return }
        up.append(message.text)
    }

    func stop() { disconnect(notifyServer: true) }

    // MARK: - Scheduler's steps

    /// Runs the oldest queued task; false when there is none.
    @discardableResult
    func runTask() -> Bool {
        guard !tasks.isEmpty else { return false }
        tasks.removeFirst()()
        return true
    }

    /// Connects to `app` (as a new WebSocket would) and binds the active sessions; false when the
    /// link is up already, nothing wants it, or the server's `retryAfter` still holds it back.
    @discardableResult
    func connect(to app: ServerApp, user: String) -> Bool {
        guard !isConnected, wantsConnection, now() >= notBefore else { return false }
        let peer = ServerPeer(link: self)
        let end = SyncConnection(transport: peer, user: RuleUser(id: user), app: app)
        peer.end = end
        peer.uploads = uploads
        app.connectionOpened(end)
        self.peer = peer
        serverEnd = end
        for s in sessions.values.sorted(by: { $0.number < $1.number }) { s.didConnect() }
        return true
    }


    /// Cuts the connection: what is in flight either way is lost.
    func disconnect(notifyServer: Bool) {
        guard let end = serverEnd else { return }
        serverEnd = nil
        peer?.link = nil
        peer = nil
        up = []
        down = []
        if notifyServer { end.app.connectionClosed(end) }
        for s in sessions.values { s.didDisconnect() }
    }

    /// The server reads the oldest message the client sent; false when there is none.
    @discardableResult
    func deliverUp() -> Bool {
        guard let end = serverEnd, !up.isEmpty else { return false }
        let text = up.removeFirst()
        // A connection the server closed reads nothing more.
        guard peer?.closed != true else { return true }
        if Self.verbose { print("  d\(device) -> server: \(text)") }
        end.app.queue.sync { end.receive(text) }
        recordUpload(text, end)
        return true
    }

    /// The client reads the oldest message the server sent (as `UserConnection` does); false when
    /// there is none.
    @discardableResult
    func deliverDown() -> Bool {
        guard !down.isEmpty else { return false }
        switch down.removeFirst() {
        case .close(let code):
            disconnect(notifyServer: true)
            if code != 1000 && code != 1001 {
                for s in sessions.values { s.report(SyncError(.connectionFailed, "the connection closed (\(code))")) }
            }
        case .text(let text):
            if Self.verbose { print("  server -> d\(device): \(text)") }
            let decoded = Result { try ServerMessage(text: text) }
            if let seconds = Self.retryAfter(decoded) {
                notBefore = max(notBefore, now() + min(seconds, Int64(UserConnection.longestHoldOff)) * 1000)
            }
            if !Self.deliver(decoded, to: sessions) { disconnect(notifyServer: true) }
        }
        return true
    }

    /// Every changeset the server was sent, by client file and client version (the reference
    /// model takes those the server acknowledged).
    var uploads: UploadLog?

    private func recordUpload(_ text: String, _ end: SyncConnection) {
        guard let uploads, case .upload(let n, let changesets)? = try? ClientMessage(text: text), let file = fileKey(n, end) else { return }
        for item in changesets {
            guard let (cs, more) = try? item.decode() else { continue }
            uploads.add(file: file, cs, more: more)
        }
    }

    /// The client file of a session of the server's end, as "ident:salt".
    private func fileKey(_ session: Int64, _ end: SyncConnection) -> String? {
        end.app.queue.sync { Self.fileKeyOnQueue(session, end) }
    }

    fileprivate static func fileKeyOnQueue(_ session: Int64, _ end: SyncConnection) -> String? {
        guard let ident = end.app.sessions[ObjectIdentifier(end)]?[session]?.file, let f = try? end.app.storage.file(ident) else { return nil }
        return "\(ident):\(f.salt)"
    }

    fileprivate func received(_ text: String) { down.append(.text(text)) }

    /// Puts a message in the client's queue as though the server had sent it (a test's).
    func inject(_ text: String) { down.append(.text(text)) }

    fileprivate func closedByServer(_ code: UInt16) { down.append(.close(code)) }

    /// The server's end of the link: what it sends waits in the client's queue.
    final class ServerPeer: SyncTransport, @unchecked Sendable {
        weak var link: SimLink?
        /// The server's end of this connection, and where its refusals are noted.
        weak var end: SyncConnection?
        var uploads: UploadLog?
        private(set) var closed = false
        init(link: SimLink) { self.link = link }
        /// Called on the server's queue.
        func send(_ text: String) throws {
            noteRefusal(text)
            guard !closed else { return }
            link?.received(text)
        }

        /// Notes the writes the server refused (`writeRejected`), by client file and version, when
        /// it sends the refusal: the upload it answers may have waited (a bootstrap ran), and the
        /// client may never read it (a cut), but the server did refuse them.
        private func noteRefusal(_ text: String) {
            guard let uploads, let end, text.contains("writeRejected"), let m = try? Wire.decode(text), (try? m.string("type")) == "error",
                  let e = try? SyncErrorMessage(wire: m), e.code == .writeRejected, let version = e.clientVersion, let n = e.session,
                  let file = SimLink.fileKeyOnQueue(n, end) else { return }
            uploads.refuse(file: file, version: version, e.compensatingWrites.map { ObjectID($0.className, $0.primaryKey) })
        }
        func close(code: UInt16, reason: String) {
            guard !closed else { return }
            closed = true
            link?.closedByServer(code)
        }
        var remoteAddress: String { "simulation" }
    }
}


/// The changesets uploaded to the server, by client file and client version; a changeset sent in
/// parts is put back together.
final class UploadLog {
    /// By client file ("ident:salt": a server restored from a backup hands out idents again).
    private(set) var changesets: [String: [UInt64: SyncChangeset]] = [:]
    private var partial: [String: SyncChangeset] = [:]

    /// The objects whose writes the server refused, by client file and version.
    private(set) var refused: [String: [UInt64: Set<ObjectID>]] = [:]

    func refuse(file: String, version: UInt64, _ objects: [ObjectID]) {
        refused[file, default: [:]][version, default: []].formUnion(objects)
    }

    func add(file: String, _ cs: SyncChangeset, more: Bool) {
        var whole = cs
        if let p = partial.removeValue(forKey: file), p.clientVersion == cs.clientVersion {
            whole.instructions = p.instructions + cs.instructions
        }
        if more {
            partial[file] = whole
            return
        }
        if changesets[file]?[whole.clientVersion] == nil { changesets[file, default: [:]][whole.clientVersion] = whole }
    }
}
