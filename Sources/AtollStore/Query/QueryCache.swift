/// What a store remembers of its queries while its data stays unchanged: compiled queries by
/// their text and arguments, and counts by their statement and parameters, so that the same
/// query on the same data (a UI asking a list's count again, a loop compiling one query with one
/// argument) neither compiles nor counts twice.
///
/// It forgets everything at the first sign of a change: another connection's commit (`PRAGMA
/// data_version`), a write operation or transaction end through this store, or a new snapshot
/// (`Store.DataStamp`).
/// Only reads outside write transactions use it: inside one, statements other than the store's
/// write operations may change rows (a sync client's applier), and each read counts afresh.
struct QueryCache {
    /// Keys compare their text by its bytes (`Exact`): Swift's string equality is canonical
    /// equivalence (a precomposed "é" equals "e" and a combining accent), while SQLite, and so a
    /// query, tells them apart.
    struct QueryKey: Hashable {
        var className: Exact<String>
        var query: Exact<String>
        /// (`Value`'s own equality takes strings byte for byte.)
        var arguments: [Value]
        var maxLinkDepth: Int?

        init(className: String, query: String, arguments: [Value], maxLinkDepth: Int?) {
            self.className = Exact(className)
            self.query = Exact(query)
            self.arguments = arguments
            self.maxLinkDepth = maxLinkDepth
        }
    }

    struct CountKey: Hashable {
        var sql: Exact<String>
        var parameters: [Exact<SQLValue>]

        init(sql: String, parameters: [SQLValue]) {
            self.sql = Exact(sql)
            self.parameters = parameters.map(Exact.init)
        }
    }

    /// At most this many of each are kept; past it, they are forgotten and remembered anew.
    static let capacity = 256

    private var stamp: Store.DataStamp?
    private var queries: [QueryKey: (info: ClassInfo, compiled: CompiledQuery)] = [:]
    private var counts: [CountKey: Int] = [:]

    /// Forgets everything remembered when the data is not as it was then.
    mutating func validate(_ now: Store.DataStamp) {
        guard stamp != now else { return }
        stamp = now
        queries = [:]
        counts = [:]
    }

    /// How many compiles and counts it saved (for tests).
    private(set) var hits = 0

    mutating func query(_ key: QueryKey) -> (info: ClassInfo, compiled: CompiledQuery)? {
        guard let known = queries[key] else { return nil }
        hits += 1
        return known
    }

    mutating func remember(_ key: QueryKey, _ info: ClassInfo, _ compiled: CompiledQuery) {
        if queries.count >= Self.capacity { queries = [:] }
        queries[key] = (info, compiled)
    }

    mutating func count(_ key: CountKey) -> Int? {
        guard let n = counts[key] else { return nil }
        hits += 1
        return n
    }

    mutating func remember(_ key: CountKey, count: Int) {
        if counts.count >= Self.capacity { counts = [:] }
        counts[key] = count
    }
}

/// A value compared and hashed with the text in it taken byte for byte.
struct Exact<T>: Hashable where T: ExactlyComparable {
    let value: T
    init(_ value: T) { self.value = value }
    static func == (a: Exact, b: Exact) -> Bool { a.value.exactlyEquals(b.value) }
    func hash(into hasher: inout Hasher) { value.hashExactly(into: &hasher) }
}

protocol ExactlyComparable {
    func exactlyEquals(_ other: Self) -> Bool
    func hashExactly(into hasher: inout Hasher)
}

extension String: ExactlyComparable {
    func exactlyEquals(_ other: String) -> Bool { utf8.elementsEqual(other.utf8) }
    func hashExactly(into hasher: inout Hasher) {
        var copy = self
        copy.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

extension SQLValue: ExactlyComparable {
    func exactlyEquals(_ other: SQLValue) -> Bool {
        if case .text(let a) = self, case .text(let b) = other { return a.exactlyEquals(b) }
        return self == other
    }

    func hashExactly(into hasher: inout Hasher) {
        if case .text(let t) = self {
            hasher.combine(3)
            t.hashExactly(into: &hasher)
        } else {
            hasher.combine(self)
        }
    }
}
