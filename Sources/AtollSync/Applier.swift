import AtollJSON
import AtollProtocol
import AtollStore

// One file over 600 lines: the client's merge of a download with its pending changes. Each
// instruction kind's rule reads the same pending index and list sequences, and they are
// checked together against the server's rules (docs/protocol.md), so they stay together.

/// What the client's unacknowledged changesets claim: the newest pending clock per field path,
/// set element and dictionary key, the objects it erases and creates. A download instruction
/// older than a pending write of the same thing is left out: the server will integrate the
/// pending write after it and keep it (docs/protocol.md, "How changes merge").
///
/// Paths and list keys hold user text (a set member, a dictionary key, a primary key): they are
/// compared byte for byte (`ExactText`).
struct PendingIndex {
    var fields: [ObjectID: [ExactText: Clock]] = [:]
    var erased: [ObjectID: Clock] = [:]
    var created: [ObjectID: Clock] = [:]
    var touched: Set<ObjectID> = []
    var lists: Set<ExactText> = []
    /// Per list (the `lists` key): its pending instructions in order, with their clocks.
    var listOps: [ExactText: [(instruction: SyncInstruction, clock: Clock)]] = [:]
    /// Pending counter adds per object and property: kept on top of a set that arrives.
    var adds: [ObjectID: [String: [(clock: Clock, delta: Int64)]]] = [:]
    /// The newest pending set of each path, with its value (what an upsert of the object is
    /// merged with, also when the device no longer holds the object).
    var writes: [ObjectID: [ExactText: (clock: Clock, path: [PathElement], value: Value)]] = [:]
    /// The newest pending add or remove of each set element (`setElementPath`)
    /// and write or erase of each dictionary key, with its value.
    var members: [ObjectID: [ExactText: (clock: Clock, present: Bool, value: Value)]] = [:]

    init(_ changesets: [SyncChangeset]) {
        for cs in changesets {
            for ins in cs.instructions {
                let id = ins.objectID
                touched.insert(id)
                switch ins.op {
                case .create: created[id] = cs.clock
                case .erase: erased[id] = cs.clock
                case .set:
                    fields[id, default: [:]][ExactText(ins.pathKey)] = cs.clock
                    writes[id, default: [:]][ExactText(ins.pathKey)] = (cs.clock, ins.path, ins.value ?? .null)
                case .addInteger:
                    if let p = ins.property, case .int(let d)? = ins.value { adds[id, default: [:]][p, default: []].append((cs.clock, d)) }
                case .setInsert, .setErase:
                    if let p = ins.property {
                        let key = ExactText(setElementPath(p, ins.value ?? .null))
                        fields[id, default: [:]][key] = cs.clock
                        members[id, default: [:]][key] = (cs.clock, ins.op == .setInsert, ins.value ?? .null)
                    }
                case .dictionarySet, .dictionaryErase:
                    if ins.path.count == 2, case .key(let p) = ins.path[0], case .key(let k) = ins.path[1] {
                        let key = ExactText(dictionaryKeyPath(p, k))
                        fields[id, default: [:]][key] = cs.clock
                        members[id, default: [:]][key] = (cs.clock, ins.op == .dictionarySet, ins.value ?? .null)
                    }
                case .setClear, .dictionaryClear:
                    if let p = ins.property { fields[id, default: [:]][ExactText(p + clearMark)] = cs.clock }
                case .listInsert, .listErase, .listSet, .listClear:
                    guard let p = ins.property else { break }
                    let key = Self.listKey(id, p)
                    lists.insert(key)
                    listOps[key, default: []].append((ins, cs.clock))
                default: break
                }
            }
        }
    }

    /// The key of a list in `lists`.
    static func listKey(_ id: ObjectID, _ property: String) -> ExactText {
        ExactText("\(id.className)\u{0}\(keyText(id.primaryKey))\u{0}\(property)")
    }

    /// The clock of the device's newest pending erase of the object when no pending create
    /// follows it (the object is erased here until the server says otherwise), or of the newest
    /// pending erase at all (`always`).
    func erasedHere(_ id: ObjectID) -> Clock? {
        guard let e = erased[id] else { return nil }
        // A create with the erase's clock came after it, in the same transaction.
        return created[id].map { $0 >= e } == true ? nil : e
    }

    /// Whether a pending erase of the object is newer than `clock`: whatever the server wrote at
    /// `clock` is gone once the erase is integrated.
    func erases(_ id: ObjectID, before clock: Clock) -> Bool { erased[id].map { $0 > clock } ?? false }

    /// Whether a pending write of this path (or of a path that contains it) is newer than `clock`.
    func overrides(_ id: ObjectID, _ path: String, _ clock: Clock) -> Bool {
        guard let f = fields[id] else { return false }
        var prefix = ""
        for part in path.split(separator: ".", omittingEmptySubsequences: false) {
            prefix = prefix.isEmpty ? String(part) : prefix + "." + part
            if let c = f[ExactText(prefix)], c > clock { return true }
        }
        return false
    }
}

/// Applies downloaded changesets to the client's store, inside the sync client's write
/// transaction. Instructions that cannot apply here (a link to an object outside the view) are
/// skipped, each on its own: the store rolls back a failed operation.
struct Applier {
    let store: Store
    let sql: MetadataSQL
    let pending: PendingIndex
    /// The schema's classes by name, and the classes with properties that link to top-level
    /// objects: looked up for every instruction.
    private let classes: [String: ObjectSchema]
    private let linking: Set<String>
    /// Per class: the primary key and then the properties an upsert's object is created with
    /// (not computed, not links), in schema order. An object with exactly these keys is created
    /// as it came.
    private let plainFields: [String: [String]]

    init(store: Store, sql: MetadataSQL, pending: PendingIndex) {
        self.store = store
        self.sql = sql
        self.pending = pending
        var classes = [String: ObjectSchema]()
        for c in store.schema.classes { classes[c.name] = c }
        self.classes = classes
        linking = Set(store.schema.classes.filter { c in c.properties.contains { Self.linksObjects($0, classes) } }.map(\.name))
        var plain = [String: [String]]()
        for c in store.schema.classes {
            guard let pk = c.primaryKey else { continue }
            plain[c.name] = [pk] + c.properties.filter { p in
                p.name != pk && !p.isComputed && !Self.linksObjects(p, classes)
            }.map(\.name)
        }
        plainFields = plain
    }

    func pkName(_ cls: String) -> String? { classes[cls]?.primaryKey }

    /// Whether a class has properties that link to top-level objects.
    func hasLinks(_ cls: String) -> Bool { linking.contains(cls) }

    /// Applies downloaded instructions in order. New objects — a create with its own writes, or
    /// an upsert of an object the device does not have — are created in batches (without their
    /// links, which `links` writes once all exist); the rest one by one. An instruction this
    /// replica cannot apply (a link out of view) is skipped on its own.
    @discardableResult
    func applyAll(_ instructions: [(SyncInstruction, Clock)]) throws -> [SyncInstruction] {
        // A large download's new objects are put together on another core meanwhile.
        let schema = store.schema
        let whole = instructions.count < instructionsWorthAnotherCore ? nil : Eventually { CreateRuns(instructions, schema: schema) }
        let fresh = try freshObjects(instructions)
        var prepared = whole?.value()
        var batch = [(doc: Document, lists: [String: ListSequence])]()
        var batchClass = ""
        func flush() throws {
            guard !batch.isEmpty else { return }
            defer { batch = [] }
            try sql.execute("SAVEPOINT atoll_batch")
            do {
                try store.createMany(batchClass, batch.map(\.doc))
                var lists = [(pk: String, path: String, seq: ListSequence)]()
                for b in batch {
                    guard let pkName = pkName(batchClass), let pk = b.doc[pkName] else { continue }
                    for (p, seq) in b.lists { lists.append((keyText(pk), p, seq)) }
                }
                try ClientTables.saveLists(sql, batchClass, lists)
                try sql.execute("RELEASE atoll_batch")
            } catch {
                try sql.execute("ROLLBACK TO atoll_batch")
                try sql.execute("RELEASE atoll_batch")
                throw BatchFailed()
            }
        }
        var pendingBlocks = [(ArraySlice<(SyncInstruction, Clock)>)]()
        func flushOrReplay() throws {
            do { try flush() } catch is BatchFailed {
                for block in pendingBlocks { for (ins, c) in block { try? apply(ins, clock: ins.clock ?? c) } }
            }
            pendingBlocks = []
        }
        // The first create (or upsert) of each object in the download, found when first needed.
        var createdAt: [ObjectID: Int]?
        // Runs of an object's instructions put off until every object the download creates
        // exists: they start with a link to one created further on (the server sends a
        // changeset's instructions object by object, and the object a link names may come later).
        var deferred = [Range<Int>]()
        func linksAhead(_ i: Int) -> Bool {
            guard let target = linkTarget(instructions[i].0), !here(target.className, target.primaryKey) else { return false }
            if createdAt == nil {
                var first = [ObjectID: Int]()
                for k in instructions.indices where instructions[k].0.op == .create || instructions[k].0.op == .upsert {
                    let id = instructions[k].0.objectID
                    if first[id] == nil { first[id] = k }
                }
                createdAt = first
            }
            return (createdAt?[target] ?? i) > i
        }
        // Objects this download creates that the device does not hold but has pending changes
        // of (it removed them: an eviction, a refused write): created as upserts, which merge
        // those changes the way the server will (a create would leave the fields they wrote at
        // their defaults: the device's own values went with the object).
        var merged = [SyncInstruction]()
        var i = instructions.startIndex
        while i < instructions.endIndex {
            let (ins, c) = instructions[i]
            if ins.op == .create, !pending.touched.isEmpty, pending.touched.contains(ins.objectID), let pkName = pkName(ins.className),
               !here(ins.className, ins.primaryKey) {
                var j = i + 1
                while j < instructions.endIndex, instructions[j].0.sameObject(as: ins), instructions[j].1 == c,
                      instructions[j].0.op != .create, instructions[j].0.op != .erase { j += 1 }
                let block = instructions[i..<j].map(\.0)[...]
                if let doc = SyncInstruction.wholeObject(block, primaryKey: pkName) {
                    var upsert = SyncInstruction(.upsert, ins.className, ins.primaryKey)
                    upsert.object = doc
                    upsert.clock = c
                    upsert.lists = SyncInstruction.listSequences(block, clock: c)
                    try flushOrReplay()
                    try self.upsert(upsert, pkName)
                    merged.append(upsert)
                    i = j
                    continue
                }
            }
            if linksAhead(i) {
                var end = i + 1
                while end < instructions.endIndex, instructions[end].0.sameObject(as: ins) { end += 1 }
                deferred.append(i..<end)
                i = end
                continue
            }
            if fresh.contains(ins.objectID, pending), let pkName = pkName(ins.className) {
                if ins.op == .upsert, let doc = freshUpsert(ins) {
                    if batchClass != ins.className { try flushOrReplay() }
                    batchClass = ins.className
                    var lists = [String: ListSequence]()
                    for (p, seq) in ins.lists where classes[ins.className]?[property: p]?.isList == true {
                        lists[p] = seq
                    }
                    batch.append((doc, lists))
                    pendingBlocks.append(instructions[i..<(i + 1)])
                    i += 1
                    continue
                }
                if ins.op == .create {
                    let run = prepared?.run(at: i) ?? {
                        let j = CreateRuns.end(instructions, at: i, \.0)
                        let block = instructions[i..<j].map(\.0)[...]
                        let doc = SyncInstruction.wholeObject(block, primaryKey: pkName)
                        return CreateRuns.Run(end: j, doc: doc, lists: doc == nil ? [:] : SyncInstruction.listSequences(block, clock: c))
                    }()
                    let j = run.end
                    if let doc = run.doc, !hasLinkValues(ins.className, doc) {
                        if batchClass != ins.className { try flushOrReplay() }
                        batchClass = ins.className
                        batch.append((doc, run.lists))
                        pendingBlocks.append(instructions[i..<j])
                        i = j
                        continue
                    }
                }
            }
            try flushOrReplay()
            try? apply(ins, clock: ins.clock ?? c)
            i += 1
        }
        try flushOrReplay()
        for run in deferred {
            for (ins, c) in instructions[run] { try? apply(ins, clock: ins.clock ?? c) }
        }
        return merged
    }

    /// The object an instruction links to, when it writes a link (a link property, or an
    /// element of a list, set or dictionary of links) to a top-level object.
    private func linkTarget(_ ins: SyncInstruction) -> ObjectID? {
        switch ins.op {
        case .set where ins.path.count == 1:
            break
        case .listInsert, .listSet, .setInsert:
            break
        case .dictionarySet where ins.path.count == 2:
            break
        default:
            return nil
        }
        guard let value = ins.value, value != .null, let name = ins.property,
              let p = classes[ins.className]?[property: name], linkLike(p), let target = p.objectType else { return nil }
        if case .link(let link) = value { return ObjectID(link.className, link.primaryKey) }
        return ObjectID(target, value)
    }

    /// Applies downloaded instructions (`applyAll`), then the links of the upserts among them,
    /// once every object they name exists.
    func applyDownload(_ instructions: [(SyncInstruction, Clock)]) throws {
        let merged = try applyAll(instructions)
        // (Walked where they are: a bootstrap's download is a hundred thousand upserts.)
        for (ins, _) in instructions where ins.op == .upsert && hasLinks(ins.className) {
            if let pk = pkName(ins.className) { try? links(ins, pk) }
        }
        for ins in merged where hasLinks(ins.className) {
            if let pk = pkName(ins.className) { try? links(ins, pk) }
        }
        try restorePendingLinks(to: instructions)
    }

    /// Pending link writes to objects this download brings (back). The device's link went to
    /// none when the object was erased or left it; the server keeps a link newer than the
    /// object's erase, and shows it when the object comes back, so the device does too. (A
    /// holder the server has it sends itself; these holders' writes have not reached it yet.)
    private func restorePendingLinks(to instructions: [(SyncInstruction, Clock)]) throws {
        // Most downloads have nothing to do here: no pending link write, nothing hidden.
        let hidden = try ClientTables.anyHiddenTargets(sql)
        guard hidden || !pending.writes.isEmpty else { return }
        // Each object that arrives, with the clock a link must be newer than to come back with
        // it: its erase (an upsert says), or, not knowing it, its create.
        var arrived = [ObjectID: Clock]()
        for (ins, c) in instructions where ins.op == .upsert || ins.op == .create {
            let floor = ins.op == .upsert ? ins.erasedAt ?? .zero : ins.clock ?? c
            arrived[ins.objectID] = max(arrived[ins.objectID] ?? .zero, floor)
        }
        guard !arrived.isEmpty else { return }
        // Elements of lists of links hidden when the object left (the device's own inserts
        // among them: their holders may not have reached the server).
        for target in try hidden ? ClientTables.hiddenTargets(sql, among: arrived) : [] where here(target.className, target.primaryKey) {
            for s in try ClientTables.showLinks(sql, store.schema, to: target, newerThan: arrived[target] ?? .zero) {
                guard let holder = try? EJSON.parse(s.pk) else { continue }
                try? store.listInsert(s.className, primaryKey: holder, property: s.property, target.primaryKey, at: s.index)
            }
        }
        guard !pending.writes.isEmpty else { return }
        for (holder, writes) in pending.writes where hasLinks(holder.className) {
            for (_, w) in writes where w.path.count == 1 && w.value != .null {
                let link = SyncInstruction(.set, holder.className, holder.primaryKey, path: w.path, value: w.value)
                guard let target = linkTarget(link), let floor = arrived[target], w.clock > floor,
                      here(target.className, target.primaryKey), !pending.erases(holder, before: w.clock),
                      let property = link.property,
                      try store.value(holder.className, primaryKey: holder.primaryKey, property: property) == .null else { continue }
                try? store.apply(set: link)
            }
        }
    }

    private struct BatchFailed: Error {}

    /// Which objects created or upserted here are new: the device does not have them and no
    /// pending change names them. Kept as the objects the device has, by class, which for a
    /// bootstrap into an empty realm is nothing at all.
    private struct Fresh {
        var present: [String: Set<Value>] = [:]
        var classes: Set<String> = []

        func contains(_ id: ObjectID, _ pending: PendingIndex) -> Bool {
            guard classes.contains(id.className), present[id.className]?.contains(id.primaryKey) != true else { return false }
            return pending.touched.isEmpty || !pending.touched.contains(id)
        }
    }

    private func freshObjects(_ instructions: [(SyncInstruction, Clock)]) throws -> Fresh {
        var byClass = [String: [Value]]()
        for (ins, _) in instructions where ins.op == .create || ins.op == .upsert { byClass[ins.className, default: []].append(ins.primaryKey) }
        var out = Fresh()
        for (cls, keys) in byClass where pkName(cls) != nil {
            out.classes.insert(cls)
            let present = try store.primaryKeys(cls, among: keys)
            if !present.isEmpty { out.present[cls] = Set(present) }
        }
        return out
    }

    /// An upsert's object without its links (written afterwards by `links`).
    private func freshUpsert(_ ins: SyncInstruction) -> Document? {
        guard let object = ins.object, let schema = classes[ins.className], let pkName = schema.primaryKey else { return nil }
        if object.keys == plainFields[ins.className], object.values.first == ins.primaryKey { return object }
        var doc = Document()
        doc[pkName] = ins.primaryKey
        for p in schema.properties where p.name != pkName && !p.isComputed && !linkLike(p) {
            if let v = object[p.name] { doc[p.name] = v }
        }
        return doc
    }

    /// Whether a document gives a value to a property that links to top-level objects.
    private func hasLinkValues(_ cls: String, _ doc: Document) -> Bool {
        guard let schema = classes[cls] else { return true }
        return schema.properties.contains { p in linkLike(p) && doc[p.name] != nil && doc[p.name] != .null }
    }

    func apply(_ ins: SyncInstruction, clock: Clock) throws {
        let id = ins.objectID
        let cls = ins.className
        guard let pkName = pkName(cls) else { return }
        let exists = { try self.store.object(cls, primaryKey: ins.primaryKey) != nil }
        switch ins.op {
        case .create:
            if try exists() { return }
            // Erased here by a pending erase newer than this create: it stays erased, as it will
            // on the server.
            if let e = pending.erasedHere(id), e > clock { return }
            var d = Document()
            d[pkName] = ins.primaryKey
            _ = try store.create(cls, d)
        case .erase, .evict:
            guard try exists() else { return }
            // A pending re-create newer than this erase will bring the object back on the server.
            if ins.op == .erase, let c = pending.created[id], c > clock { return }
            // An eviction says the server's view lacks the object as the server has it now; a
            // pending create of it is integrated after, and the server says then what becomes of
            // it (it stays, or comes back refused). Taken now, it would be gone with links to it.
            if ins.op == .evict, pending.created[id] != nil { return }
            try delete(id)
        case .set:
            guard try exists(), !pending.overrides(id, ins.pathKey, clock), !pending.erases(id, before: clock) else { return }
            try store.apply(set: ins)
            // Pending adds newer than this set stay on top of it (as the server will do).
            if ins.path.count == 1, let p = ins.property {
                let newer = (pending.adds[id]?[p] ?? []).filter { $0.clock > clock }.reduce(Int64(0)) { $0 &+ $1.delta }
                if newer != 0 { try store.addInteger(cls, primaryKey: ins.primaryKey, property: p, newer) }
            }
        case .addInteger:
            guard try exists(), let p = ins.property, case .int(let d)? = ins.value,
                  !pending.overrides(id, ins.pathKey, clock), !pending.erases(id, before: clock) else { return }
            try store.addInteger(cls, primaryKey: ins.primaryKey, property: p, d)
        case .listInsert, .listErase, .listSet, .listClear:
            guard try exists(), let property = ins.property else { return }
            // An element inserted before a pending erase of the object is gone with it.
            if ins.op == .listInsert, let e = ins.element, pending.erases(id, before: e.clock) { return }
            let key = keyText(ins.primaryKey)
            var seq = try ClientTables.list(sql, cls, key, property) ?? ListSequence()
            if let p = classes[cls]?[property: property], linkLike(p), let target = p.objectType {
                // A list of links: an element whose object is not on the device is hidden.
                let linked = ClientTables.linkKey(ins.value)
                switch ins.op {
                case .listInsert:
                    guard let e = ins.element, !seq.contains(e), let linked else { return }
                    if let index = seq.insert(e, after: ins.after, clock: clock, value: linked, hidden: !here(target, linked)) {
                        try store.listInsert(cls, primaryKey: ins.primaryKey, property: property, linked, at: index)
                    }
                case .listSet:
                    guard let e = ins.element, let entry = seq.entry(e), entry.alive, clock >= entry.valueClock, let linked else { return }
                    if let at = seq.set(e, clock: clock, value: linked) { try store.listErase(cls, primaryKey: ins.primaryKey, property: property, at: at) }
                    if here(target, linked) {
                        let at = seq.show(e) ?? seq.liveIDs.firstIndex(of: e)
                        if let at { try store.listInsert(cls, primaryKey: ins.primaryKey, property: property, linked, at: at) }
                    } else {
                        _ = seq.hide(e)
                    }
                case .listErase:
                    guard let e = ins.element else { return }
                    if let index = seq.erase(e) { try store.listErase(cls, primaryKey: ins.primaryKey, property: property, at: index) }
                default:
                    for index in seq.clear(before: ins.element ?? ElementID(clock, .max)) {
                        try store.listErase(cls, primaryKey: ins.primaryKey, property: property, at: index)
                    }
                }
                try ClientTables.saveList(sql, cls, key, property, seq)
                return
            }
            switch ins.op {
            case .listInsert:
                guard let e = ins.element, !seq.contains(e) else { return }
                // One older than a clear is kept unseen: later inserts may name it as their neighbour.
                if let index = seq.insert(e, after: ins.after, clock: clock) {
                    try store.listInsert(cls, primaryKey: ins.primaryKey, property: property, ins.value ?? .null, at: index)
                }
            case .listErase:
                guard let e = ins.element, let index = seq.erase(e) else { return }
                try store.listErase(cls, primaryKey: ins.primaryKey, property: property, at: index)
            case .listSet:
                guard let e = ins.element, let index = seq.set(e, clock: clock) else { return }
                try store.listSet(cls, primaryKey: ins.primaryKey, property: property, ins.value ?? .null, at: index)
            default:
                for index in seq.clear(before: ins.element ?? ElementID(clock, .max)) {
                    try store.listErase(cls, primaryKey: ins.primaryKey, property: property, at: index)
                }
            }
            try ClientTables.saveList(sql, cls, key, property, seq)
        case .setInsert, .setErase:
            guard try exists(), let property = ins.property, !pending.erases(id, before: clock) else { return }
            let value = ins.value ?? .null
            if let c = pending.fields[id]?[ExactText(setElementPath(property, value))], c > clock { return }
            if let c = pending.fields[id]?[ExactText(property + clearMark)], c > clock { return }
            if ins.op == .setInsert {
                _ = try store.setInsert(cls, primaryKey: ins.primaryKey, property: property, value)
            } else {
                _ = try store.setErase(cls, primaryKey: ins.primaryKey, property: property, value)
            }
        case .setClear:
            guard try exists(), let property = ins.property,
                  case .list(let members)? = try store.value(cls, primaryKey: ins.primaryKey, property: property) else { return }
            for value in members {
                if let c = pending.fields[id]?[ExactText(setElementPath(property, value))], c > clock { continue }
                _ = try store.setErase(cls, primaryKey: ins.primaryKey, property: property, value)
            }
        case .dictionarySet, .dictionaryErase:
            guard try exists(), ins.path.count == 2, case .key(let property) = ins.path[0], case .key(let k) = ins.path[1],
                  !pending.erases(id, before: clock) else { return }
            if let c = pending.fields[id]?[ExactText(dictionaryKeyPath(property, k))], c > clock { return }
            if let c = pending.fields[id]?[ExactText(property + clearMark)], c > clock { return }
            if ins.op == .dictionarySet {
                try store.dictionarySet(cls, primaryKey: ins.primaryKey, property: property, key: k, ins.value ?? .null)
            } else {
                _ = try store.dictionaryErase(cls, primaryKey: ins.primaryKey, property: property, key: k)
            }
        case .dictionaryClear:
            guard try exists(), let property = ins.property,
                  case .object(let entries)? = try store.value(cls, primaryKey: ins.primaryKey, property: property) else { return }
            for k in entries.keys {
                if let c = pending.fields[id]?[ExactText(dictionaryKeyPath(property, k))], c > clock { continue }
                _ = try store.dictionaryErase(cls, primaryKey: ins.primaryKey, property: property, key: k)
            }
        case .upsert:
            try upsert(ins, pkName)
        case .keep:
            // The view holds these of the class: the others leave the device (not the server),
            // unless a pending change names them (the server decides those when it gets it).
            guard case .list(let keys)? = ins.value else { return }
            let kept = Set(keys.map { ExactText(keyText($0)) })
            for pk in try store.primaryKeys(cls) where !kept.contains(ExactText(keyText(pk))) {
                let held = ObjectID(cls, pk)
                if !pending.touched.contains(held) { try delete(held) }
            }
        }
    }

    /// Writes an object as the server holds it, merged with what the device has pending for it
    /// by the rules the server will integrate that with: per property, set element and dictionary
    /// key the newer write wins, writes older than the newest erase (the server's or a pending
    /// one) are gone, pending list instructions replay on the server's sequence, pending counter
    /// adds newer than the value stay on top. Links are written in a second step (`links`), once
    /// every object of the batch exists.
    func upsert(_ ins: SyncInstruction, _ pkName: String) throws {
        let id = ins.objectID
        guard let object = ins.object, let schema = classes[id.className] else { return }
        let base = ins.clock ?? .zero
        let key = keyText(ins.primaryKey)
        // Erased here by a pending erase newer than the server's create: it stays erased, as it
        // will on the server once the erase is integrated.
        if let e = pending.erasedHere(id), e > base {
            if try store.object(id.className, primaryKey: ins.primaryKey) != nil { try delete(id) } else { try ClientTables.dropLists(sql, id.className, key) }
            return
        }
        // Writes older than this are gone: the server's newest erase, or the device's own.
        let floor = [ins.erasedAt, pending.erased[id]].compactMap { $0 }.max()
        func outlives(_ c: Clock) -> Bool { floor.map { c >= $0 } ?? true }
        var doc = Document()
        doc[pkName] = ins.primaryKey
        var merged = [String: ListSequence]()
        let touched = pending.touched.contains(id)
        for p in schema.properties where p.name != pkName && !p.isComputed {
            guard let value = object[p.name] else { continue }
            if linkLike(p) { continue }
            switch p.collection {
            case .list where touched:
                let (values, seq) = try mergedList(ins, p.name, value, floor: pending.erased[id])
                doc[p.name] = .list(values)
                merged[p.name] = seq
            case .set where touched, .dictionary where touched:
                doc[p.name] = mergedMembers(ins, p, value, base, outlives)
            case .single where touched:
                doc[p.name] = mergedValue(ins, p, value, base, outlives)
            default:
                doc[p.name] = value
            }
        }
        _ = try store.create(id.className, doc, update: .modified)
        for p in schema.properties where p.isList {
            var seq = merged[p.name] ?? ins.lists[p.name] ?? ListSequence()
            // Elements older than the object's last erase are gone, also those that come later.
            if let erased = ins.erasedAt, seq.clearedBefore.map({ $0 < ElementID(erased, 0) }) ?? true {
                _ = seq.clear(before: ElementID(erased, 0))
            }
            try ClientTables.saveList(sql, id.className, key, p.name, seq)
        }
    }

    // An upsert of an object with pending changes keeps them, element by element, where they
    // are newer than the server's (as the server will when it integrates them); everything else
    // is the server's.

    /// A single value: the server's or the newest pending write of it, whichever is newer (and
    /// outlives the newest erase), with newer pending writes into it (embedded objects) and
    /// newer pending adds (counters) on top.
    private func mergedValue(_ ins: SyncInstruction, _ p: Property, _ server: Value, _ base: Clock,
                             _ outlives: (Clock) -> Bool) -> Value {
        let id = ins.objectID
        let serverClock = ins.fieldClocks[ExactText(p.name)] ?? base
        var value = outlives(serverClock) ? server : p.implicitDefault
        var clock = serverClock
        let writes = pending.writes[id] ?? [:]
        if let w = writes[ExactText(p.name)], outlives(w.clock), w.clock > clock || !outlives(serverClock) {
            value = w.value
            clock = w.clock
        }
        for w in writes.values.filter({ $0.path.count > 1 && $0.path.first == .key(p.name) }).sorted(by: { $0.clock < $1.clock })
        where w.clock >= clock && outlives(w.clock) {
            if let replaced = try? value.replacing(at: w.path.dropFirst(), with: w.value) { value = replaced }
        }
        if case .int(let n) = value {
            // (An add with the clock of the pending set that won came after it in the same transaction.)
            let newer = (pending.adds[id]?[p.name] ?? []).filter { $0.clock >= clock && outlives($0.clock) }
            value = .int(newer.reduce(n) { $0 &+ $1.delta })
        }
        return value
    }

    /// A set's members or a dictionary's entries: each the server's or the newest pending add
    /// or remove (write or erase) of it, whichever is newer; none older than the collection's
    /// newest pending clear or the object's newest erase.
    private func mergedMembers(_ ins: SyncInstruction, _ p: Property, _ server: Value, _ base: Clock,
                               _ outlives: (Clock) -> Bool) -> Value {
        let id = ins.objectID
        let isSet = p.collection == .set
        let separator = isSet ? setSeparator : dictionarySeparator
        let clear = pending.fields[id]?[ExactText(p.name + clearMark)]
        func counts(_ c: Clock) -> Bool { outlives(c) && (clear.map { c >= $0 } ?? true) }
        var entries = [(key: String, value: Value)]()
        var seen = Set<ExactText>()
        var serverEntries = [(key: String, value: Value)]()
        switch server {
        case .list(let members): serverEntries = members.map { (keyText($0), $0) }
        case .object(let d): serverEntries = d.map { ($0.0, $0.1) }
        default: break
        }
        let mine = (pending.members[id] ?? [:]).filter { $0.key.hasPrefix(p.name + separator) }
        for (k, v) in serverEntries {
            seen.insert(ExactText(k))
            let path = ExactText(p.name + separator + k)
            let serverClock = ins.fieldClocks[path] ?? base
            if let m = mine[path], m.clock > serverClock, counts(m.clock) {
                if m.present { entries.append((k, m.value)) }
            } else if counts(serverClock) {
                entries.append((k, v))
            }
        }
        for (path, m) in mine.sorted(by: { $0.key < $1.key }) where m.present {
            let k = memberOfPath(path.text, property: p.name)
            guard !seen.contains(ExactText(k)), counts(m.clock), m.clock > (ins.fieldClocks[path] ?? .zero) else { continue }
            entries.append((k, m.value))
        }
        if isSet { return .list(entries.map(\.value)) }
        var d = Document()
        for (k, v) in entries { d[k] = v }
        return .object(d)
    }

    /// A list as the server holds it with the device's pending list instructions replayed on
    /// it, in order, by the rules the server will integrate them with; elements older than a
    /// pending erase of the object (`floor`) are gone.
    private func mergedList(_ ins: SyncInstruction, _ property: String, _ server: Value,
                            floor: Clock?) throws -> (values: [Value], seq: ListSequence) {
        var seq = ins.lists[property] ?? ListSequence()
        var values = [Value]()
        if case .list(let items) = server { values = items }
        guard values.count == seq.liveCount else {
            throw ProtocolError("upsert of \(ins.className) \(keyText(ins.primaryKey)): \(property) has \(values.count) values for \(seq.liveCount) elements")
        }
        if let floor { for i in seq.clear(before: ElementID(floor, 0)) { values.remove(at: i) } }
        for (op, clock) in pending.listOps[PendingIndex.listKey(ins.objectID, property)] ?? [] {
            switch op.op {
            case .listInsert:
                if let e = op.element, let i = seq.insert(e, after: op.after, clock: clock) { values.insert(op.value ?? .null, at: i) }
            case .listErase:
                if let e = op.element, let i = seq.erase(e) { values.remove(at: i) }
            case .listSet:
                if let e = op.element, let i = seq.set(e, clock: clock) { values[i] = op.value ?? .null }
            default:
                for i in seq.clear(before: op.element ?? ElementID(clock, .max)) { values.remove(at: i) }
            }
        }
        return (values, seq)
    }

    /// Deletes an object here (the store drops the links to it, and so do the sequences of the
    /// lists of links that held it) and forgets its lists.
    func delete(_ id: ObjectID) throws {
        try ClientTables.hideLinks(sql, store.schema, to: id)
        try store.delete(id.className, primaryKey: id.primaryKey)
        try ClientTables.dropLists(sql, id.className, keyText(id.primaryKey))
    }

    /// Whether an object is on the device.
    private func here(_ cls: String, _ key: Value) -> Bool {
        (try? store.primaryKeys(cls, among: [key]).isEmpty) == false
    }

    /// Whether a property holds links (written after the objects they point to exist).
    func linkLike(_ p: Property) -> Bool { Self.linksObjects(p, classes) }

    /// Whether a property links to top-level objects (not embedded ones), among `classes`.
    private static func linksObjects(_ p: Property, _ classes: [String: ObjectSchema]) -> Bool {
        p.isLink && classes[p.objectType ?? ""]?.isEmbedded != true
    }

    /// The links of an upsert, after every object of its batch exists: a link to an object that
    /// is not on the device (outside the view) is left null, a list drops it.
    func links(_ ins: SyncInstruction, _ pkName: String) throws {
        let id = ins.objectID
        if let e = pending.erasedHere(id), e > (ins.clock ?? .zero) { return }
        guard let object = ins.object, let schema = store.schema.classes.first(where: { $0.name == id.className }),
              try store.object(id.className, primaryKey: ins.primaryKey) != nil else { return }
        let base = ins.clock ?? .zero
        for p in schema.properties where linkLike(p) {
            guard let value = object[p.name] else { continue }
            if p.isList {
                try linkList(ins, p, value)
                continue
            }
            var link = value
            if pending.overrides(id, p.name, ins.fieldClocks[ExactText(p.name)] ?? base) {
                // The device's own newer write stands, written again: the object may have left
                // the device and come back without it.
                guard let own = pending.writes[id]?[ExactText(p.name)], own.path.count == 1 else { continue }
                link = own.value
            }
            var doc = Document()
            doc[pkName] = ins.primaryKey
            doc[p.name] = try present(link, p)
            _ = try store.create(id.className, doc, update: .modified)
        }
    }

    /// A list of links of an upsert: the server's sequence (with the object each element links
    /// to) and the device's pending list instructions replayed on it; elements whose object is
    /// not on the device are hidden. Written to the store and kept as the list's sequence.
    private func linkList(_ ins: SyncInstruction, _ p: Property, _ server: Value) throws {
        guard let target = p.objectType else { return }
        let id = ins.objectID
        var seq = ins.lists[p.name] ?? ListSequence()
        var values = [Value]()
        if case .list(let items) = server { values = items.map { ClientTables.linkKey($0) ?? .null } }
        guard values.count == seq.liveCount else {
            throw ProtocolError("upsert of \(ins.className) \(keyText(ins.primaryKey)): \(p.name) has \(values.count) values for \(seq.liveCount) elements")
        }
        seq.keepShownValues(values)
        if let floor = pending.erased[id] { _ = seq.clear(before: ElementID(floor, 0)) }
        if let erased = ins.erasedAt, seq.clearedBefore.map({ $0 < ElementID(erased, 0) }) ?? true { _ = seq.clear(before: ElementID(erased, 0)) }
        for (op, clock) in pending.listOps[PendingIndex.listKey(id, p.name)] ?? [] {
            switch op.op {
            case .listInsert: if let e = op.element { _ = seq.insert(e, after: op.after, clock: clock, value: ClientTables.linkKey(op.value)) }
            case .listErase: if let e = op.element { _ = seq.erase(e) }
            case .listSet: if let e = op.element { _ = seq.set(e, clock: clock, value: ClientTables.linkKey(op.value)) }
            default: _ = seq.clear(before: op.element ?? ElementID(clock, .max))
            }
        }
        for e in seq.entries where e.shown {
            if !(e.value.map { here(target, $0) } ?? false) { _ = seq.hide(e.id) }
        }
        var doc = Document()
        doc[pkName(ins.className) ?? "_id"] = ins.primaryKey
        doc[p.name] = .list(seq.entries.filter(\.shown).map { $0.value ?? .null })
        _ = try store.create(ins.className, doc, update: .modified)
        try ClientTables.saveList(sql, ins.className, keyText(ins.primaryKey), p.name, seq)
    }

    /// A link value without the targets that are not on the device.
    func present(_ value: Value, _ p: Property) throws -> Value {
        guard let target = p.objectType else { return value }
        func here(_ v: Value) throws -> Bool {
            if case .null = v { return false }
            let pk: Value
            if case .link(let l) = v { pk = l.primaryKey } else { pk = v }
            return try store.object(target, primaryKey: pk) != nil
        }
        switch value {
        case .list(let items): return .list(try items.filter(here))
        case .object(let d) where p.collection == .dictionary:
            var out = Document()
            for (k, v) in d { out[k] = try here(v) ? v : .null }
            return .object(out)
        default: return try here(value) ? value : .null
        }
    }
}
