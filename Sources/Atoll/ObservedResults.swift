import AtollStore
import Foundation
import Observation

// SwiftUI's @ObservedResults and @ObservedRealmObject, for Linux, where SwiftUI does not exist:
// the same live state as `Observable` classes that a view model, a UI layer or a test watches
// with `withObservationTracking`. Each is also a property wrapper, so a view model reads as
// SwiftUI code does:
//
//     final class DogList {
//         @ObservedResults(Dog.self, sortDescriptor: SortDescriptor(keyPath: "name")) var dogs
//         func adopt(_ dog: Dog) { $dogs.append(dog) }
//     }
//
// Changes arrive on the realm's notifier thread: observers registered with
// `withObservationTracking` are called there, once the new state is readable.

/// Live results of a class or of a projection class, as observable state (SwiftUI's
/// `@ObservedResults`).
@propertyWrapper
public final class ObservedResults<ResultType: RealmFetchable>: Observable, @unchecked Sendable {
    private let registrar = ObservationRegistrar()
    private let lock = NSLock()
    private var token: NotificationToken?
    private var _results: Results<ResultType>
    private var _lastChange: RealmCollectionChange<Results<ResultType>>?
    private var _changeCount = 0
    /// The realm the results read (nil when it could not be opened: see `error`).
    public let realm: Realm?
    private var _error: Error?
    /// Why the realm could not be opened or the results observed.
    public var error: Error? {
        lock.lock()
        defer { lock.unlock() }
        return _error
    }

    /// Observes the objects of a class in the realm of `configuration` (the default
    /// configuration when nil), filtered by a Realm Query Language predicate, sorted, and
    /// reporting changes of what `keyPaths` names (everything when nil).
    public init(_ type: ResultType.Type, configuration: Realm.Configuration? = nil, filter: String? = nil,
                arguments: [Any] = [], keyPaths: [String]? = nil, sortDescriptor: SortDescriptor? = nil) {
        var realm: Realm?
        do { realm = try Realm(configuration: configuration ?? .defaultConfiguration) } catch { _error = error }
        self.realm = realm
        var results = realm?.objects(type) ?? Results(realm: nil, query: ResultsQuery())
        if let filter { results = results.filter(filter, arguments: arguments) }
        if let sortDescriptor { results = results.sorted(by: [sortDescriptor]) }
        _results = results
        start(keyPaths: keyPaths)
    }

    /// Observes given results (`realm.objects(Dog.self).where { … }`).
    public init(_ results: Results<ResultType>, keyPaths: [String]? = nil) {
        realm = results.realm
        _results = results
        start(keyPaths: keyPaths)
    }

    deinit { token?.invalidate() }

    /// Tells the observers that the state changed, once it has: `withObservationTracking`
    /// calls `onChange` on "will set", so telling before the new state is stored would let an
    /// observer that reads again at once (on another thread) see the old state, track it anew
    /// and never hear of the change it missed.
    private func published() {
        registrar.withMutation(of: self, keyPath: \.wrappedValue) {}
    }

    private func start(keyPaths: [String]?) {
        guard realm != nil else { return }
        token = _results.observe(keyPaths: keyPaths) { [weak self] change in
            guard let self else { return }
            self.lock.lock()
            self._lastChange = change
            self._changeCount += 1
            if case .error(let e) = change { self._error = e }
            self.lock.unlock()
            self.published()
        }
    }

    /// The live results. Reading it inside `withObservationTracking` tracks their changes.
    public var wrappedValue: Results<ResultType> {
        registrar.access(self, keyPath: \.wrappedValue)
        lock.lock()
        defer { lock.unlock() }
        return _results
    }

    /// The observed results themselves (`$dogs.append(dog)`).
    public var projectedValue: ObservedResults<ResultType> { self }

    /// The last change reported (`.initial` first).
    public var lastChange: RealmCollectionChange<Results<ResultType>>? {
        registrar.access(self, keyPath: \.wrappedValue)
        lock.lock()
        defer { lock.unlock() }
        return _lastChange
    }

    /// How many changes were reported so far (the initial state counts as one).
    public var changeCount: Int {
        registrar.access(self, keyPath: \.wrappedValue)
        lock.lock()
        defer { lock.unlock() }
        return _changeCount
    }

    /// Deletes an object (a projection's root object) from the realm in a write transaction
    /// of its own.
    public func remove(_ element: ResultType) throws {
        guard let realm else { throw error ?? AtollError(.closed, "no realm") }
        let object = Self.object(of: element)
        try realm.write { realm.delete(object) }
    }

    /// Deletes the objects at positions of the results, in one write transaction.
    public func remove(atOffsets offsets: IndexSet) throws {
        guard let realm else { throw error ?? AtollError(.closed, "no realm") }
        let results = wrappedValue
        let doomed = offsets.filter { $0 < results.count }.map { Self.object(of: results[$0]) }
        try realm.write { realm.delete(doomed) }
    }

    /// The object an element stands for: itself, or a projection's root object.
    private static func object(of element: ResultType) -> ObjectBase {
        if let object = element as? ObjectBase { return object }
        if let projection = element as? any ProjectionObservable { return projection.rootObject }
        // No other kind of element exists; an unmanaged object makes `delete` report an error.
        return ObjectBase()
    }
}

extension ObservedResults where ResultType: Object {
    /// Adds an object to the realm in a write transaction of its own.
    /// - Throws: the write's error.
    public func append(_ object: ResultType) throws {
        guard let realm else { throw error ?? AtollError(.closed, "no realm") }
        try realm.write { try realm.addObject(object, update: object.objectClass.schema.primaryKey == nil ? .error : .modified) }
    }
}

/// One live object as observable state (SwiftUI's `@ObservedRealmObject`): observers are
/// told when its properties change, and when it is deleted.
@propertyWrapper
public final class ObservedRealmObject<ObjectType: Object>: Observable, @unchecked Sendable {
    private let registrar = ObservationRegistrar()
    private let lock = NSLock()
    private var token: NotificationToken?
    private let object: ObjectType
    private var _changedProperties: [String] = []
    private var _isDeleted = false

    /// Observes a managed object (an unmanaged one is held as it is, unobserved).
    public init(wrappedValue: ObjectType, keyPaths: [String]? = nil) {
        object = wrappedValue
        guard wrappedValue.realm != nil else { return }
        token = wrappedValue.observe(keyPaths: keyPaths) { [weak self] (change: ObjectChange<ObjectType>) in
            guard let self else { return }
            self.lock.lock()
            switch change {
            case .change(_, let properties): self._changedProperties = properties.map(\.name)
            case .deleted: self._isDeleted = true
            case .error: break
            }
            self.lock.unlock()
            self.published()
        }
    }

    deinit { token?.invalidate() }

    /// Tells the observers that the state changed, once it has (see `ObservedResults`).
    private func published() {
        registrar.withMutation(of: self, keyPath: \.wrappedValue) {}
    }

    /// The live object. Reading it inside `withObservationTracking` tracks its changes.
    public var wrappedValue: ObjectType {
        registrar.access(self, keyPath: \.wrappedValue)
        return object
    }

    /// The observed object itself.
    public var projectedValue: ObservedRealmObject<ObjectType> { self }

    /// The properties the last change changed.
    public var changedProperties: [String] {
        registrar.access(self, keyPath: \.wrappedValue)
        lock.lock()
        defer { lock.unlock() }
        return _changedProperties
    }

    /// Whether the object was deleted.
    public var isDeleted: Bool {
        registrar.access(self, keyPath: \.wrappedValue)
        lock.lock()
        defer { lock.unlock() }
        return _isDeleted
    }

    /// Changes the object in a write transaction of its own (`$dog.update { $0.age += 1 }`).
    /// - Throws: the write's error.
    public func update(_ change: (ObjectType) -> Void) throws {
        guard let realm = object.realm else {
            change(object)
            return
        }
        try realm.write { change(object) }
    }
}
