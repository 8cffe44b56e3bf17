import Foundation

// How a property's values are checked, stored in SQLite and read back.
extension Property {
    /// The value a new object gets when it leaves the property out.
    public var implicitDefault: Value {
        if let defaultValue { return defaultValue }
        if collection == .dictionary { return .object(Document()) }
        if isCollection { return .list([]) }
        if isOptional { return .null }
        return type.zeroValue
    }

    /// Checks a value (one element, for lists) against the property's type and returns it in
    /// its canonical form (a JSON number written for a double property becomes `.double`...).
    /// Links and embedded objects are resolved by the writer, not here.
    /// - Throws: `.missingValue` for null in a required property, `.typeMismatch` otherwise.
    func coerce(_ value: Value, className: String) throws -> Value {
        if case .null = value {
            if isOptional { return .null }
            throw AtollError(.missingValue, "property '\(className).\(name)' is required (\(typeName)) and cannot be null")
        }
        if let v = type.coerce(value) { return v }
        throw AtollError(.typeMismatch,
                         "property '\(className).\(name)' is \(typeName); got \(value.kindName) \(value.shortDescription)")
    }
}

extension PropertyType {
    /// The default of a required property of this type: false, 0, "", empty data, the epoch,
    /// the zero ObjectId / UUID.
    var zeroValue: Value {
        switch self {
        case .bool: return .bool(false)
        case .int: return .int(0)
        case .float: return .float(0)
        case .double: return .double(0)
        case .string: return .string("")
        case .data: return .data([])
        case .date: return .date(Timestamp(milliseconds: 0))
        case .objectId: return .objectId(ObjectId(bytes: [UInt8](repeating: 0, count: 12))!)
        case .uuid: return .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        case .decimal128: return .decimal(.zero)
        case .object, .mixed, .linkingObjects: return .null
        }
    }

    /// The canonical value of this type for `value`, or nil when it is not one. Numbers convert
    /// between numeric types where no information is lost (an integral double for an int).
    func coerce(_ value: Value) -> Value? {
        switch (self, value) {
        case (.bool, .bool), (.string, .string), (.data, .data), (.date, .date),
             (.objectId, .objectId), (.uuid, .uuid), (.decimal128, .decimal), (.int, .int), (.double, .double),
             (.float, .float):
            return value
        case (.int, .double(let d)):
            guard d.rounded() == d, let i = Int64(exactly: d) else { return nil }
            return .int(i)
        case (.int, .float(let f)):
            guard let i = Int64(exactly: f) else { return nil }
            return .int(i)
        case (.float, .int(let i)): return .float(Float(i))
        case (.float, .double(let d)): return .float(Float(d))
        case (.double, .int(let i)): return .double(Double(i))
        case (.double, .float(let f)): return .double(Double(f))
        case (.decimal128, .int(let i)): return .decimal(Decimal128(i))
        case (.decimal128, .double(let d)): return Decimal128(d).map { .decimal($0) }
        case (.decimal128, .float(let f)): return Decimal128(Double(f)).map { .decimal($0) }
        case (.mixed, _): return value
        default: return nil
        }
    }

    /// The SQLite column type (tables are STRICT).
    var sqlType: String {
        switch self {
        case .bool, .int, .date, .object: return "INTEGER"
        // ANY, not REAL: a REAL column stores -0.0 as the integer 0. NaN, which SQLite turns
        // into NULL, is stored as a BLOB of its bits (see sqlValue).
        case .float, .double: return "ANY"
        case .string: return "TEXT"
        case .data, .objectId, .uuid, .decimal128: return "BLOB"
        // The value in its own type's SQL form, beside a type column (see Store+Mixed.swift).
        case .mixed: return "ANY"
        case .linkingObjects: return ""
        }
    }

    /// A canonical value in its SQL form. Links must be resolved to row keys before.
    func sqlValue(_ value: Value) -> SQLValue {
        switch value {
        case .null: return .null
        case .bool(let b): return .integer(b ? 1 : 0)
        case .int(let i): return .integer(i)
        case .float(let f): return Self.real(Double(f))
        case .double(let d): return Self.real(d)
        case .string(let s): return .text(s)
        case .data(let d): return .blob(d)
        case .date(let t): return .integer(t.milliseconds)
        case .objectId(let o): return .blob(o.bytes)
        case .uuid(let u): return .blob(withUnsafeBytes(of: u.uuid) { Array($0) })
        case .decimal(let d): return .blob(d.sortKey)
        case .link, .list, .object: return .null
        }
    }

    /// A double in SQL form: NaN as the BLOB of its 8 bits (little-endian), since SQLite stores
    /// a NaN REAL as NULL.
    static func real(_ d: Double) -> SQLValue {
        guard d.isNaN else { return .real(d) }
        return .blob(withUnsafeBytes(of: d.bitPattern.littleEndian) { Array($0) })
    }

    private static func nan(_ b: [UInt8]) -> Double {
        guard b.count == 8 else { return .nan }
        return Double(bitPattern: b.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) })
    }

    /// Reads a value of this type back from its SQL form.
    func value(_ sql: SQLValue) -> Value {
        switch (self, sql) {
        case (_, .null): return .null
        case (.bool, .integer(let i)): return .bool(i != 0)
        case (.int, .integer(let i)): return .int(i)
        case (.float, .real(let d)): return .float(Float(d))
        case (.float, .integer(let i)): return .float(Float(i))
        case (.float, .blob(let b)): return .float(Float(Self.nan(b)))
        case (.double, .blob(let b)): return .double(Self.nan(b))
        case (.double, .real(let d)): return .double(d)
        case (.double, .integer(let i)): return .double(Double(i))
        case (.string, .text(let s)): return .string(s)
        case (.data, .blob(let b)): return .data(b)
        case (.date, .integer(let i)): return .date(Timestamp(milliseconds: i))
        case (.objectId, .blob(let b)): return ObjectId(bytes: b).map { .objectId($0) } ?? .null
        case (.uuid, .blob(let b)) where b.count == 16:
            return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                                     b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])))
        case (.decimal128, .blob(let b)): return Decimal128(sortKey: b).map { .decimal($0) } ?? .null
        case (.object, .integer(let i)): return .int(i)
        default: return .null
        }
    }
}

extension Value {
    /// A short rendering for error messages.
    var shortDescription: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return String(b)
        case .int(let i): return String(i)
        case .float(let f): return String(f)
        case .double(let d): return String(d)
        case .string(let s): return "'" + (s.count > 40 ? String(s.prefix(40)) + "…" : s) + "'"
        case .data(let d): return "<\(d.count) bytes>"
        case .date(let t): return t.iso8601
        case .objectId(let o): return "oid(\(o.hex))"
        case .uuid(let u): return "uuid(\(u.uuidString.lowercased()))"
        case .decimal(let d): return d.description
        case .link(let l): return "\(l.className)(\(l.primaryKey.shortDescription))"
        case .list(let l): return "[\(l.count) values]"
        case .object: return "{object}"
        }
    }
}
