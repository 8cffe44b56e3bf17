import AtollJSON
import AtollStore
import CJansson
import Foundation

/// A seeded source of random numbers (SplitMix64): one seed, one sequence, on every machine.
struct SimRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }
}

/// The simulation's data: one class with every kind of property sync merges, an embedded class
/// and links to the same class (so that erased objects are linked to).
enum SimSchema {
    static let json = """
    [{"name": "Item", "primaryKey": "_id", "properties": {"_id": "string", "text": "string", "n": "int", "count": "int",
      "tags": "string[]", "labels": "string<>", "attrs": "string{}", "info": "Info?", "ref": "Item?", "refs": "Item[]",
      "owner": "string"}},
     {"name": "Info", "embedded": true, "properties": {"city": "string?", "zip": "int"}}]
    """

    static let schema: Schema = {
        guard let json = try? EJSON.load(json), let schema = try? SchemaJSON.schema(json) else { return Schema() }
        json_decref(json)
        return schema
    }()

    /// Keys 100 and 101 (`.lookalikes`) are canonically equivalent but not byte-equal: two
    /// objects to SQLite, one to Swift's `String ==`.
    static func key(_ k: Int) -> Value {
        switch k {
        case lookalikeKeys.lowerBound: return .string("k\u{E9}")
        case lookalikeKeys.lowerBound + 1: return .string("ke\u{301}")
        default: return .string("k\(k)")
        }
    }

    static let lookalikeKeys = 100..<102
}

/// One write of a simulated device, on its realm as an app would write it. An operation on an
/// object the device does not have (or an index past a list's end) does nothing: a schedule
/// stays valid when the shrinker removes steps before it.
enum SimOp: Hashable, CustomStringConvertible {
    /// The whole object, `.all` (on a deleted key, it comes back); `owned`: only its writer's
    /// user may write it (the app's write rule), else anyone.
    case create(key: Int, text: String, n: Int64, tags: [String], owned: Bool = false)
    case setText(key: Int, String)
    case setN(key: Int, Int64)
    case delete(key: Int)
    case listInsert(key: Int, at: Int, String)
    case listErase(key: Int, at: Int)
    case listMove(key: Int, from: Int, to: Int)
    case listSet(key: Int, at: Int, String)
    /// The whole list replaced (`.modified` with a new array).
    case replaceTags(key: Int, [String])
    case setAdd(key: Int, String)
    case setRemove(key: Int, String)
    case clearLabels(key: Int)
    case dictSet(key: Int, String, String)
    case dictErase(key: Int, String)
    case clearAttrs(key: Int)
    case add(key: Int, Int64)
    /// The embedded object replaced whole (nil: removed).
    case info(key: Int, city: String?, zip: Int64)
    case link(key: Int, target: Int?)
    case linkInsert(key: Int, target: Int, at: Int)

    var description: String {
        switch self {
        case let .create(k, t, n, tags, owned): return "create k\(k) {text: \(t), n: \(n), tags: \(tags)" + (owned ? ", owned" : "") + "}"
        case let .setText(k, t): return "k\(k).text = \(t)"
        case let .setN(k, n): return "k\(k).n = \(n)"
        case let .delete(k): return "delete k\(k)"
        case let .listInsert(k, i, v): return "k\(k).tags.insert(\(v), at: \(i))"
        case let .listErase(k, i): return "k\(k).tags.remove(at: \(i))"
        case let .listMove(k, f, t): return "k\(k).tags.move(\(f) -> \(t))"
        case let .listSet(k, i, v): return "k\(k).tags[\(i)] = \(v)"
        case let .replaceTags(k, tags): return "k\(k).tags = \(tags)"
        case let .setAdd(k, v): return "k\(k).labels.add(\(v))"
        case let .setRemove(k, v): return "k\(k).labels.remove(\(v))"
        case let .clearLabels(k): return "k\(k).labels = []"
        case let .dictSet(k, d, v): return "k\(k).attrs[\(d)] = \(v)"
        case let .dictErase(k, d): return "k\(k).attrs[\(d)] = nil"
        case let .clearAttrs(k): return "k\(k).attrs = [:]"
        case let .add(k, d): return "k\(k).count += \(d)"
        case let .info(k, c, z): return "k\(k).info = " + (c.map { "{city: \($0), zip: \(z)}" } ?? "nil")
        case let .link(k, t): return "k\(k).ref = " + (t.map { "k\($0)" } ?? "nil")
        case let .linkInsert(k, t, i): return "k\(k).refs.insert(k\(t), at: \(i))"
        }
    }

    var key: Int {
        switch self {
        case .create(let k, _, _, _, _), .setText(let k, _), .setN(let k, _), .delete(let k), .listInsert(let k, _, _),
             .listErase(let k, _), .listMove(let k, _, _), .listSet(let k, _, _), .replaceTags(let k, _), .setAdd(let k, _),
             .setRemove(let k, _), .clearLabels(let k), .dictSet(let k, _, _), .dictErase(let k, _), .clearAttrs(let k),
             .add(let k, _), .info(let k, _, _), .link(let k, _), .linkInsert(let k, _, _):
            return k
        }
    }

    /// Writes the operation to `store` (in its write transaction), as `user`'s device.
    func apply(to store: Store, user: String) throws {
        let key = SimSchema.key(self.key)
        let exists = try store.object("Item", primaryKey: key) != nil
        func modify(_ fields: Document) throws {
            guard exists else { return }
            var d = fields
            d["_id"] = key
            _ = try store.create("Item", d, update: .modified)
        }
        func count(_ property: String) throws -> Int {
            guard exists, case .list(let items)? = try store.value("Item", primaryKey: key, property: property) else { return 0 }
            return items.count
        }
        switch self {
        case let .create(_, text, n, tags, owned):
            _ = try store.create("Item", ["_id": key, "text": .string(text), "n": .int(n), "count": .int(0),
                                          "tags": .list(tags.map(Value.string)), "labels": .list([]), "attrs": .object(Document()),
                                          "owner": .string(owned ? user : "")],
                                 update: .all)
        case let .setText(_, t): try modify(["text": .string(t)])
        case let .setN(_, n): try modify(["n": .int(n)])
        case .delete: if exists { try store.delete("Item", primaryKey: key) }
        case let .listInsert(_, i, v):
            guard exists else { return }
            try store.listInsert("Item", primaryKey: key, property: "tags", .string(v), at: i % (try count("tags") + 1))
        case let .listErase(_, i):
            let c = try count("tags")
            if c > 0 { try store.listErase("Item", primaryKey: key, property: "tags", at: i % c) }
        case let .listMove(_, f, t):
            let c = try count("tags")
            if c > 1 { try store.listMove("Item", primaryKey: key, property: "tags", from: f % c, to: t % c) }
        case let .listSet(_, i, v):
            let c = try count("tags")
            if c > 0 { try store.listSet("Item", primaryKey: key, property: "tags", .string(v), at: i % c) }
        case let .replaceTags(_, tags): try modify(["tags": .list(tags.map(Value.string))])
        case let .setAdd(_, v): if exists { _ = try store.setInsert("Item", primaryKey: key, property: "labels", .string(v)) }
        case let .setRemove(_, v): if exists { _ = try store.setErase("Item", primaryKey: key, property: "labels", .string(v)) }
        case .clearLabels: try modify(["labels": .list([])])
        case let .dictSet(_, d, v):
            if exists { try store.dictionarySet("Item", primaryKey: key, property: "attrs", key: d, .string(v)) }
        case let .dictErase(_, d): if exists { _ = try store.dictionaryErase("Item", primaryKey: key, property: "attrs", key: d) }
        case .clearAttrs: try modify(["attrs": .object(Document())])
        case let .add(_, d): if exists { try store.addInteger("Item", primaryKey: key, property: "count", d) }
        case let .info(_, city, zip):
            try modify(["info": city.map { .object(["city": .string($0), "zip": .int(zip)]) } ?? .null])
        case let .link(_, target):
            guard exists else { return }
            let t = target.map(SimSchema.key)
            if let t, try store.object("Item", primaryKey: t) == nil { return }
            try modify(["ref": t ?? .null])
        case let .linkInsert(_, target, i):
            let t = SimSchema.key(target)
            guard exists, try store.object("Item", primaryKey: t) != nil else { return }
            try store.listInsert("Item", primaryKey: key, property: "refs", t, at: i % (try count("refs") + 1))
        }
    }

    /// A random operation on one of `keys` keys, as device `device`'s `serial`-th write.
    static func random(_ r: inout SimRandom, keys: Int, device: Int, serial: Int, features: SimFeatures) -> SimOp {
        var k = Int.random(in: 0..<keys, using: &r)
        if features.contains(.lookalikes), r.chance(0.2) { k = Int.random(in: SimSchema.lookalikeKeys, using: &r) }
        let word = "d\(device)-\(serial)"
        var kinds: [(Double, () -> SimOp)] = [
            (0.18, { .create(key: k, text: word, n: Int64(serial), tags: ["t\(device)", "u\(serial % 3)"], owned: features.contains(.permissions) && serial % 4 == 0) }),
            (0.22, { .setText(key: k, word) }),
            (0.12, { .setN(key: k, Int64(serial)) }),
            (0.12, { .delete(key: k) }),
        ]
        var r2 = r
        let i = Int.random(in: 0..<8, using: &r2), j = Int.random(in: 0..<8, using: &r2)
        // With `.lookalikes`, two of the set members and dictionary keys are canonically
        // equivalent but not byte-equal: two values to SQLite, one to Swift's `String ==`.
        let words = features.contains(.lookalikes) ? ["a", "b", "\u{E9}", "e\u{301}"] : ["a", "b", "c", "d"]
        let small = words[Int.random(in: 0..<4, using: &r2)]
        r = r2
        if features.contains(.lists) {
            kinds += [(0.08, { .listInsert(key: k, at: i, word) }), (0.04, { .listErase(key: k, at: i) }),
                      (0.03, { .listMove(key: k, from: i, to: j) }), (0.03, { .listSet(key: k, at: i, word) }),
                      (0.05, { .replaceTags(key: k, [word, small]) })]
        }
        if features.contains(.sets) {
            kinds += [(0.05, { .setAdd(key: k, small) }), (0.04, { .setRemove(key: k, small) }), (0.01, { .clearLabels(key: k) })]
        }
        if features.contains(.dictionaries) {
            kinds += [(0.05, { .dictSet(key: k, small, word) }), (0.03, { .dictErase(key: k, small) }), (0.01, { .clearAttrs(key: k) })]
        }
        if features.contains(.counters) { kinds += [(0.06, { .add(key: k, Int64(i + 1)) })] }
        if features.contains(.embedded) {
            kinds += [(0.04, { .info(key: k, city: i % 4 == 0 ? nil : word, zip: Int64(j)) })]
        }
        if features.contains(.links) {
            kinds += [(0.04, { .link(key: k, target: i % 3 == 0 ? nil : j % keys) }),
                      (0.03, { .linkInsert(key: k, target: j % keys, at: i) })]
        }
        let total = kinds.reduce(0) { $0 + $1.0 }
        var pick = Double.random(in: 0..<total, using: &r)
        for (w, make) in kinds {
            if pick < w { return make() }
            pick -= w
        }
        return kinds[0].1()
    }
}

/// What a schedule's writes may touch beside plain fields and object lifecycles.
struct SimFeatures: OptionSet, Hashable {
    let rawValue: Int
    static let lists = SimFeatures(rawValue: 1)
    static let sets = SimFeatures(rawValue: 2)
    static let dictionaries = SimFeatures(rawValue: 4)
    static let counters = SimFeatures(rawValue: 8)
    static let embedded = SimFeatures(rawValue: 16)
    static let links = SimFeatures(rawValue: 32)
    /// Objects only their creator's user may write (the others' writes are refused).
    static let permissions = SimFeatures(rawValue: 64)
    /// Primary keys, set members and dictionary keys that are canonically equivalent ("é" and
    /// "e" with a combining accent), which must stay two.
    static let lookalikes = SimFeatures(rawValue: 128)
    static let all: SimFeatures = [.lists, .sets, .dictionaries, .counters, .embedded, .links, .permissions, .lookalikes]
}
