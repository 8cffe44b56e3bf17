// Sync (the package trait `Sync`, on by default): absent from a local-only build.
#if Sync
import AtollSync
import Foundation

/// The sync of one realm file with the server (Realm's `SyncSession`): its state, pausing and
/// resuming, waiting for uploads and downloads, progress.
///
/// ```swift
/// let session = realm.syncSession
/// session?.pause()                                 // local writes go on and wait
/// session?.resume()
/// try await session?.wait(for: .upload)            // every write made so far is on the server
/// ```
///
/// The session belongs to the realm file: realms open on the file share it, and it stops when
/// the last of them goes.
public final class SyncSession: @unchecked Sendable, Hashable {
    /// `active`, `paused` (by `pause()`), `inactive` (stopped: the realms closed, the user
    /// logged out, or a fatal error).
    public typealias State = AtollSync.ClientSession.State
    /// `disconnected`, `connecting`, `connected`.
    public typealias ConnectionState = AtollSync.ClientSession.ConnectionState

    /// Which way data moves.
    public enum ProgressDirection: Sendable, Hashable {
        /// From this device to the server.
        case upload
        /// From the server to this device.
        case download
    }

    /// How long a progress notification reports.
    public enum ProgressMode: Sendable, Hashable {
        /// Every transfer, until the token is invalidated.
        case reportIndefinitely
        /// The transfer under way; the block is called a last time when it completes.
        case forCurrentlyOutstandingWork
    }

    /// How far a transfer has got.
    public struct Progress: Sendable, Hashable {
        /// Bytes (or, for a bootstrap, objects) transferred so far.
        public let transferredBytes: Int
        /// Bytes (or objects) to transfer in all.
        public let transferrableBytes: Int
        /// The fraction done, 0...1.
        public let progressEstimate: Double

        /// Whether the transfer is complete.
        public var isTransferComplete: Bool { progressEstimate >= 1 }
        /// The fraction done (Realm's older name of `progressEstimate`).
        public var fractionTransferred: Double { progressEstimate }
    }

    let engine: AtollSync.ClientSession
    let user: User
    private let syncConfiguration: SyncConfiguration?
    private let lock = NSLock()
    /// The realm that handed the session out: it moves to the downloaded data after a wait.
    private weak var realm: Realm?

    init(engine: AtollSync.ClientSession, user: User, configuration: SyncConfiguration?) {
        self.engine = engine
        self.user = user
        syncConfiguration = configuration
    }

    func bind(_ realm: Realm) { lock.withLock { if self.realm == nil { self.realm = realm } } }

    /// Whether the session syncs, is paused, or has stopped.
    public var state: State { engine.state }
    /// Whether the session's connection is up.
    public var connectionState: ConnectionState { engine.connectionState }
    /// The realm file's path.
    public var path: String { engine.path }

    /// The user whose realm it is.
    public func parentUser() -> User? { user }

    /// The sync configuration of the realm the session came from (nil for a session an error
    /// handler received).
    public func configuration() -> SyncConfiguration? { syncConfiguration }

    /// Stops talking to the server until `resume()`; local writes go on and are uploaded later.
    public func pause() { engine.pause() }

    /// Syncs again after `pause()`.
    public func resume() { engine.resume() }

    /// Drops the connection and connects again at once.
    public func reconnect() { engine.reconnect() }

    /// Waits until every write made before the call is on the server (`.upload`), or until
    /// everything the server had when the call was made is on this device (`.download`; the
    /// realm that handed out the session then moves to that data). Does not block a thread of
    /// the cooperative pool.
    /// - Parameter timeout: seconds; nil: the app's `syncTimeouts.downloadTimeout`.
    /// - Throws: `SyncError(.timeout)` (a paused session waits until then), the session's
    ///   fatal error, `SyncError(.connectionFailed)` when the session stopped.
    public func wait(for direction: ProgressDirection, timeout: TimeInterval? = nil) async throws {
        let engine = self.engine
        let seconds = timeout ?? user.core.configuration.syncTimeouts.downloadTimeout
        try await runBlocking {
            switch direction {
            case .upload: try engine.waitForUpload(timeout: seconds)
            case .download: try engine.waitForDownload(timeout: seconds)
            }
        }
        if direction == .download { refreshRealm() }
    }

    /// Moves the realm that handed out the session to the newest data (not inside a write).
    func refreshRealm() {
        guard let realm = lock.withLock({ realm }), !realm.isInWriteTransaction else { return }
        realm.refresh()
    }

    /// Calls `block` with the progress of uploads or downloads, on the sync connection's queue.
    /// Keep the token: invalidating or releasing it stops the notifications.
    public func addProgressNotification(for direction: ProgressDirection, mode: ProgressMode,
                                        block: @escaping @Sendable (Progress) -> Void) -> ProgressNotificationToken? {
        let token = ProgressNotificationToken(engine)
        let name = direction == .upload ? "upload" : "download"
        token.start(engine.observe { [weak token] event in
            guard let token, case let .progress(d, transferred, transferable, estimate) = event, d == name else { return }
            block(Progress(transferredBytes: transferred, transferrableBytes: transferable, progressEstimate: estimate))
            if mode == .forCurrentlyOutstandingWork, estimate >= 1 { token.invalidate() }
        })
        return token
    }

    /// Stops a progress notification (Realm's `ProgressNotificationToken`).
    public final class ProgressNotificationToken: @unchecked Sendable {
        private weak var engine: AtollSync.ClientSession?
        private var id: Int?
        private let lock = NSLock()

        fileprivate init(_ engine: AtollSync.ClientSession) { self.engine = engine }

        fileprivate func start(_ id: Int) { lock.withLock { self.id = id } }

        deinit { invalidate() }

        /// Stops the notifications.
        public func invalidate() {
            let id = lock.withLock { () -> Int? in
                defer { self.id = nil }
                return self.id
            }
            if let id { engine?.removeObserver(id) }
        }
    }

    /// Sessions are equal when they sync the same realm file in the same engine session.
    public static func == (a: SyncSession, b: SyncSession) -> Bool { a.engine === b.engine }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(engine)) }
}
#endif
