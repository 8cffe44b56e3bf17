import Foundation

// The observers a notifier evaluates at each delivery: each keeps the state it last reported
// (the version of the change log it reflects, and what it needs to diff against), and turns a
// range of the change log into the change its callback receives.

class Observer {
    weak var token: NotificationToken?
    /// The change-log version the observer's state reflects; nil until its first delivery.
    var version: UInt64?
    /// Whether the observer is done (its object was deleted): it is removed after delivery.
    var finished = false

    init(token: NotificationToken) { self.token = token }

    /// The first delivery: takes the initial state; returns what to call, if anything.
    func start(_ store: Store, _ conn: Connection) throws -> (() -> Void)? { nil }

    /// A later delivery: what to call for the changes in `finder.index`, if anything.
    func evaluate(_ store: Store, _ finder: ModificationFinder) throws -> (() -> Void)? { nil }

    /// What to call when the change could not be computed (the observer is done after it).
    func failed(_ error: AtollError) -> (() -> Void)? { nil }

    /// Whether the observer needs the change log of what it is told (most do); one that does not
    /// is told through `committed` and costs a delivery nothing but the call.
    var needsChanges: Bool { true }

    /// A later delivery to an observer that does not need the change log.
    func committed(from: UInt64, to: UInt64) -> (() -> Void)? { nil }
}

/// An observer of commits alone: the version the store reached, no changes.
final class CommitObserver: Observer {
    let callback: @Sendable (UInt64) -> Void

    init(token: NotificationToken, callback: @escaping @Sendable (UInt64) -> Void) {
        self.callback = callback
        super.init(token: token)
    }

    override var needsChanges: Bool { false }

    override func committed(from: UInt64, to: UInt64) -> (() -> Void)? {
        let callback = self.callback
        return { callback(to) }
    }
}

/// A change an observer's callback receives.
protocol ObservedChange: Sendable {
    /// The change that tells the callback its observer failed (nil: such observers cannot).
    static func failure(_ error: AtollError) -> Self?
}

extension ResultsChange: ObservedChange {
    static func failure(_ error: AtollError) -> ResultsChange? {
        var change = ResultsChange(initial: false)
        change.error = error
        return change
    }
}

extension ObjectChange: ObservedChange {
    static func failure(_ error: AtollError) -> ObjectChange? {
        var change = ObjectChange(deleted: false)
        change.error = error
        return change
    }
}

extension CollectionChange: ObservedChange {
    static func failure(_ error: AtollError) -> CollectionChange? {
        var change = CollectionChange(initial: false)
        change.error = error
        return change
    }
}

extension RealmChange: ObservedChange {
    static func failure(_ error: AtollError) -> RealmChange? { nil }
}

/// An observer with its callback.
class CallbackObserver<Change: ObservedChange>: Observer {
    let callback: @Sendable (Change) -> Void

    init(token: NotificationToken, callback: @escaping @Sendable (Change) -> Void) {
        self.callback = callback
        super.init(token: token)
    }

    /// What delivers `change` (called once the store's lock is released).
    final func call(_ change: Change) -> () -> Void {
        let callback = self.callback
        return { callback(change) }
    }

    override func failed(_ error: AtollError) -> (() -> Void)? { Change.failure(error).map(call) }
}

final class RealmObserver: CallbackObserver<RealmChange> {
    override func evaluate(_ store: Store, _ finder: ModificationFinder) throws -> (() -> Void)? {
        let index = finder.index
        guard index.to > index.from else { return nil }
        let change = RealmChange(previousVersion: index.from, version: index.to, classes: index.changedClasses)
        return call(change)
    }
}

final class ResultsObserver: CallbackObserver<ResultsChange> {
    let results: Results
    let tree: KeyPathTree
    /// The classes whose changes can change the results (those linked to the results' class,
    /// either way, at any distance).
    let dependencies: Set<String>
    private var keys: [Int64] = []
    /// The objects' primary keys, when they are not the row keys.
    private var references: [Value]?
    /// Whether the keys are brought up to date from the changed objects alone
    /// (`Results.updatesIncrementally`) instead of running the query again.
    private lazy var incremental = results.updatesIncrementally

    /// Whether so few objects of the class changed that testing them beats running the query:
    /// a query over many keys costs about as much per key as a scan per row, and a selective
    /// query (few results) may well use an index.
    /// For sorted results each changed object is placed by a binary search of SQL comparisons
    /// (about 20 small queries for 100,000 objects): worth it for a few only.
    private func fewChanged(_ finder: ModificationFinder) -> Bool {
        let changed = finder.index.classes[results.className]?.touched.count ?? 0
        return changed <= (results.isUnsorted ? max(64, keys.count / 8) : 32)
    }

    /// The results now, from the keys they had and the objects of their class that changed:
    /// erased objects leave, changed and created ones are tested against the query alone and
    /// leave or enter in row-key order (unsorted results) or where the sort puts them.
    private func updated(_ store: Store, _ finder: ModificationFinder) throws -> ([Int64], [Value]?) {
        guard let changes = finder.index.classes[results.className] else { return (keys, references) }
        let info = results.info
        var candidates = Set<Int64>()
        for ref in changes.touched.keys {
            if let key = try finder.rowKey(info, ref) { candidates.insert(key) }
        }
        let matching = try results.matching(among: candidates)
        // Sorted: a changed object may have moved, so every matching one is placed again.
        var leaving = results.isUnsorted ? candidates.subtracting(matching) : candidates
        if !changes.erased.isEmpty {
            for (i, key) in keys.enumerated() where changes.erased.contains(references?[i] ?? .int(key)) { leaving.insert(key) }
        }
        var newKeys = keys, newReferences = references
        if !leaving.isEmpty {
            var kept = [Int64](), keptReferences = [Value]()
            kept.reserveCapacity(keys.count)
            // An object erased and created again with the same key leaves and enters again.
            for (i, key) in keys.enumerated() where !leaving.contains(key) {
                kept.append(key)
                if let references { keptReferences.append(references[i]) }
            }
            newKeys = kept
            newReferences = references == nil ? nil : keptReferences
        }
        guard results.isUnsorted else {
            for key in matching.sorted() {
                var lo = 0, hi = newKeys.count
                while lo < hi {
                    let mid = (lo + hi) / 2
                    if try results.sortsBefore(newKeys[mid], key) { lo = mid + 1 } else { hi = mid }
                }
                newKeys.insert(key, at: lo)
                newReferences?.insert(try store.reference(info, key, finder.conn), at: lo)
            }
            return (newKeys, newReferences)
        }
        let entering = matching.filter { ResultsObserver.position(of: $0, in: newKeys) == nil }.sorted()
        guard !entering.isEmpty else { return (newKeys, newReferences) }
        // Merge the entering keys into the kept ones (both ascending).
        var merged = [Int64](), mergedReferences = [Value]()
        merged.reserveCapacity(newKeys.count + entering.count)
        var i = 0
        for key in entering {
            while i < newKeys.count, newKeys[i] < key {
                merged.append(newKeys[i])
                if let newReferences { mergedReferences.append(newReferences[i]) }
                i += 1
            }
            merged.append(key)
            if newReferences != nil { mergedReferences.append(try store.reference(info, key, finder.conn)) }
        }
        merged += newKeys[i...]
        if let newReferences { mergedReferences += newReferences[i...] }
        return (merged, newReferences == nil ? nil : mergedReferences)
    }

    /// Where `key` is or would go in ascending `keys`.
    static func insertionPoint(of key: Int64, in keys: [Int64]) -> Int {
        var lo = 0, hi = keys.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if keys[mid] < key { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    static func position(of key: Int64, in keys: [Int64]) -> Int? {
        let at = insertionPoint(of: key, in: keys)
        return at < keys.count && keys[at] == key ? at : nil
    }

    init(token: NotificationToken, results: Results, tree: KeyPathTree, dependencies: Set<String>,
         callback: @escaping @Sendable (ResultsChange) -> Void) {
        self.results = results
        self.tree = tree
        self.dependencies = dependencies
        super.init(token: token, callback: callback)
    }

    override func start(_ store: Store, _ conn: Connection) throws -> (() -> Void)? {
        (keys, references) = try results.keysAndReferences()
        var change = ResultsChange(initial: true)
        change.count = keys.count
        return call(change)
    }

    override func evaluate(_ store: Store, _ finder: ModificationFinder) throws -> (() -> Void)? {
        let index = finder.index
        guard index.incomplete || dependencies.contains(where: index.touches) else { return nil }
        let old = keys, oldReferences = references
        let (new, newReferences) = try index.incomplete || !incremental || !fewChanged(finder)
            ? results.keysAndReferences() : updated(store, finder)
        let diff = ListDiff(old: old, new: new)
        let modified = index.incomplete ? Set(new) : try finder.modifiedRows(results.className, tree)
        var change = ResultsChange(initial: false)
        change.deletions = diff.deletions
        change.insertions = diff.insertions
        change.moves = diff.moves
        let added = Set(diff.added)
        if !modified.isEmpty {
            if modified.count <= 64 {
                for key in modified {
                    let found = incremental && results.isUnsorted ? ResultsObserver.position(of: key, in: new) : new.firstIndex(of: key)
                    if let i = found, !added.contains(i) { change.modifications.append(i) }
                }
                change.modifications.sort()
            } else {
                change.modifications = new.indices.filter { modified.contains(new[$0]) && !added.contains($0) }
            }
        }
        keys = new
        references = newReferences
        guard !change.deletions.isEmpty || !change.insertions.isEmpty || !change.modifications.isEmpty else {
            return nil
        }
        // Objects are named by primary key; when that is the row key, no column is read.
        change.deletedKeys = diff.removed.map { oldReferences?[$0] ?? .int(old[$0]) }
        change.insertedKeys = diff.added.map { newReferences?[$0] ?? .int(new[$0]) }
        change.modifiedKeys = change.modifications.map { newReferences?[$0] ?? .int(new[$0]) }
        change.count = new.count
        return call(change)
    }
}

final class ObjectObserver: CallbackObserver<ObjectChange> {
    let info: ClassInfo
    let reference: Value
    let rowKey: Int64
    let tree: KeyPathTree
    private var document: Document

    init(token: NotificationToken, info: ClassInfo, reference: Value, rowKey: Int64, document: Document,
         tree: KeyPathTree, callback: @escaping @Sendable (ObjectChange) -> Void) {
        self.info = info
        self.reference = reference
        self.rowKey = rowKey
        self.document = document
        self.tree = tree
        super.init(token: token, callback: callback)
    }

    override func evaluate(_ store: Store, _ finder: ModificationFinder) throws -> (() -> Void)? {
        let index = finder.index
        if try finder.isGone(info, reference, rowKey) {
            finished = true
            var change = ObjectChange(deleted: true)
            change.old = document
            return call(change)
        }
        let modified = try index.incomplete || finder.modifiedRows(info.name, tree).contains(rowKey)
        guard modified else { return nil }
        let changed = try changedProperties(store, finder)
        guard !changed.isEmpty, let now = try store.readObject(info, rowKey, finder.conn) else { return nil }
        var change = ObjectChange(deleted: false)
        change.changedProperties = changed
        for name in changed {
            change.old[name] = document[name] ?? .null
            change.new[name] = now[name] ?? .null
        }
        document = now
        return call(change)
    }

    /// The watched properties that changed, in schema order.
    private func changedProperties(_ store: Store, _ finder: ModificationFinder) throws -> [String] {
        let schema = store.schema
        var names = Set<String>()
        if finder.index.incomplete {
            names = Set(info.schema.properties.filter { !$0.isComputed }.map(\.name))
        } else if let paths = finder.index.classes[info.name]?.touched[reference] {
            for path in paths where !path.isEmpty && tree.matches(path[...], info.schema, schema) {
                if case .key(let name) = path[0] { names.insert(name) }
            }
        }
        for (p, sub) in tree.children(info.schema, schema) where !names.contains(p.name) {
            guard let sub, let targetName = p.objectType, let target = store.classInfo(ifExists: targetName),
                  !target.schema.isEmbedded else { continue }
            if p.type == .object {
                let changed = try finder.modifiedRows(targetName, sub)
                if try finder.holders(info, p, of: changed).contains(rowKey) { names.insert(p.name) }
            } else if p.type == .linkingObjects, let origin = p.linkOriginProperty.flatMap({ target.schema[property: $0] }) {
                var watched = sub
                if case .properties(var props) = sub { props[origin.name] = .some(nil); watched = .properties(props) }
                let changed = try finder.modifiedRows(targetName, watched).union(finder.createdRows(target))
                if try finder.targets(target, origin, of: changed).contains(rowKey) { names.insert(p.name) }
            }
        }
        return info.schema.properties.map(\.name).filter(names.contains)
    }
}

final class CollectionObserver: CallbackObserver<CollectionChange> {
    let info: ClassInfo
    let reference: Value
    let rowKey: Int64
    let property: Property
    /// What is watched on the linked objects of a collection of links.
    let tree: KeyPathTree?
    private var elements: [Value] = []
    private var dictionaryKeys: [String] = []

    init(token: NotificationToken, info: ClassInfo, reference: Value, rowKey: Int64, property: Property,
         tree: KeyPathTree?, callback: @escaping @Sendable (CollectionChange) -> Void) {
        self.info = info
        self.reference = reference
        self.rowKey = rowKey
        self.property = property
        self.tree = tree
        super.init(token: token, callback: callback)
    }

    /// Reads the collection's current elements (and, for a dictionary, its keys in order).
    func read(_ store: Store, _ conn: Connection) throws -> (elements: [Value], keys: [String]) {
        switch try store.readCollection(info, property, rowKey, conn) {
        case .list(let values): return (values, [])
        case .object(let doc): return (doc.values, doc.keys)
        default: return ([], [])
        }
    }

    override func start(_ store: Store, _ conn: Connection) throws -> (() -> Void)? {
        (elements, dictionaryKeys) = try read(store, conn)
        var change = CollectionChange(initial: true)
        change.count = elements.count
        return call(change)
    }

    override func evaluate(_ store: Store, _ finder: ModificationFinder) throws -> (() -> Void)? {
        let index = finder.index
        if try finder.isGone(info, reference, rowKey) {
            finished = true
            var change = CollectionChange(initial: false)
            change.deleted = true
            change.deletions = Array(elements.indices)
            change.deletedKeys = property.collection == .dictionary ? dictionaryKeys.map(Value.string) : elements
            return call(change)
        }
        let touchedHere = index.incomplete || index.classes[info.name]?.touched[reference]?.contains { $0.first == .key(property.name) } == true
        let linkTargets = try modifiedTargets(store, finder)
        guard touchedHere || !linkTargets.isEmpty else { return nil }
        let (newElements, newKeys) = try read(store, finder.conn)
        var change = CollectionChange(initial: false)
        var modifiedNew = Set<Int>()
        switch property.collection {
        case .dictionary:
            let diff = ListDiff(old: dictionaryKeys, new: newKeys)
            change.deletions = diff.deletions
            change.insertions = diff.insertions
            change.deletedKeys = diff.removed.map { .string(dictionaryKeys[$0]) }
            change.insertedKeys = diff.added.map { .string(newKeys[$0]) }
            let added = Set(diff.added)
            // Replacing a dictionary rewrites every entry: a kept key changed when its value did.
            let oldValues = Dictionary(uniqueKeysWithValues: zip(dictionaryKeys, elements))
            for (j, key) in newKeys.enumerated() where !added.contains(j) {
                if oldValues[key] != newElements[j] || index.incomplete || isModifiedTarget(newElements[j], linkTargets, finder) {
                    modifiedNew.insert(j)
                }
            }
        default:
            // Lists: their instructions replayed when they were edited element by element;
            // compared by value when they were replaced whole (and sets always).
            var set = Set<Int>()
            let diff: ListDiff
            if property.collection == .list, let replayed = replayList(finder, newCount: newElements.count) {
                (diff, set) = replayed
            } else {
                diff = valueDiff(elements, newElements)
            }
            modifiedNew = set
            change.deletions = diff.deletions
            change.insertions = diff.insertions
            change.moves = diff.moves
            change.deletedKeys = diff.removed.map { elements[$0] }
            change.insertedKeys = diff.added.map { newElements[$0] }
            let added = Set(diff.added)
            for (j, v) in newElements.enumerated() where !added.contains(j) && isModifiedTarget(v, linkTargets, finder) {
                modifiedNew.insert(j)
            }
        }
        change.modifications = modifiedNew.sorted()
        change.modifiedKeys = change.modifications.map {
            property.collection == .dictionary ? .string(newKeys[$0]) : newElements[$0]
        }
        change.count = newElements.count
        elements = newElements
        dictionaryKeys = newKeys
        guard !change.deletions.isEmpty || !change.insertions.isEmpty || !change.modifications.isEmpty else { return nil }
        return call(change)
    }

    /// Replays the list's instructions of the range on the old positions: which old elements
    /// left, which are new, where the others went, which were set (positions in the new list).
    /// Nil when the list was replaced whole (a clear) or the instructions do not add up.
    private func replayList(_ finder: ModificationFinder, newCount: Int) -> (ListDiff, Set<Int>)? {
        guard !finder.index.incomplete else { return nil }
        var origin: [Int?] = Array(elements.indices)
        var setHere = [Bool](repeating: false, count: elements.count)
        // The old elements a move instruction moved: the others keep their relative order.
        var movedOld = Set<Int>()
        for ins in finder.index.instructions(info.name, reference) where ins.path.first == .key(property.name) {
            if ins.path.count > 1 {
                // A change inside an embedded element.
                guard case .index(let i) = ins.path[1], setHere.indices.contains(i) else { return nil }
                setHere[i] = true
                continue
            }
            switch ins.op {
            case .listInsert:
                guard let i = ins.index, (0...origin.count).contains(i) else { return nil }
                origin.insert(nil, at: i)
                setHere.insert(false, at: i)
            case .listErase:
                guard let i = ins.index, origin.indices.contains(i) else { return nil }
                origin.remove(at: i)
                setHere.remove(at: i)
            case .listSet:
                guard let i = ins.index, origin.indices.contains(i) else { return nil }
                setHere[i] = true
            case .listMove:
                guard let i = ins.index, let j = ins.toIndex, origin.indices.contains(i), origin.indices.contains(j) else { return nil }
                let o = origin.remove(at: i), s = setHere.remove(at: i)
                origin.insert(o, at: j)
                setHere.insert(s, at: j)
                if let o { movedOld.insert(o) }
            default:
                return nil  // replaced whole (a clear, or a set of the property)
            }
        }
        guard origin.count == newCount else { return nil }
        let keptOld = Set(origin.compactMap { $0 })
        let removed = elements.indices.filter { !keptOld.contains($0) }
        let added = origin.indices.filter { origin[$0] == nil }
        let kept = origin.enumerated().compactMap { j, o in o.map { (old: $0, new: j) } }.sorted { $0.old < $1.old }
        let set = Set(setHere.indices.filter { setHere[$0] && origin[$0] != nil })
        // An element moved back where it was, among the same neighbours, did not move.
        let kept2 = kept
        let stillMoved = movedOld.filter { old in
            guard let n = kept2.firstIndex(where: { $0.old == old }) else { return false }
            let others = kept2.enumerated().filter { $0.offset != n && !movedOld.contains($0.element.old) }.map(\.element)
            return others.contains { ($0.old < old) != ($0.new < kept2[n].new) }
        }
        return (ListDiff(removed: removed, added: added, kept: kept, movedOld: Set(stillMoved)), set)
    }

    /// The difference of two lists by value: equal elements are kept (the n-th occurrence of a
    /// value matching its n-th occurrence), the others deleted or inserted.
    private func valueDiff(_ old: [Value], _ new: [Value]) -> ListDiff {
        func tagged(_ values: [Value]) -> [TaggedValue] {
            var seen = [Value: Int]()
            return values.map { v in
                let n = seen[v, default: 0]
                seen[v] = n + 1
                return TaggedValue(value: v, occurrence: n)
            }
        }
        return ListDiff(old: tagged(old), new: tagged(new))
    }

    struct TaggedValue: Hashable {
        var value: Value
        var occurrence: Int
    }

    /// The row keys of linked objects that changed in what `tree` watches (links only).
    private func modifiedTargets(_ store: Store, _ finder: ModificationFinder) throws -> Set<Int64> {
        guard let tree, property.type == .object, let target = property.objectType,
              let targetInfo = store.classInfo(ifExists: target), !targetInfo.schema.isEmbedded,
              finder.index.touches(target) else { return [] }
        return try finder.modifiedRows(target, tree)
    }

    private func isModifiedTarget(_ element: Value, _ targets: Set<Int64>, _ finder: ModificationFinder) -> Bool {
        guard !targets.isEmpty, let target = property.objectType.flatMap(finder.store.classInfo(ifExists:)),
              !element.isNull, let key = try? finder.rowKey(target, element) else { return false }
        return targets.contains(key)
    }
}
