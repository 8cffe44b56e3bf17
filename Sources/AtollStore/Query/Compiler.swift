// One file over 600 lines: RQL to SQL. Key paths, comparisons, quantifiers, aggregates and
// subqueries call into each other recursively over one compiler state (aliases, parameters,
// joins, read access); split, that state would be shared across files.

/// A query compiled to SQL over one class, with its parameters bound by number (`?N`).
struct CompiledQuery {
    /// `FROM "Class" AS t LEFT JOIN ...`
    var from: String
    /// The condition (never empty).
    var condition: String
    /// `ORDER BY` terms (always ends with the row key, so the order is total).
    var orderBy: String
    /// A LIMIT that applies last.
    var limit: Int?
    var parameters: [SQLValue]
    /// Whether an object matches or not depends on that object alone (no DISTINCT or LIMIT,
    /// which weigh it against the others).
    var rowLocal = false
}

/// A value a key path leads to: its SQL expression, the expression of its type tag for mixed
/// values, and the property that gives its type (a pseudo-property for counts, aggregates,
/// dictionary keys and `@type`).
struct Operand {
    var expr: String
    var type: String?
    var property: Property
    /// For an element inside a mixed value's nested collections: the mixed value (its value and
    /// type expressions) and the keys and indexes that lead from it, so that one more step makes
    /// one call with one more argument. (A call on the previous step's calls would hold each of
    /// them twice, value and type: a path of n steps would be 2^n long.)
    var nested: (value: String, type: String, keys: [String])?

    init(_ expr: String, type: String? = nil, _ property: Property) {
        self.expr = expr
        self.type = type
        self.property = property
    }

    /// The element under `key` (a parameter or an index expression) of this mixed value's nested
    /// collection; `type` is this operand's type expression.
    func element(_ key: String, type: String) -> Operand {
        let path = nested.map { ($0.value, $0.type, $0.keys + [key]) } ?? (expr, type, [key])
        let args = ([path.0, path.1] + path.2).joined(separator: ", ")
        var e = Operand("atoll_mixed_get(\(args))", type: "atoll_mixed_type(\(args))", property)
        e.nested = path
        return e
    }
}

/// Compiles parsed queries to SQL. Never splices user text into SQL: constants become numbered
/// parameters; property names come from the schema and are quoted.
final class QueryCompiler {
    private let store: Store
    private let conn: Connection
    private let root: ClassInfo
    /// The query's arguments (a read rule's while one is compiled).
    private var arguments: [Value]
    private var parameters: [SQLValue] = []
    private var aliasCounter = 0
    /// The variables of the SUBQUERYs being compiled.
    private var variables: [String: Binding] = [:]
    /// What the reader may read: every object the query looks at, through any key path, must
    /// pass its class's rule (nil: everything).
    private let access: ReadAccess?
    /// Whether a read rule is being compiled: a rule's own key paths see everything (the rules
    /// are the app's, not the reader's).
    private var compilingRule = false
    /// The read rules, parsed, by class.
    private var parsedRules: [String: Query] = [:]

    /// How many links one key path may follow (nil: any number); a read rule's are not counted.
    private let maxLinkDepth: Int?

    init(store: Store, conn: Connection, root: ClassInfo, arguments: [Value], access: ReadAccess? = nil, maxLinkDepth: Int? = nil) {
        self.store = store
        self.conn = conn
        self.root = root
        self.arguments = arguments
        self.access = access
        self.maxLinkDepth = maxLinkDepth
    }

    /// A scope of a SELECT: its class alias and the to-one joins it needs.
    final class Scope {
        let alias: String
        let info: ClassInfo
        /// How many links the key path followed to get here.
        var depth = 0
        var joins: [String] = []
        var joinAliases: [String: String] = [:]
        init(alias: String, info: ClassInfo) {
            self.alias = alias
            self.info = info
        }
    }

    /// What a SUBQUERY variable stands for: an object of a collection of links, or a value of a
    /// collection of values.
    enum Binding {
        case object(Scope)
        case value(Operand)
    }

    /// The elements of a to-many key path step (a list, set, dictionary or backlinks), as the
    /// FROM and correlation of a subquery.
    struct ToMany {
        var from: String
        var match: String
        /// The element as a value (a link as its row key; a dictionary's value).
        var element: Operand
        /// The element as an object, for collections of links and backlinks.
        var object: Scope?
        /// A dictionary's keys.
        var keys: Operand?
        var count = "count(*)"
        var what: String

        func sql(_ select: String, _ condition: String?) -> String {
            let joins = object.map { ([from] + $0.joins).joined(separator: " ") } ?? from
            return "(SELECT \(select) \(joins) WHERE \(match)\(condition.map { " AND \($0)" } ?? ""))"
        }
    }

    func compile(_ query: Query) throws -> CompiledQuery {
        let scope = Scope(alias: "t", info: root)
        var condition = try predicate(query.predicate, scope)
        // The objects themselves: the reader's rule for their class, in line.
        if let rule = try ruleCondition(root, scope) { condition = "(\(condition)) AND (\(rule))" }
        var order: [String] = []
        var limit: Int?
        for descriptor in query.descriptors {
            // A LIMIT before later descriptors fixes which objects remain; apply it now.
            if let l = limit {
                condition = "t.\(root.rowKey) IN (SELECT t.\(root.rowKey) \(from(scope)) WHERE \(condition) ORDER BY \(orderTerms(order)) LIMIT \(l))"
                limit = nil
            }
            switch descriptor {
            case .sort(let keys):
                // A later SORT takes precedence; earlier ones break its ties.
                var terms = [String]()
                for key in keys {
                    let operand = try scalar(key.path, scope, position: key.position, for: "SORT")
                    if operand.property.type == .object, store.embeddedTarget(operand.property) != nil {
                        throw AtollError(.queryInvalid, "cannot sort by embedded object '\(pathText(key.path))'")
                    }
                    terms.append(operand.expr + (key.ascending ? " ASC" : " DESC"))
                }
                order = terms + order
            case .distinct(let keys):
                let exprs = try keys.map { try scalar($0.path, scope, position: $0.position, for: "DISTINCT").expr }
                condition = "t.\(root.rowKey) IN (SELECT rk FROM (SELECT t.\(root.rowKey) AS rk, row_number() OVER (PARTITION BY \(exprs.joined(separator: ", ")) ORDER BY \(orderTerms(order))) AS rn \(from(scope)) WHERE \(condition)) WHERE rn = 1)"
            case .limit(let l):
                limit = l
            }
        }
        let rowLocal = query.descriptors.allSatisfy { if case .sort = $0 { return true } else { return false } }
        return CompiledQuery(from: from(scope), condition: condition, orderBy: orderTerms(order), limit: limit,
                             parameters: parameters, rowLocal: rowLocal)
    }

    private func from(_ scope: Scope) -> String {
        (["FROM \(scope.info.table) AS \(scope.alias)"] + scope.joins).joined(separator: " ")
    }

    private func orderTerms(_ order: [String]) -> String {
        (order + ["t.\(root.rowKey)"]).joined(separator: ", ")
    }

    // MARK: - Predicates

    private func predicate(_ p: Predicate, _ scope: Scope) throws -> String {
        switch p {
        case .constant(let b): return b ? "1" : "0"
        case .and(let a, let b): return "(\(try predicate(a, scope)) AND \(try predicate(b, scope)))"
        case .or(let a, let b): return "(\(try predicate(a, scope)) OR \(try predicate(b, scope)))"
        // Realm's NOT treats a comparison with null as false, so NOT of it is true.
        case .not(let a): return "NOT coalesce(\(try predicate(a, scope)), 0)"
        case .comparison(let c): return try comparison(c, scope)
        }
    }

    private func parameter(_ v: SQLValue) -> String {
        parameters.append(v)
        return "?\(parameters.count)"
    }

    private func argument(_ n: Int, position: Int) throws -> Value {
        guard n < arguments.count else {
            throw AtollError(.queryInvalid, "the query uses $\(n) at position \(position) but \(arguments.count) argument\(arguments.count == 1 ? " was" : "s were") given")
        }
        return arguments[n]
    }

    /// The value of a constant expression (a literal, an argument, or a list of them).
    private func constant(_ e: Expression) throws -> Value? {
        switch e {
        case .constant(let v): return v
        case .argument(let n, let position): return try argument(n, position: position)
        case .list(let items): return .list(try items.map { try constant($0) ?? .null })
        case .keyPath, .subquery: return nil
        case .arithmetic(let op, let a, let b):
            guard let x = try constant(a), let y = try constant(b) else { return nil }
            return try fold(op, x, y)
        }
    }

    /// `+ - * /` of two constant numbers: ints stay ints (overflow is an error, `/` gives a
    /// double), anything else is a double.
    private func fold(_ op: String, _ x: Value, _ y: Value) throws -> Value {
        if case .int(let a) = x, case .int(let b) = y, op != "/" {
            let (r, overflow) = op == "+" ? a.addingReportingOverflow(b) : op == "-" ? a.subtractingReportingOverflow(b) : a.multipliedReportingOverflow(by: b)
            guard !overflow else { throw AtollError(.queryInvalid, "\(a) \(op) \(b) overflows a 64-bit integer") }
            return .int(r)
        }
        guard let a = x.doubleValue ?? (x.decimalValue?.doubleValue), let b = y.doubleValue ?? (y.decimalValue?.doubleValue) else {
            throw AtollError(.queryInvalid, "\(op) needs numbers, not \(x.kindName) and \(y.kindName)")
        }
        switch op {
        case "+": return .double(a + b)
        case "-": return .double(a - b)
        case "*": return .double(a * b)
        default: return .double(a / b)
        }
    }

    private func isPath(_ e: Expression) -> Bool {
        switch e {
        case .keyPath, .subquery: return true
        case .arithmetic(_, let a, let b): return isPath(a) || isPath(b)
        default: return false
        }
    }

    private func isArithmetic(_ e: Expression) -> Bool {
        if case .arithmetic = e { return isPath(e) }
        return false
    }

    /// An arithmetic expression (or one of its operands) as SQL: key paths must name single
    /// numbers; the result is an int when both sides are and the operation is not `/`.
    private func arithmeticOperand(_ e: Expression, _ scope: Scope, position: Int) throws -> Operand {
        switch e {
        case .keyPath(let path, let p):
            let operand = try scalar(path, scope, position: p, for: "arithmetic")
            guard operand.type == nil, [.int, .float, .double].contains(operand.property.type) || operand.property.name == "@count" else {
                throw AtollError(.queryInvalid, "arithmetic needs numbers; '\(pathText(path))' is \(operand.property.typeName)")
            }
            return operand
        case .subquery(let sq):
            return Operand(try subqueryCount(sq, scope), Self.countProperty)
        case .arithmetic(let op, let a, let b):
            let x = try arithmeticOperand(a, scope, position: position), y = try arithmeticOperand(b, scope, position: position)
            let isInt = x.property.type == .int && y.property.type == .int && op != "/"
            let expr = op == "/" ? "(CAST(\(x.expr) AS REAL) / \(y.expr))" : "(\(x.expr) \(op) \(y.expr))"
            return Operand(expr, Property(name: "arithmetic", type: isInt ? .int : .double, isOptional: true))
        default:
            guard let v = try constant(e) else { throw AtollError(.queryInvalid, "arithmetic needs numbers, at position \(position)") }
            switch v {
            case .int(let i): return Operand(parameter(.integer(i)), Property(name: "constant", type: .int))
            case .double, .float, .decimal:
                return Operand(parameter(.real(v.doubleValue ?? v.decimalValue?.doubleValue ?? 0)), Property(name: "constant", type: .double))
            default: throw AtollError(.queryInvalid, "arithmetic needs numbers, not \(v.kindName) \(v.shortDescription)")
            }
        }
    }

    /// A constant as an operand (for comparisons of two constants).
    private func constantOperand(_ v: Value) throws -> Operand {
        guard let type = v.scalarType else {
            throw AtollError(.queryInvalid, "cannot compare \(v.kindName) \(v.shortDescription) with a constant")
        }
        return Operand(parameter(type.sqlValue(v)), Property(name: "constant", type: type, isOptional: true))
    }

    /// Combines per-value conditions as a quantifier over a list of constants says.
    private func combine(_ q: Quantifier, _ parts: [String]) -> String {
        guard !parts.isEmpty else { return q == .any ? "0" : "1" }
        switch q {
        case .any: return "(" + parts.joined(separator: " OR ") + ")"
        case .all: return "(" + parts.joined(separator: " AND ") + ")"
        case .none: return "NOT coalesce(" + parts.joined(separator: " OR ") + ", 0)"
        }
    }

    private func comparison(_ c: Comparison, _ scope: Scope) throws -> String {
        var c = c
        if isArithmetic(c.left) || isArithmetic(c.right) {
            guard c.quantifier == nil, c.rightQuantifier == nil else {
                throw AtollError(.queryInvalid, "ANY/ALL/NONE do not apply to arithmetic, at position \(c.position)")
            }
            let left = try arithmeticOperand(c.left, scope, position: c.position)
            let right = try arithmeticOperand(c.right, scope, position: c.position)
            return try compareColumns(left, c.op, right, c)
        }
        // `a == ANY {1, 2}`, `ANY list > ALL {5, 9}`: the right side's values combine as its
        // quantifier says, inside the left side's.
        if let rq = c.rightQuantifier {
            guard case .list(let values)? = try constant(c.right) else {
                throw AtollError(.queryInvalid, "ANY/ALL/NONE on the right need a list of values, at position \(c.position)")
            }
            let op: Comparison.Op = c.op == .in ? .equal : c.op
            if case .list(let lefts)? = try constant(c.left) {
                let each = try lefts.map { l in
                    let operand = try constantOperand(l)
                    return combine(rq, try values.map { try compare(operand, op, $0, c, path: [.name("constant")]) })
                }
                return combine(c.quantifier ?? .any, each)
            }
            guard case .keyPath(let path, let position) = c.left else {
                throw AtollError(.queryInvalid, "a comparison needs a property, at position \(c.position)")
            }
            return try keyPathPredicate(path, position: position, scope, quantifier: c.quantifier) { operand in
                self.combine(rq, try values.map { try self.compare(operand, op, $0, c, path: path) })
            }
        }
        // `{a, b} IN list` (and `==`): with ANY (the default), one of the values is in the
        // list; with ALL, every one; with NONE, none.
        if c.op == .in || c.op == .equal, case .keyPath(let path, let position) = c.right,
           case .list(let values)? = try constant(c.left) {
            let each = try values.map { v in
                try keyPathPredicate(path, position: position, scope, quantifier: .any) { try self.compare($0, .equal, v, c, path: path) }
            }
            guard !each.isEmpty else { return c.quantifier == .all ? "1" : (c.quantifier == Quantifier.none ? "1" : "0") }
            switch c.quantifier ?? .any {
            case .any: return "(" + each.joined(separator: " OR ") + ")"
            case .all: return "(" + each.joined(separator: " AND ") + ")"
            case .none: return "NOT coalesce(" + each.joined(separator: " OR ") + ", 0)"
            }
        }
        // Put the key path on the left: `5 < age` is `age > 5` (`v IN list` is handled below).
        if c.op != .in, isPath(c.right), try constant(c.left) != nil {
            guard c.quantifier == nil, let flipped = c.op.flipped else {
                throw AtollError(.queryInvalid, "the operator \(c.op.rawValue) needs the property on its left, at position \(c.position)")
            }
            (c.left, c.right, c.op) = (c.right, c.left, flipped)
        }
        if case .subquery(let sq) = c.left {
            let count = Operand(try subqueryCount(sq, scope), Self.countProperty)
            if case .keyPath(let rightPath, let rightPosition) = c.right, c.quantifier == nil {
                return try compareColumns(count, c.op, try scalar(rightPath, scope, position: rightPosition, for: "a comparison"), c)
            }
            guard c.quantifier == nil, let value = try constant(c.right) else {
                throw AtollError(.queryInvalid, "a SUBQUERY's count compares with a number or a property, at position \(c.position)")
            }
            return try compare(count, c.op, value, c, path: [.operation("SUBQUERY")])
        }
        // `'x' IN tags`: the value is in the list property: ANY tags == 'x'.
        guard case .keyPath(let path, let position) = c.left else {
            if c.op == .in, case .keyPath(let path, let position) = c.right, let v = try constant(c.left) {
                return try keyPathPredicate(path, position: position, scope, quantifier: c.quantifier ?? .any) {
                    try self.compare($0, .equal, v, c, path: path)
                }
            }
            throw AtollError(.queryInvalid, "a comparison needs a property, at position \(c.position)")
        }
        if case .keyPath(let rightPath, let rightPosition) = c.right {
            return try keyPathPredicate(path, position: position, scope, quantifier: c.quantifier) { left in
                let right = try self.scalar(rightPath, scope, position: rightPosition, for: "a comparison")
                return try self.compareColumns(left, c.op, right, c)
            }
        }
        if case .subquery(let sq) = c.right {
            let count = Operand(try subqueryCount(sq, scope), Self.countProperty)
            return try keyPathPredicate(path, position: position, scope, quantifier: c.quantifier) { left in
                try self.compareColumns(left, c.op, count, c)
            }
        }
        guard let value = try constant(c.right) else {
            throw AtollError(.queryInvalid, "cannot compare at position \(c.position)")
        }
        return try keyPathPredicate(path, position: position, scope, quantifier: c.quantifier) {
            try self.compare($0, c.op, value, c, path: path)
        }
    }

    /// Pseudo-properties: counts (`@count`, `@size`, SUBQUERY counts), dictionary keys, type tags.
    private static let countProperty = Property(name: "@count", type: .int)
    private static let keysProperty = Property(name: "@keys", type: .string)
    private static let typeProperty = Property(name: "@type", type: .string)

    // MARK: - Key paths

    /// Compiles `path` from `scope` down to single values and hands each to `build`. Paths
    /// through lists, sets, dictionaries and backlinks become subqueries, quantified.
    private func keyPathPredicate(_ path: [PathPart], position: Int, _ start: Scope, quantifier: Quantifier?,
                                  build: (Operand) throws -> String) throws -> String {
        var scope = start
        var info = scope.info
        var alias = scope.alias
        var prefix = ""
        var k = 0
        var depth = start.depth
        func invalid(_ message: String) -> AtollError {
            AtollError(.queryInvalid, "\(message) (in '\(pathText(path))' at position \(position))")
        }
        func follow() throws {
            depth = try step(depth, path, position)
        }
        if case .variable(let name) = path.first {
            guard let binding = variables[name] else { throw invalid("unknown variable $\(name)") }
            switch binding {
            case .value(let operand):
                return try valuePath(operand, Array(path.dropFirst()), position: position, path: path, quantifier: quantifier, build: build)
            case .object(let s):
                scope = s
                info = s.info
                alias = s.alias
                depth = s.depth
                prefix = "$" + name
                if path.count == 1 {
                    let me = Property(name: "$" + name, type: .object, objectType: info.name)
                    return try quantified(quantifier, position: position, path: path, build(Operand("\(alias).\(info.rowKey)", me)))
                }
            }
            k = 1
        }
        while k < path.count {
            let rest = Array(path[(k + 1)...])
            switch path[k] {
            case .operation("@links"):
                try follow()
                if rest == [.operation("@count")] || rest == [.operation("@size")] {
                    return try quantified(quantifier, position: position, path: path, build(Operand(try allBacklinksCount(info, alias), Self.countProperty)))
                }
                guard rest.count >= 2, case .name(let source) = rest[0], case .name(let origin) = rest[1] else {
                    throw invalid("@links needs a class and a property: @links.Class.property")
                }
                let many = try backlinks(source, origin, info, alias)
                many.object?.depth = depth
                return try toManyPredicate(many, Array(rest.dropFirst(2)), position: position, path: path, quantifier: quantifier, build: build)
            case .operation(let op):
                throw invalid("'\(op)' must follow a collection\(op == "@type" ? " element or a mixed property" : "")")
            case .key, .index, .all:
                throw invalid("'\(path[k])' must follow a list, dictionary or mixed property")
            case .variable(let v):
                throw invalid("the variable $\(v) must start the key path")
            case .name(let name):
                guard let p = info.schema[property: name] else {
                    throw invalid("class '\(info.name)' has no property '\(name)'")
                }
                if p.isComputed {
                    try follow()
                    let many = try backlinks(p.objectType ?? "", p.linkOriginProperty ?? "", info, alias)
                    many.object?.depth = depth
                    return try toManyPredicate(many, rest, position: position, path: path, quantifier: quantifier, build: build)
                }
                if p.isCollection {
                    // One element, by dictionary key or list index: a to-one join.
                    if let element = try elementJoin(p, rest.first, info, alias, scope, prefix: prefix + "." + name) {
                        if p.type == .object, let target = store.classInfo(ifExists: p.objectType!), rest.count > 1 {
                            if !target.schema.isEmbedded { try follow() }
                            let (joined, _) = try join(scope, prefix: prefix + "." + name + "." + rest[0].description, target,
                                                   on: element.expr)
                            alias = joined
                            info = target
                            prefix += "." + name + "." + rest[0].description
                            k += 2
                            continue
                        }
                        return try valuePath(try readableLink(element), Array(rest.dropFirst()), position: position, path: path, quantifier: quantifier, build: build)
                    }
                    let many = try collection(p, info, alias)
                    if let object = many.object, !object.info.schema.isEmbedded {
                        try follow()
                        object.depth = depth
                    }
                    return try toManyPredicate(many, rest, position: position, path: path, quantifier: quantifier, build: build)
                }
                let column = Operand("\(alias).\(quote(p.name))", type: p.type == .mixed ? "\(alias).\(mixedTypeColumn(p))" : nil, p)
                if p.type != .object || rest.isEmpty || rest.first.map(isOperation) == true {
                    return try valuePath(try readableLink(column), rest, position: position, path: path, quantifier: quantifier, build: build)
                }
                // A to-one link (or embedded object): join it once per path prefix in this scope.
                let target = try store.classInfo(p.objectType!)
                if !target.schema.isEmbedded { try follow() }
                prefix += "." + name
                alias = try join(scope, prefix: prefix, target, on: column.expr).0
                info = target
            }
            k += 1
        }
        throw AtollError(.queryInvalid, "empty key path at position \(position)")
    }

    private func isOperation(_ part: PathPart) -> Bool {
        if case .operation = part { return true }
        return false
    }

    /// `LEFT JOIN target AS x ON x.rowkey = <on>` in `scope`, once per path prefix. A target
    /// the reader may not read is not joined: what follows the link reads as null.
    private func join(_ scope: Scope, prefix: String, _ target: ClassInfo, on: String) throws -> (String, Bool) {
        if let known = scope.joinAliases[prefix] { return (known, false) }
        let joined = "\(scope.alias)_j\(nextAlias())"
        let readable = try self.readable(target, "\(joined).\(target.rowKey)").map { " AND \($0)" } ?? ""
        scope.joins.append("LEFT JOIN \(target.table) AS \(joined) ON \(joined).\(target.rowKey) = \(on)\(readable)")
        scope.joinAliases[prefix] = joined
        return (joined, true)
    }

    // MARK: - What the reader may read

    /// The condition that the object whose row key is `rowKey` passes the reader's rule for its
    /// class: nil when every object does (no rule, an embedded class, or a rule's own key path).
    private func readable(_ info: ClassInfo, _ rowKey: String) throws -> String? {
        guard access != nil, !compilingRule, !info.schema.isEmbedded else { return nil }
        let scope = Scope(alias: "r\(nextAlias())", info: info)
        guard let condition = try ruleCondition(info, scope) else { return nil }
        if condition == "0" { return "0" }
        return "EXISTS (SELECT 1 \(from(scope)) WHERE \(scope.alias).\(info.rowKey) = \(rowKey) AND \(condition))"
    }

    /// The reader's rule for `info`'s objects, compiled in `scope` (its joins join there): nil
    /// when it lets every object through, "0" when none.
    private func ruleCondition(_ info: ClassInfo, _ scope: Scope) throws -> String? {
        guard let access, !compilingRule, !info.schema.isEmbedded else { return nil }
        switch access.rule(info.name) {
        case .everything:
            return nil
        case .nothing:
            return "0"
        case .matching(let text, let ruleArguments):
            let parsed: Query
            if let known = parsedRules[info.name] {
                parsed = known
            } else {
                parsed = try Parser.parse(text)
                guard parsed.descriptors.isEmpty else {
                    throw AtollError(.queryInvalid, "the read rule of '\(info.name)' may not SORT, DISTINCT or LIMIT")
                }
                parsedRules[info.name] = parsed
            }
            let saved = (arguments, variables)
            arguments = ruleArguments
            variables = [:]
            compilingRule = true
            defer {
                (arguments, variables) = saved
                compilingRule = false
            }
            return try predicate(parsed.predicate, scope)
        }
    }

    /// A link's value as the reader sees it: null where it names an object the reader may not
    /// read (so that comparing it tells nothing of that object, not even that it exists).
    private func readableLink(_ operand: Operand) throws -> Operand {
        guard operand.type == nil, operand.property.type == .object, let name = operand.property.objectType,
              let target = store.classInfo(ifExists: name), let readable = try readable(target, operand.expr) else { return operand }
        var out = operand
        out.expr = "(CASE WHEN \(readable) THEN \(operand.expr) END)"
        return out
    }

    /// One element of a collection property as a to-one join, when `next` picks one: a
    /// dictionary key (`dict['k']`, `dict.k`) or a list index (`list[0]`, `list[LAST]`).
    private func elementJoin(_ p: Property, _ next: PathPart?, _ info: ClassInfo, _ alias: String, _ scope: Scope,
                             prefix: String) throws -> Operand? {
        let table = info.listTable(p)
        let condition: String
        switch (p.collection, next) {
        case (.dictionary, .key(let key)?), (.dictionary, .name(let key)?):
            condition = "key = \(parameter(.text(key)))"
        case (.list, .index(let i)?):
            let position = "(SELECT position FROM \(table) WHERE owner = \(alias).\(info.rowKey) ORDER BY position \(i < 0 ? "DESC" : "ASC") LIMIT 1 OFFSET \(i < 0 ? -i - 1 : i))"
            condition = "position = \(position)"
        case (_, .index?), (_, .key?):
            throw AtollError(.queryInvalid, "'\(info.name).\(p.name)' is a \(p.collection.rawValue); '\(next!)' does not apply to it")
        default:
            return nil
        }
        let key = prefix + "[" + (next?.description ?? "") + "]"
        let side: String
        if let known = scope.joinAliases[key] {
            side = known
        } else {
            side = "\(scope.alias)_e\(nextAlias())"
            scope.joins.append("LEFT JOIN \(table) AS \(side) ON \(side).owner = \(alias).\(info.rowKey) AND \(side).\(condition)")
            scope.joinAliases[key] = side
        }
        return Operand("\(side).value", type: p.type == .mixed ? "\(side).type" : nil, p)
    }

    /// How deep a key path may go into the collections nested in a mixed value.
    static let maxNestedSteps = 100

    /// The rest of a key path after a single value: nothing, `@type` and subscripts of a
    /// mixed value, `@size` of a string.
    private func valuePath(_ operand: Operand, _ rest: [PathPart], position: Int, path: [PathPart], quantifier: Quantifier?,
                           build: (Operand) throws -> String) throws -> String {
        guard let next = rest.first else { return try quantified(quantifier, position: position, path: path, build(operand)) }
        let p = operand.property
        func invalid(_ message: String) -> AtollError {
            AtollError(.queryInvalid, "\(message) (in '\(pathText(path))' at position \(position))")
        }
        if let type = operand.type {
            // One SQL call takes the whole path (SQLite takes at most 127 arguments to a function).
            if case .operation = next {} else if (operand.nested?.keys.count ?? 0) >= Self.maxNestedSteps {
                throw invalid("a key path goes at most \(Self.maxNestedSteps) steps into a mixed value's nested collections")
            }
            switch next {
            case .operation("@type"):
                guard rest.count == 1 else { throw invalid("nothing may follow '@type'") }
                return try quantified(quantifier, position: position, path: path, build(Operand(type, Self.typeProperty)))
            case .operation("@size"), .operation("@count"):
                guard rest.count == 1 else { throw invalid("nothing may follow '\(next)'") }
                return try quantified(quantifier, position: position, path: path,
                                      build(Operand("atoll_mixed_size(\(operand.expr), \(type))", Self.countProperty)))
            case .key(let key), .name(let key):
                let element = operand.element(parameter(.text(key)), type: type)
                return try valuePath(element, Array(rest.dropFirst()), position: position, path: path, quantifier: quantifier, build: build)
            case .index(let i):
                let element = operand.element("\(i)", type: type)
                return try valuePath(element, Array(rest.dropFirst()), position: position, path: path, quantifier: quantifier, build: build)
            case .all:
                // Every element of a nested list or dictionary, by index.
                let n = "n\(nextAlias())"
                let element = operand.element("\(n).i", type: type)
                let inner = try valuePath(element, Array(rest.dropFirst()), position: position, path: path, quantifier: nil, build: build)
                let elements = "WITH RECURSIVE \(n)(i) AS (SELECT 0 WHERE atoll_mixed_size(\(operand.expr), \(type)) > 0 UNION ALL SELECT i + 1 FROM \(n) WHERE i + 1 < atoll_mixed_size(\(operand.expr), \(type))) SELECT 1 FROM \(n)"
                switch quantifier ?? .any {
                case .any: return "EXISTS (\(elements) WHERE \(inner))"
                case .none: return "NOT EXISTS (\(elements) WHERE \(inner))"
                case .all: return "NOT EXISTS (\(elements) WHERE NOT coalesce(\(inner), 0))"
                }
            default:
                throw invalid("'\(next)' does not apply to a mixed value")
            }
        }
        switch next {
        case .operation("@size"), .operation("@count"):
            guard rest.count == 1, p.type == .string || p.type == .data else {
                throw invalid("'\(next)' needs a list, set, dictionary, string or data property; '\(p.name)' is \(p.typeName)")
            }
            return try quantified(quantifier, position: position, path: path, build(Operand("length(\(operand.expr))", Self.countProperty)))
        case .operation("@type"):
            // A typed value's type is its property's (null when it is null).
            guard rest.count == 1 else { throw invalid("nothing may follow '@type'") }
            let tag = p.type == .object ? MixedTag.linkPrefix + (p.objectType ?? "") : p.type.rawValue
            return try quantified(quantifier, position: position, path: path,
                                  build(Operand("CASE WHEN \(operand.expr) IS NULL THEN NULL ELSE \(parameter(.text(tag))) END", Self.typeProperty)))
        default:
            throw invalid("'\(p.name)' is \(p.typeName), not a link; '\(next)' cannot follow it")
        }
    }

    /// The rest of a key path after a to-many step: its elements quantified (ANY by default),
    /// their count, an aggregate, a dictionary's keys or values, or a path into the elements.
    private func toManyPredicate(_ many: ToMany, _ rest: [PathPart], position: Int, path: [PathPart], quantifier: Quantifier?,
                                 build: (Operand) throws -> String) throws -> String {
        func invalid(_ message: String) -> AtollError {
            AtollError(.queryInvalid, "\(message) (in '\(pathText(path))' at position \(position))")
        }
        func quantify(_ inner: String) -> String {
            switch quantifier ?? .any {
            case .any: return "EXISTS \(many.sql("1", inner))"
            case .none: return "NOT EXISTS \(many.sql("1", inner))"
            case .all: return "NOT EXISTS \(many.sql("1", "NOT coalesce(\(inner), 0)"))"
            }
        }
        var rest = rest
        if rest.first == .all { rest.removeFirst() }
        guard let next = rest.first else { return quantify(try build(many.element)) }
        switch next {
        case .operation("@count"), .operation("@size"):
            guard rest.count == 1 else { throw invalid("nothing may follow '\(next)'") }
            return try quantified(quantifier, position: position, path: path, build(Operand(many.sql(many.count, nil), Self.countProperty)))
        case .operation(let op) where ["@sum", "@avg", "@min", "@max"].contains(op):
            let values: Operand
            if let object = many.object {
                guard rest.count >= 2 else { throw invalid("'\(op)' over \(many.what) needs a property: '\(op).property'") }
                values = try scalar(Array(rest.dropFirst()), object, position: position, for: op)
            } else {
                guard rest.count == 1 else { throw invalid("nothing may follow '\(op)' over \(many.what)") }
                values = many.element
            }
            let (expr, result) = try aggregate(op, values, invalid)
            return try quantified(quantifier, position: position, path: path, build(Operand(many.sql(expr, nil), result)))
        case .operation("@keys"):
            guard let keys = many.keys else { throw invalid("'@keys' needs a dictionary") }
            guard rest.count == 1 else { throw invalid("nothing may follow '@keys'") }
            return quantify(try build(keys))
        case .operation("@values"):
            guard many.keys != nil else { throw invalid("'@values' needs a dictionary") }
            return try toManyPredicate(many, Array(rest.dropFirst()), position: position, path: path, quantifier: quantifier, build: build)
        default:
            if let object = many.object {
                return quantify(try keyPathPredicate(rest, position: position, object, quantifier: nil, build: build))
            }
            return quantify(try valuePath(many.element, rest, position: position, path: path, quantifier: nil, build: build))
        }
    }

    /// `sum`, `avg`, `min`, `max` of values, with the property that types the result. Empty
    /// collections: `@sum` is 0, the others null. Mixed values: their numbers.
    private func aggregate(_ op: String, _ values: Operand, _ invalid: (String) -> AtollError) throws -> (String, Property) {
        let p = values.property
        var expr = values.expr
        var type = p.type
        if let tag = values.type {
            guard op != "@min", op != "@max" else {
                expr = "CASE WHEN \(tag) IN ('int', 'float', 'double') AND typeof(\(expr)) != 'blob' THEN \(expr) END"
                return (op == "@min" ? "min(\(expr))" : "max(\(expr))", Property(name: op, type: .double, isOptional: true))
            }
            expr = "CASE WHEN \(tag) IN ('int', 'float', 'double') AND typeof(\(expr)) != 'blob' THEN \(expr) END"
            type = .double
        }
        let numeric: Set<PropertyType> = [.int, .float, .double, .mixed]
        if p.type == .decimal128, op == "@sum" || op == "@avg" {
            // Exact, in a registered aggregate (SQLite's sum would read the stored BLOBs).
            return ("\(op == "@sum" ? "atoll_decimal_sum" : "atoll_decimal_avg")(\(expr))",
                    Property(name: op, type: .decimal128, isOptional: true))
        }
        switch op {
        case "@sum", "@avg":
            guard numeric.contains(p.type) else {
                throw invalid("'\(op)' needs numbers; '\(p.name)' is \(p.typeName)")
            }
            if op == "@avg" { return ("avg(\(expr))", Property(name: op, type: .double, isOptional: true)) }
            return ("coalesce(sum(\(expr)), 0)", Property(name: op, type: type == .int ? .int : .double))
        default:
            guard numeric.contains(p.type) || p.type == .date || p.type == .decimal128 else {
                throw invalid("'\(op)' needs numbers or dates; '\(p.name)' is \(p.typeName)")
            }
            let guarded = type == .float || type == .double ? "CASE WHEN typeof(\(expr)) != 'blob' THEN \(expr) END" : expr
            return ("\(op == "@min" ? "min" : "max")(\(guarded))", Property(name: op, type: type, isOptional: true))
        }
    }

    /// The elements of a list, set or dictionary of the object at `alias`.
    private func collection(_ p: Property, _ info: ClassInfo, _ alias: String) throws -> ToMany {
        let side = alias + "_l\(nextAlias())"
        var from = "FROM \(info.listTable(p)) AS \(side)"
        var object: Scope?
        if p.type == .object {
            // Elements the reader may not read are not there.
            let target = try store.classInfo(p.objectType!)
            let objectAlias = side + "o"
            let readable = try self.readable(target, "\(objectAlias).\(target.rowKey)").map { " AND \($0)" } ?? ""
            from += " JOIN \(target.table) AS \(objectAlias) ON \(objectAlias).\(target.rowKey) = \(side).value\(readable)"
            object = Scope(alias: objectAlias, info: target)
        }
        return ToMany(from: from, match: "\(side).owner = \(alias).\(info.rowKey)",
                      element: Operand("\(side).value", type: p.type == .mixed ? "\(side).type" : nil, p),
                      object: object,
                      keys: p.collection == .dictionary ? Operand("\(side).key", Self.keysProperty) : nil,
                      what: "'\(info.name).\(p.name)'")
    }

    /// The objects of class `sourceName` whose property `originName` links to the object at
    /// `alias` (of class `info`).
    private func backlinks(_ sourceName: String, _ originName: String, _ info: ClassInfo, _ alias: String) throws -> ToMany {
        guard let source = store.classInfo(ifExists: sourceName) else {
            throw AtollError(.queryInvalid, "@links: no class '\(sourceName)'")
        }
        guard let origin = source.schema[property: originName], origin.type == .object, origin.objectType == info.name else {
            throw AtollError(.queryInvalid, "@links: '\(sourceName).\(originName)' is not a link to '\(info.name)'")
        }
        let b = alias + "_b\(nextAlias())"
        let me = Property(name: originName, type: .object, objectType: source.name)
        // Linking objects the reader may not read are not there.
        let readable = try self.readable(source, "\(b).\(source.rowKey)").map { " AND \($0)" } ?? ""
        if origin.isCollection {
            let side = b + "l"
            return ToMany(from: "FROM \(source.listTable(origin)) AS \(side) JOIN \(source.table) AS \(b) ON \(b).\(source.rowKey) = \(side).owner",
                          match: "\(side).value = \(alias).\(info.rowKey)\(readable)",
                          element: Operand("\(b).\(source.rowKey)", me), object: Scope(alias: b, info: source),
                          count: "count(DISTINCT \(b).\(source.rowKey))", what: "the backlinks of '\(sourceName).\(originName)'")
        }
        return ToMany(from: "FROM \(source.table) AS \(b)", match: "\(b).\(quote(origin.name)) = \(alias).\(info.rowKey)\(readable)",
                      element: Operand("\(b).\(source.rowKey)", me), object: Scope(alias: b, info: source),
                      what: "the backlinks of '\(sourceName).\(originName)'")
    }

    /// `@links.@count`: how many links of any class point to the object.
    private func allBacklinksCount(_ info: ClassInfo, _ alias: String) throws -> String {
        // Links from objects the reader may not read do not count.
        let counts = try store.incoming(info.name).map { source, p in
            let b = "b\(nextAlias())"
            if p.isCollection {
                let readable = try self.readable(source, "\(b).owner").map { " AND \($0)" } ?? ""
                return "(SELECT count(*) FROM \(source.listTable(p)) AS \(b) WHERE \(b).value = \(alias).\(info.rowKey)\(readable))"
            }
            let readable = try self.readable(source, "\(b).\(source.rowKey)").map { " AND \($0)" } ?? ""
            return "(SELECT count(*) FROM \(source.table) AS \(b) WHERE \(b).\(quote(p.name)) = \(alias).\(info.rowKey)\(readable))"
        }
        return counts.isEmpty ? "0" : "(" + counts.joined(separator: " + ") + ")"
    }

    /// `SUBQUERY(collection, $x, predicate).@count`: the predicate runs with `$x` bound to each
    /// element; other key paths in it start from the queried object.
    private func subqueryCount(_ sq: Subquery, _ scope: Scope) throws -> String {
        let many = try toManySource(sq.collection, scope, position: sq.position)
        let saved = variables[sq.variable]
        variables[sq.variable] = many.object.map { .object($0) } ?? .value(many.element)
        defer { variables[sq.variable] = saved }
        let condition = try predicate(sq.predicate, scope)
        return many.sql(many.count, condition)
    }

    /// The to-many step a key path ends with (through to-one links before it).
    private func toManySource(_ path: [PathPart], _ scope: Scope, position: Int) throws -> ToMany {
        var info = scope.info
        var alias = scope.alias
        var prefix = ""
        var depth = scope.depth
        // The elements, their depth counted when they are objects of another class.
        func counted(_ many: ToMany) throws -> ToMany {
            if let object = many.object, !object.info.schema.isEmbedded { object.depth = try step(depth, path, position) }
            return many
        }
        for (k, part) in path.enumerated() {
            let isLast = k == path.count - 1
            guard case .name(let name) = part, let p = info.schema[property: name] else {
                if case .operation("@links") = part, path.count == k + 3, case .name(let s) = path[k + 1], case .name(let o) = path[k + 2] {
                    return try counted(try backlinks(s, o, info, alias))
                }
                break
            }
            if isLast, p.isComputed { return try counted(try backlinks(p.objectType ?? "", p.linkOriginProperty ?? "", info, alias)) }
            if isLast, p.isCollection { return try counted(try collection(p, info, alias)) }
            guard p.type == .object, !p.isCollection, !isLast, let target = store.classInfo(ifExists: p.objectType!) else { break }
            if !target.schema.isEmbedded { depth = try step(depth, path, position) }
            prefix += "." + name
            alias = try join(scope, prefix: prefix, target, on: "\(alias).\(quote(p.name))").0
            info = target
        }
        throw AtollError(.queryInvalid, "SUBQUERY needs a list, set, dictionary or backlinks property, not '\(pathText(path))' (at position \(position))")
    }

    private func quantified(_ q: Quantifier?, position: Int, path: [PathPart], _ sql: String) throws -> String {
        guard q == nil else {
            throw AtollError(.queryInvalid, "ANY/ALL/NONE need a collection in the key path '\(pathText(path))' (at position \(position))")
        }
        return sql
    }

    /// One more link followed from `depth`: refused past `maxLinkDepth` (a read rule's own key
    /// paths are not counted).
    private func step(_ depth: Int, _ path: [PathPart], _ position: Int) throws -> Int {
        guard let maxLinkDepth, !compilingRule else { return depth + 1 }
        guard depth < maxLinkDepth else {
            throw AtollError(.queryInvalid, "'\(pathText(path))' (at position \(position)) follows more than \(maxLinkDepth) link\(maxLinkDepth == 1 ? "" : "s"): a key path may follow at most \(maxLinkDepth) here")
        }
        return depth + 1
    }

    private func nextAlias() -> Int {
        aliasCounter += 1
        return aliasCounter
    }

    /// A key path that must name one value per object (for SORT, DISTINCT, aggregates and the
    /// right side of a comparison).
    func scalar(_ path: [PathPart], _ scope: Scope, position: Int, for use: String) throws -> Operand {
        var result: Operand?
        let sql = try keyPathPredicate(path, position: position, scope, quantifier: nil) { operand in
            result = operand
            return "1"
        }
        guard let result, sql == "1" else {
            throw AtollError(.queryInvalid, "\(use) needs a single value, but '\(pathText(path))' goes through a collection")
        }
        return result
    }

    // MARK: - Comparisons

    private func compare(_ operand: Operand, _ op: Comparison.Op, _ value: Value, _ c: Comparison,
                         path: [PathPart]) throws -> String {
        if operand.type != nil { return try compareMixed(operand, op, value, c, path: path) }
        if operand.property.name == "@type" { return try compareType(operand.expr, op, value, c) }
        let expr = operand.expr
        let p = operand.property
        let name = pathText(path)
        if c.caseInsensitive || c.diacriticInsensitive {
            guard p.type == .string else {
                throw AtollError(.queryInvalid, "[c] and [d] apply to strings; '\(name)' is \(p.typeName)")
            }
        }
        // `list == {1, 2}`: a list of values on the right means IN.
        if op == .equal, case .list = value { return try compare(operand, .in, value, c, path: path) }
        switch op {
        case .in:
            guard case .list(let items) = value else {
                throw AtollError(.queryInvalid, "IN needs a list {…} or a list argument at position \(c.position)")
            }
            if items.isEmpty { return "0" }
            if c.caseInsensitive || c.diacriticInsensitive {
                let parts = try items.map { try compare(operand, .equal, $0, c, path: path) }
                return "(" + parts.joined(separator: " OR ") + ")"
            }
            // A flat IN list: long lists must not become deep OR trees.
            let values = try items.filter { !$0.isNull }.map { try self.operand(p, $0, name, c) }
            var sql = values.isEmpty ? "0" : "\(expr) IN (\(values.joined(separator: ", ")))"
            if items.contains(where: \.isNull) { sql = "(\(sql) OR \(expr) IS NULL)" }
            return sql
        case .between:
            guard case .list(let bounds) = value, bounds.count == 2 else {
                throw AtollError(.queryInvalid, "BETWEEN needs two values at position \(c.position)")
            }
            try requireOrdered(p, name)
            let lo = try self.operand(p, bounds[0], name, c), hi = try self.operand(p, bounds[1], name, c)
            return "(" + (try planned(expr, p, "BETWEEN \(lo) AND \(hi)")) + ")"
        case .beginsWith, .endsWith, .contains, .like:
            guard p.type == .string || p.type == .data else {
                throw AtollError(.queryInvalid, "\(op.rawValue) needs a string property; '\(name)' is \(p.typeName)")
            }
            guard !value.isNull else { return "0" }
            let arg = try self.operand(p, value, name, c)
            if !c.caseInsensitive, !c.diacriticInsensitive, p.type == .string {
                switch op {
                case .beginsWith: return "coalesce(substr(\(expr), 1, length(\(arg))) = \(arg), 0)"
                case .endsWith: return "coalesce(\(expr) IS NOT NULL AND (length(\(arg)) = 0 OR substr(\(expr), -length(\(arg))) = \(arg)), 0)"
                case .contains: return "coalesce(instr(\(expr), \(arg)) > 0, 0)"
                default: break
                }
            }
            return "atoll_match(\(expr), \(arg), \(op.matchCode), \(c.flags))"
        case .equal, .notEqual:
            if value.isNull {
                return "\(expr) IS \(op == .equal ? "" : "NOT ")NULL"
            }
            let arg = try self.operand(p, value, name, c)
            if c.caseInsensitive || c.diacriticInsensitive {
                let match = "atoll_match(\(expr), \(arg), 0, \(c.flags))"
                return op == .equal ? match : "NOT \(match)"
            }
            return op == .equal ? "\(expr) = \(arg)" : "\(expr) IS NOT \(arg)"
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            try requireOrdered(p, name)
            guard !value.isNull else { return "0" }
            let arg = try self.operand(p, value, name, c)
            return "(" + (try planned(expr, p, "\(op.rawValue) \(arg)")) + ")"
        }
    }

    /// A comparison of a mixed value: a constant matches values of its own kind, numbers any
    /// number (int, float, double, decimal128) of equal value. `!=` is NOT `==`, as in Realm.
    private func compareMixed(_ operand: Operand, _ op: Comparison.Op, _ value: Value, _ c: Comparison,
                              path: [PathPart]) throws -> String {
        let v = operand.expr, t = operand.type!
        switch op {
        case .notEqual:
            return "NOT coalesce(\(try compareMixed(operand, .equal, value, c, path: path)), 0)"
        case .in:
            guard case .list(let items) = value else {
                throw AtollError(.queryInvalid, "IN needs a list {…} or a list argument at position \(c.position)")
            }
            if items.isEmpty { return "0" }
            return "(" + (try items.map { try compareMixed(operand, .equal, $0, c, path: path) }).joined(separator: " OR ") + ")"
        case .between:
            guard case .list(let bounds) = value, bounds.count == 2 else {
                throw AtollError(.queryInvalid, "BETWEEN needs two values at position \(c.position)")
            }
            return "(\(try compareMixed(operand, .greaterOrEqual, bounds[0], c, path: path)) AND \(try compareMixed(operand, .lessOrEqual, bounds[1], c, path: path)))"
        default:
            break
        }
        if op == .equal, case .list = value { return try compareMixed(operand, .in, value, c, path: path) }
        let ordered = [.less, .lessOrEqual, .greater, .greaterOrEqual].contains(op)
        func typed(_ type: PropertyType, _ constant: Value) throws -> String {
            let p = Property(name: operand.property.name, type: type, isOptional: true)
            let inner = try compare(Operand(v, p), op, constant, c, path: path)
            return "(\(t) = '\(type.rawValue)' AND \(inner))"
        }
        switch value {
        case .null:
            return op == .equal ? "\(t) IS NULL" : "0"
        case .int, .float, .double, .decimal:
            if c.caseInsensitive || c.diacriticInsensitive {
                throw AtollError(.queryInvalid, "[c] and [d] apply to strings, not \(value.kindName) \(value.shortDescription)")
            }
            guard op == .equal || ordered else {
                throw AtollError(.queryInvalid, "\(op.rawValue) needs a string, not \(value.kindName) \(value.shortDescription)")
            }
            let number: SQLValue
            let decimal: Decimal128?
            switch value {
            case .int(let i): number = .integer(i); decimal = Decimal128(i)
            case .float(let f): number = .real(Double(f)); decimal = Decimal128(Double(f))
            case .double(let d): number = .real(d); decimal = Decimal128(d)
            case .decimal(let d): number = .real(d.doubleValue); decimal = d
            default: return "0"
            }
            let sqlOp = op == .equal ? "=" : op.rawValue
            var sql = "(\(t) IN ('int', 'float', 'double') AND typeof(\(v)) != 'blob' AND \(v) \(sqlOp) \(parameter(number)))"
            if let decimal { sql += " OR (\(t) = 'decimal128' AND \(v) \(sqlOp) \(parameter(.blob(decimal.sortKey))))" }
            return "(\(sql))"
        case .string:
            return try typed(.string, value)
        case .link(let l):
            guard op == .equal, let target = store.classInfo(ifExists: l.className) else {
                throw AtollError(.queryInvalid, "a link compares with == or != only, to an object of a class of the schema")
            }
            let key: String
            if let pk = target.primaryKey {
                guard let k = try? store.checkedPrimaryKey(target, l.primaryKey) else {
                    throw AtollError(.queryInvalid, "\(l.className)'s primary key is \(pk.typeName); got \(l.primaryKey.shortDescription)")
                }
                key = "(SELECT \(target.rowKey) FROM \(target.table) WHERE \(target.primaryKeyColumn) = \(parameter(pk.type.sqlValue(k))))"
            } else {
                key = parameter(l.primaryKey.intValue.map { .integer($0) } ?? .null)
            }
            return "(\(t) = \(parameter(.text(MixedTag.linkPrefix + target.name))) AND \(v) = \(key))"
        case .list, .object:
            throw AtollError(.queryInvalid, "cannot compare '\(pathText(path))' with a \(value.kindName) at position \(c.position)")
        default:
            return try typed(value.scalarType!, value)
        }
    }

    /// `mixed.@type == 'string'`: Realm's type names, and 'numeric' for any number.
    private func compareType(_ tag: String, _ op: Comparison.Op, _ value: Value, _ c: Comparison) throws -> String {
        if op == .in || (op == .equal && value.listValue != nil) {
            guard case .list(let items) = value, !items.isEmpty else { return "0" }
            return "(" + (try items.map { try compareType(tag, .equal, $0, c) }).joined(separator: " OR ") + ")"
        }
        guard op == .equal || op == .notEqual, case .string(let name) = value else {
            throw AtollError(.queryInvalid, "@type compares with == or != to a type name such as 'string', at position \(c.position)")
        }
        let condition: String
        switch name.lowercased() {
        case "null": condition = "\(tag) IS NULL"
        case "bool", "boolean": condition = "\(tag) = 'bool'"
        case "int", "integer", "long": condition = "\(tag) = 'int'"
        case "float": condition = "\(tag) = 'float'"
        case "double": condition = "\(tag) = 'double'"
        case "decimal", "decimal128": condition = "\(tag) = 'decimal128'"
        case "numeric", "number": condition = "\(tag) IN ('int', 'float', 'double', 'decimal128')"
        case "string": condition = "\(tag) = 'string'"
        case "binary", "data": condition = "\(tag) = 'data'"
        case "date", "timestamp": condition = "\(tag) = 'date'"
        case "objectid": condition = "\(tag) = 'objectId'"
        case "uuid": condition = "\(tag) = 'uuid'"
        case "object", "link": condition = "\(tag) GLOB 'link:*'"
        case "list", "array": condition = "\(tag) = 'list'"
        case "dictionary", "map": condition = "\(tag) = 'dictionary'"
        case "collection": condition = "\(tag) IN ('list', 'dictionary')"
        default:
            throw AtollError(.queryInvalid, "unknown type name '\(name)' for @type (at position \(c.position))")
        }
        return op == .equal ? "coalesce(\(condition), 0)" : "NOT coalesce(\(condition), 0)"
    }

    private func requireOrdered(_ p: Property, _ name: String) throws {
        switch p.type {
        case .bool, .object, .objectId, .uuid:
            if p.type == .objectId { return }
            throw AtollError(.queryInvalid, "'\(name)' is \(p.typeName); it cannot be compared with < or >")
        default: return
        }
    }

    private func compareColumns(_ left: Operand, _ op: Comparison.Op, _ right: Operand, _ c: Comparison) throws -> String {
        let (l, lp, r, rp) = (left.expr, left.property, right.expr, right.property)
        let numeric: Set<PropertyType> = [.int, .float, .double]
        guard left.type == nil, right.type == nil else {
            throw AtollError(.queryInvalid, "a mixed value compares with constants, not with another property (at position \(c.position))")
        }
        guard lp.type == rp.type || (numeric.contains(lp.type) && numeric.contains(rp.type)),
              lp.type != .object || lp.objectType == rp.objectType else {
            throw AtollError(.queryInvalid, "cannot compare \(lp.name) (\(lp.typeName)) with \(rp.name) (\(rp.typeName))")
        }
        switch op {
        case .equal: return c.caseInsensitive ? "atoll_match(\(l), \(r), 0, \(c.flags))" : "\(l) IS \(r)"
        case .notEqual: return c.caseInsensitive ? "NOT atoll_match(\(l), \(r), 0, \(c.flags))" : "\(l) IS NOT \(r)"
        case .less, .lessOrEqual, .greater, .greaterOrEqual: return "\(l) \(op.rawValue) \(r)"
        case .beginsWith, .endsWith, .contains, .like: return "atoll_match(\(l), \(r), \(op.matchCode), \(c.flags))"
        case .in, .between:
            throw AtollError(.queryInvalid, "\(op.rawValue) needs constant values on its right")
        }
    }

    /// A constant converted to the column's SQL form, as a numbered parameter.
    private func operand(_ p: Property, _ value: Value, _ name: String, _ c: Comparison) throws -> String {
        if p.name == "@count" {
            switch value {
            case .int(let i): return parameter(.integer(i))
            case .double(let d): return parameter(.real(d))
            default: throw AtollError(.queryInvalid, "'\(name)' is a count; cannot compare it with \(value.kindName) \(value.shortDescription)")
            }
        }
        if p.type == .object {
            let target = try store.classInfo(p.objectType!)
            var key = value
            if case .link(let l) = value { key = l.primaryKey }
            if case .object(let doc) = value, let pk = target.primaryKey, let k = doc[pk.name] { key = k }
            guard target.primaryKey != nil, let pk = try? store.checkedPrimaryKey(target, key) else {
                throw AtollError(.queryInvalid, "'\(name)' links to \(target.name); compare it with null or a \(target.name) primary key, not \(value.kindName) \(value.shortDescription)")
            }
            if target.primaryKeyIsRowKey { return parameter(target.primaryKey!.type.sqlValue(pk)) }
            return "(SELECT \(target.rowKey) FROM \(target.table) WHERE \(target.primaryKeyColumn) = \(parameter(target.primaryKey!.type.sqlValue(pk))))"
        }
        if p.type == .data, case .string(let s) = value { return parameter(.blob(Array(s.utf8))) }
        // Numbers compare across numeric types.
        switch (p.type, value) {
        case (.int, .double(let d)), (.float, .double(let d)), (.double, .double(let d)): return parameter(.real(d))
        case (.int, .float(let f)), (.double, .float(let f)), (.float, .float(let f)): return parameter(.real(Double(f)))
        case (.float, .int(let i)), (.double, .int(let i)), (.int, .int(let i)): return parameter(.integer(i))
        case (.int, .decimal(let d)), (.float, .decimal(let d)), (.double, .decimal(let d)): return parameter(.real(d.doubleValue))
        default: break
        }
        guard let v = p.type.coerce(value) else {
            throw AtollError(.queryInvalid, "cannot compare '\(name)' (\(p.typeName)) with \(value.kindName) \(value.shortDescription) (at position \(c.position))")
        }
        return parameter(p.type.sqlValue(v))
    }

    // MARK: - Planning

    /// A range comparison on `expr`, planned. SQLite's planner takes an index for any range,
    /// even one that selects half the table, where a scan is ten times faster (ANALYZE does not
    /// help without STAT4). For an indexed column of the queried class itself, count how many
    /// rows the range selects, stopping at a twentieth of the table (cheap: it reads the index
    /// only), and hide the index (`+column`) when the count reaches that bound.
    private func planned(_ expr: String, _ p: Property, _ rest: String) throws -> String {
        // NaN is stored as a BLOB, which SQLite orders above every number: it never matches.
        let nanGuard = p.type == .float || p.type == .double ? " AND typeof(\(expr)) != 'blob'" : ""
        return try plannedRange(expr, p, rest) + nanGuard
    }

    private func plannedRange(_ expr: String, _ p: Property, _ rest: String) throws -> String {
        let plain = "\(expr) \(rest)"
        guard p.isIndexed, expr == "t.\(quote(p.name))" else { return plain }
        let rows = try store.rowCount(root, conn)
        let bound = max(1000, rows / 20)
        guard rows > bound else { return plain }
        let probe = try conn.prepare("SELECT count(*) FROM (SELECT 1 FROM \(root.table) AS t WHERE \(plain) LIMIT \(bound))")
        probe.bindAvailable(parameters)
        _ = try probe.step()
        return probe.int64(0) >= Int64(bound) ? "+\(plain)" : plain
    }
}

extension Comparison.Op {
    var flipped: Comparison.Op? {
        switch self {
        case .equal: return .equal
        case .notEqual: return .notEqual
        case .less: return .greater
        case .lessOrEqual: return .greaterOrEqual
        case .greater: return .less
        case .greaterOrEqual: return .lessOrEqual
        default: return nil
        }
    }

    /// The operation code of the `atoll_match` SQL function.
    var matchCode: Int {
        switch self {
        case .beginsWith: return 1
        case .endsWith: return 2
        case .contains: return 3
        case .like: return 4
        default: return 0
        }
    }
}

extension Comparison {
    /// The flags of the `atoll_match` SQL function: 1 case-insensitive, 2 diacritic-insensitive.
    var flags: Int { (caseInsensitive ? 1 : 0) | (diacriticInsensitive ? 2 : 0) }
}
