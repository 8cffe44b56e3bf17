import CSQLite
import Foundation

/// Registers the SQL functions compiled queries use:
/// `atoll_match(text, pattern, op, flags)` — op 0 equals, 1 begins with, 2 ends with,
/// 3 contains, 4 LIKE (`*` any run, `?` one character); flags 1 case-insensitive (full Unicode
/// lowercasing), 2 diacritic-insensitive. Null operands never match.
func registerQueryFunctions(_ conn: Connection) throws {
    let rc = sqlite3_create_function_v2(conn.db, "atoll_match", 4, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                        nil, atollMatch, nil, nil, nil)
    guard rc == SQLITE_OK else { throw conn.error(rc) }
}

private let atollMatch: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = { context, _, argv in
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
    let matched: Bool
    if flags == 0, op != 4 {  // LIKE's `?` is one character, not one byte
        matched = match(op, bytes(a), bytes(b))
    } else {
        let fold = { (raw: [UInt8]) -> [Unicode.Scalar] in
            var s = String(decoding: raw, as: UTF8.self)
            if flags & 2 != 0 { s = s.folding(options: .diacriticInsensitive, locale: nil) }
            if flags & 1 != 0 { s = s.lowercased() }
            return Array(s.unicodeScalars)
        }
        matched = match(op, fold(bytes(a)), fold(bytes(b)))
    }
    sqlite3_result_int(context, matched ? 1 : 0)
}

private func match<T: Equatable>(_ op: Int32, _ text: [T], _ pattern: [T]) -> Bool {
    switch op {
    case 0: return text == pattern
    case 1: return text.starts(with: pattern)
    case 2: return text.count >= pattern.count && Array(text.suffix(pattern.count)) == pattern
    case 3:
        if pattern.isEmpty { return true }
        guard text.count >= pattern.count else { return false }
        for start in 0...(text.count - pattern.count) where text[start] == pattern[0] {
            if Array(text[start..<(start + pattern.count)]) == pattern { return true }
        }
        return false
    case 4: return like(text, pattern)
    default: return false
    }
}

/// Wildcard match: `*` matches any run (also empty), `?` one element. Linear backtracking.
private func like<T: Equatable>(_ text: [T], _ pattern: [T]) -> Bool {
    let star: T?, question: T?
    if let p = pattern as? [UInt8] {
        star = UInt8(ascii: "*") as? T; question = UInt8(ascii: "?") as? T
        _ = p
    } else {
        star = Unicode.Scalar("*") as? T; question = Unicode.Scalar("?") as? T
    }
    var t = 0, p = 0
    var starAt = -1, resume = 0
    while t < text.count {
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
