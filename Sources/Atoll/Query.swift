import AtollStore
import Foundation

// One file over 600 lines: the type-safe query builder is one expression tree, its operators
// and the writer that turns it into RQL; each operator is a few lines, and they read as a table.

// Realm Swift's type-safe query builder: `results.where { $0.name == "Rex" && $0.age > 3 }`.
//
// The closure runs once, on a `Query` of the results' class. Each property read (found by
// evaluating its key path on a recorder object, `KeyPathRecorder`) and each operator builds a
// node of an expression tree; `where` writes the tree as a Realm Query Language predicate with
// the values as `$0…` arguments (never in the text) and adds it to the results. A tree that
// cannot be written (a property that is not persisted, an object that is not in the realm)
// gives results that fail when read, as a bad `filter` predicate does: empty, with the error
// in `error` and `realm.lastError`.

/// Options of string comparisons: RQL's `[c]`, `[d]` and `[cd]` modifiers.
///
/// ```swift
/// dogs.where { $0.name.starts(with: "re", options: [.caseInsensitive, .diacriticInsensitive]) }
/// ```
public struct StringOptions: OptionSet, Sendable {
    /// The options as bits: 1 case-insensitive, 2 diacritic-insensitive.
    public let rawValue: Int8

    /// Options from their bits.
    public init(rawValue: Int8) { self.rawValue = rawValue }

    /// Upper and lower case compare equal (`[c]`, full Unicode lower-casing).
    public static let caseInsensitive = StringOptions(rawValue: 1)
    /// Letters compare equal whatever their diacritics (`[d]`: `é` == `e`).
    public static let diacriticInsensitive = StringOptions(rawValue: 2)
}

/// A query expression about objects of a class (or one of their properties), built inside the
/// closure of `Results.where`; it is never made directly.
///
/// Read a property with a dot, then compare it:
///
/// ```swift
/// let rexes = realm.objects(Dog.self).where {
///     $0.name == "Rex" && $0.age > 3 && $0.owner.name.starts(with: "A", options: .caseInsensitive)
/// }
/// let owners = realm.objects(Person.self).where { $0.dogs.age > 10 }        // ANY dogs.age > 10
/// let busy = realm.objects(Person.self).where { $0.dogs.count >= 2 }        // dogs.@count >= 2
/// ```
///
/// - Comparisons: `==`, `!=` (with values, nil, objects or other properties); `<`, `<=`, `>`,
///   `>=` for numbers and dates; `.contains(range)` (BETWEEN), `.in([values])`.
/// - Strings: `.contains(_:options:)`, `.starts(with:options:)`, `.ends(with:options:)`,
///   `.equals(_:options:)`, `.notEquals(_:options:)`, `.like(_:caseInsensitive:)`.
/// - Logic: `&&`, `||`, prefix `!`.
/// - Collections (`List`, `MutableSet`, `Map`, `LinkingObjects`): `.contains(value)`,
///   `.containsAny(in:)`, `.count`, `.min`, `.max`, `.avg`, `.sum`; a map's `.keys`, `.values`.
///   A comparison through a collection holds when some element matches (`ANY`); a condition's
///   `.count` counts the elements that match all of it (`SUBQUERY`):
///   `($0.dogs.age > 3 && $0.dogs.name == "Rex").count > 0`.
@dynamicMemberLookup
public struct Query<T> {
    let node: QueryNode

    init(_ node: QueryNode) { self.node = node }

    // MARK: - Properties

    /// A property of the objects: `$0.name`, `$0.owner` (key paths of `@Persisted` properties).
    public subscript<V>(dynamicMember member: KeyPath<T, V>) -> Query<V> where T: ObjectBase {
        Query<V>(node.member(member))
    }

    // MARK: - Equality

    /// Whether the property equals a value (`nil` for a property that is null, an object for a
    /// link to it): `$0.name == "Rex"`, `$0.owner == nil`.
    public static func == (lhs: Query, rhs: T) -> Query<Bool> {
        Query<Bool>(.comparison(.equal, lhs.node, .constant(rhs), []))
    }

    /// Whether two properties are equal: `$0.firstName == $0.lastName`.
    public static func == (lhs: Query, rhs: Query) -> Query<Bool> {
        Query<Bool>(.comparison(.equal, lhs.node, rhs.node, []))
    }

    /// Whether the property differs from a value; true when the property is null and the value
    /// is not.
    public static func != (lhs: Query, rhs: T) -> Query<Bool> {
        Query<Bool>(.comparison(.notEqual, lhs.node, .constant(rhs), []))
    }

    /// Whether two properties differ.
    public static func != (lhs: Query, rhs: Query) -> Query<Bool> {
        Query<Bool>(.comparison(.notEqual, lhs.node, rhs.node, []))
    }

    /// Whether the property equals one of the values (RQL `IN`): `$0.age.in([1, 3, 5])`.
    public func `in`<U: Sequence>(_ collection: U) -> Query<Bool> where U.Element == T {
        Query<Bool>(.comparison(.in, node, .constant(collection.map { $0 as Any }), []))
    }
}

// MARK: - Links and collections of objects

extension Query where T: _QueryOptional, T.Wrapped: ObjectBase {
    /// A property of a linked or embedded object: `$0.owner.name`, `$0.address.city`
    /// (null when the link is not set).
    public subscript<V>(dynamicMember member: KeyPath<T.Wrapped, V>) -> Query<V> {
        Query<V>(node.member(member))
    }
}

extension Query where T: _QueryCollection, T.Element: ObjectBase {
    /// A property of the objects of a list, set or linking objects: `$0.dogs.name`. A
    /// comparison of it holds when it holds for some object (`ANY dogs.name == $0`).
    public subscript<V>(dynamicMember member: KeyPath<T.Element, V>) -> Query<V> {
        Query<V>(node.member(member))
    }
}

// MARK: - Order

extension Query where T: _QueryNumeric {
    /// Whether the property is greater than a value (numbers, dates): `$0.age > 3`.
    public static func > (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.greater, lhs.node, .constant(rhs), [])) }
    /// Whether the property is greater than or equal to a value.
    public static func >= (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.greaterOrEqual, lhs.node, .constant(rhs), [])) }
    /// Whether the property is less than a value.
    public static func < (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.less, lhs.node, .constant(rhs), [])) }
    /// Whether the property is less than or equal to a value.
    public static func <= (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.lessOrEqual, lhs.node, .constant(rhs), [])) }

    /// Whether the property is greater than another: `$0.high > $0.low`.
    public static func > (lhs: Query, rhs: Query) -> Query<Bool> { Query<Bool>(.comparison(.greater, lhs.node, rhs.node, [])) }
    /// Whether the property is greater than or equal to another.
    public static func >= (lhs: Query, rhs: Query) -> Query<Bool> { Query<Bool>(.comparison(.greaterOrEqual, lhs.node, rhs.node, [])) }
    /// Whether the property is less than another.
    public static func < (lhs: Query, rhs: Query) -> Query<Bool> { Query<Bool>(.comparison(.less, lhs.node, rhs.node, [])) }
    /// Whether the property is less than or equal to another.
    public static func <= (lhs: Query, rhs: Query) -> Query<Bool> { Query<Bool>(.comparison(.lessOrEqual, lhs.node, rhs.node, [])) }

    /// The smallest value of the property over the objects of the collection its key path goes
    /// through: `$0.dogs.age.min > 2` (`dogs.@min.age`).
    public var min: Query { Query(node.aggregated("@min")) }
    /// The largest value of the property over the objects of the collection: `dogs.@max.age`.
    public var max: Query { Query(node.aggregated("@max")) }
    /// The average of the property over the objects of the collection: `dogs.@avg.age`.
    public var avg: Query { Query(node.aggregated("@avg")) }
    /// The sum of the property over the objects of the collection: `dogs.@sum.age`.
    public var sum: Query { Query(node.aggregated("@sum")) }
}

extension Query where T: Comparable {
    /// Whether the property lies in a half-open range: `$0.age.contains(1..<5)` is
    /// `age >= 1 && age < 5` (through a collection: for the same object).
    public func contains(_ range: Range<T>) -> Query<Bool> {
        Query<Bool>(node.inRange(.constant(range.lowerBound), .constant(range.upperBound)))
    }

    /// Whether the property lies in a closed range: `$0.age.contains(1...5)` (RQL `BETWEEN`).
    public func contains(_ range: ClosedRange<T>) -> Query<Bool> {
        Query<Bool>(.between(node, .constant(range.lowerBound), .constant(range.upperBound)))
    }
}

extension Query where T: _QueryOptional, T.Wrapped: Comparable {
    /// Whether the optional property lies in a half-open range (null never does).
    public func contains(_ range: Range<T.Wrapped>) -> Query<Bool> {
        Query<Bool>(node.inRange(.constant(range.lowerBound), .constant(range.upperBound)))
    }

    /// Whether the optional property lies in a closed range (RQL `BETWEEN`; null never does).
    public func contains(_ range: ClosedRange<T.Wrapped>) -> Query<Bool> {
        Query<Bool>(.between(node, .constant(range.lowerBound), .constant(range.upperBound)))
    }
}

// MARK: - Strings and data

extension Query where T: _QueryString {
    /// Whether the string matches a wildcard pattern (RQL `LIKE`): `*` matches any run of
    /// characters, `?` one character. `$0.name.like("R?x*")`.
    public func like(_ value: T, caseInsensitive: Bool = false) -> Query<Bool> {
        Query<Bool>(.comparison(.like, node, .constant(value), caseInsensitive ? .caseInsensitive : []))
    }

    /// Whether the string matches a pattern held by another property.
    public func like<U>(_ column: Query<U>, caseInsensitive: Bool = false) -> Query<Bool> {
        Query<Bool>(.comparison(.like, node, column.node, caseInsensitive ? .caseInsensitive : []))
    }
}

extension Query where T: _QueryBinary {
    /// Whether the string (or data) contains a value: `$0.name.contains("ex", options: .caseInsensitive)`.
    public func contains(_ value: T, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.contains, node, .constant(value), options))
    }

    /// Whether the string contains the value of another property.
    public func contains<U: _QueryBinary>(_ column: Query<U>, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.contains, node, column.node, options))
    }

    /// Whether the string (or data) starts with a value: `$0.name.starts(with: "R")`.
    public func starts(with value: T, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.beginsWith, node, .constant(value), options))
    }

    /// Whether the string starts with the value of another property.
    public func starts<U: _QueryBinary>(with column: Query<U>, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.beginsWith, node, column.node, options))
    }

    /// Whether the string (or data) ends with a value: `$0.name.ends(with: "x")`.
    public func ends(with value: T, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.endsWith, node, .constant(value), options))
    }

    /// Whether the string ends with the value of another property.
    public func ends<U: _QueryBinary>(with column: Query<U>, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.endsWith, node, column.node, options))
    }

    /// Whether the string equals a value, with options: `$0.name.equals("rex", options: .caseInsensitive)`.
    public func equals(_ value: T, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.equal, node, .constant(value), options))
    }

    /// Whether the string equals the value of another property, with options.
    public func equals<U: _QueryBinary>(_ column: Query<U>, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.equal, node, column.node, options))
    }

    /// Whether the string differs from a value, with options.
    public func notEquals(_ value: T, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.notEqual, node, .constant(value), options))
    }

    /// Whether the string differs from the value of another property, with options.
    public func notEquals<U: _QueryBinary>(_ column: Query<U>, options: StringOptions = []) -> Query<Bool> {
        Query<Bool>(.comparison(.notEqual, node, column.node, options))
    }
}

// MARK: - Enums

extension Query where T: PersistableEnum {
    /// The enum's stored raw value, for what the enum's cases cannot say:
    /// `$0.unit.rawValue.starts(with: "Eng")`.
    public var rawValue: Query<T.RawValue> { Query<T.RawValue>(node) }
}

extension Query where T: _QueryOptional, T.Wrapped: PersistableEnum {
    /// The optional enum's stored raw value (nil when null).
    public var rawValue: Query<T.Wrapped.RawValue?> { Query<T.Wrapped.RawValue?>(node) }
}

extension Query where T: PersistableEnum, T.RawValue: _QueryNumeric {
    /// Whether the enum's raw value is greater than a case's: `$0.size > .small`.
    public static func > (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.greater, lhs.node, .constant(rhs), [])) }
    /// Whether the enum's raw value is greater than or equal to a case's.
    public static func >= (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.greaterOrEqual, lhs.node, .constant(rhs), [])) }
    /// Whether the enum's raw value is less than a case's.
    public static func < (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.less, lhs.node, .constant(rhs), [])) }
    /// Whether the enum's raw value is less than or equal to a case's.
    public static func <= (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.lessOrEqual, lhs.node, .constant(rhs), [])) }
}

extension Query where T: _QueryOptional, T.Wrapped: PersistableEnum, T.Wrapped.RawValue: _QueryNumeric {
    /// Whether the optional enum's raw value is greater than a case's (null never is).
    public static func > (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.greater, lhs.node, .constant(rhs), [])) }
    /// Whether the optional enum's raw value is greater than or equal to a case's.
    public static func >= (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.greaterOrEqual, lhs.node, .constant(rhs), [])) }
    /// Whether the optional enum's raw value is less than a case's (null never is).
    public static func < (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.less, lhs.node, .constant(rhs), [])) }
    /// Whether the optional enum's raw value is less than or equal to a case's.
    public static func <= (lhs: Query, rhs: T) -> Query<Bool> { Query<Bool>(.comparison(.lessOrEqual, lhs.node, .constant(rhs), [])) }
}

// MARK: - Conditions

extension Query where T == Bool {
    /// Both conditions hold.
    public static func && (lhs: Query, rhs: Query) -> Query { Query(.and(lhs.node, rhs.node)) }

    /// One condition or both hold.
    public static func || (lhs: Query, rhs: Query) -> Query { Query(.or(lhs.node, rhs.node)) }

    /// The condition does not hold; on a `Bool` property, the property is false:
    /// `!$0.isGood` is `isGood == false`.
    public static prefix func ! (query: Query) -> Query { Query(.not(query.node)) }

    /// How many objects of the collection the condition's key paths go through match all of
    /// it (RQL `SUBQUERY(…).@count`):
    /// `($0.dogs.age > 3 && $0.dogs.name.starts(with: "R")).count >= 1`.
    /// Key paths through other collections, or none, keep to the queried object.
    public var count: Query<Int> { Query<Int>(.subqueryCount(node)) }
}

// MARK: - Lists, sets and linking objects

extension Query where T: _QueryCollection {
    /// The number of elements: `$0.dogs.count > 1` (`dogs.@count`).
    public var count: Query<Int> { Query<Int>(node.collectionOperation("@count")) }

    /// Whether the collection holds a value (or object): `$0.tags.contains("red")` (`$0 IN tags`).
    public func contains(_ value: T.Element) -> Query<Bool> {
        Query<Bool>(.comparison(.in, .constant(value), node.quantifiedAsWhole, []))
    }

    /// Whether the collection holds one of the values: `$0.tags.containsAny(in: ["red", "blue"])`.
    public func containsAny<U: Sequence>(in collection: U) -> Query<Bool> where U.Element == T.Element {
        Query<Bool>(.comparison(.in, node, .constant(collection.map { $0 as Any }), []))
    }

    /// Whether some element equals a value: `$0.tags == "red"` (`ANY tags == $0`).
    public static func == (lhs: Query, rhs: T.Element) -> Query<Bool> {
        Query<Bool>(.comparison(.equal, lhs.node, .constant(rhs), []))
    }

    /// Whether some element differs from a value.
    public static func != (lhs: Query, rhs: T.Element) -> Query<Bool> {
        Query<Bool>(.comparison(.notEqual, lhs.node, .constant(rhs), []))
    }
}

extension Query where T: _QueryCollection, T.Element: _QueryNumeric {
    /// Whether some element is greater than a value: `$0.scores > 5` (`ANY scores > $0`).
    public static func > (lhs: Query, rhs: T.Element) -> Query<Bool> { Query<Bool>(.comparison(.greater, lhs.node, .constant(rhs), [])) }
    /// Whether some element is greater than or equal to a value.
    public static func >= (lhs: Query, rhs: T.Element) -> Query<Bool> { Query<Bool>(.comparison(.greaterOrEqual, lhs.node, .constant(rhs), [])) }
    /// Whether some element is less than a value.
    public static func < (lhs: Query, rhs: T.Element) -> Query<Bool> { Query<Bool>(.comparison(.less, lhs.node, .constant(rhs), [])) }
    /// Whether some element is less than or equal to a value.
    public static func <= (lhs: Query, rhs: T.Element) -> Query<Bool> { Query<Bool>(.comparison(.lessOrEqual, lhs.node, .constant(rhs), [])) }

    /// The smallest element (`scores.@min`; null when empty).
    public var min: Query<T.Element> { Query<T.Element>(node.collectionOperation("@min")) }
    /// The largest element (`scores.@max`; null when empty).
    public var max: Query<T.Element> { Query<T.Element>(node.collectionOperation("@max")) }
    /// The average of the elements (`scores.@avg`; null when empty).
    public var avg: Query<T.Element> { Query<T.Element>(node.collectionOperation("@avg")) }
    /// The sum of the elements (`scores.@sum`; 0 when empty).
    public var sum: Query<T.Element> { Query<T.Element>(node.collectionOperation("@sum")) }
}

extension Query where T: _QueryCollection, T.Element: Comparable {
    /// Whether every element lies in a half-open range (`@min >= lower && @max < upper`).
    public func contains(_ range: Range<T.Element>) -> Query<Bool> {
        Query<Bool>(node.collectionInRange(range.lowerBound, range.upperBound, closed: false))
    }

    /// Whether every element lies in a closed range (`@min >= lower && @max <= upper`).
    public func contains(_ range: ClosedRange<T.Element>) -> Query<Bool> {
        Query<Bool>(node.collectionInRange(range.lowerBound, range.upperBound, closed: true))
    }
}

extension Query where T: _QueryCollection, T.Element: _QueryOptional, T.Element.Wrapped: Comparable {
    /// Whether every element lies in a half-open range (`@min >= lower && @max < upper`).
    public func contains(_ range: Range<T.Element.Wrapped>) -> Query<Bool> {
        Query<Bool>(node.collectionInRange(range.lowerBound, range.upperBound, closed: false))
    }

    /// Whether every element lies in a closed range (`@min >= lower && @max <= upper`).
    public func contains(_ range: ClosedRange<T.Element.Wrapped>) -> Query<Bool> {
        Query<Bool>(node.collectionInRange(range.lowerBound, range.upperBound, closed: true))
    }
}

// MARK: - Maps

extension Query where T: _QueryMap {
    /// The number of keys: `$0.scores.count > 1` (`scores.@count`).
    public var count: Query<Int> { Query<Int>(node.collectionOperation("@count")) }

    /// The keys; a comparison holds when it holds for some key: `$0.scores.keys == "math"`
    /// (`ANY scores.@keys == $0`).
    public var keys: Query<String> { Query<String>(node.appendingOperation("@keys")) }

    /// The values; a comparison holds when it holds for some value: `$0.scores.values > 5`
    /// (`ANY scores.@values > $0`).
    public var values: Query<T.Value> { Query<T.Value>(node.appendingOperation("@values")) }

    /// Whether some key maps to a value: `$0.scores.contains(10)` (`$0 IN scores`).
    public func contains(_ value: T.Value) -> Query<Bool> {
        Query<Bool>(.comparison(.in, .constant(value), node.quantifiedAsWhole, []))
    }

    /// Whether some key maps to one of the values: `$0.scores.containsAny(in: [1, 2])`.
    public func containsAny<U: Sequence>(in collection: U) -> Query<Bool> where U.Element == T.Value {
        Query<Bool>(.comparison(.in, node, .constant(collection.map { $0 as Any }), []))
    }
}

extension Query where T: _QueryMap, T.Value: _QueryNumeric {
    /// The smallest value (`scores.@min`; null when empty).
    public var min: Query<T.Value> { Query<T.Value>(node.collectionOperation("@min")) }
    /// The largest value (`scores.@max`; null when empty).
    public var max: Query<T.Value> { Query<T.Value>(node.collectionOperation("@max")) }
    /// The average of the values (`scores.@avg`; null when empty).
    public var avg: Query<T.Value> { Query<T.Value>(node.collectionOperation("@avg")) }
    /// The sum of the values (`scores.@sum`; 0 when empty).
    public var sum: Query<T.Value> { Query<T.Value>(node.collectionOperation("@sum")) }
}

extension Query where T: _QueryMap, T.Value: Comparable {
    /// Whether every value lies in a half-open range (`@min >= lower && @max < upper`).
    public func contains(_ range: Range<T.Value>) -> Query<Bool> {
        Query<Bool>(node.collectionInRange(range.lowerBound, range.upperBound, closed: false))
    }

    /// Whether every value lies in a closed range (`@min >= lower && @max <= upper`).
    public func contains(_ range: ClosedRange<T.Value>) -> Query<Bool> {
        Query<Bool>(node.collectionInRange(range.lowerBound, range.upperBound, closed: true))
    }
}

// MARK: - Results

extension Results where Element: ObjectBase {
    /// The results that also match a condition written in Swift, which becomes a Realm Query
    /// Language predicate with its values as arguments:
    ///
    /// ```swift
    /// let rexes = realm.objects(Dog.self).where { $0.name == "Rex" && $0.age > 3 }
    /// ```
    ///
    /// A condition that cannot be written as a query (a key path to a property that is not
    /// `@Persisted`, an object that is not in this realm) gives empty results, with the error
    /// in `error` and, once read, in `realm.lastError`.
    public func `where`(_ isIncluded: (Query<Element>) -> Query<Bool>) -> Results<Element> {
        guard let realm else { return self }
        do {
            var writer = PredicateWriter()
            try writer.predicate(isIncluded(Query<Element>(.keyPath(QueryKeyPath()))).node)
            let arguments = try writer.arguments.map { try realm.typedQueryArgument($0) }
            return adding(predicate: writer.text, arguments: arguments)
        } catch {
            return failing(error as? AtollError ?? AtollError(.queryInvalid, "\(error)"))
        }
    }
}

extension Realm {
    /// A typed query's value as a query argument: objects must be top-level objects of this
    /// realm (an unmanaged object has no row to compare with).
    fileprivate func typedQueryArgument(_ value: Any) throws -> AtollStore.Value {
        func check(_ object: ObjectBase) throws {
            let name = type(of: object).className()
            if object.objectClass.isEmbedded {
                throw AtollError(.queryInvalid, "an embedded '\(name)' cannot be compared as a whole; compare its properties")
            }
            guard let accessor = object._accessor, accessor.currentKey != nil else {
                throw AtollError(.queryInvalid, "a '\(name)' in a query must be an object of the realm (added, not deleted)")
            }
            guard accessor.realm.identity == identity else {
                throw AtollError(.queryInvalid, "a '\(name)' in a query belongs to another realm")
            }
        }
        if let object = value as? ObjectBase { try check(object) }
        if let values = value as? [Any] {
            for case let object as ObjectBase in values { try check(object) }
        }
        return queryArgument(value)
    }
}

// MARK: - Type tags

/// Numbers and dates: the types `<`, `<=`, `>`, `>=` and the aggregates apply to. Only the
/// typed layer conforms types to it.
public protocol _QueryNumeric {}
extension Int: _QueryNumeric {}
extension Int8: _QueryNumeric {}
extension Int16: _QueryNumeric {}
extension Int32: _QueryNumeric {}
extension Int64: _QueryNumeric {}
extension Float: _QueryNumeric {}
extension Double: _QueryNumeric {}
extension Decimal128: _QueryNumeric {}
extension Date: _QueryNumeric {}
extension Optional: _QueryNumeric where Wrapped: _QueryNumeric {}

/// Strings and data: the types `contains`, `starts(with:)`, `ends(with:)`, `equals` and
/// `notEquals` apply to. Only the typed layer conforms types to it.
public protocol _QueryBinary {}
extension Data: _QueryBinary {}
extension Optional: _QueryBinary where Wrapped: _QueryBinary {}

/// Strings: the types `like` applies to. Only the typed layer conforms types to it.
public protocol _QueryString: _QueryBinary {}
extension String: _QueryString {}
extension Optional: _QueryString where Wrapped: _QueryString {}

/// Optionals, so that queries can reach through `Person?` and compare `Int?` with ranges.
public protocol _QueryOptional {
    /// The type of the value when there is one.
    associatedtype Wrapped
}
extension Optional: _QueryOptional {}

/// `List`, `MutableSet` and `LinkingObjects`: the collections whose elements queries reach.
public protocol _QueryCollection {
    /// The type of the elements.
    associatedtype Element
}
extension List: _QueryCollection {}
extension MutableSet: _QueryCollection {}
extension LinkingObjects: _QueryCollection {}

/// `Map`: the dictionaries whose keys and values queries reach.
public protocol _QueryMap {
    /// The type of the keys.
    associatedtype Key
    /// The type of the values.
    associatedtype Value
}
extension Map: _QueryMap {}

/// Properties that hold many values: a comparison through them is quantified (`ANY`).
protocol QueryToMany {}
extension List: QueryToMany {}
extension MutableSet: QueryToMany {}
extension Map: QueryToMany {}
extension LinkingObjects: QueryToMany {}

// MARK: - The expression tree

/// A key path as the query language writes it: property names from the queried object or from
/// a SUBQUERY's variable, and which of them hold many values.
struct QueryKeyPath {
    /// A SUBQUERY's variable the path starts from (without the `$`).
    var variable: String?
    var steps: [String] = []
    /// Positions in `steps` of to-many properties that no aggregate folds: a comparison of a
    /// path with any is quantified.
    var toMany: [Int] = []

    var isQuantified: Bool { !toMany.isEmpty }
    var isRoot: Bool { variable == nil && steps.isEmpty }

    var text: String {
        let path = steps.joined(separator: ".")
        guard let variable else { return path }
        return path.isEmpty ? "$" + variable : "$" + variable + "." + path
    }
}

/// The operators of comparisons, as the query language writes them.
enum QueryOperator: String {
    case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    case beginsWith = "BEGINSWITH", endsWith = "ENDSWITH", contains = "CONTAINS", like = "LIKE", `in` = "IN"

    /// The operator with its operands swapped (`a < b` is `b > a`), for those that have one.
    var flipped: QueryOperator? {
        switch self {
        case .equal, .notEqual: return self
        case .less: return .greater
        case .lessOrEqual: return .greaterOrEqual
        case .greater: return .less
        case .greaterOrEqual: return .lessOrEqual
        default: return nil
        }
    }
}

/// A node of a query expression. Swift values stay as they are until `where` makes them
/// arguments for its realm.
indirect enum QueryNode {
    case keyPath(QueryKeyPath)
    case constant(Any)
    case comparison(QueryOperator, QueryNode, QueryNode, StringOptions)
    case between(QueryNode, QueryNode, QueryNode)
    case and(QueryNode, QueryNode)
    case or(QueryNode, QueryNode)
    case not(QueryNode)
    /// `SUBQUERY(collection, $x, condition).@count`
    case subqueryCount(QueryNode)
    /// A part that cannot be written; writing the query throws the error.
    case failure(AtollError)

    /// The path with the properties a member key path reads appended.
    func member<Root: ObjectBase, V>(_ member: KeyPath<Root, V>) -> QueryNode {
        guard case .keyPath(var path) = self else { return notAPath(Root.className()) }
        let names = KeyPathRecorder.names(of: member)
        guard !names.isEmpty else {
            return .failure(AtollError(.queryInvalid,
                "a key path of '\(Root.className())' to \(V.self) reads no @Persisted property; queries can use only persisted properties"))
        }
        path.steps += names
        if V.self is QueryToMany.Type { path.toMany.append(path.steps.count - 1) }
        return .keyPath(path)
    }

    /// The path with an operation appended that keeps it quantified (`@keys`, `@values`).
    func appendingOperation(_ operation: String) -> QueryNode {
        guard case .keyPath(var path) = self else { return notAPath(operation) }
        path.steps.append(operation)
        return .keyPath(path)
    }

    /// An operation on the collection the path ends at (`dogs.@count`, `scores.@max`): one
    /// value, no longer quantified over that collection.
    func collectionOperation(_ operation: String) -> QueryNode {
        guard case .keyPath(var path) = self else { return notAPath(operation) }
        path.steps.append(operation)
        path.toMany.removeAll { $0 == path.steps.count - 2 }
        return .keyPath(path)
    }

    /// An aggregate of a property over the objects of the collection the path goes through:
    /// `dogs.age` → `dogs.@avg.age`.
    func aggregated(_ operation: String) -> QueryNode {
        guard case .keyPath(var path) = self else { return notAPath(operation) }
        guard let collection = path.toMany.first else {
            return .failure(AtollError(.queryInvalid,
                "\(operation) needs a key path through a list, set or linking objects; '\(path.text)' goes through none"))
        }
        path.steps.insert(operation, at: collection + 1)
        path.toMany = path.toMany.dropFirst().map { $0 + 1 }
        return .keyPath(path)
    }

    /// The same path, compared as a whole (the right side of `$0 IN tags`).
    var quantifiedAsWhole: QueryNode {
        guard case .keyPath(var path) = self else { return self }
        path.toMany.removeAll { $0 == path.steps.count - 1 }
        return .keyPath(path)
    }

    /// `lower <= value < upper`. Through a collection of objects both bounds hold for the same
    /// object: `SUBQUERY(dogs, $x, $x.age >= lower AND $x.age < upper).@count > 0`.
    func inRange(_ lower: QueryNode, _ upper: QueryNode) -> QueryNode {
        let condition = QueryNode.and(.comparison(.greaterOrEqual, self, lower, []), .comparison(.less, self, upper, []))
        guard case .keyPath(let path) = self, let collection = path.toMany.first else { return condition }
        guard collection + 1 < path.steps.count, !path.steps[collection + 1].hasPrefix("@") else {
            return .failure(AtollError(.queryInvalid,
                "a half-open range cannot be applied to '\(path.text)'; use a closed range (BETWEEN)"))
        }
        return .comparison(.greater, .subqueryCount(condition), .constant(0), [])
    }

    /// Every element of the collection the path ends at lies in a range: `@min >= lower AND
    /// @max <(=) upper`.
    func collectionInRange(_ lower: Any, _ upper: Any, closed: Bool) -> QueryNode {
        .and(.comparison(.greaterOrEqual, collectionOperation("@min"), .constant(lower), []),
             .comparison(closed ? .lessOrEqual : .less, collectionOperation("@max"), .constant(upper), []))
    }

    private func notAPath(_ what: String) -> QueryNode {
        if case .failure = self { return self }
        return .failure(AtollError(.queryInvalid, "'\(what)' applies to a property, not to a condition or a value"))
    }

    /// The first key path through a collection outside nested SUBQUERYs, from the queried object.
    var firstCollectionPath: QueryKeyPath? {
        switch self {
        case .keyPath(let path): return path.variable == nil && path.isQuantified ? path : nil
        case .comparison(_, let a, let b, _): return a.firstCollectionPath ?? b.firstCollectionPath
        case .between(let a, let b, let c): return a.firstCollectionPath ?? b.firstCollectionPath ?? c.firstCollectionPath
        case .and(let a, let b), .or(let a, let b): return a.firstCollectionPath ?? b.firstCollectionPath
        case .not(let a): return a.firstCollectionPath
        case .constant, .subqueryCount, .failure: return nil
        }
    }

    /// The node with the key paths through `collection` (a prefix ending at a to-many step)
    /// starting from a SUBQUERY's variable instead; nested SUBQUERYs are left as they are.
    func rebased(_ collection: [String], on variable: String) -> QueryNode {
        switch self {
        case .keyPath(var path):
            guard path.variable == nil, path.steps.starts(with: collection), path.toMany.first == collection.count - 1 else { return self }
            path.variable = variable
            path.steps.removeFirst(collection.count)
            path.toMany = path.toMany.dropFirst().map { $0 - collection.count }
            return .keyPath(path)
        case .comparison(let op, let a, let b, let options):
            return .comparison(op, a.rebased(collection, on: variable), b.rebased(collection, on: variable), options)
        case .between(let a, let b, let c):
            return .between(a.rebased(collection, on: variable), b.rebased(collection, on: variable), c.rebased(collection, on: variable))
        case .and(let a, let b): return .and(a.rebased(collection, on: variable), b.rebased(collection, on: variable))
        case .or(let a, let b): return .or(a.rebased(collection, on: variable), b.rebased(collection, on: variable))
        case .not(let a): return .not(a.rebased(collection, on: variable))
        case .constant, .subqueryCount, .failure: return self
        }
    }

    var isQuantified: Bool {
        if case .keyPath(let path) = self { return path.isQuantified }
        return false
    }
}

// MARK: - Writing

/// Writes a query expression as a Realm Query Language predicate: the text, with `$0…` in
/// place of the values, and the values in order.
struct PredicateWriter {
    private(set) var text = ""
    private(set) var arguments: [Any] = []
    private var variables = 0

    /// Writes a condition.
    /// - Throws: the first part that cannot be written (`.queryInvalid`).
    mutating func predicate(_ node: QueryNode) throws {
        switch node {
        case .keyPath(let path):
            try boolean(path, true)
        case .not(.keyPath(let path)):
            try boolean(path, false)
        case .not(let inner):
            text += "NOT "
            try grouped(inner)
        case .and(let a, let b):
            try compound(a, "AND", b)
        case .or(let a, let b):
            try compound(a, "OR", b)
        case .comparison(let op, let a, let b, let options):
            try comparison(op, a, b, options)
        case .between(let value, let lower, let upper):
            if value.isQuantified { text += "ANY " }
            try operand(value)
            text += " BETWEEN {"
            try operand(lower)
            text += ", "
            try operand(upper)
            text += "}"
        case .constant, .subqueryCount:
            throw AtollError(.queryInvalid, "a value is not a condition; compare it")
        case .failure(let error):
            throw error
        }
    }

    /// A `Bool` property used as a condition: `isGood == true`.
    private mutating func boolean(_ path: QueryKeyPath, _ value: Bool) throws {
        if path.isQuantified { text += "ANY " }
        try operand(.keyPath(path))
        text += value ? " == true" : " == false"
    }

    private mutating func grouped(_ node: QueryNode) throws {
        switch node {
        case .and, .or:
            try predicate(node)
        default:
            text += "("
            try predicate(node)
            text += ")"
        }
    }

    private mutating func compound(_ a: QueryNode, _ op: String, _ b: QueryNode) throws {
        text += "("
        try predicate(a)
        text += " \(op) "
        try predicate(b)
        text += ")"
    }

    /// `[ANY] left op[modifier] right`, the side through a collection first.
    private mutating func comparison(_ op: QueryOperator, _ a: QueryNode, _ b: QueryNode, _ options: StringOptions) throws {
        var (op, left, right) = (op, a, b)
        if left.isQuantified, right.isQuantified {
            throw AtollError(.queryInvalid, "two key paths through collections cannot be compared with each other")
        }
        if right.isQuantified, op != .in {
            guard let flipped = op.flipped else {
                throw AtollError(.queryInvalid, "\(op.rawValue) cannot take a key path through a collection on its right")
            }
            (op, left, right) = (flipped, right, left)
        }
        if left.isQuantified { text += "ANY " }
        try operand(left)
        text += " " + op.rawValue
        if !options.isEmpty {
            text += "[" + (options.contains(.caseInsensitive) ? "c" : "") + (options.contains(.diacriticInsensitive) ? "d" : "") + "]"
        }
        text += " "
        try operand(right)
    }

    private mutating func operand(_ node: QueryNode) throws {
        switch node {
        case .keyPath(let path):
            guard !path.isRoot else {
                throw AtollError(.queryInvalid, "a query compares properties of the objects, not the objects themselves")
            }
            text += path.text
        case .constant(let value):
            text += "$\(arguments.count)"
            arguments.append(value)
        case .subqueryCount(let condition):
            guard let collection = condition.firstCollectionPath, let end = collection.toMany.first else {
                throw AtollError(.queryInvalid, "the count of a condition needs a key path through a list, set or linking objects in it")
            }
            variables += 1
            let variable = "x\(variables)"
            let prefix = Array(collection.steps[...end])
            text += "SUBQUERY(" + prefix.joined(separator: ".") + ", $" + variable + ", "
            try predicate(condition.rebased(prefix, on: variable))
            text += ").@count"
        case .failure(let error):
            throw error
        case .comparison, .between, .and, .or, .not:
            throw AtollError(.queryInvalid, "a condition cannot be compared as a value")
        }
    }
}
