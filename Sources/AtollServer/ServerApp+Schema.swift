import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation
import Synchronization

// The app's schema as it grows: classes and properties development-mode clients bring, and
// those other instances adopted (a shared storage), with what those instances committed.

extension ServerApp {
    /// Development mode: classes and properties the client has and the server lacks are added.
    func adoptSchema(_ json: Value, session: Int64) throws {
        // Classes other instances added come first.
        try storage.catchUp(self)
        let ref = EJSON.make(json)
        defer { json_decref(ref) }
        let client: Schema
        do { client = try SchemaJSON.schema(ref) } catch {
            throw SyncErrorMessage(.invalidSchemaChange, "the client's schema cannot be read: \(error)", session: session)
        }
        var merged = schema
        var changed = false
        // A property the rules name decides who reads and writes: the first client to add it
        // fixes its type for everyone. As a collection, the rule's comparison means something
        // else (any element), and every client with the single value is refused: not allowed.
        var ruleFields = [String: Set<String>]()
        func checkRuleField(_ cls: String, _ p: Property) throws {
            guard p.collection != .single else { return }
            let named = ruleFields[cls] ?? configuration.rules.fieldsNamed(by: cls)
            ruleFields[cls] = named
            guard named.contains(p.name) else { return }
            throw SyncErrorMessage(.invalidSchemaChange, "'\(cls).\(p.name)' is named by the app's rules: development mode adds it only as a "
                                   + "single value, not a \(p.collection.rawValue) (declare it in the app's schema)", session: session)
        }
        for cls in client.classes {
            guard let index = merged.classes.firstIndex(where: { $0.name == cls.name }) else {
                guard configuration.developmentMode else {
                    throw SyncErrorMessage(.invalidSchemaChange, "class '\(cls.name)' is not in the server's schema (development mode is off)", session: session)
                }
                for p in cls.properties { try checkRuleField(cls.name, p) }
                merged.classes.append(cls)
                changed = true
                continue
            }
            let mine = merged.classes[index]
            if mine.primaryKey != cls.primaryKey || mine.isEmbedded != cls.isEmbedded {
                throw SyncErrorMessage(.invalidSchemaChange, "class '\(cls.name)' differs from the server's (primary key or embedded)", session: session)
            }
            for p in cls.properties {
                if let existing = mine[property: p.name] {
                    if existing.type != p.type || existing.collection != p.collection || existing.objectType != p.objectType {
                        throw SyncErrorMessage(.invalidSchemaChange, "'\(cls.name).\(p.name)' is \(existing.typeName) on the server, \(p.typeName) on the client", session: session)
                    }
                } else {
                    guard configuration.developmentMode else {
                        throw SyncErrorMessage(.invalidSchemaChange, "'\(cls.name).\(p.name)' is not in the server's schema (development mode is off)", session: session)
                    }
                    try checkRuleField(cls.name, p)
                    merged.classes[index].properties.append(p)
                    changed = true
                }
            }
        }
        guard changed else { return }
        do { try merged.validate() } catch {
            throw SyncErrorMessage(.invalidSchemaChange, "the merged schema is invalid: \(error)", session: session)
        }
        try replaceSchema(merged)
        try storage.saveSchema(self, merged)
        log.info("schema changed (development mode)", ["app": configuration.id, "classes": merged.classes.map(\.name).joined(separator: ",")])
    }

    /// Takes the classes and properties of a schema kept in a shared storage (another instance
    /// adopted them) that this store lacks.
    func adoptStoredSchema(_ stored: Schema) throws {
        var merged = schema
        var changed = false
        for cls in stored.classes {
            guard let index = merged.classes.firstIndex(where: { $0.name == cls.name }) else {
                merged.classes.append(cls)
                changed = true
                continue
            }
            for p in cls.properties where merged.classes[index][property: p.name] == nil {
                merged.classes[index].properties.append(p)
                changed = true
            }
        }
        guard changed else { return }
        try merged.validate()
        try replaceSchema(merged)
        log.info("schema changed (another instance)", ["app": configuration.id, "classes": merged.classes.map(\.name).joined(separator: ",")])
    }

    /// Writes what a shared storage has beyond this store's latest version into the store, then
    /// sends each of those versions to the sessions as if it had been integrated here.
    /// `nextObjects` gives the objects in batches (nil after the last), each written in a
    /// transaction of its own; the links and `record` (the storage notes what the store now
    /// holds) come in the last.
    func applyStored(_ nextObjects: () throws -> [CachedObject]?, entries: [HistoryEntry], latest: UInt64,
                     record: () throws -> Void) throws {
        var links = CachedObject.Links()
        while let batch = try nextObjects() {
            try store.write { links += try CachedObject.applyDocuments(batch, to: store) }
        }
        try store.write {
            try CachedObject.applyLinks(links, to: store)
            try record()
        }
        for e in entries {
            latestVersion = e.version
            let effects = try EncodedEffects(changeset: e.changeset)
            try fanOut(effects, version: e.version, clock: e.clock, origin: nil, originFile: e.file)
        }
        latestVersion = latest
    }

    /// Catches up with a shared storage (the listener's call, on the queue); a failure is logged
    /// and the next call tries again.
    func catchUpQuietly() {
        guard !isClosed else { return }
        do { try storage.catchUp(self) } catch {
            log.warning("catching up with the shared storage failed", ["app": configuration.id, "error": "\(error)"])
        }
    }
}
