import AtollJSON
import AtollProtocol
@testable import AtollServer
import AtollStore
@testable import AtollSync
import Foundation

/// The checks of a settled simulation. Each compares states reached by different roads:
///
/// - every replica against the server (what the sync protocol promises);
/// - the server against a replay of its own history onto an empty realm (the history is what
///   clients download: it must say everything the server did);
/// - the server against the reference model (`SimModel`), which works out what the rules say from
///   the changesets the server accepted, with code of its own.
enum SimOracle {
    /// Every object of `Item` in a store, by primary key, in a form that compares as the rules
    /// promise: a set's members and a dictionary's keys in sorted order (their order is each
    /// replica's own).
    /// Keyed by `name(of:)`: primary keys that differ in bytes are two objects.
    static func snapshot(_ store: Store) throws -> [String: Value] {
        var out = [String: Value]()
        for doc in try store.objects("Item").documents() {
            guard case .string(let key)? = doc["_id"] else { continue }
            out[name(of: key)] = canonical(.object(doc), property: nil)
        }
        return out
    }

    static func canonical(_ value: Value, property: String?) -> Value {
        switch value {
        case .object(let d) where d.count == 2 && d["$ref"] != nil && d["$id"] != nil:
            // A link as it travels: the target's primary key.
            return d["$id"] ?? .null
        case .object(let d):
            var out = Document()
            // Sorted by bytes: `String <` orders canonically equivalent keys as equal.
            for k in d.keys.sorted(by: bytesPrecede) { out[k] = canonical(d[k] ?? .null, property: k) }
            return .object(out)
        case .list(let items) where property == "labels":
            return .list(items.map { canonical($0, property: nil) }.sorted { bytesPrecede(Wire.encode($0), Wire.encode($1)) })
        case .list(let items):
            return .list(items.map { canonical($0, property: nil) })
        case .link(let l):
            return l.primaryKey
        default:
            return value
        }
    }

    /// A primary key as a Swift dictionary key: every scalar past ASCII written as `\u{…}`, so that
    /// two keys equal as Swift compares strings only when their bytes are.
    static func name(of key: String) -> String {
        key.unicodeScalars.map { $0.isASCII ? String($0) : "\\u{\(String($0.value, radix: 16))}" }.joined()
    }

    static func bytesPrecede(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    /// The server's objects a device with `view` holds, as it holds them: links to objects
    /// outside the view read as none.
    static func view(_ view: SimView, of store: Store) throws -> [String: Value] {
        var keys = Set<String>()
        for key in try store.objects("Item", where: view.query).primaryKeyValues() { if case .string(let k) = key { keys.insert(name(of: k)) } }
        var out = [String: Value]()
        for (key, value) in try snapshot(store) where keys.contains(key) {
            guard case .object(var d) = value else { continue }
            if case .string(let target)? = d["ref"], !keys.contains(name(of: target)) { d["ref"] = .null }
            if case .list(let refs)? = d["refs"] { d["refs"] = .list(refs.filter { if case .string(let t) = $0 { keys.contains(name(of: t)) } else { false } }) }
            out[key] = .object(d)
        }
        return out
    }

    /// What differs between two snapshots, one line per object.
    static func differences(_ a: [String: Value], _ b: [String: Value], _ nameA: String, _ nameB: String) -> [String] {
        var out = [String]()
        for key in Set(a.keys).union(b.keys).sorted() where a[key] != b[key] {
            func show(_ v: Value?) -> String { v.map { Wire.encode($0) } ?? "(none)" }
            out.append("\(key): \(nameA) \(show(a[key])) vs \(nameB) \(show(b[key]))")
        }
        return out
    }

    /// The server's history replayed onto an empty realm by the client's applier.
    static func replay(_ server: ServerApp, into path: String) throws -> [String: Value] {
        let store = try Store(Configuration(path: path, schema: SimSchema.schema))
        defer { store.close() }
        let entries = try server.queue.sync { try server.storage.history(after: 0, excludingFile: -1) }
        for entry in entries {
            if SimLink.verbose { print("  history \(entry.version): \(entry.changeset)") }
            let cs = try SyncChangeset(wire: try EJSON.parse(entry.changeset))
            try store.write {
                try store.withMetadata { sql in
                    try ClientTables.create(sql)
                    let applier = Applier(store: store, sql: sql, pending: PendingIndex([]))
                    try applier.applyDownload(cs.instructions.map { ($0, cs.clock) })
                }
            }
        }
        return try snapshot(store)
    }

    /// The checks of a settled simulation; empty when all hold.
    static func check(_ sim: Simulation, scratch: String) throws -> [String] {
        var failures = [String]()
        let server = try sim.server.queue.sync { try snapshot(sim.server.store) }
        for d in sim.devices {
            _ = try d.store.refresh()
            let local = try snapshot(d.store)
            let seen = try sim.server.queue.sync { try view(d.view, of: sim.server.store) }
            failures += differences(local, seen, "d\(d.index)", "server (d\(d.index)'s view)")
        }
        let replayed = try replay(sim.server, into: scratch + "/replay-\(UUID().uuidString).realm")
        failures += differences(replayed, server, "replay", "server")
        failures += differences(try model(sim).snapshot(), server, "model", "server")
        return failures
    }

    /// The reference model of the changesets the server accepted: those at or below each client
    /// file's upload cursor.
    static func model(_ sim: Simulation) throws -> SimModel {
        let cursors = try sim.server.queue.sync {
            try sim.server.store.withMetadata { sql in try sql.rows("SELECT ident, salt, upload_cursor FROM _atoll_sync_files") }
        }
        var model = SimModel(schema: SimSchema.schema, className: "Item")
        for row in cursors {
            guard case .int(let ident) = row[0], case .int(let salt) = row[1], case .int(let cursor) = row[2] else { continue }
            let file = "\(ident):\(salt)"
            for (version, cs) in sim.uploads.changesets[file] ?? [:] where version <= UInt64(cursor) {
                // Writes the server refused are not part of its state.
                let refused = sim.uploads.refused[file]?[version] ?? []
                var kept = cs
                if !refused.isEmpty { kept.instructions = cs.instructions.filter { !refused.contains($0.objectID) } }
                model.add(kept)
            }
        }
        return model
    }
}
