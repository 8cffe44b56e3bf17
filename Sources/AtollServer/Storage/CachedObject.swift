import AtollJSON
import AtollProtocol
import AtollStore
import Foundation

/// One object as a shared storage keeps it (PostgresSyncStorage): its document (nil once it is
/// deleted) and its rows in the sync metadata tables, so that another instance's store becomes
/// exactly what the writer's store was.
struct CachedObject {
    var className: String
    var key: Value
    /// The metadata tables' key text of the primary key (`keyText`).
    var keyText: String
    /// The primary key as EJSON.
    var keyJSON: String
    var docText: String?
    /// `{"table": [[column values after class and pk]…]}` for each metadata table.
    var metaText: String

    /// The metadata tables that hold rows per object; each begins with `class, pk`.
    static let metadataTables = ["_atoll_sync_objects", "_atoll_sync_fields", "_atoll_sync_lists", "_atoll_sync_adds", "_atoll_sync_dangling"]

    /// The object as `store` has it now (inside its open write transaction too).
    init(_ id: ObjectID, from store: Store) throws {
        className = id.className
        key = id.primaryKey
        keyText = AtollProtocol.keyText(id.primaryKey)
        keyJSON = Wire.encode(id.primaryKey)
        docText = try store.object(id.className, primaryKey: id.primaryKey).map { Wire.encode(.object($0)) }
        let key = keyText
        var meta = Document()
        try store.withMetadata { sql in
            for table in Self.metadataTables {
                let rows = try sql.rows("SELECT * FROM \(table) WHERE class = ? AND pk = ?", [.string(id.className), .string(key)])
                if !rows.isEmpty { meta[table] = .list(rows.map { .list(Array($0.dropFirst(2))) }) }
            }
        }
        metaText = Wire.encode(.object(meta))
    }

    /// An object read back from the storage.
    init(className: String, keyJSON: String, docText: String?, metaText: String) throws {
        self.className = className
        self.keyJSON = keyJSON
        key = try EJSON.parse(keyJSON)
        keyText = AtollProtocol.keyText(key)
        self.docText = docText
        self.metaText = metaText
    }

    /// The links of objects written by `applyDocuments`, written by `applyLinks` once every
    /// object is in: class, primary key, the link properties.
    typealias Links = [(className: String, key: Value, links: Document)]

    /// Writes objects into `store` (inside its write transaction) as the storage has them:
    /// documents replaced or deleted, metadata rows replaced; their links are returned, for
    /// `applyLinks` after the last batch.
    static func applyDocuments(_ objects: [CachedObject], to store: Store) throws -> Links {
        var linked = Links()
        // Per class, once: its schema and which properties are links to top-level objects.
        var classes = [String: (info: ObjectSchema, links: Set<String>)]()
        for object in objects {
            if classes[object.className] == nil {
                guard let info = store.schema.classes.first(where: { $0.name == object.className }) else {
                    throw AtollError(.schemaMismatch, "the stored object of class '\(object.className)' is not in the schema")
                }
                let embedded = Set(store.schema.classes.filter(\.isEmbedded).map(\.name))
                let links = info.properties.filter { $0.type == .object && !embedded.contains($0.objectType ?? "") }.map(\.name)
                classes[object.className] = (info, Set(links))
            }
            guard let (info, linkNames) = classes[object.className] else { continue }
            let key = object.key
            let pkText = object.keyText
            guard case .object(let meta) = try EJSON.parse(object.metaText) else {
                throw AtollError(.file, "the stored metadata of \(object.className) \(pkText) is not an object")
            }
            try store.withMetadata { sql in
                for table in metadataTables {
                    try sql.execute("DELETE FROM \(table) WHERE class = ? AND pk = ?", [.string(object.className), .string(pkText)])
                    guard case .list(let rows)? = meta[table] else { continue }
                    for case .list(let columns) in rows {
                        let all: [Value] = [.string(object.className), .string(pkText)] + columns
                        try sql.execute("INSERT INTO \(table) VALUES (\(all.map { _ in "?" }.joined(separator: ", ")))", all)
                    }
                }
            }
            guard let text = object.docText else {
                if try store.object(object.className, primaryKey: key) != nil { try store.delete(object.className, primaryKey: key) }
                continue
            }
            guard case .object(let doc) = try EJSON.parse(text) else {
                throw AtollError(.file, "the stored document of \(object.className) \(pkText) is not an object")
            }
            var plain = Document()
            var links = Document()
            for (name, value) in doc {
                guard let p = info[property: name], p.type != .linkingObjects else { continue }
                if linkNames.contains(p.name) {
                    links[name] = value
                } else {
                    plain[name] = value
                }
            }
            _ = try store.create(object.className, plain, update: .all)
            if !links.isEmpty {
                links[info.primaryKey ?? "_id"] = key
                linked.append((object.className, key, links))
            }
        }
        return linked
    }

    /// Writes the links `applyDocuments` returned (inside a write transaction). A link to an
    /// object that no longer exists reads as no link, as the store makes it when the target is
    /// deleted.
    static func applyLinks(_ linked: Links, to store: Store) throws {
        for (cls, key, links) in linked {
            do {
                _ = try store.create(cls, links, update: .modified)
            } catch let e as AtollError where e.code == .notFound {
                _ = try store.create(cls, try existingTargets(cls, key, links, in: store), update: .modified)
            }
        }
    }

    /// `links` without the targets that do not exist.
    private static func existingTargets(_ cls: String, _ key: Value, _ links: Document, in store: Store) throws -> Document {
        guard let info = store.schema.classes.first(where: { $0.name == cls }) else { return links }
        var out = Document()
        for (name, value) in links {
            guard let target = info[property: name]?.objectType else { out[name] = value; continue }
            func exists(_ v: Value) throws -> Bool { v == .null ? false : try store.object(target, primaryKey: v) != nil }
            switch value {
            case .list(let items): out[name] = .list(try items.filter(exists))
            case .object(let entries):
                var kept = Document()
                for (k, v) in entries { kept[k] = try exists(v) ? v : .null }
                out[name] = .object(kept)
            default: out[name] = try exists(value) ? value : .null
            }
        }
        return out
    }
}
