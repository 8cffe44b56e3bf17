import AtollJSON
import AtollProtocol
import AtollStore

/// What integrating one instruction did to its object (docs/protocol.md, "How changes merge").
enum Outcome: Int, Comparable {
    /// Nothing: it was older than what the object has (or it named nothing).
    case none
    /// Only the object's metadata changed: a write kept with an erased object, a create older
    /// than the object's newest, an erase of an erased object.
    case hidden
    /// The object changed as the instruction says: other replicas apply the instruction itself.
    case plain
    /// The object changed in a way the instruction alone does not say (it came back with what
    /// was kept while it was erased, an erase older than its create took its older elements, a
    /// write was put under newer ones): other replicas get the object whole.
    case whole

    static func < (a: Outcome, b: Outcome) -> Bool { a.rawValue < b.rawValue }
}

/// What integrating one upload did.
struct Integration {
    /// The instructions that changed the store as they say, in order, and an upsert for each
    /// object that changed otherwise: what the history keeps and other clients download.
    var effects: [SyncInstruction] = []
    /// Objects refused by the write rules, with the reason.
    var rejected: [CompensatingWrite] = []
    /// Objects for which the uploading client's own view may be wrong: one of its instructions
    /// did not take effect as written (older than what the server has, kept with an erased
    /// object, merged into an existing object) or changed more than it says. The uploader gets
    /// their state after the upload's acknowledgement.
    var corrections: [ObjectID] = []
    /// Objects whose state changed without an effect naming them (kept with an erased object,
    /// a newer create, a link that waits for them): with the effects' objects, what a shared
    /// storage saves.
    var changedWithoutEffects: [ObjectID] = []
    /// Whether the effects are the uploaded instructions as they came (the usual case: every
    /// instruction took effect as written), so that their text need not be made again.
    var effectsAreTheInstructions = false
    /// Every object the effects touched.
    var touched: [ObjectID] { effects.objectIDs }
}

/// Integrates uploaded changesets into the server's store by the rules of docs/protocol.md ("How
/// changes merge"): an object exists while its newest create is not older than its newest
/// erase; a write older than the newest erase is gone, and a newer one is kept (with the erased
/// object, if need be, to come back with it); fields are last-writer-wins by clock (writes into
/// embedded objects apply in clock order), lists by element identity, set elements and
/// dictionary keys by clock against the collection's last clear, counters as the newest set plus
/// the adds newer than it. Every arrival order gives the same state. The caller holds the
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
    let mayWrite: (String, [Value]) throws -> [ExactText: String]
    /// Whether the user may write every object of a class, whatever its state: then `mayWrite`
    /// is not asked, and the objects after integration are not looked up.
    let mayWriteAll: (String) -> Bool

    init(store: Store, mayWrite: @escaping (String, [Value]) throws -> [ExactText: String] = { _, _ in [:] },
         mayWriteAll: @escaping (String) -> Bool = { _ in false }) {
        self.store = store
        self.mayWrite = mayWrite
        self.mayWriteAll = mayWriteAll
    }

    /// With a check of one object at a time (its document as the store has it).
    init(store: Store, mayWriteObject: @escaping (ObjectID, Document?) throws -> String?) {
        self.init(store: store) { cls, keys in
            var out = [ExactText: String]()
            for key in keys {
                let doc = try store.object(cls, primaryKey: key)
                if let reason = try mayWriteObject(ObjectID(cls, key), doc) { out[exactKey(key)] = reason }
            }
            return out
        }
    }

    /// Which of `ids` the user may not write as they are now: existing objects only.
    private func refused(_ ids: [ObjectID], _ denied: inout [ObjectID: String]) throws -> Bool {
        var live: [String: Set<ExactText>]? = nil
        return try refused(ids, &denied, live: &live)
    }

    /// The same, and (when `live` is not nil) the keys as text of those that exist go into
    /// `live`, per class.
    private func refused(_ ids: [ObjectID], _ denied: inout [ObjectID: String], live: inout [String: Set<ExactText>]?) throws -> Bool {
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
            if live != nil { live?[cls, default: []].formUnion(existing.map(exactKey)) }
            guard !existing.isEmpty, !unconditional else { continue }
            let reasons = try mayWrite(cls, existing)
            if reasons.isEmpty { continue }
            for k in existing { if let r = reasons[exactKey(k)] { denied[ObjectID(cls, k)] = r; any = true } }
        }
        return any
    }

    var tables: ServerSyncTables { ServerSyncTables(store: store) }

    func integrate(_ uploaded: SyncChangeset) throws -> Integration {
        // Merged by clock alone: what a later instruction of the changeset makes moot goes first.
        let changeset = uploaded.normalized()
        let normal = changeset.instructions.count == uploaded.instructions.count
        // A large changeset's new objects are put together on another core meanwhile.
        let instructions = changeset.instructions, schema = store.schema
        let whole = instructions.count < instructionsWorthAnotherCore ? nil : Eventually { CreateRuns(instructions, schema: schema) }
        var denied = [ObjectID: String]()
        let order = changeset.instructions.objectIDs
        // Objects the user may not write as they are now (and which exist).
        var found: [String: Set<ExactText>]? = [:]
        _ = try refused(order, &denied, live: &found)
        let live = found ?? [:]
        // Apply what is left; refuse objects whose new state breaks the rules or that fail to
        // apply, and try again without them (each round refuses at least one more object).
        while true {
            try store.withMetadata { try $0.execute("SAVEPOINT atoll_integrate") }
            var applied = Applied()
            var refusedNow = false
            do {
                // Found for all the instructions: of use while none is refused.
                let prepared = denied.isEmpty ? whole?.value() : nil
                applied = try applyAll(changeset, live: live, skipping: denied, prepared: prepared)
            } catch let failure as RefusedObject {
                denied[failure.id] = failure.reason
                refusedNow = true
            }
            // Every instruction an effect: the objects touched are those of the changeset.
            if !refusedNow {
                let touched = applied.kept.count == changeset.instructions.count ? order : applied.kept.objectIDs
                refusedNow = try refused(touched, &denied)
            }
            if refusedNow {
                try store.withMetadata { sql in
                    try sql.execute("ROLLBACK TO atoll_integrate")
                    try sql.execute("RELEASE atoll_integrate")
                }
                continue
            }
            try store.withMetadata { try $0.execute("RELEASE atoll_integrate") }
            var result = Integration()
            result.rejected = denied.isEmpty ? [] : order.filter { denied[$0] != nil }.map {
                CompensatingWrite(className: $0.className, primaryKey: $0.primaryKey, reason: denied[$0] ?? "")
            }
            if !applied.corrections.isEmpty { result.corrections = (order + applied.others).filter { applied.corrections.contains($0) } }
            if !applied.changedWithoutEffect.isEmpty {
                result.changedWithoutEffects = (order + applied.others).filter { applied.changedWithoutEffect.contains($0) }
            }
            result.effects = try effects(applied, order: order)
            result.effectsAreTheInstructions = normal && denied.isEmpty && applied.whole.isEmpty && applied.keptAll
            return result
        }
    }

    /// What `applyAll` did: the instructions that took effect as written, the objects that must
    /// travel whole, those whose uploader must be told their state, and those that changed.
    private struct Applied {
        var kept: [SyncInstruction] = []
        /// Whether every instruction was kept.
        var keptAll = false
        var whole: Set<ObjectID> = []
        var corrections: Set<ObjectID> = []
        /// Objects changed with no kept instruction of their own (but maybe with some of others).
        var changedWithoutEffect: Set<ObjectID> = []
        /// Objects the changeset does not name that changed with it (holders of links to an
        /// object that was erased or came back, objects a link now waits for), in order.
        var others: [ObjectID] = []
    }

    /// The effects of an integration: the kept instructions, with those of an object that must
    /// travel whole replaced by an upsert of it (where its first instruction was).
    private func effects(_ applied: Applied, order: [ObjectID]) throws -> [SyncInstruction] {
        guard !applied.whole.isEmpty else { return applied.kept }
        var out = [SyncInstruction]()
        var sent = Set<ObjectID>()
        // An object that must travel whole but is gone travels as its instructions (its erase).
        var upserts = [ObjectID: SyncInstruction]()
        for id in applied.whole { if let u = try ObjectState.upsert(store, id) { upserts[id] = u } }
        for ins in applied.kept {
            let id = ins.objectID
            guard let u = upserts[id] else {
                out.append(ins)
                continue
            }
            if sent.insert(id).inserted { out.append(u) }
        }
        // Objects whose only change is one that travels whole (a void, say) have no kept
        // instruction of their own; holders of links changed with the objects they link to.
        for id in order + applied.others where !sent.contains(id) {
            guard let u = upserts[id] else { continue }
            sent.insert(id)
            out.append(u)
        }
        return out
    }

    /// An object whose instructions could not be applied.
    struct RefusedObject: Error {
        var id: ObjectID
        var reason: String
    }

    /// Applies the instructions of the objects not refused, in order. `live` names the objects
    /// that exist before (keys as text, per class).
    private func applyAll(_ changeset: SyncChangeset, live: [String: Set<ExactText>], skipping denied: [ObjectID: String],
                          prepared: CreateRuns?) throws -> Applied {
        let all = denied.isEmpty ? changeset.instructions : changeset.instructions.filter { denied[$0.objectID] == nil }
        let clock = changeset.clock
        let fresh = try freshObjects(all, live: live)
        var applied = Applied()
        // The kept instructions, as runs of `all`: most often all of it, which then is not copied.
        var kept = [Range<Int>]()
        func keep(_ r: Range<Int>) {
            if let last = kept.last, last.upperBound == r.lowerBound { kept[kept.count - 1] = last.lowerBound..<r.upperBound } else { kept.append(r) }
        }
        // The objects the changeset names: made only when another object changes with it.
        var namedSet: Set<ObjectID>?
        func named(_ id: ObjectID) -> Bool {
            if namedSet == nil { namedSet = Set(changeset.instructions.objectIDs) }
            return namedSet?.contains(id) == true
        }
        func note(_ result: (outcome: Outcome, holders: [ObjectID], awaited: [ObjectID]), _ k: Int) {
            for a in result.awaited where !named(a) && !applied.others.contains(a) {
                applied.others.append(a)
                applied.changedWithoutEffect.insert(a)
            }
            for h in result.holders {
                if !named(h), !applied.others.contains(h) { applied.others.append(h) }
                applied.whole.insert(h)
                applied.corrections.insert(h)
                applied.changedWithoutEffect.insert(h)
            }
            let id = all[k].objectID
            switch result.outcome {
            case .none:
                applied.corrections.insert(id)
            case .hidden:
                applied.corrections.insert(id)
                applied.changedWithoutEffect.insert(id)
            case .plain:
                keep(k..<k + 1)
            case .whole:
                keep(k..<k + 1)
                applied.whole.insert(id)
                applied.corrections.insert(id)
            }
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
                for b in batch { for k in b.block.indices { note(try applyOne(all[k], clock), k) } }
            }
        }
        // The last class's primary key name (a changeset's objects come in runs of a class).
        var known: (className: String, primaryKey: String?)?
        func primaryKey(_ cls: String) throws -> String? {
            if let known, known.className == cls { return known.primaryKey }
            let name = try ObjectState.primaryKeyName(store, cls)
            known = (cls, name)
            return name
        }
        var prepared = prepared
        var linkProperties = [String: [(name: String, mixed: Bool)]]()
        var i = all.startIndex
        while i < all.endIndex {
            let ins = all[i]
            if ins.op == .create, fresh.contains(ins.objectID) {
                let known = prepared?.run(at: i)
                let j = known?.end ?? CreateRuns.end(all, at: i) { $0 }
                let pkName = try primaryKey(ins.className)
                // Put together elsewhere already, or here.
                let doc = known.map(\.doc) ?? pkName.flatMap { SyncInstruction.wholeObject(all[i..<j], primaryKey: $0) }
                // An object with links goes one instruction at a time: a link shows or waits by
                // the rules for links (its object's erases), which a whole create does not know.
                if pkName != nil, let doc, !hasLinkValues(ins.className, doc, &linkProperties) {
                    if batchClass != ins.className { try flush() }
                    batchClass = ins.className
                    batch.append((doc, all[i..<j]))
                    i = j
                    continue
                }
            }
            try flush()
            note(try applyOne(ins, clock), i)
            i += 1
        }
        try flush()
        applied.keptAll = kept.count == 1 && kept[0] == all.indices || all.isEmpty
        applied.kept = applied.keptAll ? all : kept.flatMap { all[$0] }
        return applied
    }

    /// Whether a document gives a value to a property that links to top-level objects (or a
    /// mixed value that holds a link).
    private func hasLinkValues(_ cls: String, _ doc: Document, _ linkProperties: inout [String: [(name: String, mixed: Bool)]]) -> Bool {
        let properties: [(name: String, mixed: Bool)]
        if let known = linkProperties[cls] {
            properties = known
        } else {
            let schema = store.schema
            properties = (schema.classes.first { $0.name == cls }?.properties ?? []).compactMap { p in
                guard !p.isComputed else { return nil }
                if p.type == .mixed { return (p.name, true) }
                guard p.type == .object, schema.classes.first(where: { $0.name == p.objectType })?.isEmbedded != true else { return nil }
                return (p.name, false)
            }
            linkProperties[cls] = properties
        }
        func holdsLink(_ v: Value) -> Bool {
            switch v {
            case .link: return true
            case .list(let items): return items.contains(where: holdsLink)
            case .object(let d): return d.values.contains(where: holdsLink)
            default: return false
            }
        }
        return properties.contains { p in
            guard let v = doc[p.name], v != .null else { return false }
            return p.mixed ? holdsLink(v) : true
        }
    }

    /// One instruction on its own savepoint; a failure refuses its object. Returns what it did,
    /// and the other objects it changed (holders of links to its object).
    private func applyOne(_ ins: SyncInstruction, _ clock: Clock) throws -> (outcome: Outcome, holders: [ObjectID], awaited: [ObjectID]) {
        try store.withMetadata { try $0.execute("SAVEPOINT atoll_instruction") }
        do {
            let state = try ObjectState(store: store, ins.objectID)
            let outcome = try state.apply(ins, clock)
            try store.withMetadata { try $0.execute("RELEASE atoll_instruction") }
            return (outcome, state.holders, state.awaitedObjects)
        } catch {
            try store.withMetadata { sql in
                try sql.execute("ROLLBACK TO atoll_instruction")
                try sql.execute("RELEASE atoll_instruction")
            }
            throw RefusedObject(id: ins.objectID, reason: "the write could not be applied: \(error)")
        }
    }

    /// The objects the changeset creates that the server has never had (neither live nor
    /// recorded): they can be created whole, in batches.
    private func freshObjects(_ instructions: [SyncInstruction], live: [String: Set<ExactText>]) throws -> Set<ObjectID> {
        // Objects whose first instruction here is their create (one erased first is not new).
        // Looked at where each run of an object's instructions begins (a later run of an object
        // is not its first), through the buffer: an element read by subscript is copied whole.
        var creates = [ObjectID]()
        instructions.withUnsafeBufferPointer { all in
            var seen = Set<ObjectID>()
            for i in all.indices where i == 0 || all[i].className != all[i - 1].className || all[i].primaryKey != all[i - 1].primaryKey {
                let id = all[i].objectID
                if seen.insert(id).inserted, all[i].op == .create { creates.append(id) }
            }
        }
        var out = Set<ObjectID>(minimumCapacity: creates.count)
        for (cls, keys) in creates.keysByClass {
            guard (try? ObjectState.primaryKeyName(store, cls)) != nil else { continue }
            let live = live[cls] ?? []
            let texts = keys.map(exactKey)
            let candidates = texts.filter { !live.contains($0) }
            let recorded = try tables.recorded(cls, among: candidates)
            // Links wait for some: those are created one at a time, and the links shown.
            let awaited = try tables.awaited(cls, among: candidates)
            for (key, text) in zip(keys, texts) where !live.contains(text) && recorded[text] == nil && !awaited.contains(text) {
                out.insert(ObjectID(cls, key))
            }
        }
        return out
    }

    /// The metadata of objects created whole: their create clock, and their lists' identities.
    private func recordCreated(_ cls: String, _ blocks: [ArraySlice<SyncInstruction>], _ clock: Clock) throws {
        // In the table's order: a B-tree takes sorted keys several times faster.
        try tables.insertCreated(cls, blocks.compactMap { $0.first.map { keyText($0.primaryKey) } }.sorted(), at: clock)
        var listRows = [(cls: String, pk: String, property: String, seq: ListSequence)]()
        for block in blocks {
            guard let first = block.first else { continue }
            let pk = keyText(first.primaryKey)
            for (p, seq) in SyncInstruction.listSequences(block, clock: clock) { listRows.append((cls, pk, p, seq)) }
        }
        try tables.insertLists(listRows)
    }
}
