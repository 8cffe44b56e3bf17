import AtollJSON
import AtollStore

/// The element identities of one list, in order, with the erased ones kept (RGA): what both
/// sides of sync keep beside each list so that inserts, erases and sets name elements, not
/// indexes, and every replica orders concurrent inserts alike (docs/protocol.md).
public struct ListSequence: Sendable, Hashable {
    public struct Entry: Sendable, Hashable {
        public var id: ElementID
        public var alive: Bool
        /// The clock of the write that gave the element its value (insert or set).
        public var valueClock: Clock
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

    /// The live elements' identities, in list order.
    public var liveIDs: [ElementID] { entries.filter(\.alive).map(\.id) }

    public var liveCount: Int { entries.reduce(0) { $0 + ($1.alive ? 1 : 0) } }

    private func position(of id: ElementID) -> Int? { entries.firstIndex { $0.id == id } }

    /// The live index of the element at entry position `p` (how many live elements precede it).
    private func liveIndex(before p: Int) -> Int {
        var n = 0
        for i in 0..<p where entries[i].alive { n += 1 }
        return n
    }

    public func contains(_ id: ElementID) -> Bool { position(of: id) != nil }

    /// Inserts `id` after `after` (nil: at the front), past every element that follows that
    /// place with a greater identity (inserted concurrently, or later after them). Returns the
    /// live index the new element takes, or nil when the element is known already.
    public mutating func insert(_ id: ElementID, after: ElementID?, clock: Clock) -> Int? {
        guard !contains(id) else { return nil }
        var p = 0
        if let after, let a = position(of: after) { p = a + 1 }
        while p < entries.count, entries[p].id > id { p += 1 }
        let dead = clearedBefore.map { id < $0 } ?? false
        entries.insert(Entry(id: id, alive: !dead, valueClock: clock), at: p)
        return dead ? nil : liveIndex(before: p)
    }

    /// Erases a live element; returns the live index it had, or nil when it is unknown or erased.
    public mutating func erase(_ id: ElementID) -> Int? {
        guard let p = position(of: id), entries[p].alive else { return nil }
        let index = liveIndex(before: p)
        entries[p].alive = false
        return index
    }

    /// Sets a live element's value when `clock` is not older than its value's; returns its live
    /// index, or nil when the write loses or the element is unknown or erased.
    public mutating func set(_ id: ElementID, clock: Clock) -> Int? {
        guard let p = position(of: id), entries[p].alive, clock >= entries[p].valueClock else { return nil }
        entries[p].valueClock = clock
        return liveIndex(before: p)
    }

    /// Erases every live element older than `point` (the clear's own place in its transaction:
    /// elements inserted earlier in that transaction go too, concurrent later ones stay);
    /// returns their live indexes, highest first (the order to erase them in).
    public mutating func clear(before point: ElementID) -> [Int] {
        if clearedBefore.map({ $0 < point }) ?? true { clearedBefore = point }
        var indexes = [Int]()
        var live = 0
        for p in entries.indices where entries[p].alive {
            if entries[p].id < point {
                indexes.append(live)
                entries[p].alive = false
            }
            live += 1
        }
        return indexes.reversed()
    }

    /// The identity of the live element at `index`, and of the one before it (nil at the front).
    public func ids(around index: Int) -> (id: ElementID?, before: ElementID?) {
        var live = 0
        var previous: ElementID?
        for e in entries where e.alive {
            if live == index { return (e.id, previous) }
            previous = e.id
            live += 1
        }
        return (nil, previous)
    }

    /// Appends live elements with the given identities (a list that arrives whole: bootstrap).
    public init(ids: [ElementID], clock: Clock) {
        entries = ids.map { Entry(id: $0, alive: true, valueClock: clock) }
    }

    /// A sequence as another replica holds it: its elements in order, those of them erased,
    /// and its clear watermark.
    public init(ids: [ElementID], erased: Set<ElementID>, clearedBefore: ElementID?, clock: Clock) {
        entries = ids.map { Entry(id: $0, alive: !erased.contains($0), valueClock: clock) }
        self.clearedBefore = clearedBefore
    }

    /// The identities of the erased elements, in order.
    public var erasedIDs: [ElementID] { entries.filter { !$0.alive }.map(\.id) }

    // MARK: - Storage: compact JSON text,
    // {"clear": [ms, counter, node, n] | null, "entries": [[ms, counter, node, n, alive, vms, vcounter, vnode], ...]}

    public var text: String {
        let list = Value.list(entries.map { e in
            .list([.int(e.id.clock.milliseconds), .int(e.id.clock.counter), .int(e.id.clock.node), .int(e.id.n),
                   .int(e.alive ? 1 : 0),
                   .int(e.valueClock.milliseconds), .int(e.valueClock.counter), .int(e.valueClock.node)])
        })
        return Wire.encode(.doc(["clear": clearedBefore?.value ?? .null, "entries": list]))
    }

    public init(text: String) throws {
        guard case .object(let d) = try EJSON.parse(text), case .list(let items)? = d["entries"] else {
            throw ProtocolError("list metadata is malformed")
        }
        clearedBefore = ElementID(d["clear"])
        for item in items {
            guard case .list(let f) = item, f.count == 8 else { throw ProtocolError("list metadata is malformed") }
            let n = f.map { v -> Int64 in if case .int(let i) = v { return i } else { return 0 } }
            entries.append(Entry(id: ElementID(Clock(milliseconds: n[0], counter: n[1], node: n[2]), n[3]), alive: n[4] != 0,
                                 valueClock: Clock(milliseconds: n[5], counter: n[6], node: n[7])))
        }
    }
}
