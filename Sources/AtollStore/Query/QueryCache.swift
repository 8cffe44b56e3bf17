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
    /// Keys compare their text by its bytes (`ExactText`, and `Value` and `SQLValue` likewise):
    /// Swift's string equality is canonical equivalence, while SQLite, and so a query, tells a
    /// precomposed "é" from "e" and a combining accent.
    struct QueryKey: Hashable {
        var className: ExactText
        var query: ExactText
        var arguments: [Value]
        var maxLinkDepth: Int?
    }

    struct CountKey: Hashable {
        var sql: ExactText
        var parameters: [SQLValue]
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
