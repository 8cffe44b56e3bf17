/// What one reader may read of each class, for queries written by someone the store does not
/// trust with everything (a sync server's subscriptions, written by its users).
///
/// A query run with it returns only objects the reader may read, and every step of its key
/// paths into another class — a link, a list, set or dictionary of links, a backlink, a
/// SUBQUERY's elements, `@links.@count` — sees only objects the reader may read: a link to any
/// other object reads as null, and collections and counts leave such objects out. So a query
/// tells the reader nothing about an object it may not read, not even that it exists. The
/// rules' own key paths see everything: they are the app's. Embedded objects are read with
/// their owner.
public struct ReadAccess: Sendable, Hashable {
    /// Which objects of a class the reader may read.
    public enum Rule: Sendable, Hashable {
        case everything
        case nothing
        /// The objects that match an RQL filter (no SORT, DISTINCT or LIMIT), with its arguments.
        case matching(String, [Value])
    }

    /// The rule of each class, by name.
    public var rules: [String: Rule]
    /// The rule of the classes `rules` does not name.
    public var others: Rule

    public init(rules: [String: Rule], others: Rule = .nothing) {
        self.rules = rules
        self.others = others
    }

    /// The rule of one class.
    public func rule(_ className: String) -> Rule { rules[className] ?? others }
}
