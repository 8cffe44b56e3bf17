import AtollStore
import Foundation

/// Declares a stored property of an `Object` or `EmbeddedObject`, as in Realm Swift:
///
/// ```swift
/// class Dog: Object {
///     @Persisted(primaryKey: true) var _id: ObjectId
///     @Persisted var name = ""
///     @Persisted(indexed: true) var age: Int?
///     @Persisted var owner: Person?
///     @Persisted(originProperty: "dogs") var walkers: LinkingObjects<Person>
/// }
/// ```
///
/// On an object that is not in a realm, the property is a plain stored value. Once the object
/// is managed (added to a realm, or read from one), reading the property reads the realm and
/// setting it writes the realm, inside a write transaction.
@propertyWrapper
public struct Persisted<Value: _Persistable> {
    /// The value of an unmanaged object (nil until set or first read, then the default).
    @usableFromInline var value: Value?
    /// The property's index in its class, once known (-1 before; `probeMark` while probing).
    @usableFromInline var index = -1
    @usableFromInline let options: PropertyOptions

    static var probeMark: Int { -2 }

    /// A property with the type's default (`""`, `0`, `nil`, an empty collection, a new
    /// `ObjectId`…).
    @inlinable public init() { options = PropertyOptions() }

    /// A property with a default value.
    @inlinable public init(wrappedValue: Value) {
        value = wrappedValue
        options = PropertyOptions()
    }

    /// A primary key or an indexed property.
    @inlinable public init(primaryKey: Bool = false, indexed: Bool = false) {
        options = PropertyOptions(primaryKey: primaryKey, indexed: indexed)
    }

    /// A primary key or an indexed property, with a default value.
    @inlinable public init(wrappedValue: Value, primaryKey: Bool = false, indexed: Bool = false) {
        value = wrappedValue
        options = PropertyOptions(primaryKey: primaryKey, indexed: indexed)
    }

    /// A `LinkingObjects` property: the objects whose `originProperty` links here.
    @inlinable public init(originProperty: String) {
        options = PropertyOptions(originProperty: originProperty)
    }

    @available(*, unavailable, message: "@Persisted is only available on Object and EmbeddedObject subclasses")
    public var wrappedValue: Value {
        get { fatalError("unreachable: @Persisted outside an object") }
        set { fatalError("unreachable: @Persisted outside an object") }
    }

    /// The property of a managed, recording or unmanaged object. Inlinable, so that a plain
    /// unmanaged object's property is read and set in the model's module, specialized.
    @inlinable
    public static subscript<Root: ObjectBase>(
        _enclosingInstance object: Root,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Root, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Root, Persisted<Value>>
    ) -> Value {
        get {
            if object._isPlainUnmanaged, let v = object[keyPath: storageKeyPath].value { return v }
            return value(of: object, storageKeyPath)
        }
        set {
            if object._isPlainUnmanaged {
                object[keyPath: storageKeyPath].value = newValue
                return
            }
            set(newValue, on: object, storageKeyPath)
        }
    }

    @usableFromInline
    static func value<Root: ObjectBase>(of object: Root, _ storageKeyPath: ReferenceWritableKeyPath<Root, Persisted<Value>>) -> Value {
        if let accessor = object._accessor {
            return Value._atollManaged(accessor, index(object, storageKeyPath))
        }
        if let recorder = object._recorder {
            recorder.record(object.objectClass.schema.properties[index(object, storageKeyPath)].name)
            return Value._atollRecording(recorder)
        }
        if let overrides = object._unmanagedValues {
            if let v = overrides[index(object, storageKeyPath)] as? Value { return v }
        }
        if let v = object[keyPath: storageKeyPath].value { return v }
        let v = Value._atollDefault()
        object[keyPath: storageKeyPath].value = v
        return v
    }

    @usableFromInline
    static func set<Root: ObjectBase>(_ newValue: Value, on object: Root, _ storageKeyPath: ReferenceWritableKeyPath<Root, Persisted<Value>>) {
        if let accessor = object._accessor {
            accessor.set(index(object, storageKeyPath), newValue)
            return
        }
        if object._unmanagedValues != nil { object._unmanagedValues?[index(object, storageKeyPath)] = nil }
        object[keyPath: storageKeyPath].value = newValue
    }

    /// The property's index, found once per object (and once per class: `ObjectClass.index`).
    private static func index<Root: ObjectBase>(_ object: Root, _ storage: ReferenceWritableKeyPath<Root, Persisted<Value>>) -> Int {
        let i = object[keyPath: storage].index
        if i >= 0 { return i }
        let found = object.objectClass.index(of: storage, in: object) {
            object[keyPath: storage].index = probeMark
        } reader: { other, realm in
            guard let other = other as? Root else { return nil }
            return try other[keyPath: storage].storedValue(realm)
        }
        object[keyPath: storage].index = found
        return found
    }
}

/// What a `@Persisted` declaration says of its property besides its type.
@usableFromInline
struct PropertyOptions {
    @usableFromInline var primaryKey = false
    @usableFromInline var indexed = false
    @usableFromInline var originProperty: String?

    @inlinable init(primaryKey: Bool = false, indexed: Bool = false, originProperty: String? = nil) {
        self.primaryKey = primaryKey
        self.indexed = indexed
        self.originProperty = originProperty
    }
}

/// Lets schema discovery and probing read a `Persisted` of any type.
protocol AnyPersisted {
    static var valueShape: PropertyShape { get }
    var options: PropertyOptions { get }
    var index: Int { get }
    /// The unmanaged value (the default when none was set), stored for a write.
    func storedValue(_ realm: Realm) throws -> AtollStore.Value
    /// The unmanaged value, or nil when the property was never set and has no default.
    var anyValue: Any? { get }
    /// The type's default value.
    static var defaultValue: Any { get }
    /// A managed object's property, as `Any`.
    static func managedValue(_ accessor: ObjectAccessor, _ index: Int) -> Any
    /// Sets a managed object's property from a value of any type that converts to it.
    static func setManaged(_ accessor: ObjectAccessor, _ index: Int, _ value: Any?)

    // The storage in place, at its address inside an object (see `ObjectClass.fieldOffsets`).
    static func storedValue(at field: UnsafeRawPointer, _ realm: Realm) throws -> AtollStore.Value
    static func anyValue(at field: UnsafeRawPointer) -> Any?
    static func setIndex(at field: UnsafeMutableRawPointer, _ index: Int)
    /// Sets the unmanaged value from a value of the property's type; false for another type.
    static func setValue(at field: UnsafeMutableRawPointer, _ value: Any?) -> Bool
}

extension Persisted: AnyPersisted {
    static var valueShape: PropertyShape { Value._atollShape }
    func storedValue(_ realm: Realm) throws -> AtollStore.Value {
        try (value ?? Value._atollDefault())._atollWrite(realm)
    }
    var anyValue: Any? { value }
    static var defaultValue: Any { Value._atollDefault() }
    static func managedValue(_ accessor: ObjectAccessor, _ index: Int) -> Any { Value._atollManaged(accessor, index) }
    static func setManaged(_ accessor: ObjectAccessor, _ index: Int, _ value: Any?) {
        if let v = value as? Value { accessor.set(index, v) } else { accessor.setAny(index, value) }
    }

    // Specialized for the common types: the generic code would look the types' metadata up on
    // each call (bench/README.md, the typed W1).
    @_specialize(where Value == String)
    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == Date)
    @_specialize(where Value == ObjectId)
    @_specialize(where Value == String?)
    @_specialize(where Value == Int?)
    static func storedValue(at field: UnsafeRawPointer, _ realm: Realm) throws -> AtollStore.Value {
        try field.assumingMemoryBound(to: Persisted<Value>.self).pointee.storedValue(realm)
    }
    static func anyValue(at field: UnsafeRawPointer) -> Any? {
        field.assumingMemoryBound(to: Persisted<Value>.self).pointee.value
    }
    @_specialize(where Value == String)
    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == Date)
    @_specialize(where Value == ObjectId)
    @_specialize(where Value == String?)
    @_specialize(where Value == Int?)
    static func setIndex(at field: UnsafeMutableRawPointer, _ index: Int) {
        field.assumingMemoryBound(to: Persisted<Value>.self).pointee.index = index
    }
    static func setValue(at field: UnsafeMutableRawPointer, _ value: Any?) -> Bool {
        guard let v = value as? Value else { return false }
        field.assumingMemoryBound(to: Persisted<Value>.self).pointee.value = v
        return true
    }
}
