import CSQLite
import Foundation

/// Registers the SQL functions compiled queries use:
/// `atoll_match(text, pattern, op, flags)` — op 0 equals, 1 begins with, 2 ends with,
/// 3 contains, 4 LIKE (`*` any run, `?` one character); flags 1 case-insensitive (full Unicode
/// lowercasing), 2 diacritic-insensitive. Null operands never match.
///
/// And, for the nested lists and dictionaries of mixed values (stored as a BLOB with the type
/// tag 'list' or 'dictionary', see Store+Mixed.swift):
/// `atoll_mixed_get(value, type, key, ...)` — the element at an index (negative: from the end;
/// for a dictionary, its n-th entry in key order) or under a text key, in its stored SQL form;
/// with more keys, the element each names inside the one before (a nested path in one call);
/// `atoll_mixed_type(value, type, key, ...)` — that element's type tag;
/// `atoll_mixed_size(value, type)` — the number of elements (null for other values).
/// Aggregates `atoll_decimal_sum(x)` and `atoll_decimal_avg(x)` of stored decimal128 values.
func registerQueryFunctions(_ conn: Connection) throws {
    let flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS
    // atoll_match gets the connection's deadline clock (the connection keeps it alive).
    let clock = Unmanaged.passUnretained(conn.clock).toOpaque()
    for (name, arity, function) in [("atoll_match", Int32(4), atollMatch), ("atoll_mixed_get", -1, mixedGet),
                                     ("atoll_mixed_type", -1, mixedType), ("atoll_mixed_size", 2, mixedSize)] {
        let rc = sqlite3_create_function_v2(conn.db, name, arity, flags, name == "atoll_match" ? clock : nil, function, nil, nil, nil)
        guard rc == SQLITE_OK else { throw conn.error(rc) }
    }
    for (name, final) in [("atoll_decimal_sum", decimalSumFinal), ("atoll_decimal_avg", decimalAvgFinal)] {
        let rc = sqlite3_create_function_v2(conn.db, name, 1, flags, nil, nil, decimalStep, final, nil)
        guard rc == SQLITE_OK else { throw conn.error(rc) }
    }
}

// MARK: - Sums and averages of decimal128

/// The running sum of `atoll_decimal_sum` / `atoll_decimal_avg` over stored decimal128 values
/// (their order-preserving BLOBs), in Foundation's Decimal (38 digits) so that adding 34-digit
/// values is exact; the result is rounded to the 34 digits of a decimal128. NaN, or infinities
/// of both signs, give NaN; one infinity gives it. Nulls are left out.
private final class DecimalAccumulator {
    var sum = Decimal(0)
    var count = 0
    var special: Decimal128?
    var nan = false

    func add(_ d: Decimal128) {
        count += 1
        switch d.kind {
        case .finite: sum += Decimal(string: d.description) ?? 0
        case .nan: nan = true
        default:
            if let s = special, s != d { nan = true }
            special = d
        }
    }

    func result(average: Bool) -> Decimal128? {
        if nan { return Decimal128("NaN") }
        if let special { return special }
        guard count > 0 else { return average ? nil : .zero }
        var value = average ? sum / Decimal(count) : sum
        // At most 34 significant digits: round the fraction to what the integer part leaves.
        let text = NSDecimalNumber(decimal: value < 0 ? -value : value).stringValue
        let integerDigits = max(1, text.prefix { $0 != "." }.count)
        var rounded = Decimal()
        NSDecimalRound(&rounded, &value, max(0, 34 - integerDigits), .plain)
        return Decimal128(NSDecimalNumber(decimal: rounded).stringValue)
    }
}

private func accumulator(_ context: OpaquePointer?, create: Bool) -> DecimalAccumulator? {
    let size = Int32(MemoryLayout<UnsafeMutableRawPointer?>.size)
    guard let slot = sqlite3_aggregate_context(context, create ? size : 0) else { return nil }
    let pointer = slot.assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
    if let existing = pointer.pointee { return Unmanaged<DecimalAccumulator>.fromOpaque(existing).takeUnretainedValue() }
    guard create else { return nil }
    let made = DecimalAccumulator()
    pointer.pointee = Unmanaged.passRetained(made).toOpaque()
    return made
}

private let decimalStep: SQLFunction = { context, _, argv in
    guard let argv, let v = argv[0], sqlite3_value_type(v) == SQLITE_BLOB,
          let acc = accumulator(context, create: true) else { return }
    let n = Int(sqlite3_value_bytes(v))
    guard n > 0, let p = sqlite3_value_blob(v),
          let d = Decimal128(sortKey: Array(UnsafeRawBufferPointer(start: p, count: n))) else { return }
    acc.add(d)
}

private func decimalFinal(_ context: OpaquePointer?, average: Bool) {
    let acc = accumulator(context, create: false)
    defer {
        if let slot = sqlite3_aggregate_context(context, 0),
           let p = slot.assumingMemoryBound(to: UnsafeMutableRawPointer?.self).pointee {
            Unmanaged<DecimalAccumulator>.fromOpaque(p).release()
        }
    }
    let value = acc?.result(average: average) ?? (average ? nil : .zero)
    guard let value else { return sqlite3_result_null(context) }
    result(context, .blob(value.sortKey))
}

private let decimalSumFinal: @convention(c) (OpaquePointer?) -> Void = { decimalFinal($0, average: false) }
private let decimalAvgFinal: @convention(c) (OpaquePointer?) -> Void = { decimalFinal($0, average: true) }

typealias SQLFunction = @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void

/// The nested collection a mixed value holds, decoded; nil for other values.
private func nestedCollection(_ argv: UnsafeMutablePointer<OpaquePointer?>) -> Value? {
    guard let value = argv[0], let type = argv[1], sqlite3_value_type(type) == SQLITE_TEXT,
          sqlite3_value_type(value) == SQLITE_BLOB, let text = sqlite3_value_text(type) else { return nil }
    let tag = String(cString: text)
    guard tag == MixedTag.list || tag == MixedTag.dictionary else { return nil }
    let n = Int(sqlite3_value_bytes(value))
    guard n > 0, let p = sqlite3_value_blob(value) else { return nil }
    var reader = BinaryReader(Array(UnsafeRawBufferPointer(start: p, count: n)))
    return try? reader.value()
}

/// The element of a nested collection that the keys `argv[2]`, `argv[3]`… name, each inside the
/// one before.
private func nestedElement(_ argc: Int32, _ argv: UnsafeMutablePointer<OpaquePointer?>) -> Value? {
    guard argc >= 3, var current = nestedCollection(argv) else { return nil }
    for n in 2..<Int(argc) {
        guard let key = argv[n] else { return nil }
        if sqlite3_value_type(key) == SQLITE_INTEGER {
            let i = Int(sqlite3_value_int64(key))
            let values: [Value]
            switch current {
            case .list(let items): values = items
            case .object(let doc): values = doc.values
            default: return nil
            }
            let index = i < 0 ? values.count + i : i
            guard values.indices.contains(index) else { return nil }
            current = values[index]
        } else {
            guard sqlite3_value_type(key) == SQLITE_TEXT, case .object(let doc) = current, let text = sqlite3_value_text(key),
                  let next = doc[String(cString: text)] else { return nil }
            current = next
        }
    }
    return current
}

/// A value of a nested collection in the stored form of mixed values: (SQL value, type tag).
private func storedForm(_ v: Value) -> (SQLValue, String?) {
    switch v {
    case .null: return (.null, nil)
    case .link(let l): return (.null, MixedTag.linkPrefix + l.className)
    case .list, .object:
        var w = BinaryWriter()
        w.value(v)
        return (.blob(w.bytes), v.listValue != nil ? MixedTag.list : MixedTag.dictionary)
    default:
        let type = v.scalarType!
        return (type.sqlValue(v), type.rawValue)
    }
}

private func result(_ context: OpaquePointer?, _ v: SQLValue) {
    switch v {
    case .null: sqlite3_result_null(context)
    case .integer(let i): sqlite3_result_int64(context, i)
    case .real(let d): sqlite3_result_double(context, d)
    case .text(let s): sqlite3_result_text(context, s, -1, sqliteTransient)
    case .blob(let b): b.withUnsafeBytes { sqlite3_result_blob(context, $0.baseAddress, Int32($0.count), sqliteTransient) }
    }
}

private let mixedGet: SQLFunction = { context, argc, argv in
    guard let argv, let element = nestedElement(argc, argv) else { return sqlite3_result_null(context) }
    result(context, storedForm(element).0)
}

private let mixedType: SQLFunction = { context, argc, argv in
    guard let argv, let element = nestedElement(argc, argv), let tag = storedForm(element).1 else { return sqlite3_result_null(context) }
    result(context, .text(tag))
}

private let mixedSize: SQLFunction = { context, _, argv in
    guard let argv else { return sqlite3_result_null(context) }
    switch nestedCollection(argv) {
    case .list(let items)?: sqlite3_result_int64(context, Int64(items.count))
    case .object(let doc)?: sqlite3_result_int64(context, Int64(doc.count))
    default: sqlite3_result_null(context)
    }
}

private let atollMatch: SQLFunction = { context, _, argv in
    guard let argv, let a = argv[0], let b = argv[1],
          sqlite3_value_type(a) != SQLITE_NULL, sqlite3_value_type(b) != SQLITE_NULL else {
        sqlite3_result_int(context, 0)
        return
    }
    let op = sqlite3_value_int(argv[2])
    let flags = sqlite3_value_int(argv[3])
    func bytes(_ v: OpaquePointer) -> [UInt8] {
        if sqlite3_value_type(v) == SQLITE_BLOB {
            let n = Int(sqlite3_value_bytes(v))
            guard n > 0, let p = sqlite3_value_blob(v) else { return [] }
            return Array(UnsafeRawBufferPointer(start: p, count: n))
        }
        let p = sqlite3_value_text(v)
        let n = Int(sqlite3_value_bytes(v))
        guard let p else { return [] }
        return Array(UnsafeBufferPointer(start: p, count: n))
    }
    // A query with a deadline stops here too: a match over a large text is one call, which
    // SQLite's progress handler cannot interrupt.
    let clock = sqlite3_user_data(context).map { Unmanaged<Connection.Clock>.fromOpaque($0).takeUnretainedValue() }
    let expired = { clock?.expired ?? false }
    func fold(_ raw: [UInt8]) -> String {
        var s = String(decoding: raw, as: UTF8.self)
        if flags & 2 != 0 { s = s.folding(options: .diacriticInsensitive, locale: nil) }
        if flags & 1 != 0 { s = s.lowercased() }
        return s
    }
    let matched: Bool?
    if op == 4 {
        // LIKE's `?` is one character, not one byte.
        if flags == 0 {
            matched = like(Array(String(decoding: bytes(a), as: UTF8.self).unicodeScalars),
                           Array(String(decoding: bytes(b), as: UTF8.self).unicodeScalars), expired)
        } else {
            matched = like(Array(fold(bytes(a)).unicodeScalars), Array(fold(bytes(b)).unicodeScalars), expired)
        }
    } else if flags == 0 {
        matched = match(op, bytes(a), bytes(b))
    } else {
        // Folded text compares as its UTF-8 bytes: UTF-8 matches only at character boundaries.
        matched = match(op, Array(fold(bytes(a)).utf8), Array(fold(bytes(b)).utf8))
    }
    guard let matched else {
        // An error, not a false: a statement near its end would otherwise finish with it.
        sqlite3_result_error(context, "the query ran past its time budget", -1)
        return
    }
    sqlite3_result_int(context, matched ? 1 : 0)
}

/// Equals, begins with, ends with or contains, over bytes; `contains` by the C library's
/// `memmem` (linear time: a pattern built to make a naive search quadratic does not).
private func match(_ op: Int32, _ text: [UInt8], _ pattern: [UInt8]) -> Bool {
    switch op {
    case 0: return text == pattern
    case 1: return text.starts(with: pattern)
    case 2: return text.count >= pattern.count && text.suffix(pattern.count).elementsEqual(pattern)
    case 3:
        if pattern.isEmpty { return true }
        guard text.count >= pattern.count else { return false }
        return text.withUnsafeBytes { t in pattern.withUnsafeBytes { p in memmem(t.baseAddress, t.count, p.baseAddress, p.count) != nil } }
    default: return false
    }
}

/// Wildcard match: `*` matches any run (also empty), `?` one element, backtracking to the last
/// star only; nil when `expired` says to stop (checked every few thousand steps: the worst case
/// is the product of the lengths).
private func like<T: Equatable>(_ text: [T], _ pattern: [T], _ expired: () -> Bool) -> Bool? {
    let star: T?, question: T?
    if let p = pattern as? [UInt8] {
        star = UInt8(ascii: "*") as? T; question = UInt8(ascii: "?") as? T
        _ = p
    } else {
        star = Unicode.Scalar("*") as? T; question = Unicode.Scalar("?") as? T
    }
    var t = 0, p = 0
    var starAt = -1, resume = 0
    var steps = 0
    while t < text.count {
        steps += 1
        if steps & 0xFFF == 0, expired() { return nil }
        if p < pattern.count, pattern[p] == question || pattern[p] == text[t] && pattern[p] != star {
            t += 1; p += 1
        } else if p < pattern.count, pattern[p] == star {
            starAt = p; resume = t; p += 1
        } else if starAt >= 0 {
            p = starAt + 1; resume += 1; t = resume
        } else {
            return false
        }
    }
    while p < pattern.count, pattern[p] == star { p += 1 }
    return p == pattern.count
}
