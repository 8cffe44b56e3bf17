import AtollJSON
import AtollProtocol
import AtollStore

/// The server's sync metadata, in the app's store file beside its data (docs/protocol.md):
/// history, client files, each object's create and erase clocks, field clocks, list identities.
enum ServerTables {
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
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_objects (class TEXT NOT NULL, pk TEXT NOT NULL, created TEXT NOT NULL,
            erased TEXT, newest TEXT NOT NULL, PRIMARY KEY (class, pk)) STRICT, WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS _atoll_sync_fields (class TEXT NOT NULL, pk TEXT NOT NULL, path TEXT NOT NULL,
            clock TEXT NOT NULL, present INTEGER NOT NULL, PRIMARY KEY (class, pk, path)) STRICT, WITHOUT ROWID
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
    ]

    static func create(_ store: Store) throws {
        try store.write {
            try store.withMetadata { sql in for s in statements { try sql.execute(s) } }
        }
    }
}


/// What integrating one upload did.
struct Integration {
    /// The instructions that changed the store, in order (what other clients download).
    var effects: [SyncInstruction] = []
    /// Objects refused by the write rules, with the reason.
    var rejected: [CompensatingWrite] = []
    /// Every object the effects touched.
    var touched: [ObjectID] { effects.objectIDs }
}

/// Integrates uploaded changesets into the server's store by the rules of SYNC.md: field writes
/// last-writer-wins by clock, deletes win over concurrent writes, lists by element identity,
/// sets per element by clock (an add wins a tie), dictionaries per key. The caller holds the
/// store's write transaction; integration only adds to it.
///
/// `mayWrite` answers, for objects of one class as they are now in the store, which the user may
/// not write (primary key text → reason). It is asked of the objects an upload touches, as they
/// were before and as they are after; a refused object's instructions are all left out.
///
/// New objects written whole (a create followed by its own field writes and appends, as the
/// change log records them) are created in batches; everything else goes instruction by
/// instruction, in order.
struct Integrator {
    let store: Store
    let mayWrite: (String, [Value]) throws -> [String: String]
    /// Whether the user may write every object of a class, whatever its state: then `mayWrite`
    /// is not asked, and the objects after integration are not looked up.
    let mayWriteAll: (String) -> Bool

    init(store: Store, mayWrite: @escaping (String, [Value]) throws -> [String: String] = { _, _ in [:] },
         mayWriteAll: @escaping (String) -> Bool = { _ in false }) {
        self.store = store
        self.mayWrite = mayWrite
        self.mayWriteAll = mayWriteAll
    }

    /// With a check of one object at a time (its document as the store has it).
    init(store: Store, mayWriteObject: @escaping (ObjectID, Document?) throws -> String?) {
        self.init(store: store) { cls, keys in
            var out = [String: String]()
            for key in keys {
                let doc = try store.object(cls, primaryKey: key)
                if let reason = try mayWriteObject(ObjectID(cls, key), doc) { out[keyText(key)] = reason }
            }
            return out
        }
    }

    /// Which of `ids` the user may not write as they are now: existing objects only.
    private func refused(_ ids: [ObjectID], _ denied: inout [ObjectID: String]) throws -> Bool {
        var live: [String: Set<String>]? = nil
        return try refused(ids, &denied, live: &live)
    }

    /// The same, and (when `live` is not nil) the keys as text of those that exist go into
    /// `live`, per class.
    private func refused(_ ids: [ObjectID], _ denied: inout [ObjectID: String], live: inout [String: Set<String>]?) throws -> Bool {
        let byClass = denied.isEmpty ? ids.keysByClass : ids.filter { denied[$0] == nil }.keysByClass
        var any = false
        for (cls, keys) in byClass {
            let unconditional = mayWriteAll(cls)
            if unconditional, live == nil { continue }
            let existing: [Value]
            do { existing = try store.primaryKeys(cls, among: keys) } catch {
                for k in keys { denied[ObjectID(cls, k)] = "the write could not be applied: \(error)" }
                any = true
                continue
            }
            if live != nil { live?[cls, default: []].formUnion(existing.map(keyText)) }
            guard !existing.isEmpty, !unconditional else { continue }
            let reasons = try mayWrite(cls, existing)
            if reasons.isEmpty { continue }
            for k in existing { if let r = reasons[keyText(k)] { denied[ObjectID(cls, k)] = r; any = true } }
        }
        return any
    }

    func integrate(_ changeset: SyncChangeset) throws -> Integration {
        // A large changeset's new objects are put together on another core meanwhile.
        let instructions = changeset.instructions, schema = store.schema
        let whole = instructions.count < instructionsWorthAnotherCore ? nil : Eventually { CreateRuns(instructions, schema: schema) }
        var denied = [ObjectID: String]()
        let order = changeset.instructions.objectIDs
        // Objects the user may not write as they are now (and which exist).
        var found: [String: Set<String>]? = [:]
        _ = try refused(order, &denied, live: &found)
        let live = found ?? [:]
        // Apply what is left; refuse objects whose new state breaks the rules or that fail to
        // apply, and try again without them (each round refuses at least one more object).
        while true {
            try store.withMetadata { try $0.execute("SAVEPOINT atoll_integrate") }
            var result = Integration()
            var refusedNow = false
            do {
                // Found for all the instructions: of use while none is refused.
                let prepared = denied.isEmpty ? whole?.value() : nil
                result.effects = try applyAll(changeset, live: live, skipping: denied, refusing: &denied, prepared: prepared)
            } catch let failure as RefusedObject {
                denied[failure.id] = failure.reason
                refusedNow = true
            }
            // Every instruction an effect: the objects touched are those of the changeset.
            if !refusedNow { refusedNow = try refused(result.effects.count == changeset.instructions.count ? order : result.touched, &denied) }
            if refusedNow {
                try store.withMetadata { sql in
                    try sql.execute("ROLLBACK TO atoll_integrate")
                    try sql.execute("RELEASE atoll_integrate")
                }
                continue
            }
            try store.withMetadata { try $0.execute("RELEASE atoll_integrate") }
            result.rejected = denied.isEmpty ? [] : order.filter { denied[$0] != nil }.map {
                CompensatingWrite(className: $0.className, primaryKey: $0.primaryKey, reason: denied[$0] ?? "")
            }
            return result
        }
    }

    /// An object whose instructions could not be applied.
    struct RefusedObject: Error {
        var id: ObjectID
        var reason: String
    }

    /// Applies the instructions of the objects not refused, in order; returns those that changed
    /// something. `live` names the objects that exist before (keys as text, per class).
    private func applyAll(_ changeset: SyncChangeset, live: [String: Set<String>], skipping denied: [ObjectID: String],
                          refusing: inout [ObjectID: String], prepared: CreateRuns?) throws -> [SyncInstruction] {
        let all = denied.isEmpty ? changeset.instructions : changeset.instructions.filter { denied[$0.objectID] == nil }
        let clock = changeset.clock
        let fresh = try freshObjects(all, clock, live: live)
        // The effects, as runs of `all`: most often all of it, which then is not copied.
        var kept = [Range<Int>]()
        func keep(_ r: Range<Int>) {
            if let last = kept.last, last.upperBound == r.lowerBound { kept[kept.count - 1] = last.lowerBound..<r.upperBound } else { kept.append(r) }
        }
        var batch = [(doc: Document, block: ArraySlice<SyncInstruction>)]()
        var batchClass = ""
        func flush() throws {
            guard !batch.isEmpty else { return }
            defer { batch = [] }
            try store.withMetadata { try $0.execute("SAVEPOINT atoll_batch") }
            do {
                try store.createMany(batchClass, batch.map(\.doc))
                try recordCreated(batchClass, batch.map(\.block), clock)
                try store.withMetadata { try $0.execute("RELEASE atoll_batch") }
                for b in batch { keep(b.block.indices) }
            } catch {
                // One of them cannot be created whole: each goes on its own.
                try store.withMetadata { sql in
                    try sql.execute("ROLLBACK TO atoll_batch")
                    try sql.execute("RELEASE atoll_batch")
                }
                for b in batch { for k in b.block.indices where try applyOne(all[k], clock) { keep(k..<k + 1) } }
            }
        }
        // The last class's primary key name (a changeset's objects come in runs of a class).
        var known: (className: String, primaryKey: String?)?
        func primaryKey(_ cls: String) throws -> String? {
            if let known, known.className == cls { return known.primaryKey }
            let name = try primaryKeyName(cls)
            known = (cls, name)
            return name
        }
        var prepared = prepared
        var i = all.startIndex
        while i < all.endIndex {
            let ins = all[i]
            if ins.op == .create, fresh.contains(ins.objectID) {
                let known = prepared?.run(at: i)
                let j = known?.end ?? CreateRuns.end(all, at: i) { $0 }
                let pkName = try primaryKey(ins.className)
                // Put together elsewhere already, or here.
                let doc = known.map(\.doc) ?? pkName.flatMap { SyncInstruction.wholeObject(all[i..<j], primaryKey: $0) }
                if pkName != nil, let doc {
                    if batchClass != ins.className { try flush() }
                    batchClass = ins.className
                    batch.append((doc, all[i..<j]))
                    i = j
                    continue
                }
            }
            try flush()
            if try applyOne(ins, clock) { keep(i..<i + 1) }
            i += 1
        }
        try flush()
        if kept.count == 1, kept[0] == all.indices { return all }
        var effects = [SyncInstruction]()
        effects.reserveCapacity(kept.reduce(0) { $0 + $1.count })
        for r in kept { effects += all[r] }
        return effects
    }

    /// One instruction on its own savepoint; a failure refuses its object.
    private func applyOne(_ ins: SyncInstruction, _ clock: Clock) throws -> Bool {
        try store.withMetadata { try $0.execute("SAVEPOINT atoll_instruction") }
        do {
            let changed = try apply(ins, clock)
            try store.withMetadata { try $0.execute("RELEASE atoll_instruction") }
            return changed
        } catch {
            try store.withMetadata { sql in
                try sql.execute("ROLLBACK TO atoll_instruction")
                try sql.execute("RELEASE atoll_instruction")
            }
            throw RefusedObject(id: ins.objectID, reason: "the write could not be applied: \(error)")
        }
    }

    /// The objects the changeset creates that do not exist (are not in `live`) and have no newer
    /// erase.
    private func freshObjects(_ instructions: [SyncInstruction], _ clock: Clock, live: [String: Set<String>]) throws -> Set<ObjectID> {
        var creates = [ObjectID]()
        for ins in instructions where ins.op == .create { creates.append(ins.objectID) }
        let byClass = creates.keysByClass
        var out = Set<ObjectID>(minimumCapacity: creates.count)
        for (cls, keys) in byClass {
            guard (try? primaryKeyName(cls)) != nil else { continue }
            let live = live[cls] ?? []
            let texts = keys.map(keyText)
            var erased = [String: Clock]()
            try store.withMetadata { sql in
                for start in stride(from: 0, to: texts.count, by: SQLPlaces.most) {
                    let part = texts[start..<min(start + SQLPlaces.most, texts.count)]
                    let rows = try sql.rows("SELECT pk, erased FROM _atoll_sync_objects WHERE class = ? AND erased IS NOT NULL AND pk IN (\(SQLPlaces.list(for: part.count)))",
                                            [.string(cls)] + part.map { .string($0) })
                    for row in rows {
                        if case .string(let pk) = row[0], case .string(let c) = row[1], let e = Clock(text: c) { erased[pk] = e }
                    }
                }
            }
            for (key, text) in zip(keys, texts) {
                if live.contains(text) { continue }
                if let e = erased[text], clock <= e { continue }
                out.insert(ObjectID(cls, key))
            }
        }
        return out
    }

    /// The metadata of objects created whole: their create clock, and their lists' identities.
    private func recordCreated(_ cls: String, _ blocks: [ArraySlice<SyncInstruction>], _ clock: Clock) throws {
        try store.withMetadata { sql in
            let c = Value.string(clock.description)
            // In the table's order: a B-tree takes sorted keys several times faster.
            let keys = blocks.compactMap { $0.first.map { keyText($0.primaryKey) } }.sorted()
            try sql.insertMany("INSERT OR REPLACE INTO _atoll_sync_objects", keys.map { [.string(cls), .string($0), c, .null, c] })
            var listRows = [[Value]]()
            for block in blocks {
                guard let first = block.first else { continue }
                let pk = keyText(first.primaryKey)
                for (p, seq) in SyncInstruction.listSequences(block, clock: clock) { listRows.append([.string(cls), .string(pk), .string(p), .string(seq.text)]) }
            }
            if !listRows.isEmpty {
                try sql.executeMany("INSERT OR REPLACE INTO _atoll_sync_lists VALUES (?, ?, ?, ?)", listRows)
            }
        }
    }

    // MARK: - One instruction

    /// Applies one instruction; returns whether it changed anything.
    func apply(_ ins: SyncInstruction, _ clock: Clock) throws -> Bool {
        let pk = keyText(ins.primaryKey)
        let cls = ins.className
        let info = try store.withMetadata { sql -> (created: Clock?, erased: Clock?, newest: Clock?) in
            let rows = try sql.rows("SELECT created, erased, newest FROM _atoll_sync_objects WHERE class = ? AND pk = ?", [.string(cls), .string(pk)])
            guard let row = rows.first else { return (nil, nil, nil) }
            return (row[0].stringValue.flatMap { Clock(text: $0) }, row[1].stringValue.flatMap { Clock(text: $0) },
                    row[2].stringValue.flatMap { Clock(text: $0) })
        }
        let live = try store.object(cls, primaryKey: ins.primaryKey) != nil
        switch ins.op {
        case .create:
            if live {
                // Two creates of one key merge; the newest create clock is kept, so that an
                // older erase arriving later knows the object was created again after it.
                if clock > (info.newest ?? info.created ?? .zero) {
                    try store.withMetadata { sql in
                        try sql.execute("INSERT OR REPLACE INTO _atoll_sync_objects VALUES (?, ?, ?, NULL, ?)",
                                        [.string(cls), .string(pk), .string((info.created ?? .zero).description), .string(clock.description)])
                    }
                }
                return false
            }
            if let erased = info.erased, clock <= erased { return false }
            guard let pkName = try primaryKeyName(cls) else { throw ProtocolError("class '\(cls)' has no primary key") }
            var doc = Document()
            doc[pkName] = ins.primaryKey
            _ = try store.create(cls, doc)
            try store.withMetadata { sql in
                try sql.execute("INSERT OR REPLACE INTO _atoll_sync_objects VALUES (?, ?, ?, NULL, ?)",
                                [.string(cls), .string(pk), .string(clock.description), .string(clock.description)])
                try sql.execute("DELETE FROM _atoll_sync_fields WHERE class = ? AND pk = ?", [.string(cls), .string(pk)])
                try sql.execute("DELETE FROM _atoll_sync_lists WHERE class = ? AND pk = ?", [.string(cls), .string(pk)])
                try sql.execute("DELETE FROM _atoll_sync_adds WHERE class = ? AND pk = ?", [.string(cls), .string(pk)])
            }
            return true
        case .erase:
            if !live {
                // Remember the erase, so that a create with an older clock arriving later stays out.
                let erased = max(info.erased ?? .zero, clock)
                try store.withMetadata { sql in
                    try sql.execute("INSERT OR REPLACE INTO _atoll_sync_objects VALUES (?, ?, ?, ?, ?)",
                                    [.string(cls), .string(pk), .string((info.created ?? .zero).description), .string(erased.description),
                                     .string((info.newest ?? info.created ?? .zero).description)])
                }
                return false
            }
            let newest = info.newest ?? info.created ?? .zero
            if clock < newest {
                // The object was created again after this erase (by a clock): it stays, but
                // everything written before the erase goes, as if the erase had come first.
                return try void(ins, olderThan: clock, base: info.created ?? .zero, newest: newest)
            }
            try store.delete(cls, primaryKey: ins.primaryKey)
            try store.withMetadata { sql in
                try sql.execute("INSERT OR REPLACE INTO _atoll_sync_objects VALUES (?, ?, ?, ?, ?)",
                                [.string(cls), .string(pk), .string((info.created ?? .zero).description), .string(clock.description),
                                 .string(newest.description)])
                try sql.execute("DELETE FROM _atoll_sync_fields WHERE class = ? AND pk = ?", [.string(cls), .string(pk)])
                try sql.execute("DELETE FROM _atoll_sync_lists WHERE class = ? AND pk = ?", [.string(cls), .string(pk)])
                try sql.execute("DELETE FROM _atoll_sync_adds WHERE class = ? AND pk = ?", [.string(cls), .string(pk)])
            }
            return true
        case .upsert, .evict:
            throw ProtocolError("\(ins.op.rawValue) is sent by the server only")
        default:
            break
        }
        // Writes to an object that is not there (never created, or erased: deletes win) are dropped.
        guard live else { return false }
        let base = info.created ?? .zero
        guard let property = ins.property else { throw ProtocolError("\(ins.op.rawValue) needs a path") }
        switch ins.op {
        case .set:
            // The newest clock among the path and its prefixes (a whole embedded object written
            // later wins over an older write into it).
            var prefixes = [String]()
            var acc = ""
            for e in ins.path {
                let part: String
                switch e { case .key(let k): part = k; case .index(let i): part = String(i) }
                acc = acc.isEmpty ? part : acc + "." + part
                prefixes.append(acc)
            }
            var newest = base
            for p in prefixes { if let c = try fieldClock(cls, pk, p)?.clock, c > newest { newest = c } }
            guard clock >= newest else { return false }
            try store.apply(set: ins)
            let key = ins.pathKey
            if ins.path.count == 1 { try reapplyAdds(cls, ins.primaryKey, pk, property, after: clock) }
            try store.withMetadata { sql in
                // Writes inside this path are older now.
                try sql.execute("DELETE FROM _atoll_sync_fields WHERE class = ? AND pk = ? AND path > ? AND path < ?",
                                [.string(cls), .string(pk), .string(key + "."), .string(key + "/")])
                if clock != base {
                    try sql.execute("INSERT OR REPLACE INTO _atoll_sync_fields VALUES (?, ?, ?, ?, 1)",
                                    [.string(cls), .string(pk), .string(key), .string(clock.description)])
                }
            }
            return true
        case .addInteger:
            guard ins.path.count == 1, case .int(let delta)? = ins.value else {
                throw ProtocolError("addInteger needs a property and an integer value")
            }
            // A set newer than the add absorbed it.
            let written = try fieldClock(cls, pk, property)?.clock ?? base
            guard clock >= written else { return false }
            try store.addInteger(cls, primaryKey: ins.primaryKey, property: property, delta)
            try store.withMetadata { sql in
                try sql.execute("INSERT INTO _atoll_sync_adds VALUES (?, ?, ?, ?, ?)",
                                [.string(cls), .string(pk), .string(property), .string(clock.description), .int(delta)])
            }
            return true
        case .listInsert, .listErase, .listSet, .listClear:
            guard ins.path.count == 1 else { throw ProtocolError("list instructions inside embedded objects are not supported") }
            var seq = try listSequence(cls, ins.primaryKey, pk, property)
            var changed = true
            switch ins.op {
            case .listInsert:
                guard let e = ins.element, let index = seq.insert(e, after: ins.after, clock: clock) else { return false }
                try store.listInsert(cls, primaryKey: ins.primaryKey, property: property, ins.value ?? .null, at: index)
            case .listErase:
                guard let e = ins.element, let index = seq.erase(e) else { return false }
                try store.listErase(cls, primaryKey: ins.primaryKey, property: property, at: index)
            case .listSet:
                guard let e = ins.element, let index = seq.set(e, clock: clock) else { return false }
                try store.listSet(cls, primaryKey: ins.primaryKey, property: property, ins.value ?? .null, at: index)
            default:
                let indexes = seq.clear(before: ins.element ?? ElementID(clock, .max))
                for i in indexes { try store.listErase(cls, primaryKey: ins.primaryKey, property: property, at: i) }
                changed = !indexes.isEmpty
            }
            try saveList(cls, pk, property, seq)
            return changed
        case .setInsert, .setErase:
            let value = ins.value ?? .null
            let key = property + setSeparator + keyText(value)
            let stored = try fieldClock(cls, pk, key)
            if ins.op == .setInsert {
                if let stored, clock < stored.clock || (clock == stored.clock && stored.present) { return false }
                if let cleared = try fieldClock(cls, pk, property + clearMark)?.clock, clock < cleared { return false }
                _ = try store.setInsert(cls, primaryKey: ins.primaryKey, property: property, value)
            } else {
                if let stored, clock <= stored.clock { return false }
                _ = try store.setErase(cls, primaryKey: ins.primaryKey, property: property, value)
            }
            try saveFieldClock(cls, pk, key, clock, present: ins.op == .setInsert)
            return true
        case .setClear:
            guard case .list(let members)? = try store.value(cls, primaryKey: ins.primaryKey, property: property) else { return false }
            if (try fieldClock(cls, pk, property + clearMark)?.clock).map({ $0 < clock }) ?? true {
                try saveFieldClock(cls, pk, property + clearMark, clock, present: false)
            }
            var changed = false
            for value in members {
                let key = property + setSeparator + keyText(value)
                let added = try fieldClock(cls, pk, key)?.clock ?? base
                guard added < clock else { continue }
                _ = try store.setErase(cls, primaryKey: ins.primaryKey, property: property, value)
                try saveFieldClock(cls, pk, key, clock, present: false)
                changed = true
            }
            return changed
        case .dictionarySet, .dictionaryErase:
            guard ins.path.count == 2, case .key(let dkey) = ins.path[1] else {
                throw ProtocolError("dictionary instructions need the path [property, key]")
            }
            let key = property + dictionarySeparator + dkey
            let stored = try fieldClock(cls, pk, key)?.clock ?? base
            guard clock >= stored else { return false }
            if let cleared = try fieldClock(cls, pk, property + clearMark)?.clock, clock < cleared { return false }
            if ins.op == .dictionarySet {
                try store.dictionarySet(cls, primaryKey: ins.primaryKey, property: property, key: dkey, ins.value ?? .null)
            } else {
                _ = try store.dictionaryErase(cls, primaryKey: ins.primaryKey, property: property, key: dkey)
            }
            try saveFieldClock(cls, pk, key, clock, present: ins.op == .dictionarySet)
            return true
        case .dictionaryClear:
            guard case .object(let entries)? = try store.value(cls, primaryKey: ins.primaryKey, property: property) else { return false }
            if (try fieldClock(cls, pk, property + clearMark)?.clock).map({ $0 < clock }) ?? true {
                try saveFieldClock(cls, pk, property + clearMark, clock, present: false)
            }
            var changed = false
            for dkey in entries.keys {
                let key = property + dictionarySeparator + dkey
                let written = try fieldClock(cls, pk, key)?.clock ?? base
                guard written < clock else { continue }
                _ = try store.dictionaryErase(cls, primaryKey: ins.primaryKey, property: property, key: dkey)
                try saveFieldClock(cls, pk, key, clock, present: false)
                changed = true
            }
            return changed
        default:
            return false
        }
    }

    /// An erase older than the object's newest create: every field, element and entry written
    /// before the erase goes back to its default (what erasing and creating again would have
    /// left), with the newest create's clock. Returns whether anything changed.
    func void(_ ins: SyncInstruction, olderThan clock: Clock, base: Clock, newest: Clock) throws -> Bool {
        let cls = ins.className
        let pk = keyText(ins.primaryKey)
        guard let schema = store.schema.classes.first(where: { $0.name == cls }), let pkName = schema.primaryKey else { return false }
        var changed = false
        var reset = Document()
        reset[pkName] = ins.primaryKey
        for p in schema.properties where p.name != pkName && !p.isComputed {
            switch p.collection {
            case .list:
                var seq = try listSequence(cls, ins.primaryKey, pk, p.name)
                for index in seq.clear(before: ElementID(clock, .max)) {
                    try store.listErase(cls, primaryKey: ins.primaryKey, property: p.name, at: index)
                    changed = true
                }
                try saveList(cls, pk, p.name, seq)
            case .set, .dictionary:
                let separator = p.collection == .set ? setSeparator : dictionarySeparator
                try saveFieldClock(cls, pk, p.name + clearMark, clock, present: false)
                switch try store.value(cls, primaryKey: ins.primaryKey, property: p.name) {
                case .list(let members)?:
                    for v in members where (try fieldClock(cls, pk, p.name + separator + keyText(v))?.clock ?? base) < clock {
                        _ = try store.setErase(cls, primaryKey: ins.primaryKey, property: p.name, v)
                        changed = true
                    }
                case .object(let entries)?:
                    for k in entries.keys where (try fieldClock(cls, pk, p.name + separator + k)?.clock ?? base) < clock {
                        _ = try store.dictionaryErase(cls, primaryKey: ins.primaryKey, property: p.name, key: k)
                        changed = true
                    }
                default: break
                }
            case .single:
                // The newest write of the property or inside it (embedded objects).
                let rows = try store.withMetadata { sql in
                    try sql.rows("SELECT clock FROM _atoll_sync_fields WHERE class = ? AND pk = ? AND (path = ? OR (path > ? AND path < ?))",
                                 [.string(cls), .string(pk), .string(p.name), .string(p.name + "."), .string(p.name + "/")])
                }
                let written = rows.compactMap { $0[0].stringValue.flatMap { Clock(text: $0) } }.max() ?? base
                guard written < clock else { continue }
                reset[p.name] = p.implicitDefault
                try store.withMetadata { sql in
                    try sql.execute("DELETE FROM _atoll_sync_fields WHERE class = ? AND pk = ? AND path > ? AND path < ?",
                                    [.string(cls), .string(pk), .string(p.name + "."), .string(p.name + "/")])
                }
                try saveFieldClock(cls, pk, p.name, newest, present: true)
            }
        }
        if reset.count > 1 {
            let before = try store.object(cls, primaryKey: ins.primaryKey)
            _ = try store.create(cls, reset, update: .modified)
            for name in reset.keys where name != pkName { try reapplyAdds(cls, ins.primaryKey, pk, name, after: newest) }
            if try store.object(cls, primaryKey: ins.primaryKey) != before { changed = true }
        }
        return changed
    }

    // MARK: - Helpers

    func primaryKeyName(_ cls: String) throws -> String? {
        guard let c = store.schema.classes.first(where: { $0.name == cls }) else {
            throw AtollError(.noSuchClass, "no class named '\(cls)' in the schema")
        }
        return c.primaryKey
    }

    /// After a set of a counter at `clock`: the adds newer than the set stay on top of its value
    /// (as if they had arrived after it); older ones were absorbed and are forgotten.
    func reapplyAdds(_ cls: String, _ primaryKey: Value, _ pk: String, _ property: String, after clock: Clock) throws {
        let rows = try store.withMetadata { sql in
            try sql.rows("SELECT clock, delta FROM _atoll_sync_adds WHERE class = ? AND pk = ? AND path = ?",
                         [.string(cls), .string(pk), .string(property)])
        }
        guard !rows.isEmpty else { return }
        var newer: Int64 = 0
        for row in rows {
            guard case .string(let text) = row[0], let c = Clock(text: text), case .int(let d) = row[1] else { continue }
            if c > clock { newer = newer &+ d }
        }
        if newer != 0 { try store.addInteger(cls, primaryKey: primaryKey, property: property, newer) }
        try store.withMetadata { sql in
            let old = rows.compactMap { $0[0].stringValue }.filter { Clock(text: $0).map { $0 <= clock } ?? true }
            for c in old {
                try sql.execute("DELETE FROM _atoll_sync_adds WHERE class = ? AND pk = ? AND path = ? AND clock = ?",
                                [.string(cls), .string(pk), .string(property), .string(c)])
            }
        }
    }

    func fieldClock(_ cls: String, _ pk: String, _ path: String) throws -> (clock: Clock, present: Bool)? {
        try store.withMetadata { sql in
            let rows = try sql.rows("SELECT clock, present FROM _atoll_sync_fields WHERE class = ? AND pk = ? AND path = ?",
                                    [.string(cls), .string(pk), .string(path)])
            guard let row = rows.first, let text = row[0].stringValue, let c = Clock(text: text) else { return nil }
            return (c, row[1] != .int(0))
        }
    }

    func saveFieldClock(_ cls: String, _ pk: String, _ path: String, _ clock: Clock, present: Bool) throws {
        try store.withMetadata { sql in
            try sql.execute("INSERT OR REPLACE INTO _atoll_sync_fields VALUES (?, ?, ?, ?, ?)",
                            [.string(cls), .string(pk), .string(path), .string(clock.description), .int(present ? 1 : 0)])
        }
    }

    func listSequence(_ cls: String, _ primaryKey: Value, _ pk: String, _ property: String) throws -> ListSequence {
        let text = try store.withMetadata { sql in
            try sql.rows("SELECT elements FROM _atoll_sync_lists WHERE class = ? AND pk = ? AND path = ?",
                         [.string(cls), .string(pk), .string(property)]).first?[0].stringValue
        }
        if let text { return try ListSequence(text: text) }
        // A list written before sync knew it: its elements get identities older than any clock.
        if case .list(let items)? = try store.value(cls, primaryKey: primaryKey, property: property) {
            return ListSequence(unnamed: items.count)
        }
        return ListSequence()
    }

    func saveList(_ cls: String, _ pk: String, _ property: String, _ seq: ListSequence) throws {
        try store.withMetadata { sql in
            try sql.execute("INSERT OR REPLACE INTO _atoll_sync_lists VALUES (?, ?, ?, ?)",
                            [.string(cls), .string(pk), .string(property), .string(seq.text)])
        }
    }
}
