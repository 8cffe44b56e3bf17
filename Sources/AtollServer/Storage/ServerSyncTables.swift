import AtollJSON
import AtollProtocol
import AtollStore

/// An object's row in `_atoll_sync_objects`: the clocks that decide whether it exists and which
/// of its writes count (docs/protocol.md, "How changes merge").
struct ObjectRecord: Equatable {
    /// The clock of the create that made the object as the store holds it: its properties without
    /// a row of their own in `_atoll_sync_fields` were written at this clock.
    var base: Clock
    /// The newest create.
    var newest: Clock
    /// The newest erase: writes older than it are gone.
    var erased: Clock?

    /// Whether a write at `clock` outlives the object's newest erase (one with the erase's own
    /// clock comes after it in the same transaction).
    func outlives(_ clock: Clock) -> Bool { erased.map { clock >= $0 } ?? true }
}

/// A row of `_atoll_sync_fields`: the newest write of a path — a property, a path into an
/// embedded object (`info.city`), a set element, a dictionary key, a collection's last clear —
/// its clock, whether it wrote or removed, and its value where the store cannot hold it (paths
/// into embedded objects, and every write of an erased object, which comes back if the object is
/// created again).
struct FieldRow {
    var path: String
    var clock: Clock
    var present: Bool
    var value: Value?
}

/// Every statement on the server's object metadata tables: object clocks, field clocks, list
/// identities and counter adds, in the app's store beside the data they describe, written in
/// the store's transactions.
struct ServerSyncTables {
    let store: Store

    static let statements = [
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_history (version INTEGER PRIMARY KEY, file INTEGER NOT NULL,
            client_version INTEGER NOT NULL, clock TEXT NOT NULL, user TEXT NOT NULL, at INTEGER NOT NULL,
            changeset TEXT NOT NULL) STRICT
        """,
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_files (ident INTEGER PRIMARY KEY, salt INTEGER NOT NULL,
            user TEXT NOT NULL, upload_cursor INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL) STRICT
        """,
        // The user whose device first used each clock node: a node is one user's (docs/server.md).
        "CREATE TABLE IF NOT EXISTS _atoll_sync_nodes (node INTEGER PRIMARY KEY, user TEXT NOT NULL) STRICT",
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_objects (class TEXT NOT NULL, pk TEXT NOT NULL, created TEXT NOT NULL,
            erased TEXT, newest TEXT NOT NULL, PRIMARY KEY (class, pk)) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_fields (class TEXT NOT NULL, pk TEXT NOT NULL, path TEXT NOT NULL,
            clock TEXT NOT NULL, present INTEGER NOT NULL, value TEXT, PRIMARY KEY (class, pk, path)) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_lists (class TEXT NOT NULL, pk TEXT NOT NULL, path TEXT NOT NULL,
            elements TEXT NOT NULL, PRIMARY KEY (class, pk, path)) STRICT, WITHOUT ROWID
        """,
        // Counter adds newer than the field's last set: a set that arrives later with an older
        // clock than some of them keeps them on top of its value.
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_adds (class TEXT NOT NULL, pk TEXT NOT NULL, path TEXT NOT NULL,
            clock TEXT NOT NULL, delta INTEGER NOT NULL) STRICT
        """,
        "CREATE INDEX IF NOT EXISTS _atoll_sync_adds_field ON _atoll_sync_adds (class, pk, path)",
        // Links to an object (`class`, `pk`) that does not exist, written after its last erase:
        // they show when it is created again. `holder` is the linking object's primary key as
        // JSON; `element` names the list element ('' for a to-one link). Rows of the object
        // linked to, like the tables above (a shared storage copies them with it).
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_dangling (class TEXT NOT NULL, pk TEXT NOT NULL, holder_class TEXT NOT NULL,
            holder TEXT NOT NULL, path TEXT NOT NULL, element TEXT NOT NULL, clock TEXT NOT NULL,
            PRIMARY KEY (class, pk, holder_class, holder, path, element)) STRICT, WITHOUT ROWID
        """,
    ]

    /// Creates the tables (and the `value` column of field rows, which files of earlier builds lack).
    static func create(_ store: Store) throws {
        try store.write {
            try store.withMetadata { sql in
                for s in statements { try sql.execute(s) }
                let columns = try sql.rows("SELECT name FROM pragma_table_info('_atoll_sync_fields')").compactMap { $0.first?.stringValue }
                if !columns.contains("value") { try sql.execute("ALTER TABLE _atoll_sync_fields ADD COLUMN value TEXT") }
            }
        }
    }

    // MARK: - Objects

    func record(_ cls: String, _ pk: String) throws -> ObjectRecord? {
        try store.withMetadata { sql in
            let rows = try sql.rows("SELECT created, erased, newest FROM _atoll_sync_objects WHERE class = ? AND pk = ?", [.string(cls), .string(pk)])
            guard let row = rows.first, let base = row[0].stringValue.flatMap({ Clock(text: $0) }) else { return nil }
            return ObjectRecord(base: base, newest: row[2].stringValue.flatMap { Clock(text: $0) } ?? base,
                                erased: row[1].stringValue.flatMap { Clock(text: $0) })
        }
    }

    func save(_ r: ObjectRecord, _ cls: String, _ pk: String) throws {
        try store.withMetadata { sql in
            try sql.execute("INSERT OR REPLACE INTO _atoll_sync_objects VALUES (?, ?, ?, ?, ?)",
                            [.string(cls), .string(pk), .string(r.base.description), r.erased.map { .string($0.description) } ?? .null,
                             .string(r.newest.description)])
        }
    }

    /// Records new objects of one class created at `clock` (keys as text, sorted: a B-tree takes
    /// sorted keys several times faster).
    func insertCreated(_ cls: String, _ keys: [String], at clock: Clock) throws {
        let c = Value.string(clock.description)
        try store.withMetadata { sql in
            try sql.insertMany("INSERT OR REPLACE INTO _atoll_sync_objects", keys.map { [.string(cls), .string($0), c, .null, c] })
        }
    }

    /// The keys among `keys` (as text) that have a record, with their newest erase if any.
    func recorded(_ cls: String, among keys: [ExactText]) throws -> [ExactText: Clock?] {
        var out = [ExactText: Clock?]()
        try store.withMetadata { sql in
            for start in stride(from: 0, to: keys.count, by: SQLPlaces.most) {
                let part = keys[start..<min(start + SQLPlaces.most, keys.count)]
                let rows = try sql.rows("SELECT pk, erased FROM _atoll_sync_objects WHERE class = ? AND pk IN (\(SQLPlaces.list(for: part.count)))",
                                        [.string(cls)] + part.map { .string($0.text) })
                for row in rows {
                    guard case .string(let pk) = row[0] else { continue }
                    out[ExactText(pk)] = .some(row[1].stringValue.flatMap { Clock(text: $0) })
                }
            }
        }
        return out
    }

    /// The clocks and list identities of every object of a class, or of some keys of it (for
    /// the upserts that send objects whole).
    func metadata(of className: String, key: String? = nil, keys: [Value]? = nil) throws -> ObjectMetadata {
        var meta = ObjectMetadata()
        try store.withMetadata { sql in
            var filter = ""
            var args: [Value] = [.string(className)]
            if let key { filter = " AND pk = ?"; args.append(.string(key)) }
            if let keys, keys.count <= 500 {
                filter = " AND pk IN (\(keys.map { _ in "?" }.joined(separator: ",")))"
                args += keys.map { .string(keyText($0)) }
            }
            for row in try sql.rows("SELECT pk, created, erased FROM _atoll_sync_objects WHERE class = ?" + filter, args) {
                guard case .string(let text) = row[0] else { continue }
                let pk = ExactText(text)
                if case .string(let c) = row[1], let clock = Clock(text: c) { meta.created[pk] = clock }
                if case .string(let e) = row[2], let clock = Clock(text: e) { meta.erased[pk] = clock }
            }
            for row in try sql.rows("SELECT pk, path, clock FROM _atoll_sync_fields WHERE class = ?" + filter, args) {
                if case .string(let pk) = row[0], case .string(let path) = row[1], case .string(let c) = row[2], let clock = Clock(text: c) {
                    meta.fields[ExactText(pk), default: [:]][ExactText(path)] = clock
                }
            }
            for row in try sql.rows("SELECT pk, path, elements FROM _atoll_sync_lists WHERE class = ?" + filter, args) {
                if case .string(let pk) = row[0], case .string(let path) = row[1], case .string(let text) = row[2],
                   let seq = try? ListSequence(text: text) {
                    meta.lists[ExactText(pk), default: [:]][path] = seq
                }
            }
        }
        return meta
    }

    /// The newest clock an object has: its create, erase and newest write, and every field's.
    func newestClock(_ cls: String, _ pk: String) throws -> Clock {
        var newest = Clock.zero
        try store.withMetadata { sql in
            for row in try sql.rows("SELECT created, erased, newest FROM _atoll_sync_objects WHERE class = ? AND pk = ?", [.string(cls), .string(pk)]) {
                for v in row { if let c = v.stringValue.flatMap({ Clock(text: $0) }), c > newest { newest = c } }
            }
            for row in try sql.rows("SELECT clock FROM _atoll_sync_fields WHERE class = ? AND pk = ?", [.string(cls), .string(pk)]) {
                if let c = row.first?.stringValue.flatMap({ Clock(text: $0) }), c > newest { newest = c }
            }
        }
        return newest
    }

    // MARK: - Fields

    func field(_ cls: String, _ pk: String, _ path: String) throws -> FieldRow? {
        try store.withMetadata { sql in
            try sql.rows("SELECT path, clock, present, value FROM _atoll_sync_fields WHERE class = ? AND pk = ? AND path = ?",
                         [.string(cls), .string(pk), .string(path)]).first.flatMap(Self.fieldRow)
        }
    }

    /// The object's field rows: all, or those of a property (its own, and those of paths into it,
    /// its set elements, dictionary keys and clear).
    func fields(_ cls: String, _ pk: String, of property: String? = nil) throws -> [FieldRow] {
        try store.withMetadata { sql in
            guard let property else {
                return try sql.rows("SELECT path, clock, present, value FROM _atoll_sync_fields WHERE class = ? AND pk = ?",
                                    [.string(cls), .string(pk)]).compactMap(Self.fieldRow)
            }
            // The property itself, then every path that begins with it and a separator (".",
            // U+0001, U+0002, U+0003): all sort between the name and the name followed by "/".
            return try sql.rows("SELECT path, clock, present, value FROM _atoll_sync_fields WHERE class = ? AND pk = ? AND path >= ? AND path < ?",
                                [.string(cls), .string(pk), .string(property), .string(property + "/")]).compactMap(Self.fieldRow)
                .filter { $0.path == property || Self.belongs($0.path, to: property) }
        }
    }

    /// Whether a path key names something inside `property`: a path into it, a set element, a
    /// dictionary key or its clear.
    static func belongs(_ path: String, to property: String) -> Bool {
        guard path.count > property.count, path.hasPrefix(property) else { return false }
        let next = path[path.index(path.startIndex, offsetBy: property.count)]
        return next == "." || next == "\u{1}" || next == "\u{2}" || next == "\u{3}"
    }

    private static func fieldRow(_ row: [Value]) -> FieldRow? {
        guard case .string(let path) = row[0], let text = row[1].stringValue, let clock = Clock(text: text) else { return nil }
        let value = row[3].stringValue.flatMap { try? EJSON.parse($0) }
        return FieldRow(path: path, clock: clock, present: row[2] != .int(0), value: value)
    }

    func save(_ row: FieldRow, _ cls: String, _ pk: String) throws {
        try store.withMetadata { sql in
            try sql.execute("INSERT OR REPLACE INTO _atoll_sync_fields VALUES (?, ?, ?, ?, ?, ?)",
                            [.string(cls), .string(pk), .string(row.path), .string(row.clock.description), .int(row.present ? 1 : 0),
                             row.value.map { .string(Wire.encode($0)) } ?? .null])
        }
    }

    func deleteField(_ cls: String, _ pk: String, _ path: String) throws {
        try store.withMetadata { sql in
            try sql.execute("DELETE FROM _atoll_sync_fields WHERE class = ? AND pk = ? AND path = ?", [.string(cls), .string(pk), .string(path)])
        }
    }

    // MARK: - Lists

    func list(_ cls: String, _ pk: String, _ property: String) throws -> ListSequence? {
        let text = try store.withMetadata { sql in
            try sql.rows("SELECT elements FROM _atoll_sync_lists WHERE class = ? AND pk = ? AND path = ?",
                         [.string(cls), .string(pk), .string(property)]).first?[0].stringValue
        }
        return try text.map(ListSequence.init(text:))
    }

    func save(_ seq: ListSequence, _ cls: String, _ pk: String, _ property: String) throws {
        try store.withMetadata { sql in
            try sql.execute("INSERT OR REPLACE INTO _atoll_sync_lists VALUES (?, ?, ?, ?)",
                            [.string(cls), .string(pk), .string(property), .string(seq.text)])
        }
    }

    /// Records the lists of new objects: rows of class, key text, property and sequence.
    func insertLists(_ rows: [(cls: String, pk: String, property: String, seq: ListSequence)]) throws {
        guard !rows.isEmpty else { return }
        try store.withMetadata { sql in
            try sql.executeMany("INSERT OR REPLACE INTO _atoll_sync_lists VALUES (?, ?, ?, ?)",
                                rows.map { [.string($0.cls), .string($0.pk), .string($0.property), .string($0.seq.text)] })
        }
    }

    // MARK: - Links waiting for their object

    /// A link that waits for its target to exist.
    struct Dangling {
        var holder: ObjectID
        var path: String
        var element: ElementID?
        var clock: Clock
    }

    func addDangling(to target: ObjectID, _ d: Dangling) throws {
        try store.withMetadata { sql in
            try sql.execute("INSERT OR REPLACE INTO _atoll_sync_dangling VALUES (?, ?, ?, ?, ?, ?, ?)",
                            [.string(target.className), .string(keyText(target.primaryKey)), .string(d.holder.className),
                             .string(Wire.encode(d.holder.primaryKey)), .string(d.path), .string(d.element.map { Wire.encode($0.value) } ?? ""),
                             .string(d.clock.description)])
        }
    }

    /// The links waiting for `target`, taken out of the table.
    func takeDangling(to target: ObjectID) throws -> [Dangling] {
        try store.withMetadata { sql in
            let args: [Value] = [.string(target.className), .string(keyText(target.primaryKey))]
            let rows = try sql.rows("SELECT holder_class, holder, path, element, clock FROM _atoll_sync_dangling WHERE class = ? AND pk = ?", args)
            guard !rows.isEmpty else { return [] }
            try sql.execute("DELETE FROM _atoll_sync_dangling WHERE class = ? AND pk = ?", args)
            return rows.compactMap { row in
                guard case .string(let cls) = row[0], case .string(let holder) = row[1], let key = try? EJSON.parse(holder),
                      case .string(let path) = row[2], case .string(let element) = row[3], let clock = row[4].stringValue.flatMap({ Clock(text: $0) })
                else { return nil }
                return Dangling(holder: ObjectID(cls, key), path: path, element: element.isEmpty ? nil : ElementID(try? EJSON.parse(element)), clock: clock)
            }
        }
    }

    /// Which of `keys` (as text) some link waits for.
    func awaited(_ cls: String, among keys: [ExactText]) throws -> Set<ExactText> {
        var out = Set<ExactText>()
        try store.withMetadata { sql in
            guard try sql.rows("SELECT 1 FROM _atoll_sync_dangling WHERE class = ? LIMIT 1", [.string(cls)]).first != nil else { return }
            for start in stride(from: 0, to: keys.count, by: SQLPlaces.most) {
                let part = keys[start..<min(start + SQLPlaces.most, keys.count)]
                for row in try sql.rows("SELECT pk FROM _atoll_sync_dangling WHERE class = ? AND pk IN (\(SQLPlaces.list(for: part.count)))",
                                        [.string(cls)] + part.map { .string($0.text) }) {
                    if case .string(let pk) = row[0] { out.insert(ExactText(pk)) }
                }
            }
        }
        return out
    }

    // MARK: - Counter adds

    func adds(_ cls: String, _ pk: String, _ property: String) throws -> [(clock: Clock, delta: Int64)] {
        try store.withMetadata { sql in
            try sql.rows("SELECT clock, delta FROM _atoll_sync_adds WHERE class = ? AND pk = ? AND path = ?",
                         [.string(cls), .string(pk), .string(property)])
        }.compactMap { row in
            guard let text = row[0].stringValue, let c = Clock(text: text), case .int(let d) = row[1] else { return nil }
            return (c, d)
        }
    }

    func insertAdd(_ cls: String, _ pk: String, _ property: String, _ clock: Clock, _ delta: Int64) throws {
        try store.withMetadata { sql in
            try sql.execute("INSERT INTO _atoll_sync_adds VALUES (?, ?, ?, ?, ?)",
                            [.string(cls), .string(pk), .string(property), .string(clock.description), .int(delta)])
        }
    }

    /// Forgets a property's adds at or before `clock` (a set at that clock absorbed them).
    func deleteAdds(_ cls: String, _ pk: String, _ property: String, through clock: Clock) throws {
        for add in try adds(cls, pk, property) where add.clock <= clock {
            try store.withMetadata { sql in
                try sql.execute("DELETE FROM _atoll_sync_adds WHERE class = ? AND pk = ? AND path = ? AND clock = ?",
                                [.string(cls), .string(pk), .string(property), .string(add.clock.description)])
            }
        }
    }
}
