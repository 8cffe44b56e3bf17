import CSQLite

// What the typed Swift API (module Atoll) needs beyond the public store API: objects named by
// their row keys (managed objects, links, embedded objects and classes without primary key),
// whole rows read at once (property reads of a managed object are served from one row read
// while the data is unchanged), and classes added to an open file. `package` access: the
// typed API is part of this package, not a public contract.
extension Store {
    /// Identifies what this handle reads: it changes whenever a read may give another answer
    /// (a write through this handle, a new snapshot, or — for in-memory stores, which hold
    /// none — another connection's commit).
    package struct ReadStamp: Equatable, Sendable {
        var writes: Int
        var snapshots: Int
        var dataVersion: Int64
    }

    package func readStamp() throws -> ReadStamp {
        // A store that holds a snapshot sees new data only after its own writes and new
        // snapshots: both counters are atomic, no lock needed. (Set at open, `holdsSnapshot`
        // does not change while the store is shared.)
        if holdsSnapshot { return ReadStamp(writes: writeCount, snapshots: snapshotCount, dataVersion: 0) }
        return try locked { conn in
            if holdsSnapshot || write != nil { return ReadStamp(writes: writeCount, snapshots: snapshotCount, dataVersion: 0) }
            return ReadStamp(writes: writeCount, snapshots: snapshotCount, dataVersion: try dataStamp(conn).dataVersion)
        }
    }

    /// One object's values, one per property of its class in schema order: links and embedded
    /// objects as `.int(row key)` (or `.null`), mixed values as they read (a link as `.link`),
    /// collections and `linkingObjects` as `.null` (read them with `typedCollection` and
    /// `typedBacklinks`). Nil when there is no such object.
    package func typedRow(_ className: String, key: Int64) throws -> [Value]? {
        try locked { conn in
            let info = try classInfo(className)
            let s = try conn.statement(info.readSQL)
            s.bind(1, key)
            defer { s.reset() }
            guard try s.step() else { return nil }
            return try typedValues(info, s, conn)
        }
    }

    /// The object with a primary key: its row key and its row as `typedRow` gives it (nil
    /// when there is none). One statement when the primary key is the row key.
    package func typedRow(_ className: String, primaryKey: Value) throws -> (key: Int64, row: [Value])? {
        try locked { conn in
            let info = try classInfo(className)
            let pk = try checkedPrimaryKey(info, primaryKey)
            guard let p = info.primaryKey else { return nil }
            let s = try conn.statement(info.primaryKeyIsRowKey ? info.readSQL : info.readByPrimaryKeySQL)
            s.bind(1, p.type.sqlValue(pk))
            defer { s.reset() }
            guard try s.step() else { return nil }
            return (s.int64(0), try typedValues(info, s, conn))
        }
    }

    /// The rows of several objects of a class, as `typedRow` gives them, in the order of
    /// `keys` (nil for an object that does not exist): one query.
    package func typedRows(_ className: String, keys: [Int64]) throws -> [[Value]?] {
        guard !keys.isEmpty else { return [] }
        return try locked { conn in
            let info = try classInfo(className)
            let s = try conn.statement(info.selectList + " FROM json_each(?) AS k JOIN \(info.table) AS t ON t.\(info.rowKey) = k.value ORDER BY k.key")
            s.bind(1, "[" + keys.map(String.init).joined(separator: ",") + "]")
            defer { s.reset() }
            var rows = [[Value]?]()
            rows.reserveCapacity(keys.count)
            while try s.step() {
                let key = s.int64(0)
                while rows.count < keys.count, keys[rows.count] != key { rows.append(nil) }
                rows.append(try typedValues(info, s, conn))
            }
            while rows.count < keys.count { rows.append(nil) }
            return rows
        }
    }

    /// An aggregate of a property over the matching objects: `min`, `max`, `sum` or `avg`.
    /// `min`/`max`/`avg` of no objects are `.null`; `sum` of none is 0. Decimals are summed
    /// and averaged exactly; an average of ints or doubles is a double.
    /// - Throws: `.noSuchProperty`, `.typeMismatch` (a property that cannot be aggregated).
    package func aggregate(_ results: Results, _ function: String, property name: String) throws -> Value {
        try locked { conn in
            let info = results.info
            guard let p = info.schema[property: name] else {
                throw AtollError(.noSuchProperty, "class '\(info.name)' has no property '\(name)'")
            }
            let numeric: Set<PropertyType> = [.int, .double, .float, .decimal128]
            let ordered: Set<PropertyType> = numeric.union([.date])
            guard !p.isCollection, function == "min" || function == "max" ? ordered.contains(p.type) : numeric.contains(p.type) else {
                throw AtollError(.typeMismatch, "\(function) of '\(info.name).\(name)': \(p.typeName) cannot be aggregated")
            }
            var sqlFunction = function
            if p.type == .decimal128, function == "sum" || function == "avg" { sqlFunction = "atoll_decimal_" + function }
            // Over the matching rows as the results hold them (a LIMIT of the query counts).
            let q = results.compiled
            let n = q.parameters.count
            let s = try conn.statement("SELECT \(sqlFunction)(v) FROM (SELECT t.\(quote(name)) AS v \(q.from) WHERE \(q.condition) ORDER BY \(q.orderBy) LIMIT ?\(n + 1))")
            s.bind(q.parameters)
            s.bind(Int32(n + 1), Int64(q.limit ?? -1))
            defer { s.reset() }
            guard try s.step() else { return .null }
            let raw = s.sqlValue(0)
            switch (function, p.type, raw) {
            case ("sum", .decimal128, .null): return .decimal(.zero)
            case ("sum", _, .null): return p.type == .int ? .int(0) : .double(0)
            case (_, _, .null): return .null
            case (_, .decimal128, .text(let t)): return Decimal128(t).map { .decimal($0) } ?? .null
            case ("avg", _, .integer(let i)), ("sum", .double, .integer(let i)), ("sum", .float, .integer(let i)): return .double(Double(i))
            case ("avg", _, .real(let d)), ("sum", .double, .real(let d)), ("sum", .float, .real(let d)): return .double(d)
            default: return p.type.value(raw)
            }
        }
    }

    private func typedValues(_ info: ClassInfo, _ s: Statement, _ conn: Connection) throws -> [Value] {
        var values = [Value](repeating: .null, count: info.schema.properties.count)
        var i = 0
        for (p, column, typeColumn) in info.layout {
            while info.schema.properties[i].name != p.name { i += 1 }
            if let column {
                let raw = s.sqlValue(Int32(column))
                if let typeColumn {
                    values[i] = try readMixed(raw, s.sqlValue(Int32(typeColumn)), conn)
                } else if p.type == .object {
                    if case .integer(let k) = raw { values[i] = .int(k) }
                } else {
                    values[i] = p.type.value(raw)
                }
            }
            i += 1
        }
        return values
    }

    /// The elements of a list or set property (links as `.int(row key)`), or the entries of a
    /// dictionary property (keys with their values), in order.
    package func typedCollection(_ className: String, key: Int64, property: String) throws -> [(key: String?, value: Value)] {
        try locked { conn in
            let info = try classInfo(className)
            let p = try typedProperty(info, property)
            return try readCollectionRows(info, p, key, conn).map { row in
                if p.type == .mixed { return (row.key, try readMixed(row.sql, row.type, conn)) }
                if p.type == .object { return (row.key, row.sql.int64.map { .int($0) } ?? .null) }
                return (row.key, p.type.value(row.sql))
            }
        }
    }

    /// The row keys of the objects that link to an object through a `linkingObjects` property.
    package func typedBacklinks(_ className: String, key: Int64, property: String) throws -> [Int64] {
        try locked { conn in
            let info = try classInfo(className)
            let p = try typedProperty(info, property)
            guard let source = classes[p.objectType ?? ""], let origin = source.schema[property: p.linkOriginProperty ?? ""] else { return [] }
            let sql = origin.isCollection
                ? "SELECT DISTINCT owner FROM \(source.listTable(origin)) WHERE value = ? ORDER BY owner"
                : "SELECT \(source.rowKey) FROM \(source.table) WHERE \(quote(origin.name)) = ? ORDER BY \(source.rowKey)"
            let s = try conn.statement(sql)
            s.bind(1, key)
            defer { s.reset() }
            var keys = [Int64]()
            while try s.step() { keys.append(s.int64(0)) }
            return keys
        }
    }

    private func typedProperty(_ info: ClassInfo, _ name: String) throws -> Property {
        guard let p = info.schema[property: name] else {
            throw AtollError(.noSuchProperty, "class '\(info.name)' has no property '\(name)'")
        }
        return p
    }

    /// The row key of the object with a primary key (nil when there is none).
    package func rowKey(_ className: String, primaryKey: Value) throws -> Int64? {
        try locked { conn in try lookup(try classInfo(className), primaryKey: primaryKey, conn) }
    }

    /// How the change log and the element operations name an object: its primary key, or
    /// `.int(row key)` for classes without one. `.null` when there is no such object.
    package func reference(_ className: String, key: Int64) throws -> Value {
        try locked { conn in try reference(try classInfo(className), key, conn) }
    }

    /// Whether an object with this row key exists.
    package func exists(_ className: String, key: Int64) throws -> Bool {
        try locked { conn in try rowExists(try classInfo(className), key, conn) }
    }

    /// Sets properties of the top-level object with a row key (as `create` with `.all` would):
    /// links given by the target's primary key or row key reference, embedded objects whole.
    /// - Throws: `.notInWrite`, `.notFound`, `.typeMismatch`, `.noSuchProperty`.
    package func update(_ className: String, key: Int64, _ doc: Document) throws {
        let info = try locked { _ in try classInfo(className) }
        // Scalars are written by one UPDATE, atomic by itself; links and lists may take several.
        let multi = doc.keys.contains { info.linkOrListNames.contains($0) }
        try writeOperation("update", multiStatement: multi) { conn, state in
            guard !info.schema.isEmbedded else {
                throw AtollError(.invalidArgument, "'\(className)' is an embedded class: change it through its owner")
            }
            try updateByRowKey(info, key, try reference(info, key, conn), doc, conn, state.recorder)
        }
    }

    /// Deletes the object with a row key (as `delete` does).
    /// - Throws: `.notInWrite`, `.notFound`.
    package func delete(_ className: String, key: Int64) throws {
        try writeOperation("delete") { conn, state in
            let info = try classInfo(className)
            guard try rowExists(info, key, conn) else {
                throw AtollError(.notFound, "no object of class '\(className)' with key \(key)")
            }
            try erase(info, key, conn, state.recorder)
        }
    }

    /// Adds classes (and properties, and indexes) to the open file's schema, as opening it with
    /// the larger schema would: additions only, at the same schema version.
    /// - Throws: `.alreadyInWrite` inside a write transaction, `.readOnly`, `.schemaMismatch`
    ///   when a class differs in a way that needs a migration.
    package func extendSchema(_ additions: [ObjectSchema]) throws {
        try lockedOutsideSnapshot { conn in
            guard write == nil else {
                throw AtollError(.alreadyInWrite, "classes \(additions.map(\.name)) are not in the realm's schema; they cannot be added inside a write transaction (use them once before writing, or list them in the configuration's objectTypes)")
            }
            guard !configuration.readOnly else {
                throw AtollError(.readOnly, "the realm was opened read-only and its schema lacks \(additions.map(\.name))")
            }
            var wanted = schema
            for cls in additions {
                if let i = wanted.classes.firstIndex(where: { $0.name == cls.name }) { wanted.classes[i] = cls } else { wanted.classes.append(cls) }
            }
            try wanted.validate()
            var result = wanted
            try inTransaction(conn) {
                let current = try loadStoredSchema(conn)
                let version = current?.version ?? schemaVersion
                let plan = try self.plan(from: current, to: wanted)
                if current == nil { try createMetadataTables(conn) }
                for step in plan.steps { try conn.execute(step) }
                try saveSchema(conn, plan.result, version: version)
                result = plan.result
            }
            conn.clearCache()
            adopt(result, version: schemaVersion)
        }
    }
}

extension Store {
    /// Splits query text into its predicate and its descriptors (`SORT(...)`, `DISTINCT(...)`,
    /// `LIMIT(...)` at the top level), as written: the typed API combines several filters
    /// into one query, each predicate in parentheses and every descriptor after them.
    /// - Throws: `.querySyntax` for text that does not tokenize.
    package static func splitDescriptors(_ text: String) throws -> (predicate: String, descriptors: String) {
        let tokens = try Lexer.tokenize(text)
        var depth = 0
        for (i, token) in tokens.enumerated() {
            switch token.kind {
            case .punct("("), .punct("{"), .punct("["): depth += 1
            case .punct(")"), .punct("}"), .punct("]"): depth -= 1
            case .identifier(let word) where depth == 0 && ["SORT", "DISTINCT", "LIMIT"].contains(word.uppercased()):
                guard i + 1 < tokens.count, tokens[i + 1].kind == .punct("(") else { continue }
                let chars = Array(text)
                let at = min(max(0, token.position), chars.count)
                return (String(chars[..<at]), String(chars[at...]))
            default: break
            }
        }
        return (text, "")
    }
}
