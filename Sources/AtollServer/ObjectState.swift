import AtollJSON
import AtollProtocol
import AtollStore

// One file over 600 lines: the server's merge rules for one object, every instruction kind
// against the same state; they are the rules of docs/protocol.md in code, read as one.

/// One object's sync state on the server — what the store holds of it and its rows in the
/// metadata tables (`ServerSyncTables`) — and the rules that merge one instruction into it
/// (docs/protocol.md, "How changes merge"). Every rule is a merge: the outcome depends on the
/// instructions merged, not on the order they came in.
///
/// - An object exists while its newest create is not older than its newest erase (an erase and a
///   create with one clock come from one transaction, the create after the erase).
/// - A create gives each property it does not set its default, at its clock.
/// - A write older than the object's newest erase is gone; a newer one counts, and while the
///   object is erased it is kept in the metadata, with its value, to come back with the object.
/// - A property holds its newest write; writes into an embedded object apply in clock order,
///   each at its path, over the newest write of the whole.
/// - A counter is its newest set plus every add newer than it.
/// - A list element is named by its insert; concurrent inserts at one place are ordered by
///   identity; an erased element stays known; a clear takes every element older than its point.
/// - A set element or dictionary key holds its newest add or remove, unless older than the
///   collection's last clear.
final class ObjectState {
    let store: Store
    let id: ObjectID
    let tables: ServerSyncTables
    let schema: ObjectSchema
    let pkName: String
    /// The primary key as metadata text.
    let pk: String
    /// Other objects the last instruction changed: holders of links to this object, hidden
    /// when it was erased or shown again when it came back.
    private(set) var holders: [ObjectID] = []
    /// Objects whose metadata alone the last instruction changed: those a link now waits for.
    private(set) var awaitedObjects: [ObjectID] = []

    /// Keeps a link waiting for `target`.
    private func wait(for target: ObjectID, _ d: ServerSyncTables.Dangling) throws {
        try tables.addDangling(to: target, d)
        awaitedObjects.append(target)
    }

    /// - Throws: `.noSuchClass`, or `ProtocolError` for a class without a primary key.
    init(store: Store, _ id: ObjectID) throws {
        self.store = store
        self.id = id
        tables = ServerSyncTables(store: store)
        guard let schema = store.schema.classes.first(where: { $0.name == id.className }) else {
            throw AtollError(.noSuchClass, "no class named '\(id.className)' in the schema")
        }
        guard let pkName = schema.primaryKey else { throw ProtocolError("class '\(id.className)' has no primary key") }
        self.schema = schema
        self.pkName = pkName
        pk = keyText(id.primaryKey)
    }

    static func primaryKeyName(_ store: Store, _ cls: String) throws -> String? {
        guard let c = store.schema.classes.first(where: { $0.name == cls }) else {
            throw AtollError(.noSuchClass, "no class named '\(cls)' in the schema")
        }
        return c.primaryKey
    }

    var cls: String { id.className }

    /// The properties a create gives a value: single values, not collections or computed ones.
    var scalars: [Property] { schema.properties.filter { $0.name != pkName && !$0.isComputed && $0.collection == .single } }

    var exists: Bool { get throws { try store.object(cls, primaryKey: id.primaryKey) != nil } }

    /// Writes one property of the live object.
    private func write(_ property: String, _ value: Value) throws {
        var doc = Document()
        doc[pkName] = id.primaryKey
        doc[property] = value
        _ = try store.create(cls, doc, update: .modified)
    }

    // MARK: - Links

    /// The top-level class a property links to (a link or a list of links), if it does.
    func linkTarget(_ p: Property) -> ObjectSchema? {
        guard p.type == .object, let name = p.objectType,
              let target = store.schema.classes.first(where: { $0.name == name }), !target.isEmbedded else { return nil }
        return target
    }

    /// The primary key a link value names (a key, a link, or `{"$ref", "$id"}`); nil for none.
    static func linkKey(_ v: Value) -> Value? {
        switch v {
        case .null: return nil
        case .link(let l): return l.primaryKey
        case .object(let d) where d["$id"] != nil: return d["$id"]
        default: return v
        }
    }

    /// The clock of the newest erase of the object a link names, if it was ever erased here.
    private func erased(_ target: ObjectSchema, _ key: Value) throws -> Clock? {
        try tables.record(target.name, keyText(key))?.erased
    }

    /// Whether a link written at `clock` shows: its object exists and the link is not older than
    /// the object's newest erase (an older one went with that erase).
    private func shows(_ target: ObjectSchema, _ key: Value, at clock: Clock) throws -> Bool {
        guard (try? store.primaryKeys(target.name, among: [key]).isEmpty) == false else { return false }
        return try erased(target, key).map { clock >= $0 } ?? true
    }

    /// Whether a link that does not show now may show later: it is not older than its object's
    /// newest erase (the object may be created again).
    private func mayShow(_ target: ObjectSchema, _ key: Value, at clock: Clock) throws -> Bool {
        try erased(target, key).map { clock >= $0 } ?? true
    }

    /// An erase of this object at `clock`: the links to it older than the erase are gone. When
    /// it deletes the object (`deleting`), the newer ones are hidden too (the store drops them)
    /// and wait for it to come back; when the object stays (it was created again after the
    /// erase), only the older ones go, here.
    private func hideLinks(erasedAt clock: Clock, deleting: Bool) throws {
        for h in store.schema.classes where !h.isEmbedded && h.primaryKey != nil {
            for p in h.properties where p.type == .object && p.objectType == cls && (p.collection == .single || p.isList) {
                let query = p.collection == .single ? "\(p.name).\(pkName) == $0" : "ANY \(p.name).\(pkName) == $0"
                for key in try store.objects(h.name, where: query, [id.primaryKey]).primaryKeyValues()
                where !(h.name == cls && keyText(key) == pk && deleting) {
                    let holder = try ObjectState(store: store, ObjectID(h.name, key))
                    if try holder.loseLinks(p, to: self, erasedAt: clock, deleting: deleting) { holders.append(holder.id) }
                }
            }
        }
    }

    /// This object's links in `p` to `target`, erased at `clock`: see `hideLinks`. Returns
    /// whether any changed.
    private func loseLinks(_ p: Property, to target: ObjectState, erasedAt clock: Clock, deleting: Bool) throws -> Bool {
        let r = try tables.record(cls, pk) ?? ObjectRecord(base: .zero, newest: .zero, erased: nil)
        let key = target.id.primaryKey
        if p.collection == .single {
            let written = try tables.field(cls, pk, p.name)?.clock ?? r.base
            guard written >= clock else {
                if !deleting { try write(p.name, .null) }
                return true
            }
            guard deleting else { return false }
            try tables.save(FieldRow(path: p.name, clock: written, present: true, value: key), cls, pk)
            try wait(for: target.id, .init(holder: id, path: p.name, element: nil, clock: written))
            return true
        }
        let current = try store.value(cls, primaryKey: id.primaryKey, property: p.name)
        var seq = try tables.list(cls, pk, p.name) ?? ListSequence(unnamed: current?.listCount ?? 0)
        if case .list(let items)? = current { seq.keepShownValues(items.map { Self.linkKey($0) ?? .null }) }
        var changed = false
        for e in seq.entries where e.shown && e.value == key && (deleting || e.valueClock < clock) {
            guard let index = seq.hide(e.id) else { continue }
            changed = true
            if !deleting { try store.listErase(cls, primaryKey: id.primaryKey, property: p.name, at: index) }
            if deleting, e.valueClock >= clock {
                try wait(for: target.id, .init(holder: id, path: p.name, element: e.id, clock: e.valueClock))
            }
        }
        try tables.save(seq, cls, pk, p.name)
        return changed
    }

    /// This object exists again (or for the first time): links that waited for it show.
    private func restoreLinks() throws {
        let erasedAt = try tables.record(cls, pk)?.erased
        for d in try tables.takeDangling(to: id) where erasedAt.map({ d.clock >= $0 }) ?? true {
            let holder = try ObjectState(store: store, d.holder)
            guard try holder.exists, let p = holder.schema[property: d.path] else { continue }
            if let element = d.element {
                guard var seq = try holder.tables.list(holder.cls, holder.pk, p.name), let e = seq.entry(element), e.alive, e.hidden,
                      e.value == id.primaryKey, e.valueClock == d.clock, let index = seq.show(element) else { continue }
                try store.listInsert(holder.cls, primaryKey: d.holder.primaryKey, property: p.name, id.primaryKey, at: index)
                try holder.tables.save(seq, holder.cls, holder.pk, p.name)
            } else {
                guard let row = try holder.tables.field(holder.cls, holder.pk, p.name), row.clock == d.clock,
                      row.value == id.primaryKey else { continue }
                try holder.write(p.name, id.primaryKey)
                try holder.tables.save(FieldRow(path: row.path, clock: row.clock, present: true, value: nil), holder.cls, holder.pk)
            }
            holders.append(d.holder)
        }
    }

    // MARK: - One instruction

    /// Merges one instruction of a changeset stamped `clock`.
    func apply(_ ins: SyncInstruction, _ clock: Clock) throws -> Outcome {
        var record = try tables.record(cls, pk)
        let live = try exists
        switch ins.op {
        case .create: return try create(clock, &record, live: live)
        case .erase: return try erase(clock, &record, live: live)
        case .upsert, .evict, .keep: throw ProtocolError("\(ins.op.rawValue) is sent by the server only")
        default: break
        }
        // A write older than the object's newest erase is gone (a list insert older than the
        // erase still counts: it is dead, but later inserts may name it as their neighbour). An
        // object made before sync knew it has no record: its values are older than every write.
        // A write to an object this server does not have yet (its create was refused, or comes
        // later) is kept, as with an erased object, for when it is created.
        if record == nil, !live { try tables.save(ObjectRecord(base: .zero, newest: .zero, erased: nil), cls, pk) }
        let r = record ?? ObjectRecord(base: .zero, newest: .zero, erased: nil)
        guard r.outlives(clock) || ins.op == .listInsert else { return .none }
        guard let property = ins.property else { throw ProtocolError("\(ins.op.rawValue) needs a path") }
        guard let p = schema[property: property], !p.isComputed, property != pkName else {
            if property == pkName { throw ProtocolError("the primary key '\(pkName)' cannot be set") }
            throw AtollError(.noSuchProperty, "'\(cls)' has no property '\(property)'")
        }
        switch ins.op {
        case .set: return try set(ins, p, clock, r, live: live)
        case .addInteger: return try add(ins, p, clock, r, live: live)
        case .listInsert, .listErase, .listSet, .listClear: return try list(ins, p, clock, r, live: live)
        case .setInsert, .setErase, .setClear, .dictionarySet, .dictionaryErase, .dictionaryClear:
            return try member(ins, p, clock, r, live: live)
        default: return .none
        }
    }

    // MARK: - Creates and erases

    private func create(_ clock: Clock, _ record: inout ObjectRecord?, live: Bool) throws -> Outcome {
        if live, var r = record {
            var outcome = Outcome.none
            if clock > r.newest {
                r.newest = clock
                outcome = .hidden
            }
            if clock > r.base {
                // A newer create of the same object: it gives every property its value (the sets
                // that follow it) or its default, at its clock; collections merge, and their
                // elements written by the older create keep its clock.
                try nameMembers(at: r.base)
                if try resetScalars(before: clock, &r) { outcome = .whole }
                r.base = clock
                outcome = max(outcome, .hidden)
            }
            try tables.save(r, cls, pk)
            return outcome
        }
        if live {
            // Made before sync knew it (no record): this create is its first.
            try tables.save(ObjectRecord(base: clock, newest: clock, erased: nil), cls, pk)
            return .hidden
        }
        if var r = record, let erased = r.erased, clock < erased {
            guard clock > r.newest else { return .none }
            r.newest = clock
            try tables.save(r, cls, pk)
            return .hidden
        }
        var doc = Document()
        doc[pkName] = id.primaryKey
        _ = try store.create(cls, doc)
        guard var r = record else {
            try tables.save(ObjectRecord(base: clock, newest: clock, erased: nil), cls, pk)
            try restoreLinks()
            return .plain
        }
        // It comes back, with what was kept while it was erased.
        r.base = clock
        r.newest = max(r.newest, clock)
        try restore(r)
        try tables.save(r, cls, pk)
        try restoreLinks()
        return .whole
    }

    /// Gives each set element and dictionary key of the live object that has no row of its own
    /// (the create at `base` wrote it) a row at `base`.
    private func nameMembers(at base: Clock) throws {
        guard let doc = try store.object(cls, primaryKey: id.primaryKey) else { return }
        let rows = Set(try tables.fields(cls, pk).map { ExactText($0.path) })
        for p in schema.properties where p.collection == .set || p.collection == .dictionary {
            let paths: [String]
            switch doc[p.name] {
            case .list(let members)?: paths = members.map { setElementPath(p.name, $0) }
            case .object(let entries)?: paths = entries.keys.map { dictionaryKeyPath(p.name, $0) }
            default: paths = []
            }
            for path in paths where !rows.contains(ExactText(path)) {
                try tables.save(FieldRow(path: path, clock: base, present: true, value: nil), cls, pk)
            }
        }
    }

    /// Gives the live object's single-valued properties written before `clock` their defaults;
    /// returns whether a value changed.
    private func resetScalars(before clock: Clock, _ r: inout ObjectRecord) throws -> Bool {
        guard let before = try store.object(cls, primaryKey: id.primaryKey) else { return false }
        let rows = try tables.fields(cls, pk)
        var reset = Document()
        reset[pkName] = id.primaryKey
        for p in scalars {
            let own = rows.first { $0.path == p.name }
            guard (own?.clock ?? r.base) < clock else { continue }
            if let own { try tables.deleteField(cls, pk, own.path) }
            for row in rows where row.path.hasPrefix(p.name + ".") && row.clock < clock { try tables.deleteField(cls, pk, row.path) }
            reset[p.name] = p.implicitDefault
        }
        guard reset.count > 1 else { return false }
        _ = try store.create(cls, reset, update: .modified)
        // A counter keeps the adds newer than the create on top of its new value.
        for p in scalars where p.type == .int && reset[p.name] != nil { _ = try reapplyAdds(p.name, after: clock) }
        return try store.object(cls, primaryKey: id.primaryKey) != before
    }

    private func erase(_ clock: Clock, _ record: inout ObjectRecord?, live: Bool) throws -> Outcome {
        guard live else {
            // Remembered, so that older creates and writes stay out; kept writes older than it go.
            var r = record ?? ObjectRecord(base: .zero, newest: .zero, erased: nil)
            guard r.erased.map({ clock > $0 }) ?? true else { return .none }
            r.erased = clock
            try tables.save(r, cls, pk)
            try forget(before: clock)
            return .hidden
        }
        var r = record ?? ObjectRecord(base: .zero, newest: .zero, erased: nil)
        if r.erased.map({ clock > $0 }) ?? true { r.erased = clock }
        if clock >= r.newest {
            try keepWhatOutlives(clock)
            try hideLinks(erasedAt: clock, deleting: true)
            try store.delete(cls, primaryKey: id.primaryKey)
            try tables.save(r, cls, pk)
            return .plain
        }
        // Created again after this erase: it stays, but what was written before the erase goes,
        // also what arrives later. Replicas get the object with the erase's clock (their lists
        // need its floor even when nothing shows).
        _ = try void(before: clock, r)
        try hideLinks(erasedAt: clock, deleting: false)
        try tables.save(r, cls, pk)
        return .whole
    }

    /// Before the live object is deleted by an erase at `clock`: what was written after the erase
    /// (by clock) is kept in the metadata with its value; what was written before is forgotten.
    private func keepWhatOutlives(_ clock: Clock) throws {
        let doc = try store.object(cls, primaryKey: id.primaryKey) ?? Document()
        for row in try tables.fields(cls, pk) {
            if row.clock < clock {
                try tables.deleteField(cls, pk, row.path)
                continue
            }
            guard row.value == nil, let (property, key) = Self.split(row.path), row.present else { continue }
            var kept = row
            if key == nil, let p = schema[property: property], p.collection == .single {
                kept.value = doc[property] ?? .null
                // A counter's own value, without the adds on top of it (they are kept apart).
                if p.type == .int, case .int(let total)? = doc[property] {
                    kept.value = .int(total &- (try tables.adds(cls, pk, property).reduce(Int64(0)) { $0 &+ $1.delta }))
                }
            } else if let key, case .object(let entries)? = doc[property], row.path.contains(dictionarySeparator) {
                kept.value = entries[key] ?? .null
            } else {
                continue
            }
            try tables.save(kept, cls, pk)
        }
        for p in schema.properties where p.type == .int && p.collection == .single {
            try tables.deleteAdds(cls, pk, p.name, through: Self.justBefore(clock))
        }
        for p in schema.properties where p.isList {
            var seq = try tables.list(cls, pk, p.name) ?? ListSequence(unnamed: (doc[p.name]?.listCount ?? 0))
            if case .list(let items)? = doc[p.name] {
                let link = linkTarget(p) != nil
                for (i, v) in items.enumerated() { seq.keepValue(link ? Self.linkKey(v) ?? .null : v, atLive: i) }
            }
            _ = seq.clear(before: ElementID(clock, 0))
            try tables.save(seq, cls, pk, p.name)
        }
    }

    /// The clock just before `clock`: `through:` bounds that leave `clock` itself out.
    private static func justBefore(_ clock: Clock) -> Clock {
        clock.node > Int64.min ? Clock(milliseconds: clock.milliseconds, counter: clock.counter, node: clock.node - 1) : clock
    }

    /// An erased object's kept writes older than `clock` are forgotten (a newer erase came).
    private func forget(before clock: Clock) throws {
        for row in try tables.fields(cls, pk) where row.clock < clock { try tables.deleteField(cls, pk, row.path) }
        for p in schema.properties where p.type == .int && p.collection == .single {
            try tables.deleteAdds(cls, pk, p.name, through: Self.justBefore(clock))
        }
        for p in schema.properties where p.isList {
            guard var seq = try tables.list(cls, pk, p.name) else { continue }
            _ = seq.clear(before: ElementID(clock, 0))
            try tables.save(seq, cls, pk, p.name)
        }
    }

    /// An erase older than the live object's newest create: whatever was written before it
    /// goes (list elements, set elements, dictionary keys, and fields written before the create
    /// that made the object). Returns whether a value changed.
    private func void(before clock: Clock, _ r: ObjectRecord) throws -> Bool {
        guard let before = try store.object(cls, primaryKey: id.primaryKey) else { return false }
        for p in schema.properties where p.isList {
            var seq = try tables.list(cls, pk, p.name) ?? ListSequence(unnamed: before[p.name]?.listCount ?? 0)
            for index in seq.clear(before: ElementID(clock, 0)) {
                try store.listErase(cls, primaryKey: id.primaryKey, property: p.name, at: index)
            }
            try tables.save(seq, cls, pk, p.name)
        }
        let rows = try tables.fields(cls, pk)
        for p in schema.properties where p.collection == .set || p.collection == .dictionary {
            let separator = p.collection == .set ? setSeparator : dictionarySeparator
            switch before[p.name] {
            case .list(let members)?:
                for v in members where (rows.first { ExactText.same($0.path, p.name + separator + keyText(v)) }?.clock ?? r.base) < clock {
                    _ = try store.setErase(cls, primaryKey: id.primaryKey, property: p.name, v)
                }
            case .object(let entries)?:
                for k in entries.keys where (rows.first { ExactText.same($0.path, p.name + separator + k) }?.clock ?? r.base) < clock {
                    _ = try store.dictionaryErase(cls, primaryKey: id.primaryKey, property: p.name, key: k)
                }
            default: break
            }
            try raiseClear(p.name, to: clock)
        }
        for row in rows where row.clock < clock { try tables.deleteField(cls, pk, row.path) }
        var reset = Document()
        reset[pkName] = id.primaryKey
        for p in scalars where (rows.first { $0.path == p.name }?.clock ?? r.base) < clock { reset[p.name] = p.implicitDefault }
        if reset.count > 1 { _ = try store.create(cls, reset, update: .modified) }
        return try store.object(cls, primaryKey: id.primaryKey) != before
    }

    /// The object comes back (its row was just made, with defaults): what was kept with it while
    /// it was erased — writes newer than the create that brings it back — is written into it.
    private func restore(_ r: ObjectRecord) throws {
        let rows = try tables.fields(cls, pk)
        var doc = Document()
        doc[pkName] = id.primaryKey
        for p in scalars {
            var value = p.implicitDefault
            var top = r.base
            if let own = rows.first(where: { $0.path == p.name }) {
                if own.clock > r.base, r.outlives(own.clock) {
                    value = own.value ?? value
                    top = own.clock
                    try tables.save(FieldRow(path: own.path, clock: own.clock, present: true, value: nil), cls, pk)
                } else {
                    try tables.deleteField(cls, pk, own.path)
                }
            }
            for row in rows.filter({ $0.path.hasPrefix(p.name + ".") }).sorted(by: { $0.clock < $1.clock }) {
                guard row.clock >= top, let v = row.value, let path = Self.path(row.path) else {
                    try tables.deleteField(cls, pk, row.path)
                    continue
                }
                if let replaced = try? value.replacing(at: path.dropFirst(), with: v) { value = replaced }
            }
            if p.type == .int, case .int(let base) = value {
                // The adds not older than the value's own write (one with its clock came after it in
                // the same transaction) nor than the erase.
                let counted = try tables.adds(cls, pk, p.name).filter { $0.clock >= top && r.outlives($0.clock) }
                for add in try tables.adds(cls, pk, p.name) where !counted.contains(where: { $0.clock == add.clock }) {
                    try tables.deleteAdds(cls, pk, p.name, through: add.clock)
                }
                value = .int(counted.reduce(base) { $0 &+ $1.delta })
            }
            // A kept link shows if its object exists, and waits for it otherwise.
            if let target = linkTarget(p), let key = Self.linkKey(value), try !shows(target, key, at: top) {
                if try mayShow(target, key, at: top) {
                    try tables.save(FieldRow(path: p.name, clock: top, present: true, value: key), cls, pk)
                    try wait(for: ObjectID(target.name, key), .init(holder: id, path: p.name, element: nil, clock: top))
                }
                continue
            }
            if value != p.implicitDefault { doc[p.name] = value }
        }
        // A kept value the store refuses (it never passed the store's checks) stays out.
        if doc.count > 1 {
            do { _ = try store.create(cls, doc, update: .modified) } catch {
                for (name, v) in doc where name != pkName { _ = try? store.create(cls, [pkName: id.primaryKey, name: v], update: .modified) }
            }
        }
        for p in schema.properties where p.isList {
            guard var seq = try tables.list(cls, pk, p.name) else { continue }
            let target = linkTarget(p)
            if let target {
                // Each kept link shows as its object is now: one hidden while the object it names
                // was missing may show now (that object came while this one was not there to
                // show it), one shown may have to wait.
                for e in seq.entries where e.alive {
                    guard let key = e.value.flatMap(Self.linkKey) else { continue }
                    if try shows(target, key, at: e.valueClock) {
                        if e.hidden { _ = seq.show(e.id) }
                        continue
                    }
                    if e.shown { _ = seq.hide(e.id) }
                    if try mayShow(target, key, at: e.valueClock) {
                        try wait(for: ObjectID(target.name, key), .init(holder: id, path: p.name, element: e.id, clock: e.valueClock))
                    }
                }
            }
            for (i, v) in seq.takeValues(keep: target != nil).enumerated() {
                do { try store.listInsert(cls, primaryKey: id.primaryKey, property: p.name, v, at: i) } catch {
                    throw ProtocolError("a kept element of \(cls).\(p.name) cannot be written back: \(error)")
                }
            }
            try tables.save(seq, cls, pk, p.name)
        }
        for p in schema.properties where p.collection == .set || p.collection == .dictionary {
            let separator = p.collection == .set ? setSeparator : dictionarySeparator
            let clear = rows.first { $0.path == p.name + clearMark }?.clock
            for row in rows where row.path.hasPrefix(p.name + separator) && row.present {
                guard clear.map({ row.clock >= $0 }) ?? true, r.outlives(row.clock) else { continue }
                let key = memberOfPath(row.path, property: p.name)
                if p.collection == .set {
                    if let member = try? EJSON.parse(key) { _ = try? store.setInsert(cls, primaryKey: id.primaryKey, property: p.name, member) }
                } else {
                    try? store.dictionarySet(cls, primaryKey: id.primaryKey, property: p.name, key: key, row.value ?? .null)
                    try tables.save(FieldRow(path: row.path, clock: row.clock, present: true, value: nil), cls, pk)
                }
            }
        }
    }

    // MARK: - Fields

    private func set(_ ins: SyncInstruction, _ p: Property, _ clock: Clock, _ r: ObjectRecord, live: Bool) throws -> Outcome {
        guard p.collection == .single else { throw ProtocolError("set of '\(cls).\(p.name)', a collection: use its list, set or dictionary instructions") }
        let key = ins.pathKey
        let rows = try tables.fields(cls, pk, of: p.name)
        // The newest write of the path or of a path that holds it.
        var newest = r.base
        for row in rows where row.path == key || key.hasPrefix(row.path + ".") { newest = max(newest, row.clock) }
        guard clock >= newest else { return .none }
        let value = ins.value ?? .null
        // Writes inside this path: older ones are gone, newer ones apply again over this one.
        var newer = [FieldRow]()
        for row in rows where row.path.hasPrefix(key + ".") {
            if row.clock < clock { try tables.deleteField(cls, pk, row.path) } else { newer.append(row) }
        }
        newer.sort { $0.clock < $1.clock }
        guard live else {
            // Kept with the erased object.
            try tables.save(FieldRow(path: key, clock: clock, present: true, value: value), cls, pk)
            return .hidden
        }
        // A link to an object that does not exist (or came back after the link was written) reads
        // as none; it is kept, and waits for the object if it may come.
        if ins.path.count == 1, let target = linkTarget(p), let linked = Self.linkKey(value), try !shows(target, linked, at: clock) {
            try write(p.name, .null)
            try tables.save(FieldRow(path: key, clock: clock, present: true, value: linked), cls, pk)
            if try mayShow(target, linked, at: clock) {
                try wait(for: ObjectID(target.name, linked), .init(holder: id, path: p.name, element: nil, clock: clock))
            }
            return .whole
        }
        var outcome = Outcome.plain
        var current: Value
        if ins.path.count == 1 {
            current = value
        } else {
            let whole = try store.value(cls, primaryKey: id.primaryKey, property: p.name) ?? .null
            // A path into an embedded object that is not there now: kept, for a write of the
            // whole that is older and arrives later.
            guard let replaced = try? whole.replacing(at: ins.path.dropFirst(), with: value) else {
                try tables.save(FieldRow(path: key, clock: clock, present: true, value: value), cls, pk)
                return .hidden
            }
            current = replaced
        }
        for row in newer {
            guard let v = row.value, let path = Self.path(row.path), let replaced = try? current.replacing(at: path.dropFirst(), with: v) else { continue }
            current = replaced
            outcome = .whole
        }
        try write(p.name, current)
        if ins.path.count == 1 {
            if clock == r.base {
                try tables.deleteField(cls, pk, key)
            } else {
                try tables.save(FieldRow(path: key, clock: clock, present: true, value: nil), cls, pk)
            }
            // A counter keeps the adds newer than this set on top of it.
            if p.type == .int, try reapplyAdds(p.name, after: clock) { outcome = .whole }
        } else {
            try tables.save(FieldRow(path: key, clock: clock, present: true, value: value), cls, pk)
        }
        return outcome
    }

    /// After a set of a counter at `clock`: the adds newer than the set go back on top of its
    /// value (as if they had come after it); older ones were absorbed and are forgotten.
    /// Returns whether any was added back.
    private func reapplyAdds(_ property: String, after clock: Clock) throws -> Bool {
        let adds = try tables.adds(cls, pk, property)
        guard !adds.isEmpty else { return false }
        let newer = adds.filter { $0.clock > clock }.reduce(Int64(0)) { $0 &+ $1.delta }
        try tables.deleteAdds(cls, pk, property, through: clock)
        guard newer != 0 else { return adds.contains { $0.clock > clock } }
        try store.addInteger(cls, primaryKey: id.primaryKey, property: property, newer)
        return true
    }

    private func add(_ ins: SyncInstruction, _ p: Property, _ clock: Clock, _ r: ObjectRecord, live: Bool) throws -> Outcome {
        guard ins.path.count == 1, p.type == .int, p.collection == .single, case .int(let delta)? = ins.value else {
            throw ProtocolError("addInteger needs an integer property and an integer value")
        }
        // A set newer than the add absorbed it; an add of this clock is known (a changeset has
        // one add per counter, and may be sent twice).
        let written = try tables.field(cls, pk, p.name)?.clock ?? r.base
        guard clock >= written, try !tables.adds(cls, pk, p.name).contains(where: { $0.clock == clock }) else { return .none }
        try tables.insertAdd(cls, pk, p.name, clock, delta)
        guard live else { return .hidden }
        try store.addInteger(cls, primaryKey: id.primaryKey, property: p.name, delta)
        return .plain
    }

    // MARK: - Collections

    private func list(_ ins: SyncInstruction, _ p: Property, _ clock: Clock, _ r: ObjectRecord, live: Bool) throws -> Outcome {
        guard p.isList, ins.path.count == 1 else { throw ProtocolError("list instructions need a list property (not inside embedded objects)") }
        let current = live ? try store.value(cls, primaryKey: id.primaryKey, property: p.name) : nil
        var seq = try tables.list(cls, pk, p.name) ?? ListSequence(unnamed: current?.listCount ?? 0)
        // A list the object had no sequence for when it was erased starts at the erase.
        if let erased = r.erased, seq.clearedBefore.map({ $0 < ElementID(erased, 0) }) ?? true {
            for i in seq.clear(before: ElementID(erased, 0)) where live {
                try store.listErase(cls, primaryKey: id.primaryKey, property: p.name, at: i)
            }
        }
        var outcome = Outcome.plain
        switch ins.op {
        case .listInsert:
            guard let e = ins.element, !seq.contains(e) else { return .none }
            if let target = linkTarget(p), let linked = Self.linkKey(ins.value ?? .null) {
                // An element of a list of links: hidden while its object does not exist.
                let hidden = try !shows(target, linked, at: clock)
                let index = seq.insert(e, after: ins.after, clock: clock, value: linked, hidden: hidden)
                if let index, live { try store.listInsert(cls, primaryKey: id.primaryKey, property: p.name, linked, at: index) }
                if hidden, seq.entry(e)?.alive == true, try mayShow(target, linked, at: clock) {
                    try wait(for: ObjectID(target.name, linked), .init(holder: id, path: p.name, element: e, clock: clock))
                }
                try tables.save(seq, cls, pk, p.name)
                return !live ? .hidden : hidden ? .whole : .plain
            }
            guard let index = seq.insert(e, after: ins.after, clock: clock) else {
                // Older than a clear: it does not show, but later inserts may name it as their
                // neighbour, so every replica must know it (it travels as it came).
                try tables.save(seq, cls, pk, p.name)
                return live ? .plain : .hidden
            }
            if live {
                try store.listInsert(cls, primaryKey: id.primaryKey, property: p.name, ins.value ?? .null, at: index)
            } else {
                seq.keepValue(ins.value ?? .null, for: e)
                outcome = .hidden
            }
        case .listErase:
            guard let e = ins.element, seq.entry(e)?.alive == true else { return .none }
            // (A hidden element is erased without a change in the store.)
            if let index = seq.erase(e), live { try store.listErase(cls, primaryKey: id.primaryKey, property: p.name, at: index) }
            if !live { outcome = .hidden }
        case .listSet:
            if let target = linkTarget(p), let e = ins.element, let entry = seq.entry(e), entry.alive, clock >= entry.valueClock {
                // The element now links elsewhere: it shows or hides by that object.
                let linked = Self.linkKey(ins.value ?? .null) ?? .null
                let wasAt = seq.set(e, clock: clock, value: linked)
                let hidden = try linked == .null || !shows(target, linked, at: clock)
                if live, let wasAt { try store.listErase(cls, primaryKey: id.primaryKey, property: p.name, at: wasAt) }
                if hidden {
                    _ = seq.hide(e)
                    if linked != .null, try mayShow(target, linked, at: clock) {
                        try wait(for: ObjectID(target.name, linked), .init(holder: id, path: p.name, element: e, clock: clock))
                    }
                } else if let at = seq.show(e) ?? (wasAt != nil ? seq.liveIDs.firstIndex(of: e) : nil), live {
                    try store.listInsert(cls, primaryKey: id.primaryKey, property: p.name, linked, at: at)
                }
                try tables.save(seq, cls, pk, p.name)
                return live ? .whole : .hidden
            }
            guard let e = ins.element, let index = seq.set(e, clock: clock) else { return .none }
            if live {
                try store.listSet(cls, primaryKey: id.primaryKey, property: p.name, ins.value ?? .null, at: index)
            } else {
                seq.keepValue(ins.value ?? .null, for: e)
                outcome = .hidden
            }
        default:
            let before = seq.clearedBefore
            let indexes = seq.clear(before: ins.element ?? ElementID(clock, .max))
            if live { for i in indexes { try store.listErase(cls, primaryKey: id.primaryKey, property: p.name, at: i) } }
            // A clear that takes nothing still moves the list's floor, which inserts that arrive
            // later meet: replicas need it too.
            if seq.clearedBefore == before, indexes.isEmpty { outcome = .none } else if !live { outcome = .hidden }
        }
        try tables.save(seq, cls, pk, p.name)
        return outcome
    }

    /// Set elements and dictionary keys: each holds its newest add or remove (write or erase),
    /// unless older than the collection's last clear.
    private func member(_ ins: SyncInstruction, _ p: Property, _ clock: Clock, _ r: ObjectRecord, live: Bool) throws -> Outcome {
        let isSet = ins.op == .setInsert || ins.op == .setErase || ins.op == .setClear
        guard isSet ? p.collection == .set : p.collection == .dictionary else {
            throw ProtocolError("\(ins.op.rawValue) of '\(cls).\(p.name)', which is not a \(isSet ? "set" : "dictionary")")
        }
        let clearPath = p.name + clearMark
        let cleared = try tables.field(cls, pk, clearPath)?.clock
        if ins.op == .setClear || ins.op == .dictionaryClear {
            var outcome = Outcome.none
            if cleared.map({ $0 < clock }) ?? true {
                try raiseClear(p.name, to: clock)
                outcome = .hidden
            }
            let rows = try tables.fields(cls, pk, of: p.name)
            let separator = isSet ? setSeparator : dictionarySeparator
            if live {
                switch try store.value(cls, primaryKey: id.primaryKey, property: p.name) {
                case .list(let members)?:
                    for v in members where (rows.first { ExactText.same($0.path, p.name + separator + keyText(v)) }?.clock ?? r.base) < clock {
                        _ = try store.setErase(cls, primaryKey: id.primaryKey, property: p.name, v)
                        outcome = .plain
                    }
                case .object(let entries)?:
                    for k in entries.keys where (rows.first { ExactText.same($0.path, p.name + separator + k) }?.clock ?? r.base) < clock {
                        _ = try store.dictionaryErase(cls, primaryKey: id.primaryKey, property: p.name, key: k)
                        outcome = .plain
                    }
                default: break
                }
            }
            for row in rows where row.path.hasPrefix(p.name + separator) && row.clock < clock { try tables.deleteField(cls, pk, row.path) }
            // Elements or keys newer than the clear stay: a replica that applies the clear itself
            // cannot tell them from the others (it has no clocks for them), so it gets the object.
            if live, outcome != .none {
                switch try store.value(cls, primaryKey: id.primaryKey, property: p.name) {
                case .list(let left)? where !left.isEmpty: outcome = .whole
                case .object(let left)? where !left.isEmpty: outcome = .whole
                default: break
                }
            }
            return outcome
        }
        if let cleared, clock < cleared { return .none }
        let value = ins.value ?? .null
        let path: String
        if isSet {
            path = setElementPath(p.name, value)
        } else {
            guard ins.path.count == 2, case .key(let k) = ins.path[1] else {
                throw ProtocolError("dictionary instructions need the path [property, key]")
            }
            path = dictionaryKeyPath(p.name, k)
        }
        let adding = ins.op == .setInsert || ins.op == .dictionarySet
        // A member without a row was written by the create that made the object.
        let stored = try tables.field(cls, pk, path)
        if let stored {
            // An add and a remove with one clock: the add wins.
            guard clock > stored.clock || (clock == stored.clock && adding && !stored.present) else { return .none }
        } else if live, try holds(p, path) {
            // An element or key without a row was written by the create that made the object.
            guard clock >= r.base else { return .none }
        }
        if live {
            switch ins.op {
            case .setInsert: _ = try store.setInsert(cls, primaryKey: id.primaryKey, property: p.name, value)
            case .setErase: _ = try store.setErase(cls, primaryKey: id.primaryKey, property: p.name, value)
            case .dictionarySet:
                guard case .key(let k) = ins.path[1] else { return .none }
                try store.dictionarySet(cls, primaryKey: id.primaryKey, property: p.name, key: k, value)
            default:
                guard case .key(let k) = ins.path[1] else { return .none }
                _ = try store.dictionaryErase(cls, primaryKey: id.primaryKey, property: p.name, key: k)
            }
        }
        // An erased object keeps a dictionary value with its key.
        try tables.save(FieldRow(path: path, clock: clock, present: adding, value: !live && ins.op == .dictionarySet ? value : nil), cls, pk)
        return live ? .plain : .hidden
    }

    /// Whether the live object's set holds the element, or its dictionary the key, of a member
    /// path (`property + separator + key`).
    private func holds(_ p: Property, _ path: String) throws -> Bool {
        let key = memberOfPath(path, property: p.name)
        switch try store.value(cls, primaryKey: id.primaryKey, property: p.name) {
        case .list(let members)?: return members.contains { ExactText.same(keyText($0), key) }
        case .object(let entries)?: return entries[key] != nil
        default: return false
        }
    }

    /// Moves a collection's clear mark up to `clock`.
    private func raiseClear(_ property: String, to clock: Clock) throws {
        let path = property + clearMark
        if let mark = try tables.field(cls, pk, path), mark.clock >= clock { return }
        try tables.save(FieldRow(path: path, clock: clock, present: false, value: nil), cls, pk)
    }

    // MARK: - Paths

    /// A field row's path as elements (`info.city` → [info, city]); nil for set elements,
    /// dictionary keys and clear marks.
    static func path(_ key: String) -> [PathElement]? {
        guard !key.contains(setSeparator), !key.contains(dictionarySeparator), !key.contains(clearMark) else { return nil }
        return key.split(separator: ".", omittingEmptySubsequences: false).map { part in
            if let i = Int(part) { return .index(i) }
            return .key(String(part))
        }
    }

    /// The property of a field row's path and, for a dictionary key, the key.
    static func split(_ key: String) -> (property: String, key: String?)? {
        if let r = key.range(of: dictionarySeparator) { return (String(key[..<r.lowerBound]), String(key[r.upperBound...])) }
        if let r = key.range(of: setSeparator) { return (String(key[..<r.lowerBound]), nil) }
        if key.contains(clearMark) { return nil }
        return (key, nil)
    }
}

extension Value {
    /// The number of elements of a list value (0 otherwise).
    var listCount: Int { if case .list(let items) = self { return items.count } else { return 0 } }
}

/// The sync metadata of a class's objects, loaded at once for upserts: create clocks, erase
/// clocks, field clocks and list identities.
struct ObjectMetadata {
    /// By primary key text (byte for byte, as every key below).
    var created: [ExactText: Clock] = [:]
    var erased: [ExactText: Clock] = [:]
    /// By primary key text, then field path.
    var fields: [ExactText: [ExactText: Clock]] = [:]
    /// By primary key text, then list property.
    var lists: [ExactText: [String: ListSequence]] = [:]

    /// For every object of a class, or for some keys of it (`ServerSyncTables.metadata`).
    static func load(_ store: Store, className: String, key: String? = nil, keys: [Value]? = nil) throws -> ObjectMetadata {
        try ServerSyncTables(store: store).metadata(of: className, key: key, keys: keys)
    }

    func upsert(_ cls: String, _ pk: Value, _ key: String, _ doc: Document) -> SyncInstruction {
        var u = SyncInstruction(.upsert, cls, pk)
        u.object = doc
        let key = ExactText(key)
        u.clock = created[key] ?? .zero
        u.fieldClocks = fields[key] ?? [:]
        u.erasedAt = erased[key]
        var lists = self.lists[key] ?? [:]
        // Lists the server has no identities for (written before sync knew them).
        for (name, value) in doc where lists[name] == nil {
            if case .list(let items) = value, !items.isEmpty, lists[name] == nil {
                lists[name] = ListSequence(unnamed: items.count)
            }
        }
        u.lists = lists
        return u
    }
}

extension ObjectState {
    /// The object as an upsert (its document and every clock a replica merges with), or nil when
    /// it does not exist.
    static func upsert(_ store: Store, _ id: ObjectID) throws -> SyncInstruction? {
        guard let doc = try store.object(id.className, primaryKey: id.primaryKey) else { return nil }
        let key = keyText(id.primaryKey)
        return try ObjectMetadata.load(store, className: id.className, key: key).upsert(id.className, id.primaryKey, key, doc)
    }
}
