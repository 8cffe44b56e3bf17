import AtollJSON
import AtollProtocol
import AtollStore

/// Who a rule is evaluated for: the fields `%user.…` refers to.
public struct RuleUser: Sendable, Hashable {
    public var id: String
    public var data: Document
    public var customData: Document
    public init(id: String, data: Document = Document(), customData: Document = Document()) {
        self.id = id
        self.data = data
        self.customData = customData
    }

    /// The value at `id`, `data.<field>` or `custom_data.<field>` (dotted paths into documents).
    func value(at path: String) -> Value {
        var parts = path.split(separator: ".").map(String.init)
        guard let head = parts.first else { return .null }
        parts.removeFirst()
        var current: Value
        switch head {
        case "id": return parts.isEmpty ? .string(id) : .null
        case "data": current = .object(data)
        case "custom_data", "customData": current = .object(customData)
        default: return .null
        }
        for p in parts {
            guard case .object(let d) = current else { return .null }
            current = d[p] ?? .null
        }
        return current
    }
}

/// An RQL filter over objects that may name the user (`owner_id == %user.id`): the text with
/// each `%user.…` replaced by an argument, bound per user. Constant true and false filters are
/// kept as such so that views and checks can skip a query.
public struct RuleFilter: Sendable, Hashable {
    public enum Kind: Sendable, Hashable { case always, never, query(String) }
    public var kind: Kind
    /// What the arguments `$0…` of the query stand for, in order.
    enum Argument: Sendable, Hashable { case user(String), constant(Value) }
    var arguments: [Argument] = []
    /// The filter as the config wrote it (for messages).
    public var source = ""

    public static let always = RuleFilter(kind: .always)
    public static let never = RuleFilter(kind: .never)

    init(kind: Kind, arguments: [Argument] = []) {
        self.kind = kind
        self.arguments = arguments
    }

    /// A filter from RQL text with `%user.…` references.
    public init(rql text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty || trimmed.uppercased() == "TRUEPREDICATE" { self.init(kind: .always); return }
        if trimmed.uppercased() == "FALSEPREDICATE" { self.init(kind: .never); return }
        var paths = [String]()
        let out = try QueryText.rewrite(trimmed) { chars, i in
            if chars[i] == "$" { throw AtollError(.invalidArgument, "rule filter '\(text)': use %user.… instead of $ arguments") }
            guard chars[i] == "%" else { return nil }
            let prefix = Array("%user.")
            guard chars.count >= i + prefix.count, Array(chars[i..<(i + prefix.count)]) == prefix else {
                throw AtollError(.invalidArgument, "rule filter '\(text)': only %user.… may follow %")
            }
            var j = i + prefix.count
            while j < chars.count, chars[j].isLetter || chars[j].isNumber || chars[j] == "_" || chars[j] == "." { j += 1 }
            let path = String(chars[(i + prefix.count)..<j])
            guard !path.isEmpty else { throw AtollError(.invalidArgument, "rule filter '\(text)': %user. needs a field") }
            paths.append(path)
            return ("$\(paths.count - 1)", j)
        }
        self.init(kind: .query(out), arguments: paths.map { .user($0) })
        source = trimmed
    }

    /// The filter's query and arguments for one user.
    func bound(to user: RuleUser) -> (text: String, arguments: [Value])? {
        guard case .query(let text) = kind else { return nil }
        return (text, arguments.map { a in
            switch a {
            case .user(let path): return user.value(at: path)
            case .constant(let v): return v
            }
        })
    }
}

/// One role of a class's rules: chosen for users that `applyWhen` matches.
public struct Role: Sendable, Hashable {
    public var name: String
    /// Conditions on the user, all of which must hold: a user path (`id`, `data.email`,
    /// `custom_data.isAdmin`) and the value it must have (or `{"$in": [...]}`, `{"$exists": bool}`).
    public var applyWhen: [(path: String, condition: Value)]
    public var read: RuleFilter
    public var write: RuleFilter

    public init(name: String, applyWhen: [(path: String, condition: Value)] = [], read: RuleFilter, write: RuleFilter) {
        self.name = name
        self.applyWhen = applyWhen
        self.read = read
        self.write = write
    }

    public static func == (a: Role, b: Role) -> Bool {
        a.name == b.name && a.read == b.read && a.write == b.write
            && a.applyWhen.map(\.path) == b.applyWhen.map(\.path) && a.applyWhen.map(\.condition) == b.applyWhen.map(\.condition)
    }
    public func hash(into h: inout Hasher) { h.combine(name) }

    func applies(to user: RuleUser) -> Bool {
        applyWhen.allSatisfy { path, condition in
            let v = user.value(at: path)
            if case .object(let op) = condition, let first = op.keys.first, first.hasPrefix("$") {
                switch first {
                case "$in": if case .list(let items)? = op["$in"] { return items.contains(v) }; return false
                case "$exists": return (op["$exists"] == .bool(true)) == (v != .null)
                case "$ne": return op["$ne"] != v
                case "$eq": return op["$eq"] == v
                default: return false
                }
            }
            return v == condition
        }
    }
}

/// The rules of an app: roles per class, and roles for classes without their own.
public struct Rules: Sendable {
    public var classes: [String: [Role]] = [:]
    public var defaultRoles: [Role]?

    /// Everyone may read and write everything (the default app, development mode).
    public static let open = Rules(classes: [:], defaultRoles: [Role(name: "all", read: .always, write: .always)])

    public init(classes: [String: [Role]] = [:], defaultRoles: [Role]? = nil) {
        self.classes = classes
        self.defaultRoles = defaultRoles
    }

    /// The role a user has on a class: the first whose `applyWhen` matches; nil (no access) when none.
    public func role(_ className: String, for user: RuleUser) -> Role? {
        (classes[className] ?? defaultRoles ?? []).first { $0.applies(to: user) }
    }

    /// The properties of a class that its roles' read and write filters name (the heads of
    /// their key paths).
    func fieldsNamed(by className: String) -> Set<String> {
        var names = Set<String>()
        for role in classes[className] ?? defaultRoles ?? [] {
            for filter in [role.read, role.write] {
                if case .query(let text) = filter.kind { names.formUnion(QueryText.fieldNames(in: text)) }
            }
        }
        return names
    }
}

// MARK: - From the config file

extension Rules {
    /// Rules from a config's `"rules"`: our shape, `{"Task": {"roles": [...]}, "default": {"roles": [...]}}`
    /// with roles `{"name", "applyWhen": {...}, "read": "RQL" | bool, "write": "RQL" | bool}`, or
    /// the Atlas App Services export shape — an array of collection rules `{"collection": "Task",
    /// "roles": [{"name", "apply_when", "document_filters": {"read": {...}, "write": {...}},
    /// "read": bool, "write": bool}]}` (MongoDB query filters of equalities, `$in`, `$and`,
    /// `$or`, `$ne`, `$gt`…), and `"default_rule": {"roles": [...]}`.
    public init(json: Value) throws {
        self.init()
        switch json {
        case .object(let d):
            for (name, body) in d {
                let roles = try Self.roles(body, context: "rules.\(name)")
                if name == "default" || name == "default_rule" { defaultRoles = roles } else { classes[name] = roles }
            }
        case .list(let items):
            for item in items {
                guard case .object(let d) = item else { throw AtollError(.invalidArgument, "rules: each entry must be an object") }
                let roles = try Self.roles(item, context: "rules")
                if case .string(let c)? = d["collection"] { classes[c] = roles } else { defaultRoles = roles }
            }
        default:
            throw AtollError(.invalidArgument, "rules: must be an object of classes or an array of collection rules")
        }
    }

    static func roles(_ value: Value, context: String) throws -> [Role] {
        guard case .object(let d) = value, case .list(let items)? = d["roles"] else {
            throw AtollError(.invalidArgument, "\(context): needs \"roles\": [...]")
        }
        return try items.enumerated().map { i, item in
            guard case .object(let r) = item else { throw AtollError(.invalidArgument, "\(context).roles[\(i)]: must be an object") }
            let name = r["name"]?.stringValue ?? "role\(i)"
            let where_ = "\(context).roles[\(i)] (\(name))"
            var applyWhen = [(path: String, condition: Value)]()
            if case .object(let a)? = r["applyWhen"] ?? r["apply_when"] {
                for (k, v) in a {
                    let path = k.hasPrefix("%%user.") ? String(k.dropFirst(7)) : k.hasPrefix("%user.") ? String(k.dropFirst(6)) : k
                    applyWhen.append((path, v))
                }
            }
            let filters: Document? = { if case .object(let f)? = r["document_filters"] { return f } else { return nil } }()
            func filter(_ key: String) throws -> RuleFilter {
                let base = r[key]
                var f: RuleFilter
                switch base {
                case .bool(true)?: f = .always
                case .bool(false)?, nil: f = filters == nil ? .never : .always
                case .string(let text)?:
                    do { f = try RuleFilter(rql: text) } catch { throw AtollError(.invalidArgument, "\(where_): \(error)") }
                case .object?:
                    f = try mongoFilter(base ?? .null, context: where_)
                default:
                    throw AtollError(.invalidArgument, "\(where_): \"\(key)\" must be true, false, an RQL filter or a query document")
                }
                if base == .bool(false) { return .never }
                if let doc = filters?[key] {
                    let extra = try mongoFilter(doc, context: where_)
                    f = f.and(extra)
                }
                return f
            }
            var read = try filter("read")
            let write = try filter("write")
            // Who may write may read (Atlas: write implies read).
            if read.kind == .never, write.kind != .never, r["read"] == nil { read = write }
            return Role(name: name, applyWhen: applyWhen, read: read, write: write)
        }
    }

    /// A MongoDB query filter as a rule filter: `{"owner_id": "%%user.id"}`, `{"a": {"$in": [...]}}`,
    /// `{"$or": [{...}, {...}]}`.
    static func mongoFilter(_ value: Value, context: String) throws -> RuleFilter {
        var arguments = [RuleFilter.Argument]()
        func operand(_ v: Value) -> String {
            if case .string(let s) = v, s.hasPrefix("%%user.") {
                arguments.append(.user(String(s.dropFirst(7))))
            } else {
                arguments.append(.constant(v))
            }
            return "$\(arguments.count - 1)"
        }
        func clause(_ v: Value) throws -> String {
            guard case .object(let d) = v else { throw AtollError(.invalidArgument, "\(context): a query filter must be an object") }
            if d.isEmpty { return "TRUEPREDICATE" }
            var parts = [String]()
            for (k, body) in d {
                switch k {
                case "$and", "$or":
                    guard case .list(let items) = body, !items.isEmpty else { throw AtollError(.invalidArgument, "\(context): \(k) needs an array") }
                    parts.append("(" + (try items.map(clause)).joined(separator: k == "$and" ? " AND " : " OR ") + ")")
                case let field where field.hasPrefix("$"):
                    throw AtollError(.invalidArgument, "\(context): unsupported operator \(field)")
                default:
                    guard k.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." }) else {
                        throw AtollError(.invalidArgument, "\(context): '\(k)' is not a field name")
                    }
                    if case .object(let ops) = body, let first = ops.keys.first, first.hasPrefix("$") {
                        for (op, arg) in ops {
                            let sym: String
                            switch op {
                            case "$eq": sym = "=="
                            case "$ne": sym = "!="
                            case "$gt": sym = ">"
                            case "$gte": sym = ">="
                            case "$lt": sym = "<"
                            case "$lte": sym = "<="
                            case "$in", "$nin":
                                guard case .list = arg else { throw AtollError(.invalidArgument, "\(context): \(op) needs an array") }
                                parts.append((op == "$nin" ? "NOT " : "") + "\(k) IN \(operand(arg))")
                                continue
                            default: throw AtollError(.invalidArgument, "\(context): unsupported operator \(op)")
                            }
                            parts.append("\(k) \(sym) \(operand(arg))")
                        }
                    } else {
                        parts.append("\(k) == \(operand(body))")
                    }
                }
            }
            return parts.count == 1 ? parts[0] : "(" + parts.joined(separator: " AND ") + ")"
        }
        let text = try clause(value)
        if text == "TRUEPREDICATE" { return .always }
        var filter = RuleFilter(kind: .query(text), arguments: arguments)
        filter.source = Wire.encode(value)
        return filter
    }
}

extension RuleFilter {
    /// Both filters.
    func and(_ other: RuleFilter) -> RuleFilter {
        switch (kind, other.kind) {
        case (.never, _), (_, .never): return .never
        case (.always, _): return other
        case (_, .always): return self
        case (.query(let a), .query(let b)):
            var both = RuleFilter(kind: .query("(\(a)) AND (\(QueryText.shiftArguments(b, by: arguments.count)))"),
                                  arguments: arguments + other.arguments)
            both.source = "(\(source)) AND (\(other.source))"
            return both
        }
    }
}

/// Rewriting RQL text without parsing it: string literals are left alone.
enum QueryText {
    /// Walks `text`; outside string literals, `code` may replace the text at position `i` (it
    /// returns the replacement and where to go on), or return nil to keep the character.
    static func rewrite(_ text: String, _ code: ([Character], Int) throws -> (String, Int)?) rethrows -> String {
        var out = ""
        let chars = Array(text)
        var i = 0
        var quote: Character?
        while i < chars.count {
            let c = chars[i]
            if let q = quote {
                out.append(c)
                if c == "\\", i + 1 < chars.count { out.append(chars[i + 1]); i += 2; continue }
                if c == q { quote = nil }
                i += 1
                continue
            }
            if c == "'" || c == "\"" { quote = c; out.append(c); i += 1; continue }
            if let (replacement, next) = try code(chars, i) {
                out += replacement
                i = next
                continue
            }
            out.append(c)
            i += 1
        }
        return out
    }

    /// `$n` becomes `$(n + offset)` outside string literals.
    static func shiftArguments(_ text: String, by offset: Int) -> String {
        guard offset != 0 else { return text }
        return rewrite(text) { chars, i in
            guard chars[i] == "$", i + 1 < chars.count, chars[i + 1].isASCII, chars[i + 1].isNumber else { return nil }
            var j = i + 1
            while j < chars.count, chars[j].isASCII, chars[j].isNumber { j += 1 }
            return ("$\((Int(String(chars[(i + 1)..<j])) ?? 0) + offset)", j)
        }
    }

    /// The first names of the key paths of a query (outside string literals): what the
    /// queryable-fields check looks at.
    static func fieldNames(in query: String) -> [String] {
        var names = [String]()
        _ = rewrite(query) { chars, i in
            let c = chars[i]
            if c == "$" {
                var j = i + 1
                while j < chars.count, chars[j].isNumber { j += 1 }
                return ("", j)
            }
            guard c.isLetter || c == "_" || c == "@" else { return nil }
            var j = i
            while j < chars.count, chars[j].isLetter || chars[j].isNumber || chars[j] == "_" || chars[j] == "@" { j += 1 }
            // Only the head of a key path: what follows a dot is a property of a linked object.
            if i == 0 || chars[i - 1] != "." { names.append(String(chars[i..<j])) }
            return ("", j)
        }
        return names
    }
}
