import AtollJSON
import AtollProtocol
import AtollStore
import Foundation

/// The sync rules (docs/protocol.md, "How changes merge") worked out from scratch, with none of
/// the engine's code: it knows the accepted changesets, not the order the server took them in,
/// nor the engine's metadata tables, clocks per field, or how it moves list indexes.
///
/// Every instruction has a stamp: its changeset's clock, then its place in the changeset (a
/// changeset applies in order, so a later instruction of the same transaction is newer). The
/// state of an object is a set of stamped writes, and what a replica shows is read off it:
///
/// - an object exists when its newest create is newer than its newest erase;
/// - a write older than the object's newest erase is gone; a field shows its newest write (into
///   embedded objects, writes apply oldest first, each at its path); a counter is its newest
///   set plus every add newer than it;
/// - a list is a tree of inserts (each after the element it names, later identities first),
///   read in order, less erased elements and those older than a clear or the erase; an
///   element shows its newest value;
/// - a set member or dictionary key shows its newest add or remove, if newer than the newest
///   clear;
/// - a link (or a list of links' element) to an object that does not exist reads as none.
struct SimModel {
    struct Stamp: Comparable, Hashable, CustomStringConvertible {
        var clock: Clock
        var index: Int64
        static func < (a: Stamp, b: Stamp) -> Bool { a.clock != b.clock ? a.clock < b.clock : a.index < b.index }
        var description: String { "\(clock).\(index)" }
    }

    struct Element {
        var id: ElementID
        var after: ElementID?
        /// The insert's own stamp (its place in its changeset, which an erase of the object in
        /// the same changeset is compared with).
        var inserted: Stamp
        var erased = false
        var value: (Stamp, Value)
    }

    struct Member {
        var stamp: Stamp
        var present: Bool
        var value: Value
    }

    struct Object {
        /// The primary key as written (`objects` is keyed by `SimOracle.name(of:)`).
        var key = ""
        var created: Stamp?
        var erased: Stamp?
        /// Writes of fields and paths into embedded objects: (stamp, path, value).
        var writes: [(Stamp, [PathElement], Value)] = []
        /// Counter adds per property, by stamp (a changeset uploaded twice, under two client
        /// files, is one changeset: its clock names it).
        var adds: [String: [Stamp: Int64]] = [:]
        var lists: [String: [ElementID: Element]] = [:]
        /// Erases and sets of list elements, apart from the inserts (which may come later).
        var listErased: [String: Set<ElementID>] = [:]
        var listSets: [String: [ElementID: (Stamp, Value)]] = [:]
        var listClears: [String: ElementID] = [:]
        /// Set members (by their wire text) and dictionary keys, by their bytes: "é" and "e" with
        /// a combining accent are two.
        var members: [String: [[UInt8]: Member]] = [:]
        var clears: [String: Stamp] = [:]
    }

    private(set) var objects: [String: Object] = [:]
    let schema: ObjectSchema
    let classes: [String: ObjectSchema]

    init(schema: Schema, className: String) {
        var classes = [String: ObjectSchema]()
        for c in schema.classes { classes[c.name] = c }
        self.classes = classes
        self.schema = classes[className] ?? ObjectSchema(name: className, properties: [])
    }

    // MARK: - Taking in

    /// Takes in one accepted changeset (any order: the outcome does not depend on it).
    mutating func add(_ cs: SyncChangeset) {
        for (n, ins) in cs.instructions.enumerated() where ins.className == schema.name {
            guard case .string(let key) = ins.primaryKey else { continue }
            let stamp = Stamp(clock: cs.clock, index: Int64(n))
            var o = objects[SimOracle.name(of: key)] ?? Object(key: key)
            let property = ins.property ?? ""
            switch ins.op {
            case .create: o.created = max(o.created ?? stamp, stamp)
            case .erase: o.erased = max(o.erased ?? stamp, stamp)
            case .set: o.writes.append((stamp, ins.path, ins.value ?? .null))
            case .addInteger:
                if case .int(let d)? = ins.value { o.adds[property, default: [:]][stamp] = d }
            case .listInsert:
                guard let id = ins.element else { break }
                o.lists[property, default: [:]][id] = Element(id: id, after: ins.after, inserted: stamp, value: (stamp, ins.value ?? .null))
            case .listErase:
                if let id = ins.element { o.listErased[property, default: []].insert(id) }
            case .listSet:
                if let id = ins.element, (o.listSets[property]?[id]?.0).map({ $0 < stamp }) ?? true {
                    o.listSets[property, default: [:]][id] = (stamp, ins.value ?? .null)
                }
            case .listClear:
                let point = ins.element ?? ElementID(cs.clock, Int64(n))
                o.listClears[property] = max(o.listClears[property] ?? point, point)
            case .setInsert, .setErase:
                let v = ins.value ?? .null
                let k = Array(Wire.encode(v).utf8)
                if (o.members[property]?[k]?.stamp).map({ $0 < stamp }) ?? true {
                    o.members[property, default: [:]][k] = Member(stamp: stamp, present: ins.op == .setInsert, value: v)
                }
            case .dictionarySet, .dictionaryErase:
                guard ins.path.count == 2, case .key(let name) = ins.path[1] else { break }
                let k = Array(name.utf8)
                if (o.members[property]?[k]?.stamp).map({ $0 < stamp }) ?? true {
                    o.members[property, default: [:]][k] = Member(stamp: stamp, present: ins.op == .dictionarySet, value: ins.value ?? .null)
                }
            case .setClear, .dictionaryClear:
                o.clears[property] = max(o.clears[property] ?? stamp, stamp)
            case .upsert, .evict, .keep:
                break
            }
            objects[SimOracle.name(of: key)] = o
        }
    }

    // MARK: - Reading

    func exists(_ key: String) -> Bool {
        guard let o = objects[key], let c = o.created else { return false }
        return o.erased.map { c > $0 } ?? true
    }

    /// What a replica shows: every existing object, in the form `SimOracle.snapshot` gives.
    func snapshot() -> [String: Value] {
        var out = [String: Value]()
        for key in objects.keys where exists(key) {
            out[key] = SimOracle.canonical(.object(document(key)), property: nil)
        }
        return out
    }

    private func document(_ key: String) -> Document {
        guard let o = objects[key] else { return Document() }
        let floor = o.erased
        func alive(_ s: Stamp) -> Bool { floor.map { s > $0 } ?? true }
        var doc = Document()
        doc[schema.primaryKey ?? "_id"] = .string(o.key)
        for p in schema.properties where p.name != schema.primaryKey && !p.isComputed {
            let target = p.objectType.flatMap { classes[$0] }
            let isLink = p.type == .object && target?.isEmbedded != true
            switch p.collection {
            case .single:
                var value = p.implicitDefault
                var newest: Stamp?
                for (s, path, v) in o.writes.sorted(by: { $0.0 < $1.0 }) where alive(s) {
                    guard case .key(let name)? = path.first, name == p.name else { continue }
                    if path.count == 1 {
                        value = v
                        newest = s
                    } else if let replaced = try? value.replacing(at: path.dropFirst(), with: v) {
                        value = replaced
                    }
                }
                if p.type == .int, case .int(let base) = value {
                    let floorForAdds = [newest, floor].compactMap { $0 }.max()
                    let sum = (o.adds[p.name] ?? [:]).filter { a in floorForAdds.map { a.key > $0 } ?? true }.reduce(Int64(0)) { $0 &+ $1.value }
                    value = .int(base &+ sum)
                }
                if isLink, !value.isNull, !shows(keyString(value), writtenAt: newest) { value = .null }
                doc[p.name] = value
            case .list:
                let elements = o.lists[p.name] ?? [:]
                let clear = o.listClears[p.name]
                let erased = o.listErased[p.name] ?? []
                var values = [Value]()
                for id in Self.order(elements) {
                    guard let e = elements[id], !erased.contains(id), clear.map({ id > $0 }) ?? true, alive(e.inserted) else { continue }
                    var value = e.value
                    if let set = o.listSets[p.name]?[id], set.0 > value.0 { value = set }
                    if isLink, !shows(keyString(value.1), writtenAt: value.0) { continue }
                    values.append(value.1)
                }
                doc[p.name] = .list(values)
            case .set:
                let clear = [o.clears[p.name], floor].compactMap { $0 }.max()
                doc[p.name] = .list((o.members[p.name] ?? [:]).values.filter { m in m.present && (clear.map { m.stamp > $0 } ?? true) }
                    .map(\.value))
            case .dictionary:
                let clear = [o.clears[p.name], floor].compactMap { $0 }.max()
                var d = Document()
                for (k, m) in (o.members[p.name] ?? [:]).sorted(by: { $0.key.lexicographicallyPrecedes($1.key) })
                where m.present && (clear.map { m.stamp > $0 } ?? true) {
                    d[String(decoding: k, as: UTF8.self)] = m.value
                }
                doc[p.name] = .object(d)
            }
        }
        return doc
    }

    /// Whether a link to `key` written at `stamp` shows: the object exists, and the link is newer
    /// than the object's newest erase (links older than it went with it).
    private func shows(_ key: String, writtenAt stamp: Stamp?) -> Bool {
        guard exists(key) else { return false }
        guard let erased = objects[key]?.erased, let stamp else { return true }
        return stamp > erased
    }

    /// A link's target as `objects` names it.
    private func keyString(_ v: Value) -> String {
        if case .string(let s) = v { return SimOracle.name(of: s) }
        if case .link(let l) = v, case .string(let s) = l.primaryKey { return SimOracle.name(of: s) }
        return Wire.encode(v)
    }

    /// A list's elements in order: a tree in which each insert hangs under the element it was
    /// made after (the root for the front), children with later identities first, read depth
    /// first. An insert whose neighbour is unknown hangs at the front.
    static func order(_ elements: [ElementID: Element]) -> [ElementID] {
        var children = [ElementID?: [ElementID]]()
        for e in elements.values {
            let parent = e.after.flatMap { elements[$0] == nil ? nil : $0 }
            children[parent, default: []].append(e.id)
        }
        var out = [ElementID]()
        func visit(_ node: ElementID?) {
            for child in (children[node] ?? []).sorted(by: >) {
                out.append(child)
                visit(child)
            }
        }
        visit(nil)
        return out
    }
}
