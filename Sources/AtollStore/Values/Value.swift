import Foundation

/// One value of a property, a primary key, a query argument or a change-log instruction.
///
/// The store is dynamic: objects are documents of `Value`s, checked against the schema when
/// written. Values decoded from JSON arrive loosely typed (a JSON number is `.int` or
/// `.double`) and are coerced to the property's type by the store.
public enum Value: Hashable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case float(Float)
    case double(Double)
    case string(String)
    case data([UInt8])
    case date(Timestamp)
    case objectId(ObjectId)
    case uuid(UUID)
    case decimal(Decimal128)
    /// A reference to an object: its class and primary key (reads of link properties give
    /// the primary key alone; the change log keeps the class too).
    indirect case link(ObjectLink)
    /// A list of values (a list property, or the `IN {...}` operand of a query).
    case list([Value])
    /// A whole object: an embedded object, or a linked object written inline.
    case object(Document)

    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// Equal values: strings when their bytes are (SQLite's equality, and Realm's), not when
    /// they are merely canonically equivalent as Swift's `String ==` has it (a precomposed "é"
    /// and "e" with a combining accent are two primary keys, two objects); every other kind as
    /// its type compares.
    public static func == (a: Value, b: Value) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.float(let x), .float(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y
        case (.string(let x), .string(let y)): return ExactText.same(x, y)
        case (.data(let x), .data(let y)): return x == y
        case (.date(let x), .date(let y)): return x == y
        case (.objectId(let x), .objectId(let y)): return x == y
        case (.uuid(let x), .uuid(let y)): return x == y
        case (.decimal(let x), .decimal(let y)): return x == y
        case (.link(let x), .link(let y)): return x == y
        case (.list(let x), .list(let y)): return x == y
        case (.object(let x), .object(let y)): return x == y
        default: return false
        }
    }

    /// Hashes as `==` compares: a string by its bytes.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let x): hasher.combine(1); hasher.combine(x)
        case .int(let x): hasher.combine(2); hasher.combine(x)
        case .float(let x): hasher.combine(3); hasher.combine(x)
        case .double(let x): hasher.combine(4); hasher.combine(x)
        case .string(let x): hasher.combine(5); ExactText.hash(x, into: &hasher)
        case .data(let x): hasher.combine(6); hasher.combine(x)
        case .date(let x): hasher.combine(7); hasher.combine(x)
        case .objectId(let x): hasher.combine(8); hasher.combine(x)
        case .uuid(let x): hasher.combine(9); hasher.combine(x)
        case .decimal(let x): hasher.combine(10); hasher.combine(x)
        case .link(let x): hasher.combine(11); hasher.combine(x)
        case .list(let x): hasher.combine(12); hasher.combine(x)
        case .object(let x): hasher.combine(13); hasher.combine(x)
        }
    }

    /// Whether this is a single value: not a link, list or object.
    public var isScalar: Bool {
        switch self {
        case .link, .list, .object: return false
        default: return true
        }
    }

    /// A short name of the value's kind, for messages ("string", "int", ...).
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "bool"
        case .int: return "int"
        case .float: return "float"
        case .double: return "double"
        case .string: return "string"
        case .data: return "data"
        case .date: return "date"
        case .objectId: return "objectId"
        case .uuid: return "uuid"
        case .decimal: return "decimal128"
        case .link: return "link"
        case .list: return "list"
        case .object: return "object"
        }
    }
}

/// The identity of an object in another class: what a link stores, seen from outside.
public struct ObjectLink: Hashable, Sendable {
    public var className: String
    public var primaryKey: Value
    public init(className: String, primaryKey: Value) {
        self.className = className
        self.primaryKey = primaryKey
    }
}

/// An object's properties in order: what `create` takes and reads give back.
///
/// Keeps the order it was built in (reads give the schema's order), and looks keys up by name.
/// Keys compare byte for byte, as SQLite and Realm compare dictionary keys: "é" precomposed and
/// "e" with a combining accent are two keys.
public struct Document: Hashable, Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var keys: [String] = []
    public private(set) var values: [Value] = []

    public init() {}

    public init(dictionaryLiteral elements: (String, Value)...) {
        for (k, v) in elements { self[k] = v }
    }

    /// A document of key-value pairs; a later pair replaces an earlier one with the same key.
    public init(_ pairs: [(String, Value)]) {
        for (k, v) in pairs { self[k] = v }
    }

    /// A document of pairs whose keys the caller knows to be distinct (a JSON object's keys,
    /// say): no search for duplicates.
    public init(uniqueKeys pairs: [(String, Value)]) {
        keys.reserveCapacity(pairs.count)
        values.reserveCapacity(pairs.count)
        for (k, v) in pairs { appendNew(k, v) }
    }

    /// A document of `keys` and `values` side by side, the keys known to be distinct (the
    /// property names of a group of objects, which share one array of keys); nil when the two
    /// counts differ.
    public init?(uniqueKeys keys: [String], values: [Value]) {
        guard keys.count == values.count else { return nil }
        self.keys = keys
        self.values = values
    }

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }

    /// The value for a key; setting nil removes it.
    public subscript(key: String) -> Value? {
        get {
            guard let i = index(of: key) else { return nil }
            return values[i]
        }
        set {
            if let i = index(of: key) {
                if let newValue { values[i] = newValue } else { keys.remove(at: i); values.remove(at: i) }
            } else if let newValue {
                keys.append(key)
                values.append(newValue)
            }
        }
    }

    /// Where `key` is, its bytes compared.
    private func index(of key: String) -> Int? {
        keys.firstIndex { ExactText.same($0, key) }
    }

    /// Two documents are equal when they have the same keys, byte for byte, in the same order,
    /// with equal values.
    public static func == (a: Document, b: Document) -> Bool {
        a.keys.count == b.keys.count && zip(a.keys, b.keys).allSatisfy { ExactText.same($0, $1) } && a.values == b.values
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(keys.count)
        for k in keys { ExactText.hash(k, into: &hasher) }
        hasher.combine(values)
    }

    /// Appends without checking for an existing key (the caller knows the key is new).
    mutating func appendNew(_ key: String, _ value: Value) {
        keys.append(key)
        values.append(value)
    }

    public func makeIterator() -> Zip2Sequence<[String], [Value]>.Iterator {
        zip(keys, values).makeIterator()
    }
}

// MARK: - Reading values

extension Value {
    /// The string, when this is `.string`.
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    /// The integer, when this is `.int`.
    public var intValue: Int64? { if case .int(let i) = self { return i } else { return nil } }
    /// The number, when this is `.double`, `.float` or `.int`.
    public var doubleValue: Double? {
        switch self {
        case .double(let d): return d
        case .float(let f): return Double(f)
        case .int(let i): return Double(i)
        default: return nil
        }
    }
    /// The decimal, when this is `.decimal`.
    public var decimalValue: Decimal128? { if case .decimal(let d) = self { return d } else { return nil } }
    /// The flag, when this is `.bool`.
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    /// The elements, when this is `.list`.
    public var listValue: [Value]? { if case .list(let l) = self { return l } else { return nil } }
    /// The object, when this is `.object`.
    public var documentValue: Document? { if case .object(let d) = self { return d } else { return nil } }
}

extension Value: CustomStringConvertible {
    /// A literal-like rendering: strings quoted, lists in brackets, objects in braces.
    public var description: String {
        switch self {
        case .string(let s): return "\"\(s)\""
        case .list(let items): return "[" + items.map(\.description).joined(separator: ", ") + "]"
        case .object(let doc): return doc.description
        case .link(let l): return l.primaryKey.description
        default: return shortDescription
        }
    }
}

extension Document: CustomStringConvertible {
    public var description: String {
        "{" + zip(keys, values).map { "\($0): \($1)" }.joined(separator: ", ") + "}"
    }
}

// MARK: - Enums

extension Value {
    /// An enum stored as its raw value, as Realm stores enums.
    public init<E: RawRepresentable>(_ e: E) where E.RawValue == String { self = .string(e.rawValue) }

    /// An enum stored as its raw value, as Realm stores enums.
    public init<E: RawRepresentable>(_ e: E) where E.RawValue == Int { self = .int(Int64(e.rawValue)) }

    /// The case of an enum whose raw value this is, or nil.
    public func enumValue<E: RawRepresentable>(_ type: E.Type) -> E? where E.RawValue == String {
        stringValue.flatMap(E.init(rawValue:))
    }

    /// The case of an enum whose raw value this is, or nil.
    public func enumValue<E: RawRepresentable>(_ type: E.Type) -> E? where E.RawValue == Int {
        intValue.flatMap { Int(exactly: $0) }.flatMap(E.init(rawValue:))
    }
}

/// Text that equals and hashes by its UTF-8 bytes, as SQLite compares it. Swift's `String ==` is
/// canonical equivalence: a precomposed "é" equals "e" with a combining accent, which SQLite (and
/// Realm) keep apart, as two primary keys, two dictionary keys, two queries.
///
/// Every Swift set or dictionary keyed by text that holds user data (a primary key's text, a set
/// member's, a dictionary key) is keyed by this type.
public struct ExactText: Hashable, Sendable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let text: String
    public init(_ text: String) { self.text = text }
    public init(stringLiteral text: String) { self.text = text }

    public static func == (a: ExactText, b: ExactText) -> Bool { same(a.text, b.text) }
    public func hash(into hasher: inout Hasher) { Self.hash(text, into: &hasher) }
    /// Byte order (UTF-8 bytes compare as code points do).
    public static func < (a: ExactText, b: ExactText) -> Bool { a.text.utf8.lexicographicallyPrecedes(b.text.utf8) }
    public var description: String { text }

    /// Whether the text begins with `prefix`, byte for byte.
    public func hasPrefix(_ prefix: String) -> Bool { text.utf8.starts(with: prefix.utf8) }

    /// Whether two strings have the same UTF-8 bytes. Native strings are compared in place
    /// (about as fast as `String ==` on short ASCII keys, which `withUTF8` on copies was not:
    /// six times slower); others byte by byte.
    public static func same(_ a: String, _ b: String) -> Bool {
        let inPlace = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                x.count == y.count && (x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0)
            }
        }
        if let inPlace, let answer = inPlace { return answer }
        return a.utf8.elementsEqual(b.utf8)
    }

    public static func hash(_ text: String, into hasher: inout Hasher) {
        hasher.combine(text.utf8.count)
        // The same bytes fed the same way either way (a bridged string is copied first).
        if text.utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
            Array(text.utf8).withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }
}
