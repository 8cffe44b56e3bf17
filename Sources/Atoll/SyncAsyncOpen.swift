// Sync (the package trait `Sync`, on by default): absent from a local-only build.
#if Sync
import AtollStore
import AtollSync
import Foundation
import Observation

// SwiftUI's @AsyncOpen and @AutoOpen, for Linux, where SwiftUI does not exist: opening a synced
// realm in the background as observable state (`Observation.Observable`), which a view model or
// a UI layer watches with `withObservationTracking`:
//
//     let open = AsyncOpen(app: app, configuration: config, timeout: 10)
//     withObservationTracking { render(open.state) } onChange: { ... }
//
// Both drive the engine's `AsyncOpenTask` (its own thread: nothing blocks the cooperative pool).
// The state changes on that thread; an observer registered with `withObservationTracking` is
// called there, once the new state is readable.

/// Where opening a synced realm in the background has got (Realm's `AsyncOpenState`).
public enum AsyncOpenState: @unchecked Sendable {
    /// Connecting to the server.
    case connecting
    /// No user is logged in: the open starts when one logs in.
    case waitingForUser
    /// The realm is open.
    case open(Realm)
    /// The server's data is arriving (`fractionCompleted`, `completedUnitCount` of
    /// `totalUnitCount`).
    case progress(Progress)
    /// The realm could not be opened.
    case error(Error)
}

/// Opens a synced realm in the background, waiting for the server's data (Realm's
/// `@AsyncOpen`): `.connecting`, `.progress`, then `.open(realm)` or `.error(error)`; without a
/// logged-in user, `.waitingForUser` until one logs in.
///
/// ```swift
/// let open = AsyncOpen(app: app, configuration: user.flexibleSyncConfiguration(), timeout: 10)
/// if case .open(let realm) = open.state { ... }
/// ```
///
/// When the server cannot be reached in time the state becomes `.error` (a
/// `SyncError(.timeout)` naming the connection's failure); `AutoOpen` opens the device's data
/// instead.
public final class AsyncOpen: Observable, @unchecked Sendable {
    private let registrar = ObservationRegistrar()
    private let driver: OpenDriver

    /// Opens the realm of `configuration` (the current user's flexible sync realm when nil or
    /// when it does not sync; the current user's when its user is logged out), waiting at most
    /// `timeout` seconds for the server (nil: the app's `syncTimeouts.downloadTimeout`).
    public init(app: App, configuration: Realm.Configuration? = nil, timeout: TimeInterval? = nil) {
        driver = OpenDriver(app: app, partition: nil, configuration: configuration, timeout: timeout, offlineFallback: false)
        driver.start { [weak self] in self?.published() }
    }

    /// Opens the current user's partition-sync realm of a partition value.
    public init<P: _PersistableScalar>(app: App, partitionValue: P, configuration: Realm.Configuration? = nil,
                                       timeout: TimeInterval? = nil) {
        driver = OpenDriver(app: app, partition: partitionValue._atollValue, configuration: configuration, timeout: timeout,
                            offlineFallback: false)
        driver.start { [weak self] in self?.published() }
    }

    /// Where the open has got. Reading it inside `withObservationTracking` tracks its changes.
    public var state: AsyncOpenState {
        registrar.access(self, keyPath: \.state)
        return driver.state
    }

    /// Stops waiting: the state becomes `.error` (unless the realm is open already).
    public func cancel() { driver.cancel() }

    private func published() { registrar.withMutation(of: self, keyPath: \.state) {} }
}

/// Opens a synced realm in the background like `AsyncOpen`, but when the server cannot be
/// reached in time (no network, a timeout) opens the data on the device instead, which syncs
/// once the server can be reached (Realm's `@AutoOpen`).
public final class AutoOpen: Observable, @unchecked Sendable {
    private let registrar = ObservationRegistrar()
    private let driver: OpenDriver

    /// Opens the realm of `configuration` (see `AsyncOpen.init(app:configuration:timeout:)`).
    public init(app: App, configuration: Realm.Configuration? = nil, timeout: TimeInterval? = nil) {
        driver = OpenDriver(app: app, partition: nil, configuration: configuration, timeout: timeout, offlineFallback: true)
        driver.start { [weak self] in self?.published() }
    }

    /// Opens the current user's partition-sync realm of a partition value.
    public init<P: _PersistableScalar>(app: App, partitionValue: P, configuration: Realm.Configuration? = nil,
                                       timeout: TimeInterval? = nil) {
        driver = OpenDriver(app: app, partition: partitionValue._atollValue, configuration: configuration, timeout: timeout,
                            offlineFallback: true)
        driver.start { [weak self] in self?.published() }
    }

    /// Where the open has got. Reading it inside `withObservationTracking` tracks its changes.
    public var state: AsyncOpenState {
        registrar.access(self, keyPath: \.state)
        return driver.state
    }

    /// Stops waiting: the state becomes `.error` (unless the realm is open already).
    public func cancel() { driver.cancel() }

    private func published() { registrar.withMutation(of: self, keyPath: \.state) {} }
}

/// What `AsyncOpen` and `AutoOpen` share: choosing the user and configuration, driving the
/// engine's `AsyncOpenTask`, keeping the state.
final class OpenDriver: @unchecked Sendable {
    let app: App
    let partition: Value?
    let configuration: Realm.Configuration?
    let timeout: TimeInterval?
    let offlineFallback: Bool
    private let lock = NSLock()
    private var _state = AsyncOpenState.connecting
    private var task: AsyncOpenTask?
    private var loginObserver: UUID?
    private var finished = false
    private var changed: (@Sendable () -> Void)?

    init(app: App, partition: Value?, configuration: Realm.Configuration?, timeout: TimeInterval?, offlineFallback: Bool) {
        self.app = app
        self.partition = partition
        self.configuration = configuration
        self.timeout = timeout
        self.offlineFallback = offlineFallback
    }

    deinit {
        if let loginObserver { try? app.requireCore().removeLoginObserver(loginObserver) }
    }

    var state: AsyncOpenState { lock.withLock { _state } }

    /// Stores a state, then tells the observers (who read it at once); nothing after the end.
    private func set(_ state: AsyncOpenState) {
        let notify = lock.withLock { () -> (@Sendable () -> Void)? in
            guard !finished else { return nil }
            _state = state
            switch state {
            case .open, .error: finished = true
            default: break
            }
            return changed
        }
        notify?()
    }

    func start(_ changed: @escaping @Sendable () -> Void) {
        lock.withLock { self.changed = changed }
        begin()
    }

    func cancel() {
        let task = lock.withLock { self.task }
        task?.cancel()
        if task == nil { set(.error(SyncError(.timeout, "the open was cancelled"))) }
    }

    /// The user to open for: the configuration's, while logged in, else the current user.
    private func chooseUser() -> User? {
        if let user = configuration?.syncConfiguration?.user, user.isLoggedIn { return user }
        return app.currentUser
    }

    /// The configuration to open for a user: the given one when it syncs for that user, else
    /// the user's realm with the given configuration's classes, schema version and migration.
    private func resolvedConfiguration(for user: User) -> Realm.Configuration {
        if let configuration, let sync = configuration.syncConfiguration, sync.user == user { return configuration }
        let sync = configuration?.syncConfiguration
        var resolved: Realm.Configuration
        if let partition = partition ?? sync?.partition {
            resolved = user.configuration(partition: partition, clientResetMode: sync?.clientResetMode ?? .recoverUnsyncedChanges())
        } else {
            resolved = user.flexibleSyncConfiguration(clientResetMode: sync?.clientResetMode ?? .recoverUnsyncedChanges(),
                                                      initialSubscriptions: sync?.initialSubscriptions, rerunOnOpen: sync?.rerunOnOpen ?? false)
        }
        if let configuration {
            resolved.objectTypes = configuration.objectTypes
            resolved.schemaVersion = configuration.schemaVersion
            resolved.migrationBlock = configuration.migrationBlock
            resolved.deleteRealmIfMigrationNeeded = configuration.deleteRealmIfMigrationNeeded
        }
        return resolved
    }

    private func begin() {
        guard let user = chooseUser() else {
            set(.waitingForUser)
            guard let core = try? app.requireCore() else { return }
            let id = core.observeLogins { [weak self] _ in self?.userLoggedIn() }
            lock.withLock { loginObserver = id }
            return
        }
        let configuration = resolvedConfiguration(for: user)
        let plan: SyncOpenPlan
        do {
            guard let made = try configuration.syncPlan() else {
                set(.open(try Realm(configuration: configuration)))
                return
            }
            plan = made
        } catch {
            set(.error(error))
            return
        }
        set(.connecting)
        let task = AsyncOpenTask(user: plan.sync.user.engine, storeConfiguration: plan.store, sync: plan.engine,
                                 timeout: timeout ?? plan.downloadTimeout, offlineFallback: offlineFallback) { [weak self] state in
            switch state {
            case .connecting:
                self?.set(.connecting)
            case .waitingForUser:
                self?.set(.waitingForUser)
            case let .progress(transferred, transferable, _):
                let progress = Progress(totalUnitCount: Int64(max(transferable, transferred)))
                progress.completedUnitCount = Int64(transferred)
                self?.set(.progress(progress))
            case .open(let engine):
                // The handle is ours now: the lease gives it back if the realm cannot open.
                let lease = SyncLease(adopting: engine, sync: plan.sync)
                guard let self else { return }
                do { self.set(.open(try Realm(configuration: configuration, syncLease: lease))) } catch { self.set(.error(error)) }
            case .error(let error):
                self?.set(.error(error))
            }
        }
        lock.withLock { self.task = task }
    }

    /// A user logged in while the open waited for one: start (once).
    private func userLoggedIn() {
        let observer = lock.withLock { () -> UUID? in
            defer { loginObserver = nil }
            return loginObserver
        }
        guard let observer else { return }
        try? app.requireCore().removeLoginObserver(observer)
        begin()
    }
}
#endif
