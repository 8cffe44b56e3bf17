// The difference between two lists of distinct elements (row keys, set elements, dictionary
// keys): what was deleted, inserted and moved, in realm-core's index convention.

struct ListDiff {
    /// Indices in the old list of the elements that left it (and of those that moved).
    var deletions: [Int] = []
    /// Indices in the new list of the elements that entered it (and of those that moved).
    var insertions: [Int] = []
    var moves: [Move] = []
    /// The deletions and insertions of elements that really left or entered (not moves).
    var removed: [Int] = []
    var added: [Int] = []

    /// Compares two lists of distinct elements. Common leading and trailing runs are skipped
    /// without hashing, so a large list with a few changes costs little more than one pass.
    /// Moves are the elements outside a longest run kept in order (so they are as few as
    /// possible).
    init<T: Hashable>(old: [T], new: [T]) {
        self.init()
        var start = 0
        while start < old.count, start < new.count, old[start] == new[start] { start += 1 }
        var oldEnd = old.count, newEnd = new.count
        while oldEnd > start, newEnd > start, old[oldEnd - 1] == new[newEnd - 1] {
            oldEnd -= 1
            newEnd -= 1
        }
        guard start < oldEnd || start < newEnd else { return }
        var newIndex = [T: Int](minimumCapacity: newEnd - start)
        for i in start..<newEnd { newIndex[new[i]] = i }
        var inOld = Set<T>(minimumCapacity: oldEnd - start)
        // The elements kept, with their old and new positions, in old order.
        var kept = [(old: Int, new: Int)]()
        var removed = [Int](), added = [Int]()
        for i in start..<oldEnd {
            inOld.insert(old[i])
            if let j = newIndex[old[i]] { kept.append((i, j)) } else { removed.append(i) }
        }
        for j in start..<newEnd where !inOld.contains(new[j]) { added.append(j) }
        self.init(removed: removed, added: added, kept: kept)
    }

    /// The difference given which old positions were removed, which new ones added, and where
    /// each kept element went (in old order): the kept elements outside a longest run in
    /// increasing new order moved.
    /// - Parameter movedOld: when the caller knows which kept elements were moved (by old
    ///   position), those are the moves — provided the others kept their relative order;
    ///   otherwise the fewest moves are found.
    init(removed: [Int], added: [Int], kept: [(old: Int, new: Int)], movedOld: Set<Int>? = nil) {
        self.removed = removed
        self.added = added
        var stay = ListDiff.longestIncreasing(kept.map(\.new))
        if let movedOld {
            // Used when what stays is in order (else the moves would not rebuild the list).
            let known = kept.indices.filter { !movedOld.contains(kept[$0].old) }
            if zip(known, known.dropFirst()).allSatisfy({ kept[$0].new < kept[$1].new }) { stay = Set(known) }
        }
        var moved = [Move]()
        for (n, pair) in kept.enumerated() where !stay.contains(n) { moved.append(Move(from: pair.old, to: pair.new)) }
        moves = moved.sorted { $0.to < $1.to }
        deletions = (removed + moved.map(\.from)).sorted()
        insertions = (added + moved.map(\.to)).sorted()
    }

    init() {}

    /// The positions in `values` of one longest strictly increasing subsequence.
    static func longestIncreasing(_ values: [Int]) -> Set<Int> {
        guard !values.isEmpty else { return [] }
        var tails = [Int]()          // positions: the smallest tail of each length
        var previous = [Int](repeating: -1, count: values.count)
        for (i, v) in values.enumerated() {
            var lo = 0, hi = tails.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if values[tails[mid]] < v { lo = mid + 1 } else { hi = mid }
            }
            if lo > 0 { previous[i] = tails[lo - 1] }
            if lo == tails.count { tails.append(i) } else { tails[lo] = i }
        }
        var result = Set<Int>()
        var i = tails.last ?? -1
        while i >= 0 {
            result.insert(i)
            i = previous[i]
        }
        return result
    }
}
