import AtollStore
import Foundation

extension Realm {
    /// Where a realm is and how to open it (Realm Swift's `Realm.Configuration`).
    ///
    /// ```swift
    /// var config = Realm.Configuration(fileURL: URL(fileURLWithPath: "dogs.realm"), objectTypes: [Dog.self])
    /// config.schemaVersion = 2
    /// config.migrationBlock = { migration, oldVersion in ... }
    /// Realm.Configuration.defaultConfiguration = config
    /// ```
    public struct Configuration: @unchecked Sendable {
        /// The realm file; ignored when `inMemoryIdentifier` is set.
        public var fileURL: URL?
        /// Names an in-memory realm: realms of this process opened with the same identifier
        /// share its data, which is gone when the last one closes.
        public var inMemoryIdentifier: String?
        #if Sync
        /// How the realm syncs (nil: a local realm); see `User.flexibleSyncConfiguration(...)`.
        /// (A synced realm's configuration is made with `init(fileURL:…syncConfiguration:…)`.)
        public var syncConfiguration: SyncConfiguration?
        #endif
        /// Opens the file read-only: writes fail with `.readOnly`.
        public var readOnly = false
        /// The version of the classes; raise it when they change in a way that needs a
        /// migration.
        public var schemaVersion: UInt64 = 0
        /// Moves data from the old classes to the new ones when the file's schema version is
        /// lower than `schemaVersion`.
        public var migrationBlock: MigrationBlock?
        /// Deletes the data instead of failing when the classes need a migration.
        public var deleteRealmIfMigrationNeeded = false
        /// Asked at open, with the file's total and used bytes, whether to compact it first.
        public var shouldCompactOnLaunch: (@Sendable (Int, Int) -> Bool)?
        /// The classes of the realm (with those they link to). Nil: every `Object` and
        /// `EmbeddedObject` class this process has used, and classes used later are added to
        /// the file as they come (outside write transactions).
        public var objectTypes: [ObjectBase.Type]?

        public init(fileURL: URL? = nil, inMemoryIdentifier: String? = nil, readOnly: Bool = false,
                    schemaVersion: UInt64 = 0, migrationBlock: MigrationBlock? = nil,
                    deleteRealmIfMigrationNeeded: Bool = false,
                    shouldCompactOnLaunch: (@Sendable (Int, Int) -> Bool)? = nil,
                    objectTypes: [ObjectBase.Type]? = nil) {
            self.fileURL = fileURL ?? (inMemoryIdentifier == nil ? Configuration.defaultFileURL : nil)
            self.inMemoryIdentifier = inMemoryIdentifier
            self.readOnly = readOnly
            self.schemaVersion = schemaVersion
            self.migrationBlock = migrationBlock
            self.deleteRealmIfMigrationNeeded = deleteRealmIfMigrationNeeded
            self.shouldCompactOnLaunch = shouldCompactOnLaunch
            self.objectTypes = objectTypes
        }

        /// `default.realm` in the current directory.
        public static var defaultFileURL: URL {
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("default.realm")
        }

        private static let defaultLock = NSLock()
        nonisolated(unsafe) private static var storedDefault = Configuration()

        /// The configuration `Realm()` opens; set it to change what implicit opens use.
        public static var defaultConfiguration: Configuration {
            get {
                defaultLock.lock()
                defer { defaultLock.unlock() }
                return storedDefault
            }
            set {
                defaultLock.lock()
                storedDefault = newValue
                defaultLock.unlock()
            }
        }

        /// Identifies the realm's data.
        var identity: String {
            if let id = inMemoryIdentifier { return "memory:" + id }
            return "file:" + (fileURL?.standardizedFileURL.path ?? "")
        }

        /// The store configuration: the classes of `objectTypes` (or every class used so
        /// far), the migration wrapped for typed access.
        var storeConfiguration: AtollStore.Configuration {
            let classes = objectTypes.map { ObjectClass.closure(of: $0) } ?? ObjectClass.knownClosure
            var migration: (@Sendable (AtollStore.Migration) throws -> Void)?
            if let block = migrationBlock {
                migration = { m in
                    let typed = Migration(m)
                    block(typed, m.oldSchemaVersion)
                    if let error = typed.error { throw error }
                }
            }
            var compact: (@Sendable (UInt64, UInt64) -> Bool)?
            if let ask = shouldCompactOnLaunch { compact = { total, used in ask(Int(total), Int(used)) } }
            var configuration = AtollStore.Configuration(
                path: inMemoryIdentifier ?? fileURL?.path, inMemory: inMemoryIdentifier != nil,
                schema: Schema(classes.map(\.schema)), schemaVersion: schemaVersion, readOnly: readOnly,
                shouldCompactOnLaunch: compact, migration: migration,
                deleteRealmIfMigrationNeeded: deleteRealmIfMigrationNeeded)
            configuration.notificationDelivery = .thread
            return configuration
        }
    }

    /// Moves data from the old classes to the new ones (see `Configuration.migrationBlock`).
    public typealias MigrationBlock = @Sendable (_ migration: Migration, _ oldSchemaVersion: UInt64) -> Void
}

/// The data of a migration, by class name (Realm Swift's `Migration`):
///
/// ```swift
/// config.migrationBlock = { migration, oldVersion in
///     migration.enumerateObjects(ofType: "Person") { old, new in
///         new?["fullName"] = "\(old?["firstName"] ?? "") \(old?["lastName"] ?? "")"
///     }
/// }
/// ```
public final class Migration: @unchecked Sendable {
    let base: AtollStore.Migration
    var error: AtollError?

    init(_ base: AtollStore.Migration) { self.base = base }

    /// The classes before and after.
    public var oldSchema: AtollStore.Schema { base.oldSchema }
    public var newSchema: AtollStore.Schema { base.newSchema }

    /// Calls `block` with each object of a class as it was (`oldObject`) and as it is in the
    /// new classes (`newObject`, whose changes are written when the block returns).
    public func enumerateObjects(ofType className: String, _ block: (_ oldObject: MigrationObject?, _ newObject: MigrationObject?) -> Void) {
        guard error == nil else { return }
        do {
            try base.enumerateObjects(className) { key, old in
                let current = try base.realm.object(className, key: key) ?? Document()
                let newObject = MigrationObject(current)
                block(MigrationObject(old), newObject)
                if !newObject.changed.isEmpty {
                    try base.set(className, key: key, Document(newObject.changed.map { ($0, newObject.document[$0] ?? .null) }))
                }
            }
        } catch { self.error = error as? AtollError ?? AtollError(.invalidArgument, "\(error)") }
    }

    /// Renames a property, keeping its values.
    public func renameProperty(onType className: String, from oldName: String, to newName: String) {
        guard error == nil else { return }
        do { try base.renameProperty(className, from: oldName, to: newName) } catch { self.error = error as? AtollError }
    }

    /// Deletes every object of a class (and the class when the new classes lack it).
    /// - Returns: whether the class existed.
    @discardableResult
    public func deleteData(forType className: String) -> Bool {
        guard error == nil else { return false }
        do {
            try base.deleteData(className)
            return true
        } catch {
            self.error = error as? AtollError
            return false
        }
    }
}

/// An object during a migration: its values by property name, as Swift values.
public final class MigrationObject {
    var document: Document
    var changed: [String] = []

    init(_ document: Document) { self.document = document }

    public subscript(name: String) -> Any? {
        get { document[name].flatMap(swiftValue) }
        set {
            document[name] = untypedStoredValue(newValue)
            if !changed.contains(name) { changed.append(name) }
        }
    }
}

// MARK: - Swift values and stored values

/// The Swift value of a stored value (for dynamic access): `Int`, `Double`, `String`… a list
/// as `[Any]`, an object as `[String: Any]`, null as nil.
func swiftValue(_ value: Value) -> Any? {
    switch value {
    case .null: return nil
    case .bool(let b): return b
    case .int(let i): return Int(truncatingIfNeeded: i)
    case .float(let f): return f
    case .double(let d): return d
    case .string(let s): return s
    case .data(let d): return Data(d)
    case .date(let t): return t.date
    case .objectId(let o): return o
    case .uuid(let u): return u
    case .decimal(let d): return d
    case .link(let l): return swiftValue(l.primaryKey)
    case .list(let l): return l.map { swiftValue($0) as Any }
    case .object(let d): return Dictionary(d.map { ($0.0, swiftValue($0.1) as Any) }, uniquingKeysWith: { a, _ in a })
    }
}

/// The stored form of a Swift value without a schema to check it against (migrations):
/// scalars as themselves, arrays as lists, dictionaries as objects.
func untypedStoredValue(_ any: Any?) -> Value {
    guard let any, !isNil(any) else { return .null }
    if let p = any as? _PersistableScalar { return p._atollValue }
    if let v = any as? Value { return v }
    if let a = any as? [Any] { return .list(a.map { untypedStoredValue($0) }) }
    if let d = any as? [String: Any] { return .object(Document(d.map { ($0.key, untypedStoredValue($0.value)) })) }
    if let e = any as? any RawRepresentable { return untypedStoredValue(e.rawValue) }
    return .string(String(describing: any))
}

/// Whether an `Any` holds an optional's nil.
func isNil(_ any: Any) -> Bool {
    if case Optional<Any>.none = any { return true }
    return false
}

extension Realm {
    /// The stored form of a Swift value for a property of this realm: objects as links
    /// (unmanaged ones added), dictionaries as objects, arrays as lists.
    /// - Throws: `.typeMismatch` when the value does not fit the property.
    func storedValue(_ any: Any?, for p: Property) throws -> Value {
        guard let any, !isNil(any) else { return .null }
        if p.isCollection, !(any is String) {
            if p.collection == .dictionary {
                if let map = any as? _MapValue { return try map._atollWrite(self) }
                guard let d = any as? [String: Any] else { throw mismatch(any, p) }
                return .object(Document(try d.sorted { $0.key < $1.key }.map { ($0.key, try element(of: $0.value, p)) }))
            }
            if let collection = any as? _CollectionValue { return try collection._atollWrite(self) }
            guard let items = any as? [Any] else { throw mismatch(any, p) }
            return .list(try items.map { try element(of: $0, p) })
        }
        return try element(of: any, p)
    }

    private func element(of any: Any, _ p: Property) throws -> Value {
        if isNil(any) { return .null }
        if p.type == .object {
            if let object = any as? ObjectBase { return try object.linkValue(self) }
            guard let target = p.objectType.flatMap(objectClass(named:)) else {
                throw AtollError(.noSuchClass, "no class '\(p.objectType ?? "")' for '\(p.name)'")
            }
            if let d = any as? [String: Any] {
                let object = target.type.init()
                object.setValues(d)
                return try object.linkValue(self)
            }
            // A primary key names an existing object.
            guard let pk = target.schema.primaryKeyProperty else { throw mismatch(any, p) }
            return try element(of: any, pk)
        }
        if let persistable = any as? _Persistable { return try persistable._atollWrite(self) }
        if let e = any as? any RawRepresentable { return try element(of: e.rawValue, p) }
        throw mismatch(any, p)
    }

    private func mismatch(_ any: Any, _ p: Property) -> AtollError {
        AtollError(.typeMismatch, "property '\(p.name)' holds \(p.typeName); got \(type(of: any))")
    }
}

#if !Sync
extension Realm.Configuration {
    /// A local-only build (the package trait `Sync` off) has no sync: no realm has a session to
    /// start.
    func startSync() throws -> AnyObject? { nil }
}
#endif
