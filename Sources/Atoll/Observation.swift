import AtollStore
import Dispatch
import Foundation

// Change notifications for objects, results, collections and realms, in Realm Swift's shapes.
//
// Thread model: a realm's changes are computed and delivered on its notifier thread (the
// store's, see docs/notifications.md), after each commit of this or another realm or process;
// with `on: queue`, the block runs on that dispatch queue instead. Blocks get live results and
// objects, whose reads are safe from that thread. Observers are registered outside write
// transactions; the token's `invalidate()` (or releasing the token) stops them.

/// Keeps an observation alive; `invalidate()` stops it.
public typealias NotificationToken = AtollStore.NotificationToken

/// How a collection (results, a list, a set) changed, as Realm Swift reports it: the initial
/// state, then each update's deleted indices (in the old collection), inserted and modified
/// indices (in the new one); or an error, after which nothing more is reported.
public enum RealmCollectionChange<CollectionType> {
    case initial(CollectionType)
    case update(CollectionType, deletions: [Int], insertions: [Int], modifications: [Int])
    case error(Error)
}

// The changes carry live results and objects to the notifier thread (or a queue): safe, since
// the typed layer's caches are locked and the store serializes its calls.
extension RealmCollectionChange: @unchecked Sendable {}
extension RealmMapChange: @unchecked Sendable {}
extension ObjectChange: @unchecked Sendable {}
extension PropertyChange: @unchecked Sendable {}

/// How a map changed: by key.
public enum RealmMapChange<Collection> {
    case initial(Collection)
    case update(Collection, deletions: [String], insertions: [String], modifications: [String])
    case error(Error)
}

/// How an object changed: which properties, with their old and new values; or its deletion
/// (the last report); or an error.
public enum ObjectChange<T> {
    case error(Error)
    case change(T, [PropertyChange])
    case deleted
}

/// One changed property of an object, with its value before and after (Swift values:
/// `String`, `Int`…, links as the target's primary key).
public struct PropertyChange {
    public let name: String
    public let oldValue: Any?
    public let newValue: Any?
}

/// Moves a non-`Sendable` value to the notifier thread, which the store's callbacks run on.
/// Safe here: the typed layer's caches are locked and the store serializes its calls.
struct Unchecked<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Runs `block` with `argument` now, or on `queue` when given.
private func deliver<A>(_ block: Unchecked<(A) -> Void>, _ argument: A, on queue: DispatchQueue?) {
    guard let queue else { return block.value(argument) }
    let boxed = Unchecked(argument)
    queue.async { block.value(boxed.value) }
}

/// An observer's changes as an asynchronous sequence: `observe` registers it at once (so that
/// what is committed after the sequence is made is in it); the sequence ends after a change
/// for which `endsAfter` holds, and the observer stops when the iteration ends.
private func changeStream<C: Sendable>(_ observe: (@escaping (C) -> Void) -> NotificationToken,
                                       endsAfter: @escaping (C) -> Bool) -> AsyncStream<C> {
    AsyncStream { continuation in
        let token = observe { change in
            continuation.yield(change)
            if endsAfter(change) { continuation.finish() }
        }
        let held = Unchecked(token)
        continuation.onTermination = { _ in held.value.invalidate() }
    }
}

extension RealmCollectionChange {
    var isError: Bool {
        if case .error = self { return true }
        return false
    }
}

/// A token whose observation failed to register: its error was reported to the block.
private func failedToken() -> NotificationToken {
    let token = NotificationToken()
    token.invalidate()
    return token
}

// MARK: - Results

extension Results {
    /// Calls `block` with the initial results, then after each change of them (of what
    /// `keyPaths` names, when given: `["name", "owner.name"]`).
    ///
    /// ```swift
    /// let token = realm.objects(Dog.self).observe { change in
    ///     switch change {
    ///     case .initial(let dogs): print(dogs.count)
    ///     case .update(_, let deletions, let insertions, let modifications): ...
    ///     case .error(let error): print(error)
    ///     }
    /// }
    /// ```
    public func observe(keyPaths: [String]? = nil, on queue: DispatchQueue? = nil,
                        _ block: @escaping (RealmCollectionChange<Results<Element>>) -> Void) -> NotificationToken {
        let box = Unchecked(block)
        guard let realm else { return failedToken() }
        let mine = Results(realm: realm, query: query)
        let handler = Unchecked({ (change: ResultsChange) in deliver(box, Results.collectionChange(change, mine), on: queue) })
        do {
            return try storeResults().observe(keyPaths: keyPaths) { handler.value($0) }
        } catch {
            deliver(box, .error(error), on: queue)
            return failedToken()
        }
    }

    static func collectionChange<C>(_ change: ResultsChange, _ collection: C) -> RealmCollectionChange<C> {
        if let error = change.error { return .error(error) }
        if change.initial { return .initial(collection) }
        return .update(collection, deletions: change.deletions, insertions: change.insertions, modifications: change.modifications)
    }

    /// The results' changes as an asynchronous sequence: the initial state, then each update;
    /// it ends after an error, or when the iteration ends.
    public func changes(keyPaths: [String]? = nil) -> AsyncStream<RealmCollectionChange<Results<Element>>> {
        changeStream({ observe(keyPaths: keyPaths, $0) }, endsAfter: { $0.isError })
    }
}

extension Results where Element: ObjectBase {
    /// Observes with Swift key paths: `observe(keyPaths: [\Dog.name])`.
    public func observe(keyPaths: [PartialKeyPath<Element>], on queue: DispatchQueue? = nil,
                        _ block: @escaping (RealmCollectionChange<Results<Element>>) -> Void) -> NotificationToken {
        observe(keyPaths: keyPaths.map { KeyPathRecorder.name(ofPartial: $0) }, on: queue, block)
    }
}

extension Results: @unchecked Sendable {}

// MARK: - Objects

extension ObjectBase {
    /// Calls `block` after each change of the object (of what `keyPaths` names, when given),
    /// and once when it is deleted. No initial call, as in Realm.
    func observeObject<T: ObjectBase>(_ object: T, keyPaths: [String]?, on queue: DispatchQueue?,
                                      _ block: @escaping (ObjectChange<T>) -> Void) -> NotificationToken {
        let box = Unchecked(block)
        do {
            guard let accessor = _accessor else {
                throw AtollError(.invalidArgument, "only managed objects can be observed; add the object to a realm first")
            }
            guard !objectClass.isEmbedded else {
                throw AtollError(.invalidArgument, "an embedded object is observed through its owner: observe the owner with key paths through it")
            }
            let handler = Unchecked({ (change: AtollStore.ObjectChange) in
                let typed: ObjectChange<T>
                if let error = change.error {
                    typed = .error(error)
                } else if change.deleted {
                    typed = .deleted
                } else {
                    typed = .change(object, change.changedProperties.map {
                        PropertyChange(name: $0, oldValue: change.old[$0].flatMap(swiftValue), newValue: change.new[$0].flatMap(swiftValue))
                    })
                }
                deliver(box, typed, on: queue)
            })
            return try accessor.realm.store.observeObject(objectClass.name, primaryKey: try accessor.reference(), keyPaths: keyPaths) {
                handler.value($0)
            }
        } catch {
            deliver(box, .error(error), on: queue)
            return failedToken()
        }
    }
}

extension ObjectBase {
    /// Calls `block` after each change of the object (of the properties `keyPaths` names,
    /// when given: `["name", "owner.name"]`), and with `.deleted` when it is deleted.
    public func observe<T: ObjectBase>(keyPaths: [String]? = nil, on queue: DispatchQueue? = nil,
                                       _ block: @escaping (ObjectChange<T>) -> Void) -> NotificationToken {
        guard let me = self as? T else {
            block(.error(AtollError(.invalidArgument, "observe: the object is not a \(T.self)")))
            return failedToken()
        }
        return observeObject(me, keyPaths: keyPaths, on: queue, block)
    }
}

extension Object {
    /// Observes with Swift key paths: `dog.observe(keyPaths: [\Dog.name]) { change in … }`.
    public func observe<T: Object>(keyPaths: [PartialKeyPath<T>], on queue: DispatchQueue? = nil,
                                   _ block: @escaping (ObjectChange<T>) -> Void) -> NotificationToken {
        observe(keyPaths: keyPaths.map { KeyPathRecorder.name(ofPartial: $0) }, on: queue, block)
    }

    /// The object's changes as an asynchronous sequence; it ends after the deletion or an error.
    public func changes<T: Object>(keyPaths: [String]? = nil) -> AsyncStream<ObjectChange<T>> {
        changeStream({ observe(keyPaths: keyPaths, $0) }, endsAfter: { (change: ObjectChange<T>) in
            if case .change = change { return false }
            return true
        })
    }
}

// MARK: - Collections

extension CollectionBinding {
    /// Observes the owner's collection property; `make` turns each change into the block's.
    func observe<C>(keyPaths: [String]?, on queue: DispatchQueue?, _ block: @escaping (C) -> Void,
                    failure: (Error) -> C, _ make: @escaping (CollectionChange) -> C) -> NotificationToken {
        let box = Unchecked(block)
        let handler = Unchecked({ (change: CollectionChange) in deliver(box, make(change), on: queue) })
        do {
            return try realm.store.observeCollection(owner.cls.name, primaryKey: try owner.reference(), property: property.name,
                                                     keyPaths: keyPaths) { handler.value($0) }
        } catch {
            deliver(box, failure(error), on: queue)
            return failedToken()
        }
    }
}

private func listChange<C>(_ change: CollectionChange, _ collection: C) -> RealmCollectionChange<C> {
    if let error = change.error { return .error(error) }
    if change.initial { return .initial(collection) }
    return .update(collection, deletions: change.deletions, insertions: change.insertions, modifications: change.modifications)
}

extension List {
    /// Calls `block` with the list's initial state, then after each change of its elements
    /// (or of what `keyPaths` names on the objects it holds). Only managed lists change.
    public func observe(keyPaths: [String]? = nil, on queue: DispatchQueue? = nil,
                        _ block: @escaping (RealmCollectionChange<List<Element>>) -> Void) -> NotificationToken {
        guard let binding else {
            block(.error(AtollError(.invalidArgument, "only a managed list can be observed")))
            return failedToken()
        }
        return binding.observe(keyPaths: keyPaths, on: queue, block, failure: { .error($0) }) { listChange($0, self) }
    }
}

extension List {
    /// The list's changes as an asynchronous sequence: the initial state, then each update; it
    /// ends after an error (the owner's deletion empties the list first), or when the
    /// iteration ends.
    public func changes(keyPaths: [String]? = nil) -> AsyncStream<RealmCollectionChange<List<Element>>> {
        changeStream({ observe(keyPaths: keyPaths, $0) }, endsAfter: { $0.isError })
    }
}

extension MutableSet {
    /// Calls `block` with the set's initial state, then after each change.
    public func observe(keyPaths: [String]? = nil, on queue: DispatchQueue? = nil,
                        _ block: @escaping (RealmCollectionChange<MutableSet<Element>>) -> Void) -> NotificationToken {
        guard let binding else {
            block(.error(AtollError(.invalidArgument, "only a managed set can be observed")))
            return failedToken()
        }
        return binding.observe(keyPaths: keyPaths, on: queue, block, failure: { .error($0) }) { listChange($0, self) }
    }
}

extension Map {
    /// Calls `block` with the map's initial state, then after each change, by key.
    public func observe(keyPaths: [String]? = nil, on queue: DispatchQueue? = nil,
                        _ block: @escaping (RealmMapChange<Map<Key, Value>>) -> Void) -> NotificationToken {
        guard let binding else {
            block(.error(AtollError(.invalidArgument, "only a managed map can be observed")))
            return failedToken()
        }
        return binding.observe(keyPaths: keyPaths, on: queue, block, failure: { .error($0) }) { change in
            if let error = change.error { return .error(error) }
            if change.initial { return .initial(self) }
            let keys = { (values: [AtollStore.Value]) in values.compactMap(\.stringValue) }
            return .update(self, deletions: keys(change.deletedKeys), insertions: keys(change.insertedKeys),
                           modifications: keys(change.modifiedKeys))
        }
    }
}

// MARK: - Realms

extension Realm {
    /// What a realm observer is told.
    public enum Notification: String, Sendable {
        /// The realm's data changed (a commit of this or another realm or process).
        case didChange
        /// Never sent (kept for Realm's shape): without a run loop to refresh on, a realm's
        /// snapshot moves on `refresh()`, on `beginWrite()`, and when its observers' changes
        /// are delivered.
        case refreshRequired
    }

    /// Calls `block` after each commit that changed the realm's data.
    public func observe(on queue: DispatchQueue? = nil, _ block: @escaping (Notification, Realm) -> Void) -> NotificationToken {
        let box = Unchecked(block)
        do {
            return try store.observe { [weak self] _ in
                guard let self else { return }
                deliver(Unchecked({ (realm: Realm) in box.value(.didChange, realm) }), self, on: queue)
            }
        } catch {
            // A refused registration (inside a write transaction) writes nothing: the
            // transaction goes on.
            report(error, failsWrite: false)
            return failedToken()
        }
    }
}

extension Realm {
    /// The realm's changes as an asynchronous sequence: `.didChange` after each commit.
    public func changes() -> AsyncStream<Notification> {
        changeStream({ block in observe { notification, _ in block(notification) } }, endsAfter: { _ in false })
    }
}

extension KeyPathRecorder {
    /// The dotted key path of a partial key path (`\Dog.owner.name` → `owner.name`).
    static func name<Root: ObjectBase>(ofPartial keyPath: PartialKeyPath<Root>) -> String {
        let recorder = KeyPathRecorder()
        let root = Root()
        root._recorder = recorder
        _ = root[keyPath: keyPath]
        return recorder.names.joined(separator: ".")
    }
}
