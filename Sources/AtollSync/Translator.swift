import AtollJSON
import AtollProtocol
import AtollStore

/// Turns local change-log entries into sync changesets: index-based list operations become
/// element identities (kept per list in `_atoll_sync_lists`), moves become an erase and an
/// insert, and the entry gets a clock. Runs inside the sync client's write transaction, in
/// version order, before any download is applied, so the list identities always describe the
/// lists as the entry being translated saw them.
struct Translator {
    let store: Store
    let sql: MetadataSQL
    let clock: HybridClock

    /// Translates one entry; nil when nothing in it is synced.
    func translate(_ entry: ChangeSet) throws -> SyncChangeset? {
        let stamp = clock.stamp(wall: entry.timestamp.milliseconds)
        var out = [SyncInstruction]()
        out.reserveCapacity(entry.instructions.count)
        var lists = [ListKey: ListSequence]()
        func listKey(_ ins: Instruction, _ property: String) -> ListKey {
            ListKey(className: ins.className, primaryKey: ExactText(keyText(ins.primaryKey)), property: property)
        }
        func sequence(_ ins: Instruction, _ property: String) throws -> ListSequence {
            let k = listKey(ins, property)
            if let s = lists[k] { return s }
            if let s = try ClientTables.list(sql, ins.className, keyText(ins.primaryKey), property) { return s }
            // A list sync has not seen: one of an object created here (its elements follow as
            // inserts). Lists of objects written before the realm was synced are not known:
            // such data reaches a synced realm through `writeCopy`, which creates them anew.
            return ListSequence()
        }
        for (n, ins) in entry.instructions.enumerated() {
            let id = ElementID(stamp, Int64(n))
            func sync(_ op: SyncOp) -> SyncInstruction {
                SyncInstruction(op, ins.className, ins.primaryKey, path: ins.path, value: ins.value)
            }
            switch ins.op {
            case .create:
                out.append(sync(.create))
            case .erase:
                out.append(sync(.erase))
                // The store dropped the links to it: the lists of links that held it lose those
                // elements (their sequences hide them, and the erase of each travels, so that the
                // elements do not come back with the object), and a link to it written earlier in
                // this transaction is undone after the erase.
                for (h, p) in store.schema.linkLists(to: ins.className) {
                    var keys = Set(lists.keys.filter { $0.className == h && $0.property == p })
                    for pk in try ClientTables.listHolders(sql, h, p) { keys.insert(ListKey(className: h, primaryKey: ExactText(pk), property: p)) }
                    for k in keys.sorted(by: { $0.primaryKey < $1.primaryKey }) {
                        guard let holder = try? EJSON.parse(k.primaryKey.text) else { continue }
                        guard var seq = try lists[k] ?? ClientTables.list(sql, h, k.primaryKey.text, p) else { continue }
                        var erased = false
                        for e in seq.entries where e.shown && e.value == ins.primaryKey {
                            _ = seq.erase(e.id)
                            out.append(SyncInstruction(.listErase, h, holder, path: [.key(p)], element: e.id))
                            erased = true
                        }
                        if erased { lists[k] = seq }
                    }
                }
                for earlier in out where earlier.op == .set && earlier.path.count == 1 && earlier.objectID != ObjectID(ins.className, ins.primaryKey) {
                    guard let p = earlier.property, store.schema.isLinks(earlier.className, p),
                          ClientTables.linkKey(earlier.value) == ins.primaryKey,
                          store.schema.classes.first(where: { $0.name == earlier.className })?[property: p]?.objectType == ins.className else { continue }
                    out.append(SyncInstruction(.set, earlier.className, earlier.primaryKey, path: earlier.path, value: .null))
                }
                try ClientTables.dropLists(sql, ins.className, keyText(ins.primaryKey))
                let erasedKey = ExactText(keyText(ins.primaryKey))
                lists = lists.filter { !($0.key.className == ins.className && $0.key.primaryKey == erasedKey) }
            case .set:
                out.append(sync(.set))
            case .listInsert, .listErase, .listSet, .listMove, .listClear:
                guard ins.path.count == 1, case .key(let property) = ins.path[0] else {
                    // Lists inside embedded objects travel as a set of the whole embedded object.
                    if case .key(let property)? = ins.path.first,
                       let whole = try store.value(ins.className, primaryKey: ins.primaryKey, property: property) {
                        out.append(SyncInstruction(.set, ins.className, ins.primaryKey, path: [.key(property)], value: whole))
                    }
                    continue
                }
                var seq = try sequence(ins, property)
                let index = ins.index ?? 0
                // Lists of links keep each element's object (to hide it if that object goes).
                let isLinks = store.schema.isLinks(ins.className, property)
                let kept = isLinks ? ClientTables.linkKey(ins.value) : nil
                switch ins.op {
                case .listInsert:
                    let before = index == 0 ? nil : seq.ids(around: index - 1).id
                    _ = seq.insert(id, after: before, clock: stamp, value: kept)
                    out.append(SyncInstruction(.listInsert, ins.className, ins.primaryKey, path: ins.path, value: ins.value,
                                               element: id, after: before))
                case .listErase:
                    guard let target = seq.ids(around: index).id else { continue }
                    _ = seq.erase(target)
                    out.append(SyncInstruction(.listErase, ins.className, ins.primaryKey, path: ins.path, element: target))
                case .listSet:
                    guard let target = seq.ids(around: index).id else { continue }
                    _ = seq.set(target, clock: stamp, value: kept)
                    out.append(SyncInstruction(.listSet, ins.className, ins.primaryKey, path: ins.path, value: ins.value, element: target))
                case .listMove:
                    guard let target = seq.ids(around: index).id else { continue }
                    _ = seq.erase(target)
                    let to = ins.toIndex ?? 0
                    let before = to == 0 ? nil : seq.ids(around: to - 1).id
                    _ = seq.insert(id, after: before, clock: stamp, value: kept)
                    out.append(SyncInstruction(.listErase, ins.className, ins.primaryKey, path: ins.path, element: target))
                    out.append(SyncInstruction(.listInsert, ins.className, ins.primaryKey, path: ins.path, value: ins.value ?? .null,
                                               element: id, after: before))
                default:
                    _ = seq.clear(before: id)
                    var i = SyncInstruction(.listClear, ins.className, ins.primaryKey, path: ins.path)
                    i.element = id
                    out.append(i)
                }
                lists[listKey(ins, property)] = seq
            case .setInsert: out.append(sync(.setInsert))
            case .setErase: out.append(sync(.setErase))
            case .setClear: out.append(sync(.setClear))
            case .dictionarySet: out.append(sync(.dictionarySet))
            case .dictionaryErase: out.append(sync(.dictionaryErase))
            case .dictionaryClear: out.append(sync(.dictionaryClear))
            case .addInteger: out.append(sync(.addInteger))
            }
        }
        for (k, seq) in lists { try ClientTables.saveList(sql, k.className, k.primaryKey.text, k.property, seq) }
        guard !out.isEmpty else { return nil }
        // Merged by clock alone, on the server and in this client's view of what it has pending.
        return SyncChangeset(clientVersion: entry.version, clock: stamp, instructions: out).normalized()
    }
}

extension Schema {
    /// The lists of links to objects of a class: (holder class, property) pairs.
    func linkLists(to className: String) -> [(String, String)] {
        classes.filter { !$0.isEmbedded }.flatMap { h in
            h.properties.filter { $0.isList && $0.type == .object && $0.objectType == className }.map { (h.name, $0.name) }
        }
    }

    /// Whether a property of a class links to top-level objects (a link, or a collection of them).
    func isLinks(_ className: String, _ property: String) -> Bool {
        guard let p = classes.first(where: { $0.name == className })?[property: property], p.type == .object,
              let target = classes.first(where: { $0.name == p.objectType }) else { return false }
        return !target.isEmbedded
    }
}

/// A list the translator has touched: its object's class and primary key text (byte for byte:
/// user text) and its property.
private struct ListKey: Hashable {
    var className: String
    var primaryKey: ExactText
    var property: String
}
