// One file over 600 lines: create, update and delete share the row writer and the change
// recorder's calls; split apart, each would need the other's private helpers.

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
            if update == .error, info.rowsPerInsert > 1, objects.count >= info.rowsPerInsert, let pk = info.primaryKey {
                try insertMany(info, pk, objects, conn, state.recorder)
                return objects.count
            }
            for (i, object) in objects.enumerated() {
                do { _ = try upsert(info, object, update, conn, state.recorder) } catch let e as AtollError {
                    throw e.prefixed("object \(i)")
                }
            }
            return objects.count
        }
    }

    /// New objects of a class whose objects are one row each (`ClassInfo.rowsPerInsert`),
    /// `rowsPerInsert` to an `INSERT`: SQLite takes one statement of many rows for much less than
    /// a statement each. The same checks, errors and change log as `upsert` with `.error`, object
    /// by object: a failed statement goes again a row at a time, which names the object, and an
    /// object that cannot be stored waits for the objects before it.
    private func insertMany(_ info: ClassInfo, _ pkProperty: Property, _ objects: [Document], _ conn: Connection,
                            _ rec: ChangeRecorder) throws {
        var rows = [(index: Int, key: Value, values: [SQLValue], logged: [Value])]()
        rows.reserveCapacity(info.rowsPerInsert)
        func flush() throws {
            defer { rows.removeAll(keepingCapacity: true) }
            if rows.count == info.rowsPerInsert {
                let s = try conn.statement(info.insertManySQL)
                var at: Int32 = 1
                for row in rows {
                    for v in row.values {
                        s.bind(at, v)
                        at += 1
                    }
                }
                let before = conn.totalChanges
                do {
                    try s.run()
                    for row in rows { rec.recordCreate(info, row.key, values: row.logged) }
                    return
                } catch let e as AtollError where e.code == .duplicatePrimaryKey {
                    // The statement (OR FAIL) kept the rows before the failing one; one at a
                    // time from there finds the object. (The caller's savepoint undoes all.)
                    let kept = Int(clamping: conn.totalChanges - before)
                    guard kept < rows.count else { throw e }
                    for row in rows.prefix(kept) { rec.recordCreate(info, row.key, values: row.logged) }
                    rows.removeFirst(kept)
                }
            }
            for row in rows {
                let s = try conn.statement(info.insertSQL)
                s.bind(row.values)
                do { try s.run() } catch let e as AtollError {
                    let named = e.code == .duplicatePrimaryKey
                        ? AtollError(.duplicatePrimaryKey, "an object of class '\(info.name)' with primary key \(row.key.shortDescription) exists already")
                        : e
                    throw named.prefixed("object \(row.index)")
                }
                rec.recordCreate(info, row.key, values: row.logged)
            }
        }
        for (i, doc) in objects.enumerated() {
            var values = [SQLValue]()
            var logged = [Value]()
            let key: Value
            do {
                try checkKeys(info, doc)
                guard let raw = doc[pkProperty.name], !raw.isNull else {
                    throw AtollError(.missingValue, "primary key '\(info.name).\(pkProperty.name)' is missing")
                }
                key = try pkProperty.coerce(raw, className: info.name)
                values.reserveCapacity(info.columns.count)
                if rec.keepsValues { logged.reserveCapacity(info.columns.count) }
                for p in info.columns {
                    let item = try resolve(p, doc[p.name] ?? p.implicitDefault, info, .error, conn, rec)
                    values.append(item.sql)
                    if rec.keepsValues { logged.append(item.canonical) }
                }
            } catch let e as AtollError {
                // The objects before this one come first, with their own errors.
                try flush()
                throw e.prefixed("object \(i)")
            }
            rows.append((i, key, values, logged))
            if rows.count == info.rowsPerInsert { try flush() }
        }
        try flush()
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
            let row = (0..<info.width).map { s.sqlValue(Int32($0)) }
            s.reset()
            return try document(info, row, conn)
        }
    }

    /// The object with a row key, or nil when there is none.
    public func object(_ className: String, key: ObjectKey) throws -> Document? {
        try locked { conn in try readObject(try classInfo(className), key.rawValue, conn) }
    }

    /// Reads one property of the object with a primary key (nil when there is no such object):
    /// a list or set as `.list`, a dictionary as `.object`, a mixed value as it is, and a
    /// `linkingObjects` property as the `.list` of the linking objects' primary keys.
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
            let tag = p.type == .mixed ? s.sqlValue(2) : .null
            s.reset()
            if p.isComputed { return try readBacklinks(p, rowKey, conn) }
            if p.isCollection { return try readCollection(info, p, rowKey, conn) }
            return p.type == .mixed ? try readMixed(raw, tag, conn) : try readValue(p, raw, conn)
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

    /// The row key of the object a reference names (its primary key, or its row key for a
    /// class without one, as the change log names objects); nil when there is none.
    /// - Throws: `.typeMismatch` for a key of the wrong type.
    func rowKey(_ info: ClassInfo, named reference: Value, _ conn: Connection) throws -> Int64? {
        guard info.primaryKey == nil || info.primaryKeyIsRowKey else { return try lookup(info, primaryKey: reference, conn) }
        guard case .int(let k) = reference else {
            throw AtollError(.typeMismatch, "objects of '\(info.name)' are named by an int key; got \(reference.kindName)")
        }
        return try readObject(info, k, conn) == nil ? nil : k
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

    /// The name under which a document gives the row key of an object of a class without
    /// primary key (the key that reads give in links to such objects): with it, `create` makes
    /// the object with that key or, as `update` says, updates the one that has it.
    public static let objectKeyName = "_atoll_key"

    /// Creates or updates one top-level object; records its instructions.
    func upsert(_ info: ClassInfo, _ doc: Document, _ policy: UpdatePolicy, _ conn: Connection,
                _ rec: ChangeRecorder) throws -> (rowKey: Int64, reference: Value) {
        guard !info.schema.isEmbedded else {
            throw AtollError(.invalidArgument, "'\(info.name)' is an embedded class: create its objects inside their owner")
        }
        try checkKeys(info, doc)
        var pk: Value?
        var explicitKey: Int64?
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
                if let existing = try updateExisting(info, p.type.sqlValue(key), key, doc, given, policy, conn, rec) {
                    return (existing, key)
                }
            }
        } else if let raw = doc[Store.objectKeyName] {
            guard case .int(let key) = raw else {
                throw AtollError(.typeMismatch, "\(Store.objectKeyName) of '\(info.name)' is an int; got \(raw.kindName) \(raw.shortDescription)")
            }
            let given = info.columns.filter { doc[$0.name] != nil }
            if policy == .error, try rowExists(info, key, conn) {
                throw AtollError(.duplicatePrimaryKey, "an object of class '\(info.name)' with key \(key) exists already")
            }
            if policy != .error, let existing = try updateExisting(info, .integer(key), .int(key), doc, given, policy, conn, rec) {
                return (existing, .int(key))
            }
            explicitKey = key
        }
        // Insert. Resolve every value first: an inline link may insert into this same class,
        // with this same cached statement.
        var logged = [Value]()
        var values = [SQLValue]()
        var types = [SQLValue]()
        if rec.keepsValues { logged.reserveCapacity(info.columns.count) }
        values.reserveCapacity(info.width)
        for p in info.columns {
            let item = try resolve(p, doc[p.name] ?? p.implicitDefault, info, policy, conn, rec)
            values.append(item.sql)
            if p.type == .mixed { types.append(item.type) }
            if rec.keepsValues { logged.append(item.canonical) }
        }
        let insert: Statement
        if let explicitKey {
            insert = try conn.statement(info.insertWithKeySQL)
            insert.bind([.integer(explicitKey)] + values + types)
        } else {
            insert = try conn.statement(info.insertSQL)
            insert.bind(types.isEmpty ? values : values + types)
        }
        do { try insert.run() } catch let e as AtollError where e.code == .duplicatePrimaryKey {
            throw AtollError(.duplicatePrimaryKey, "an object of class '\(info.name)' with primary key \(pk?.shortDescription ?? "?") exists already")
        }
        let rowKey = info.primaryKeyIsRowKey ? pk.flatMap { if case .int(let i) = $0 { i } else { nil } } ?? conn.lastInsertRowID
            : explicitKey ?? conn.lastInsertRowID
        let ref = pk ?? .int(rowKey)
        rec.recordCreate(info, ref, values: logged)
        for p in info.collections {
            let items = try resolveCollection(p, doc[p.name] ?? p.implicitDefault, info, policy, conn, rec)
            try insertCollection(info, p, rowKey, items, conn)
            recordCollection(info, p, ref, items, cleared: false, rec)
        }
        return (rowKey, ref)
    }

    /// Updates the object whose primary key column (the row key for classes without primary
    /// key) holds `key`, when there is one; returns its row key, or nil when there is none.
    private func updateExisting(_ info: ClassInfo, _ key: SQLValue, _ ref: Value, _ doc: Document, _ given: [Property],
                                _ policy: UpdatePolicy, _ conn: Connection, _ rec: ChangeRecorder) throws -> Int64? {
        let s = try conn.statement(info.currentValuesSQL(given))
        s.bind(1, key)
        guard try s.step() else { s.reset(); return nil }
        let existing = s.int64(0)
        let old = oldValues(s, given)
        s.reset()
        try update(info, existing, ref, doc, given, old, policy, conn, rec)
        return existing
    }

    /// Updates the given properties of the object with a row key (policy `.all`).
    func updateByRowKey(_ info: ClassInfo, _ rowKey: Int64, _ ref: Value, _ doc: Document, _ conn: Connection,
                        _ rec: ChangeRecorder) throws {
        try checkKeys(info, doc)
        let given = info.columns.filter { doc[$0.name] != nil }
        // With `.all`, only replaced embedded objects need the current values: without them
        // (and without collections, written after), the UPDATE's change count tells whether
        // the object exists.
        if !given.isEmpty, !given.contains(where: { embeddedTarget($0) != nil }),
           !info.collections.contains(where: { doc[$0.name] != nil }) {
            try update(info, rowKey, ref, doc, given, given.map { _ in (SQLValue.null, SQLValue.null) }, .all, conn, rec)
            guard conn.changes > 0 else { throw AtollError(.notFound, "no object of class '\(info.name)' with key \(rowKey)") }
            return
        }
        let s = try conn.statement(info.currentValuesSQL(given, byRowKey: true))
        s.bind(1, rowKey)
        guard try s.step() else { s.reset(); throw AtollError(.notFound, "no object of class '\(info.name)' with key \(rowKey)") }
        let old = oldValues(s, given)
        s.reset()
        try update(info, rowKey, ref, doc, given, old, .all, conn, rec)
    }

    /// The current values (and mixed types) of `given` in a row of `currentValuesSQL`.
    private func oldValues(_ s: Statement, _ given: [Property]) -> [(SQLValue, SQLValue)] {
        var old = [(SQLValue, SQLValue)]()
        var typeColumn = Int32(given.count + 1)
        for (i, p) in given.enumerated() {
            var type = SQLValue.null
            if p.type == .mixed {
                type = s.sqlValue(typeColumn)
                typeColumn += 1
            }
            old.append((s.sqlValue(Int32(i + 1)), type))
        }
        return old
    }

    /// Updates an existing object's scalar columns with one `UPDATE … RETURNING`, where no
    /// current value is needed first: with `.all`, every given column is recorded; with
    /// `.modified` and one column, `WHERE column IS NOT new` tells whether it changed. Returns
    /// nil when this does not apply, or when no such object exists (the caller then inserts).
    private func updateInOneStatement(_ info: ClassInfo, _ pk: Value, _ doc: Document, _ given: [Property],
                                      _ policy: UpdatePolicy, _ conn: Connection,
                                      _ rec: ChangeRecorder) throws -> (rowKey: Int64, reference: Value)? {
        guard !given.isEmpty, policy == .all || given.count == 1,
              given.allSatisfy({ $0.type != .object && $0.type != .mixed }),
              !info.collections.contains(where: { doc[$0.name] != nil }),
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
            if key == Store.objectKeyName, info.primaryKey == nil, !info.schema.isEmbedded { continue }
            if info.schema[property: key]?.isComputed == true {
                throw AtollError(.invalidArgument, "'\(info.name).\(key)' is a linkingObjects property: it is computed from links, and cannot be written")
            }
            throw AtollError(.noSuchProperty, "class '\(info.name)' has no property '\(key)'")
        }
    }

    /// Updates the given properties of an existing object. `given` are the columns the document
    /// sets and `old` their current values and (for mixed) types: to skip unchanged ones with
    /// .modified, and to free replaced embedded objects.
    private func update(_ info: ClassInfo, _ rowKey: Int64, _ ref: Value, _ doc: Document, _ given: [Property],
                        _ old: [(SQLValue, SQLValue)], _ policy: UpdatePolicy, _ conn: Connection,
                        _ rec: ChangeRecorder) throws {
        if !given.isEmpty {
            var changed = [(Property, Stored)]()
            var replacedEmbedded = [(ClassInfo, Int64)]()
            for (i, p) in given.enumerated() {
                let item = try resolve(p, doc[p.name]!, info, policy, conn, rec)
                if let target = embeddedTarget(p), case .integer(let oldKey) = old[i].0 {
                    if policy == .modified, case .integer(let newKey) = item.sql,
                       try readObject(target, oldKey, conn) == readObject(target, newKey, conn) {
                        try eraseRow(target, newKey, conn)
                        continue
                    }
                    replacedEmbedded.append((target, oldKey))
                } else if policy == .modified, item.sql == old[i].0, item.type == old[i].1 {
                    continue
                }
                changed.append((p, item))
            }
            if !changed.isEmpty {
                let s = try conn.statement(info.updateSQL(changed.map(\.0)))
                var n: Int32 = 1
                for (p, item) in changed {
                    s.bind(n, item.sql)
                    n += 1
                    if p.type == .mixed {
                        s.bind(n, item.type)
                        n += 1
                    }
                }
                s.bind(n, rowKey)
                try s.run()
                for (target, key) in replacedEmbedded { try eraseRow(target, key, conn) }
                for (p, item) in changed { rec.record(Instruction(.set, info.name, ref, path: [.key(p.name)], value: item.canonical)) }
            }
        }
        for p in info.collections {
            guard let raw = doc[p.name] else { continue }
            let items = try resolveCollection(p, raw, info, policy, conn, rec)
            if policy == .modified, try collectionUnchanged(info, p, rowKey, items, conn) { continue }
            try clearCollection(info, p, rowKey, conn)
            try insertCollection(info, p, rowKey, items, conn)
            recordCollection(info, p, ref, items, cleared: true, rec)
        }
    }

    func embeddedTarget(_ p: Property) -> ClassInfo? {
        guard p.type == .object, let name = p.objectType, let target = classes[name], target.schema.isEmbedded else { return nil }
        return target
    }

    /// One value (or collection element) of a property, resolved to its SQL form and its
    /// canonical value: links are looked up or written, embedded objects inserted.
    func resolve(_ p: Property, _ raw: Value, _ info: ClassInfo, _ policy: UpdatePolicy, _ conn: Connection,
                 _ rec: ChangeRecorder) throws -> Stored {
        nesting += 1
        defer { nesting -= 1 }
        guard nesting <= Store.maxNesting else {
            throw AtollError(.invalidArgument, "objects are nested more than \(Store.maxNesting) levels deep")
        }
        if p.type == .mixed { return try resolveMixed(raw, "property '\(info.name).\(p.name)'", conn) }
        if p.isCollection, case .list = raw {
            throw AtollError(.typeMismatch, "property '\(info.name).\(p.name)' holds a \(p.collection.rawValue) of \(p.type == .object ? p.objectType! : p.type.rawValue); a list cannot be an element")
        }
        guard p.type == .object else {
            let v = try p.coerce(raw, className: info.name)
            return Stored(sql: p.type.sqlValue(v), canonical: v)
        }
        if raw.isNull {
            if p.isCollection, !p.isOptional {
                throw AtollError(.missingValue, "\(p.collection.rawValue) '\(info.name).\(p.name)' cannot hold null")
            }
            return Stored(sql: .null, canonical: .null)
        }
        let target = try classInfo(p.objectType!)
        if target.schema.isEmbedded {
            guard case .object(let doc) = raw else {
                throw AtollError(.typeMismatch, "property '\(info.name).\(p.name)' holds an embedded \(target.name); give it as an object, not \(raw.kindName) \(raw.shortDescription)")
            }
            let (key, canonical) = try insertEmbedded(target, doc, policy, conn, rec)
            return Stored(sql: .integer(key), canonical: .object(canonical))
        }
        if case .object(let doc) = raw {
            let (key, ref) = try upsert(target, doc, policy, conn, rec)
            return Stored(sql: .integer(key), canonical: .link(ObjectLink(className: target.name, primaryKey: ref)))
        }
        var given = raw
        if case .link(let l) = raw {
            guard l.className == target.name else {
                throw AtollError(.typeMismatch, "property '\(info.name).\(p.name)' links to \(target.name), not \(l.className)")
            }
            given = l.primaryKey
        }
        let (key, pk) = try linkedObject(target, given, "property '\(info.name).\(p.name)'", conn)
        return Stored(sql: .integer(key), canonical: .link(ObjectLink(className: target.name, primaryKey: pk)))
    }

    /// The object of `target` a link names by `key` — its primary key, or its row key for a class
    /// without one (as reads give it) — as its row key and its primary key (canonical).
    /// - Throws: `.typeMismatch` for a key of the wrong type, `.notFound` when there is no such
    ///   object; messages start with `at`.
    func linkedObject(_ target: ClassInfo, _ key: Value, _ at: String, _ conn: Connection) throws -> (Int64, Value) {
        guard target.primaryKey != nil else {
            guard case .int(let rowKey) = key else {
                throw AtollError(.typeMismatch, "\(at): class '\(target.name)' has no primary key, so the link must be given as an object or as the target's key (an int)")
            }
            guard try rowExists(target, rowKey, conn) else {
                throw AtollError(.notFound, "\(at): no \(target.name) with key \(rowKey)")
            }
            return (rowKey, key)
        }
        let pk: Value
        do { pk = try checkedPrimaryKey(target, key) } catch let e as AtollError {
            throw AtollError(.typeMismatch, "\(at) links to \(target.name): \(e.message)")
        }
        guard let rowKey = try lookup(target, primaryKey: pk, conn) else {
            throw AtollError(.notFound, "\(at): no \(target.name) with primary key \(pk.shortDescription)")
        }
        return (rowKey, pk)
    }

    /// Inserts an embedded object (no instructions of its own: its owner's `set` carries it).
    private func insertEmbedded(_ info: ClassInfo, _ doc: Document, _ policy: UpdatePolicy, _ conn: Connection,
                                _ rec: ChangeRecorder) throws -> (Int64, Document) {
        try checkKeys(info, doc)
        var canonical = [String: Value]()
        var values = [SQLValue]()
        var types = [SQLValue]()
        for p in info.columns {
            let item = try resolve(p, doc[p.name] ?? p.implicitDefault, info, policy, conn, rec)
            values.append(item.sql)
            if p.type == .mixed { types.append(item.type) }
            canonical[p.name] = item.canonical
        }
        let insert = try conn.statement(info.insertSQL)
        insert.bind(values + types)
        try insert.run()
        let rowKey = conn.lastInsertRowID
        for p in info.collections {
            let items = try resolveCollection(p, doc[p.name] ?? p.implicitDefault, info, policy, conn, rec)
            try insertCollection(info, p, rowKey, items, conn)
            canonical[p.name] = collectionValue(p, items.map { ($0.key, $0.stored.canonical) })
        }
        // The embedded object as its owner's `set` records it, in schema order.
        return (rowKey, Document(info.layout.map { ($0.property.name, canonical[$0.property.name] ?? .null) }))
    }

    // MARK: - Deleting

    /// Deletes a top-level object and records its erase.
    func erase(_ info: ClassInfo, _ rowKey: Int64, _ conn: Connection, _ rec: ChangeRecorder) throws {
        let ref = try reference(info, rowKey, conn)
        try eraseRow(info, rowKey, conn)
        rec.record(Instruction(.erase, info.name, ref))
    }

    /// Deletes a row with what it owns (embedded objects, collection rows) and the links to it:
    /// to-one links and dictionary values become null, lists and sets drop it, mixed values
    /// that link to it become null.
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
        for p in info.collections { try clearCollection(info, p, rowKey, conn) }
        if !info.schema.isEmbedded {
            for (other, p) in incoming(info.name) {
                let sql: String
                switch p.collection {
                case .single: sql = "UPDATE \(other.table) SET \(quote(p.name)) = NULL WHERE \(quote(p.name)) = ? RETURNING \(other.rowKey)"
                case .list, .set: sql = "DELETE FROM \(other.listTable(p)) WHERE value = ? RETURNING owner"
                case .dictionary: sql = "UPDATE \(other.listTable(p)) SET value = NULL WHERE value = ? RETURNING owner"
                }
                let s = try conn.statement(sql)
                s.bind(1, rowKey)
                try recordNulledLinks(s, other, p, conn)
            }
            let tag = SQLValue.text(MixedTag.linkPrefix + info.name)
            for (other, p) in mixedProperties() {
                let sql = p.isCollection
                    ? "UPDATE \(other.listTable(p)) SET value = NULL, type = NULL WHERE type = ?1 AND value = ?2 RETURNING owner"
                    : "UPDATE \(other.table) SET \(quote(p.name)) = NULL, \(mixedTypeColumn(p)) = NULL WHERE \(mixedTypeColumn(p)) = ?1 AND \(quote(p.name)) = ?2 RETURNING \(other.rowKey)"
                let s = try conn.statement(sql)
                s.bind(1, tag)
                s.bind(2, rowKey)
                try recordNulledLinks(s, other, p, conn)
            }
        }
        let s = try conn.statement(info.deleteSQL)
        s.bind(1, rowKey)
        try s.run()
    }

    /// Runs a statement that nulls or drops links to an erased object and returns the row keys
    /// of their holders, and records each changed property as an effect of the transaction
    /// (observers see it; the change log's instructions do not say it: replaying the erase
    /// does it). Holders that are embedded objects are not recorded.
    private func recordNulledLinks(_ s: Statement, _ holder: ClassInfo, _ p: Property, _ conn: Connection) throws {
        var holders = [Int64]()
        while try s.step() { holders.append(s.int64(0)) }
        s.reset()
        guard let effects = write?.effects, !holder.schema.isEmbedded else { return }
        for key in Set(holders).sorted() {
            effects.record(Instruction(.set, holder.name, try reference(holder, key, conn), path: [.key(p.name)]))
        }
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

    /// The mixed properties of every class (which may link to any object).
    func mixedProperties() -> [(ClassInfo, Property)] {
        let key = "\u{0}mixed"
        if let known = incomingLinks[key] { return known }
        var found = [(ClassInfo, Property)]()
        for cls in schema.classes {
            guard let other = classes[cls.name] else { continue }
            for p in cls.properties where p.type == .mixed { found.append((other, p)) }
        }
        incomingLinks[key] = found
        return found
    }

    // MARK: - Reading

    /// Reads a whole object by row key: links as the target's primary key, embedded objects
    /// whole, lists and sets as arrays, dictionaries as objects.
    func readObject(_ info: ClassInfo, _ rowKey: Int64, _ conn: Connection) throws -> Document? {
        let s = try conn.statement(info.readSQL)
        s.bind(1, rowKey)
        guard try s.step() else { s.reset(); return nil }
        let row = (0..<info.width).map { s.sqlValue(Int32($0)) }
        s.reset()
        return try document(info, row, conn)
    }

    /// Builds the document of one row of `selectColumns` (row key first).
    func document(_ info: ClassInfo, _ row: [SQLValue], _ conn: Connection) throws -> Document {
        var doc = Document()
        guard case .integer(let rowKey) = row[0] else { return doc }
        for (p, column, typeColumn) in info.layout {
            let value: Value
            if let column {
                value = try typeColumn.map { try readMixed(row[column], row[$0], conn) } ?? readValue(p, row[column], conn)
            } else {
                value = try readCollection(info, p, rowKey, conn)
            }
            doc.appendNew(p.name, value)
        }
        return doc
    }

    /// A stored value (not mixed) as users see it: links as the target's primary key.
    func readValue(_ p: Property, _ raw: SQLValue, _ conn: Connection) throws -> Value {
        guard p.type == .object else { return p.type.value(raw) }
        guard case .integer(let key) = raw, let target = classes[p.objectType ?? ""] else { return .null }
        if target.schema.isEmbedded { return try readObject(target, key, conn).map { .object($0) } ?? .null }
        return try reference(target, key, conn)
    }

    /// The objects that link to an object through a `linkingObjects` property's origin, by
    /// their primary keys (row keys for classes without), in row-key order.
    func readBacklinks(_ p: Property, _ rowKey: Int64, _ conn: Connection) throws -> Value {
        guard let source = classes[p.objectType ?? ""], let origin = source.schema[property: p.linkOriginProperty ?? ""] else {
            return .list([])
        }
        let sql = origin.isCollection
            ? "SELECT DISTINCT owner FROM \(source.listTable(origin)) WHERE value = ? ORDER BY owner"
            : "SELECT \(source.rowKey) FROM \(source.table) WHERE \(quote(origin.name)) = ? ORDER BY \(source.rowKey)"
        let s = try conn.statement(sql)
        s.bind(1, rowKey)
        var keys = [Int64]()
        while try s.step() { keys.append(s.int64(0)) }
        s.reset()
        return .list(try keys.map { try reference(source, $0, conn) })
    }
}

/// A value resolved for storage: its SQL form, its type tag (mixed values only, else NULL) and
/// its canonical form (what the change log records).
struct Stored: Hashable {
    var sql: SQLValue
    var type: SQLValue = .null
    var canonical: Value
}

extension SQLValue {
    var int64: Int64? { if case .integer(let i) = self { return i } else { return nil } }
}
