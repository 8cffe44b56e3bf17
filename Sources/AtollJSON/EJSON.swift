import AtollStore
import CJansson
import Foundation

/// A jansson value: `json_t *`.
public typealias JSONRef = UnsafeMutablePointer<json_t>

/// Converts between `Value` and JSON text or jansson values, with MongoDB Extended JSON v2
/// (relaxed) for the types JSON lacks: `{"$oid"}`, `{"$date"}`, `{"$uuid"}`,
/// `{"$numberDecimal"}`, `{"$binary"}`, `{"$numberLong"}`, `{"$numberDouble"}`, and links as
/// DBRefs, `{"$ref": "Dog", "$id": 5}`. Decoding also takes `{"$numberFloat": "1.5"}`, a 32-bit
/// float (not MongoDB's), which realm exports write for floats inside mixed values.
///
/// Decoding is loose about numbers (a JSON integer is `.int`, a real `.double`); the store coerces
/// values to each property's type.
public enum EJSON {
    // jansson's flags (macros in C).
    static let decodeAny = 0x4
    static let allowNul = 0x10
    static let compact = 0x20
    static let encodeAny = 0x200

    // MARK: - Text

    /// Parses JSON text (any value at the top).
    /// - Throws: `.invalidJSON` with jansson's message, line and column, or for bad EJSON.
    public static func parse(_ text: UnsafePointer<CChar>) throws -> Value {
        let json = try load(text)
        defer { json_decref(json) }
        return try value(json)
    }

    public static func parse(_ text: String) throws -> Value {
        try text.withCString { try parse($0) }
    }

    /// Parses JSON text into a jansson value (new reference).
    public static func load(_ text: UnsafePointer<CChar>) throws -> JSONRef {
        var error = json_error_t()
        guard let json = json_loads(text, Int(decodeAny | allowNul), &error) else {
            let message = withUnsafeBytes(of: error.text) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            throw AtollError(.invalidJSON, "invalid JSON: \(message) (line \(error.line), column \(error.column))")
        }
        return json
    }

    /// Compact JSON text of a value.
    public static func serialize(_ v: Value) -> String {
        let json = make(v)
        defer { json_decref(json) }
        return dump(json)
    }

    /// Compact JSON text of a jansson value.
    public static func dump(_ json: JSONRef) -> String {
        guard let text = json_dumps(json, Int(compact | encodeAny)) else { return "null" }
        defer { free(text) }
        return String(cString: text)
    }

    /// Compact JSON text as a `malloc`ed C string (for the C ABI, freed with `free`).
    public static func dumpC(_ json: JSONRef) -> UnsafeMutablePointer<CChar>? {
        json_dumps(json, Int(compact | encodeAny))
    }

    // MARK: - Decoding

    /// The value of a jansson value.
    /// - Throws: `.invalidJSON` for malformed Extended JSON.
    public static func value(_ json: JSONRef) throws -> Value {
        switch json.pointee.type {
        case JSON_NULL: return .null
        case JSON_TRUE: return .bool(true)
        case JSON_FALSE: return .bool(false)
        case JSON_INTEGER: return .int(Int64(json_integer_value(json)))
        case JSON_REAL: return .double(json_real_value(json))
        case JSON_STRING: return .string(try validString(json))
        case JSON_ARRAY:
            var items = [Value]()
            let n = json_array_size(json)
            items.reserveCapacity(n)
            for i in 0..<n { items.append(try value(json_array_get(json, i))) }
            return .list(items)
        case JSON_OBJECT:
            if let special = try extended(json) { return special }
            return .object(try document(json))
        default:
            throw AtollError(.invalidJSON, "unknown JSON value type")
        }
    }

    /// The properties of a JSON object, in order.
    /// - Throws: `.invalidJSON` when `json` is not an object.
    public static func document(_ json: JSONRef) throws -> Document {
        guard json.pointee.type == JSON_OBJECT else {
            throw AtollError(.invalidJSON, "expected a JSON object, got \(kind(json))")
        }
        var pairs = [(String, Value)]()
        var iter = json_object_iter(json)
        while let it = iter {
            let raw = json_object_iter_key(it)!
            guard let key = String(validatingCString: raw) else {
                throw AtollError(.invalidJSON, "an object key is not valid UTF-8")
            }
            pairs.append((key, try value(json_object_iter_value(it))))
            iter = json_object_iter_next(json, it)
        }
        return Document(uniqueKeys: pairs)
    }

    /// A JSON string's text, checked: jansson validates text it parses, but a host may build a
    /// `json_t` with `json_string_nocheck` from any bytes.
    static func validString(_ json: JSONRef) throws -> String {
        let n = json_string_length(json)
        guard let p = json_string_value(json) else { return "" }
        let s = p.withMemoryRebound(to: UInt8.self, capacity: n) {
            String(validating: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self)
        }
        guard let s else { throw AtollError(.invalidJSON, "a string is not valid UTF-8") }
        return s
    }

    /// A short name of a jansson value's type, for messages.
    public static func kind(_ json: JSONRef) -> String {
        switch json.pointee.type {
        case JSON_OBJECT: return "an object"
        case JSON_ARRAY: return "an array"
        case JSON_STRING: return "a string"
        case JSON_INTEGER: return "an integer"
        case JSON_REAL: return "a real number"
        case JSON_TRUE, JSON_FALSE: return "a boolean"
        default: return "null"
        }
    }

    /// An Extended JSON value (`{"$oid": …}` …), or nil when `json` is an ordinary object.
    private static func extended(_ json: JSONRef) throws -> Value? {
        // Most objects are plain: look at the first key's first byte before making a String.
        guard let it = json_object_iter(json), let first = json_object_iter_key(it),
              first.pointee == 0x24 /* "$" */ else { return nil }
        let key = String(cString: first)
        let size = json_object_size(json)
        let inner = json_object_iter_value(it)!
        func text(_ what: String) throws -> String {
            guard size == 1, inner.pointee.type == JSON_STRING else {
                throw AtollError(.invalidJSON, "\(key) must be an object with one string value (\(what))")
            }
            return try validString(inner)
        }
        switch key {
        case "$ref", "$id":
            // A link (MongoDB's DBRef): {"$ref": "Dog", "$id": <primary key>}, keys in any order.
            guard size == 2, let ref = json_object_get(json, "$ref"), ref.pointee.type == JSON_STRING,
                  let id = json_object_get(json, "$id") else {
                throw AtollError(.invalidJSON, "a link must be {\"$ref\": \"<class>\", \"$id\": <primary key>}")
            }
            return .link(ObjectLink(className: try validString(ref), primaryKey: try value(id)))
        case "$oid":
            let hex = try text("24 hexadecimal digits")
            guard let oid = ObjectId(hex: hex) else { throw AtollError(.invalidJSON, "invalid $oid '\(hex)': expected 24 hexadecimal digits") }
            return .objectId(oid)
        case "$uuid":
            let s = try text("a UUID")
            guard let u = UUID(uuidString: s) else { throw AtollError(.invalidJSON, "invalid $uuid '\(s)'") }
            return .uuid(u)
        case "$numberDecimal":
            let s = try text("a decimal number")
            guard let d = Decimal128(s) else {
                throw AtollError(.invalidJSON, "invalid $numberDecimal '\(s)': not a decimal128 (at most 34 significant digits)")
            }
            return .decimal(d)
        case "$numberLong", "$numberInt":
            let s = try text("an integer")
            guard let i = Int64(s) else { throw AtollError(.invalidJSON, "invalid \(key) '\(s)'") }
            return .int(i)
        case "$numberDouble":
            let s = try text("a number")
            guard let d = nonFinite(s) ?? Double(s) else { throw AtollError(.invalidJSON, "invalid $numberDouble '\(s)'") }
            return .double(d)
        case "$numberFloat":
            // Not MongoDB's: a 32-bit float, which a plain JSON number cannot tell from a double.
            // Exports write it for floats inside mixed values (docs/cli.md).
            let s = try text("a number")
            guard let f = nonFinite(s).map(Float.init) ?? Float(s) else { throw AtollError(.invalidJSON, "invalid $numberFloat '\(s)'") }
            return .float(f)
        case "$date":
            guard size == 1 else { throw AtollError(.invalidJSON, "$date must be the object's only key") }
            switch inner.pointee.type {
            case JSON_STRING:
                let s = try validString(inner)
                guard let t = Timestamp(iso8601: s) else {
                    throw AtollError(.invalidJSON, "invalid $date '\(s)': expected ISO 8601 such as 2026-01-01T00:00:00Z")
                }
                return .date(t)
            case JSON_INTEGER:
                return .date(Timestamp(milliseconds: Int64(json_integer_value(inner))))
            case JSON_OBJECT:
                guard case .int(let ms) = try value(inner) else {
                    throw AtollError(.invalidJSON, "invalid $date: expected {\"$numberLong\": \"<milliseconds>\"}")
                }
                return .date(Timestamp(milliseconds: ms))
            default:
                throw AtollError(.invalidJSON, "invalid $date: expected a string, an integer or {\"$numberLong\": …}")
            }
        case "$binary":
            // Canonical: {"$binary": {"base64": …, "subType": "xx"}}; legacy: {"$binary": "…", "$type": "xx"}.
            var base64: String?
            var subType: String?
            if inner.pointee.type == JSON_OBJECT, size == 1 {
                if let b = json_object_get(inner, "base64"), b.pointee.type == JSON_STRING { base64 = try validString(b) }
                if let t = json_object_get(inner, "subType"), t.pointee.type == JSON_STRING { subType = try validString(t) }
            } else if inner.pointee.type == JSON_STRING, size == 2, let t = json_object_get(json, "$type"),
                      t.pointee.type == JSON_STRING {
                base64 = try validString(inner)
                subType = try validString(t)
            }
            guard let base64, let subType, let bytes = Data(base64Encoded: base64), let sub = UInt8(subType, radix: 16) else {
                throw AtollError(.invalidJSON, "invalid $binary: expected {\"base64\": \"…\", \"subType\": \"00\"}")
            }
            if sub == 4 {
                guard bytes.count == 16 else { throw AtollError(.invalidJSON, "invalid $binary subtype 04: a UUID has 16 bytes") }
                let b = Array(bytes)
                return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                                         b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])))
            }
            return .data(Array(bytes))
        default:
            throw AtollError(.invalidJSON, "unknown Extended JSON type '\(key)' (an object whose first key starts with '$' is an Extended JSON value; dictionary keys cannot start with '$')")
        }
    }

    /// The non-finite numbers of `$numberDouble` and `$numberFloat`: "Infinity", "-Infinity", "NaN".
    private static func nonFinite(_ s: String) -> Double? {
        switch s {
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        case "NaN": return .nan
        default: return nil
        }
    }

    // MARK: - Encoding

    /// A new jansson value (new reference) for a value. Links become their primary key.
    public static func make(_ v: Value) -> JSONRef {
        switch v {
        case .null: return json_null()
        case .bool(let b): return b ? json_true() : json_false()
        case .int(let i): return json_integer(json_int_t(i))
        case .float(let f):
            return real(Double("\(f)") ?? Double(f))
        case .double(let d): return real(d)
        case .string(let s): return makeString(s)
        case .data(let d):
            return wrap("$binary", wrap2("base64", makeString(Data(d).base64EncodedString()), "subType", makeString("00")))
        case .date(let t):
            if (0...253_402_300_799_999).contains(t.milliseconds) { return wrap("$date", makeString(t.iso8601)) }
            return wrap("$date", wrap("$numberLong", makeString(String(t.milliseconds))))
        case .objectId(let o): return wrap("$oid", makeString(o.hex))
        case .uuid(let u): return wrap("$uuid", makeString(u.uuidString.lowercased()))
        case .decimal(let d): return wrap("$numberDecimal", makeString(d.description))
        case .link(let l): return wrap2("$ref", makeString(l.className), "$id", make(l.primaryKey))
        case .list(let items):
            let array = json_array()!
            for item in items { json_array_append_new(array, make(item)) }
            return array
        case .object(let doc): return make(doc)
        }
    }

    /// A new jansson object (new reference) for a document.
    public static func make(_ doc: Document) -> JSONRef {
        let object = json_object()!
        for (k, item) in doc { json_object_set_new(object, k, make(item)) }
        return object
    }

    private static func real(_ d: Double) -> JSONRef {
        if d.isNaN { return wrap("$numberDouble", makeString("NaN")) }
        if d.isInfinite { return wrap("$numberDouble", makeString(d > 0 ? "Infinity" : "-Infinity")) }
        return json_real(d)
    }

    static func makeString(_ s: String) -> JSONRef {
        var s = s
        return s.withUTF8 { buf in
            guard let base = buf.baseAddress, buf.count > 0 else { return json_string("")! }
            return base.withMemoryRebound(to: CChar.self, capacity: buf.count) { json_stringn_nocheck($0, buf.count)! }
        }
    }

    private static func wrap(_ key: String, _ value: JSONRef) -> JSONRef {
        let object = json_object()!
        json_object_set_new(object, key, value)
        return object
    }

    private static func wrap2(_ k1: String, _ v1: JSONRef, _ k2: String, _ v2: JSONRef) -> JSONRef {
        let object = json_object()!
        json_object_set_new(object, k1, v1)
        json_object_set_new(object, k2, v2)
        return object
    }
}
