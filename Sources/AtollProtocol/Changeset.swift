import AtollStore

// One file over 600 lines: the instruction and changeset types, and what both sides do with runs
// of instructions (an object's group, the runs of new objects, a changeset made normal). Those
// read and build the instruction's fields directly, so a field added is seen everywhere it counts.

/// What one sync instruction does (docs/protocol.md, "Instructions and changesets").
public enum SyncOp: String, Sendable, CaseIterable {
    case create, erase, set
    case listInsert, listErase, listSet, listClear
    case setInsert, setErase, setClear
    case dictionarySet, dictionaryErase, dictionaryClear
    /// A counter: the integer at `path` grows by `value`; concurrent adds add up.
    case addInteger
    /// Server to client only: the whole object (it entered the view, or a resume).
    case upsert
    /// Server to client only: the object left the view; remove it from the device only.
    case evict
    /// Server to client only, after a resume: of the class, the view holds exactly the objects
    /// whose primary keys `value` lists; remove every other one the device holds from the device
    /// only (except those with unacknowledged changes). The server says this instead of naming
    /// objects that left the view when it may not name them to this user.
    case keep

    /// Whether the instruction carries a `value`.
    public var carriesValue: Bool {
        switch self {
        case .set, .listInsert, .listSet, .setInsert, .setErase, .dictionarySet, .addInteger, .keep: return true
        default: return false
        }
    }

    /// Whether the instruction addresses a list element by identity.
    public var addressesElement: Bool {
        switch self {
        case .listInsert, .listErase, .listSet: return true
        default: return false
        }
    }
}

/// One instruction of a sync changeset: a change-log instruction with list positions named by
/// element identities, or (downloads only) an upsert or eviction of a whole object.
///
/// What only some instructions carry (list identities, an upsert's object and clocks) lives in
/// one box shared by copies until one of them changes it: integration copies instructions often,
/// and most are creates and sets, for which a copy is then a few words and no box at all.
public struct SyncInstruction: Hashable, Sendable {
    public var op: SyncOp
    public var className: String
    public var primaryKey: Value
    public var path: [PathElement] = []
    public var value: Value?
    private var extras: Extras?

    /// listInsert, listErase, listSet: the element; listInsert: `after` is its predecessor (nil:
    /// at the front).
    public var element: ElementID? { get { extras?.element } set { extrasForWriting.element = newValue } }
    public var after: ElementID? { get { extras?.after } set { extrasForWriting.after = newValue } }
    /// upsert: the object, the clock of most of its fields, the fields whose clock differs, and
    /// the sequence of each list property (its elements' identities, erased ones included, and
    /// its clear watermark: what a device needs to place its own pending inserts as the server
    /// will).
    public var object: Document? { get { extras?.object } set { extrasForWriting.object = newValue } }
    public var clock: Clock? { get { extras?.clock } set { extrasForWriting.clock = newValue } }
    public var fieldClocks: [ExactText: Clock] {
        get { extras?.fieldClocks ?? [:] }
        _modify { yield &extrasForWriting.fieldClocks }
    }
    public var lists: [String: ListSequence] {
        get { extras?.lists ?? [:] }
        _modify { yield &extrasForWriting.lists }
    }
    /// upsert: the clock of the object's newest erase, when it was erased and created again:
    /// writes older than it are gone (a device's own older writes too).
    public var erasedAt: Clock? { get { extras?.erasedAt } set { extrasForWriting.erasedAt = newValue } }

    public init(_ op: SyncOp, _ className: String, _ primaryKey: Value, path: [PathElement] = [], value: Value? = nil,
                element: ElementID? = nil, after: ElementID? = nil) {
        self.op = op
        self.className = className
        self.primaryKey = primaryKey
        self.path = path
        self.value = value
        if element != nil || after != nil {
            self.element = element
            self.after = after
        }
    }

    /// The box, made or copied first so that this instruction alone holds it.
    private var extrasForWriting: Extras {
        mutating get {
            // Asked before binding the box to a name: a name would be a second reference.
            if isKnownUniquelyReferenced(&extras), let extras { return extras }
            let fresh = extras.map(Extras.init(copying:)) ?? Extras()
            extras = fresh
            return fresh
        }
    }

    public static func == (a: SyncInstruction, b: SyncInstruction) -> Bool {
        a.op == b.op && a.className == b.className && a.primaryKey == b.primaryKey && a.path == b.path && a.value == b.value
            && a.element == b.element && a.after == b.after && a.object == b.object && a.clock == b.clock
            && a.fieldClocks == b.fieldClocks && a.lists == b.lists && a.erasedAt == b.erasedAt
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(op)
        hasher.combine(className)
        hasher.combine(primaryKey)
        hasher.combine(path)
        hasher.combine(value)
        hasher.combine(element)
        hasher.combine(after)
        hasher.combine(object)
        hasher.combine(clock)
        hasher.combine(fieldClocks)
        hasher.combine(lists)
        hasher.combine(erasedAt)
    }

    /// The fields few instructions carry. Changed only while one instruction alone holds it.
    private final class Extras: @unchecked Sendable {
        var element: ElementID?
        var after: ElementID?
        var object: Document?
        var clock: Clock?
        var fieldClocks: [ExactText: Clock] = [:]
        var lists: [String: ListSequence] = [:]
        var erasedAt: Clock?

        init() {}

        init(copying other: Extras) {
            element = other.element
            after = other.after
            object = other.object
            clock = other.clock
            fieldClocks = other.fieldClocks
            lists = other.lists
            erasedAt = other.erasedAt
        }
    }

    /// The property the instruction changes (the first path element), if any.
    public var property: String? {
        if case .key(let k)? = path.first { return k }
        return nil
    }

    /// The path as text (`name`, `address.city`, `tags.3`), the key of field clocks.
    public var pathKey: String {
        path.map { element -> String in
            switch element {
            case .key(let k): return k
            case .index(let i): return String(i)
            }
        }.joined(separator: ".")
    }
}

/// One transaction's instructions as they travel: an upload carries the client version and the
/// last server version the client had integrated; a download carries the server version.
public struct SyncChangeset: Hashable, Sendable {
    public var clientVersion: UInt64 = 0
    public var lastServerVersion: UInt64 = 0
    public var serverVersion: UInt64 = 0
    public var clock: Clock
    public var instructions: [SyncInstruction]

    public init(clientVersion: UInt64 = 0, lastServerVersion: UInt64 = 0, serverVersion: UInt64 = 0,
                clock: Clock, instructions: [SyncInstruction]) {
        self.clientVersion = clientVersion
        self.lastServerVersion = lastServerVersion
        self.serverVersion = serverVersion
        self.clock = clock
        self.instructions = instructions
    }
}

/// A key identifying one object across replicas: class and primary key.
public struct ObjectID: Hashable, Sendable {
    public var className: String
    public var primaryKey: Value
    public init(_ className: String, _ primaryKey: Value) {
        self.className = className
        self.primaryKey = primaryKey
    }

    /// The key alone: equal objects have equal keys, and a changeset's objects are mostly of a
    /// few classes, so hashing the class name too would double the work for little spread.
    public func hash(into hasher: inout Hasher) { hasher.combine(primaryKey) }
}

extension Array where Element == ObjectID {
    /// The objects' keys by class, each class in the order of its first object. Classes are
    /// few: a short list beats hashing each object's class name.
    public var keysByClass: [(className: String, keys: [Value])] {
        var out = [(className: String, keys: [Value])]()
        var current = -1
        for id in self {
            if current < 0 || out[current].className != id.className {
                if let known = out.firstIndex(where: { $0.className == id.className }) {
                    current = known
                } else {
                    out.append((id.className, []))
                    current = out.count - 1
                }
            }
            out[current].keys.append(id.primaryKey)
        }
        return out
    }
}

extension SyncInstruction {
    public var objectID: ObjectID { ObjectID(className, primaryKey) }

    /// Whether the instruction addresses the same object as `other`.
    public func sameObject(as other: SyncInstruction) -> Bool {
        className == other.className && primaryKey == other.primaryKey
    }
}

extension Array where Element == SyncInstruction {
    /// The objects the instructions address, each once, in the order of their first
    /// instruction. An object's instructions mostly come together, so only the first of each
    /// run is looked up. (On arrays, not any collection: a generic property used from another
    /// module runs unspecialized.)
    public var objectIDs: [ObjectID] {
        // Through the buffer: an element read by subscript is copied whole, with its references.
        withUnsafeBufferPointer { all in
            var starts = [Int]()
            for i in all.indices where i == 0 || !all[i].sameObject(as: all[i - 1]) { starts.append(i) }
            var out = [ObjectID]()
            var seen = Set<ObjectID>(minimumCapacity: starts.count)
            out.reserveCapacity(starts.count)
            for i in starts {
                let id = all[i].objectID
                if seen.insert(id).inserted { out.append(id) }
            }
            return out
        }
    }
}

extension Value {
    /// This value with the part at `path` (property names into embedded objects, indexes into
    /// lists) replaced by `new`: how a `set` into an embedded object is applied.
    /// - Throws: `ProtocolError` when the path leads out of the value.
    public func replacing(at path: ArraySlice<PathElement>, with new: Value) throws -> Value {
        guard let first = path.first else { return new }
        switch (first, self) {
        case (.key(let k), .object(var d)):
            d[k] = try (d[k] ?? .null).replacing(at: path.dropFirst(), with: new)
            return .object(d)
        case (.index(let i), .list(var items)):
            guard items.indices.contains(i) else { throw ProtocolError("a path index is out of range") }
            items[i] = try items[i].replacing(at: path.dropFirst(), with: new)
            return .list(items)
        default:
            throw ProtocolError("a path leads into a value that is not an embedded object")
        }
    }
}

extension Store {
    /// Applies a `set` instruction: a property, or a path into embedded objects (the embedded
    /// object is read, changed and written back whole).
    public func apply(set ins: SyncInstruction) throws {
        guard let pkName = schema.classes.first(where: { $0.name == ins.className })?.primaryKey,
              case .key(let property)? = ins.path.first else {
            throw ProtocolError("set needs a class with a primary key and a property")
        }
        // Written here, it would name another object (and write that one instead).
        guard property != pkName else { throw ProtocolError("the primary key '\(pkName)' cannot be set") }
        var doc = Document()
        doc[pkName] = ins.primaryKey
        if ins.path.count == 1 {
            doc[property] = ins.value ?? .null
        } else {
            let current = try value(ins.className, primaryKey: ins.primaryKey, property: property) ?? .null
            doc[property] = try current.replacing(at: ins.path.dropFirst(), with: ins.value ?? .null)
        }
        _ = try create(ins.className, doc, update: .modified)
    }
}

extension SyncInstruction {
    /// A create and its object's own writes as one document, when they are only whole-property
    /// writes, appends to lists (each after the one before), set adds and dictionary entries —
    /// how the change log records a new object — so that it can be created in one step.
    public static func wholeObject(_ block: ArraySlice<SyncInstruction>, primaryKey pkName: String) -> Document? {
        guard let first = block.first, first.op == .create else { return nil }
        var doc = Document()
        doc[pkName] = first.primaryKey
        var lastElement = [String: ElementID]()
        var lists = [String: [Value]]()
        var sets = [String: [Value]]()
        var dictionaries = [String: Document]()
        for ins in block.dropFirst() {
            guard ins.sameObject(as: first), let property = ins.property, property != pkName else { return nil }
            switch ins.op {
            case .set where ins.path.count == 1:
                if !(lists.isEmpty && sets.isEmpty && dictionaries.isEmpty),
                   lists[property] != nil || sets[property] != nil || dictionaries[property] != nil { return nil }
                doc[property] = ins.value ?? .null
            case .listInsert where ins.path.count == 1:
                guard ins.after == lastElement[property], let e = ins.element else { return nil }
                lastElement[property] = e
                lists[property, default: []].append(ins.value ?? .null)
            case .setInsert where ins.path.count == 1:
                sets[property, default: []].append(ins.value ?? .null)
            case .dictionarySet where ins.path.count == 2:
                guard case .key(let key) = ins.path[1] else { return nil }
                dictionaries[property, default: Document()][key] = ins.value ?? .null
            default:
                return nil
            }
        }
        for (p, v) in lists { doc[p] = .list(v) }
        for (p, v) in sets { doc[p] = .list(v) }
        for (p, v) in dictionaries { doc[p] = .object(v) }
        return doc
    }

    /// The list identities a block made by `wholeObject` gives its lists.
    public static func listSequences(_ block: ArraySlice<SyncInstruction>, clock: Clock) -> [String: ListSequence] {
        var sequences = [String: ListSequence]()
        for ins in block where ins.op == .listInsert {
            guard let p = ins.property, let e = ins.element else { continue }
            _ = sequences[p, default: ListSequence()].insert(e, after: ins.after, clock: clock)
        }
        return sequences
    }
}

/// The runs of instructions that create new objects, as batched creation takes them: a create
/// and the object's own writes after it, up to the next create or erase or another object's
/// instruction; each with the object as one document when the run writes it whole
/// (`SyncInstruction.wholeObject`). Found in one pass, on another core, while the caller looks
/// up which of the objects are new; then asked for in order of position.
public struct CreateRuns: Sendable {
    public struct Run: Sendable {
        public let end: Int
        public let doc: Document?
        /// The identities of the object's lists, made at the create's clock (downloads only).
        public let lists: [String: ListSequence]

        public init(end: Int, doc: Document?, lists: [String: ListSequence]) {
            self.end = end
            self.doc = doc
            self.lists = lists
        }
    }

    private var runs: [(start: Int, run: Run)] = []
    private var cursor = 0

    /// The runs in an upload's instructions, of the classes of `schema`.
    public init(_ all: [SyncInstruction], schema: Schema) {
        self.init(all, schema, { $0 }, block: { all[$0] }, listClock: nil)
    }

    /// The runs in a download's instructions, with their lists.
    public init(_ all: [(SyncInstruction, Clock)], schema: Schema) {
        self.init(all, schema, \.0, block: { all[$0].map(\.0)[...] }, listClock: \.1)
    }

    private init<T>(_ all: [T], _ schema: Schema, _ instruction: (T) -> SyncInstruction,
                    block: (Range<Int>) -> ArraySlice<SyncInstruction>, listClock: ((T) -> Clock)?) {
        var primaryKeys = [String: String]()
        for c in schema.classes { primaryKeys[c.name] = c.primaryKey }
        var i = 0
        while i < all.count {
            let ins = instruction(all[i])
            guard ins.op == .create else {
                i += 1
                continue
            }
            let j = Self.end(all, at: i, instruction)
            let instructions = block(i..<j)
            let doc = primaryKeys[ins.className].flatMap { SyncInstruction.wholeObject(instructions, primaryKey: $0) }
            let lists = doc == nil ? [:] : listClock.map { SyncInstruction.listSequences(instructions, clock: $0(all[i])) } ?? [:]
            runs.append((i, Run(end: j, doc: doc, lists: lists)))
            i = j
        }
    }

    /// The end of the run of the object created at `i`.
    public static func end<T>(_ all: [T], at i: Int, _ instruction: (T) -> SyncInstruction) -> Int {
        let first = instruction(all[i])
        var j = i + 1
        while j < all.endIndex {
            let next = instruction(all[j])
            guard next.sameObject(as: first), next.op != .create, next.op != .erase else { break }
            j += 1
        }
        return j
    }

    /// The run that starts at `i`, if any; positions must be asked for in increasing order.
    public mutating func run(at i: Int) -> Run? {
        while cursor < runs.count, runs[cursor].start < i { cursor += 1 }
        guard cursor < runs.count, runs[cursor].start == i else { return nil }
        return runs[cursor].run
    }
}

extension SyncChangeset {
    /// The changeset without the instructions a later one of the same changeset makes moot, so
    /// that replicas can merge its instructions by clock alone (docs/protocol.md, "One
    /// transaction"). An instruction with the changeset's own clock is then always later in the
    /// transaction than another one it meets: what is left out is
    ///
    /// - every instruction on an object before the object's last erase in the changeset;
    /// - a set of a path, or an add to it, before a later set of the path or of a path that holds it;
    /// - an add or remove of a set element (or a write or erase of a dictionary key) before a later
    ///   one of the same element (key), or before a later clear of the collection;
    /// - a clear of a set or dictionary before a later clear of it;
    /// - an add to a counter before a later add to it, which takes its amount (so that one add
    ///   per counter and clock is one add: a changeset sent twice adds once).
    ///
    /// List instructions stay: they name their elements and clear points themselves.
    public func normalized() -> SyncChangeset {
        if isNormal { return self }
        // Walked from the end: what later instructions of each object did.
        struct Later {
            var erased = false
            var paths: [[PathElement]] = []
            /// Set members and dictionary keys, byte for byte.
            var members: Set<ExactText> = []
            var cleared: Set<String> = []
            /// The kept (latest) add of each path: its index.
            var adds: [[PathElement]: Int] = [:]
        }
        var later = [ObjectID: Later]()
        var keep = [Bool](repeating: true, count: instructions.count)
        var summed = [Int: Int64]()
        var dropped = false
        // An object's instructions mostly come together: its state is looked up when a run of
        // them begins and put back when it ends, not for each instruction.
        var current: (index: Int, id: ObjectID)?
        var state = Later()
        for i in instructions.indices.reversed() {
            let ins = instructions[i]
            if let c = current, instructions[c.index].sameObject(as: ins) {
                current = (i, c.id)
            } else {
                if let c = current { later[c.id] = state }
                let id = ins.objectID
                state = later[id] ?? Later()
                current = (i, id)
            }
            if state.erased {
                keep[i] = false
                dropped = true
                continue
            }
            let property = ins.property ?? ""
            switch ins.op {
            case .erase:
                state.erased = true
            case .set, .addInteger:
                if state.paths.contains(where: { ins.path.starts(with: $0) }) {
                    keep[i] = false
                    dropped = true
                } else if ins.op == .set {
                    state.paths.append(ins.path)
                } else if case .int(let delta)? = ins.value {
                    if let kept = state.adds[ins.path] {
                        summed[kept, default: 0] &+= delta
                        keep[i] = false
                        dropped = true
                    } else {
                        state.adds[ins.path] = i
                    }
                }
            case .setInsert, .setErase:
                let member = ExactText(setElementPath(property, ins.value ?? .null))
                if state.cleared.contains(property) || !state.members.insert(member).inserted {
                    keep[i] = false
                    dropped = true
                }
            case .dictionarySet, .dictionaryErase:
                guard ins.path.count == 2, case .key(let k) = ins.path[1] else { break }
                if state.cleared.contains(property) || !state.members.insert(ExactText(dictionaryKeyPath(property, k))).inserted {
                    keep[i] = false
                    dropped = true
                }
            case .setClear, .dictionaryClear:
                if !state.cleared.insert(property).inserted {
                    keep[i] = false
                    dropped = true
                }
            default:
                break
            }
        }
        guard dropped else { return self }
        var out = self
        out.instructions = instructions.indices.filter { keep[$0] }.map { i in
            guard let extra = summed[i], case .int(let delta)? = instructions[i].value else { return instructions[i] }
            var sum = instructions[i]
            sum.value = .int(delta &+ extra)
            return sum
        }
        return out
    }
}

extension SyncChangeset {
    /// Whether `normalized()` would leave the changeset as it is — most often so, and cheaper to
    /// tell than to normalize: each object's instructions come in one run, which erases the object
    /// (if at all) first, writes each path once and none inside another it writes, adds or removes
    /// each set element (key) once, clears a collection only before writing into it, adds to a
    /// counter once and not before setting it.
    var isNormal: Bool {
        // Through the buffer: an element read by subscript is copied whole, with its references.
        instructions.withUnsafeBufferPointer { all in
            var seen = Set<ObjectID>(minimumCapacity: all.count / 4)
            var written = RunWrites()
            var start = 0
            while start < all.count {
                var end = start + 1
                while end < all.count, all[end].className == all[start].className, all[end].primaryKey == all[start].primaryKey { end += 1 }
                guard seen.insert(all[start].objectID).inserted, Self.runIsNormal(all, start..<end, &written) else { return false }
                start = end
            }
            return true
        }
    }

    /// What one run wrote so far; kept from run to run for its arrays' storage.
    private struct RunWrites {
        var paths = [[PathElement]]()
        /// Set members and dictionary keys, byte for byte.
        var members = [ExactText]()
        var cleared = [String]()
        var added = [[PathElement]]()

        mutating func reset() {
            if !paths.isEmpty { paths.removeAll(keepingCapacity: true) }
            if !members.isEmpty { members.removeAll(keepingCapacity: true) }
            if !cleared.isEmpty { cleared.removeAll(keepingCapacity: true) }
            if !added.isEmpty { added.removeAll(keepingCapacity: true) }
        }
    }

    /// Whether one object's run of instructions is normal (see `isNormal`).
    private static func runIsNormal(_ run: UnsafeBufferPointer<SyncInstruction>, _ range: Range<Int>, _ written: inout RunWrites) -> Bool {
        written.reset()
        for n in range {
            switch run[n].op {
            case .erase:
                if n > range.lowerBound { return false }
            case .set:
                let path = run[n].path
                for p in written.paths where path.starts(with: p) || p.starts(with: path) { return false }
                if written.added.contains(where: { $0.starts(with: path) }) { return false }
                written.paths.append(path)
            case .addInteger:
                if written.added.contains(run[n].path) { return false }
                written.added.append(run[n].path)
            case .setInsert, .setErase, .dictionarySet, .dictionaryErase:
                let ins = run[n]
                let property = ins.property ?? ""
                let member = ExactText(ins.op == .setInsert || ins.op == .setErase
                    ? setElementPath(property, ins.value ?? .null) : dictionaryKeyPath(property, ins.pathKey))
                if written.members.contains(member) { return false }
                written.members.append(member)
            case .setClear, .dictionaryClear:
                let property = run[n].property ?? ""
                if written.cleared.contains(property) || written.members.contains(where: { $0.hasPrefix(property + (run[n].op == .setClear ? setSeparator : dictionarySeparator)) }) {
                    return false
                }
                written.cleared.append(property)
            default:
                break
            }
        }
        return true
    }
}

extension SyncInstruction {
    /// The newest clock the instruction carries beside its changeset's (an upsert's clocks, list
    /// element identities), if it carries any. A replica that takes the instruction in moves its
    /// own clock past it, so that its next writes are newer than anything it holds.
    public var newestCarriedClock: Clock? {
        // Most instructions carry none: nothing is collected for them.
        guard let extras else { return nil }
        var newest: Clock?
        func see(_ c: Clock) { if newest.map({ c > $0 }) ?? true { newest = c } }
        if let e = extras.element { see(e.clock) }
        if let a = extras.after { see(a.clock) }
        if let c = extras.clock { see(c) }
        if let e = extras.erasedAt { see(e) }
        for c in extras.fieldClocks.values { see(c) }
        for seq in extras.lists.values {
            for e in seq.entries {
                see(e.id.clock)
                see(e.valueClock)
            }
            if let c = seq.clearedBefore { see(c.clock) }
        }
        return newest
    }
}
