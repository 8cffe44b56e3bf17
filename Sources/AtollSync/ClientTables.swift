import AtollJSON
import AtollProtocol
import AtollStore

/// The client's sync metadata, in the realm file beside the data (`_atoll_sync_` tables),
/// written in the same transactions as the data they describe.
enum ClientTables {
    static let statements = [
        "CREATE TABLE IF NOT EXISTS _atoll_sync_state (key TEXT PRIMARY KEY, value ANY) STRICT",
        // Local changesets the server has not acknowledged, in sync form (clock, identities).
        "CREATE TABLE IF NOT EXISTS _atoll_sync_pending (version INTEGER PRIMARY KEY, changeset TEXT NOT NULL, bytes INTEGER NOT NULL) STRICT",
        // Change-log versions written by the sync client itself (downloads): never uploaded.
        "CREATE TABLE IF NOT EXISTS _atoll_sync_applied (version INTEGER PRIMARY KEY) STRICT",
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_lists (class TEXT NOT NULL, pk TEXT NOT NULL, path TEXT NOT NULL,
            elements TEXT NOT NULL, PRIMARY KEY (class, pk, path)) STRICT, WITHOUT ROWID
        """,
        // Objects whose links hideLinks hid in lists of links: when one comes back, showLinks
        // looks for them (and only then, not at every object a download brings).
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_hidden_targets (class TEXT NOT NULL, pk TEXT NOT NULL,
            PRIMARY KEY (class, pk)) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_subscriptions (version INTEGER PRIMARY KEY, state TEXT NOT NULL,
            error TEXT, queries TEXT NOT NULL) STRICT
        """,
    ]

    /// Every table above, by name (a copy that leaves sync drops them).
    static let tables = ["_atoll_sync_state", "_atoll_sync_pending", "_atoll_sync_applied", "_atoll_sync_lists",
                         "_atoll_sync_hidden_targets", "_atoll_sync_subscriptions"]

    static func create(_ sql: MetadataSQL) throws {
        for s in statements { try sql.execute(s) }
    }

    static func get(_ sql: MetadataSQL, _ key: String) throws -> Value? {
        try sql.rows("SELECT value FROM _atoll_sync_state WHERE key = ?", [.string(key)]).first?.first
    }

    static func int(_ sql: MetadataSQL, _ key: String) throws -> Int64 {
        if case .int(let i)? = try get(sql, key) { return i }
        return 0
    }

    static func set(_ sql: MetadataSQL, _ key: String, _ value: Value) throws {
        try sql.execute("INSERT OR REPLACE INTO _atoll_sync_state VALUES (?, ?)", [.string(key), value])
    }

    static func list(_ sql: MetadataSQL, _ cls: String, _ pk: String, _ path: String) throws -> ListSequence? {
        guard case .string(let text)? = try sql.rows("SELECT elements FROM _atoll_sync_lists WHERE class = ? AND pk = ? AND path = ?",
                                                      [.string(cls), .string(pk), .string(path)]).first?.first else { return nil }
        return try ListSequence(text: text)
    }

    static func saveList(_ sql: MetadataSQL, _ cls: String, _ pk: String, _ path: String, _ seq: ListSequence) throws {
        try sql.execute("INSERT OR REPLACE INTO _atoll_sync_lists VALUES (?, ?, ?, ?)", [.string(cls), .string(pk), .string(path), .string(seq.text)])
    }

    /// `saveList` for many lists of one class at once: (primary key text, path, sequence).
    static func saveLists(_ sql: MetadataSQL, _ cls: String, _ lists: [(pk: String, path: String, seq: ListSequence)]) throws {
        guard !lists.isEmpty else { return }
        try sql.executeMany("INSERT OR REPLACE INTO _atoll_sync_lists VALUES (?, ?, ?, ?)",
                            lists.map { [.string(cls), .string($0.pk), .string($0.path), .string($0.seq.text)] })
    }

    /// The primary key texts of the objects of `cls` that have a sequence stored for `path`.
    static func listHolders(_ sql: MetadataSQL, _ cls: String, _ path: String) throws -> [String] {
        try sql.rows("SELECT pk FROM _atoll_sync_lists WHERE class = ? AND path = ?", [.string(cls), .string(path)]).compactMap { $0[0].stringValue }
    }

    /// Hides, in the lists of links that hold them, the elements that link to `target` (which is
    /// being deleted here: the store drops them from the lists), so that list indexes stay the
    /// store's.
    static func hideLinks(_ sql: MetadataSQL, _ schema: Schema, to target: ObjectID) throws {
        let hid = try changeLinkLists(sql, schema, to: target.className) { _, _, _, seq in
            for e in seq.entries where e.shown && e.value == target.primaryKey { _ = seq.hide(e.id) }
        }
        if hid {
            try sql.execute("INSERT OR IGNORE INTO _atoll_sync_hidden_targets VALUES (?, ?)",
                            [.string(target.className), .string(keyText(target.primaryKey))])
        }
    }

    /// Gives each stored sequence of a list of links to objects of `className` to `change`, with
    /// its holder's class, key text and property, and saves those it changed; true when any.
    private static func changeLinkLists(_ sql: MetadataSQL, _ schema: Schema, to className: String,
                                        _ change: (String, String, String, inout ListSequence) -> Void) throws -> Bool {
        var changed = false
        for (holder, property) in schema.linkLists(to: className) {
            for row in try sql.rows("SELECT pk, elements FROM _atoll_sync_lists WHERE class = ? AND path = ?", [.string(holder), .string(property)]) {
                guard case .string(let pk) = row[0], case .string(let text) = row[1], var seq = try? ListSequence(text: text) else { continue }
                let before = seq
                change(holder, pk, property, &seq)
                if seq != before {
                    try saveList(sql, holder, pk, property, seq)
                    changed = true
                }
            }
        }
        return changed
    }

    /// Whether `hideLinks` hid links to any object that has not come back.
    static func anyHiddenTargets(_ sql: MetadataSQL) throws -> Bool {
        try !sql.rows("SELECT 1 FROM _atoll_sync_hidden_targets LIMIT 1").isEmpty
    }

    /// The objects whose links `hideLinks` hid, among `ids` (a handful are hidden at a time: the
    /// table is read whole, and each of its keys looked up).
    static func hiddenTargets<T>(_ sql: MetadataSQL, among ids: [ObjectID: T]) throws -> [ObjectID] {
        var out = [ObjectID]()
        for row in try sql.rows("SELECT class, pk FROM _atoll_sync_hidden_targets") {
            guard case .string(let cls) = row[0], case .string(let pkText) = row[1], let pk = try? EJSON.parse(pkText) else { continue }
            let id = ObjectID(cls, pk)
            if ids[id] != nil { out.append(id) }
        }
        return out
    }

    /// Shows again, in the lists of links that hold them, the hidden elements that link to
    /// `target` (which is here again) and are newer than `floor` (its erase: older links went
    /// with it, as on the server); returns where each went in the store's list.
    static func showLinks(_ sql: MetadataSQL, _ schema: Schema, to target: ObjectID,
                          newerThan floor: Clock) throws -> [(className: String, pk: String, property: String, index: Int)] {
        var shown = [(className: String, pk: String, property: String, index: Int)]()
        _ = try changeLinkLists(sql, schema, to: target.className) { holder, pk, property, seq in
            for e in seq.entries where e.alive && e.hidden && e.value == target.primaryKey && max(e.id.clock, e.valueClock) > floor {
                if let index = seq.show(e.id) { shown.append((holder, pk, property, index)) }
            }
        }
        try sql.execute("DELETE FROM _atoll_sync_hidden_targets WHERE class = ? AND pk = ?",
                        [.string(target.className), .string(keyText(target.primaryKey))])
        return shown
    }

    /// The primary key a link value names; nil for none.
    static func linkKey(_ v: Value?) -> Value? {
        switch v {
        case nil, .null?: return nil
        case .link(let l)?: return l.primaryKey
        case .object(let d)? where d["$id"] != nil: return d["$id"]
        case let other?: return other
        }
    }

    static func dropLists(_ sql: MetadataSQL, _ cls: String, _ pk: String) throws {
        try sql.execute("DELETE FROM _atoll_sync_lists WHERE class = ? AND pk = ?", [.string(cls), .string(pk)])
    }
}
