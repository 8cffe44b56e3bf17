import AtollStore
import Foundation
import Synchronization

/// The binding of a managed object to its row: reads come from one row read, kept while the
/// realm's data is unchanged (the store's read stamp); writes go to the store at once.
///
/// An embedded object has no key of its own in the store's API: its accessor finds its row
/// through its owner's property (and position, in a list), and writes by replacing itself in
/// its owner.
public final class ObjectAccessor: @unchecked Sendable {
    let realm: Realm
    let cls: ObjectClass
    private let fixedKey: Int64?
    private let owner: ObjectAccessor?
    private let ownerProperty: Int
    private let position: Int?
    /// The row as last read, its key and the read stamp it was read at, under `lock`
    /// (a change callback on the notifier thread may read the same object).
    private let lock = Mutex<Void>(())
    private var row: [Value]?
    private var rowKey: Int64?
    private var stamp: Store.ReadStamp?

    init(realm: Realm, cls: ObjectClass, key: Int64, row: [Value]? = nil, stamp: Store.ReadStamp? = nil) {
        self.realm = realm
        self.cls = cls
        fixedKey = key
        rowKey = key
        owner = nil
        ownerProperty = -1
        position = nil
        if let row, let stamp {
            self.row = row
            self.stamp = stamp
        }
    }

    init(embeddedIn owner: ObjectAccessor, property: Int, position: Int?, cls: ObjectClass) {
        realm = owner.realm
        self.cls = cls
        fixedKey = nil
        self.owner = owner
        ownerProperty = property
        self.position = position
    }

    /// The object's row key now (nil once deleted).
    var currentKey: Int64? {
        lock.withLock { _ in
            load()
            return row == nil ? nil : rowKey
        }
    }

    /// Whether the object still exists.
    var isValid: Bool {
        lock.withLock { _ in
            load()
            return row != nil
        }
    }

    /// The stored value of a property (`.null` for an invalid object or index).
    func value(_ index: Int) -> Value {
        lock.withLock { _ in
            load()
            guard let row, index >= 0, index < row.count else { return .null }
            return row[index]
        }
    }

    /// Brings the row up to date; called under `lock`.
    private func load() {
        do {
            let now = try realm.store.readStamp()
            if now == stamp { return }
            stamp = now
            if let fixedKey { rowKey = fixedKey } else { rowKey = try owner.flatMap { try $0.embeddedKey(ownerProperty, position) } }
            row = try rowKey.flatMap { try realm.store.typedRow(cls.name, key: $0) }
        } catch {
            row = nil
            stamp = nil
            realm.report(error as? AtollError ?? AtollError(.invalidArgument, "\(error)"))
        }
    }

    /// The row key of the embedded object in property `index` (at `position` of a list).
    private func embeddedKey(_ index: Int, _ position: Int?) throws -> Int64? {
        guard let position else {
            if case .int(let k) = value(index) { return k }
            return nil
        }
        guard let key = currentKey else { return nil }
        let items = try realm.store.typedCollection(cls.name, key: key, property: cls.schema.properties[index].name)
        guard position < items.count, case .int(let k) = items[position].value else { return nil }
        return k
    }

    /// How the store's element operations name this object (its primary key, or its row key).
    func reference() throws -> Value {
        guard let key = currentKey else { throw invalidated() }
        return try realm.store.reference(cls.name, key: key)
    }

    func invalidated() -> AtollError {
        AtollError(.notFound, "the \(cls.name) object was deleted or its realm closed (the object is invalidated)")
    }

    // MARK: - Writing

    /// Sets a property from its Swift value.
    func set<V: _Persistable>(_ index: Int, _ value: V) {
        do { try setStored(index, try value._atollWrite(realm)) } catch { realm.report(error) }
    }

    /// Sets a property from a value of any type that converts to it (`setValue(_:forKey:)`).
    func setAny(_ index: Int, _ value: Any?) {
        guard index >= 0, index < cls.schema.properties.count else { return }
        do { try setStored(index, try realm.storedValue(value, for: cls.schema.properties[index])) } catch { realm.report(error) }
    }

    /// Sets a property from its stored form.
    func setStored(_ index: Int, _ stored: Value) throws {
        guard index >= 0, index < cls.schema.properties.count else { return }
        try realm.checkWritable("setting '\(cls.name).\(cls.schema.properties[index].name)'")
        let name = cls.schema.properties[index].name
        guard let key = currentKey else { throw invalidated() }
        guard let owner else {
            try realm.store.update(cls.name, key: key, [name: stored])
            return
        }
        guard var document = try realm.store.object(cls.name, key: ObjectKey(key)) else { throw invalidated() }
        document[name] = stored
        try owner.replaceEmbedded(ownerProperty, position, with: .object(document))
    }

    /// Replaces the embedded object in property `index` (at `position` of a list).
    private func replaceEmbedded(_ index: Int, _ position: Int?, with value: Value) throws {
        guard let position else {
            try setStored(index, value)
            return
        }
        guard owner == nil else {
            throw AtollError(.invalidArgument, "a list of embedded objects inside an embedded object is changed through its top-level owner")
        }
        try realm.store.listSet(cls.name, primaryKey: try reference(), property: cls.schema.properties[index].name, value, at: position)
    }
}
