/// The parsed form of a query.
struct Query {
    var predicate: Predicate
    var descriptors: [Descriptor]
}

indirect enum Predicate {
    case constant(Bool)
    case and(Predicate, Predicate)
    case or(Predicate, Predicate)
    case not(Predicate)
    case comparison(Comparison)
}

enum Quantifier { case any, all, none }

struct Comparison {
    enum Op: String {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
        case beginsWith = "BEGINSWITH", endsWith = "ENDSWITH", contains = "CONTAINS", like = "LIKE"
        case `in` = "IN", between = "BETWEEN"
    }
    var quantifier: Quantifier?
    var left: Expression
    /// `a == ANY {1, 2}`: how the values of a list on the right combine.
    var rightQuantifier: Quantifier?
    var op: Op
    var right: Expression
    var caseInsensitive = false
    var diacriticInsensitive = false
    var position: Int
}

/// One step of a key path.
enum PathPart: Equatable, CustomStringConvertible {
    /// A property; after `@links`, a class name; in a dictionary, a key written as a name.
    case name(String)
    /// `@count`, `@size`, `@sum`, `@avg`, `@min`, `@max`, `@keys`, `@values`, `@type`, `@links`
    /// (lowercased, with the `@`).
    case operation(String)
    /// `['key']`
    case key(String)
    /// `[0]`, `[FIRST]` (0), `[LAST]` (-1)
    case index(Int)
    /// `[*]`
    case all
    /// `$name`, a SUBQUERY's variable (first part only).
    case variable(String)

    var description: String {
        switch self {
        case .name(let n): return n
        case .operation(let o): return o
        case .key(let k): return "['\(k)']"
        case .index(let i): return i < 0 ? "[LAST]" : "[\(i)]"
        case .all: return "[*]"
        case .variable(let v): return "$" + v
        }
    }
}

/// A key path as written, for messages: `dogs.@avg.age`, `prices['apple']`.
func pathText(_ parts: [PathPart]) -> String {
    var out = ""
    for part in parts {
        switch part {
        case .key, .index, .all: out += part.description
        default: out += (out.isEmpty ? "" : ".") + part.description
        }
    }
    return out
}

/// `SUBQUERY(collection, $variable, predicate).@count`
struct Subquery {
    var collection: [PathPart]
    var variable: String
    var predicate: Predicate
    var position: Int
}

indirect enum Expression {
    case keyPath([PathPart], position: Int)
    case constant(Value)
    case argument(Int, position: Int)
    case list([Expression])
    case subquery(Subquery)
    /// `a * 2`, `a + b`: `+ - * /` on numbers.
    case arithmetic(String, Expression, Expression)
}

enum Descriptor {
    case sort([(path: [PathPart], ascending: Bool, position: Int)])
    case distinct([(path: [PathPart], position: Int)])
    case limit(Int)
}

/// Recursive-descent parser for the query language (grammar in docs/query-language.md).
struct Parser {
    private var tokens: [Token]
    private var i = 0
    private var depth = 0
    private var comparisons = 0

    /// Bounds that keep the parser's and the compiler's recursion, and SQLite's expression
    /// depth, far from their limits whatever the text.
    static let maxDepth = 100
    static let maxComparisons = 500

    static func parse(_ text: String) throws -> Query {
        var p = Parser(tokens: try Lexer.tokenize(text))
        return try p.query()
    }

    private init(tokens: [Token]) { self.tokens = tokens }

    private var current: Token { tokens[i] }

    private func error(_ message: String, _ token: Token? = nil) -> AtollError {
        let t = token ?? current
        let near = t.kind == .end ? "at the end of the query" : "at position \(t.position) near '\(t.text)'"
        return AtollError(.querySyntax, "\(message) \(near)")
    }

    private func isKeyword(_ word: String, _ t: Token? = nil) -> Bool {
        if case .identifier(let name) = (t ?? current).kind { return name.uppercased() == word }
        return false
    }

    private mutating func accept(keyword word: String) -> Bool {
        guard isKeyword(word) else { return false }
        i += 1
        return true
    }

    private mutating func accept(op: String) -> Bool {
        guard case .op(let o) = current.kind, o == op else { return false }
        i += 1
        return true
    }

    private mutating func accept(_ c: Character) -> Bool {
        guard case .punct(let p) = current.kind, p == c else { return false }
        i += 1
        return true
    }

    private mutating func expect(_ c: Character) throws {
        guard accept(c) else { throw error("expected '\(c)'") }
    }

    private static let descriptorWords: Set<String> = ["SORT", "DISTINCT", "LIMIT"]

    mutating func query() throws -> Query {
        var predicate = Predicate.constant(true)
        if current.kind != .end, !Parser.descriptorWords.contains(where: { isKeyword($0) }) {
            predicate = try or()
        }
        var descriptors = [Descriptor]()
        while current.kind != .end {
            if accept(keyword: "SORT") {
                try expect("(")
                var keys = [([PathPart], Bool, Int)]()
                repeat {
                    let position = current.position
                    let path = try keyPath()
                    var ascending = true
                    if accept(keyword: "ASC") || accept(keyword: "ASCENDING") {
                    } else if accept(keyword: "DESC") || accept(keyword: "DESCENDING") {
                        ascending = false
                    } else {
                        throw error("expected ASC or DESC")
                    }
                    keys.append((path, ascending, position))
                } while accept(",")
                try expect(")")
                descriptors.append(.sort(keys.map { (path: $0.0, ascending: $0.1, position: $0.2) }))
            } else if accept(keyword: "DISTINCT") {
                try expect("(")
                var keys = [([PathPart], Int)]()
                repeat {
                    let position = current.position
                    keys.append((try keyPath(), position))
                } while accept(",")
                try expect(")")
                descriptors.append(.distinct(keys.map { (path: $0.0, position: $0.1) }))
            } else if accept(keyword: "LIMIT") {
                try expect("(")
                guard case .int(let n) = current.kind, n >= 0 else { throw error("LIMIT needs a non-negative integer") }
                i += 1
                try expect(")")
                descriptors.append(.limit(Int(clamping: n)))
            } else {
                throw error("unexpected token")
            }
        }
        return Query(predicate: predicate, descriptors: descriptors)
    }

    private mutating func or() throws -> Predicate {
        var left = try and()
        while accept(keyword: "OR") || accept(op: "||") { left = .or(left, try and()) }
        return left
    }

    private mutating func and() throws -> Predicate {
        var left = try not()
        while accept(keyword: "AND") || accept(op: "&&") { left = .and(left, try not()) }
        return left
    }

    private mutating func nest<T>(_ body: (inout Parser) throws -> T) throws -> T {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Parser.maxDepth else {
            throw error("the query is nested more than \(Parser.maxDepth) levels deep")
        }
        return try body(&self)
    }

    private mutating func not() throws -> Predicate {
        if accept(keyword: "NOT") || accept(op: "!") { return .not(try nest { try $0.not() }) }
        return try primary()
    }

    private mutating func primary() throws -> Predicate {
        if case .punct("(") = current.kind {
            // A parenthesis opens a group of predicates, or an operand: `(age + 1) * 2 == 10`.
            // The group is tried first; when it fails, or is followed by an operator that only an
            // operand can have, the same tokens are read as a comparison. Its error is reported
            // when neither reading works.
            let start = self
            let group: Result<Predicate, Error> = Result {
                i += 1
                let p = try nest { try $0.or() }
                try expect(")")
                return p
            }
            if case .success(let p) = group, !Self.operandFollows(current.kind) { return p }
            let afterGroup = self
            self = start
            do { return .comparison(try comparison()) } catch {
                if case .failure(let groupError) = group { throw groupError }
                self = afterGroup
                throw error
            }
        }
        if accept(keyword: "TRUEPREDICATE") { return .constant(true) }
        if accept(keyword: "FALSEPREDICATE") { return .constant(false) }
        return .comparison(try comparison())
    }

    /// Whether a token after a parenthesised group makes the group an operand.
    private static func operandFollows(_ kind: Token.Kind) -> Bool {
        guard case .op(let o) = kind else { return false }
        return ["+", "-", "*", "/", "==", "=", "!=", "<>", "<", "<=", "=<", ">", ">=", "=>"].contains(o)
    }

    private mutating func comparison() throws -> Comparison {
        let position = current.position
        comparisons += 1
        guard comparisons <= Parser.maxComparisons else {
            throw AtollError(.queryInvalid, "the query has more than \(Parser.maxComparisons) comparisons; use IN {…} for long lists of values")
        }
        var quantifier: Quantifier?
        if accept(keyword: "ANY") || accept(keyword: "SOME") { quantifier = .any }
        else if accept(keyword: "ALL") { quantifier = .all }
        else if accept(keyword: "NONE") { quantifier = Quantifier.none }
        let left = try expression()
        let opToken = current
        let op: Comparison.Op
        switch current.kind {
        case .op(let o):
            switch o {
            case "==", "=": op = .equal
            case "!=", "<>": op = .notEqual
            case "<": op = .less
            case "<=", "=<": op = .lessOrEqual
            case ">": op = .greater
            case ">=", "=>": op = .greaterOrEqual
            default: throw error("expected a comparison operator")
            }
        case .identifier(let word):
            guard let o = Comparison.Op(rawValue: word.uppercased()), ![.equal].contains(o),
                  Comparison.Op.allWords.contains(word.uppercased()) else {
                throw error("expected a comparison operator")
            }
            op = o
        default:
            throw error(current.kind == .end ? "expected a comparison operator" : "expected a comparison operator")
        }
        i += 1
        var c = Comparison(quantifier: quantifier, left: left, op: op, right: .constant(.null), position: position)
        if case .modifier(let m) = current.kind {
            c.caseInsensitive = m.contains("c")
            c.diacriticInsensitive = m.contains("d")
            i += 1
        }
        if op == .between {
            guard case .punct("{") = current.kind else { throw error("BETWEEN needs {low, high}") }
        }
        for (word, q) in [("ANY", Quantifier.any), ("SOME", .any), ("ALL", .all), ("NONE", .none)] where isKeyword(word) {
            switch tokens[i + 1].kind {
            case .punct("{"), .argument:
                c.rightQuantifier = q
                i += 1
            default:
                break
            }
            break
        }
        c.right = try expression()
        if op == .between {
            guard case .list(let items) = c.right, items.count == 2 else {
                throw error("BETWEEN needs exactly two values {low, high}", opToken)
            }
        }
        return c
    }

    /// An operand: sums and differences of terms.
    private mutating func expression() throws -> Expression {
        var left = try term()
        while case .op(let o) = current.kind, o == "+" || o == "-" {
            i += 1
            left = .arithmetic(o, left, try term())
        }
        return left
    }

    private mutating func term() throws -> Expression {
        var left = try factor()
        while case .op(let o) = current.kind, o == "*" || o == "/" {
            i += 1
            left = .arithmetic(o, left, try factor())
        }
        return left
    }

    private mutating func factor() throws -> Expression {
        if accept("(") {
            let e = try nest { try $0.expression() }
            try expect(")")
            return e
        }
        return try value()
    }

    private mutating func value() throws -> Expression {
        let t = current
        switch t.kind {
        case .string(let s): i += 1; return .constant(.string(s))
        case .int(let v): i += 1; return .constant(.int(v))
        case .double(let v): i += 1; return .constant(.double(v))
        case .decimal(let v): i += 1; return .constant(.decimal(v))
        case .timestamp(let ts): i += 1; return .constant(.date(ts))
        case .argument(let n): i += 1; return .argument(n, position: t.position)
        case .typed(let name, let body):
            i += 1
            if name == "oid" {
                guard let o = ObjectId(hex: body) else { throw error("bad ObjectId '\(body)'", t) }
                return .constant(.objectId(o))
            }
            guard let u = UUID(uuidString: body) else { throw error("bad UUID '\(body)'", t) }
            return .constant(.uuid(u))
        case .punct("{"):
            i += 1
            var items = [Expression]()
            if !accept("}") {
                repeat {
                    if case .punct("{") = current.kind { throw error("lists cannot be nested") }
                    items.append(try value())
                } while accept(",")
                try expect("}")
            }
            return .list(items)
        case .identifier(let word):
            switch word.lowercased() {
            case "true": i += 1; return .constant(.bool(true))
            case "false": i += 1; return .constant(.bool(false))
            case "null", "nil": i += 1; return .constant(.null)
            case "subquery" where tokens[i + 1].kind == .punct("("): return try subquery()
            case "obj" where tokens[i + 1].kind == .punct("("): return try objectLiteral()
            default: break
            }
            return .keyPath(try keyPath(), position: t.position)
        case .atKeyword, .variable:
            return .keyPath(try keyPath(), position: t.position)
        default:
            throw error(t.kind == .end ? "expected a value or property" : "expected a value or property")
        }
    }

    /// `SUBQUERY(collection, $x, predicate).@count` (or `.@size`): how many elements of the
    /// collection match the predicate.
    private mutating func subquery() throws -> Expression {
        let position = current.position
        i += 2  // SUBQUERY (
        let collection = try keyPath()
        try expect(",")
        guard case .variable(let name) = current.kind else { throw error("SUBQUERY needs a variable such as $x") }
        i += 1
        try expect(",")
        let predicate = try nest { try $0.or() }
        try expect(")")
        guard accept("."), case .atKeyword(let op) = current.kind, op == "count" || op == "size" else {
            throw error("a SUBQUERY must be followed by .@count")
        }
        i += 1
        return .subquery(Subquery(collection: collection, variable: name, predicate: predicate, position: position))
    }

    /// `obj('Class', primaryKey)`: a link to an object, by class and primary key.
    private mutating func objectLiteral() throws -> Expression {
        i += 2  // obj (
        guard case .string(let className) = current.kind else { throw error("obj(…) needs a class name string first") }
        i += 1
        try expect(",")
        guard case .constant(let key) = try value() else { throw error("obj(…) needs a primary key value") }
        try expect(")")
        return .constant(.link(ObjectLink(className: className, primaryKey: key)))
    }

    private mutating func keyPath() throws -> [PathPart] {
        var parts = [PathPart]()
        if case .variable(let name) = current.kind {
            parts.append(.variable(name))
            i += 1
            guard accept(".") else { return parts }
        }
        while true {
            switch current.kind {
            case .identifier(let name): parts.append(.name(name))
            case .atKeyword(let name): parts.append(.operation("@" + name))
            default: throw error("expected a property name")
            }
            i += 1
            while accept("[") { parts.append(try subscriptPart()) }
            guard accept(".") else { return parts }
        }
    }

    private mutating func subscriptPart() throws -> PathPart {
        let t = current
        i += 1
        let part: PathPart
        switch t.kind {
        case .string(let key): part = .key(key)
        case .int(let n) where n >= 0: part = .index(Int(clamping: n))
        case .punct("*"): part = .all
        case .identifier(let word) where word.uppercased() == "FIRST": part = .index(0)
        case .identifier(let word) where word.uppercased() == "LAST": part = .index(-1)
        case .identifier(let word) where word.uppercased() == "SIZE": part = .operation("@size")
        default: throw error("expected a key, an index, FIRST, LAST, SIZE or * in '[…]'", t)
        }
        try expect("]")
        return part
    }
}

extension Comparison.Op {
    static let allWords: Set<String> = ["BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "IN", "BETWEEN"]
}

import Foundation
