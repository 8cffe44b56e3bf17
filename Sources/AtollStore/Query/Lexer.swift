import Foundation

/// A token of the query language, with its position (a character offset) for messages.
struct Token: Equatable {
    enum Kind: Equatable {
        case identifier(String)     // name, or keyword (matched case-insensitively by the parser)
        case atKeyword(String)      // @count, @size, ... (lowercased)
        case string(String)
        case int(Int64)
        case double(Double)
        case decimal(Decimal128)    // a number with more digits than a double keeps
        case argument(Int)          // $0
        case variable(String)       // $d (a SUBQUERY's variable)
        case op(String)             // == != < <= > >= && || ! = <>, and + - * / between operands
        case modifier(String)       // [c] [d] [cd] after an operator
        case punct(Character)       // ( ) { } , . [ ] (brackets of subscripts: list[0], dict['k'])
        case timestamp(Timestamp)   // T12:0 or 2026-01-01@12:00:00
        case typed(String, String)  // oid(...) / uuid(...): the name (lowercased) and the raw text
        case end
    }
    var kind: Kind
    var position: Int
    var text: String
}

/// Splits query text into tokens.
struct Lexer {
    private let chars: [Character]
    private var i = 0

    /// Reads the text a Unicode scalar at a time: as characters, a quote followed by a combining
    /// mark (`'\u{301}'`) would be one character, and the string would never open.
    init(_ text: String) { chars = text.unicodeScalars.map(Character.init) }

    /// Whether the previous token was a comparison operator (after which `[c]` is a modifier).
    private var afterOperator = false
    /// Whether the previous token ended an operand (after which `-` is a minus, not a sign).
    private var afterOperand = false
    private static let words: Set<String> = ["AND", "OR", "NOT", "ANY", "SOME", "ALL", "NONE", "SORT", "DISTINCT", "LIMIT",
                                             "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "IN", "BETWEEN"]

    static func tokenize(_ text: String) throws -> [Token] {
        var lexer = Lexer(text)
        var tokens = [Token]()
        while true {
            let t = try lexer.next()
            tokens.append(t)
            switch t.kind {
            case .op(let o): lexer.afterOperator = !"+-*/".contains(o)
            case .identifier(let word): lexer.afterOperator = Comparison.Op.allWords.contains(word.uppercased())
            default: lexer.afterOperator = false
            }
            switch t.kind {
            case .identifier(let word): lexer.afterOperand = !words.contains(word.uppercased())
            case .int, .double, .decimal, .string, .argument, .variable, .timestamp, .typed, .atKeyword,
                 .punct(")"), .punct("]"), .punct("}"):
                lexer.afterOperand = true
            default: lexer.afterOperand = false
            }
            if t.kind == .end { return tokens }
        }
    }

    private func error(_ message: String, at position: Int) -> AtollError {
        AtollError(.querySyntax, "\(message) at position \(position)")
    }

    private func peek(_ k: Int = 0) -> Character? { i + k < chars.count ? chars[i + k] : nil }

    mutating func next() throws -> Token {
        while let c = peek(), c.isWhitespace { i += 1 }
        let start = i
        guard let c = peek() else { return Token(kind: .end, position: i, text: "") }
        func token(_ kind: Token.Kind) -> Token { Token(kind: kind, position: start, text: String(chars[start..<i])) }

        if c == "'" || c == "\"" { return token(.string(try string(quote: c))) }
        if c == "$" {
            i += 1
            if let d = peek(), d.isLetter || d == "_" {
                var name = ""
                while let d = peek(), d.isNameCharacter { name.append(d); i += 1 }
                return token(.variable(name))
            }
            var digits = ""
            while let d = peek(), d.isASCII, d.isNumber { digits.append(d); i += 1 }
            guard let n = Int(digits) else { throw error("expected an argument number or a variable name after '$'", at: start) }
            return token(.argument(n))
        }
        if c == "@" {
            i += 1
            var name = ""
            while let d = peek(), d.isNameCharacter { name.append(d); i += 1 }
            guard !name.isEmpty else { throw error("expected a name after '@'", at: start) }
            return token(.atKeyword(name.lowercased()))
        }
        // After an operand, + - * / are arithmetic; elsewhere a sign belongs to a number.
        if afterOperand, "+-*/".contains(c) {
            i += 1
            return token(.op(String(c)))
        }
        if c.isASCII, c.isNumber || ((c == "-" || c == "+") && (peek(1)?.isNumber ?? false) && (peek(1)?.isASCII ?? false)) {
            if let ts = try dateLiteral() { return token(.timestamp(ts)) }
            return token(try number())
        }
        if c.isLetter || c == "_" {
            if c == "T", let n = peek(1), n.isNumber || n == "-", let ts = try epochLiteral() { return token(.timestamp(ts)) }
            var name = ""
            while let d = peek(), d.isNameCharacter || d == "$" { name.append(d); i += 1 }
            if ["oid", "uuid"].contains(name.lowercased()), peek() == "(" {
                i += 1
                var body = ""
                while let d = peek(), d != ")" { body.append(d); i += 1 }
                guard peek() == ")" else { throw error("unterminated '\(name)('", at: start) }
                i += 1
                return token(.typed(name.lowercased(), body.trimmingCharacters(in: .whitespaces)))
            }
            return token(.identifier(name))
        }
        if c == "[" {
            // After an operator, `[c]`, `[d]`, `[cd]` are modifiers; elsewhere `[` opens a
            // subscript (`list[0]`, `dict['key']`, `list[*]`).
            if afterOperator {
                var body = ""
                i += 1
                while let d = peek(), d != "]" { body.append(d); i += 1 }
                guard peek() == "]" else { throw error("unterminated '['", at: start) }
                i += 1
                let m = body.lowercased()
                guard ["c", "d", "cd", "dc"].contains(m) else { throw error("unknown modifier '[\(body)]'", at: start) }
                return token(.modifier(m))
            }
            i += 1
            return token(.punct("["))
        }
        if c == "]" { i += 1; return token(.punct("]")) }
        let two = peek(1).map { String([c, $0]) } ?? ""
        if ["==", "!=", "<=", ">=", "=<", "=>", "&&", "||", "<>"].contains(two) {
            i += 2
            return token(.op(two))
        }
        if "<>=!".contains(c) { i += 1; return token(.op(String(c))) }
        if "(){},.*".contains(c) { i += 1; return token(.punct(c)) }
        throw error("unexpected character '\(c)'", at: start)
    }

    private mutating func string(quote: Character) throws -> String {
        let start = i
        i += 1
        var out = ""
        while let c = peek() {
            i += 1
            if c == quote { return out }
            if c == "\\" {
                guard let e = peek() else { break }
                i += 1
                switch e {
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                case "0": out.append("\0")
                case "u":
                    let hex = String(chars[i..<min(i + 4, chars.count)])
                    guard hex.count == 4, let v = UInt32(hex, radix: 16), let s = Unicode.Scalar(v) else {
                        throw error("bad \\u escape", at: i - 2)
                    }
                    out.unicodeScalars.append(s)
                    i += 4
                default: out.append(e)
                }
            } else {
                out.append(c)
            }
        }
        throw error("unterminated string", at: start)
    }

    private mutating func number() throws -> Token.Kind {
        let start = i
        var text = ""
        if let c = peek(), c == "-" || c == "+" { text.append(c); i += 1 }
        if peek() == "0", let x = peek(1), x == "x" || x == "X" {
            i += 2
            var hex = ""
            while let d = peek(), d.isHexDigit { hex.append(d); i += 1 }
            guard let v = Int64(hex, radix: 16) else { throw error("bad hexadecimal number", at: start) }
            return .int(text == "-" ? -v : v)
        }
        var isDouble = false
        while let d = peek(), d.isASCII, d.isNumber || d == "." || d == "e" || d == "E"
                || ((d == "-" || d == "+") && (text.last == "e" || text.last == "E")) {
            if d == "." {
                // "1.5" is a number; a "." not followed by a digit ends it.
                guard let n = peek(1), n.isASCII, n.isNumber else { break }
            }
            if d == "." || d == "e" || d == "E" { isDouble = true }
            text.append(d)
            i += 1
        }
        if !isDouble, let v = Int64(text) { return .int(v) }
        guard let v = Double(text) else { throw error("bad number '\(text)'", at: start) }
        // More significant digits than a double keeps: a decimal128 literal, exact.
        let mantissa = text.prefix { $0 != "e" && $0 != "E" }.filter(\.isNumber).drop { $0 == "0" }
        if mantissa.count > 15, let d = Decimal128(text) { return .decimal(d) }
        return .double(v)
    }

    /// `YYYY-MM-DD@HH:MM:SS[:NANOS]` (Realm's readable timestamp, UTC) or ISO 8601
    /// `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]`; nil when the text here is not a date.
    private mutating func dateLiteral() throws -> Timestamp? {
        func digits(_ at: Int, _ n: Int) -> Bool {
            guard at + n <= chars.count else { return false }
            return chars[at..<(at + n)].allSatisfy { $0.isASCII && $0.isNumber }
        }
        guard digits(i, 4), i + 10 <= chars.count, chars[i + 4] == "-", digits(i + 5, 2), chars[i + 7] == "-",
              digits(i + 8, 2) else { return nil }
        let start = i
        var j = i + 10
        var iso = String(chars[i..<j])
        if j < chars.count, chars[j] == "@" || chars[j] == "T" {
            var readable = chars[j] == "@"
            j += 1
            var time = ""
            while j < chars.count, chars[j].isASCII, chars[j].isNumber || chars[j] == ":" || chars[j] == "." {
                time.append(chars[j])
                j += 1
            }
            // `T` may stand for `@` in the readable form with nanoseconds (HH:MM:SS:NANOS).
            if time.split(separator: ":", omittingEmptySubsequences: false).count == 4 { readable = true }
            if readable {
                let parts = time.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
                guard parts.count == 3 || parts.count == 4 else { throw error("bad timestamp '\(String(chars[start..<j]))'", at: start) }
                iso += "T" + parts[0...2].joined(separator: ":")
                if parts.count == 4 { iso += "." + String(repeating: "0", count: max(0, 9 - parts[3].count)) + parts[3] }
                iso += "Z"
            } else {
                iso += "T" + time
                if j < chars.count, chars[j] == "Z" || chars[j] == "z" {
                    iso += "Z"
                    j += 1
                } else if j < chars.count, chars[j] == "+" || chars[j] == "-" {
                    var zone = String(chars[j])
                    j += 1
                    while j < chars.count, chars[j].isASCII, chars[j].isNumber || chars[j] == ":" { zone.append(chars[j]); j += 1 }
                    iso += zone
                } else {
                    iso += "Z"
                }
            }
        } else {
            iso += "T00:00:00Z"
        }
        guard let ts = Timestamp(iso8601: iso) else {
            throw error("bad timestamp '\(String(chars[start..<j]))'", at: start)
        }
        i = j
        return ts
    }

    /// `T<seconds>:<nanoseconds>`, Realm's epoch timestamp.
    private mutating func epochLiteral() throws -> Timestamp? {
        var j = i + 1
        var text = ""
        while j < chars.count, chars[j].isNumber || chars[j] == ":" || chars[j] == "-" { text.append(chars[j]); j += 1 }
        let parts = text.split(separator: ":")
        guard parts.count == 2, let s = Int64(parts[0]), let ns = Int64(parts[1]) else { return nil }
        let (ms, overflow) = s.multipliedReportingOverflow(by: 1000)
        let (total, overflow2) = ms.addingReportingOverflow(ns / 1_000_000)
        guard !overflow, !overflow2 else { throw error("timestamp 'T\(text)' is out of range", at: i) }
        i = j
        return Timestamp(milliseconds: total)
    }
}

extension Character {
    /// A letter, digit, `_`, or a combining mark (of a decomposed accented letter: the lexer
    /// reads one Unicode scalar at a time).
    fileprivate var isNameCharacter: Bool {
        if isLetter || isNumber || self == "_" { return true }
        guard let scalar = unicodeScalars.first else { return false }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: return true
        default: return false
        }
    }
}
