import Foundation

// Reading, checking and installing the schema at open.
extension Store {
    /// Loads the stored schema, compares it with the configuration's, and installs additions.
    func openSchema() throws {
        guard let conn = connection else { return }
        let stored = try loadStoredSchema(conn)
        guard let wanted = configuration.schema else {
            if stored == nil, !configuration.readOnly {
                try inTransaction(conn) { try createMetadataTables(conn) }
            }
            adopt(stored?.schema ?? Schema(), version: stored?.version ?? 0)
            return
        }
        try wanted.validate()
        if let stored, configuration.schemaVersion < stored.version {
            throw AtollError(.schemaMismatch, "schema version \(configuration.schemaVersion) is lower than the file's version \(stored.version); downgrades are not supported")
        }
        var plan: SchemaPlan
        do {
            plan = try self.plan(from: stored, to: wanted)
        } catch let e as AtollError where e.code == .schemaMismatch && !configuration.readOnly {
            if configuration.deleteRealmIfMigrationNeeded {
                try inTransaction(conn) { try resetFile(conn, wanted) }
                return
            }
            guard let stored, configuration.schemaVersion > stored.version else { throw e }
            try migrate(conn, from: stored, to: wanted)
            return
        }
        // A higher version with a migration callback runs it even when the changes are additive.
        if let stored, configuration.schemaVersion > stored.version, configuration.migration != nil, !configuration.readOnly {
            try migrate(conn, from: stored, to: wanted)
            return
        }
        if plan.isEmpty {
            adopt(plan.result, version: stored?.version ?? configuration.schemaVersion)
            return
        }
        guard !configuration.readOnly else {
            throw AtollError(.schemaMismatch, "the realm is read-only and its schema lacks: " + plan.summary)
        }
        try inTransaction(conn) {
            // Another process may have changed the schema since we looked: look again under the lock.
            let current = try loadStoredSchema(conn)
            if current != stored { plan = try self.plan(from: current, to: wanted) }
            if current == nil { try createMetadataTables(conn) }
            for step in plan.steps { try conn.execute(step) }
            try saveSchema(conn, plan.result, version: configuration.schemaVersion)
        }
        conn.clearCache()
        adopt(plan.result, version: configuration.schemaVersion)
    }

    func adopt(_ schema: Schema, version: UInt64) {
        self.schema = schema
        schemaVersion = version
        incomingLinks = [:]
        classes = Dictionary(uniqueKeysWithValues: schema.classes.map { ($0.name, ClassInfo($0)) })
    }

    func inTransaction(_ conn: Connection, _ body: () throws -> Void) throws {
        try conn.execute("BEGIN IMMEDIATE")
        do {
            try body()
            try conn.execute("COMMIT")
        } catch {
            try? conn.execute("ROLLBACK")
            throw error
        }
    }

    func createMetadataTables(_ conn: Connection) throws {
        try conn.execute("""
            CREATE TABLE IF NOT EXISTS _atoll_meta (key TEXT PRIMARY KEY, value ANY) STRICT;
            CREATE TABLE IF NOT EXISTS _atoll_classes (name TEXT PRIMARY KEY, position INTEGER NOT NULL,
                primary_key TEXT, embedded INTEGER NOT NULL) STRICT;
            CREATE TABLE IF NOT EXISTS _atoll_properties (class TEXT NOT NULL, name TEXT NOT NULL,
                position INTEGER NOT NULL, type TEXT NOT NULL, object_type TEXT, collection TEXT NOT NULL,
                optional INTEGER NOT NULL, indexed INTEGER NOT NULL, default_value BLOB,
                PRIMARY KEY (class, name)) STRICT;
            CREATE TABLE IF NOT EXISTS _atoll_versions (version INTEGER PRIMARY KEY,
                committed_at INTEGER NOT NULL, instruction_count INTEGER NOT NULL) STRICT;
            CREATE TABLE IF NOT EXISTS _atoll_changes (version INTEGER NOT NULL, chunk INTEGER NOT NULL,
                instructions BLOB NOT NULL, PRIMARY KEY (version, chunk)) STRICT;
            INSERT OR IGNORE INTO _atoll_meta VALUES ('format', 1), ('schemaVersion', 0);
            """)
    }

    struct StoredSchema: Equatable {
        var schema: Schema
        var version: UInt64
    }

    func loadStoredSchema(_ conn: Connection) throws -> StoredSchema? {
        let exists = try conn.statement("SELECT count(*) FROM sqlite_schema WHERE name = '_atoll_meta'")
        _ = try exists.step()
        let found = exists.int64(0) > 0
        exists.reset()
        guard found else { return nil }
        let meta = try conn.statement("SELECT value FROM _atoll_meta WHERE key = 'schemaVersion'")
        let version = try meta.step() ? UInt64(max(0, meta.int64(0))) : 0
        meta.reset()
        var classes = [ObjectSchema]()
        let cs = try conn.statement("SELECT name, primary_key, embedded FROM _atoll_classes ORDER BY position")
        while try cs.step() {
            classes.append(ObjectSchema(name: cs.string(0), primaryKey: cs.isNull(1) ? nil : cs.string(1),
                                        isEmbedded: cs.int64(2) != 0, properties: []))
        }
        cs.reset()
        let ps = try conn.statement("""
            SELECT name, type, object_type, collection, optional, indexed, default_value
            FROM _atoll_properties WHERE class = ? ORDER BY position
            """)
        for i in classes.indices {
            ps.reset()
            ps.bind(1, classes[i].name)
            while try ps.step() {
                guard let type = PropertyType(rawValue: ps.string(1)),
                      let collection = CollectionKind(rawValue: ps.string(3)) else {
                    throw AtollError(.file, "the stored schema of class '\(classes[i].name)' is unreadable")
                }
                var defaultValue: Value?
                if !ps.isNull(6) {
                    var reader = BinaryReader(ps.blob(6))
                    defaultValue = try reader.value()
                }
                var objectType = ps.isNull(2) ? nil : ps.string(2)
                var origin: String?
                if type == .linkingObjects, let o = objectType, let dot = o.firstIndex(of: ".") {
                    objectType = String(o[..<dot])
                    origin = String(o[o.index(after: dot)...])
                }
                classes[i].properties.append(Property(
                    name: ps.string(0), type: type, objectType: objectType,
                    collection: collection, isOptional: ps.int64(4) != 0, isIndexed: ps.int64(5) != 0,
                    defaultValue: defaultValue, linkOriginProperty: origin))
            }
        }
        ps.reset()
        // What the code relies on (link targets, backlink origins, primary keys) holds for
        // schemas it wrote; a file damaged or written by something else is refused here.
        let schema = Schema(classes)
        do { try schema.validate() } catch let e as AtollError {
            throw AtollError(.file, "the schema stored in the file is invalid: \(e.message)")
        }
        return StoredSchema(schema: schema, version: version)
    }

    func saveSchema(_ conn: Connection, _ schema: Schema, version: UInt64) throws {
        try conn.execute("DELETE FROM _atoll_classes; DELETE FROM _atoll_properties;")
        let cs = try conn.prepare("INSERT INTO _atoll_classes VALUES (?, ?, ?, ?)")
        let ps = try conn.prepare("INSERT INTO _atoll_properties VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
        for (i, cls) in schema.classes.enumerated() {
            cs.reset()
            cs.bind(1, cls.name); cs.bind(2, Int64(i))
            if let pk = cls.primaryKey { cs.bind(3, pk) } else { cs.bindNull(3) }
            cs.bind(4, Int64(cls.isEmbedded ? 1 : 0))
            try cs.run()
            for (j, p) in cls.properties.enumerated() {
                ps.reset()
                ps.bind(1, cls.name); ps.bind(2, p.name); ps.bind(3, Int64(j)); ps.bind(4, p.type.rawValue)
                // A linkingObjects property keeps its origin as "Class.property" (class names
                // have no '.').
                if let o = p.objectType { ps.bind(5, p.isComputed ? "\(o).\(p.linkOriginProperty ?? "")" : o) } else { ps.bindNull(5) }
                ps.bind(6, p.collection.rawValue)
                ps.bind(7, Int64(p.isOptional ? 1 : 0)); ps.bind(8, Int64(p.isIndexed ? 1 : 0))
                if let d = p.defaultValue {
                    var w = BinaryWriter()
                    w.value(d)
                    ps.bind(9, w.bytes)
                } else {
                    ps.bindNull(9)
                }
                try ps.run()
            }
        }
        let meta = try conn.prepare("INSERT OR REPLACE INTO _atoll_meta VALUES ('schemaVersion', ?)")
        meta.bind(1, Int64(clamping: version))
        try meta.run()
    }

    // MARK: - Planning schema changes

    struct SchemaPlan {
        var steps: [String] = []
        var descriptions: [String] = []
        var versionChanged = false
        var result: Schema
        var isEmpty: Bool { steps.isEmpty && descriptions.isEmpty && !versionChanged }
        var summary: String { descriptions.joined(separator: "; ") }
    }

    /// The DDL that turns the stored schema into the wanted one, when only additions are
    /// needed; otherwise a `.schemaMismatch` error naming every difference.
    func plan(from stored: StoredSchema?, to wanted: Schema) throws -> SchemaPlan {
        var plan = SchemaPlan(result: wanted)
        let old = stored?.schema ?? Schema()
        if let stored {
            if configuration.schemaVersion < stored.version {
                throw AtollError(.schemaMismatch, "schema version \(configuration.schemaVersion) is lower than the file's version \(stored.version); downgrades are not supported")
            }
            plan.versionChanged = configuration.schemaVersion != stored.version
        } else {
            plan.versionChanged = true
        }
        var problems = [String]()
        for cls in wanted.classes {
            guard let before = old[cls.name] else {
                plan.steps += createTable(cls)
                plan.descriptions.append("class '\(cls.name)' added")
                continue
            }
            let changes = classChanges(before, cls)
            plan.steps += changes.steps
            plan.descriptions += changes.descriptions
            problems += changes.problems
        }
        if !problems.isEmpty {
            throw AtollError(.schemaMismatch, "the schema needs a migration: " + problems.joined(separator: "; "))
        }
        // Classes the file has and the configuration leaves out stay, and stay usable.
        for cls in old.classes where wanted[cls.name] == nil { plan.result.classes.append(cls) }
        return plan
    }

    /// How a class that the file has differs from the wanted one: the DDL of additions (new
    /// properties, index changes), their descriptions, and the changes that need a migration.
    func classChanges(_ before: ObjectSchema, _ cls: ObjectSchema) -> (steps: [String], descriptions: [String], problems: [String]) {
        var plan = (steps: [String](), descriptions: [String](), problems: [String]())
        if before.primaryKey != cls.primaryKey {
            plan.problems.append("primary key of '\(cls.name)' changed from '\(before.primaryKey ?? "none")' to '\(cls.primaryKey ?? "none")'")
        }
        if before.isEmbedded != cls.isEmbedded {
            plan.problems.append("class '\(cls.name)' changed from \(before.isEmbedded ? "embedded" : "top-level") to \(cls.isEmbedded ? "embedded" : "top-level")")
        }
        for p in cls.properties {
            if p.isComputed, before[property: p.name].map({ $0 != p }) ?? true {
                // Computed from links, never stored: free to add or change.
                if let q = before[property: p.name], !q.isComputed {
                    plan.problems.append("property '\(cls.name).\(p.name)' changed type from \(q.typeName) to \(p.typeName)")
                } else {
                    plan.descriptions.append("property '\(cls.name).\(p.name)' (\(p.typeName)) added or changed")
                }
                continue
            }
            guard let q = before[property: p.name] else {
                plan.steps += addProperty(p, to: cls)
                plan.descriptions.append("property '\(cls.name).\(p.name)' added")
                continue
            }
            if q.type != p.type || q.objectType != p.objectType || q.collection != p.collection || q.isOptional != p.isOptional {
                plan.problems.append("property '\(cls.name).\(p.name)' changed type from \(q.typeName) to \(p.typeName)")
            } else if q.isIndexed != p.isIndexed {
                let info = ClassInfo(cls)
                plan.steps.append(p.isIndexed
                    ? "CREATE INDEX IF NOT EXISTS \(info.indexName(p)) ON \(info.table) (\(quote(p.name)))"
                    : "DROP INDEX IF EXISTS \(info.indexName(p))")
                plan.descriptions.append("index on '\(cls.name).\(p.name)' \(p.isIndexed ? "added" : "removed")")
            } else if q.defaultValue != p.defaultValue {
                plan.descriptions.append("default of '\(cls.name).\(p.name)' changed")
            }
        }
        for q in before.properties where cls[property: q.name] == nil {
            if q.isComputed {
                plan.descriptions.append("property '\(cls.name).\(q.name)' (\(q.typeName)) removed")
            } else {
                plan.problems.append("property '\(cls.name).\(q.name)' was removed")
            }
        }
        return plan
    }

    func columnDefinition(_ p: Property, _ info: ClassInfo) -> String {
        if p.type == .object { return "\(quote(p.name)) INTEGER" }
        if p.type == .mixed {
            // The value and its type tag (see Store+Mixed.swift); a scalar default gives both.
            guard let d = p.defaultValue, let type = d.scalarType else {
                return "\(quote(p.name)) ANY, \(mixedTypeColumn(p)) TEXT"
            }
            return "\(quote(p.name)) ANY DEFAULT \(type.sqlLiteral(d)), \(mixedTypeColumn(p)) TEXT DEFAULT '\(type.rawValue)'"
        }
        if info.primaryKeyIsRowKey, p.name == info.primaryKey?.name { return "\(quote(p.name)) INTEGER PRIMARY KEY" }
        if p.name == info.primaryKey?.name { return "\(quote(p.name)) \(p.type.sqlType) NOT NULL UNIQUE" }
        if p.isOptional {
            // New optional properties start at their default in existing objects too.
            let initial = p.defaultValue.map { " DEFAULT \(p.type.sqlLiteral($0))" } ?? ""
            return "\(quote(p.name)) \(p.type.sqlType)\(initial)"
        }
        return "\(quote(p.name)) \(p.type.sqlType) NOT NULL DEFAULT \(p.type.sqlLiteral(p.implicitDefault))"
    }

    func createTable(_ cls: ObjectSchema) -> [String] {
        let info = ClassInfo(cls)
        var steps = [tableDefinition(info, uniquePrimaryKey: true)]
        for p in cls.properties { steps += sideStructures(p, info) }
        return steps
    }

    /// `CREATE TABLE` of a class's own table. Without `uniquePrimaryKey`, a primary key that is
    /// not the row key is a plain column (a migration checks it unique once its callback ran).
    func tableDefinition(_ info: ClassInfo, uniquePrimaryKey: Bool) -> String {
        var columns = info.primaryKeyIsRowKey ? [] : ["\"_atoll_key\" INTEGER PRIMARY KEY"]
        for p in info.columns {
            if !uniquePrimaryKey, !info.primaryKeyIsRowKey, p.name == info.primaryKey?.name {
                columns.append("\(quote(p.name)) \(p.type.sqlType) NOT NULL DEFAULT \(p.type.sqlLiteral(p.type.zeroValue))")
            } else {
                columns.append(columnDefinition(p, info))
            }
        }
        return "CREATE TABLE \(info.table) (\(columns.joined(separator: ", "))) STRICT"
    }

    private func addProperty(_ p: Property, to cls: ObjectSchema) -> [String] {
        let info = ClassInfo(cls)
        if p.isComputed { return [] }
        var steps = [String]()
        if !p.isCollection {
            // A mixed property is two columns: one ADD COLUMN each.
            let definitions = p.type == .mixed ? columnDefinition(p, info).components(separatedBy: ", ") : [columnDefinition(p, info)]
            for d in definitions { steps.append("ALTER TABLE \(info.table) ADD COLUMN \(d)") }
        }
        return steps + sideStructures(p, info)
    }

    /// Indexes, and the side table of a list.
    func sideStructures(_ p: Property, _ info: ClassInfo) -> [String] {
        if p.isComputed { return [] }
        if p.isCollection {
            let table = info.listTable(p)
            let valueType = p.type.sqlType + (p.isOptional ? "" : " NOT NULL") + (p.type == .mixed ? ", type TEXT" : "")
            let key = p.collection == .dictionary ? "key TEXT NOT NULL" : "position INTEGER NOT NULL"
            let keyName = p.collection == .dictionary ? "key" : "position"
            var steps = ["CREATE TABLE \(table) (owner INTEGER NOT NULL, \(key), value \(valueType), PRIMARY KEY (owner, \(keyName))) STRICT, WITHOUT ROWID"]
            if p.type == .object || p.isIndexed {
                steps.append("CREATE INDEX \(quote("\(info.name).\(p.name).value")) ON \(table) (value)")
            }
            return steps
        }
        if p.type == .object || (p.isIndexed && p.name != info.primaryKey?.name) {
            return ["CREATE INDEX \(info.indexName(p)) ON \(info.table) (\(quote(p.name)))"]
        }
        return []
    }
}
