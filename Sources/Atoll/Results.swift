import AtollStore
import Foundation

/// What a `Results` selects: predicates (Realm Query Language, each with its own `$0…`
/// arguments), sort keys and distinct keys. Combined into one query when read.
struct ResultsQuery {
    var predicates: [(String, [Value])] = []
    var sorts: [SortDescriptor] = []
    var distinct: [String] = []
    /// An error found before the store saw the query (a typed query that cannot be written);
    /// reading the results reports it, as it does a bad predicate's.
    var failure: AtollError?

    /// The query text, with each predicate's arguments renumbered after the previous ones'.
    var text: (String, [Value]) {
        var parts = [String]()
        var written = [String]()
        var arguments = [Value]()
        for (query, args) in predicates {
            // A filter's own SORT/DISTINCT/LIMIT go after every predicate (text that does not
            // tokenize is kept whole: the store reports its error).
            let (predicate, descriptors) = (try? Store.splitDescriptors(query)) ?? (query, "")
            let trimmed = predicate.trimmingCharacters(in: .whitespaces)
            parts.append("(" + renumber(trimmed.isEmpty ? "TRUEPREDICATE" : trimmed, by: arguments.count) + ")")
            if !descriptors.isEmpty { written.append(renumber(descriptors, by: arguments.count)) }
            arguments += args
        }
        var text = parts.isEmpty ? "TRUEPREDICATE" : parts.joined(separator: " AND ")
        for d in written { text += " " + d }
        if !distinct.isEmpty { text += " DISTINCT(" + distinct.joined(separator: ", ") + ")" }
        if !sorts.isEmpty {
            text += " SORT(" + sorts.map { "\($0.keyPath) \($0.ascending ? "ASC" : "DESC")" }.joined(separator: ", ") + ")"
        }
        return (text, arguments)
    }
}

/// Adds `offset` to every `$n` argument reference outside string literals.
func renumber(_ predicate: String, by offset: Int) -> String {
    guard offset > 0 else { return predicate }
    var out = ""
    var quote: Character?
    var chars = Array(predicate)[...]
    while let c = chars.popFirst() {
        if let q = quote {
            out.append(c)
            if c == "\\", let next = chars.popFirst() { out.append(next) } else if c == q { quote = nil }
        } else if c == "'" || c == "\"" {
            quote = c
            out.append(c)
        } else if c == "$", let first = chars.first, first.isNumber {
            var digits = ""
            while let d = chars.first, d.isNumber { digits.append(d); chars.removeFirst() }
            out += "$\((Int(digits) ?? 0) + offset)"
        } else {
            out.append(c)
        }
    }
    return out
}

/// A sort key: a property key path and a direction (Realm Swift's `SortDescriptor`).
public struct SortDescriptor: Sendable, Hashable {
    public var keyPath: String
    public var ascending: Bool

    public init(keyPath: String, ascending: Bool = true) {
        self.keyPath = keyPath
        self.ascending = ascending
    }

    /// A sort key from a Swift key path: `SortDescriptor(keyPath: \Dog.age, ascending: false)`.
    public init<Root: ObjectBase, V>(keyPath: KeyPath<Root, V>, ascending: Bool = true) {
        self.init(keyPath: KeyPathRecorder.name(of: keyPath), ascending: ascending)
    }
}

/// The objects of a class that match a query, live: each read sees the realm's data as it is
/// then. A `RandomAccessCollection`, so `for`, `map`, `first`, indexing and `count` work.
///
/// ```swift
/// let rexes = realm.objects(Dog.self).where { $0.name == "Rex" && $0.age > 3 }.sorted(byKeyPath: "age")
/// for dog in rexes { print(dog.name) }
/// ```
public struct Results<Element: RealmFetchable>: RandomAccessCollection, CustomStringConvertible {
    /// The realm the results read.
    public let realm: Realm?
    let query: ResultsQuery
    let state: ResultsState

    init(realm: Realm?, query: ResultsQuery) {
        self.realm = realm
        self.query = query
        state = ResultsState()
    }

    private func with(_ change: (inout ResultsQuery) -> Void) -> Results {
        var q = query
        change(&q)
        return Results(realm: realm, query: q)
    }

    // MARK: - Filtering, sorting, distinct

    /// The results that also match a Realm Query Language predicate, with `$0`, `$1`…
    /// arguments: `filter("name BEGINSWITH $0 AND age > $1", "R", 3)`.
    /// A bad predicate gives empty results and its error in `realm.lastError` (`error` too).
    public func filter(_ predicateFormat: String, _ args: Any...) -> Results {
        filter(predicateFormat, arguments: args)
    }

    /// The results that also match a predicate, with its arguments in an array.
    public func filter(_ predicateFormat: String, arguments args: [Any]) -> Results {
        guard let realm else { return self }
        return with { $0.predicates.append((predicateFormat, args.map { realm.queryArgument($0) })) }
    }

    /// Sorted by a property key path (`"owner.name"`).
    public func sorted(byKeyPath keyPath: String, ascending: Bool = true) -> Results {
        sorted(by: [SortDescriptor(keyPath: keyPath, ascending: ascending)])
    }

    /// Sorted by several keys, the first deciding first. Replaces an earlier sort.
    public func sorted<S: Sequence>(by descriptors: S) -> Results where S.Element == SortDescriptor {
        with { $0.sorts = Array(descriptors) }
    }

    /// One object per distinct combination of the values of key paths (the first in order).
    public func distinct<S: Sequence>(by keyPaths: S) -> Results where S.Element == String {
        with { $0.distinct += Array(keyPaths) }
    }

    /// Adds a predicate with its arguments (the typed query builder's output).
    func adding(predicate: String, arguments: [Value]) -> Results {
        with { $0.predicates.append((predicate, arguments)) }
    }

    /// The results, failing with an error when read (a typed query that cannot be written).
    func failing(_ error: AtollError) -> Results {
        with { $0.failure = error }
    }

    // MARK: - Reading

    /// The store's results for the query (compiled once per `Results` value).
    func storeResults() throws -> AtollStore.Results {
        guard let realm else { throw AtollError(.closed, "the results have no realm") }
        if let failure = query.failure { throw failure }
        state.lock.lock()
        defer { state.lock.unlock() }
        if let compiled = state.compiled { return compiled }
        let cls = try realm.objectClass(Element._atollObjectType)
        let (text, arguments) = query.text
        let results = try realm.store.objects(cls.name, where: text, arguments)
        state.compiled = results
        return results
    }

    /// The query's error, if it cannot run (the results are then empty).
    public var error: AtollError? {
        do {
            _ = try storeResults()
            return nil
        } catch { return error as? AtollError ?? AtollError(.invalidArgument, "\(error)") }
    }

    /// The row keys of the matching objects now.
    func keys() -> [Int64] {
        guard let realm else { return [] }
        state.lock.lock()
        defer { state.lock.unlock() }
        do {
            let stamp = try realm.store.readStamp()
            if let cached = state.keys, state.stamp == stamp { return cached }
            let keys = try storeResults().keys().map(\.rawValue)
            state.keys = keys
            state.stamp = stamp
            state.page = nil
            return keys
        } catch {
            realm.report(error)
            return []
        }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    /// How many objects match now (counted by the store, unless the keys are at hand).
    public var count: Int {
        guard let realm else { return 0 }
        state.lock.lock()
        defer { state.lock.unlock() }
        do {
            if let keys = state.keys, try state.stamp == realm.store.readStamp() { return keys.count }
            return try storeResults().count()
        } catch {
            realm.report(error)
            return 0
        }
    }

    /// The object at a position (reading its page of rows at once).
    /// Positions out of range give an invalidated object and an error in `realm.lastError`.
    public subscript(position: Int) -> Element {
        guard let realm else { return Element._atollUnmanaged() }
        let keys = keys()
        guard keys.indices.contains(position) else {
            realm.report(AtollError(.invalidArgument, "index \(position) is out of range for results of \(keys.count) objects"))
            return Element._atollUnmanaged()
        }
        state.lock.lock()
        defer { state.lock.unlock() }
        let start = position / ResultsState.pageSize * ResultsState.pageSize
        if state.page?.start != start {
            let pageKeys = Array(keys[start..<Swift.min(keys.count, start + ResultsState.pageSize)])
            do {
                state.page = (start, try realm.store.typedRows(ObjectClass.of(Element._atollObjectType).name, keys: pageKeys))
            } catch {
                state.page = nil
                realm.report(error)
            }
        }
        let row = state.page.flatMap { position - $0.start < $0.rows.count ? $0.rows[position - $0.start] : nil }
        return Element._atollFetched(ObjectAccessor(realm: realm, cls: ObjectClass.of(Element._atollObjectType),
                                                    key: keys[position], row: row, stamp: state.stamp))
    }

    /// Iterates the results as they are when the iteration starts, reading their rows a page
    /// at a time.
    public struct Iterator: IteratorProtocol {
        let realm: Realm?
        let cls: ObjectClass
        let keys: [Int64]
        let stamp: Store.ReadStamp?
        var position = 0
        var rows: [[Value]?] = []

        public mutating func next() -> Element? {
            guard let realm, position < keys.count else { return nil }
            let offset = position % ResultsState.pageSize
            if offset == 0 {
                let page = Array(keys[position..<Swift.min(keys.count, position + ResultsState.pageSize)])
                do { rows = try realm.store.typedRows(cls.name, keys: page) } catch {
                    rows = []
                    realm.report(error)
                }
            }
            let key = keys[position]
            position += 1
            return Element._atollFetched(ObjectAccessor(realm: realm, cls: cls, key: key,
                                                        row: offset < rows.count ? rows[offset] : nil, stamp: stamp))
        }
    }

    public func makeIterator() -> Iterator {
        let keys = keys()
        state.lock.lock()
        let stamp = state.stamp
        state.lock.unlock()
        return Iterator(realm: realm, cls: ObjectClass.of(Element._atollObjectType), keys: keys, stamp: stamp)
    }

    /// The position of an object in the results, or nil.
    public func index(of object: Element) -> Int? {
        guard let key = object._atollAccessor?.currentKey else { return nil }
        return keys().firstIndex(of: key)
    }

    public var description: String { "Results<\(Element.self)>(\(query.text.0)): \(count) objects" }

    // MARK: - Aggregates

    /// The smallest value of a property (nil when there are no objects).
    public func min<T: _Persistable>(ofProperty property: String) -> T? { aggregate("min", property) }
    /// The largest value of a property (nil when there are no objects).
    public func max<T: _Persistable>(ofProperty property: String) -> T? { aggregate("max", property) }
    /// The sum of a numeric property (0 when there are no objects).
    public func sum<T: _Persistable>(ofProperty property: String) -> T { aggregate("sum", property) ?? T._atollDefault() }
    /// The average of a numeric property (nil when there are no objects).
    public func average<T: _Persistable>(ofProperty property: String) -> T? { aggregate("avg", property) }

    private func aggregate<T: _Persistable>(_ function: String, _ property: String) -> T? {
        guard let realm else { return nil }
        do {
            let value = try realm.store.aggregate(try storeResults(), function, property: property)
            if value.isNull { return nil }
            // An average is a double, or a decimal: convert to what the caller asked for.
            if case .double(let d) = value, T.self == Int.self || T.self == Int?.self { return T._atollRead(.int(Int64(d.rounded())), realm) }
            if case .double(let d) = value, T.self == Float.self { return T._atollRead(.float(Float(d)), realm) }
            return T._atollRead(value, realm)
        } catch {
            realm.report(error)
            return nil
        }
    }

    // MARK: - Frozen results

    /// Whether the results read a frozen realm.
    public var isFrozen: Bool { realm?.isFrozen ?? false }

    /// The same query on a frozen copy of the realm.
    /// - Throws: when the frozen realm cannot be opened.
    public func freeze() throws -> Results {
        guard let realm, !realm.isFrozen else { return self }
        return Results(realm: try realm.freeze(), query: query)
    }

    /// The same query on the live realm.
    public func thaw() -> Results {
        guard let realm, realm.isFrozen else { return self }
        return Results(realm: realm.thaw(), query: query)
    }
}

extension Results where Element: ObjectBase {
    /// Sorted by a Swift key path: `sorted(by: \.age, ascending: false)`.
    public func sorted<V: Comparable>(by keyPath: KeyPath<Element, V>, ascending: Bool = true) -> Results {
        sorted(byKeyPath: KeyPathRecorder.name(of: keyPath), ascending: ascending)
    }

    public func min<T: _Persistable>(of keyPath: KeyPath<Element, T>) -> T? { min(ofProperty: KeyPathRecorder.name(of: keyPath)) }
    public func max<T: _Persistable>(of keyPath: KeyPath<Element, T>) -> T? { max(ofProperty: KeyPathRecorder.name(of: keyPath)) }
    public func sum<T: _Persistable>(of keyPath: KeyPath<Element, T>) -> T { sum(ofProperty: KeyPathRecorder.name(of: keyPath)) }
    public func average<T: _Persistable>(of keyPath: KeyPath<Element, T>) -> T? { average(ofProperty: KeyPathRecorder.name(of: keyPath)) }
}

/// Results, which `Realm.delete` deletes with one store call.
protocol DeletableResults {
    func deleteAll() throws
}

extension Results: DeletableResults {
    func deleteAll() throws { _ = try storeResults().deleteAll() }
}

/// What `Results` can hold: objects of a class, or projections of them (`Projection`).
public protocol RealmFetchable: SendableMetatype {
    /// The class whose objects the results select.
    static var _atollObjectType: ObjectBase.Type { get }
    /// The element for a managed object of that class.
    static func _atollFetched(_ accessor: ObjectAccessor) -> Self
    /// An element that is no object (what reading out of range gives, with an error).
    static func _atollUnmanaged() -> Self
    /// The managed object's accessor, if any.
    var _atollAccessor: ObjectAccessor? { get }
}

extension RealmFetchable where Self: ObjectBase {
    public static var _atollObjectType: ObjectBase.Type { Self.self }
    public static func _atollFetched(_ accessor: ObjectAccessor) -> Self {
        let object = Self()
        object.bind(accessor)
        return object
    }
    public static func _atollUnmanaged() -> Self { Self() }
    public var _atollAccessor: ObjectAccessor? { _accessor }
}

extension Object: RealmFetchable {}

/// What a `Results` value keeps between reads: the compiled query, and the keys and a page
/// of rows while the data is unchanged.
final class ResultsState: @unchecked Sendable {
    static let pageSize = 512
    /// Guards the rest (the results may be read from a change callback's thread too).
    let lock = NSRecursiveLock()
    var compiled: AtollStore.Results?
    var keys: [Int64]?
    var stamp: Store.ReadStamp?
    /// The rows of the page of `keys` read last, from position `start`.
    var page: (start: Int, rows: [[Value]?])?
}

extension Realm {
    /// A query argument from a Swift value: objects by their reference, enums by their raw
    /// value, arrays as lists.
    func queryArgument(_ any: Any) -> Value {
        if isNil(any) { return .null }
        if let object = any as? ObjectBase, let accessor = object._accessor, let key = accessor.currentKey {
            let reference = (try? store.reference(accessor.cls.name, key: key)) ?? .null
            return .link(ObjectLink(className: accessor.cls.name, primaryKey: reference))
        }
        if let scalar = any as? _PersistableScalar { return scalar._atollValue }
        if let e = any as? any RawRepresentable { return queryArgument(e.rawValue) }
        if let list = any as? [Any] { return .list(list.map { queryArgument($0) }) }
        if let value = any as? Value { return value }
        return untypedStoredValue(any)
    }
}
