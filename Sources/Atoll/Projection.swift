import AtollStore
import Dispatch
import Foundation

// Class projections (Realm Swift's `Projection`): a light view model over an object, whose
// properties pass through, rename or transform the object's properties by key path.
//
//     class Profile: Projection<Person> {
//         @Projected(\Person.firstName) var firstName                          // passthrough
//         @Projected(\Person.firstName) var givenName                          // rename
//         @Projected(\Person.lastName.localizedCapitalized.first) var initial  // transform
//         @Projected(\Person.address?.city) var homeCity                       // through a link
//         @Projected(\Person.dogs.projectTo.name) var dogNames: ProjectedCollection<String>
//     }
//     let profiles = realm.objects(Profile.self).filter("lastName == $0", "Smith")
//
// A projection holds its root object and nothing else: every read reads the root now (live),
// every write writes it (inside a write transaction). Observing a projection observes its root
// with the key paths its properties go through, found by evaluating each key path on a
// recorder object (`KeyPathRecorder`), and reports changes by the projection's property names;
// properties of the root that no projected key path goes through are excluded.

// MARK: - Projection

/// What a projection is, for code that handles any projection: its root object's type, the
/// object, and how to make one.
public protocol ProjectionObservable: AnyObject {
    /// The class of the projected objects.
    associatedtype Root: ObjectBase
    /// The projected object.
    var rootObject: Root { get }
    /// A projection of an object.
    init(projecting object: Root)
}

/// A light view model of an `Object` (or `EmbeddedObject`): subclass it and declare
/// `@Projected` properties. Results of a projection class select the objects of its root class
/// (`realm.objects(Profile.self)`), and are filtered and sorted by the root's property names.
///
/// ```swift
/// class Profile: Projection<Person> {
///     @Projected(\Person.firstName) var firstName
///     @Projected(\Person.lastName.localizedCapitalized.first) var lastNameInitial
///     @Projected(\Person.dogs.projectTo.name) var dogNames: ProjectedCollection<String>
/// }
/// let ann = realm.objects(Profile.self).filter("firstName == $0", "Ann").first
/// try realm.write { ann?.firstName = "Anna" }   // writes the Person
/// ```
open class Projection<Root: ObjectBase>: ProjectionObservable, CustomStringConvertible {
    /// The projected object.
    public let rootObject: Root

    /// A projection of an object (managed or not).
    public required init(projecting object: Root) {
        rootObject = object
    }

    /// The realm of the projected object; nil while it is unmanaged.
    public var realm: Realm? { rootObject.realm }

    /// Whether the projected object was deleted (or its realm closed).
    public var isInvalidated: Bool { rootObject.isInvalidated }

    /// Whether the projected object is frozen.
    public var isFrozen: Bool { rootObject.isFrozen }

    /// The projection's class name, its root's class name and each projected property's value:
    /// `Profile<Person> { firstName = Ann; lastNameInitial = S; }`.
    open var description: String {
        let lines = projectionSchema(of: self).map { p in
            "\t\(p.label) = \(p.projected.value(on: rootObject).map { String(describing: $0) } ?? "nil");"
        }
        return "\(type(of: self))<\(Root.className())> {\n" + lines.joined(separator: "\n") + "\n}"
    }
}

extension Projection: Hashable {
    /// Projections are equal when they project the same object (as `ObjectBase.==` says).
    public static func == (lhs: Projection, rhs: Projection) -> Bool { lhs.rootObject == rhs.rootObject }

    public func hash(into hasher: inout Hasher) { hasher.combine(rootObject) }
}

extension Projection where Root: Object {
    /// A projection of a frozen copy of the object (see `Object.freeze()`).
    /// - Throws: when the frozen realm cannot be opened.
    public func freeze() throws -> Self { Self(projecting: try rootObject.freeze()) }

    /// A projection of the live object of a frozen one (nil when it was deleted since).
    public func thaw() -> Self? { rootObject.thaw().map { Self(projecting: $0) } }
}

/// Results of a projection class hold a projection of each object of its root class.
extension Projection: RealmFetchable {
    public static var _atollObjectType: ObjectBase.Type { Root.self }
    public static func _atollFetched(_ accessor: ObjectAccessor) -> Self {
        let root = Root()
        root.bind(accessor)
        return Self(projecting: root)
    }
    public static func _atollUnmanaged() -> Self { Self(projecting: Root()) }
    public var _atollAccessor: ObjectAccessor? { rootObject._accessor }
}

/// Gives projections the `id` of their root object (for SwiftUI-style lists).
extension ObjectKeyIdentifiable where Self: ProjectionObservable {
    public var id: UInt64 {
        if let key = rootObject._accessor?.currentKey { return UInt64(bitPattern: key) }
        return UInt64(UInt(bitPattern: ObjectIdentifier(rootObject).hashValue))
    }
}

extension Results where Element: ProjectionObservable {
    /// Sorted by a key path of the root class: `sorted(by: \Person.lastName)`.
    public func sorted<V: Comparable>(by keyPath: KeyPath<Element.Root, V>, ascending: Bool = true) -> Results {
        sorted(byKeyPath: KeyPathRecorder.name(of: keyPath), ascending: ascending)
    }
}

// MARK: - @Projected

/// Declares a property of a `Projection` by a key path of its root class: the root's property
/// itself (`\Person.firstName`), under this property's name, or a value computed from it
/// (`\Person.lastName.localizedUppercase`, `\Person.address?.city`,
/// `\Person.dogs.projectTo.name`).
///
/// Reading the property reads the root object now. Setting it sets the root's property, inside
/// a write transaction, when the key path is writable (a passthrough or a rename); setting a
/// property whose key path computes its value changes nothing and keeps an `.invalidArgument`
/// error in `realm.lastError`.
@propertyWrapper
public struct Projected<Root: ObjectBase, Value> {
    let keyPath: KeyPath<Root, Value>
    /// Set when the property is read on a probe projection (see `projectedLabel(of:)`).
    var probed = false

    /// A property projecting `projectedKeyPath` of the root object.
    public init(_ projectedKeyPath: KeyPath<Root, Value>) {
        keyPath = projectedKeyPath
    }

    @available(*, unavailable, message: "@Projected is only available on Projection subclasses")
    public var wrappedValue: Value {
        get { fatalError("unreachable: @Projected outside a projection") }
        set { fatalError("unreachable: @Projected outside a projection") }
    }

    /// The property of a projection: the root object's value at the key path.
    public static subscript<EnclosingSelf: Projection<Root>>(
        _enclosingInstance projection: EnclosingSelf,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<EnclosingSelf, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<EnclosingSelf, Projected<Root, Value>>
    ) -> Value {
        get {
            let root = projection.rootObject
            if root._recorder != nil { projection[keyPath: storageKeyPath].probed = true }
            return root[keyPath: projection[keyPath: storageKeyPath].keyPath]
        }
        set {
            let keyPath = projection[keyPath: storageKeyPath].keyPath
            guard let writable = keyPath as? ReferenceWritableKeyPath<Root, Value> else {
                let label = projectionSchema(of: projection).first { $0.projected.rootKeyPath == keyPath }?.label ?? "?"
                projection.rootObject.reportError(AtollError(
                    .invalidArgument,
                    "'\(label)' of \(EnclosingSelf.self) is read-only: its key path computes a value from \(Root.className())"))
                return
            }
            projection.rootObject[keyPath: writable] = newValue
        }
    }
}

/// Reads a `Projected` of any type.
protocol AnyProjected {
    var rootKeyPath: AnyKeyPath { get }
    var probed: Bool { get }
    /// The root's property names the key path goes through (`["dogs", "name"]`).
    func rootNames() -> [String]
    /// The value at the key path of a root object (nil for another class, or a nil value).
    func value(on root: ObjectBase) -> Any?
}

extension Projected: AnyProjected {
    var rootKeyPath: AnyKeyPath { keyPath }
    func rootNames() -> [String] { KeyPathRecorder.names(of: keyPath) }
    func value(on root: ObjectBase) -> Any? {
        guard let root = root as? Root else { return nil }
        return unwrapped(root[keyPath: keyPath])
    }
}

/// A value, or nil when it is an optional holding nothing (`Optional("S")` reads as `"S"`).
private func unwrapped(_ value: Any) -> Any? {
    let mirror = Mirror(reflecting: value)
    guard mirror.displayStyle == .optional else { return value }
    return mirror.children.first.map { unwrapped($0.value) } ?? nil
}

// MARK: - Projection schema

/// One `@Projected` property of a projection class.
struct ProjectedProperty: @unchecked Sendable {
    /// The projection's property name.
    let label: String
    /// The root's property names its key path goes through (empty: none, it is not observed).
    let rootNames: [String]
    let projected: any AnyProjected
}

/// The `@Projected` properties of each projection class, found once (by `Mirror`, superclasses'
/// first) and kept for the process.
private final class ProjectionSchemaCache: @unchecked Sendable {
    private let lock = NSLock()
    private var schemas: [ObjectIdentifier: [ProjectedProperty]] = [:]

    func schema(of projection: AnyObject) -> [ProjectedProperty] {
        let id = ObjectIdentifier(type(of: projection))
        lock.lock()
        if let known = schemas[id] {
            lock.unlock()
            return known
        }
        lock.unlock()
        let found = projectedChildren(of: projection).map { label, projected in
            ProjectedProperty(label: label, rootNames: projected.rootNames(), projected: projected)
        }
        lock.lock()
        defer { lock.unlock() }
        schemas[id] = found
        return found
    }
}

private let projectionSchemas = ProjectionSchemaCache()

/// The `@Projected` properties of a projection class.
func projectionSchema(of projection: AnyObject) -> [ProjectedProperty] {
    projectionSchemas.schema(of: projection)
}

/// A projection's `@Projected` storages by property name, superclasses' first.
private func projectedChildren(of projection: AnyObject) -> [(String, any AnyProjected)] {
    var mirrors = [Mirror]()
    var mirror: Mirror? = Mirror(reflecting: projection)
    while let m = mirror {
        mirrors.append(m)
        mirror = m.superclassMirror
    }
    return mirrors.reversed().flatMap { m in
        m.children.compactMap { child -> (String, any AnyProjected)? in
            guard let label = child.label, label.hasPrefix("_"), let p = child.value as? any AnyProjected else { return nil }
            return (String(label.dropFirst()), p)
        }
    }
}

extension ProjectionObservable {
    /// The property name of a key path of the projection (`\Profile.firstName` → `firstName`),
    /// found by reading it on a projection of a recorder object; nil for a key path that is no
    /// `@Projected` property.
    static func projectedLabel(of keyPath: PartialKeyPath<Self>) -> String? {
        let root = Root()
        root._recorder = KeyPathRecorder()
        let probe = Self(projecting: root)
        _ = probe[keyPath: keyPath]
        return projectedChildren(of: probe).first { $0.1.probed }?.0
    }
}

// MARK: - Observation

extension ProjectionObservable {
    /// Calls `block` after each change of the projected properties of the root object (of
    /// those named in `keyPaths`, when given: the projection's property names), and with
    /// `.deleted` when the object is deleted. No initial call, as in Realm.
    ///
    /// Each `PropertyChange` names a projection property whose key path goes through a changed
    /// property of the root; its `newValue` is the projected value now, its `oldValue` the
    /// projected value before the change when the root property holds a value or an embedded
    /// object (nil through links and collections). Changes of root properties that no
    /// projected key path goes through are not reported.
    ///
    /// ```swift
    /// let token = profile.observe { change in
    ///     if case .change(_, let properties) = change { print(properties.map(\.name)) }   // ["firstName"]
    /// }
    /// ```
    /// The block runs on the realm's notifier thread, or on `queue`. A name no property has,
    /// or an unmanaged root, gives `.error` (`.invalidArgument`).
    public func observe(keyPaths: [String]? = nil, on queue: DispatchQueue? = nil,
                        _ block: @escaping (ObjectChange<Self>) -> Void) -> NotificationToken {
        let schema = projectionSchema(of: self)
        var watched = schema
        if let keyPaths, !keyPaths.isEmpty {
            let labels = Set(schema.map(\.label))
            if let unknown = keyPaths.first(where: { !labels.contains($0) }) {
                return refused(AtollError(.invalidArgument, "observe: \(Self.self) has no projected property '\(unknown)'"), on: queue, block)
            }
            watched = schema.filter { keyPaths.contains($0.label) }
        }
        let rootPaths = observedRootPaths(watched.map(\.rootNames), of: Root.self)
        guard !rootPaths.isEmpty else {
            return refused(AtollError(.invalidArgument, "observe: no projected property of \(Self.self) reads a property of \(Root.className())"),
                           on: queue, block)
        }
        return rootObject.observe(keyPaths: rootPaths, on: nil) { [self] (change: ObjectChange<Root>) in
            let projected: ObjectChange<Self>
            switch change {
            case .error(let error): projected = .error(error)
            case .deleted: projected = .deleted
            case .change(_, let properties):
                let changes = projectedChanges(properties, watched)
                guard !changes.isEmpty else { return }
                projected = .change(self, changes)
            }
            deliverProjected(block, projected, on: queue)
        }
    }

    /// Observes the properties of Swift key paths of the projection: `observe(keyPaths: [\Profile.firstName])`.
    public func observe(keyPaths: [PartialKeyPath<Self>], on queue: DispatchQueue? = nil,
                        _ block: @escaping (ObjectChange<Self>) -> Void) -> NotificationToken {
        var names = [String]()
        for keyPath in keyPaths {
            guard let name = Self.projectedLabel(of: keyPath) else {
                return refused(AtollError(.invalidArgument, "observe: a key path of \(Self.self) that is no @Projected property"), on: queue, block)
            }
            names.append(name)
        }
        return observe(keyPaths: names, on: queue, block)
    }

    /// The root's changes as the projection's: one per watched property whose key path starts
    /// at a changed root property.
    private func projectedChanges(_ properties: [PropertyChange], _ watched: [ProjectedProperty]) -> [PropertyChange] {
        let changed = Set(properties.map(\.name))
        let (before, rebuilt) = rootRebuilt(properties, after: false)
        // The new values as the change carries them (read at the delivery, consistent with the
        // old ones), where they can be rebuilt; the root read now otherwise.
        let (after, rebuiltAfter) = rootRebuilt(properties, after: true)
        return watched.compactMap { p in
            guard let first = p.rootNames.first, changed.contains(first) else { return nil }
            let old = rebuilt.contains(first) ? p.projected.value(on: before) : nil
            let new = p.projected.value(on: rebuiltAfter.contains(first) ? after : rootObject)
            // An embedded object is written whole: a change of its other properties reaches
            // the root as a change of it. A projected value known to be unchanged is no change.
            if rebuilt.contains(first), sameValue(old, new) { return nil }
            return PropertyChange(name: p.label, oldValue: old, newValue: new)
        }
    }

    /// An unmanaged root holding the old values of the changed properties that can be rebuilt
    /// from a change (values and embedded objects), and their names.
    private func rootRebuilt(_ properties: [PropertyChange], after: Bool) -> (Root, Set<String>) {
        let root = Root()
        let cls = root.objectClass
        var rebuilt = Set<String>()
        var values = [Int: Any]()
        guard let realm = rootObject.realm else { return (root, rebuilt) }
        for change in properties {
            guard let i = cls.propertyIndex[change.name], let type = cls.properties[i] as? any RebuildablePersisted.Type,
                  let value = type.rebuilt(after ? change.newValue : change.oldValue, realm) else { continue }
            values[i] = value
            rebuilt.insert(change.name)
        }
        root._unmanagedValues = values
        return (root, rebuilt)
    }
}

/// The key paths to observe on the root for projected properties going through `paths`. The
/// store watches a property's own value when a key path ends at it, and nothing deeper (its
/// key path tree keeps the shorter path): so `dogs.name`, which also reports the list's own
/// changes, replaces `dogs`; but `address`, which reports every change inside an embedded
/// object, replaces `address.city`.
func observedRootPaths(_ paths: [[String]], of root: ObjectBase.Type) -> [String] {
    var kept = [String]()
    for path in paths where !path.isEmpty {
        let name = path.joined(separator: ".")
        if !kept.contains(name) { kept.append(name) }
    }
    for short in kept {
        let longer = kept.filter { $0.hasPrefix(short + ".") }
        guard !longer.isEmpty else { continue }
        if endsAtEmbeddedObject(short.split(separator: ".").map(String.init), of: root) {
            kept.removeAll { longer.contains($0) }
        } else {
            kept.removeAll { $0 == short }
        }
    }
    return kept
}

/// Whether two projected values are known to be equal: both nil, or equal `Hashable` values
/// (objects compare as `ObjectBase.==` says).
private func sameValue(_ a: Any?, _ b: Any?) -> Bool {
    switch (a, b) {
    case (nil, nil): return true
    case (let x?, let y?):
        if isNil(x), isNil(y) { return true }
        guard let x = x as? AnyHashable, let y = y as? AnyHashable else { return false }
        return x == y
    default: return false
    }
}

/// Whether a key path of property names ends at a property holding embedded objects.
private func endsAtEmbeddedObject(_ path: [String], of root: ObjectBase.Type) -> Bool {
    var cls = ObjectClass.of(root)
    for (n, name) in path.enumerated() {
        guard let i = cls.propertyIndex[name], let target = cls.properties[i].valueShape.objectClass else { return false }
        if n == path.count - 1 { return target is EmbeddedObject.Type }
        cls = ObjectClass.of(target)
    }
    return false
}

/// A property type whose value before a change can be rebuilt from the change's old value.
private protocol RebuildablePersisted {
    /// The typed value of an old value (a Swift value of a change), or nil when it cannot be
    /// rebuilt (links to objects and collections, whose changes carry keys only).
    static func rebuilt(_ old: Any?, _ realm: Realm) -> Any?
}

extension Persisted: RebuildablePersisted {
    static func rebuilt(_ old: Any?, _ realm: Realm) -> Any? {
        let shape = Value._atollShape
        guard shape.collection == .single, shape.type != .linkingObjects, shape.type != .mixed else { return nil }
        if shape.type == .object {
            guard let embedded = shape.objectClass as? EmbeddedObject.Type else { return nil }
            guard let dictionary = old as? [String: Any] else { return old == nil ? Value._atollDefault() : nil }
            let object = embedded.init()
            object.setValues(dictionary.filter { object.objectClass.propertyIndex[$0.key] != nil })
            return object
        }
        // A Swift value of a change is a scalar's own value (an enum's raw value, a URL's
        // string): its stored form reads back as the property's type.
        return Value._atollRead(untypedStoredValue(old), realm)
    }
}

/// Runs `block` with `change` now, or on `queue` when given.
private func deliverProjected<T>(_ block: @escaping (ObjectChange<T>) -> Void, _ change: ObjectChange<T>, on queue: DispatchQueue?) {
    guard let queue else { return block(change) }
    let boxed = Unchecked((block, change))
    queue.async { boxed.value.0(boxed.value.1) }
}

/// Reports an error to the block (now, or on `queue`) and returns a stopped token.
private func refused<T>(_ error: AtollError, on queue: DispatchQueue?, _ block: @escaping (ObjectChange<T>) -> Void) -> NotificationToken {
    deliverProjected(block, .error(error), on: queue)
    let token = NotificationToken()
    token.invalidate()
    return token
}

// MARK: - Collection mapping

/// Maps the objects of a `List` or `MutableSet` to a value of each, by key path:
/// `\Person.dogs.projectTo.name` is a `ProjectedCollection<String>` of the dogs' names.
@dynamicMemberLookup
public struct ElementMapper<Element: ObjectBase> {
    let source: ProjectionSource<Element>

    /// The collection of each element's value at `member`.
    public subscript<V>(dynamicMember member: KeyPath<Element, V>) -> ProjectedCollection<V> {
        if let recorder = source.recorder {
            // Recording a projection's key path: continue it through an element.
            let element = Element()
            element._recorder = recorder
            _ = element[keyPath: member]
        }
        return ProjectedCollection(source: source, keyPath: member)
    }
}

/// The collection a `projectTo` maps, type-erased.
struct ProjectionSource<Base: ObjectBase> {
    let count: () -> Int
    let element: (Int) -> Base
    /// Set on a recorder's collection: the key path continues through an element.
    let recorder: KeyPathRecorder?
    /// Observes the collection (and what `keyPaths` names on its objects), reporting the indices.
    let observe: (_ keyPaths: [String]?, _ queue: DispatchQueue?, _ block: @escaping (RealmCollectionChange<Void>) -> Void) -> NotificationToken
}

/// A collection change without its collection, for `ProjectedCollection` to put itself in.
private func indicesOnly<C>(_ change: RealmCollectionChange<C>) -> RealmCollectionChange<Void> {
    switch change {
    case .initial: return .initial(())
    case .update(_, let deletions, let insertions, let modifications):
        return .update((), deletions: deletions, insertions: insertions, modifications: modifications)
    case .error(let error): return .error(error)
    }
}

extension List where Element: ObjectBase {
    /// Maps the list's objects to a value of each, for a `@Projected` property:
    /// `@Projected(\Person.dogs.projectTo.name) var dogNames: ProjectedCollection<String>`.
    public var projectTo: ElementMapper<Element> {
        ElementMapper(source: ProjectionSource(
            count: { self.count },
            element: { self[$0] },
            recorder: recorder,
            observe: { keyPaths, queue, block in self.observe(keyPaths: keyPaths, on: queue) { block(indicesOnly($0)) } }))
    }
}

extension MutableSet where Element: ObjectBase {
    /// Maps the set's objects to a value of each, for a `@Projected` property:
    /// `@Projected(\Person.friendSet.projectTo.name) var friendNames: ProjectedCollection<String>`.
    public var projectTo: ElementMapper<Element> {
        ElementMapper(source: ProjectionSource(
            count: { self.count },
            element: { position in
                let elements = Array(self)
                guard elements.indices.contains(position) else {
                    self.realm?.report(AtollError(.invalidArgument, "index \(position) is out of range for a set of \(elements.count)"))
                    return Element()
                }
                return elements[position]
            },
            recorder: recorder,
            observe: { keyPaths, queue, block in self.observe(keyPaths: keyPaths, on: queue) { block(indicesOnly($0)) } }))
    }
}

/// The values of a key path of each object of a list or set, live: a `@Projected` property
/// declared with `projectTo` (`\Person.dogs.projectTo.name`). Reading it reads the collection
/// now.
public struct ProjectedCollection<Element>: RandomAccessCollection, CustomStringConvertible {
    private let countNow: () -> Int
    private let valueAt: (Int) -> Element
    private let observeSource: (_ keyPaths: [String]?, _ queue: DispatchQueue?,
                                _ block: @escaping (RealmCollectionChange<Void>) -> Void) -> NotificationToken
    /// The element key path's property names, found when first observed.
    private let elementKeyPath: () -> String

    init<Base: ObjectBase>(source: ProjectionSource<Base>, keyPath: KeyPath<Base, Element>) {
        countNow = source.count
        valueAt = { source.element($0)[keyPath: keyPath] }
        observeSource = source.observe
        elementKeyPath = { KeyPathRecorder.name(of: keyPath) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { countNow() }

    public subscript(position: Int) -> Element { valueAt(position) }

    public var description: String { "ProjectedCollection<\(Element.self)>(\(map { "\($0)" }.joined(separator: ", ")))" }

    /// Calls `block` with the initial values, then after each change of the collection or of
    /// the mapped property of its objects, with the indices that changed.
    public func observe(on queue: DispatchQueue? = nil,
                        _ block: @escaping (RealmCollectionChange<ProjectedCollection<Element>>) -> Void) -> NotificationToken {
        let name = elementKeyPath()
        return observeSource(name.isEmpty ? nil : [name], queue) { change in
            switch change {
            case .initial: block(.initial(self))
            case .update(_, let deletions, let insertions, let modifications):
                block(.update(self, deletions: deletions, insertions: insertions, modifications: modifications))
            case .error(let error): block(.error(error))
            }
        }
    }
}

extension ProjectedCollection where Element: Equatable {
    /// The position of the first value equal to `value`.
    public func index(of value: Element) -> Int? { firstIndex(of: value) }
}
