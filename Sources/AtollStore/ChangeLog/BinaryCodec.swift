import Foundation

// The change log's storage format: a compact binary encoding of instructions and values.
// It is private to the file (readers go through `Store.changes(after:)`); byte 0 of each chunk
// is the format version so that the format can evolve.

/// 2: a `listMove` carries the moved value (format 1 chunks, without it, are still read).
let changeLogFormat: UInt8 = 2
/// 3: the records of format 2 without their values, and a new object as a bare `create`
/// (what a file that keeps no values records; see `Store.recordsChangeLogValues`).
let changeLogFormatWithoutValues: UInt8 = 3

struct BinaryWriter {
    var bytes: [UInt8] = []
    /// Names (classes, properties) written so far: each is written in full once, then as its
    /// number. `names` keeps the order, so that a rollback can forget the newest ones.
    var nameNumbers: [String: Int] = [:]
    var names: [String] = []

    /// A name: `0` followed by the text the first time (numbered in order of appearance), then
    /// its number plus one.
    mutating func name(_ s: String) {
        if let k = nameNumbers[s] {
            varint(UInt64(k + 1))
        } else {
            nameNumbers[s] = names.count
            names.append(s)
            varint(0)
            string(s)
        }
    }

    /// Forgets names after the first `count` (with the bytes that defined them).
    mutating func forgetNames(after count: Int) {
        while names.count > count { nameNumbers[names.removeLast()] = nil }
    }

    mutating func byte(_ b: UInt8) { bytes.append(b) }

    mutating func varint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func signed(_ v: Int64) { varint(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }

    mutating func blob(_ b: [UInt8]) {
        varint(UInt64(b.count))
        bytes.append(contentsOf: b)
    }

    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { buf in
            varint(UInt64(buf.count))
            bytes.append(contentsOf: buf)
        }
    }

    mutating func value(_ v: Value) {
        switch v {
        case .null: byte(0)
        case .bool(let b): byte(b ? 2 : 1)
        case .int(let i): byte(3); signed(i)
        case .float(let f): byte(4); varint(UInt64(f.bitPattern))
        case .double(let d): byte(5); varint(d.bitPattern)
        case .string(let s): byte(6); string(s)
        case .data(let d): byte(7); blob(d)
        case .date(let t): byte(8); signed(t.milliseconds)
        case .objectId(let o): byte(9); bytes.append(contentsOf: o.bytes)
        case .uuid(let u): byte(10); withUnsafeBytes(of: u.uuid) { bytes.append(contentsOf: $0) }
        case .decimal(let d): byte(11); blob(d.sortKey)
        case .link(let l): byte(12); name(l.className); value(l.primaryKey)
        case .list(let items):
            byte(13)
            varint(UInt64(items.count))
            for item in items { value(item) }
        case .object(let doc):
            byte(14)
            varint(UInt64(doc.count))
            for (k, item) in doc { string(k); value(item) }
        }
    }

}

struct BinaryReader {
    let bytes: [UInt8]
    var offset = 0
    /// The names read so far (see `BinaryWriter.name`).
    var names: [String] = []

    mutating func name() throws -> String { names[try nameNumber()] }

    /// The number of the next name (its index in `names`).
    mutating func nameNumber() throws -> Int {
        let k = try varint()
        if k == 0 {
            names.append(try string())
            return names.count - 1
        }
        guard k <= UInt64(names.count) else { throw corrupt() }
        return Int(k - 1)
    }

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { offset >= bytes.count }

    func corrupt() -> AtollError { AtollError(.file, "the change log is corrupt (offset \(offset))") }

    mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw corrupt() }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            guard shift < 64 else { throw corrupt() }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
        }
    }

    mutating func signed() throws -> Int64 {
        let u = try varint()
        return Int64(bitPattern: (u >> 1) ^ (0 &- (u & 1)))
    }

    mutating func raw(_ n: Int) throws -> [UInt8] {
        guard n >= 0, offset + n <= bytes.count else { throw corrupt() }
        defer { offset += n }
        return Array(bytes[offset..<(offset + n)])
    }

    mutating func blob() throws -> [UInt8] { try raw(Int(clamping: try varint())) }

    mutating func string() throws -> String { String(decoding: try blob(), as: UTF8.self) }

    mutating func value() throws -> Value {
        switch try byte() {
        case 0: return .null
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .int(try signed())
        case 4: return .float(Float(bitPattern: UInt32(truncatingIfNeeded: try varint())))
        case 5: return .double(Double(bitPattern: try varint()))
        case 6: return .string(try string())
        case 7: return .data(try blob())
        case 8: return .date(Timestamp(milliseconds: try signed()))
        case 9:
            guard let o = ObjectId(bytes: try raw(12)) else { throw corrupt() }
            return .objectId(o)
        case 10:
            let b = try raw(16)
            return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
                                     b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])))
        case 11:
            guard let d = Decimal128(sortKey: try blob()) else { throw corrupt() }
            return .decimal(d)
        case 12: return .link(ObjectLink(className: try name(), primaryKey: try value()))
        case 13:
            let n = try varint()
            guard n <= UInt64(bytes.count) else { throw corrupt() }
            var items = [Value]()
            for _ in 0..<n { items.append(try value()) }
            return .list(items)
        case 14:
            let n = try varint()
            guard n <= UInt64(bytes.count) else { throw corrupt() }
            var doc = Document()
            for _ in 0..<n { doc.appendNew(try string(), try value()) }
            return .object(doc)
        default: throw corrupt()
        }
    }

}
