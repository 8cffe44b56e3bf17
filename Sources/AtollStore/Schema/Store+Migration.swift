// Migrations: opening a file whose schema version is lower than the configuration's.
//
// All of it runs in one write transaction, so that a failure anywhere (a callback that throws,
// primary keys that are not unique afterwards) leaves the file exactly as it was:
//
// 1. The old objects of every class whose storage changes are read (with the old schema) and
//    kept for the callback.
// 2. Each such class is rebuilt: its table is renamed aside, a table of the new layout created,
//    and the values of properties that kept their name and type copied over, row keys
//    included (so links to its objects stay valid); a property that became required gets its
//    default where it was null. Lists, sets and dictionaries that kept their type keep their
//    side tables (one that became required loses its nulls). Other changes are applied as
//    additions.
// 3. The callback runs with the new schema in place; it reads old objects, writes new ones by
//    key, renames properties, deletes classes' data, or creates and deletes objects.
// 4. Primary keys are checked unique, the old tables dropped, the schema and version saved,
//    and what the callback wrote is committed as one change-log entry.

/// What a migration callback works with: the old and new schemas, the old objects, and the
/// store (in its write transaction, with the new schema) to write the new ones.
///
/// ```swift
/// config.migration = { m in
///     try m.renameProperty("Person", from: "name", to: "fullName")
///     try m.enumerateObjects("Person") { key, old in
///         try m.set("Person", key: key, ["age": .int(Int64(old["age"]?.stringValue ?? "") ?? 0)])
///     }
/// }
/// ```
public final class Migration: @unchecked Sendable {
    public let oldSchema: Schema
    public let newSchema: Schema
    public let oldSchemaVersion: UInt64
    public let newSchemaVersion: UInt64
    /// The realm being migrated: in its write transaction, with the new schema. Objects may be
    /// created, read, queried and deleted as usual.
    public let realm: Store
    /// The old objects of rebuilt classes, by row key (read before anything changed).
    var oldObjects: [String: [(ObjectKey, Document)]]
    /// For rebuilt classes: the renamed old table, the expression of the new row key over it,
    /// and the renamed side tables of its old collections.
    var rebuilt: [String: RebuiltClass]

    struct RebuiltClass {
        var oldTable: String
        var rowKeyExpression: String
        var oldSideTables: [String: String]
    }

    init(oldSchema: Schema, newSchema: Schema, oldVersion: UInt64, newVersion: UInt64, realm: Store,
         oldObjects: [String: [(ObjectKey, Document)]], rebuilt: [String: RebuiltClass]) {
        self.oldSchema = oldSchema
        self.newSchema = newSchema
        oldSchemaVersion = oldVersion
        newSchemaVersion = newVersion
        self.realm = realm
        self.oldObjects = oldObjects
        self.rebuilt = rebuilt
    }

    /// The objects of a class as they were before the migration (with the old schema's
    /// properties), with the keys of the new objects they became.
    /// - Throws: `.noSuchClass` when the old schema has no such class.
    public func oldObjects(_ className: String) throws -> [(key: ObjectKey, object: Document)] {
        guard oldSchema[className] != nil else {
            throw AtollError(.noSuchClass, "the old schema has no class named '\(className)'")
        }
        if let kept = oldObjects[className] { return kept.map { (key: $0.0, object: $0.1) } }
        // Unchanged classes: the objects are as they were.
        let results = try realm.objects(className)
        return try zip(results.keys(), results.documents()).map { (key: $0, object: $1) }
    }

    /// Calls `body` with each old object of a class and the key of its new object.
    public func enumerateObjects(_ className: String, _ body: (_ key: ObjectKey, _ old: Document) throws -> Void) throws {
        for (key, object) in try oldObjects(className) { try body(key, object) }
    }

    /// Writes properties of a new object (by key). Setting an int primary key moves the object
    /// to that key, and links to it follow.
    /// - Throws: as `Store.create`, and `.notFound` when there is no object with that key.
    public func set(_ className: String, key: ObjectKey, _ values: Document) throws {
        try realm.migrationSet(className, key.rawValue, values)
    }

    /// Moves the data of property `from` (of the old schema) to property `to` (of the new
    /// one, which the old schema does not have); both must hold the same type.
    public func renameProperty(_ className: String, from: String, to: String) throws {
        try realm.migrationRename(self, className, from, to)
    }

    /// Deletes every object of a class; a class the new schema does not have is removed from
    /// the file.
    public func deleteData(_ className: String) throws {
        try realm.migrationDeleteData(self, className)
    }
}

extension Store {
    /// Runs a migration from the stored schema to `wanted` (see the top of this file).
    func migrate(_ conn: Connection, from stored: StoredSchema, to wanted: Schema) throws {
        try conn.execute("BEGIN IMMEDIATE")
        do {
            // Another process may have migrated since we looked: look again under the lock.
            guard let current = try loadStoredSchema(conn) else {
                throw AtollError(.file, "the realm's stored schema disappeared during the migration")
            }
            if current.version >= configuration.schemaVersion {
                try conn.execute("ROLLBACK")
                try openSchema()
                return
            }
            try runMigration(conn, from: current, to: wanted)
            try conn.execute("COMMIT")
        } catch {
            write = nil
            try? conn.execute("ROLLBACK")
            conn.clearCache()
            if let stored = try? loadStoredSchema(conn) { adopt(stored.schema, version: stored.version) }
            if let e = error as? AtollError { throw e }
            throw AtollError(.migration, "the migration failed: \(error)")
        }
        conn.clearCache()
    }

    private func runMigration(_ conn: Connection, from stored: StoredSchema, to wanted: Schema) throws {
        let old = stored.schema
        var result = wanted
        for cls in old.classes where wanted[cls.name] == nil { result.classes.append(cls) }
        // What changes: classes whose stored layout differs are rebuilt, the rest gain additions.
        var rebuildNames = [String]()
        for cls in wanted.classes {
            guard let before = old[cls.name] else { continue }
            if before.isEmbedded != cls.isEmbedded {
                throw AtollError(.schemaMismatch, "class '\(cls.name)' changed from \(before.isEmbedded ? "embedded" : "top-level") to \(cls.isEmbedded ? "embedded" : "top-level"); migrations cannot change that")
            }
            if needsRebuild(before, cls) { rebuildNames.append(cls.name) }
        }
        // 1. Old objects, read with the old schema.
        adopt(old, version: stored.version)
        var oldObjects = [String: [(ObjectKey, Document)]]()
        for name in rebuildNames {
            let info = try classInfo(name)
            let keys = try rowKeys(info, conn)
            oldObjects[name] = try keys.map { key in (ObjectKey(key), try readObject(info, key, conn) ?? Document()) }
        }
        // 2. The new layout.
        var rebuilt = [String: Migration.RebuiltClass]()
        var deferredUnique = [String]()
        for (n, cls) in wanted.classes.enumerated() {
            guard let before = old[cls.name] else {
                for step in createTable(cls) { try conn.execute(step) }
                continue
            }
            if rebuildNames.contains(cls.name) {
                let (info, unique) = try rebuild(before, cls, number: n, conn)
                rebuilt[cls.name] = info
                if let unique { deferredUnique.append(unique) }
            } else {
                for step in classChanges(before, cls).steps { try conn.execute(step) }
            }
        }
        conn.clearCache()
        adopt(result, version: configuration.schemaVersion)
        // 3. The callback, in a write transaction of its own store.
        let state = WriteState(version: try latestVersion(conn) + 1, keepsValues: try recordsChangeLogValues(conn))
        write = state
        migrating = true
        defer {
            write = nil
            migrating = false
        }
        let migration = Migration(oldSchema: old, newSchema: wanted, oldVersion: stored.version,
                                  newVersion: configuration.schemaVersion, realm: self,
                                  oldObjects: oldObjects, rebuilt: rebuilt)
        if let callback = configuration.migration {
            do { try callback(migration) } catch let e as AtollError {
                throw AtollError(.migration, "the migration failed: \(e.message)")
            }
        }
        // 4. Checks, cleanup, the new schema and the change-log entry.
        for step in deferredUnique {
            do { try conn.execute(step) } catch let e as AtollError {
                throw AtollError(.duplicatePrimaryKey, "after the migration, primary keys are not unique (\(e.message))")
            }
        }
        for info in migration.rebuilt.values {
            try conn.execute("DROP TABLE IF EXISTS \(info.oldTable)")
            for table in info.oldSideTables.values { try conn.execute("DROP TABLE IF EXISTS \(table)") }
        }
        try saveSchema(conn, schema, version: configuration.schemaVersion)
        try writeChangeLogEntry(state, conn)
        writeCount += 1
    }

    /// Whether a class's stored layout changes beyond additions.
    private func needsRebuild(_ before: ObjectSchema, _ after: ObjectSchema) -> Bool {
        if before.primaryKey != after.primaryKey { return true }
        for q in before.properties where !q.isComputed {
            guard let p = after[property: q.name] else { return true }
            if !sameStorage(q, p) || q.isOptional != p.isOptional { return true }
        }
        return false
    }

    /// Whether two properties store their values the same way (optionality aside).
    private func sameStorage(_ q: Property, _ p: Property) -> Bool {
        q.type == p.type && q.objectType == p.objectType && q.collection == p.collection && !q.isComputed && !p.isComputed
    }

    private func rowKeys(_ info: ClassInfo, _ conn: Connection) throws -> [Int64] {
        let s = try conn.statement("SELECT \(info.rowKey) FROM \(info.table) ORDER BY \(info.rowKey)")
        var keys = [Int64]()
        while try s.step() { keys.append(s.int64(0)) }
        s.reset()
        return keys
    }

    /// Renames a class's table (and the side tables of collections that change) aside, creates
    /// the new layout and copies the values that keep their name and type. Returns what the
    /// callback needs, and the unique index on a primary key that is created after it.
    private func rebuild(_ before: ObjectSchema, _ after: ObjectSchema, number n: Int,
                         _ conn: Connection) throws -> (Migration.RebuiltClass, String?) {
        let oldInfo = ClassInfo(before)
        let newInfo = ClassInfo(after)
        let oldTable = quote("_atoll_old\(n)")
        // Index names belong to the database: drop the old table's before creating the new ones.
        for q in before.properties where !q.isCollection {
            try conn.execute("DROP INDEX IF EXISTS \(oldInfo.indexName(q))")
        }
        try conn.execute("DROP INDEX IF EXISTS \(quote("\(before.name).primaryKey"))")
        try conn.execute("ALTER TABLE \(oldInfo.table) RENAME TO \(oldTable)")
        var oldSideTables = [String: String]()
        var keptSideTables = Set<String>()
        for q in oldInfo.collections {
            if let p = after[property: q.name], sameStorage(q, p), q.isOptional == p.isOptional || p.isOptional {
                keptSideTables.insert(q.name)
                continue
            }
            let aside = quote("_atoll_old\(n).\(q.name)")
            try conn.execute("DROP INDEX IF EXISTS \(quote("\(before.name).\(q.name).value"))")
            try conn.execute("ALTER TABLE \(oldInfo.listTable(q)) RENAME TO \(aside)")
            oldSideTables[q.name] = aside
        }
        // The new table, with a non-int primary key's uniqueness checked after the callback.
        try conn.execute(tableDefinition(newInfo, uniquePrimaryKey: false))
        var unique: String?
        if let pk = newInfo.primaryKey, !newInfo.primaryKeyIsRowKey {
            unique = "CREATE UNIQUE INDEX \(quote("\(after.name).primaryKey")) ON \(newInfo.table) (\(quote(pk.name)))"
        }
        for p in after.properties where !keptSideTables.contains(p.name) {
            for step in sideStructures(p, newInfo) { try conn.execute(step) }
        }
        // Row keys: kept, except where the new row key is an int primary key the old class
        // already had as a property (then objects move to that key, and links follow).
        var rowKeyExpression = "o.\(oldInfo.rowKey)"
        if newInfo.primaryKeyIsRowKey, let pk = newInfo.primaryKey, let q = before[property: pk.name],
           q.type == .int, !q.isCollection, "o.\(quote(q.name))" != rowKeyExpression {
            rowKeyExpression = "o.\(quote(q.name))"
            let nulls = try conn.statement("SELECT count(*) FROM \(oldTable) AS o WHERE \(rowKeyExpression) IS NULL")
            _ = try nulls.step()
            let n = nulls.int64(0)
            nulls.reset()
            if n > 0 {
                throw AtollError(.missingValue, "'\(after.name).\(pk.name)' becomes the primary key but \(n) object(s) have no value")
            }
        }
        var targets = [newInfo.rowKey]
        var sources = [rowKeyExpression]
        for p in newInfo.columns where p.name != newInfo.primaryKey?.name || !newInfo.primaryKeyIsRowKey {
            guard let q = before[property: p.name], sameStorage(q, p) else { continue }
            targets.append(quote(p.name))
            sources.append(q.isOptional && !p.isOptional ? "coalesce(o.\(quote(q.name)), \(p.type.sqlLiteral(p.implicitDefault)))" : "o.\(quote(q.name))")
            if p.type == .mixed {
                targets.append(mixedTypeColumn(p))
                sources.append("o.\(mixedTypeColumn(q))")
            }
        }
        try conn.execute("INSERT INTO \(newInfo.table) (\(targets.joined(separator: ", "))) SELECT \(sources.joined(separator: ", ")) FROM \(oldTable) AS o")
        // Collections that became required keep their elements but the nulls.
        var ownedSideTables = keptSideTables
        for q in oldInfo.collections where !keptSideTables.contains(q.name) {
            guard let p = after[property: q.name], sameStorage(q, p), let aside = oldSideTables[q.name] else { continue }
            let columns = (p.collection == .dictionary ? "owner, key, value" : "owner, position, value") + (p.type == .mixed ? ", type" : "")
            try conn.execute("INSERT INTO \(newInfo.listTable(p)) (\(columns)) SELECT \(columns) FROM \(aside) WHERE value IS NOT NULL")
            ownedSideTables.insert(q.name)
        }
        if rowKeyExpression != "o.\(oldInfo.rowKey)" {
            try moveRowKeys(after.name, from: "SELECT o.\(oldInfo.rowKey), \(rowKeyExpression) FROM \(oldTable) AS o", ownedSideTables, conn)
        }
        return (Migration.RebuiltClass(oldTable: oldTable, rowKeyExpression: rowKeyExpression, oldSideTables: oldSideTables), unique)
    }

    /// Rewrites every reference to objects of a class whose row keys changed, by a query that
    /// gives (old key, new key) pairs: links of other classes and the owners of kept side tables.
    private func moveRowKeys(_ className: String, from pairs: String, _ keptSideTables: Set<String>, _ conn: Connection) throws {
        try conn.execute("CREATE TEMP TABLE IF NOT EXISTS _atoll_keymap (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)")
        try conn.execute("DELETE FROM temp._atoll_keymap")
        try conn.execute("INSERT INTO temp._atoll_keymap (old, new) \(pairs)")
        let map = "(SELECT new FROM temp._atoll_keymap WHERE old = %@)"
        func mapped(_ column: String) -> String { map.replacingOccurrences(of: "%@", with: column) }
        for cls in schema.classes {
            for p in cls.properties where p.type == .object && p.objectType == className && !p.isComputed {
                let info = ClassInfo(cls)
                let (table, column) = p.isCollection ? (info.listTable(p), "value") : (info.table, quote(p.name))
                try conn.execute("UPDATE \(table) SET \(column) = \(mapped(column)) WHERE \(column) IN (SELECT old FROM temp._atoll_keymap)")
            }
        }
        if let info = classes[className] {
            for p in info.collections where keptSideTables.contains(p.name) {
                try conn.execute("UPDATE \(info.listTable(p)) SET owner = \(mapped("owner"))")
            }
        }
        try conn.execute("DELETE FROM temp._atoll_keymap")
    }

    // MARK: - What the callback calls

    func migrationSet(_ className: String, _ rowKey: Int64, _ values: Document) throws {
        try writeOperation("migration set") { conn, state in
            let info = try classInfo(className)
            guard try rowExists(info, rowKey, conn) else {
                throw AtollError(.notFound, "no object of class '\(className)' with key \(rowKey)")
            }
            var key = rowKey
            var doc = values
            if info.primaryKeyIsRowKey, let pk = info.primaryKey, let raw = doc[pk.name] {
                guard case .int(let newKey) = try pk.coerce(raw, className: className) else {
                    throw AtollError(.typeMismatch, "primary key '\(className).\(pk.name)' is an int")
                }
                if newKey != rowKey {
                    guard try !rowExists(info, newKey, conn) else {
                        throw AtollError(.duplicatePrimaryKey, "an object of class '\(className)' with primary key \(newKey) exists already")
                    }
                    try conn.execute("UPDATE \(info.table) SET \(info.rowKey) = \(newKey) WHERE \(info.rowKey) = \(rowKey)")
                    try moveRowKeys(className, from: "SELECT \(rowKey), \(newKey)", Set(info.collections.map(\.name)), conn)
                    key = newKey
                }
                doc[pk.name] = nil
            }
            guard !doc.isEmpty else { return }
            let ref = try reference(info, key, conn)
            try updateByRowKey(info, key, ref, doc, conn, state.recorder)
        }
    }

    func migrationRename(_ migration: Migration, _ className: String, _ from: String, _ to: String) throws {
        try locked { conn in
            guard let oldClass = migration.oldSchema[className], let q = oldClass[property: from] else {
                throw AtollError(.noSuchProperty, "renameProperty: the old schema's class '\(className)' has no property '\(from)'")
            }
            guard migration.newSchema[className]?[property: from] == nil else {
                throw AtollError(.invalidArgument, "renameProperty: '\(className).\(from)' is still in the new schema")
            }
            guard let p = migration.newSchema[className]?[property: to] else {
                throw AtollError(.noSuchProperty, "renameProperty: the new schema's class '\(className)' has no property '\(to)'")
            }
            guard oldClass[property: to] == nil else {
                throw AtollError(.invalidArgument, "renameProperty: the old schema already has '\(className).\(to)'")
            }
            guard sameStorage(q, p) else {
                throw AtollError(.typeMismatch, "renameProperty: '\(className).\(from)' is \(q.typeName) but '\(to)' is \(p.typeName)")
            }
            guard let rebuilt = migration.rebuilt[className] else {
                throw AtollError(.internal, "renameProperty: class '\(className)' was not rebuilt")
            }
            let info = try classInfo(className)
            if p.isCollection {
                guard let aside = rebuilt.oldSideTables[from] else { return }
                let keyColumn = p.collection == .dictionary ? "key" : "position"
                let extra = p.type == .mixed ? ", type" : ""
                let owner = "(SELECT \(rebuilt.rowKeyExpression) FROM \(rebuilt.oldTable) AS o WHERE o.\(ClassInfo(oldClass).rowKey) = s.owner)"
                try conn.execute("DELETE FROM \(info.listTable(p))")
                try conn.execute("INSERT INTO \(info.listTable(p)) (owner, \(keyColumn), value\(extra)) SELECT \(owner), \(keyColumn), value\(extra) FROM \(aside) AS s WHERE value IS NOT NULL OR \(p.isOptional ? "1" : "0")")
                return
            }
            let value = q.isOptional && !p.isOptional ? "coalesce(o.\(quote(from)), \(p.type.sqlLiteral(p.implicitDefault)))" : "o.\(quote(from))"
            var sets = "\(quote(to)) = (SELECT \(value) FROM \(rebuilt.oldTable) AS o WHERE \(rebuilt.rowKeyExpression) = \(info.table).\(info.rowKey))"
            if p.type == .mixed {
                sets += ", \(mixedTypeColumn(p)) = (SELECT o.\(mixedTypeColumn(q)) FROM \(rebuilt.oldTable) AS o WHERE \(rebuilt.rowKeyExpression) = \(info.table).\(info.rowKey))"
            }
            try conn.execute("UPDATE \(info.table) SET \(sets) WHERE \(info.rowKey) IN (SELECT \(rebuilt.rowKeyExpression) FROM \(rebuilt.oldTable) AS o)")
        }
    }

    func migrationDeleteData(_ migration: Migration, _ className: String) throws {
        if migration.newSchema[className] != nil {
            try objects(className).deleteAll()
            return
        }
        try locked { conn in
            guard let info = classes[className] else {
                throw AtollError(.noSuchClass, "deleteData: no class named '\(className)'")
            }
            for p in info.collections { try conn.execute("DROP TABLE IF EXISTS \(info.listTable(p))") }
            try conn.execute("DROP TABLE IF EXISTS \(info.table)")
            var remaining = schema
            remaining.classes.removeAll { $0.name == className }
            adopt(remaining, version: schemaVersion)
            migration.oldObjects[className] = nil
        }
    }

    /// `deleteRealmIfMigrationNeeded`: every table dropped, the new schema created.
    func resetFile(_ conn: Connection, _ wanted: Schema) throws {
        let s = try conn.statement("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
        var tables = [String]()
        while try s.step() { tables.append(s.string(0)) }
        s.reset()
        conn.clearCache()
        for table in tables { try conn.execute("DROP TABLE IF EXISTS \(quote(table))") }
        try createMetadataTables(conn)
        for cls in wanted.classes {
            for step in createTable(cls) { try conn.execute(step) }
        }
        try saveSchema(conn, wanted, version: configuration.schemaVersion)
        adopt(wanted, version: configuration.schemaVersion)
    }
}
