import AtollStore
import CJansson
import Foundation

/// Reads a JSON file too large to parse whole: the caller walks the outer structure byte by byte
/// (`skipWhitespace`, `expect`, `peek`), and `value()` hands one complete inner value (an object,
/// an array, a string, a number...) to jansson. Only one inner value is in memory at a time.
///
/// Errors are `.invalidJSON` naming the byte offset in the file.
final class JSONStreamReader {
    private let file: UnsafeMutablePointer<FILE>
    private let name: String
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var position = 0
    private var count = 0
    /// The offset in the file of `buffer[0]`.
    private var bufferStart: Int64 = 0
    /// The bytes of the value being read.
    private var scratch = [UInt8]()

    /// Opens `path` for reading.
    /// - Throws: `.file` when it cannot be opened.
    init(path: String) throws {
        guard let file = fopen(path, "rb") else {
            throw AtollError(.file, "cannot open '\(path)': \(String(cString: strerror(errno)))")
        }
        self.file = file
        name = path
    }

    deinit { fclose(file) }

    /// The offset in the file of the next byte.
    var offset: Int64 { bufferStart + Int64(position) }

    /// Continues reading at an offset (one that `offset` gave).
    func seek(to offset: Int64) throws {
        guard fseeko(file, off_t(offset), SEEK_SET) == 0 else {
            throw AtollError(.file, "cannot seek in '\(name)': \(String(cString: strerror(errno)))")
        }
        bufferStart = offset
        position = 0
        count = 0
    }

    /// The next byte, not consumed; nil at the end of the file.
    func peek() throws -> UInt8? {
        if position == count, try !refill() { return nil }
        return buffer[position]
    }

    private func refill() throws -> Bool {
        bufferStart += Int64(count)
        position = 0
        count = buffer.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
        if count == 0, ferror(file) != 0 {
            throw AtollError(.file, "cannot read '\(name)': \(String(cString: strerror(errno)))")
        }
        return count > 0
    }

    func skipWhitespace() throws {
        while let b = try peek(), b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { position += 1 }
    }

    /// Skips whitespace, then consumes `byte` or fails naming what was expected.
    func expect(_ byte: UInt8, _ what: String) throws {
        try skipWhitespace()
        guard try peek() == byte else { throw unexpected(what) }
        position += 1
    }

    /// Skips whitespace, then consumes `byte` when it comes next.
    func consume(_ byte: UInt8) throws -> Bool {
        try skipWhitespace()
        guard try peek() == byte else { return false }
        position += 1
        return true
    }

    /// An error for what comes next, when `what` was expected.
    func unexpected(_ what: String) -> AtollError {
        let found: String
        if let b = try? peek() {
            found = b >= 0x20 && b < 0x7F ? "'\(Character(Unicode.Scalar(b)))'" : String(format: "byte 0x%02x", b)
        } else {
            found = "the end of the file"
        }
        return AtollError(.invalidJSON, "invalid JSON at byte \(offset): expected \(what), found \(found)")
    }

    /// Skips whitespace and parses the next complete JSON value (a new reference).
    func value() throws -> JSONRef {
        try skipWhitespace()
        let start = offset
        try scan()
        guard !scratch.isEmpty else { throw unexpected("a value") }
        var error = json_error_t()
        let json = scratch.withUnsafeBytes { raw in
            json_loadb(raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count,
                       Int(EJSON.decodeAny | EJSON.allowNul), &error)
        }
        guard let json else {
            let message = withUnsafeBytes(of: error.text) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            throw AtollError(.invalidJSON, "invalid JSON at byte \(start + Int64(max(0, error.position - 1))): \(message)")
        }
        return json
    }

    /// Skips whitespace and parses the next value, which must be a string.
    func string(_ what: String) throws -> String {
        try skipWhitespace()
        guard try peek() == 0x22 else { throw unexpected(what) }
        let json = try value()
        defer { json_decref(json) }
        return try EJSON.validString(json)
    }

    /// Copies the bytes of the next value into `scratch`: to the bracket that closes it, the quote
    /// that ends it, or (numbers, literals) the next delimiter. jansson checks what is inside.
    private func scan() throws {
        scratch.removeAll(keepingCapacity: true)
        guard let first = try peek() else { throw unexpected("a value") }
        let start = offset
        var depth = 0
        var inString = false
        var escaped = false
        while true {
            if position == count, try !refill() {
                if depth == 0, !inString, first != 0x22 { return }   // a number or literal at the end
                throw AtollError(.invalidJSON, "invalid JSON: the value at byte \(start) is not finished at the end of the file")
            }
            let b = buffer[position]
            if inString {
                position += 1
                scratch.append(b)
                if escaped { escaped = false } else if b == 0x5C { escaped = true } else if b == 0x22 {
                    inString = false
                    if depth == 0 { return }
                }
                continue
            }
            switch b {
            case 0x22:
                inString = true
            case 0x7B, 0x5B:
                depth += 1
            case 0x7D, 0x5D:
                if depth == 0 { return }   // the end of the enclosing structure, after a literal
                depth -= 1
            case 0x2C, 0x20, 0x0A, 0x0D, 0x09:
                if depth == 0 { return }
            default:
                break
            }
            position += 1
            scratch.append(b)
            if depth == 0, b == 0x7D || b == 0x5D { return }
        }
    }
}
