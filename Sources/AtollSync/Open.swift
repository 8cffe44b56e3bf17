import AtollStore
import Foundation
import Synchronization

/// When opening a synced realm waits for the server's data (Realm's `downloadBeforeOpen`).
public enum DownloadBeforeOpen: String, Sendable {
    /// Open at once with what is on the device; sync in the background.
    case never
    /// Wait the first time the file is opened (until it has downloaded once), then never.
    case once
    /// Wait every time (a background refresh: the data is fresh when the realm opens).
    case always
}

/// How to open a synced realm.
public struct OpenOptions: Sendable {
    public var downloadBeforeOpen: DownloadBeforeOpen = .never
    /// How long the download may take (seconds).
    public var timeout: Double = 30
    /// When the download cannot be done (no connection, timeout), open what is on the device
    /// instead of failing (AutoOpen). AsyncOpen fails.
    public var offlineFallback = false
    public init(downloadBeforeOpen: DownloadBeforeOpen = .never, timeout: Double = 30, offlineFallback: Bool = false) {
        self.downloadBeforeOpen = downloadBeforeOpen
        self.timeout = timeout
        self.offlineFallback = offlineFallback
    }
}

extension ClientSession {
    /// Opens the session of a synced realm file and waits for the server's data as the options
    /// say. The caller opens its own store handle of the file afterwards and calls `release()`
    /// when it closes it.
    /// - Throws: `SyncError(.timeout)` when the download did not finish in time (and there is no
    ///   offline fallback), the session's fatal errors, and those of `open(user:…)`.
    public static func openRealm(user: ClientUser, storeConfiguration: Configuration, sync: ClientSyncConfiguration,
                                 options: OpenOptions) throws -> ClientSession {
        let session = try open(user: user, storeConfiguration: storeConfiguration, sync: sync)
        let wait: Bool
        switch options.downloadBeforeOpen {
        case .never: wait = false
        case .once: wait = !session.hasDownloaded
        case .always: wait = true
        }
        guard wait else { return session }
        do {
            try session.waitForInitialDownload(timeout: options.timeout)
        } catch let e as SyncError where options.offlineFallback && (e.code == .timeout || e.code == .connectionFailed) {
            // AutoOpen: the device's data, synced when the server can be reached.
            return session
        } catch {
            session.release()
            throw error
        }
        return session
    }
}

/// Opening a synced realm in the background, reporting its progress (Realm's AsyncOpen and
/// AutoOpen): connecting, waiting for the user, progress, open, error.
public final class AsyncOpenTask: @unchecked Sendable {
    public enum State: Sendable {
        case connecting
        case waitingForUser
        case progress(transferred: Int, transferable: Int, estimate: Double)
        case open(ClientSession)
        case error(Error)
    }

    private let cancelled = Atomic<Bool>(false)
    private let lock = NSLock()
    private var session: ClientSession?
    private var finished = false

    /// Starts opening; `report` is called (on a background thread) for each state, last with
    /// `.open` or `.error`. With `offlineFallback` (AutoOpen) a realm that cannot reach the
    /// server in time opens with what is on the device; without it (AsyncOpen), that is an error.
    public init(user: ClientUser?, storeConfiguration: Configuration, sync: ClientSyncConfiguration, timeout: Double,
                offlineFallback: Bool, report: @escaping @Sendable (State) -> Void) {
        Thread.detachNewThread { [self] in
            guard let user, user.isLoggedIn else {
                report(.waitingForUser)
                finish()
                return
            }
            report(.connecting)
            do {
                let session = try ClientSession.open(user: user, storeConfiguration: storeConfiguration, sync: sync)
                lock.withLock { self.session = session }
                let token = session.observe { event in
                    if case let .progress("download", transferred, transferable, estimate) = event {
                        report(.progress(transferred: transferred, transferable: transferable, estimate: estimate))
                    }
                }
                defer { session.removeObserver(token) }
                let stop = { self.cancelled.load(ordering: .relaxed) }
                do {
                    if stop() { throw SyncError(.timeout, "the open was cancelled") }
                    try session.waitForInitialDownload(timeout: timeout, cancelled: stop)
                } catch let e as SyncError where offlineFallback && !stop() && (e.code == .timeout || e.code == .connectionFailed) {
                    // AutoOpen: open what is on the device.
                }
                if stop() { throw SyncError(.timeout, "the open was cancelled") }
                lock.withLock { self.session = nil }
                report(.open(session))
            } catch {
                let leftover = lock.withLock { () -> ClientSession? in
                    defer { self.session = nil }
                    return self.session
                }
                leftover?.release()
                report(.error(error))
            }
            finish()
        }
    }

    private func finish() { lock.withLock { finished = true } }

    /// Stops waiting: the task ends with an error (a session already handed over in `.open`
    /// is the receiver's).
    public func cancel() {
        cancelled.store(true, ordering: .relaxed)
        let s = lock.withLock { session }
        s?.cancelWaits()
    }
}

extension ClientSession {
    /// Ends the waits under way (they throw): an AsyncOpen that was cancelled.
    func cancelWaits() { interruptWaits() }
}
