// What observers are told: the changes to a realm, to results, to an object, to a collection.

/// Who calls a store's change callbacks.
public enum NotificationDelivery: String, Sendable {
    /// A notifier thread of the library, one per store that has observers.
    case thread
    /// The host: it polls `Store.notificationDescriptor()` and calls
    /// `Store.deliverNotifications()` on its own thread when the descriptor is readable.
    case host
}

/// An element that sorting moved: its index in the old list and in the new one.
public struct Move: Hashable, Sendable {
    public var from: Int
    public var to: Int
    public init(from: Int, to: Int) {
        self.from = from
        self.to = to
    }
}

/// How the objects of a query's results changed between two deliveries.
///
/// Indices follow realm-core's convention, so that applying `deletions` (highest first) and
/// then `insertions` (lowest first) to the old list gives the new one: `deletions` index the
/// old list, `insertions` and `modifications` the new list, and an object that moved appears
/// in `moves` and also as a deletion (its old index) and an insertion (its new index).
/// The keys are the primary keys (for classes without one, the row keys) of the objects that
/// left, entered or changed — moved objects are in none of them unless they also changed.
public struct ResultsChange: Hashable, Sendable {
    /// True for the first delivery, which carries the initial state (all indices empty).
    public var initial: Bool
    public var deletions: [Int] = []
    public var insertions: [Int] = []
    public var modifications: [Int] = []
    public var moves: [Move] = []
    public var deletedKeys: [Value] = []
    public var insertedKeys: [Value] = []
    public var modifiedKeys: [Value] = []
    /// The number of objects now.
    public var count: Int = 0
    /// Set when the change could not be computed (the file's classes were changed under the
    /// observer by a migration, a read failed): the observer's last call; the rest is empty.
    public var error: AtollError?

    public init(initial: Bool) { self.initial = initial }
}

/// How one object changed: deleted, or which properties changed with their old and new values
/// (only the changed properties are in `old` and `new`).
public struct ObjectChange: Hashable, Sendable {
    public var deleted: Bool
    public var changedProperties: [String] = []
    public var old = Document()
    public var new = Document()
    /// Set when the change could not be computed (the file's classes were changed under the
    /// observer by a migration, a read failed): the observer's last call; the rest is empty.
    public var error: AtollError?

    public init(deleted: Bool) { self.deleted = deleted }
}

/// How a list, set or dictionary property of one object changed.
///
/// Indices as in `ResultsChange` (dictionaries are read in key order; they have no moves).
/// For dictionaries, `deletedKeys`, `insertedKeys` and `modifiedKeys` name the keys; for lists
/// and sets they are the elements' values (links as the target's primary key).
/// `deleted` is true when the object that holds the collection was deleted (the last delivery).
public struct CollectionChange: Hashable, Sendable {
    public var initial: Bool
    public var deleted = false
    public var deletions: [Int] = []
    public var insertions: [Int] = []
    public var modifications: [Int] = []
    public var moves: [Move] = []
    public var deletedKeys: [Value] = []
    public var insertedKeys: [Value] = []
    public var modifiedKeys: [Value] = []
    public var count: Int = 0
    /// Set when the change could not be computed (the file's classes were changed under the
    /// observer by a migration, a read failed): the observer's last call; the rest is empty.
    public var error: AtollError?

    public init(initial: Bool) { self.initial = initial }
}

/// One delivery to a realm observer: the versions of the change log it covers and the classes
/// whose objects changed.
public struct RealmChange: Hashable, Sendable {
    public var previousVersion: UInt64
    public var version: UInt64
    public var classes: [String]
}
