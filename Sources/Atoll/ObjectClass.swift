import AtollStore
import Foundation
// `_forEachField` gives the offsets of a class's stored properties (see `fieldOffsets`).
@_spi(Reflection) import Swift

/// One `Object` or `EmbeddedObject` subclass as the typed layer knows it: its schema, found by
/// reflection (`Mirror` over a fresh instance's `@Persisted` properties, superclasses' first),
/// and the tables that turn key paths into properties.
final class ObjectClass: @unchecked Sendable {
    let type: ObjectBase.Type
    let name: String
    let schema: ObjectSchema
    let isEmbedded: Bool
    /// Property name → index in `schema.properties`.
    let propertyIndex: [String: Int]
    /// Per property: its `Persisted` type, which reads and writes it without knowing its type.
    let properties: [AnyPersisted.Type]
    /// The classes this one links to (links, lists, sets, maps, linking objects).
    let linkedClasses: [ObjectBase.Type]
    /// Whether an object of the class can hold other objects: links, or mixed values.
    let reachesObjects: Bool

    /// Per property, the offset of its `@Persisted` storage inside an instance; nil when the
    /// runtime did not report it (then `Mirror` and key paths are used instead).
    let offsets: [Int?]
    /// Whether every stored property's offset is known.
    let offsetsComplete: Bool

    private let lock = NSLock()
    /// Storage key path → property index, learned by probing (see `index(of:in:mark:reader:)`).
    private var keyPaths: [AnyKeyPath: Int] = [:]
    /// Per property, once its key path is known: reads an unmanaged object's value for a write.
    private var readers: [((ObjectBase, Realm) throws -> Value?)?]

    private init(_ type: ObjectBase.Type) {
        self.type = type
        name = type.className()
        isEmbedded = type is EmbeddedObject.Type
        let prototype = type.init()
        var found = [(String, AnyPersisted)]()
        var mirrors = [Mirror]()
        var mirror: Mirror? = Mirror(reflecting: prototype)
        while let m = mirror {
            mirrors.append(m)
            mirror = m.superclassMirror
        }
        for m in mirrors.reversed() {
            for child in m.children {
                guard let label = child.label, label.hasPrefix("_"), let p = child.value as? AnyPersisted else { continue }
                found.append((String(label.dropFirst()), p))
            }
        }
        var properties = [Property]()
        var primaryKey: String?
        var linked = [ObjectBase.Type]()
        for (name, p) in found {
            let shape = Swift.type(of: p).valueShape
            if p.options.primaryKey { primaryKey = name }
            if let target = shape.objectClass { linked.append(target) }
            properties.append(Property(
                name: name, type: shape.type, objectType: shape.objectClass?.className(), collection: shape.collection,
                isOptional: shape.isOptional, isIndexed: p.options.indexed,
                linkOriginProperty: shape.type == .linkingObjects ? p.options.originProperty : nil))
        }
        schema = ObjectSchema(name: name, primaryKey: primaryKey, isEmbedded: isEmbedded, properties: properties)
        propertyIndex = Dictionary(properties.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { a, _ in a })
        self.properties = found.map { Swift.type(of: $0.1) }
        linkedClasses = linked
        reachesObjects = !linked.isEmpty || properties.contains { $0.type == .mixed }
        readers = Array(repeating: nil, count: found.count)
        offsets = ObjectClass.fieldOffsets(type, propertyIndex, count: found.count)
        offsetsComplete = zip(offsets, properties).allSatisfy { $0 != nil || $1.isComputed }
    }

    /// Where each property's `@Persisted` storage is inside an instance of `type` (its own
    /// fields and its superclasses'), from the runtime's field offsets: the typed layer reads an
    /// unmanaged object's values for `add`, and tells a managed object's storage its indices,
    /// without a `Mirror` per object. `_forEachField` is the standard library's reflection SPI;
    /// where it reports nothing, the slower paths remain.
    private static func fieldOffsets(_ type: ObjectBase.Type, _ propertyIndex: [String: Int], count: Int) -> [Int?] {
        var offsets = [Int?](repeating: nil, count: count)
        var current: AnyClass? = type
        while let c = current, c != ObjectBase.self {
            _ = _forEachField(of: c, options: _EachFieldOptions(rawValue: 1 << 0)) { name, offset, fieldType, _ in  // .classType
                let label = String(cString: name)
                if label.hasPrefix("_"), let i = propertyIndex[String(label.dropFirst())], fieldType is AnyPersisted.Type {
                    offsets[i] = offset
                }
                return true
            }
            current = _getSuperclass(c)
        }
        return offsets
    }

    /// Runs `body` with the address of each property's storage inside `object` whose offset is
    /// known.
    private func withFields(of object: ObjectBase, _ body: (Int, UnsafeMutableRawPointer) throws -> Void) rethrows {
        try withExtendedLifetime(object) {
            let base = Unmanaged.passUnretained(object).toOpaque()
            for (i, offset) in offsets.enumerated() {
                guard let offset else { continue }
                try body(i, base + offset)
            }
        }
    }

    /// Tells a managed object's `@Persisted` storage the index of its property, so that its
    /// reads and writes need no lookup.
    func bindIndices(_ object: ObjectBase) {
        withFields(of: object) { i, field in properties[i].setIndex(at: field, i) }
    }

    /// Sets an unmanaged object's property from a value of its type; false when it is not of
    /// the property's type (or the property's storage cannot be reached).
    func setUnmanaged(_ object: ObjectBase, _ index: Int, _ value: Any?) -> Bool {
        guard index >= 0, index < offsets.count, let offset = offsets[index] else { return false }
        return withExtendedLifetime(object) {
            properties[index].setValue(at: Unmanaged.passUnretained(object).toOpaque() + offset, value)
        }
    }

    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var registry: [ObjectIdentifier: ObjectClass] = [:]
    /// The classes in the order they were first used.
    nonisolated(unsafe) private static var registered: [ObjectClass] = []

    /// The class of a type, made on first use (and remembered for the process: every class
    /// used so far is in the schema of realms opened without `objectTypes`).
    static func of(_ type: ObjectBase.Type) -> ObjectClass {
        let id = ObjectIdentifier(type)
        registryLock.lock()
        if let known = registry[id] {
            registryLock.unlock()
            return known
        }
        registryLock.unlock()
        let made = ObjectClass(type)
        registryLock.lock()
        defer { registryLock.unlock() }
        if let known = registry[id] { return known }
        registry[id] = made
        registered.append(made)
        return made
    }

    /// Every class known so far, in the order they were first used.
    static var known: [ObjectClass] {
        registryLock.lock()
        defer { registryLock.unlock() }
        return registered
    }

    /// The closure of every class known so far (`closure(of:)`), kept while no class is added
    /// (each write transaction of a realm without `objectTypes` asks for it).
    static var knownClosure: [ObjectClass] {
        registryLock.lock()
        let classes = registered
        let cached = knownClosureCache.flatMap { $0.count == classes.count ? $0.closure : nil }
        registryLock.unlock()
        if let cached { return cached }
        let closure = ObjectClass.closure(of: classes.map(\.type))
        registryLock.lock()
        knownClosureCache = (classes.count, closure)
        registryLock.unlock()
        return closure
    }
    nonisolated(unsafe) private static var knownClosureCache: (count: Int, closure: [ObjectClass])?

    /// The classes a set of types needs: them, and every class they link to, transitively.
    /// Two types with one class name (`className()`) cannot share a schema: the first one
    /// given (or reached) is kept.
    static func closure(of types: [ObjectBase.Type]) -> [ObjectClass] {
        var seen = Set<ObjectIdentifier>()
        var names = Set<String>()
        var result = [ObjectClass]()
        var queue = Array(types.reversed())
        while let t = queue.popLast() {
            guard seen.insert(ObjectIdentifier(t)).inserted else { continue }
            let cls = of(t)
            guard names.insert(cls.name).inserted else { continue }
            result.append(cls)
            queue += cls.linkedClasses.reversed()
        }
        return result.sorted { $0.name < $1.name }
    }

    // MARK: - Key paths

    /// The index of the property whose storage key path is `keyPath`: learned once per class
    /// by marking that storage on `object` (`mark`) and finding the marked child in a `Mirror`.
    /// `reader` reads the property of another object of this class, for `add`.
    func index(of keyPath: AnyKeyPath, in object: ObjectBase, mark: () -> Void,
               reader: @escaping (ObjectBase, Realm) throws -> Value?) -> Int {
        lock.lock()
        if let i = keyPaths[keyPath] {
            lock.unlock()
            return i
        }
        lock.unlock()
        mark()
        var index = -1
        var mirror: Mirror? = Mirror(reflecting: object)
        search: while let m = mirror {
            for child in m.children {
                if let p = child.value as? AnyPersisted, p.index == Persisted<Int>.probeMark, let label = child.label {
                    index = propertyIndex[String(label.dropFirst())] ?? -1
                    break search
                }
            }
            mirror = m.superclassMirror
        }
        lock.lock()
        keyPaths[keyPath] = index
        if index >= 0 { readers[index] = reader }
        lock.unlock()
        return index
    }

    /// The stored values of an unmanaged object's properties, for writing it into `realm`.
    /// Properties never read or written through their key path are read through a `Mirror`.
    func storedValues(of object: ObjectBase, _ realm: Realm) throws -> [Value?] {
        if offsetsComplete, object._unmanagedValues == nil {
            var values = [Value?](repeating: nil, count: properties.count)
            try withFields(of: object) { i, field in
                do { values[i] = try properties[i].storedValue(at: field, realm) } catch is CyclicLink {
                    realm.deferLink(object, property: i, value: unmanagedValue(object, i))
                }
            }
            return values
        }
        lock.lock()
        let readers = self.readers
        lock.unlock()
        var values = [Value?](repeating: nil, count: properties.count)
        var missing = false
        // A link that closes a cycle of unmanaged objects is left out, and written later.
        func read(_ i: Int, _ body: () throws -> Value?) throws {
            do { values[i] = try body() } catch is CyclicLink {
                realm.deferLink(object, property: i, value: unmanagedValue(object, i))
            }
        }
        for (i, reader) in readers.enumerated() {
            if schema.properties[i].isComputed { continue }
            if let override = object._unmanagedValues?[i] {
                try read(i) { try realm.storedValue(override, for: schema.properties[i]) }
            } else if let reader {
                try read(i) { try reader(object, realm) }
            } else {
                missing = true
            }
        }
        guard missing else { return values }
        for (name, p) in persistedChildren(of: object) {
            guard let i = propertyIndex[name], readers[i] == nil, object._unmanagedValues?[i] == nil,
                  !schema.properties[i].isComputed else { continue }
            try read(i) { try p.storedValue(realm) }
        }
        return values
    }

    /// The value an unmanaged object's property holds (its default when never set).
    func unmanagedValue(_ object: ObjectBase, _ index: Int) -> Any? {
        if index >= 0, index < offsets.count, let offset = offsets[index] {
            let value = withExtendedLifetime(object) { properties[index].anyValue(at: Unmanaged.passUnretained(object).toOpaque() + offset) }
            return value ?? properties[index].defaultValue
        }
        let name = schema.properties[index].name
        for (n, p) in persistedChildren(of: object) where n == name {
            return p.anyValue ?? properties[index].defaultValue
        }
        return nil
    }

    private func persistedChildren(of object: ObjectBase) -> [(String, AnyPersisted)] {
        var result = [(String, AnyPersisted)]()
        var mirror: Mirror? = Mirror(reflecting: object)
        while let m = mirror {
            for child in m.children {
                if let label = child.label, let p = child.value as? AnyPersisted { result.append((String(label.dropFirst()), p)) }
            }
            mirror = m.superclassMirror
        }
        return result
    }
}

/// Thrown while serializing a link to an object that is being added: the link closes a cycle.
struct CyclicLink: Error {}
