import AtollStore
import Foundation

/// A value of any stored type (Realm Swift's `AnyRealmValue`, a `mixed` property):
///
/// ```swift
/// class Setting: Object { @Persisted var value: AnyRealmValue }
/// setting.value = .string("dark")
/// if case .int(let n) = setting.value { ... }
/// ```
/// Lists and dictionaries inside a value are read as unmanaged copies; write the whole value
/// to change them.
public enum AnyRealmValue: Hashable {
    case none
    case int(Int)
    case bool(Bool)
    case float(Float)
    case double(Double)
    case string(String)
    case data(Data)
    case date(Date)
    case objectId(ObjectId)
    case decimal128(Decimal128)
    case uuid(UUID)
    case object(Object)
    case list([AnyRealmValue])
    case dictionary([String: AnyRealmValue])

    /// The value as an int, when it is one.
    public var intValue: Int? { if case .int(let i) = self { return i } else { return nil } }
    /// The value as a string, when it is one.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The value as a double, when it is one.
    public var doubleValue: Double? { if case .double(let d) = self { return d } else { return nil } }
    /// The value as an object of a class, when it is one.
    public func object<T: Object>(_ type: T.Type) -> T? { if case .object(let o) = self { return o as? T } else { return nil } }
}

extension AnyRealmValue: _Persistable {
    public static var _atollShape: PropertyShape { PropertyShape(.mixed, isOptional: true) }
    public static func _atollDefault() -> AnyRealmValue { .none }

    public static func _atollRead(_ value: Value, _ realm: Realm) -> AnyRealmValue {
        switch value {
        case .null: return .none
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(Int(truncatingIfNeeded: i))
        case .float(let f): return .float(f)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .data(let d): return .data(Data(d))
        case .date(let t): return .date(t.date)
        case .objectId(let o): return .objectId(o)
        case .uuid(let u): return .uuid(u)
        case .decimal(let d): return .decimal128(d)
        case .link(let link):
            guard let cls = realm.objectClass(named: link.className),
                  let key = try? realm.store.rowKey(link.className, primaryKey: link.primaryKey) ?? nil,
                  let object = realm.managedObject(cls.type, key: key) as? Object else { return .none }
            return .object(object)
        case .list(let items): return .list(items.map { _atollRead($0, realm) })
        case .object(let document):
            return .dictionary(Dictionary(document.map { ($0.0, _atollRead($0.1, realm)) }, uniquingKeysWith: { a, _ in a }))
        }
    }

    public func _atollWrite(_ realm: Realm) throws -> Value {
        switch self {
        case .none: return .null
        case .int(let i): return .int(Int64(i))
        case .bool(let b): return .bool(b)
        case .float(let f): return .float(f)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .data(let d): return .data([UInt8](d))
        case .date(let d): return .date(Timestamp(d))
        case .objectId(let o): return .objectId(o)
        case .decimal128(let d): return .decimal(d)
        case .uuid(let u): return .uuid(u)
        case .object(let o):
            let reference = try o.linkValue(realm)
            return .link(ObjectLink(className: o.objectClass.name, primaryKey: reference))
        case .list(let items): return .list(try items.map { try $0._atollWrite(realm) })
        case .dictionary(let entries):
            return .object(Document(uniqueKeys: try entries.sorted { $0.key < $1.key }.map { ($0.key, try $0.value._atollWrite(realm)) }))
        }
    }
}
