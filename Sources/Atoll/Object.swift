import AtollStore
import Foundation

/// What `Object` and `EmbeddedObject` share: the state that makes an object unmanaged (its
/// values live in its `@Persisted` properties), managed (bound to a row of a realm) or a
/// key-path recorder.
open class ObjectBase: Hashable, CustomStringConvertible {
    /// Set while the object is managed: its realm, class and row.
    @usableFromInline var _accessor: ObjectAccessor?
    /// Set on a recorder instance, which turns property reads into key-path names.
    @usableFromInline var _recorder: KeyPathRecorder?
    /// Values set by name on an unmanaged object (`init(value:)`), by property index; they win
    /// over the `@Persisted` storage until the property is set directly.
    @usableFromInline var _unmanagedValues: [Int: Any]?

    /// Whether the object is unmanaged, no recorder, with no values set by name: its
    /// `@Persisted` storage holds its values.
    @inlinable final var _isPlainUnmanaged: Bool { _accessor == nil && _recorder == nil && _unmanagedValues == nil }
    /// The class's schema and key-path tables: the accessor's for a managed object (which
    /// another thread may read), else found on first use.
    var objectClass: ObjectClass { _accessor?.cls ?? unmanagedClass }
    private lazy var unmanagedClass: ObjectClass = ObjectClass.of(type(of: self))

    /// A new unmanaged object with its properties' defaults.
    public required init() {}

    /// A new unmanaged object with values given by property name (a dictionary), or in the
    /// order of the properties (an array); other properties keep their defaults. Values of
    /// link properties may be objects or dictionaries, values of lists arrays.
    ///
    /// ```swift
    /// let dog = Dog(value: ["name": "Rex", "age": 3])
    /// ```
    public convenience init(value: Any) {
        self.init()
        setValues(value)
    }

    /// The realm this object belongs to; nil while unmanaged.
    public var realm: Realm? { _accessor?.realm }

    /// Whether the object was deleted from its realm (or its realm was closed): its
    /// properties then read as their defaults.
    public var isInvalidated: Bool { _accessor.map { !$0.isValid } ?? false }

    /// Whether this object is a frozen copy (see `freeze()`).
    public var isFrozen: Bool { _accessor?.realm.isFrozen ?? false }

    /// The object's schema in its realm.
    public var objectSchema: ObjectSchema { objectClass.schema }

    /// The class name in the schema (the Swift class name without its module).
    open class func className() -> String { String(describing: self) }

    /// Reads a property by name (nil for no such property): the Swift value.
    public subscript(key: String) -> Any? {
        get { value(forKey: key) }
        set { setValue(newValue, forKey: key) }
    }

    /// Reads a property by name: the Swift value, or nil when the class has no such property.
    public func value(forKey key: String) -> Any? {
        guard let i = objectClass.propertyIndex[key] else { return nil }
        if let accessor = _accessor { return objectClass.properties[i].managedValue(accessor, i) }
        if let v = _unmanagedValues?[i] { return v }
        return objectClass.unmanagedValue(self, i)
    }

    /// Sets a property by name. On a managed object, inside a write transaction.
    public func setValue(_ value: Any?, forKey key: String) {
        guard let i = objectClass.propertyIndex[key] else {
            reportError(AtollError(.noSuchProperty, "class '\(objectClass.name)' has no property '\(key)'"))
            return
        }
        if let accessor = _accessor {
            accessor.setAny(i, value)
            return
        }
        if objectClass.setUnmanaged(self, i, value) {
            _unmanagedValues?[i] = nil
            return
        }
        if _unmanagedValues == nil { _unmanagedValues = [:] }
        _unmanagedValues?[i] = value ?? Optional<Int>.none as Any
    }

    func setValues(_ value: Any) {
        if let dictionary = value as? [String: Any] {
            for (k, v) in dictionary { setValue(v, forKey: k) }
        } else if let array = value as? [Any] {
            for (p, v) in zip(objectClass.schema.properties, array) { setValue(v, forKey: p.name) }
        } else if let other = value as? ObjectBase {
            for p in other.objectClass.schema.properties where !p.isComputed && objectClass.propertyIndex[p.name] != nil {
                setValue(other.value(forKey: p.name), forKey: p.name)
            }
        } else {
            reportError(AtollError(.invalidArgument, "an object's value is a dictionary, an array or an object; got \(type(of: value))"))
        }
    }

    /// Makes the object managed by an accessor; its `@Persisted` storage learns each
    /// property's index at once (see `ObjectClass.bindIndices`).
    func bind(_ accessor: ObjectAccessor) {
        _accessor = accessor
        _unmanagedValues = nil
        accessor.cls.bindIndices(self)
    }

    func reportError(_ error: AtollError) {
        if let realm = _accessor?.realm { realm.report(error) } else { Realm.reportUnbound(error) }
    }

    // MARK: - Identity

    /// Managed objects are equal when they are the same row of the same realm file; unmanaged
    /// objects only to themselves.
    public static func == (a: ObjectBase, b: ObjectBase) -> Bool {
        if a === b { return true }
        guard let x = a._accessor, let y = b._accessor else { return false }
        return x.cls === y.cls && x.currentKey == y.currentKey && x.currentKey != nil && x.realm.identity == y.realm.identity
    }

    public func hash(into hasher: inout Hasher) {
        if let accessor = _accessor, let key = accessor.currentKey {
            hasher.combine(objectClass.name)
            hasher.combine(key)
        } else {
            hasher.combine(ObjectIdentifier(self))
        }
    }

    public var description: String {
        let values = objectClass.schema.properties.filter { !$0.isComputed }.map { p in
            "\(p.name) = \(value(forKey: p.name).map { String(describing: $0) } ?? "nil")"
        }
        return "\(objectClass.name) {\n\t" + values.joined(separator: ";\n\t") + ";\n}"
    }
}

/// A class of top-level objects: subclass it and declare `@Persisted` properties.
///
/// ```swift
/// class Dog: Object, ObjectKeyIdentifiable {
///     @Persisted(primaryKey: true) var _id: ObjectId
///     @Persisted var name = ""
/// }
/// ```
open class Object: ObjectBase {
    /// The object's primary key property name, if the class declares one.
    public class func primaryKey() -> String? { ObjectClass.of(self).schema.primaryKey }
}

/// A class of objects that live inside one owner object (a property or a list of it), are
/// deleted with it and have no primary key.
open class EmbeddedObject: ObjectBase {}

/// Gives objects a stable `id` for SwiftUI-style lists: the row key of a managed object, an
/// identity-based number for an unmanaged one.
public protocol ObjectKeyIdentifiable: Identifiable {}

extension ObjectKeyIdentifiable where Self: ObjectBase {
    public var id: UInt64 {
        if let key = _accessor?.currentKey { return UInt64(bitPattern: key) }
        return UInt64(UInt(bitPattern: ObjectIdentifier(self).hashValue))
    }
}

// MARK: - Links

extension ObjectBase {
    /// The stored form of a link to this object, for writing into `realm`: its reference (an
    /// object of this realm), or the object written inline (an embedded object, or an object
    /// not yet in a realm, which `add` makes managed).
    func linkValue(_ realm: Realm) throws -> Value {
        if objectClass.isEmbedded { return .object(try realm.document(of: self)) }
        if let accessor = _accessor, accessor.realm.identity == realm.identity, let key = accessor.currentKey {
            return try realm.store.reference(objectClass.name, key: key)
        }
        if realm.isBeingAdded(self) { throw CyclicLink() }
        return try realm.store.reference(objectClass.name, key: try realm.addObject(self, update: realm.currentAddPolicy))
    }
}

/// A link to an object (`@Persisted var owner: Person?`) or an embedded object
/// (`@Persisted var address: Address?`).
extension _Persistable where Self: ObjectBase {
    public static var _atollShape: PropertyShape { PropertyShape(.object, objectClass: self) }
    public static func _atollDefault() -> Self { Self() }
    public static func _atollRead(_ value: Value, _ realm: Realm) -> Self {
        guard case .int(let key) = value else { return Self() }
        return realm.managedObject(Self.self, key: key)
    }
    public func _atollWrite(_ realm: Realm) throws -> Value { try linkValue(realm) }
    public static func _atollRecording(_ recorder: KeyPathRecorder) -> Self {
        let object = Self()
        object._recorder = recorder
        return object
    }
}

extension Object: _Persistable {}
extension EmbeddedObject: _Persistable {}

/// Records the property names a key path goes through (`\Dog.owner.name` → `owner.name`),
/// by evaluating it on a recorder object whose properties report their names.
public final class KeyPathRecorder {
    var names: [String] = []
    func record(_ name: String) { names.append(name) }

    /// The dotted key path that `keyPath` names on `Root`.
    static func name<Root: ObjectBase, V>(of keyPath: KeyPath<Root, V>) -> String {
        names(of: keyPath).joined(separator: ".")
    }

    static func names<Root: ObjectBase, V>(of keyPath: KeyPath<Root, V>) -> [String] {
        let recorder = KeyPathRecorder()
        let root = Root()
        root._recorder = recorder
        _ = root[keyPath: keyPath]
        return recorder.names
    }
}
