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
}

/// Compiles parsed queries to SQL. Never splices user text into SQL: constants become numbered
/// parameters; property names come from the schema and are quoted.
final class QueryCompiler {
    private let store: Store
    private let conn: Connection
    private let root: ClassInfo
    private let arguments: [Value]
    private var parameters: [SQLValue] = []
    private var aliasCounter = 0

    init(store: Store, conn: Connection, root: ClassInfo, arguments: [Value]) {
        self.store = store
        self.conn = conn
        self.root = root
        self.arguments = arguments
    }

    /// A scope of a SELECT: its class alias and the to-one joins it needs.
    final class Scope {
        let alias: String
        let info: ClassInfo
        var joins: [String] = []
        var joinAliases: [String: String] = [:]
        init(alias: String, info: ClassInfo) {
            self.alias = alias
            self.info = info
        }
    }

    func compile(_ query: Query) throws -> CompiledQuery {
        let scope = Scope(alias: "t", info: root)
        var condition = try predicate(query.predicate, scope)
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
                    let (expr, p) = try scalar(key.path, scope, position: key.position, for: "SORT")
                    if p.type == .object, store.embeddedTarget(p) != nil {
                        throw AtollError(.queryInvalid, "cannot sort by embedded object '\(key.path.joined(separator: "."))'")
                    }
                    terms.append(expr + (key.ascending ? " ASC" : " DESC"))
                }
                order = terms + order
            case .distinct(let keys):
                let exprs = try keys.map { try scalar($0.path, scope, position: $0.position, for: "DISTINCT").0 }
                condition = "t.\(root.rowKey) IN (SELECT rk FROM (SELECT t.\(root.rowKey) AS rk, row_number() OVER (PARTITION BY \(exprs.joined(separator: ", ")) ORDER BY \(orderTerms(order))) AS rn \(from(scope)) WHERE \(condition)) WHERE rn = 1)"
            case .limit(let l):
                limit = l
            }
        }
        return CompiledQuery(from: from(scope), condition: condition, orderBy: orderTerms(order), limit: limit,
                             parameters: parameters)
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
        case .keyPath: return nil
        }
    }

    private func comparison(_ c: Comparison, _ scope: Scope) throws -> String {
        var c = c
        // Put the key path on the left: `5 < age` is `age > 5` (`v IN list` is handled below).
        if c.op != .in, case .keyPath = c.right, try constant(c.left) != nil {
            guard c.quantifier == nil, let flipped = c.op.flipped else {
                throw AtollError(.queryInvalid, "the operator \(c.op.rawValue) needs the property on its left, at position \(c.position)")
            }
            (c.left, c.right, c.op) = (c.right, c.left, flipped)
        }
        // `'x' IN tags`: the value is in the list property: ANY tags == 'x'.
        guard case .keyPath(let path, let position) = c.left else {
            if c.op == .in, case .keyPath(let path, let position) = c.right, let v = try constant(c.left) {
                return try keyPathPredicate(path, position: position, scope, quantifier: c.quantifier ?? .any) { expr, p in
                    try self.compare(expr, p, .equal, v, c, path: path)
                }
            }
            throw AtollError(.queryInvalid, "a comparison needs a property, at position \(c.position)")
        }
        if case .keyPath(let rightPath, let rightPosition) = c.right {
            return try keyPathPredicate(path, position: position, scope, quantifier: c.quantifier) { expr, p in
                let (rexpr, rp) = try self.scalar(rightPath, scope, position: rightPosition, for: "a comparison")
                return try self.compareColumns(expr, p, c.op, rexpr, rp, c)
            }
        }
        guard let value = try constant(c.right) else {
            throw AtollError(.queryInvalid, "cannot compare at position \(c.position)")
        }
        return try keyPathPredicate(path, position: position, scope, quantifier: c.quantifier) { expr, p in
            try self.compare(expr, p, c.op, value, c, path: path)
        }
    }

    /// A pseudo-property for `@count` and `@size`.
    private static let countProperty = Property(name: "@count", type: .int)

    /// Compiles `path` from `scope` down to a single value and hands its SQL expression and
    /// property to `build`. Paths through lists become EXISTS subqueries, quantified.
    private func keyPathPredicate(_ path: [String], position: Int, _ scope: Scope, quantifier: Quantifier?,
                                  build: (String, Property) throws -> String) throws -> String {
        var info = scope.info
        var alias = scope.alias
        var prefix = ""
        for (k, name) in path.enumerated() {
            let isLast = k == path.count - 1
            if name.hasPrefix("@") {
                throw AtollError(.queryInvalid, "'\(name)' must follow a list or string property, at position \(position)")
            }
            guard let p = info.schema[property: name] else {
                throw AtollError(.queryInvalid, "class '\(info.name)' has no property '\(name)' (in '\(path.joined(separator: "."))' at position \(position))")
            }
            let next = isLast ? nil : path[k + 1]
            if p.isList {
                let side = alias + "_l\(nextAlias())"
                let ownerMatch = "\(side).owner = \(alias).\(info.rowKey)"
                if next == "@count" || next == "@size" {
                    guard k + 2 == path.count else {
                        throw AtollError(.queryInvalid, "nothing may follow '\(next!)' in '\(path.joined(separator: "."))'")
                    }
                    let expr = "(SELECT count(*) FROM \(info.listTable(p)) AS \(side) WHERE \(ownerMatch))"
                    return try quantified(nil, position: position, path: path, build(expr, Self.countProperty))
                }
                var sub: Scope
                var fromSQL = "FROM \(info.listTable(p)) AS \(side)"
                let inner: String
                if p.type == .object {
                    let target = try store.classInfo(p.objectType!)
                    let objectAlias = side + "o"
                    fromSQL += " JOIN \(target.table) AS \(objectAlias) ON \(objectAlias).\(target.rowKey) = \(side).value"
                    sub = Scope(alias: objectAlias, info: target)
                    if isLast {
                        inner = try build("\(side).value", p)
                    } else {
                        inner = try keyPathPredicate(Array(path[(k + 1)...]), position: position, sub, quantifier: nil, build: build)
                    }
                } else {
                    guard isLast else {
                        throw AtollError(.queryInvalid, "'\(info.name).\(name)' is a list of \(p.type.rawValue); '\(next!)' cannot follow it")
                    }
                    sub = Scope(alias: side, info: info)
                    inner = try build("\(side).value", p)
                }
                let subFrom = ([fromSQL] + sub.joins).joined(separator: " ")
                switch quantifier ?? .any {
                case .any: return "EXISTS (SELECT 1 \(subFrom) WHERE \(ownerMatch) AND \(inner))"
                case .none: return "NOT EXISTS (SELECT 1 \(subFrom) WHERE \(ownerMatch) AND \(inner))"
                case .all: return "NOT EXISTS (SELECT 1 \(subFrom) WHERE \(ownerMatch) AND NOT coalesce(\(inner), 0))"
                }
            }
            let column = "\(alias).\(quote(p.name))"
            if isLast { return try quantified(quantifier, position: position, path: path, build(column, p)) }
            if next == "@size" || next == "@count" {
                guard k + 2 == path.count, p.type == .string || p.type == .data else {
                    throw AtollError(.queryInvalid, "'\(next!)' needs a list, string or data property; '\(info.name).\(name)' is \(p.typeName)")
                }
                return try quantified(quantifier, position: position, path: path, build("length(\(column))", Self.countProperty))
            }
            guard p.type == .object, let targetName = p.objectType else {
                throw AtollError(.queryInvalid, "'\(info.name).\(name)' is \(p.typeName), not a link; '\(next!)' cannot follow it (at position \(position))")
            }
            // A to-one link (or embedded object): join it once per path prefix in this scope.
            let target = try store.classInfo(targetName)
            prefix += (prefix.isEmpty ? "" : ".") + name
            if let known = scope.joinAliases[prefix] {
                alias = known
            } else {
                let joined = "\(scope.alias)_j\(nextAlias())"
                scope.joins.append("LEFT JOIN \(target.table) AS \(joined) ON \(joined).\(target.rowKey) = \(alias).\(quote(p.name))")
                scope.joinAliases[prefix] = joined
                alias = joined
            }
            info = target
        }
        throw AtollError(.queryInvalid, "empty key path at position \(position)")
    }

    private func quantified(_ q: Quantifier?, position: Int, path: [String], _ sql: String) throws -> String {
        guard q == nil else {
            throw AtollError(.queryInvalid, "ANY/ALL/NONE need a list in the key path '\(path.joined(separator: "."))' (at position \(position))")
        }
        return sql
    }

    private func nextAlias() -> Int {
        aliasCounter += 1
        return aliasCounter
    }

    /// A key path that must name one value per object (for SORT, DISTINCT and the right side
    /// of a comparison).
    func scalar(_ path: [String], _ scope: Scope, position: Int, for use: String) throws -> (String, Property) {
        var result: (String, Property)?
        let sql = try keyPathPredicate(path, position: position, scope, quantifier: nil) { expr, p in
            result = (expr, p)
            return "1"
        }
        guard let result, sql == "1" else {
            throw AtollError(.queryInvalid, "\(use) needs a single value, but '\(path.joined(separator: "."))' goes through a list")
        }
        return result
    }

    // MARK: - Comparisons

    private func compare(_ expr: String, _ p: Property, _ op: Comparison.Op, _ value: Value, _ c: Comparison,
                         path: [String]) throws -> String {
        let name = path.joined(separator: ".")
        if c.caseInsensitive || c.diacriticInsensitive {
            guard p.type == .string else {
                throw AtollError(.queryInvalid, "[c] and [d] apply to strings; '\(name)' is \(p.typeName)")
            }
        }
        switch op {
        case .in:
            guard case .list(let items) = value else {
                throw AtollError(.queryInvalid, "IN needs a list {…} or a list argument at position \(c.position)")
            }
            if items.isEmpty { return "0" }
            if c.caseInsensitive || c.diacriticInsensitive {
                let parts = try items.map { try compare(expr, p, .equal, $0, c, path: path) }
                return "(" + parts.joined(separator: " OR ") + ")"
            }
            // A flat IN list: long lists must not become deep OR trees.
            let values = try items.filter { !$0.isNull }.map { try operand(p, $0, name, c) }
            var sql = values.isEmpty ? "0" : "\(expr) IN (\(values.joined(separator: ", ")))"
            if items.contains(where: \.isNull) { sql = "(\(sql) OR \(expr) IS NULL)" }
            return sql
        case .between:
            guard case .list(let bounds) = value, bounds.count == 2 else {
                throw AtollError(.queryInvalid, "BETWEEN needs two values at position \(c.position)")
            }
            try requireOrdered(p, name)
            let lo = try operand(p, bounds[0], name, c), hi = try operand(p, bounds[1], name, c)
            return "(" + (try planned(expr, p, "BETWEEN \(lo) AND \(hi)")) + ")"
        case .beginsWith, .endsWith, .contains, .like:
            guard p.type == .string || p.type == .data else {
                throw AtollError(.queryInvalid, "\(op.rawValue) needs a string property; '\(name)' is \(p.typeName)")
            }
            guard !value.isNull else { return "0" }
            let arg = try operand(p, value, name, c)
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
            let arg = try operand(p, value, name, c)
            if c.caseInsensitive || c.diacriticInsensitive {
                let match = "atoll_match(\(expr), \(arg), 0, \(c.flags))"
                return op == .equal ? match : "NOT \(match)"
            }
            return op == .equal ? "\(expr) = \(arg)" : "\(expr) IS NOT \(arg)"
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            try requireOrdered(p, name)
            guard !value.isNull else { return "0" }
            let arg = try operand(p, value, name, c)
            return "(" + (try planned(expr, p, "\(op.rawValue) \(arg)")) + ")"
        }
    }

    private func requireOrdered(_ p: Property, _ name: String) throws {
        switch p.type {
        case .bool, .object, .objectId, .uuid:
            if p.type == .objectId { return }
            throw AtollError(.queryInvalid, "'\(name)' is \(p.typeName); it cannot be compared with < or >")
        default: return
        }
    }

    private func compareColumns(_ l: String, _ lp: Property, _ op: Comparison.Op, _ r: String, _ rp: Property,
                                _ c: Comparison) throws -> String {
        let numeric: Set<PropertyType> = [.int, .float, .double]
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
