// Sync (the package trait `Sync`, on by default): absent from a local-only build.
#if Sync
import AtollProtocol
import AtollStore
import AtollSync
import Foundation

// Flexible sync's subscriptions (Realm Swift's `QuerySubscription<T>`, `SyncSubscriptionSet`,
// `Results.subscribe`): which objects of the server a realm holds. A typed subscription's query
// is written by the same writer as `Results.where` (Query.swift): the Realm Query Language
// text with `$0…` arguments, which is what the engine sends to the server.
//
// Who calls what: the user's code changes a realm's set inside `update { }`; the change runs
// inside the engine's write of a new subscription version (`AtollSync.ClientSession.updateSubscriptions`),
// so that it sees the newest version and nothing half-done is kept; `update` then waits for
// the server's bootstrap of that version on a Dispatch thread.

/// One query of a flexible sync realm's subscriptions, on a class (Realm's `QuerySubscription`).
///
/// ```swift
/// QuerySubscription<Task>(name: "mine") { $0.owner_id == user.id && $0.priority > 5 }
/// QuerySubscription<Task>(name: "urgent", where: "priority > $0", 8)
/// QuerySubscription<Task>()                                  // every Task
/// ```
///
/// A query that cannot be written (an object that is not in a realm) makes the `update` that
/// appends it throw.
public struct QuerySubscription<T: Object> {
    /// A typed query on the class, as in `Results.where`.
    public typealias QueryFunction = (Query<T>) -> Query<Bool>

    /// The subscription's name; nil for an unnamed one (found by its query).
    public let name: String?
    /// The Realm Query Language text of the query, with `$0…` in place of the values.
    public let queryString: String
    let arguments: [Value]
    let failure: AtollError?

    /// A subscription to the objects of `T` that match a typed query (every object without one).
    public init(name: String? = nil, query: QueryFunction? = nil) {
        guard let query else {
            self.init(name: name, where: "TRUEPREDICATE", arguments: [])
            return
        }
        self.init(name: name, building: query)
    }

    /// A subscription of a typed query (which does not escape).
    init(name: String?, building query: QueryFunction) {
        self.name = name.flatMap { $0.isEmpty ? nil : $0 }
        do {
            var writer = PredicateWriter()
            try writer.predicate(query(Query<T>(.keyPath(QueryKeyPath()))).node)
            (queryString, arguments, failure) = (writer.text, try writer.arguments.map(subscriptionArgument), nil)
        } catch {
            (queryString, arguments, failure) = ("FALSEPREDICATE", [], error as? AtollError ?? AtollError(.queryInvalid, "\(error)"))
        }
    }

    /// A subscription to the objects of `T` that match a Realm Query Language predicate with
    /// `$0…` arguments.
    public init(name: String? = nil, where predicateFormat: String, _ args: Any...) {
        self.init(name: name, where: predicateFormat, arguments: args)
    }

    /// A subscription of a predicate with its arguments in an array.
    init(name: String?, where predicateFormat: String, arguments args: [Any]) {
        self.name = name.flatMap { $0.isEmpty ? nil : $0 }
        queryString = predicateFormat
        do {
            (arguments, failure) = (try args.map(subscriptionArgument), nil)
        } catch {
            (arguments, failure) = ([], error as? AtollError ?? AtollError(.queryInvalid, "\(error)"))
        }
    }

    /// The class's name in the schema.
    public var className: String { ObjectClass.of(T.self).name }

    /// The engine's subscription.
    /// - Throws: the error of a query that could not be written.
    func engine() throws -> AtollProtocol.SubscriptionQuery {
        if let failure { throw failure }
        return AtollProtocol.SubscriptionQuery(name: name ?? "", className: className, query: queryString, arguments: arguments)
    }
}

/// A subscription query's value as an argument: objects of a realm by their reference, enums
/// by their raw value, arrays as lists.
/// - Throws: `.queryInvalid` for an object that is not in a realm.
func subscriptionArgument(_ any: Any) throws -> Value {
    if isNil(any) { return .null }
    if let object = any as? ObjectBase {
        guard let accessor = object._accessor, accessor.currentKey != nil else {
            throw AtollError(.queryInvalid, "a '\(type(of: object).className())' in a subscription must be an object of a realm")
        }
        return accessor.realm.queryArgument(object)
    }
    if let list = any as? [Any] { return .list(try list.map(subscriptionArgument)) }
    if let scalar = any as? _PersistableScalar { return scalar._atollValue }
    if let e = any as? any RawRepresentable { return try subscriptionArgument(e.rawValue) }
    if let value = any as? Value { return value }
    return untypedStoredValue(any)
}

/// A subscription of a realm's set, as it is stored (Realm's `SyncSubscription`).
public final class SyncSubscription: @unchecked Sendable, CustomStringConvertible {
    /// The name; nil for an unnamed subscription.
    public let name: String?
    /// The class whose objects it selects.
    public let objectClassName: String
    /// The query's Realm Query Language text, with `$0…` in place of the values.
    public let queryString: String
    let engine: AtollProtocol.SubscriptionQuery
    private weak var set: SyncSubscriptionSet?

    init(_ engine: AtollProtocol.SubscriptionQuery, set: SyncSubscriptionSet) {
        self.engine = engine
        name = engine.name.isEmpty ? nil : engine.name
        objectClassName = engine.className
        queryString = engine.query
        self.set = set
    }

    /// Changes the subscription's query (inside `subscriptions.update { }`).
    public func updateQuery<T: Object>(toType type: T.Type, where query: (Query<T>) -> Query<Bool>) {
        replace(with: QuerySubscription<T>(name: name, building: query))
    }

    /// Changes the subscription's query to a Realm Query Language predicate (inside
    /// `subscriptions.update { }`).
    public func updateQuery<T: Object>(toType type: T.Type, where predicateFormat: String, _ args: Any...) {
        replace(with: QuerySubscription<T>(name: name, where: predicateFormat, arguments: args))
    }

    private func replace<T>(with subscription: QuerySubscription<T>) {
        let old = engine
        set?.mutate("updateQuery") { list in
            guard let i = list.firstIndex(of: old) else {
                throw AtollError(.notFound, "the subscription '\(name ?? queryString)' is no longer in the set")
            }
            list[i] = try subscription.engine()
        }
    }

    public var description: String { "SyncSubscription(\(name ?? "unnamed"): \(objectClassName) where \(queryString))" }
}

/// The state of a realm's newest subscription set.
public enum SyncSubscriptionState: Sendable, Equatable {
    /// Not yet sent to, or not yet answered by, the server.
    case pending
    /// The server is sending the objects of the new set.
    case bootstrapping
    /// The realm holds the objects of the set.
    case complete
    /// The server refused the set (`SyncError(.invalidFlexibleSyncSubscriptions)` with its
    /// reason); the previous set stays in force.
    case error(Error)
    /// A newer set replaced it.
    case superseded

    /// States are equal when their cases are (errors by their description).
    public static func == (a: SyncSubscriptionState, b: SyncSubscriptionState) -> Bool {
        switch (a, b) {
        case (.pending, .pending), (.bootstrapping, .bootstrapping), (.complete, .complete), (.superseded, .superseded): return true
        case let (.error(x), .error(y)): return "\(x)" == "\(y)"
        default: return false
        }
    }
}

/// How long `Results.subscribe` waits for the server.
public enum WaitForSyncMode: Sendable, Hashable {
    /// Wait when the call creates (or changes) the subscription.
    case onCreation
    /// Wait every time: for the subscription, then for the server's newest data.
    case always
    /// Never wait: the objects arrive in the background.
    case never
}

/// The changes of a subscription set under way (one per realm, so that every
/// `realm.subscriptions` value of the realm sees the same update).
final class SubscriptionEditor: @unchecked Sendable {
    let lock = NSRecursiveLock()
    var pending: [AtollProtocol.SubscriptionQuery]?
    var error: Error?
}

/// The subscriptions of a flexible sync realm (Realm's `SyncSubscriptionSet`): a collection of
/// `SyncSubscription`s, changed inside `update { }`.
///
/// ```swift
/// let subs = realm.subscriptions
/// try await subs.update {
///     subs.append(QuerySubscription<Task>(name: "high") { $0.priority > 5 })
///     subs.remove(named: "mine")
/// }
/// subs.first(named: "high")?.queryString           // "priority > $0"
/// ```
///
/// Changes outside `update` change nothing and leave an error in `realm.lastError`; inside it,
/// a change that fails (appending a name that is in the set) makes `update` throw, and the set
/// stays as it was.
public final class SyncSubscriptionSet: @unchecked Sendable, RandomAccessCollection {
    /// The realm; nil for the set an `initialSubscriptions` block builds.
    let realm: Realm?
    private let editor: SubscriptionEditor

    init(realm: Realm) {
        self.realm = realm
        editor = realm.thaw().lease?.editor ?? SubscriptionEditor()
    }

    /// The set an `initialSubscriptions` block fills (changed directly, without `update`).
    init(building: Void) {
        realm = nil
        editor = SubscriptionEditor()
        editor.pending = []
    }

    /// The subscriptions an `initialSubscriptions` block appended.
    /// - Throws: the first change that failed.
    func built() throws -> [AtollProtocol.SubscriptionQuery] {
        editor.lock.lock()
        defer { editor.lock.unlock() }
        if let error = editor.error { throw error }
        return editor.pending ?? []
    }

    /// The engine's session of a flexible sync realm.
    /// - Throws: `.invalidArgument` for a local or partition-sync realm.
    func flexibleEngine() throws -> AtollSync.ClientSession {
        guard let realm else { throw AtollError(.invalidArgument, "the initial subscriptions change without update { }") }
        guard let engine = realm.thaw().lease?.engine, realm.configuration.syncConfiguration?.enableFlexibleSync == true else {
            throw AtollError(.invalidArgument, "the realm does not use flexible sync: it has no subscriptions")
        }
        return engine
    }

    /// The newest stored set (empty for a realm without flexible sync).
    private var stored: (version: Int64, state: String, error: String?, subscriptions: [AtollProtocol.SubscriptionQuery]) {
        guard let engine = try? flexibleEngine() else { return (0, "complete", nil, []) }
        do { return try engine.subscriptions() } catch {
            realm?.report(error, failsWrite: false)
            return (0, "complete", nil, [])
        }
    }

    /// The subscriptions: those being changed inside `update`, else the newest stored set.
    private var current: [AtollProtocol.SubscriptionQuery] {
        editor.lock.lock()
        defer { editor.lock.unlock() }
        return editor.pending ?? stored.subscriptions
    }

    // MARK: - Reading

    public var startIndex: Int { 0 }
    public var endIndex: Int { current.count }
    public subscript(position: Int) -> SyncSubscription { SyncSubscription(current[position], set: self) }
    /// Iterates the subscriptions as they are when the iteration starts.
    public func makeIterator() -> IndexingIterator<[SyncSubscription]> { current.map { SyncSubscription($0, set: self) }.makeIterator() }

    /// The subscription of a name, or nil.
    public func first(named name: String) -> SyncSubscription? {
        current.first { $0.name == name && !name.isEmpty }.map { SyncSubscription($0, set: self) }
    }

    /// The first subscription on a class with the same query as a typed query, or nil.
    public func first<T: Object>(ofType type: T.Type, where query: (Query<T>) -> Query<Bool>) -> SyncSubscription? {
        let wanted = QuerySubscription<T>(name: nil, building: query)
        return current.first { $0.className == wanted.className && $0.query == wanted.queryString && $0.arguments == wanted.arguments }
            .map { SyncSubscription($0, set: self) }
    }

    /// The version of the newest stored set (0 before the first).
    public var version: Int { Int(stored.version) }

    /// The state of the newest stored set.
    public var state: SyncSubscriptionState {
        let s = stored
        switch s.state {
        case "pending": return .pending
        case "bootstrapping": return .bootstrapping
        case "superseded": return .superseded
        case "error": return .error(SyncError(.invalidFlexibleSyncSubscriptions, s.error ?? "the server refused the subscriptions"))
        default: return .complete
        }
    }

    // MARK: - Changing

    /// Changes the set in `block` (with `append`, `remove`…), then waits until the server has
    /// sent the objects of the new set (at most the app's `syncTimeouts.downloadTimeout`), and
    /// moves the realm to them. A block that changes nothing makes no new version and does not
    /// wait.
    /// - Throws: the first change of the block that failed (`.subscriptionExists`,
    ///   `.queryInvalid`: nothing is changed), `.invalidArgument` for a realm without flexible
    ///   sync, `SyncError(.invalidFlexibleSyncSubscriptions)` with the server's reason,
    ///   `SyncError(.timeout)`.
    public func update(_ block: () -> Void) async throws {
        let engine = try flexibleEngine()
        guard let version = try commit(engine, block) else { return }
        try await wait(engine, version: version, timeout: nil, download: false)
    }

    /// Changes the set in `block`, then calls `onComplete` (on a Dispatch thread) when the server
    /// has sent the objects of the new set (the realm has moved to them), or with the error.
    public func update(_ block: () -> Void, onComplete: (@Sendable (Error?) -> Void)? = nil) {
        do {
            let engine = try flexibleEngine()
            guard let version = try commit(engine, block) else {
                DispatchQueue.global().async { onComplete?(nil) }
                return
            }
            let timeout = downloadTimeout
            let realm = self.realm
            DispatchQueue.global().async {
                do {
                    try engine.waitForSubscriptions(version: version, timeout: timeout)
                    if let realm, !realm.isInWriteTransaction { realm.refresh() }
                    onComplete?(nil)
                } catch { onComplete?(error) }
            }
        } catch {
            DispatchQueue.global().async { onComplete?(error) }
        }
    }

    /// Runs a user's block of changes inside the engine's write of a new version.
    /// - Returns: the new version, or nil when the block changed nothing.
    private func commit(_ engine: AtollSync.ClientSession, _ block: () -> Void) throws -> Int64? {
        editor.lock.lock()
        defer { editor.lock.unlock() }
        guard editor.pending == nil else { throw AtollError(.alreadyInWrite, "subscriptions.update is running already") }
        return try commit(engine) { list in
            editor.pending = list
            editor.error = nil
            defer {
                editor.pending = nil
                editor.error = nil
            }
            block()
            if let error = editor.error { throw error }
            list = editor.pending ?? list
        }
    }

    /// Writes a new version of the set changed by `change`, unless it changed nothing.
    /// - Returns: the new version, or nil.
    func commit(_ engine: AtollSync.ClientSession, _ change: (inout [AtollProtocol.SubscriptionQuery]) throws -> Void) throws -> Int64? {
        struct Unchanged: Error {}
        do {
            // `change` runs inside the engine's write of the new version.
            return try engine.updateSubscriptions { set in
                var list = set
                try change(&list)
                // Throwing cancels the engine's write: no version for a set that is the same.
                if list == set { throw Unchanged() }
                set = list
            }
        } catch is Unchanged {
            return nil
        }
    }

    /// Waits (on a Dispatch thread) for a version, and with `download` for the server's newest
    /// data, then moves the realm to it.
    func wait(_ engine: AtollSync.ClientSession, version: Int64, timeout: TimeInterval?, download: Bool) async throws {
        let seconds = timeout ?? downloadTimeout
        try await runBlocking {
            let start = Date()
            try engine.waitForSubscriptions(version: version, timeout: seconds)
            if download { try engine.waitForDownload(timeout: Swift.max(0.1, seconds - Date().timeIntervalSince(start))) }
        }
        if let realm, !realm.isInWriteTransaction { realm.refresh() }
    }

    private var downloadTimeout: TimeInterval {
        realm?.configuration.syncConfiguration?.user.core.configuration.syncTimeouts.downloadTimeout ?? 60
    }

    /// Applies a change to the set being updated; outside `update`, reports an error instead.
    func mutate(_ what: String, _ change: (inout [AtollProtocol.SubscriptionQuery]) throws -> Void) {
        editor.lock.lock()
        defer { editor.lock.unlock() }
        guard var list = editor.pending else {
            realm?.report(AtollError(.invalidArgument, "\(what): subscriptions change only inside subscriptions.update { }"), failsWrite: false)
            return
        }
        guard editor.error == nil else { return }
        do {
            try change(&list)
            editor.pending = list
        } catch {
            editor.error = error
        }
    }

    /// Adds subscriptions (inside `update`). An unnamed subscription whose query is in the set
    /// already is not added again.
    /// - Errors (thrown by `update`): `.subscriptionExists` for a name that is in the set (change
    ///   its query with `updateQuery(toType:where:)`), the error of a query that could not be
    ///   written.
    public func append<T: Object>(_ subscriptions: QuerySubscription<T>...) {
        for subscription in subscriptions { add(subscription) }
    }

    /// Adds each subscription of a sequence (see `append(_:)`).
    public func append<T: Object, S: Sequence>(contentsOf subscriptions: S) where S.Element == QuerySubscription<T> {
        for subscription in subscriptions { add(subscription) }
    }

    private func add<T: Object>(_ subscription: QuerySubscription<T>) {
        mutate("append") { list in
            let new = try subscription.engine()
            if let name = subscription.name {
                if list.contains(where: { $0.name == name }) {
                    throw AtollError(.subscriptionExists, "a subscription named '\(name)' exists already (change its query with updateQuery(toType:where:), or remove it first)")
                }
            } else if list.contains(where: { $0.name.isEmpty && $0.className == new.className && $0.query == new.query && $0.arguments == new.arguments }) {
                return
            }
            list.append(new)
        }
    }

    /// Removes the subscription of a name (inside `update`).
    /// - Errors (thrown by `update`): `.notFound` when there is none.
    public func remove(named name: String) {
        mutate("remove(named:)") { list in
            guard let i = list.firstIndex(where: { $0.name == name && !name.isEmpty }) else {
                throw AtollError(.notFound, "there is no subscription named '\(name)'")
            }
            list.remove(at: i)
        }
    }

    /// Removes subscriptions of the set (inside `update`).
    public func remove(_ subscriptions: SyncSubscription...) {
        mutate("remove") { list in list.removeAll { s in subscriptions.contains { $0.engine == s } } }
    }

    /// Removes the subscriptions with the same class and query as these (inside `update`).
    public func remove<T: Object>(_ subscriptions: QuerySubscription<T>...) {
        mutate("remove") { list in
            for subscription in subscriptions {
                let old = try subscription.engine()
                list.removeAll { $0.className == old.className && $0.query == old.query && $0.arguments == old.arguments }
            }
        }
    }

    /// Removes every subscription on a class (inside `update`).
    public func removeAll<T: Object>(ofType type: T.Type) {
        let name = ObjectClass.of(type).name
        mutate("removeAll(ofType:)") { list in list.removeAll { $0.className == name } }
    }

    /// Removes every subscription, or every unnamed one (inside `update`).
    public func removeAll(unnamedOnly: Bool = false) {
        mutate("removeAll") { list in list.removeAll { !unnamedOnly || $0.name.isEmpty } }
    }
}

extension Realm {
    /// The subscriptions of a flexible sync realm (an empty set that cannot be updated for
    /// other realms).
    public var subscriptions: SyncSubscriptionSet { SyncSubscriptionSet(realm: self) }
}

// MARK: - Subscribing to results

extension ResultsQuery {
    /// The predicates as one subscription query: sorting, distinct and limits are left out
    /// (the server keeps objects by predicate; the results still apply them).
    /// - Throws: the error of a typed query that could not be written.
    func subscriptionQuery() throws -> (String, [Value]) {
        if let failure { throw failure }
        guard !predicates.isEmpty else { return ("TRUEPREDICATE", []) }
        var parts = [String]()
        var arguments = [Value]()
        for (query, args) in predicates {
            let predicate = (try? Store.splitDescriptors(query))?.0 ?? query
            let trimmed = predicate.trimmingCharacters(in: .whitespaces)
            parts.append("(" + renumber(trimmed.isEmpty ? "TRUEPREDICATE" : trimmed, by: arguments.count) + ")")
            arguments += args
        }
        return (parts.count == 1 ? String(parts[0].dropFirst().dropLast()) : parts.joined(separator: " AND "), arguments)
    }
}

extension Results where Element: Object {
    /// Subscribes to the results' query (Realm's `subscribe(name:waitForSync:timeout:)`) and
    /// returns the results. A subscription of the same name is changed to this query; an
    /// unnamed one whose query is subscribed already is not added again.
    ///
    /// ```swift
    /// let high = try await realm.objects(Task.self).where { $0.priority > 5 }.subscribe(name: "high", waitForSync: .always)
    /// ```
    /// - Parameters:
    ///   - waitForSync: `.onCreation` waits when the subscription is new or changed, `.always`
    ///     every time (and for the server's newest data), `.never` not at all.
    ///   - timeout: seconds; nil: the app's `syncTimeouts.downloadTimeout`.
    /// - Throws: `.invalidArgument` for a realm without flexible sync, the query's error,
    ///   `SyncError(.invalidFlexibleSyncSubscriptions)`, `SyncError(.timeout)`.
    public func subscribe(name: String? = nil, waitForSync: WaitForSyncMode = .onCreation,
                          timeout: TimeInterval? = nil) async throws -> Results<Element> {
        guard let realm else { throw AtollError(.closed, "the results have no realm") }
        let set = realm.subscriptions
        let engine = try set.flexibleEngine()
        let (text, arguments) = try query.subscriptionQuery()
        let name = name.flatMap { $0.isEmpty ? nil : $0 }
        let subscription = AtollProtocol.SubscriptionQuery(name: name ?? "", className: ObjectClass.of(Element.self).name,
                                                       query: text, arguments: arguments)
        let version = try set.commit(engine) { list in
            if let name {
                if let i = list.firstIndex(where: { $0.name == name }) { list[i] = subscription } else { list.append(subscription) }
            } else if !list.contains(subscription) {
                list.append(subscription)
            }
        }
        switch waitForSync {
        case .never:
            break
        case .onCreation:
            if let version { try await set.wait(engine, version: version, timeout: timeout, download: false) }
        case .always:
            let newest = try version ?? engine.subscriptions().version
            try await set.wait(engine, version: newest, timeout: timeout, download: true)
        }
        return self
    }

    /// Removes the subscriptions with the results' query (made by `subscribe`), without
    /// waiting. Errors go to `realm.lastError`.
    public func unsubscribe() {
        guard let realm else { return }
        do {
            let set = realm.subscriptions
            let engine = try set.flexibleEngine()
            let (text, arguments) = try query.subscriptionQuery()
            let className = ObjectClass.of(Element.self).name
            _ = try set.commit(engine) { list in
                list.removeAll { $0.className == className && $0.query == text && $0.arguments == arguments }
            }
        } catch {
            realm.report(error, failsWrite: false)
        }
    }
}
#endif
