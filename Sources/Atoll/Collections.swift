import AtollStore
import Foundation

/// The element types of `List`, `MutableSet` and `Map`: what a `@Persisted` property may hold.
public typealias RealmCollectionValue = _Persistable

/// A list or set given as a value (`dog.tags = otherList`, `create(value:)`).
protocol _CollectionValue {
    func _atollWrite(_ realm: Realm) throws -> Value
}

/// A map given as a value.
protocol _MapValue {
    func _atollWrite(_ realm: Realm) throws -> Value
}

/// Where a managed collection lives: its owner's row and property. Reads are served from one
/// read of the collection while the realm's data is unchanged.
final class CollectionBinding: @unchecked Sendable {
    let owner: ObjectAccessor
    let index: Int
    private let lock = NSLock()
    private var cache: [(key: String?, value: Value)]?
    private var stamp: Store.ReadStamp?

    init(owner: ObjectAccessor, index: Int) {
        self.owner = owner
        self.index = index
    }

    var realm: Realm { owner.realm }
    var property: Property { owner.cls.schema.properties[index] }

    /// The collection's entries now (empty, with the error reported, when unreadable).
    func entries() -> [(key: String?, value: Value)] {
        lock.lock()
        defer { lock.unlock() }
        do {
            let now = try realm.store.readStamp()
            if let cache, now == stamp { return cache }
            guard let key = owner.currentKey else { throw owner.invalidated() }
            let entries = try realm.store.typedCollection(owner.cls.name, key: key, property: property.name)
            cache = entries
            stamp = now
            return entries
        } catch {
            realm.report(error)
            return []
        }
    }

    /// Runs a change through the store's element operations, naming the owner; errors go to
    /// `realm.lastError` and fail the write transaction's commit.
    func change(_ what: String, _ body: (Store, String, Value, String) throws -> Void) {
        do {
            try realm.checkWritable("\(what) on '\(owner.cls.name).\(property.name)'")
            try body(realm.store, owner.cls.name, try owner.reference(), property.name)
        } catch { realm.report(error) }
    }

    /// The Swift value of an element at a position (embedded objects bound to it).
    func element<E: _Persistable>(_ type: E.Type, _ value: Value, at position: Int) -> E {
        if let embedded = E.self as? EmbeddedObject.Type, case .int = value {
            let object = embedded.init()
            object.bind(ObjectAccessor(embeddedIn: owner, property: index, position: position, cls: object.objectClass))
            if let e = object as? E { return e }
        }
        return E._atollRead(value, realm)
    }
}

// MARK: - List

/// An ordered collection property (Realm Swift's `List`): `@Persisted var dogs: List<Dog>`.
///
/// Unmanaged, it is an array; managed, it reads and writes its owner's list in the realm
/// (writes inside a write transaction; errors go to `realm.lastError`).
public final class List<Element: RealmCollectionValue>: RandomAccessCollection, MutableCollection, CustomStringConvertible {
    private var storage: [Element] = []
    let binding: CollectionBinding?
    /// Set on a recorder's list: `projectTo` key paths continue through it.
    let recorder: KeyPathRecorder?

    /// An empty unmanaged list.
    public init() {
        binding = nil
        recorder = nil
    }

    init(binding: CollectionBinding?, recorder: KeyPathRecorder? = nil) {
        self.binding = binding
        self.recorder = recorder
    }

    /// The realm of a managed list.
    public var realm: Realm? { binding?.realm }
    /// Whether the owner was deleted.
    public var isInvalidated: Bool { binding.map { !$0.owner.isValid } ?? false }

    private var elements: [Element] {
        guard let binding else { return storage }
        return binding.entries().enumerated().map { binding.element(Element.self, $1.value, at: $0) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { binding?.entries().count ?? storage.count }

    public subscript(position: Int) -> Element {
        get {
            guard let binding else { return storage[position] }
            let entries = binding.entries()
            guard entries.indices.contains(position) else {
                binding.realm.report(AtollError(.invalidArgument, "index \(position) is out of range for a list of \(entries.count)"))
                return Element._atollDefault()
            }
            return binding.element(Element.self, entries[position].value, at: position)
        }
        set {
            guard let binding else { storage[position] = newValue; return }
            binding.change("set") { store, cls, ref, name in
                try store.listSet(cls, primaryKey: ref, property: name, try newValue._atollWrite(binding.realm), at: position)
            }
        }
    }

    /// Appends an element (an unmanaged object is added to the realm).
    public func append(_ element: Element) { insert(element, at: count) }

    /// Appends the elements of a sequence.
    public func append<S: Sequence>(objectsIn elements: S) where S.Element == Element {
        for e in elements { append(e) }
    }

    /// Inserts an element at a position (0...count).
    public func insert(_ element: Element, at index: Int) {
        guard let binding else { storage.insert(element, at: Swift.min(Swift.max(0, index), storage.count)); return }
        binding.change("insert") { store, cls, ref, name in
            try store.listInsert(cls, primaryKey: ref, property: name, try element._atollWrite(binding.realm), at: index)
        }
    }

    /// Removes the element at a position.
    public func remove(at index: Int) {
        guard let binding else { if storage.indices.contains(index) { storage.remove(at: index) }; return }
        binding.change("remove") { store, cls, ref, name in try store.listErase(cls, primaryKey: ref, property: name, at: index) }
    }

    /// Removes the last element.
    public func removeLast() { if !isEmpty { remove(at: count - 1) } }

    /// Removes every element.
    public func removeAll() {
        guard let binding else { storage.removeAll(); return }
        binding.change("removeAll") { store, cls, ref, name in try store.update(cls, key: binding.owner.currentKey ?? -1, [name: .list([])]) }
    }

    /// Moves an element from one position to another.
    public func move(from: Int, to: Int) {
        guard let binding else {
            guard storage.indices.contains(from), storage.indices.contains(to) else { return }
            storage.insert(storage.remove(at: from), at: to)
            return
        }
        binding.change("move") { store, cls, ref, name in try store.listMove(cls, primaryKey: ref, property: name, from: from, to: to) }
    }

    /// Replaces the element at a position.
    public func replace(index: Int, object: Element) { self[index] = object }

    /// Swaps two elements.
    public func swapAt(_ i: Int, _ j: Int) {
        guard i != j else { return }
        let a = self[i], b = self[j]
        self[i] = b
        self[j] = a
    }

    public var description: String { "List<\(Element.self)>(\(elements.map { "\($0)" }.joined(separator: ", ")))" }

    /// A frozen copy of a managed list's elements, as an array.
    public func toArray() -> [Element] { elements }
}

extension List: _Persistable, _CollectionValue {
    public static var _atollShape: PropertyShape {
        var shape = Element._atollShape
        shape.collection = .list
        return shape
    }
    public static func _atollDefault() -> Self { Self() }
    public static func _atollManaged(_ accessor: ObjectAccessor, _ index: Int) -> Self {
        Self(binding: CollectionBinding(owner: accessor, index: index))
    }
    public static func _atollRead(_ value: Value, _ realm: Realm) -> Self { Self() }
    public func _atollWrite(_ realm: Realm) throws -> Value { .list(try elements.map { try $0._atollWrite(realm) }) }
    public static func _atollRecording(_ recorder: KeyPathRecorder) -> Self { Self(binding: nil, recorder: recorder) }
}

extension List where Element: Equatable {
    /// The position of the first element equal to `element`.
    public func index(of element: Element) -> Int? { elements.firstIndex(of: element) }
}

// MARK: - MutableSet

/// An unordered collection of distinct values (Realm Swift's `MutableSet`).
public final class MutableSet<Element: RealmCollectionValue & Hashable>: Collection, CustomStringConvertible {
    private var storage: [Element] = []
    let binding: CollectionBinding?
    /// Set on a recorder's set: `projectTo` key paths continue through it.
    let recorder: KeyPathRecorder?

    /// An empty unmanaged set.
    public init() {
        binding = nil
        recorder = nil
    }

    init(binding: CollectionBinding?, recorder: KeyPathRecorder? = nil) {
        self.binding = binding
        self.recorder = recorder
    }

    public var realm: Realm? { binding?.realm }

    private var elements: [Element] {
        guard let binding else { return storage }
        return binding.entries().map { Element._atollRead($0.value, binding.realm) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { binding?.entries().count ?? storage.count }
    public func index(after i: Int) -> Int { i + 1 }
    public subscript(position: Int) -> Element { elements[position] }

    /// Whether the set holds a value.
    public func contains(_ element: Element) -> Bool { elements.contains(element) }

    /// Adds a value (nothing when it is there already).
    public func insert(_ element: Element) {
        guard let binding else { if !storage.contains(element) { storage.append(element) }; return }
        binding.change("insert") { store, cls, ref, name in
            _ = try store.setInsert(cls, primaryKey: ref, property: name, try element._atollWrite(binding.realm))
        }
    }

    /// Adds the values of a sequence.
    public func insert<S: Sequence>(objectsIn elements: S) where S.Element == Element { for e in elements { insert(e) } }

    /// Removes a value.
    public func remove(_ element: Element) {
        guard let binding else { storage.removeAll { $0 == element }; return }
        binding.change("remove") { store, cls, ref, name in
            _ = try store.setErase(cls, primaryKey: ref, property: name, try element._atollWrite(binding.realm))
        }
    }

    /// Removes every value.
    public func removeAll() { for e in elements { remove(e) } }

    /// Adds every value of another set.
    public func formUnion(_ other: MutableSet<Element>) { for e in other.elements { insert(e) } }
    /// Keeps only the values another set holds too.
    public func formIntersection(_ other: MutableSet<Element>) { for e in elements where !other.contains(e) { remove(e) } }
    /// Removes the values another set holds.
    public func subtract(_ other: MutableSet<Element>) { for e in other.elements { remove(e) } }
    /// Whether the sets share a value.
    public func intersects(_ other: MutableSet<Element>) -> Bool { elements.contains { other.contains($0) } }
    /// Whether every value is in another set.
    public func isSubset(of other: MutableSet<Element>) -> Bool { elements.allSatisfy { other.contains($0) } }

    public var description: String { "MutableSet<\(Element.self)>(\(elements.map { "\($0)" }.joined(separator: ", ")))" }
}

extension MutableSet: _Persistable, _CollectionValue {
    public static var _atollShape: PropertyShape {
        var shape = Element._atollShape
        shape.collection = .set
        return shape
    }
    public static func _atollDefault() -> Self { Self() }
    public static func _atollManaged(_ accessor: ObjectAccessor, _ index: Int) -> Self {
        Self(binding: CollectionBinding(owner: accessor, index: index))
    }
    public static func _atollRead(_ value: Value, _ realm: Realm) -> Self { Self() }
    public func _atollWrite(_ realm: Realm) throws -> Value { .list(try elements.map { try $0._atollWrite(realm) }) }
    public static func _atollRecording(_ recorder: KeyPathRecorder) -> Self { Self(binding: nil, recorder: recorder) }
}

// MARK: - Map

/// The key types of a `Map`: `String`.
public protocol _MapKey: Hashable {
    init(_atollKey: String)
    var _atollKey: String { get }
}

extension String: _MapKey {
    public init(_atollKey: String) { self = _atollKey }
    public var _atollKey: String { self }
}

/// A dictionary property with string keys (Realm Swift's `Map`): `@Persisted var scores: Map<String, Int>`.
public final class Map<Key: _MapKey, Value: RealmCollectionValue>: Collection, CustomStringConvertible {
    private var storage: [(String, Value)] = []
    let binding: CollectionBinding?

    /// An empty unmanaged map.
    public init() { binding = nil }
    init(binding: CollectionBinding?) { self.binding = binding }

    public var realm: Realm? { binding?.realm }

    private var entries: [(String, Value)] {
        guard let binding else { return storage }
        return binding.entries().map { ($0.key ?? "", Value._atollRead($0.value, binding.realm)) }
    }

    public typealias Element = (key: Key, value: Value)
    public var startIndex: Int { 0 }
    public var endIndex: Int { binding?.entries().count ?? storage.count }
    public func index(after i: Int) -> Int { i + 1 }
    public subscript(position: Int) -> Element {
        let e = entries[position]
        return (Key(_atollKey: e.0), e.1)
    }

    /// The keys, in the map's order.
    public var keys: [Key] { entries.map { Key(_atollKey: $0.0) } }
    /// The values, in the map's order.
    public var values: [Value] { entries.map(\.1) }

    /// The value of a key; setting nil removes the key.
    public subscript(key: Key) -> Value? {
        get { entries.first { $0.0 == key._atollKey }?.1 }
        set {
            if let newValue { setValue(newValue, forKey: key) } else { removeObject(for: key) }
        }
    }

    /// Sets the value of a key.
    public func setValue(_ value: Value, forKey mapKey: Key) {
        let key = mapKey._atollKey
        guard let binding else {
            if let i = storage.firstIndex(where: { $0.0 == key }) { storage[i].1 = value } else { storage.append((key, value)) }
            return
        }
        binding.change("set") { store, cls, ref, name in
            try store.dictionarySet(cls, primaryKey: ref, property: name, key: key, try value._atollWrite(binding.realm))
        }
    }

    /// Removes a key.
    public func removeObject(for mapKey: Key) {
        let key = mapKey._atollKey
        guard let binding else { storage.removeAll { $0.0 == key }; return }
        binding.change("remove") { store, cls, ref, name in _ = try store.dictionaryErase(cls, primaryKey: ref, property: name, key: key) }
    }

    /// Removes every key.
    public func removeAll() { for k in keys { removeObject(for: k) } }

    public var description: String { "Map(\(entries.map { "\($0.0): \($0.1)" }.joined(separator: ", ")))" }
}

extension Map: _Persistable, _MapValue {
    public static var _atollShape: PropertyShape {
        var shape = Value._atollShape
        shape.collection = .dictionary
        return shape
    }
    public static func _atollDefault() -> Self { Self() }
    public static func _atollManaged(_ accessor: ObjectAccessor, _ index: Int) -> Self {
        Self(binding: CollectionBinding(owner: accessor, index: index))
    }
    public static func _atollRead(_ value: AtollStore.Value, _ realm: Realm) -> Self { Self() }
    public func _atollWrite(_ realm: Realm) throws -> AtollStore.Value {
        .object(Document(uniqueKeys: try entries.map { ($0.0, try $0.1._atollWrite(realm)) }))
    }
}

// MARK: - LinkingObjects

/// The objects that link to this one through a property of theirs (Realm Swift's
/// `LinkingObjects`): `@Persisted(originProperty: "dogs") var owners: LinkingObjects<Person>`.
/// Computed from the links, never stored; empty on an unmanaged object.
public struct LinkingObjects<Element: ObjectBase>: RandomAccessCollection {
    let binding: CollectionBinding?

    init(binding: CollectionBinding?) { self.binding = binding }

    /// Empty linking objects (what an unmanaged object has).
    public init(fromType: Element.Type, property: String) { binding = nil }

    private var keys: [Int64] {
        guard let binding else { return [] }
        do {
            guard let key = binding.owner.currentKey else { return [] }
            return try binding.realm.store.typedBacklinks(binding.owner.cls.name, key: key, property: binding.property.name)
        } catch {
            binding.realm.report(error)
            return []
        }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { keys.count }
    public subscript(position: Int) -> Element {
        guard let binding else { return Element() }
        return binding.realm.managedObject(Element.self, key: keys[position])
    }
}

extension LinkingObjects: _Persistable {
    public static var _atollShape: PropertyShape { PropertyShape(.linkingObjects, objectClass: Element.self) }
    public static func _atollDefault() -> Self { Self(binding: nil) }
    public static func _atollManaged(_ accessor: ObjectAccessor, _ index: Int) -> Self {
        Self(binding: CollectionBinding(owner: accessor, index: index))
    }
    public static func _atollRead(_ value: Value, _ realm: Realm) -> Self { Self(binding: nil) }
    public func _atollWrite(_ realm: Realm) throws -> Value { .null }
}
