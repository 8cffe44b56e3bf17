import AtollJSON
import AtollStore

/// The element identities of one list, in order, with the erased ones kept (RGA): what both
/// sides of sync keep beside each list so that inserts, erases and sets name elements, not
/// indexes, and every replica orders concurrent inserts alike (docs/protocol.md).
///
/// An element is erased (for good), or alive; an alive element of a list of links is hidden
/// while the object it links to does not exist (the store holds no link to a missing object),
/// and shown again when it comes back. Indexes count the shown elements: they are the store's
/// list positions.
public struct ListSequence: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public var id: ElementID
        public var alive: Bool
        /// Alive, but not in the store's list: it links to an object that does not exist.
        public var hidden = false
        /// The clock of the write that gave the element its value (insert or set).
        public var valueClock: Clock
        /// The element's value, kept where the store cannot give it: while the list's object is
        /// erased (what comes back if it is created again), and in lists of links (the object
        /// each element links to, shown or not).
        public var value: Value?

        public var shown: Bool { alive && !hidden }
    }

    public private(set) var entries: [Entry] = []
    /// The newest clear's place: elements older than it are dead, also those that arrive after
    /// it (an insert concurrent with a clear that is older than the clear loses, whatever the order).
    public private(set) var clearedBefore: ElementID?

    public init() {}

    /// A sequence for a list that has `count` elements and no identities yet (written before
    /// sync knew it): identities `[0, 0, 0, i]`, older than every clock.
    public init(unnamed count: Int) {
        entries = (0..<count).map { Entry(id: ElementID(.zero, Int64($0)), alive: true, valueClock: .zero) }
    }

    /// Appends live elements with the given identities (a list that arrives whole: bootstrap).
    public init(ids: [ElementID], clock: Clock) {
        entries = ids.map { Entry(id: $0, alive: true, valueClock: clock) }
    }

    /// A sequence as another replica holds it: its elements in order, those of them erased and
    /// hidden, the clock of each element's value (the insert's own clock when not given), and
    /// its clear watermark.
    public init(ids: [ElementID], erased: Set<ElementID>, hidden: Set<ElementID> = [], valueClocks: [ElementID: Clock] = [:],
                clearedBefore: ElementID?) {
        entries = ids.map { Entry(id: $0, alive: !erased.contains($0), hidden: hidden.contains($0), valueClock: valueClocks[$0] ?? $0.clock) }
        self.clearedBefore = clearedBefore
    }

    /// The shown elements' identities, in list order.
    public var liveIDs: [ElementID] { entries.filter(\.shown).map(\.id) }

    /// How many elements are shown: the store's list length.
    public var liveCount: Int { entries.reduce(0) { $0 + ($1.shown ? 1 : 0) } }

    /// The identities of the erased elements, in order.
    public var erasedIDs: [ElementID] { entries.filter { !$0.alive }.map(\.id) }

    /// The identities of the hidden elements, in order.
    public var hiddenIDs: [ElementID] { entries.filter { $0.alive && $0.hidden }.map(\.id) }

    private func position(of id: ElementID) -> Int? { entries.firstIndex { $0.id == id } }

    /// The index among shown elements of the entry at position `p` (how many shown precede it).
    private func shownIndex(before p: Int) -> Int {
        var n = 0
        for i in 0..<p where entries[i].shown { n += 1 }
        return n
    }

    public func contains(_ id: ElementID) -> Bool { position(of: id) != nil }

    public func entry(_ id: ElementID) -> Entry? { position(of: id).map { entries[$0] } }

    /// Inserts `id` after `after` (nil: at the front), past every element that follows that
    /// place with a greater identity (inserted concurrently, or later after them). Returns the
    /// index the new element is shown at; nil when it is known already, older than the last
    /// clear (dead on arrival: kept, as later inserts may name it) or `hidden`.
    public mutating func insert(_ id: ElementID, after: ElementID?, clock: Clock, value: Value? = nil, hidden: Bool = false) -> Int? {
        guard !contains(id) else { return nil }
        var p = 0
        if let after, let a = position(of: after) { p = a + 1 }
        while p < entries.count, entries[p].id > id { p += 1 }
        let dead = clearedBefore.map { id < $0 } ?? false
        entries.insert(Entry(id: id, alive: !dead, hidden: hidden, valueClock: clock, value: value), at: p)
        return dead || hidden ? nil : shownIndex(before: p)
    }

    /// Erases an alive element; returns the index it was shown at, or nil when it is unknown,
    /// erased already or hidden (the sequence changes all the same when it was alive).
    public mutating func erase(_ id: ElementID) -> Int? {
        guard let p = position(of: id), entries[p].alive else { return nil }
        let index = entries[p].shown ? shownIndex(before: p) : nil
        entries[p].alive = false
        return index
    }

    /// Sets an alive element's value when `clock` is not older than its value's (keeping
    /// `value` when given); returns the index it is shown at, or nil when the write loses or the
    /// element is unknown, erased or hidden.
    public mutating func set(_ id: ElementID, clock: Clock, value: Value? = nil) -> Int? {
        guard let p = position(of: id), entries[p].alive, clock >= entries[p].valueClock else { return nil }
        entries[p].valueClock = clock
        if let value { entries[p].value = value }
        return entries[p].shown ? shownIndex(before: p) : nil
    }

    /// Hides a shown element; returns the index it was shown at.
    public mutating func hide(_ id: ElementID) -> Int? {
        guard let p = position(of: id), entries[p].shown else { return nil }
        let index = shownIndex(before: p)
        entries[p].hidden = true
        return index
    }

    /// Shows a hidden element again; returns the index it is shown at.
    public mutating func show(_ id: ElementID) -> Int? {
        guard let p = position(of: id), entries[p].alive, entries[p].hidden else { return nil }
        entries[p].hidden = false
        return shownIndex(before: p)
    }

    /// Keeps `value` with the shown element at `index`.
    public mutating func keepValue(_ value: Value, atLive index: Int) {
        var n = 0
        for p in entries.indices where entries[p].shown {
            if n == index {
                entries[p].value = value
                return
            }
            n += 1
        }
    }

    /// Keeps `value` with an element (a write into the list of an erased object).
    public mutating func keepValue(_ value: Value, for id: ElementID) {
        if let p = position(of: id) { entries[p].value = value }
    }

    /// Keeps the values of the shown elements, in order (a list of links read from the store).
    public mutating func keepShownValues(_ values: [Value]) {
        for (i, v) in values.enumerated() { keepValue(v, atLive: i) }
    }

    /// The shown elements' kept values, in order (an erased object's list, to write back when
    /// it is created again); unless `keep`, the values are forgotten.
    public mutating func takeValues(keep: Bool = false) -> [Value] {
        var out = [Value]()
        for p in entries.indices {
            if entries[p].shown { out.append(entries[p].value ?? .null) }
            if !keep { entries[p].value = nil }
        }
        return out
    }

    /// Erases every alive element older than `point` (the clear's own place in its transaction:
    /// elements inserted earlier in that transaction go too, concurrent later ones stay);
    /// returns the indexes the shown ones had, highest first (the order to erase them in).
    public mutating func clear(before point: ElementID) -> [Int] {
        if clearedBefore.map({ $0 < point }) ?? true { clearedBefore = point }
        var indexes = [Int]()
        var shown = 0
        for p in entries.indices where entries[p].alive {
            let wasShown = entries[p].shown
            if entries[p].id < point {
                if wasShown { indexes.append(shown) }
                entries[p].alive = false
            }
            if wasShown { shown += 1 }
        }
        return indexes.reversed()
    }

    /// The identity of the shown element at `index`, and of the one before it (nil at the front).
    public func ids(around index: Int) -> (id: ElementID?, before: ElementID?) {
        var n = 0
        var previous: ElementID?
        for e in entries where e.shown {
            if n == index { return (e.id, previous) }
            previous = e.id
            n += 1
        }
        return (nil, previous)
    }

    // MARK: - Storage: compact JSON text,
    // {"clear": [ms, counter, node, n] | null,
    //  "entries": [[ms, counter, node, n, state, vms, vcounter, vnode (, kept value)], ...]}
    // with state 0 erased, 1 shown, 2 hidden.

    public var text: String {
        let list = Value.list(entries.map { e in
            var fields: [Value] = [.int(e.id.clock.milliseconds), .int(e.id.clock.counter), .int(e.id.clock.node), .int(e.id.n),
                                   .int(e.alive ? (e.hidden ? 2 : 1) : 0),
                                   .int(e.valueClock.milliseconds), .int(e.valueClock.counter), .int(e.valueClock.node)]
            if let v = e.value { fields.append(v) }
            return .list(fields)
        })
        return Wire.encode(.doc(["clear": clearedBefore?.value ?? .null, "entries": list]))
    }

    public init(text: String) throws {
        guard case .object(let d) = try EJSON.parse(text), case .list(let items)? = d["entries"] else {
            throw ProtocolError("list metadata is malformed")
        }
        clearedBefore = ElementID(d["clear"])
        for item in items {
            guard case .list(let f) = item, f.count == 8 || f.count == 9 else { throw ProtocolError("list metadata is malformed") }
            let n = f.prefix(8).map { v -> Int64 in if case .int(let i) = v { return i } else { return 0 } }
            entries.append(Entry(id: ElementID(Clock(milliseconds: n[0], counter: n[1], node: n[2]), n[3]), alive: n[4] != 0, hidden: n[4] == 2,
                                 valueClock: Clock(milliseconds: n[5], counter: n[6], node: n[7]), value: f.count == 9 ? f[8] : nil))
        }
    }
}
