import Foundation

// Which objects a range of the change log touched, and which objects count as modified for
// an observer's key paths (through links, lists and embedded objects).

/// The properties an observer watches, as a tree: `["name", "dogs.name"]` is
/// `name` (a leaf) and `dogs` with `name` beneath. Without key paths an observer watches
/// everything (`.all`): every property, embedded objects wholly, and linked objects'
/// properties up to `KeyPathTree.defaultDepth` links away.
indirect enum KeyPathTree: Hashable {
    case all(depth: Int)
    case properties([String: KeyPathTree?])

    /// How many links away changes count for an observer without key paths (realm-core's 4
    /// levels of objects: the observed one and three linked).
    static let defaultDepth = 3

    /// Parses and checks key paths against the schema; nil or empty watches everything.
    /// - Throws: `.invalidArgument` naming the key path and what is wrong with it.
    static func parse(_ keyPaths: [String]?, root: ObjectSchema, schema: Schema) throws -> KeyPathTree {
        guard let keyPaths, !keyPaths.isEmpty else { return .all(depth: defaultDepth) }
        var tree: [String: KeyPathTree?] = [:]
        for path in keyPaths {
            let parts = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard !parts.isEmpty, !parts.contains(where: \.isEmpty) else {
                throw AtollError(.invalidArgument, "key path '\(path)' is empty or has an empty component")
            }
            try insert(parts[...], into: &tree, at: root, schema: schema, path: path)
        }
        return .properties(tree)
    }

    private static func insert(_ parts: ArraySlice<String>, into tree: inout [String: KeyPathTree?],
                               at cls: ObjectSchema, schema: Schema, path: String) throws {
        guard let name = parts.first else { return }
        guard let p = cls[property: name] else {
            throw AtollError(.invalidArgument, "key path '\(path)': class '\(cls.name)' has no property '\(name)'")
        }
        let rest = parts.dropFirst()
        if rest.isEmpty {
            tree[name] = .some(nil)
            return
        }
        guard p.type == .object || p.type == .linkingObjects, let targetName = p.objectType,
              let target = schema[targetName] else {
            throw AtollError(.invalidArgument, "key path '\(path)': '\(name)' of '\(cls.name)' is not a link, so nothing follows it")
        }
        if case .some(.none) = tree[name] { return }  // the whole property is watched already
        var sub: [String: KeyPathTree?] = [:]
        if case .some(.some(.properties(let known))) = tree[name] { sub = known }
        try insert(rest, into: &sub, at: target, schema: schema, path: path)
        tree[name] = .some(.properties(sub))
    }

    /// The watched properties of a class, each with what is watched beneath it (nil: the
    /// property's own value only).
    func children(_ cls: ObjectSchema, _ schema: Schema) -> [(Property, KeyPathTree?)] {
        switch self {
        case .properties(let props):
            return props.compactMap { name, sub in cls[property: name].map { ($0, sub) } }
        case .all(let depth):
            return cls.properties.compactMap { p -> (Property, KeyPathTree?)? in
                guard !p.isComputed else { return nil }
                guard p.type == .object, let target = p.objectType.flatMap({ schema[$0] }) else { return (p, nil) }
                if target.isEmbedded { return (p, .all(depth: depth)) }
                return (p, depth > 0 ? .all(depth: depth - 1) : nil)
            }
        }
    }

    /// Whether a change at `path` (an instruction's path on an object of `cls`) touches what
    /// the tree watches.
    func matches(_ path: ArraySlice<PathElement>, _ cls: ObjectSchema, _ schema: Schema) -> Bool {
        guard case .properties(let props) = self else { return true }
        guard case .key(let name)? = path.first else { return true }
        guard let entry = props[name] else { return false }
        guard let sub = entry, let p = cls[property: name] else { return true }
        var rest = path.dropFirst()
        if p.isCollection, !rest.isEmpty { rest = rest.dropFirst() }
        guard p.type == .object, let target = p.objectType.flatMap({ schema[$0] }), target.isEmbedded,
              !rest.isEmpty else { return true }
        return sub.matches(rest, target, schema)
    }
}

/// The instructions of a range of the change log, by class and object.
final class ChangeIndex {
    struct ClassChanges {
        /// Every path changed on each object (an empty path: the object was created).
        var touched: [Value: [[PathElement]]] = [:]
        var created: Set<Value> = []
        /// Erased in the range (and maybe created again after).
        var erased: Set<Value> = []
    }

    let from: UInt64
    let to: UInt64
    /// True when the log no longer holds the whole range (pruned): every object may have
    /// changed, and observers report as much.
    let incomplete: Bool
    private(set) var classes: [String: ClassChanges] = [:]
    private let changes: [ChangeSet]
    private var byObject: [String: [Value: [Instruction]]]?

    /// - Parameter effects: what the changes implied (links nulled by erases): they count as
    ///   changes of the holders' properties, but are not instructions of the collections.
    init(from: UInt64, to: UInt64, changes: [ChangeSet], effects: [Instruction] = [], incomplete: Bool) {
        self.from = from
        self.to = to
        self.incomplete = incomplete
        self.changes = changes
        for set in changes {
            for ins in set.instructions {
                // Changed in place: a copy taken out and put back would copy the class's
                // dictionaries for every instruction (quadratic in a large transaction).
                switch ins.op {
                case .create:
                    // An object erased and created again stays in `erased`: observers of the
                    // old one see it deleted, results see the new one as modified.
                    classes[ins.className, default: ClassChanges()].created.insert(ins.primaryKey)
                    classes[ins.className, default: ClassChanges()].touched[ins.primaryKey, default: []].append([])
                case .erase:
                    classes[ins.className, default: ClassChanges()].erased.insert(ins.primaryKey)
                    classes[ins.className, default: ClassChanges()].touched[ins.primaryKey] = nil
                default:
                    classes[ins.className, default: ClassChanges()].touched[ins.primaryKey, default: []].append(ins.path)
                }
            }
        }
        for ins in effects {
            classes[ins.className, default: ClassChanges()].touched[ins.primaryKey, default: []].append(ins.path)
        }
    }

    var changedClasses: [String] { classes.keys.sorted() }

    /// The instructions about one object, in order (effects excluded).
    func instructions(_ className: String, _ ref: Value) -> [Instruction] {
        if byObject == nil {
            var all = [String: [Value: [Instruction]]]()
            for set in changes {
                for ins in set.instructions { all[ins.className, default: [:]][ins.primaryKey, default: []].append(ins) }
            }
            byObject = all
        }
        return byObject?[className]?[ref] ?? []
    }

    func touches(_ className: String) -> Bool { incomplete || classes[className] != nil }
}

/// Evaluates key-path trees against a `ChangeIndex` on the store's current (new) data, with
/// what it found remembered for the other observers of the same delivery.
final class ModificationFinder {
    let store: Store
    let conn: Connection
    let index: ChangeIndex
    private var memo: [String: [KeyPathTree: Set<Int64>]] = [:]
    private var rowKeys: [String: [Value: Int64]] = [:]

    init(store: Store, conn: Connection, index: ChangeIndex) {
        self.store = store
        self.conn = conn
        self.index = index
    }

    /// The row key of the object a change names (nil when it no longer exists).
    func rowKey(_ info: ClassInfo, _ ref: Value) throws -> Int64? {
        if info.primaryKey == nil || info.primaryKeyIsRowKey {
            guard case .int(let k) = ref else { return nil }
            return k
        }
        if let known = rowKeys[info.name]?[ref] { return known }
        let key = try store.lookup(info, primaryKey: ref, conn)
        if let key { rowKeys[info.name, default: [:]][ref] = key }
        return key
    }

    /// The row keys of objects of `className` (existing now) that changed in what `tree`
    /// watches: their own properties, embedded objects, or (through links followed by the
    /// tree) the objects they link to now or linked to before an erase nulled the link.
    func modifiedRows(_ className: String, _ tree: KeyPathTree, depth: Int = 0) throws -> Set<Int64> {
        if let known = memo[className]?[tree] { return known }
        guard let info = store.classInfo(ifExists: className) else { return [] }
        var rows = Set<Int64>()
        let schema = store.schema
        if let changes = index.classes[className] {
            for (ref, paths) in changes.touched where !changes.created.contains(ref) || changes.erased.contains(ref) {
                let recreated = changes.created.contains(ref)
                guard recreated || paths.contains(where: { !$0.isEmpty && tree.matches($0[...], info.schema, schema) }) else { continue }
                if let key = try rowKey(info, ref) { rows.insert(key) }
            }
        }
        if depth < 8 {
            for (p, sub) in tree.children(info.schema, schema) {
                guard let sub, let targetName = p.objectType, let target = store.classInfo(ifExists: targetName),
                      !target.schema.isEmbedded else { continue }
                if p.type == .object {
                    let changed = try modifiedRows(targetName, sub, depth: depth + 1)
                    rows.formUnion(try holders(info, p, of: changed))
                } else if p.type == .linkingObjects, let originName = p.linkOriginProperty,
                          let origin = target.schema[property: originName] {
                    // A backlink changes when an origin object links or unlinks, or when what
                    // it watches on the origin objects changed.
                    var watched = sub
                    if case .properties(var props) = sub { props[originName] = .some(nil); watched = .properties(props) }
                    let changed = try modifiedRows(targetName, watched, depth: depth + 1)
                    rows.formUnion(try targets(target, origin, of: changed.union(createdRows(target))))
                }
            }
        }
        memo[className, default: [:]][tree] = rows
        return rows
    }

    /// Whether an observed object was erased in the range (when the range is incomplete:
    /// whether it is missing now).
    func isGone(_ info: ClassInfo, _ reference: Value, _ rowKey: Int64) throws -> Bool {
        if index.classes[info.name]?.erased.contains(reference) == true { return true }
        return try index.incomplete && store.readObject(info, rowKey, conn) == nil
    }

    /// The row keys of the objects of a class created in the range (that still exist).
    func createdRows(_ info: ClassInfo) throws -> Set<Int64> {
        var rows = Set<Int64>()
        for ref in index.classes[info.name]?.created ?? [] {
            if let key = try rowKey(info, ref) { rows.insert(key) }
        }
        return rows
    }

    /// The objects of `info` whose link property `p` holds any of `keys` now.
    func holders(_ info: ClassInfo, _ p: Property, of keys: Set<Int64>) throws -> Set<Int64> {
        guard !keys.isEmpty else { return [] }
        let sql = p.isCollection
            ? "SELECT DISTINCT owner FROM \(info.listTable(p)) WHERE value IN (SELECT value FROM json_each(?))"
            : "SELECT \(info.rowKey) FROM \(info.table) WHERE \(quote(p.name)) IN (SELECT value FROM json_each(?))"
        return try rowSet(sql, keys)
    }

    /// The objects that the link property `p` of the `origins` objects of `info` holds now.
    func targets(_ info: ClassInfo, _ p: Property, of origins: Set<Int64>) throws -> Set<Int64> {
        guard !origins.isEmpty else { return [] }
        let sql = p.isCollection
            ? "SELECT DISTINCT value FROM \(info.listTable(p)) WHERE owner IN (SELECT value FROM json_each(?)) AND value IS NOT NULL"
            : "SELECT \(quote(p.name)) FROM \(info.table) WHERE \(info.rowKey) IN (SELECT value FROM json_each(?)) AND \(quote(p.name)) IS NOT NULL"
        return try rowSet(sql, origins)
    }

    private func rowSet(_ sql: String, _ keys: Set<Int64>) throws -> Set<Int64> {
        let s = try conn.statement(sql)
        s.bind(1, "[" + keys.map(String.init).joined(separator: ",") + "]")
        var found = Set<Int64>()
        while try s.step() { found.insert(s.int64(0)) }
        s.reset()
        return found
    }
}
