// Sync (the package trait `Sync`, on by default): absent from a local-only build.
#if Sync
import AtollProtocol
import AtollStore
import AtollSync
import Foundation

// How a realm syncs (Realm Swift's `SyncConfiguration`, set on `Realm.Configuration`), how a
// synced realm is opened (`Realm(configuration:downloadBeforeOpen:)`), and the session a
// realm holds while it is open (`SyncLease`, released when the realm goes).
//
// Who calls what: `User.flexibleSyncConfiguration(...)` and `User.configuration(partitionValue:)`
// make the configuration; `Realm.init` opens the engine's session through `SyncLease` before
// it opens its own store handle of the file; the engine's blocking waits run on a Dispatch
// thread (`runBlocking`), never on Swift's cooperative pool.

/// Builds the initial subscriptions of a flexible sync realm: `subs.append(...)`.
public typealias FlexibleSyncInitialSubscriptionsBlock = (SyncSubscriptionSet) -> Void

/// What to do when the server cannot resume this device's copy of a realm and its data must
/// start again from the server's (a client reset). Realm's `ClientResetMode`.
///
/// `beforeReset` gets a frozen realm of the data before the reset; `afterReset` gets that frozen
/// realm and the live realm after it. They run on the sync connection's queue.
public enum ClientResetMode: @unchecked Sendable {
    /// Stop the session and report the error (to `errorHandler` and the app's error handler).
    case manual(errorHandler: ((SyncError) -> Void)? = nil)
    /// Drop what was not uploaded and start again from the server's data.
    case discardUnsyncedChanges(beforeReset: ((Realm) -> Void)? = nil, afterReset: ((Realm, Realm) -> Void)? = nil)
    /// Start again from the server's data, then write what was not uploaded again.
    case recoverUnsyncedChanges(beforeReset: ((Realm) -> Void)? = nil, afterReset: ((Realm, Realm) -> Void)? = nil)
    /// Recover; when that fails, discard.
    case recoverOrDiscardUnsyncedChanges(beforeReset: ((Realm) -> Void)? = nil, afterReset: ((Realm, Realm) -> Void)? = nil)

    var engine: AtollSync.ClientResetStrategy {
        switch self {
        case .manual: return .manual
        case .discardUnsyncedChanges: return .discardUnsyncedChanges
        case .recoverUnsyncedChanges: return .recoverUnsyncedChanges
        case .recoverOrDiscardUnsyncedChanges: return .recoverOrDiscardUnsyncedChanges
        }
    }

    var callbacks: (before: ((Realm) -> Void)?, after: ((Realm, Realm) -> Void)?) {
        switch self {
        case .manual: return (nil, nil)
        case let .discardUnsyncedChanges(before, after), let .recoverUnsyncedChanges(before, after),
             let .recoverOrDiscardUnsyncedChanges(before, after):
            return (before, after)
        }
    }
}

/// How a realm syncs: its user, and flexible sync (named queries) or partition sync (one
/// partition value). Made by `User.flexibleSyncConfiguration(...)` or
/// `User.configuration(partitionValue:)`; set on `Realm.Configuration.syncConfiguration`.
public struct SyncConfiguration: @unchecked Sendable {
    /// The user whose realm it is.
    public let user: User
    /// The partition value (partition sync); nil for flexible sync.
    let partition: Value?
    /// What to do on a client reset.
    public var clientResetMode: ClientResetMode
    /// Builds the subscriptions of the first open (and of every open with `rerunOnOpen`).
    public var initialSubscriptions: FlexibleSyncInitialSubscriptionsBlock?
    /// Runs `initialSubscriptions` at every open: its subscriptions replace those of the same
    /// names (for queries that depend on the time or on the user's data).
    public var rerunOnOpen: Bool

    init(user: User, partition: Value?, clientResetMode: ClientResetMode,
         initialSubscriptions: FlexibleSyncInitialSubscriptionsBlock? = nil, rerunOnOpen: Bool = false) {
        self.user = user
        self.partition = partition
        self.clientResetMode = clientResetMode
        self.initialSubscriptions = initialSubscriptions
        self.rerunOnOpen = rerunOnOpen
    }

    /// Whether the realm uses flexible sync (subscriptions) rather than partition sync.
    public var enableFlexibleSync: Bool { partition == nil }

    /// The partition value of a partition-sync realm.
    public var partitionValue: AnyRealmValue? {
        switch partition {
        case nil: return nil
        case .string(let s)?: return .string(s)
        case .int(let i)?: return .int(Int(truncatingIfNeeded: i))
        case .objectId(let o)?: return .objectId(o)
        case .uuid(let u)?: return .uuid(u)
        case .bool(let b)?: return .bool(b)
        case .double(let d)?: return .double(d)
        default: return AnyRealmValue.none
        }
    }

    /// The engine's configuration: the mode, the initial subscriptions built now, the client
    /// reset callbacks wrapped to hand over realms of `local` (the realm's configuration
    /// without sync).
    /// - Throws: the first error of a subscription the block appended (a query that cannot be
    ///   written, a name used twice).
    func engine(local: Realm.Configuration) throws -> AtollSync.ClientSyncConfiguration {
        var c = AtollSync.ClientSyncConfiguration(mode: partition.map { .partition($0) } ?? .flexible)
        if let block = initialSubscriptions {
            let builder = SyncSubscriptionSet(building: ())
            block(builder)
            c.initialSubscriptions = try builder.built()
        }
        c.rerunOnOpen = rerunOnOpen
        c.clientResetMode = clientResetMode.engine
        let (before, after) = clientResetMode.callbacks
        if before != nil || after != nil {
            let callbacks = ClientResetCallbacks(local: local, before: before, after: after)
            c.beforeReset = { _ in callbacks.beforeReset() }
            c.afterReset = { _ in callbacks.afterReset() }
        }
        return c
    }
}

/// The client reset callbacks of one configuration, with the frozen realm of the data before
/// the reset kept between the two.
final class ClientResetCallbacks: @unchecked Sendable {
    let local: Realm.Configuration
    let before: ((Realm) -> Void)?
    let after: ((Realm, Realm) -> Void)?
    private let lock = NSLock()
    private var frozenBefore: Realm?

    init(local: Realm.Configuration, before: ((Realm) -> Void)?, after: ((Realm, Realm) -> Void)?) {
        self.local = local
        self.before = before
        self.after = after
    }

    /// Called by the engine before it replaces the data (not inside a write).
    func beforeReset() {
        // A frozen realm reads a snapshot of the file: it keeps the data as it was.
        guard let frozen = try? Realm(configuration: local).freeze() else { return }
        lock.withLock { frozenBefore = frozen }
        before?(frozen)
    }

    /// Called by the engine once the data is the server's (and recovered writes are written).
    func afterReset() {
        let frozen = lock.withLock { () -> Realm? in
            defer { frozenBefore = nil }
            return frozenBefore
        }
        guard let after, let frozen, let live = try? Realm(configuration: local) else { return }
        after(frozen, live)
    }
}

// MARK: - Configurations from a user

extension User {
    /// The configuration of the user's flexible sync realm (Realm's
    /// `flexibleSyncConfiguration`): its file is `flx_sync_default.realm` in the user's
    /// directory under the app's metadata directory.
    ///
    /// ```swift
    /// var config = user.flexibleSyncConfiguration(initialSubscriptions: { subs in
    ///     subs.append(QuerySubscription<Task>(name: "mine") { $0.owner_id == user.id })
    /// }, rerunOnOpen: true)
    /// config.objectTypes = [Task.self]
    /// let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)
    /// ```
    public func flexibleSyncConfiguration(clientResetMode: ClientResetMode = .recoverUnsyncedChanges(),
                                          initialSubscriptions: FlexibleSyncInitialSubscriptionsBlock? = nil,
                                          rerunOnOpen: Bool = false) -> Realm.Configuration {
        let sync = SyncConfiguration(user: self, partition: nil, clientResetMode: clientResetMode,
                                     initialSubscriptions: initialSubscriptions, rerunOnOpen: rerunOnOpen)
        return Realm.Configuration(fileURL: directory.appendingPathComponent("flx_sync_default.realm"), syncConfiguration: sync)
    }

    /// The configuration of the user's partition-sync realm of a partition value (a string,
    /// an int, an `ObjectId`, a `UUID`): `user.configuration(partitionValue: user.id)`.
    public func configuration<T: _PersistableScalar>(partitionValue: T,
                                                     clientResetMode: ClientResetMode = .recoverUnsyncedChanges()) -> Realm.Configuration {
        configuration(partition: partitionValue._atollValue, clientResetMode: clientResetMode)
    }

    /// The partition-sync configuration of a stored partition value.
    func configuration(partition: Value, clientResetMode: ClientResetMode) -> Realm.Configuration {
        let sync = SyncConfiguration(user: self, partition: partition, clientResetMode: clientResetMode)
        return Realm.Configuration(fileURL: directory.appendingPathComponent(Self.fileName(partition: partition)), syncConfiguration: sync)
    }

    /// The user's directory of synced realms: `<metadata>/atoll-sync/<app id>/<user id>`.
    var directory: URL {
        URL(fileURLWithPath: core.configuration.resolvedMetadataDirectory)
            .appendingPathComponent("atoll-sync").appendingPathComponent(core.id).appendingPathComponent(safeName(id))
    }

    /// A partition's file name: its type and value, with what a file name cannot hold escaped.
    static func fileName(partition: Value) -> String {
        let text: String
        switch partition {
        case .string(let s): text = "s_" + s
        case .int(let i): text = "i_\(i)"
        case .objectId(let o): text = "o_\(o)"
        case .uuid(let u): text = "u_" + u.uuidString
        default: text = "v_" + Wire.encode(partition)
        }
        return safeName(text) + ".realm"
    }
}

/// A string as a file name: letters, digits, `-`, `_` and `.` kept, the rest percent-escaped.
private func safeName(_ s: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-_.")
    let escaped = s.addingPercentEncoding(withAllowedCharacters: allowed) ?? "_"
    return escaped.hasPrefix(".") ? "%2E" + escaped.dropFirst() : escaped
}

// MARK: - Opening synced realms

/// What opening a synced realm needs from the engine, resolved from a `Realm.Configuration`.
struct SyncOpenPlan: @unchecked Sendable {
    let sync: SyncConfiguration
    let store: AtollStore.Configuration
    let engine: AtollSync.ClientSyncConfiguration
    let downloadTimeout: TimeInterval
}

extension Realm.Configuration {
    /// A synced realm's configuration (Realm Swift's, with `syncConfiguration`); a local one is
    /// made with the initialiser without it.
    public init(fileURL: URL? = nil, inMemoryIdentifier: String? = nil, syncConfiguration: SyncConfiguration?, readOnly: Bool = false,
                schemaVersion: UInt64 = 0, migrationBlock: Realm.MigrationBlock? = nil, deleteRealmIfMigrationNeeded: Bool = false,
                shouldCompactOnLaunch: (@Sendable (Int, Int) -> Bool)? = nil, objectTypes: [ObjectBase.Type]? = nil) {
        self.init(fileURL: fileURL, inMemoryIdentifier: inMemoryIdentifier, readOnly: readOnly, schemaVersion: schemaVersion,
                  migrationBlock: migrationBlock, deleteRealmIfMigrationNeeded: deleteRealmIfMigrationNeeded,
                  shouldCompactOnLaunch: shouldCompactOnLaunch, objectTypes: objectTypes)
        self.syncConfiguration = syncConfiguration
    }

    /// Starts the session of a synced realm without waiting for the server: the lease the realm
    /// holds (nil for a local realm).
    func startSync() throws -> AnyObject? {
        try syncPlan().map { try SyncLease.open($0, behavior: .never) }
    }

    /// The sync plan of a configuration that has a sync configuration (nil for a local realm).
    /// - Throws: `AtollError(.invalidArgument)` for an in-memory synced realm, `.file` when the
    ///   realm's directory cannot be made, `SyncError(.authFailed)` for a logged-out user, and
    ///   the errors of the initial subscriptions.
    func syncPlan() throws -> SyncOpenPlan? {
        guard let sync = syncConfiguration else { return nil }
        guard inMemoryIdentifier == nil, let fileURL else {
            throw AtollError(.invalidArgument, "a synced realm is a file: set fileURL, not inMemoryIdentifier")
        }
        guard sync.user.isLoggedIn else { throw SyncError(.authFailed, "user \(sync.user.id) is not logged in") }
        do {
            try FileManager.default.createDirectory(at: fileURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw AtollError(.file, "cannot create the directory of '\(fileURL.path)': \(error.localizedDescription)")
        }
        var local = self
        local.syncConfiguration = nil
        return SyncOpenPlan(sync: sync, store: storeConfiguration, engine: try sync.engine(local: local),
                            downloadTimeout: sync.user.core.configuration.syncTimeouts.downloadTimeout)
    }
}

extension Realm {
    /// The sync session this realm holds (nil for a local realm).
    var lease: SyncLease? { syncLease as? SyncLease }
}

/// The sync session a realm holds while it is open: one handle of the engine's session of the
/// file, given back when the realm goes (the session stops with its last handle).
final class SyncLease: @unchecked Sendable {
    let engine: AtollSync.ClientSession
    /// The session as the realm hands it out (`realm.syncSession`).
    let session: SyncSession
    /// The subscription changes under way on the realm (SyncSubscriptions.swift).
    let editor = SubscriptionEditor()
    private var manualHandlerToken: Int?

    /// Takes over a handle of an engine session that is already open.
    init(adopting engine: AtollSync.ClientSession, sync: SyncConfiguration) {
        self.engine = engine
        session = SyncSession(engine: engine, user: sync.user, configuration: sync)
        if case .manual(let handler?) = sync.clientResetMode {
            let box = UncheckedBox(handler)
            manualHandlerToken = sync.user.core.engine.addErrorHandler { [weak engine] error, session in
                guard error.code == .clientReset, let engine, session === engine else { return }
                box.value(error)
            }
        }
    }

    deinit {
        if let token = manualHandlerToken { session.user.core.engine.removeErrorHandler(token) }
        engine.release()
    }

    /// Opens the engine's session of a plan, waiting for the server's data as `behavior` says
    /// (blocking: call it off the cooperative pool when it waits).
    static func open(_ plan: SyncOpenPlan, behavior: Realm.OpenBehavior, timeout: TimeInterval? = nil) throws -> SyncLease {
        let engine = try AtollSync.ClientSession.openRealm(
            user: plan.sync.user.engine, storeConfiguration: plan.store, sync: plan.engine,
            options: OpenOptions(downloadBeforeOpen: behavior, timeout: timeout ?? plan.downloadTimeout))
        return SyncLease(adopting: engine, sync: plan.sync)
    }
}

/// A value that crosses threads where the compiler cannot see that it may (a user's callback
/// stored in an `@unchecked Sendable` configuration).
final class UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Runs a blocking call (the engine's waits) on a Dispatch thread and resumes when it ends, so
/// that `async` callers never block a thread of Swift's cooperative pool.
///
/// The result travels in a box that the caller empties: the Dispatch thread keeps no copy of
/// it, so that a result whose release matters (a `SyncLease`: releasing it stops the session)
/// lives exactly as long as the caller keeps it.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let box = HandOver<T>()
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            box.put(Result { try body() })
            continuation.resume()
        }
    }
    return try box.take()
}

/// A result handed from one thread to another: `take` leaves nothing behind.
private final class HandOver<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<T, Error>?

    func put(_ result: Result<T, Error>) { lock.withLock { self.result = result } }

    func take() throws -> T {
        let taken = lock.withLock { () -> Result<T, Error>? in
            defer { result = nil }
            return result
        }
        guard let taken else { throw AtollError(.internal, "a blocking call ended without a result") }
        return try taken.get()
    }
}

extension Realm {
    /// When opening a synced realm waits for the server's data: `.never`, `.once` (the first
    /// time the file is opened), `.always` (a background refresh: every time).
    public typealias OpenBehavior = DownloadBeforeOpen

    /// Opens a realm; a synced realm first waits for the server's data as `downloadBeforeOpen`
    /// says (at most `syncTimeouts.downloadTimeout` of the user's app), without blocking a
    /// thread of the cooperative pool.
    ///
    /// ```swift
    /// let realm = try await Realm(configuration: user.flexibleSyncConfiguration(), downloadBeforeOpen: .always)
    /// ```
    /// - Throws: `SyncError(.timeout)` when the download did not end in time,
    ///   `SyncError(.authFailed)` for a logged-out user, the session's fatal errors, and the
    ///   errors of `Realm(configuration:)`.
    public convenience init(configuration: Configuration = .defaultConfiguration, downloadBeforeOpen: OpenBehavior) async throws {
        let lease: SyncLease?
        if let plan = try configuration.syncPlan() {
            lease = try await runBlocking { try SyncLease.open(plan, behavior: downloadBeforeOpen) }
        } else {
            lease = nil
        }
        try self.init(configuration: configuration, syncLease: lease)
    }

    /// The sync session of a synced realm (nil for a local realm).
    public var syncSession: SyncSession? {
        guard let session = thaw().lease?.session else { return nil }
        session.bind(thaw())
        return session
    }

    /// Writes a copy of a synced realm to a local file, or of any realm to a new synced realm
    /// (whose session uploads the objects when it opens): the objects of classes with a
    /// primary key are created anew in the copy. Returns false when neither realm syncs.
    func writeSyncedCopy(configuration: Configuration) throws -> Bool {
        if configuration.syncConfiguration != nil {
            guard configuration.inMemoryIdentifier == nil, let fileURL = configuration.fileURL else {
                throw AtollError(.invalidArgument, "writeCopy: a synced realm is a file: set fileURL")
            }
            try? FileManager.default.createDirectory(at: fileURL.deletingLastPathComponent(), withIntermediateDirectories: true)
            try SyncCopy.copy(from: store, toSynced: configuration.storeConfiguration)
            return true
        }
        if self.configuration.syncConfiguration != nil {
            try SyncCopy.copy(from: store, toLocal: configuration.storeConfiguration)
            return true
        }
        return false
    }
}
#endif
