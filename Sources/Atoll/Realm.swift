import AtollStore
import Foundation

/// A realm: a database of objects, on a file or in memory, as in Realm Swift.
///
/// ```swift
/// let realm = try Realm()
/// try realm.write {
///     realm.add(Dog(value: ["name": "Rex", "age": 3]))
/// }
/// let puppies = realm.objects(Dog.self).where { $0.age < 2 }
/// ```
///
/// A realm and its objects belong to the thread that uses them (as in Realm Swift); the
/// store underneath is locked, so a misuse gives wrong answers, never a crash. Writes happen
/// inside write transactions. Errors of calls that cannot throw (a property set outside a
/// write transaction, on a deleted object) are kept in `lastError`; inside a write transaction
/// they also make its commit fail, so that nothing half-done is kept.
public final class Realm: @unchecked Sendable {
    /// The store underneath.
    let store: Store
    /// The configuration the realm was opened with.
    public let configuration: Configuration
    /// Whether this is a frozen realm (see `freeze()`): it never changes and cannot be written.
    public let isFrozen: Bool
    /// The live realm this frozen one was made from.
    private let liveRealm: Realm?
    /// The classes of `configuration.objectTypes` with those they link to (nil without).
    private let configuredClasses: [ObjectClass]?
    /// What holds the sync session of a synced realm open (SyncConfiguration.swift's
    /// `SyncLease`), released after the store closes; nil for a local realm.
    let syncLease: AnyObject?
    private let lock = NSRecursiveLock()
    private var pendingError: AtollError?
    private var _lastError: AtollError?
    /// The update policy of the `add` in progress (links to unmanaged objects are added with it).
    var currentAddPolicy: UpdatePolicy = .error
    /// Objects being added (a link cycle among unmanaged objects is written in two steps).
    private var adding: Set<ObjectIdentifier> = []
    private var deferredLinks: [(ObjectBase, Int, Any?)] = []
    /// The last frozen copy and the read stamp it was made at (weak: it holds this realm).
    private weak var lastFrozen: Realm?
    private var lastFrozenStamp: Store.ReadStamp?

    /// Opens the realm of `Realm.Configuration.defaultConfiguration`.
    /// - Throws: `AtollError` when the file cannot be opened or needs a migration.
    public convenience init() throws {
        try self.init(configuration: Configuration.defaultConfiguration)
    }

    /// Opens (creating when needed) the realm a configuration describes; a synced realm
    /// (`syncConfiguration`) starts its session and opens without waiting for the server.
    /// - Throws: `AtollError`: `.file`, `.schema` (a class the store cannot hold),
    ///   `.schemaMismatch` (a migration is needed and none was given); `SyncError` when the
    ///   session cannot start (a logged-out user).
    public convenience init(configuration: Configuration) throws {
        try self.init(configuration: configuration, syncLease: try configuration.startSync())
    }

    /// Opens the realm of a configuration, holding the sync session opened for it (nil for a
    /// local realm): the session is released when the realm goes.
    init(configuration: Configuration, syncLease: AnyObject?) throws {
        self.configuration = configuration
        isFrozen = false
        liveRealm = nil
        configuredClasses = configuration.objectTypes.map { ObjectClass.closure(of: $0) }
        self.syncLease = syncLease
        store = try Store(configuration.storeConfiguration)
    }

    private init(frozenFrom live: Realm, store: Store) {
        configuration = live.configuration
        isFrozen = true
        liveRealm = live
        configuredClasses = live.configuredClasses
        syncLease = nil
        self.store = store
    }

    deinit { store.close() }

    /// Identifies the realm's data: its file, or its in-memory identifier.
    var identity: String { configuration.identity }

    /// The schema of the realm (every class in the file).
    public var schema: AtollStore.Schema { store.schema }

    /// Whether the realm holds no objects.
    public var isEmpty: Bool {
        (try? store.readSnapshot { try store.schema.classes.filter { !$0.isEmbedded }.allSatisfy { try store.objects($0.name).count() == 0 } }) ?? true
    }

    // MARK: - Errors

    /// The last error of a call that cannot throw (a property set, a collection change).
    public var lastError: AtollError? {
        lock.lock()
        defer { lock.unlock() }
        return _lastError
    }

    /// Keeps the error of a call that cannot throw in `lastError`; inside a write transaction,
    /// it also fails the transaction's commit (unless `failsWrite` is false: the call changed
    /// nothing that the transaction would keep).
    func report(_ error: Error, failsWrite: Bool = true) {
        let e = error as? AtollError ?? AtollError(.invalidArgument, "\(error)")
        lock.lock()
        defer { lock.unlock() }
        _lastError = e
        if failsWrite, store.isInWrite, pendingError == nil { pendingError = e }
    }

    nonisolated(unsafe) private static var unboundError: AtollError?
    private static let unboundLock = NSLock()

    /// The last error of a call on an unmanaged object that cannot throw (an unknown property
    /// name given to `setValue(_:forKey:)`).
    public static var lastUnmanagedError: AtollError? {
        unboundLock.lock()
        defer { unboundLock.unlock() }
        return unboundError
    }

    static func reportUnbound(_ error: AtollError) {
        unboundLock.lock()
        unboundError = error
        unboundLock.unlock()
    }

    func checkWritable(_ what: @autoclosure () -> String) throws {
        guard !isFrozen else { throw AtollError(.readOnly, "\(what()): the realm is frozen") }
        guard store.isInWrite else {
            throw AtollError(.notInWrite, "\(what()): the realm is not in a write transaction (use realm.write { })")
        }
    }

    // MARK: - Transactions

    /// Whether a write transaction is open.
    public var isInWriteTransaction: Bool { store.isInWrite }

    /// Runs `block` in a write transaction: commits when it returns, cancels when it throws
    /// (or when a property set inside it failed: the error is thrown).
    /// - Throws: `.alreadyInWrite`, `.readOnly`, `.busy`, and whatever `block` throws.
    @discardableResult
    public func write<Result>(_ block: () throws -> Result) throws -> Result {
        try beginWrite()
        do {
            let result = try block()
            try commitWrite()
            return result
        } catch {
            if store.isInWrite { cancelWrite() }
            throw error
        }
    }

    /// Begins a write transaction (waiting for another writer to finish).
    /// - Throws: `.alreadyInWrite`, `.readOnly` (also for a frozen realm), `.busy`.
    public func beginWrite() throws {
        guard !isFrozen else { throw AtollError(.readOnly, "a frozen realm cannot be written") }
        guard !configuration.readOnly else { throw AtollError(.readOnly, "the realm was opened read-only") }
        try ensureClasses()
        try store.beginWrite()
        lock.lock()
        pendingError = nil
        lock.unlock()
    }

    /// Commits the write transaction. When a property set inside it failed, cancels it
    /// instead and throws that error: nothing of the transaction is kept.
    /// - Throws: `.notInWrite`, the failed set's error, `.file`.
    public func commitWrite() throws {
        lock.lock()
        let failed = pendingError
        pendingError = nil
        lock.unlock()
        if let failed {
            if store.isInWrite { try store.cancelWrite() }
            throw failed
        }
        try store.commit()
    }

    /// Cancels the write transaction: nothing written in it is kept.
    public func cancelWrite() {
        lock.lock()
        pendingError = nil
        lock.unlock()
        do { try store.cancelWrite() } catch { report(error) }
    }

    /// Moves the realm to the newest data that other realms and processes committed.
    /// - Returns: whether there was newer data.
    @discardableResult
    public func refresh() -> Bool {
        guard !isFrozen else { return false }
        do { return try store.refresh() } catch {
            report(error)
            return false
        }
    }

    // MARK: - Classes

    /// The classes of the configuration (or every class used so far), with the classes they
    /// link to.
    var objectClasses: [ObjectClass] { configuredClasses ?? ObjectClass.knownClosure }

    /// The class of a name among `objectClasses` (for links named by class: mixed values,
    /// dictionaries given for links).
    func objectClass(named name: String) -> ObjectClass? { objectClasses.first { $0.name == name } }

    /// Makes sure the file's schema has every class this process uses (classes first used
    /// after the realm was opened are added, as they would be at open).
    func ensureClasses() throws {
        guard configuration.objectTypes == nil, !isFrozen, !configuration.readOnly else { return }
        try ensure(ObjectClass.knownClosure)
    }

    func ensure(_ classes: [ObjectClass]) throws {
        let missing = classes.filter { store.schema[$0.name] == nil }
        guard !missing.isEmpty else { return }
        try store.extendSchema(missing.map(\.schema))
    }

    /// The class of a type, checked to be in this realm.
    func objectClass(_ type: ObjectBase.Type) throws -> ObjectClass {
        try objectClass(ObjectClass.of(type))
    }

    /// A class, checked to be in this realm (added to the file when it may be).
    func objectClass(_ cls: ObjectClass) throws -> ObjectClass {
        let type = cls.type
        if store.schema[cls.name] == nil {
            if configuration.objectTypes != nil {
                throw AtollError(.noSuchClass, "'\(cls.name)' is not in this realm's objectTypes")
            }
            try ensure(ObjectClass.closure(of: [type]))
        }
        return cls
    }

    /// A managed object of a class for a row key.
    func managedObject<T: ObjectBase>(_ type: T.Type, key: Int64, row: [Value]? = nil, stamp: Store.ReadStamp? = nil) -> T {
        let object = type.init()
        object.bind(ObjectAccessor(realm: self, cls: ObjectClass.of(type), key: key, row: row, stamp: stamp))
        return object
    }

    // MARK: - Adding and creating

    /// Adds an unmanaged object (and the unmanaged objects it links to) to the realm; the
    /// object becomes managed. With `.modified` or `.all`, an object whose primary key exists
    /// updates it instead (`.modified` writes only the values that differ).
    /// Errors are kept in `lastError` and fail the write transaction's commit.
    public func add(_ object: Object, update: UpdatePolicy = .error) {
        do { try addObject(object, update: update) } catch { report(error) }
    }

    /// Adds each object of a sequence (see `add(_:update:)`).
    public func add<S: Sequence>(_ objects: S, update: UpdatePolicy = .error) where S.Element: Object {
        for object in objects { add(object, update: update) }
    }

    /// Adds an object, throwing its error (what `add` reports in `lastError`).
    @discardableResult
    func addObject(_ object: ObjectBase, update: UpdatePolicy) throws -> Int64 {
        if let accessor = object._accessor {
            guard accessor.realm.identity == identity, !accessor.realm.isFrozen else {
                throw AtollError(.invalidArgument, "the \(accessor.cls.name) object belongs to another realm")
            }
            guard let key = accessor.currentKey else { throw accessor.invalidated() }
            return key
        }
        let cls = try objectClass(object.objectClass)
        guard !cls.isEmbedded else {
            throw AtollError(.invalidArgument, "'\(cls.name)' is an embedded object: set it as the property of its owner")
        }
        try checkWritable("add")
        if update != .error, cls.schema.primaryKey == nil {
            throw AtollError(.invalidArgument, "add(update:) needs a primary key; '\(cls.name)' has none")
        }
        // An object of a class without links (or mixed values, which may hold objects) reaches
        // no other object: it closes no cycle.
        guard cls.reachesObjects else {
            let key = try store.create(cls.name, try self.document(of: object), update: update).rawValue
            object.bind(ObjectAccessor(realm: self, cls: cls, key: key))
            return key
        }
        let id = ObjectIdentifier(object)
        let outermost = adding.isEmpty
        let savedPolicy = currentAddPolicy
        currentAddPolicy = update
        adding.insert(id)
        defer {
            adding.remove(id)
            currentAddPolicy = savedPolicy
        }
        let document = try self.document(of: object)
        let key = try store.create(cls.name, document, update: update).rawValue
        object.bind(ObjectAccessor(realm: self, cls: cls, key: key))
        if outermost {
            // Links that closed a cycle were left out; write them now that every object has a row.
            let deferred = deferredLinks
            deferredLinks = []
            for (holder, index, value) in deferred {
                guard let accessor = holder._accessor else { continue }
                try accessor.setStored(index, try storedValue(value, for: accessor.cls.schema.properties[index]))
            }
        }
        return key
    }

    /// The document of an unmanaged object's values (links to unmanaged objects add them).
    func document(of object: ObjectBase) throws -> Document {
        let cls = object.objectClass
        if let accessor = object._accessor {
            guard let key = accessor.currentKey, let document = try store.object(cls.name, key: ObjectKey(key)) else { throw accessor.invalidated() }
            return document
        }
        var pairs = [(String, Value)]()
        pairs.reserveCapacity(cls.properties.count)
        let values = try cls.storedValues(of: object, self)
        for (i, p) in cls.schema.properties.enumerated() where !p.isComputed {
            guard let v = values[i] else { continue }
            pairs.append((p.name, v))
        }
        return Document(uniqueKeys: pairs)
    }

    /// Whether an unmanaged object is being added: a link to it closes a cycle.
    func isBeingAdded(_ object: ObjectBase) -> Bool { adding.contains(ObjectIdentifier(object)) }

    /// Leaves a property that closes a cycle of unmanaged objects for later: it is written
    /// once every object of the cycle has its row.
    func deferLink(_ holder: ObjectBase, property index: Int, value: Any?) {
        deferredLinks.append((holder, index, value))
    }

    /// Creates an object of a class from a value (a dictionary by property name, an array in
    /// property order, or another object), or with `.modified`/`.all` updates the one with
    /// the same primary key, and returns it managed.
    /// - Throws: `.notInWrite`, `.duplicatePrimaryKey`, `.typeMismatch`, `.noSuchProperty`.
    @discardableResult
    public func create<T: Object>(_ type: T.Type, value: Any = [String: Any](), update: UpdatePolicy = .error) throws -> T {
        let cls = try objectClass(type)
        try checkWritable("create")
        var document = Document()
        if let dictionary = value as? [String: Any] {
            for (name, v) in dictionary {
                guard let p = cls.schema[property: name] else {
                    throw AtollError(.noSuchProperty, "class '\(cls.name)' has no property '\(name)'")
                }
                document[name] = try storedValue(v, for: p)
            }
        } else if let array = value as? [Any] {
            for (p, v) in zip(cls.schema.properties.filter { !$0.isComputed }, array) { document[p.name] = try storedValue(v, for: p) }
        } else if let other = value as? ObjectBase {
            document = try self.document(of: other)
        } else {
            throw AtollError(.invalidArgument, "create: a value is a dictionary, an array or an object; got \(Swift.type(of: value))")
        }
        if update == .error {
            // Properties not given take the class's defaults, as a new object of the class has.
            let defaults = try self.document(of: T())
            for (name, v) in defaults where document[name] == nil { document[name] = v }
        }
        let key = try store.create(cls.name, document, update: update).rawValue
        return managedObject(T.self, key: key)
    }

    // MARK: - Deleting

    /// Deletes an object (links to it become null, lists drop it; its embedded objects go
    /// with it). Errors are kept in `lastError` and fail the write transaction's commit.
    public func delete(_ object: ObjectBase) {
        do {
            try checkWritable("delete")
            guard let accessor = object._accessor, accessor.realm.identity == identity else {
                throw AtollError(.invalidArgument, "delete: the object is not managed by this realm")
            }
            guard let key = accessor.currentKey else { throw accessor.invalidated() }
            try store.delete(accessor.cls.name, key: key)
        } catch { report(error) }
    }

    /// Deletes each object of a sequence (every object of results, at once).
    public func delete<S: Sequence>(_ objects: S) where S.Element: ObjectBase {
        if let results = objects as? any DeletableResults {
            do {
                try checkWritable("delete")
                try results.deleteAll()
            } catch { report(error) }
            return
        }
        for object in Array(objects) { delete(object) }
    }

    /// Deletes every object of every class.
    public func deleteAll() {
        do {
            try checkWritable("deleteAll")
            for cls in store.schema.classes where !cls.isEmbedded { _ = try store.objects(cls.name).deleteAll() }
        } catch { report(error) }
    }

    // MARK: - Reading

    /// Every object of a class (or projection of a class), as live results.
    public func objects<T: RealmFetchable>(_ type: T.Type) -> Results<T> {
        Results(realm: self, query: ResultsQuery())
    }

    /// The object of a class with a primary key, or nil when there is none.
    public func object<T: Object, Key>(ofType type: T.Type, forPrimaryKey key: Key) -> T? {
        do {
            let cls = try objectClass(type)
            guard let p = cls.schema.primaryKeyProperty else {
                throw AtollError(.invalidArgument, "'\(cls.name)' has no primary key")
            }
            let stamp = try store.readStamp()
            let value = try (key as? _PersistableScalar)?._atollValue ?? storedValue(key, for: p)
            guard let (rowKey, row) = try store.typedRow(cls.name, primaryKey: value) else { return nil }
            return managedObject(T.self, key: rowKey, row: row, stamp: stamp)
        } catch {
            report(error)
            return nil
        }
    }

    // MARK: - Files

    /// Writes a compacted copy of the realm to another configuration's file (or in-memory
    /// identifier); from a synced realm to a local one, or to a synced one, the objects are
    /// copied without the sync state (see `writeSyncedCopy`).
    /// - Throws: `.file` when the destination exists, `.invalidArgument`.
    public func writeCopy(configuration: Configuration) throws {
        #if Sync
        if try writeSyncedCopy(configuration: configuration) { return }
        #endif
        try store.writeCopy(to: configuration.storeConfiguration)
    }

    /// Whether a configuration's realm file exists.
    public static func fileExists(for configuration: Configuration) -> Bool {
        (try? Store.fileExists(configuration.storeConfiguration)) ?? false
    }

    /// Deletes a configuration's realm file and its side files.
    /// - Returns: whether a file was deleted.
    /// - Throws: `.busy` while the realm is open.
    @discardableResult
    public static func deleteFiles(for configuration: Configuration) throws -> Bool {
        try Store.deleteFiles(configuration.storeConfiguration)
    }

    // MARK: - Frozen realms

    /// A frozen copy of the realm as it is now: it never changes, reads from any thread, and
    /// cannot be written. A file realm's frozen copy holds a snapshot of the file; an
    /// in-memory realm's is a copy of its data.
    /// - Throws: `.file` when the copy cannot be opened.
    public func freeze() throws -> Realm {
        if isFrozen { return self }
        // Freezing again while the data is unchanged gives the same frozen realm (objects and
        // results frozen one by one share one handle).
        lock.lock()
        let cached = lastFrozen.flatMap { frozen in try? store.readStamp() == lastFrozenStamp ? frozen : nil }
        lock.unlock()
        if let cached { return cached }
        let frozen: Realm
        if configuration.inMemoryIdentifier != nil {
            var copy = configuration
            copy.inMemoryIdentifier = "atoll-frozen-\(UUID().uuidString)"
            try store.writeCopy(to: copy.storeConfiguration)
            frozen = Realm(frozenFrom: self, store: try Store(copy.storeConfiguration))
        } else {
            var storeConfiguration = configuration.storeConfiguration
            storeConfiguration.notificationDelivery = .host
            let handle = try Store(storeConfiguration)
            // The new handle's snapshot may be newer than this realm's: compare versions.
            if try handle.version() != (try store.version()), !store.isInWrite {
                _ = try store.refresh()
            }
            frozen = Realm(frozenFrom: self, store: handle)
        }
        let stamp = try store.readStamp()
        lock.lock()
        lastFrozen = frozen
        lastFrozenStamp = stamp
        lock.unlock()
        return frozen
    }

    /// The live realm of a frozen one (itself for a live realm).
    public func thaw() -> Realm { liveRealm ?? self }
}

extension Realm: Equatable {
    /// Realms are equal when they are the same realm data and both live or both frozen.
    public static func == (a: Realm, b: Realm) -> Bool { a === b || (a.identity == b.identity && !a.isFrozen && !b.isFrozen) }
}

// MARK: - Objects: freeze and thaw

extension Object {
    /// A frozen copy of the object: it keeps the values it has now (an unmanaged or frozen
    /// object is returned as it is).
    /// - Throws: when the frozen realm cannot be opened.
    public func freeze() throws -> Self {
        guard let accessor = _accessor, let key = accessor.currentKey, !accessor.realm.isFrozen else { return self }
        return try accessor.realm.freeze().managedObject(Self.self, key: key)
    }

    /// The live object of a frozen one (nil when it was deleted since); a live object itself.
    public func thaw() -> Self? {
        guard let accessor = _accessor, accessor.realm.isFrozen else { return self }
        guard let key = accessor.currentKey else { return nil }
        let live = accessor.realm.thaw()
        guard (try? live.store.exists(accessor.cls.name, key: key)) == true else { return nil }
        return live.managedObject(Self.self, key: key)
    }
}
