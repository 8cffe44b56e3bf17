// Creating, updating, reading and deleting objects.

/// An object's row key: stable for the object's life, unique within its class.
public struct ObjectKey: Hashable, Sendable {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
}

extension Store {
    // MARK: - Public API

    /// Creates an object, or updates the one with the same primary key as `update` says.
    ///
    /// Properties left out take their default on create and stay unchanged on update. A link is
    /// given as the target's primary key or as a whole `.object` (created or updated with the same
    /// policy); an embedded object is given whole and replaces the previous one. Lists are given
    /// whole and replace the previous content. Atomic: a failure leaves nothing written.
    /// - Returns: the object's key.
    /// - Throws: `.notInWrite`, `.noSuchClass`, `.noSuchProperty`, `.typeMismatch`,
    ///   `.missingValue`, `.duplicatePrimaryKey`, `.notFound` (a link to a missing object).
    @discardableResult
    public func create(_ className: String, _ object: Document, update: UpdatePolicy = .error) throws -> ObjectKey {
        let info = try locked { _ in try classInfo(className) }
        // An object of scalars is written by one statement, atomic by itself; links and lists
        // may take several, which a savepoint makes all-or-nothing.
        let multi = object.keys.contains { info.linkOrListNames.contains($0) }
        return try writeOperation("create", multiStatement: multi) { conn, state in
            ObjectKey(try upsert(info, object, update, conn, state.recorder).rowKey)
        }
    }

    /// Creates or updates many objects of one class: all or nothing.
    /// - Returns: how many objects were written.
    /// - Throws: as `create`, with the failing object's index in the message.
    @discardableResult
    public func createMany(_ className: String, _ objects: [Document], update: UpdatePolicy = .error) throws -> Int {
        try writeOperation("createMany") { conn, state in
            let info = try classInfo(className)
            for (i, object) in objects.enumerated() {
                do { _ = try upsert(info, object, update, conn, state.recorder) } catch let e as AtollError {
                    throw e.prefixed("object \(i)")
                }
            }
            return objects.count
        }
    }

    /// The object with a primary key, or nil when there is none.
    /// - Throws: `.noSuchClass`, `.typeMismatch` (a key of the wrong type, or a class without
    ///   primary key).
    public func object(_ className: String, primaryKey: Value) throws -> Document? {
        try locked { conn in
            let info = try classInfo(className)
            let pk = try checkedPrimaryKey(info, primaryKey)
            let s = try conn.statement(info.readByPrimaryKeySQL)
            s.bind(1, info.primaryKey!.type.sqlValue(pk))
            guard try s.step() else { s.reset(); return nil }
            let row = (0...info.columns.count).map { s.sqlValue(Int32($0)) }
            s.reset()
            return try document(info, row, conn)
        }
    }

    /// The object with a row key, or nil when there is none.
    public func object(_ className: String, key: ObjectKey) throws -> Document? {
        try locked { conn in try readObject(try classInfo(className), key.rawValue, conn) }
    }

    /// Reads one property of the object with a primary key (nil when there is no such object).
    public func value(_ className: String, primaryKey: Value, property: String) throws -> Value? {
        try locked { conn in
            let info = try classInfo(className)
            guard let p = info.schema[property: property] else {
                throw AtollError(.noSuchProperty, "class '\(className)' has no property '\(property)'")
            }
            let pk = try checkedPrimaryKey(info, primaryKey)
            let s = try conn.statement(info.valueSQL(p))
            s.bind(1, info.primaryKey!.type.sqlValue(pk))
            guard try s.step() else { return nil }
            let rowKey = s.int64(0)
            let raw = s.sqlValue(1)
            s.reset()
            return p.isList ? try readList(info, p, rowKey, conn) : try readValue(p, raw, conn)
        }
    }

    /// Deletes the object with a primary key, and the embedded objects it owns. Links to it
    /// become null and lists drop it.
    /// - Throws: `.notFound`, `.notInWrite`, `.noSuchClass`, `.typeMismatch`.
    public func delete(_ className: String, primaryKey: Value) throws {
        try writeOperation("delete") { conn, state in
            let info = try classInfo(className)
            guard let rowKey = try lookup(info, primaryKey: primaryKey, conn) else {
                throw AtollError(.notFound, "no object of class '\(className)' with primary key \(primaryKey.shortDescription)")
            }
            try erase(info, rowKey, conn, state.recorder)
        }
    }

    // MARK: - Identity

    /// Checks a primary key value against the class.
    func checkedPrimaryKey(_ info: ClassInfo, _ key: Value) throws -> Value {
        guard let p = info.primaryKey else {
            throw AtollError(.typeMismatch, "class '\(info.name)' has no primary key")
        }
        guard !key.isNull, let v = p.type.coerce(key) else {
            throw AtollError(.typeMismatch, "primary key of '\(info.name)' is \(p.typeName); got \(key.kindName) \(key.shortDescription)")
        }
        return v
    }

    /// The row key of the object with a primary key.
    func lookup(_ info: ClassInfo, primaryKey: Value, _ conn: Connection) throws -> Int64? {
        let pk = try checkedPrimaryKey(info, primaryKey)
        let s = try conn.statement(info.lookupSQL)
        s.bind(1, info.primaryKey!.type.sqlValue(pk))
        defer { s.reset() }
        return try s.step() ? s.int64(0) : nil
    }

    /// How the change log names an object: its primary key, or its row key for classes without.
    func reference(_ info: ClassInfo, _ rowKey: Int64, _ conn: Connection) throws -> Value {
        guard let p = info.primaryKey else { return .int(rowKey) }
        if info.primaryKeyIsRowKey { return .int(rowKey) }
        let s = try conn.statement(info.referenceSQL)
        s.bind(1, rowKey)
        defer { s.reset() }
        guard try s.step() else { return .null }
        return p.type.value(s.sqlValue(0))
    }

    // MARK: - Writing

    /// Creates or updates one top-level object; records its instructions.
    func upsert(_ info: ClassInfo, _ doc: Document, _ policy: UpdatePolicy, _ conn: Connection,
                _ rec: ChangeRecorder) throws -> (rowKey: Int64, reference: Value) {
        guard !info.schema.isEmbedded else {
            throw AtollError(.invalidArgument, "'\(info.name)' is an embedded class: create its objects inside their owner")
        }
        try checkKeys(info, doc)
        var pk: Value?
        if let p = info.primaryKey {
            guard let raw = doc[p.name], !raw.isNull else {
                throw AtollError(.missingValue, "primary key '\(info.name).\(p.name)' is missing")
            }
            let key = try p.coerce(raw, className: info.name)
            pk = key
            // With .error, the INSERT's own constraint finds a duplicate: no lookup needed.
            // Otherwise one statement finds the object and the current values of the given columns.
            if policy != .error {
                let given = info.columns.filter { $0.name != p.name && doc[$0.name] != nil }
                if let done = try updateInOneStatement(info, key, doc, given, policy, conn, rec) { return done }
                let s = try conn.statement(info.currentValuesSQL(given))
                s.bind(1, p.type.sqlValue(key))
                let found = try s.step()
                let existing = found ? s.int64(0) : 0
                let old = found ? (0..<given.count).map { s.sqlValue(Int32($0 + 1)) } : []
                s.reset()
                if found {
                    try update(info, existing, key, doc, given, old, policy, conn, rec)
                    return (existing, key)
                }
            }
        }
        // Insert. Resolve every value first: an inline link may insert into this same class,
        // with this same cached statement.
        var logged = [Value]()
        var values = [SQLValue]()
        logged.reserveCapacity(info.columns.count)
        values.reserveCapacity(info.columns.count)
        for p in info.columns {
            let (sql, canonical) = try resolve(p, doc[p.name] ?? p.implicitDefault, info, policy, conn, rec)
            values.append(sql)
            logged.append(canonical)
        }
        let insert = try conn.statement(info.insertSQL)
        insert.bind(values)
        do { try insert.run() } catch let e as AtollError where e.code == .duplicatePrimaryKey {
            throw AtollError(.duplicatePrimaryKey, "an object of class '\(info.name)' with primary key \(pk?.shortDescription ?? "?") exists already")
        }
        let rowKey = info.primaryKeyIsRowKey ? pk.flatMap { if case .int(let i) = $0 { i } else { nil } } ?? conn.lastInsertRowID
            : conn.lastInsertRowID
        let ref = pk ?? .int(rowKey)
        rec.recordCreate(info, ref, values: logged)
        for p in info.lists {
            let items = try resolveList(p, doc[p.name] ?? p.implicitDefault, info, policy, conn, rec)
            try insertList(info, p, rowKey, items.map(\.0), conn)
            for (i, item) in items.enumerated() {
                rec.record(Instruction(.listInsert, info.name, ref, path: [.key(p.name)], value: item.1, index: i))
            }
        }
        return (rowKey, ref)
    }

    /// Updates an existing object's scalar columns with one `UPDATE … RETURNING`, where no
    /// current value is needed first: with `.all`, every given column is recorded; with
    /// `.modified` and one column, `WHERE column IS NOT new` tells whether it changed. Returns
    /// nil when this does not apply, or when no such object exists (the caller then inserts).
    private func updateInOneStatement(_ info: ClassInfo, _ pk: Value, _ doc: Document, _ given: [Property],
                                      _ policy: UpdatePolicy, _ conn: Connection,
                                      _ rec: ChangeRecorder) throws -> (rowKey: Int64, reference: Value)? {
        guard !given.isEmpty, policy == .all || given.count == 1,
              given.allSatisfy({ $0.type != .object }),
              !info.lists.contains(where: { doc[$0.name] != nil }),
              let pkProperty = info.primaryKey else { return nil }
        let values = try given.map { try $0.coerce(doc[$0.name]!, className: info.name) }
        let s = try conn.statement(info.updateReturningSQL(given, onlyIfChanged: policy == .modified))
        for (i, (p, v)) in zip(given, values).enumerated() { s.bind(Int32(i + 1), p.type.sqlValue(v)) }
        s.bind(Int32(given.count + 1), pkProperty.type.sqlValue(pk))
        // RETURNING costs SQLite a temporary table: where the primary key is the row key, the
        // change count says what it would.
        var updated: Bool
        var rowKey: Int64 = 0
        if info.primaryKeyIsRowKey {
            try s.run()
            updated = conn.changes > 0
            if case .int(let k) = pk { rowKey = k }
        } else {
            updated = try s.step()
            if updated { rowKey = s.int64(0) }
            s.reset()
        }
        if updated {
            for (p, v) in zip(given, values) { rec.record(Instruction(.set, info.name, pk, path: [.key(p.name)], value: v)) }
            return (rowKey, pk)
        }
        // Nothing updated: unchanged (with .modified), or no such object.
        if policy == .modified, let existing = try lookup(info, primaryKey: pk, conn) { return (existing, pk) }
        return nil
    }

    private func checkKeys(_ info: ClassInfo, _ doc: Document) throws {
        for key in doc.keys where !info.propertyNames.contains(key) {
            throw AtollError(.noSuchProperty, "class '\(info.name)' has no property '\(key)'")
        }
    }

    /// Updates the given properties of an existing object.
    /// Updates the given properties of an existing object. `given` are the columns the document
    /// sets and `old` their current values (to skip unchanged ones with .modified, and to free
    /// replaced embedded objects).
    private func update(_ info: ClassInfo, _ rowKey: Int64, _ ref: Value, _ doc: Document, _ given: [Property],
                        _ old: [SQLValue], _ policy: UpdatePolicy, _ conn: Connection, _ rec: ChangeRecorder) throws {
        if !given.isEmpty {
            var changed = [(Property, SQLValue, Value)]()
            var replacedEmbedded = [(ClassInfo, Int64)]()
            for (i, p) in given.enumerated() {
                let (sql, canonical) = try resolve(p, doc[p.name]!, info, policy, conn, rec)
                if let target = embeddedTarget(p), case .integer(let oldKey) = old[i] {
                    if policy == .modified, case .integer(let newKey) = sql,
                       try readObject(target, oldKey, conn) == readObject(target, newKey, conn) {
                        try eraseRow(target, newKey, conn)
                        continue
                    }
                    replacedEmbedded.append((target, oldKey))
                } else if policy == .modified, sql == old[i] {
                    continue
                }
                changed.append((p, sql, canonical))
            }
            if !changed.isEmpty {
                let s = try conn.statement(info.updateSQL(changed.map(\.0)))
                for (i, c) in changed.enumerated() { s.bind(Int32(i + 1), c.1) }
                s.bind(Int32(changed.count + 1), rowKey)
                try s.run()
                for (target, key) in replacedEmbedded { try eraseRow(target, key, conn) }
                for c in changed { rec.record(Instruction(.set, info.name, ref, path: [.key(c.0.name)], value: c.2)) }
            }
        }
        for p in info.lists {
            guard let raw = doc[p.name] else { continue }
            let items = try resolveList(p, raw, info, policy, conn, rec)
            let old = try readListRows(info, p, rowKey, conn)
            if policy == .modified {
                if let target = embeddedTarget(p) {
                    let newKeys = items.compactMap { if case .integer(let k) = $0.0 { k } else { nil } }
                    let oldDocs = try old.map { try readObject(target, $0.int64 ?? 0, conn) }
                    let newDocs = try newKeys.map { try readObject(target, $0, conn) }
                    if oldDocs == newDocs {
                        for k in newKeys { try eraseRow(target, k, conn) }
                        continue
                    }
                } else if old == items.map(\.0) {
                    continue
                }
            }
            try clearList(info, p, rowKey, conn)
            try insertList(info, p, rowKey, items.map(\.0), conn)
            rec.record(Instruction(.listClear, info.name, ref, path: [.key(p.name)]))
            for (i, item) in items.enumerated() {
                rec.record(Instruction(.listInsert, info.name, ref, path: [.key(p.name)], value: item.1, index: i))
            }
        }
    }

    func embeddedTarget(_ p: Property) -> ClassInfo? {
        guard p.type == .object, let name = p.objectType, let target = classes[name], target.schema.isEmbedded else { return nil }
        return target
    }

    /// One value (or list element) of a property, resolved to its SQL form and its canonical
    /// value: links are looked up or written, embedded objects inserted.
    private func resolve(_ p: Property, _ raw: Value, _ info: ClassInfo, _ policy: UpdatePolicy, _ conn: Connection,
                         _ rec: ChangeRecorder) throws -> (SQLValue, Value) {
        nesting += 1
        defer { nesting -= 1 }
        guard nesting <= Store.maxNesting else {
            throw AtollError(.invalidArgument, "objects are nested more than \(Store.maxNesting) levels deep")
        }
        if p.isList, case .list = raw {
            throw AtollError(.typeMismatch, "property '\(info.name).\(p.name)' holds a list of \(p.type == .object ? p.objectType! : p.type.rawValue); a list cannot be an element")
        }
        guard p.type == .object else {
            let v = try p.coerce(raw, className: info.name)
            return (p.type.sqlValue(v), v)
        }
        if raw.isNull {
            if p.isList { throw AtollError(.missingValue, "list '\(info.name).\(p.name)' cannot hold null") }
            return (.null, .null)
        }
        let target = try classInfo(p.objectType!)
        if target.schema.isEmbedded {
            guard case .object(let doc) = raw else {
                throw AtollError(.typeMismatch, "property '\(info.name).\(p.name)' holds an embedded \(target.name); give it as an object, not \(raw.kindName) \(raw.shortDescription)")
            }
            let (key, canonical) = try insertEmbedded(target, doc, policy, conn, rec)
            return (.integer(key), .object(canonical))
        }
        if case .object(let doc) = raw {
            let (key, ref) = try upsert(target, doc, policy, conn, rec)
            return (.integer(key), .link(ObjectLink(className: target.name, primaryKey: ref)))
        }
        guard target.primaryKey != nil else {
            throw AtollError(.typeMismatch, "property '\(info.name).\(p.name)': class '\(target.name)' has no primary key, so the link must be given as an object")
        }
        let pk: Value
        do { pk = try checkedPrimaryKey(target, raw) } catch let e as AtollError {
            throw AtollError(.typeMismatch, "property '\(info.name).\(p.name)' links to \(target.name): \(e.message)")
        }
        guard let key = try lookup(target, primaryKey: pk, conn) else {
            throw AtollError(.notFound, "property '\(info.name).\(p.name)': no \(target.name) with primary key \(pk.shortDescription)")
        }
        return (.integer(key), .link(ObjectLink(className: target.name, primaryKey: pk)))
    }

    private func resolveList(_ p: Property, _ raw: Value, _ info: ClassInfo, _ policy: UpdatePolicy, _ conn: Connection,
                             _ rec: ChangeRecorder) throws -> [(SQLValue, Value)] {
        guard case .list(let items) = raw else {
            throw AtollError(.typeMismatch, "property '\(info.name).\(p.name)' is a list (\(p.typeName)); got \(raw.kindName) \(raw.shortDescription)")
        }
        var out = [(SQLValue, Value)]()
        out.reserveCapacity(items.count)
        for (i, item) in items.enumerated() {
            do { out.append(try resolve(p, item, info, policy, conn, rec)) } catch let e as AtollError {
                throw e.prefixed("element \(i)")
            }
        }
        return out
    }

    /// Inserts an embedded object (no instructions of its own: its owner's `set` carries it).
    private func insertEmbedded(_ info: ClassInfo, _ doc: Document, _ policy: UpdatePolicy, _ conn: Connection,
                                _ rec: ChangeRecorder) throws -> (Int64, Document) {
        try checkKeys(info, doc)
        var canonical = [String: Value]()
        var values = [SQLValue]()
        for p in info.columns {
            let (sql, v) = try resolve(p, doc[p.name] ?? p.implicitDefault, info, policy, conn, rec)
            values.append(sql)
            canonical[p.name] = v
        }
        let insert = try conn.statement(info.insertSQL)
        insert.bind(values)
        try insert.run()
        let rowKey = conn.lastInsertRowID
        for p in info.lists {
            let items = try resolveList(p, doc[p.name] ?? p.implicitDefault, info, policy, conn, rec)
            try insertList(info, p, rowKey, items.map(\.0), conn)
            canonical[p.name] = .list(items.map(\.1))
        }
        // The embedded object as its owner's `set` records it, in schema order.
        return (rowKey, Document(info.layout.map { ($0.0.name, canonical[$0.0.name] ?? .null) }))
    }

    private func insertList(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ items: [SQLValue], _ conn: Connection) throws {
        guard !items.isEmpty else { return }
        let s = try conn.statement("INSERT INTO \(info.listTable(p)) (owner, position, value) VALUES (?, ?, ?)")
        for (i, item) in items.enumerated() {
            s.reset()
            s.bind(1, owner)
            s.bind(2, Int64(i))
            s.bind(3, item)
            try s.run()
        }
    }

    private func clearList(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ conn: Connection) throws {
        if let target = embeddedTarget(p) {
            for row in try readListRows(info, p, owner, conn) {
                if let key = row.int64 { try eraseRow(target, key, conn) }
            }
        }
        let s = try conn.statement("DELETE FROM \(info.listTable(p)) WHERE owner = ?")
        s.bind(1, owner)
        try s.run()
    }

    // MARK: - Deleting

    /// Deletes a top-level object and records its erase.
    func erase(_ info: ClassInfo, _ rowKey: Int64, _ conn: Connection, _ rec: ChangeRecorder) throws {
        let ref = try reference(info, rowKey, conn)
        try eraseRow(info, rowKey, conn)
        rec.record(Instruction(.erase, info.name, ref))
    }

    /// Deletes a row with what it owns (embedded objects, list rows) and the links to it.
    func eraseRow(_ info: ClassInfo, _ rowKey: Int64, _ conn: Connection) throws {
        let embeddedColumns = info.columns.compactMap { p in embeddedTarget(p).map { (p, $0) } }
        if !embeddedColumns.isEmpty {
            let s = try conn.statement("SELECT " + embeddedColumns.map { quote($0.0.name) }.joined(separator: ", ")
                                       + " FROM \(info.table) WHERE \(info.rowKey) = ?")
            s.bind(1, rowKey)
            var owned = [(ClassInfo, Int64)]()
            if try s.step() {
                for (i, c) in embeddedColumns.enumerated() where !s.isNull(Int32(i)) { owned.append((c.1, s.int64(Int32(i)))) }
            }
            s.reset()
            for (target, key) in owned { try eraseRow(target, key, conn) }
        }
        for p in info.lists { try clearList(info, p, rowKey, conn) }
        if !info.schema.isEmbedded {
            for (other, p) in incoming(info.name) {
                let sql = p.isList ? "DELETE FROM \(other.listTable(p)) WHERE value = ?"
                    : "UPDATE \(other.table) SET \(quote(p.name)) = NULL WHERE \(quote(p.name)) = ?"
                let s = try conn.statement(sql)
                s.bind(1, rowKey)
                try s.run()
            }
        }
        let s = try conn.statement(info.deleteSQL)
        s.bind(1, rowKey)
        try s.run()
    }

    /// The link properties (of any class) whose target is `className`.
    func incoming(_ className: String) -> [(ClassInfo, Property)] {
        if let known = incomingLinks[className] { return known }
        var found = [(ClassInfo, Property)]()
        for cls in schema.classes {
            guard let other = classes[cls.name] else { continue }
            for p in cls.properties where p.type == .object && p.objectType == className { found.append((other, p)) }
        }
        incomingLinks[className] = found
        return found
    }

    // MARK: - Reading

    /// Reads a whole object by row key: links as the target's primary key, embedded objects
    /// whole, lists as arrays.
    func readObject(_ info: ClassInfo, _ rowKey: Int64, _ conn: Connection) throws -> Document? {
        let s = try conn.statement(info.readSQL)
        s.bind(1, rowKey)
        guard try s.step() else { s.reset(); return nil }
        let row = (0...info.columns.count).map { s.sqlValue(Int32($0)) }
        s.reset()
        return try document(info, row, conn)
    }

    /// Builds the document of one row of `selectColumns` (row key first).
    func document(_ info: ClassInfo, _ row: [SQLValue], _ conn: Connection) throws -> Document {
        var doc = Document()
        guard case .integer(let rowKey) = row[0] else { return doc }
        for (p, column) in info.layout {
            doc.appendNew(p.name, try column.map { try readValue(p, row[$0], conn) } ?? readList(info, p, rowKey, conn))
        }
        return doc
    }

    /// A stored value as users see it: links as the target's primary key.
    func readValue(_ p: Property, _ raw: SQLValue, _ conn: Connection) throws -> Value {
        guard p.type == .object else { return p.type.value(raw) }
        guard case .integer(let key) = raw, let target = classes[p.objectType ?? ""] else { return .null }
        if target.schema.isEmbedded { return try readObject(target, key, conn).map { .object($0) } ?? .null }
        return try reference(target, key, conn)
    }

    func readList(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ conn: Connection) throws -> Value {
        .list(try readListRows(info, p, owner, conn).map { try readValue(p, $0, conn) })
    }

    private func readListRows(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ conn: Connection) throws -> [SQLValue] {
        let s = try conn.statement("SELECT value FROM \(info.listTable(p)) WHERE owner = ? ORDER BY position")
        s.bind(1, owner)
        var rows = [SQLValue]()
        while try s.step() { rows.append(s.sqlValue(0)) }
        s.reset()
        return rows
    }
}

extension SQLValue {
    var int64: Int64? { if case .integer(let i) = self { return i } else { return nil } }
}
