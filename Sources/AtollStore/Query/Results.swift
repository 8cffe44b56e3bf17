/// The objects of one class that match a query, in the query's order.
///
/// A `Results` holds the compiled query, not the objects: each read runs it against the data
/// as it is then (inside a write transaction, with its uncommitted writes).
public final class Results: @unchecked Sendable {
    public let store: Store
    public let className: String
    let info: ClassInfo
    let compiled: CompiledQuery

    /// Where the last page read ended, so that reading the next page continues from its last
    /// row key instead of skipping `offset` rows again (which makes reading a large result page
    /// by page quadratic). Used only while the data is unchanged since that page, and only for
    /// results in row-key order (no SORT).
    private var continuation: (offset: Int, lastKey: Int64, stamp: Store.DataStamp)?

    init(store: Store, info: ClassInfo, compiled: CompiledQuery) {
        self.store = store
        self.className = info.name
        self.info = info
        self.compiled = compiled
    }

    /// How long (seconds) one read of the results (a count, a page, the keys) may run; SQLite
    /// stops it then, and it throws `.timeout`. Nil: no limit. For queries a store's user wrote
    /// that must not hold the store for long (a sync server's subscriptions).
    public var timeBudget: Double?

    /// Runs one read of the results on the store's connection, within `timeBudget`.
    private func read<T>(_ body: (Connection) throws -> T) throws -> T {
        try store.locked { conn in
            guard let timeBudget else { return try body(conn) }
            return try conn.withDeadline(seconds: timeBudget) { try body(conn) }
        }
    }

    /// The statement `count()` runs.
    private var countSQL: String {
        if let limit = compiled.limit { return "SELECT min(count(*), \(limit)) \(compiled.from) WHERE \(compiled.condition)" }
        return "SELECT count(*) \(compiled.from) WHERE \(compiled.condition)"
    }

    /// Prepares the count's statement (and keeps it for `count()`), so that a query SQLite
    /// cannot take fails when it is made, as a query error, not at its first read.
    /// - Throws: `.queryInvalid` for a query nested too deeply for SQLite's parser (a few dozen
    ///   NOTs or nested AND/OR groups overflow its stack before the query parser's own limit).
    func checkPreparable(_ conn: Connection) throws {
        do {
            _ = try conn.statement(countSQL)
        } catch let error as AtollError where error.code == .internal
            && (error.message.contains("parser stack overflow") || error.message.contains("Expression tree is too large")) {
            throw AtollError(.queryInvalid, "the query is nested too deeply for the database (\(error.message)): use fewer levels of NOT and of parentheses")
        }
    }

    /// How many objects match now. The same count on unchanged data (by these results or
    /// others of the same query) is not run again (`QueryCache`).
    public func count() throws -> Int {
        try read { conn in
            let sql = countSQL
            let key = store.write == nil ? QueryCache.CountKey(sql: ExactText(sql), parameters: compiled.parameters) : nil
            if let key {
                store.queryCache.validate(try store.dataStamp(conn))
                if let n = store.queryCache.count(key) { return n }
            }
            let s = try conn.statement(sql)
            defer { s.reset() }
            s.bind(compiled.parameters)
            _ = try s.step()
            let n = Int(s.int64(0))
            if let key { store.queryCache.remember(key, count: n) }
            return n
        }
    }

    /// The row keys of the matching objects, in order, from `offset` on (at most `limit`).
    public func keys(offset: Int = 0, limit: Int? = nil) throws -> [ObjectKey] {
        try read { conn in
            let s = try page("SELECT t.\(info.rowKey)", offset: offset, limit: limit, conn)
            defer { s.reset() }
            var keys = [ObjectKey]()
            while try s.step() { keys.append(ObjectKey(s.int64(0))) }
            return keys
        }
    }

    /// The row keys of all matching objects in order, with their primary keys when those are
    /// not the row keys (nil then).
    func keysAndReferences() throws -> ([Int64], [Value]?) {
        try store.locked { conn in
            guard let p = info.primaryKey, !info.primaryKeyIsRowKey else {
                return (try keys().map(\.rawValue), nil)
            }
            return try read { conn in
                let s = try page("SELECT t.\(info.rowKey), t.\(quote(p.name))", offset: 0, limit: nil, conn)
                defer { s.reset() }
                var keys = [Int64](), references = [Value]()
                while try s.step() {
                    keys.append(s.int64(0))
                    references.append(p.type.value(s.sqlValue(1)))
                }
                return (keys, references)
            }
        }
    }

    /// The matching objects, in order, from `offset` on (at most `limit`).
    public func documents(offset: Int = 0, limit: Int? = nil) throws -> [Document] {
        try read { conn in
            let s = try page(info.selectList, offset: offset, limit: limit, conn)
            var rows = [[SQLValue]]()
            do {
                defer { s.reset() }
                let width = Int32(info.width)
                while try s.step() { rows.append((0..<width).map { s.sqlValue($0) }) }
            }
            if inRowKeyOrder, let last = rows.last?.first?.int64 {
                continuation = (offset + rows.count, last, try store.dataStamp(conn))
            }
            return try rows.map { try store.document(info, $0, conn) }
        }
    }

    private var inRowKeyOrder: Bool { compiled.orderBy == "t.\(info.rowKey)" }

    /// Whether the results can be brought up to date from the objects that changed alone
    /// (see `matching(among:)` and `sortsBefore`): each object matching on its own, and the
    /// query (condition and sort) reading no other class's table but embedded ones (changes of
    /// embedded objects are changes of their owner), so that only changes of its own objects
    /// change them.
    var updatesIncrementally: Bool {
        guard compiled.rowLocal, compiled.limit == nil else { return false }
        let sql = compiled.from + " " + compiled.condition + " " + compiled.orderBy
        return !store.schema.classes.contains { other in
            other.name != className && !other.isEmbedded && (sql.contains(quote(other.name)) || sql.contains("\"\(other.name)."))
        }
    }

    /// Whether the results are in row-key order (no SORT).
    var isUnsorted: Bool { inRowKeyOrder }

    /// The primary keys of the matching objects (any order; for plain filters: no SORT,
    /// DISTINCT or LIMIT), without reading the objects.
    /// - Throws: `.typeMismatch` for a class without primary key.
    public func primaryKeyValues() throws -> [Value] {
        guard let pk = info.primaryKey else { throw AtollError(.typeMismatch, "class '\(className)' has no primary key") }
        return try read { conn in
            let s = try conn.statement("SELECT t.\(quote(pk.name)) \(compiled.from) WHERE \(compiled.condition)")
            defer { s.reset() }
            s.bind(compiled.parameters)
            var out = [Value]()
            while try s.step() { out.append(pk.type.value(s.sqlValue(0))) }
            return out
        }
    }

    /// Whether the query only filters: no SORT, DISTINCT or LIMIT, so that whether an object
    /// matches depends on that object alone (what sync subscriptions and permissions need).
    public var isPlainFilter: Bool { compiled.rowLocal && compiled.limit == nil && inRowKeyOrder }

    /// Whether object `a` comes before object `b` in the results' order (both matching): SQLite
    /// orders the two rows by the query's own ORDER BY, so collations and NULLs sort as in
    /// the query.
    func sortsBefore(_ a: Int64, _ b: Int64) throws -> Bool {
        try store.locked { conn in
            let n = compiled.parameters.count
            let s = try conn.statement("SELECT t.\(info.rowKey) \(compiled.from) WHERE t.\(info.rowKey) IN (?\(n + 1), ?\(n + 2)) ORDER BY \(compiled.orderBy) LIMIT 1")
            s.bind(compiled.parameters)
            s.bind(Int32(n + 1), a)
            s.bind(Int32(n + 2), b)
            defer { s.reset() }
            return try s.step() && s.int64(0) == a
        }
    }

    /// Which of the given objects match now.
    func matching(among keys: Set<Int64>) throws -> Set<Int64> {
        guard !keys.isEmpty else { return [] }
        return try read { conn in
            let n = compiled.parameters.count
            let s = try conn.statement("SELECT t.\(info.rowKey) \(compiled.from) WHERE (\(compiled.condition)) AND t.\(info.rowKey) IN (SELECT value FROM json_each(?\(n + 1)))")
            defer { s.reset() }
            s.bind(compiled.parameters)
            s.bind(Int32(n + 1), "[" + keys.map(String.init).joined(separator: ",") + "]")
            var found = Set<Int64>()
            while try s.step() { found.insert(s.int64(0)) }
            return found
        }
    }

    /// Deletes every matching object (as `Store.delete` would).
    /// - Returns: how many were deleted.
    @discardableResult
    public func deleteAll() throws -> Int {
        let keys = try keys()
        return try store.writeOperation("deleteAll") { conn, state in
            for key in keys { try store.erase(info, key.rawValue, conn, state.recorder) }
            return keys.count
        }
    }

    func page(_ select: String, offset: Int, limit: Int?, _ conn: Connection) throws -> Statement {
        var count = limit.map { Int64($0) } ?? -1
        if let cap = compiled.limit {
            let left = Int64(max(0, cap - offset))
            count = count < 0 ? left : min(count, left)
        }
        let n = compiled.parameters.count
        if inRowKeyOrder, offset > 0, let c = continuation, c.offset == offset, try store.dataStamp(conn) == c.stamp {
            let s = try conn.statement("\(select) \(compiled.from) WHERE (\(compiled.condition)) AND t.\(info.rowKey) > ?\(n + 2) ORDER BY \(compiled.orderBy) LIMIT ?\(n + 1)")
            s.bind(compiled.parameters)
            s.bind(Int32(n + 1), count)
            s.bind(Int32(n + 2), c.lastKey)
            return s
        }
        let s = try conn.statement("\(select) \(compiled.from) WHERE \(compiled.condition) ORDER BY \(compiled.orderBy) LIMIT ?\(n + 1) OFFSET ?\(n + 2)")
        s.bind(compiled.parameters)
        s.bind(Int32(n + 1), count)
        s.bind(Int32(n + 2), Int64(max(0, offset)))
        return s
    }
}

extension Store {
    /// The objects of a class that match a query (Realm Query Language, see
    /// docs/query-language.md); an empty query matches all.
    ///
    /// ```swift
    /// let old = try store.objects("Dog", where: "age > $0 SORT(name ASC)", [.int(10)])
    /// ```
    /// - Throws: `.noSuchClass`, `.querySyntax` (with the position), `.queryInvalid` (unknown
    ///   property, wrong argument type or count, nesting too deep for SQLite).
    public func objects(_ className: String, where query: String = "", _ arguments: [Value] = []) throws -> Results {
        try objects(className, where: query, arguments, access: nil)
    }

    /// The objects of a class that match a query and that `access` lets its reader read, the
    /// query seeing nothing else through its key paths (see `ReadAccess`). `maxLinkDepth` bounds
    /// how many links one of the query's key paths may follow (its cost grows with each).
    /// - Throws: as `objects(_:where:_:)`, and `.queryInvalid` for a key path that follows more
    ///   links than `maxLinkDepth`, or a rule that does not compile.
    public func objects(_ className: String, where query: String = "", _ arguments: [Value] = [], readableBy access: ReadAccess,
                        maxLinkDepth: Int? = nil) throws -> Results {
        try objects(className, where: query, arguments, access: access, maxLinkDepth: maxLinkDepth)
    }

    private func objects(_ className: String, where query: String, _ arguments: [Value], access: ReadAccess?,
                         maxLinkDepth: Int? = nil) throws -> Results {
        try locked { conn in
            // A query of the store's own (no reader's access) on unchanged data was compiled
            // before: the same text and arguments compile the same (`QueryCache`).
            let key = access == nil && write == nil
                ? QueryCache.QueryKey(className: ExactText(className), query: ExactText(query), arguments: arguments, maxLinkDepth: maxLinkDepth) : nil
            if let key {
                queryCache.validate(try dataStamp(conn))
                if let known = queryCache.query(key) { return Results(store: self, info: known.info, compiled: known.compiled) }
            }
            let info = try classInfo(className)
            let parsed = try Parser.parse(query)
            let compiled = try QueryCompiler(store: self, conn: conn, root: info, arguments: arguments, access: access,
                                             maxLinkDepth: maxLinkDepth).compile(parsed)
            let results = Results(store: self, info: info, compiled: compiled)
            try results.checkPreparable(conn)
            if let key { queryCache.remember(key, info, compiled) }
            return results
        }
    }

    /// Identifies a state of the data as this store reads it: another connection's commit
    /// changes `dataVersion`, a write through this store changes `writes`, a new snapshot of a
    /// store that reads from one (its refresh) changes `snapshots`.
    struct DataStamp: Equatable {
        var dataVersion: Int64
        var writes: Int
        var snapshots: Int
    }

    func dataStamp(_ conn: Connection) throws -> DataStamp {
        let v = try conn.statement("PRAGMA data_version")
        _ = try v.step()
        defer { v.reset() }
        return DataStamp(dataVersion: v.int64(0), writes: writeCount, snapshots: snapshotCount)
    }

    /// The number of rows of a class, cached until this or another connection commits.
    func rowCount(_ info: ClassInfo, _ conn: Connection) throws -> Int {
        let v = try conn.statement("PRAGMA data_version")
        _ = try v.step()
        let stamp = v.int64(0)
        v.reset()
        if stamp != rowCountStamp || write != nil {
            rowCounts = [:]
            rowCountStamp = write == nil ? stamp : -1
        }
        if let n = rowCounts[info.name] { return n }
        let s = try conn.statement("SELECT count(*) FROM \(info.table)")
        _ = try s.step()
        let n = Int(s.int64(0))
        s.reset()
        rowCounts[info.name] = n
        return n
    }
}

/// A copy of results as they were when frozen: it never changes, and any thread may read it.
public struct FrozenResults: Sendable {
    public let className: String
    public let documents: [Document]

    public func count() -> Int { documents.count }

    /// The objects from `offset` on (at most `limit`).
    public func documents(offset: Int = 0, limit: Int? = nil) -> [Document] {
        let start = min(max(0, offset), documents.count)
        let end = limit.map { min(documents.count, start + max(0, $0)) } ?? documents.count
        return Array(documents[start..<end])
    }
}

extension Results {
    /// A frozen copy of the results as the store's snapshot sees them now.
    public func freeze() throws -> FrozenResults {
        try store.locked { _ in FrozenResults(className: className, documents: try documents()) }
    }
}
