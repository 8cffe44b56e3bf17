import AtollStore
import Foundation

// The Swift types a `@Persisted` property may hold, and how each is stored.

/// An object id (12 bytes: time, random, counter), as MongoDB and Realm make them.
/// `ObjectId.generate()` makes a new one.
public typealias ObjectId = AtollStore.ObjectId
/// A 128-bit decimal floating-point number (IEEE 754-2008 decimal128), exact for money.
public typealias Decimal128 = AtollStore.Decimal128
/// An error of the store, with a stable code and a message.
public typealias AtollError = AtollStore.AtollError

/// How a property of a Swift type is laid out in the schema.
public struct PropertyShape: Sendable {
    var type: PropertyType
    var isOptional = false
    var collection: CollectionKind = .single
    /// For links, lists of links and linking objects: the target class.
    var objectClass: ObjectBase.Type?

    init(_ type: PropertyType, isOptional: Bool = false, collection: CollectionKind = .single, objectClass: ObjectBase.Type? = nil) {
        self.type = type
        self.isOptional = isOptional
        self.collection = collection
        self.objectClass = objectClass
    }
}

/// A type that a `@Persisted` property can hold: the scalars Realm stores (`Bool`, `Int`,
/// `Float`, `Double`, `String`, `Data`, `Date`, `UUID`, `ObjectId`, `Decimal128`, `URL`), their
/// optionals, `PersistableEnum`s, `AnyRealmValue`, links to objects (optional), embedded
/// objects, and the collections `List`, `MutableSet`, `Map` and `LinkingObjects`.
///
/// The requirements are the typed layer's own (their names start with an underscore); do not
/// conform other types to it.
public protocol _Persistable: SendableMetatype {
    /// The property's type in the schema.
    static var _atollShape: PropertyShape { get }
    /// The value of a new object's property that has no default of its own.
    static func _atollDefault() -> Self
    /// The value a managed object's property holds: from the typed row (`_atollRead`), or a
    /// live collection bound to the object.
    static func _atollManaged(_ accessor: ObjectAccessor, _ index: Int) -> Self
    /// The Swift value of a stored value (links as `.int(row key)`).
    static func _atollRead(_ value: Value, _ realm: Realm) -> Self
    /// The stored form of a value, for writing it into `realm` (objects not yet in it are
    /// written inline).
    func _atollWrite(_ realm: Realm) throws -> Value
    /// What a property of this type gives while a key path is being recorded.
    static func _atollRecording(_ recorder: KeyPathRecorder) -> Self
}

extension _Persistable {
    public static func _atollManaged(_ accessor: ObjectAccessor, _ index: Int) -> Self {
        _atollRead(accessor.value(index), accessor.realm)
    }
    public static func _atollRecording(_ recorder: KeyPathRecorder) -> Self { _atollDefault() }
}

/// A scalar stored as itself.
public protocol _PersistableScalar: _Persistable {
    static var _atollType: PropertyType { get }
    init?(_atollValue value: Value)
    var _atollValue: Value { get }
}

extension _PersistableScalar {
    public static var _atollShape: PropertyShape { PropertyShape(_atollType) }
    public static func _atollRead(_ value: Value, _ realm: Realm) -> Self { Self(_atollValue: value) ?? _atollDefault() }
    public func _atollWrite(_ realm: Realm) throws -> Value { _atollValue }
}

extension Bool: _PersistableScalar {
    public static var _atollType: PropertyType { .bool }
    public static func _atollDefault() -> Bool { false }
    public init?(_atollValue value: Value) { guard case .bool(let b) = value else { return nil }; self = b }
    public var _atollValue: Value { .bool(self) }
}

extension Int: _PersistableScalar {
    public static var _atollType: PropertyType { .int }
    public static func _atollDefault() -> Int { 0 }
    public init?(_atollValue value: Value) { guard case .int(let i) = value else { return nil }; self = Int(truncatingIfNeeded: i) }
    public var _atollValue: Value { .int(Int64(self)) }
}

extension Int8: _PersistableScalar {
    public static var _atollType: PropertyType { .int }
    public static func _atollDefault() -> Int8 { 0 }
    public init?(_atollValue value: Value) { guard case .int(let i) = value else { return nil }; self = Int8(truncatingIfNeeded: i) }
    public var _atollValue: Value { .int(Int64(self)) }
}

extension Int16: _PersistableScalar {
    public static var _atollType: PropertyType { .int }
    public static func _atollDefault() -> Int16 { 0 }
    public init?(_atollValue value: Value) { guard case .int(let i) = value else { return nil }; self = Int16(truncatingIfNeeded: i) }
    public var _atollValue: Value { .int(Int64(self)) }
}

extension Int32: _PersistableScalar {
    public static var _atollType: PropertyType { .int }
    public static func _atollDefault() -> Int32 { 0 }
    public init?(_atollValue value: Value) { guard case .int(let i) = value else { return nil }; self = Int32(truncatingIfNeeded: i) }
    public var _atollValue: Value { .int(Int64(self)) }
}

extension Int64: _PersistableScalar {
    public static var _atollType: PropertyType { .int }
    public static func _atollDefault() -> Int64 { 0 }
    public init?(_atollValue value: Value) { guard case .int(let i) = value else { return nil }; self = i }
    public var _atollValue: Value { .int(self) }
}

extension Float: _PersistableScalar {
    public static var _atollType: PropertyType { .float }
    public static func _atollDefault() -> Float { 0 }
    public init?(_atollValue value: Value) {
        switch value {
        case .float(let f): self = f
        case .double(let d): self = Float(d)
        case .int(let i): self = Float(i)
        default: return nil
        }
    }
    public var _atollValue: Value { .float(self) }
}

extension Double: _PersistableScalar {
    public static var _atollType: PropertyType { .double }
    public static func _atollDefault() -> Double { 0 }
    public init?(_atollValue value: Value) {
        guard let d = value.doubleValue else { return nil }
        self = d
    }
    public var _atollValue: Value { .double(self) }
}

extension String: _PersistableScalar {
    public static var _atollType: PropertyType { .string }
    public static func _atollDefault() -> String { "" }
    public init?(_atollValue value: Value) { guard case .string(let s) = value else { return nil }; self = s }
    public var _atollValue: Value { .string(self) }
}

extension Data: _PersistableScalar {
    public static var _atollType: PropertyType { .data }
    public static func _atollDefault() -> Data { Data() }
    public init?(_atollValue value: Value) { guard case .data(let d) = value else { return nil }; self = Data(d) }
    public var _atollValue: Value { .data([UInt8](self)) }
}

extension Date: _PersistableScalar {
    public static var _atollType: PropertyType { .date }
    public static func _atollDefault() -> Date { Date(timeIntervalSince1970: 0) }
    public init?(_atollValue value: Value) { guard case .date(let t) = value else { return nil }; self = t.date }
    public var _atollValue: Value { .date(Timestamp(self)) }
}

extension UUID: _PersistableScalar {
    public static var _atollType: PropertyType { .uuid }
    public static func _atollDefault() -> UUID { UUID() }
    public init?(_atollValue value: Value) { guard case .uuid(let u) = value else { return nil }; self = u }
    public var _atollValue: Value { .uuid(self) }
}

extension ObjectId: _PersistableScalar {
    public static var _atollType: PropertyType { .objectId }
    /// A new object id: an `ObjectId` property without a default gets a fresh one, as in Realm.
    public static func _atollDefault() -> ObjectId { .generate() }
    public init?(_atollValue value: Value) { guard case .objectId(let o) = value else { return nil }; self = o }
    public var _atollValue: Value { .objectId(self) }
}

extension Decimal128: _PersistableScalar {
    public static var _atollType: PropertyType { .decimal128 }
    public static func _atollDefault() -> Decimal128 { .zero }
    public init?(_atollValue value: Value) {
        switch value {
        case .decimal(let d): self = d
        case .int(let i): self = Decimal128(i)
        default: return nil
        }
    }
    public var _atollValue: Value { .decimal(self) }
}

/// URLs are stored as their absolute string (Realm Swift stores them the same way).
extension URL: _PersistableScalar {
    public static var _atollType: PropertyType { .string }
    public static func _atollDefault() -> URL { URL(fileURLWithPath: "/") }
    public init?(_atollValue value: Value) {
        guard case .string(let s) = value, let url = URL(string: s) else { return nil }
        self = url
    }
    public var _atollValue: Value { .string(absoluteString) }
}

// MARK: - Optionals

extension Optional: _Persistable where Wrapped: _Persistable {
    public static var _atollShape: PropertyShape {
        var shape = Wrapped._atollShape
        shape.isOptional = true
        return shape
    }
    public static func _atollDefault() -> Wrapped? { nil }
    public static func _atollManaged(_ accessor: ObjectAccessor, _ index: Int) -> Wrapped? {
        let stored = accessor.value(index)
        if stored.isNull { return nil }
        // An embedded object is bound to its owner's property, not to a row key of its own.
        if let embedded = Wrapped.self as? EmbeddedObject.Type {
            let object = embedded.init()
            object.bind(ObjectAccessor(embeddedIn: accessor, property: index, position: nil, cls: object.objectClass))
            return object as? Wrapped
        }
        return Wrapped._atollRead(stored, accessor.realm)
    }
    public static func _atollRead(_ value: Value, _ realm: Realm) -> Wrapped? {
        value.isNull ? nil : Wrapped._atollRead(value, realm)
    }
    public func _atollWrite(_ realm: Realm) throws -> Value {
        guard let self else { return .null }
        return try self._atollWrite(realm)
    }
    public static func _atollRecording(_ recorder: KeyPathRecorder) -> Wrapped? { Wrapped._atollRecording(recorder) }
}

// MARK: - Enums

/// An enum stored as its raw value (a string or an int), as Realm's `PersistableEnum`:
///
/// ```swift
/// enum BusinessUnit: String, PersistableEnum { case engineering, sales }
/// class Person: Object { @Persisted var unit = BusinessUnit.engineering }
/// ```
/// A stored raw value that names no case reads as the first case.
public protocol PersistableEnum: _Persistable, RawRepresentable, CaseIterable where RawValue: _PersistableScalar {}

extension PersistableEnum {
    public static var _atollShape: PropertyShape { RawValue._atollShape }
    public static func _atollDefault() -> Self {
        guard let first = allCases.first else { return Self(rawValue: RawValue._atollDefault())! }
        return first
    }
    public static func _atollRead(_ value: Value, _ realm: Realm) -> Self {
        RawValue(_atollValue: value).flatMap { Self(rawValue: $0) } ?? _atollDefault()
    }
    public func _atollWrite(_ realm: Realm) throws -> Value { rawValue._atollValue }
}

// MARK: - Realm Swift's conveniences for ObjectId and Decimal128

extension ObjectId {
    /// An object id from its 24 hex digits (Realm Swift's `ObjectId(string:)`).
    /// - Throws: `.invalidArgument` for text that is not 24 hex digits.
    public init(string: String) throws {
        guard let id = ObjectId(hex: string) else {
            throw AtollError(.invalidArgument, "'\(string)' is not an object id (24 hex digits)")
        }
        self = id
    }

    /// The id as 24 hex digits.
    public var stringValue: String { hex }
}

extension Decimal128 {
    /// A decimal from its text (Realm Swift's `Decimal128(string:)`): `"19.99"`, `"1e-3"`, `"NaN"`.
    /// - Throws: `.invalidArgument` for text that is not a decimal of at most 34 digits.
    public init(string: String) throws {
        guard let d = Decimal128(string) else {
            throw AtollError(.invalidArgument, "'\(string)' is not a decimal128 (at most 34 significant digits)")
        }
        self = d
    }

    /// The exact decimal value of an integer.
    public init(_ value: Int) { self.init(Int64(value)) }
}
