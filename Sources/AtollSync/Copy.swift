import AtollStore
import Foundation

/// Copies between local and synced realms (Realm's `writeCopy(configuration:)`).
public enum SyncCopy {
    /// A realm's data into a new file that will be synced: the objects are created anew, so
    /// that the copy's change log holds them and its session uploads them.
    /// - Throws: `.invalidArgument` when the target exists and has objects.
    public static func copy(from source: Store, toSynced target: Configuration) throws {
        var configuration = target
        if configuration.schema == nil { configuration.schema = source.schema }
        // The session uploads these creates from the change log, values and all.
        configuration.changeLogValues = true
        let copy = try Store(configuration)
        defer { copy.close() }
        for cls in copy.schema.classes where !cls.isEmbedded {
            if try copy.objects(cls.name).count() > 0 {
                throw AtollError(.invalidArgument, "writeCopy: the synced realm at '\(configuration.path ?? "")' has objects already")
            }
        }
        try copy.write {
            var links = [(String, Document)]()
            for cls in source.schema.classes where !cls.isEmbedded && cls.primaryKey != nil {
                guard copy.schema.classes.contains(where: { $0.name == cls.name }), let pkName = cls.primaryKey else { continue }
                let linkNames = Set(cls.properties.filter { p in
                    p.isLink && !(source.schema.classes.first { $0.name == p.objectType }?.isEmbedded ?? false)
                }.map(\.name))
                for doc in try source.objects(cls.name).documents() {
                    var plain = Document()
                    var linked = Document()
                    for (k, v) in doc where !(cls[property: k]?.isComputed ?? false) {
                        if linkNames.contains(k) { linked[k] = v } else { plain[k] = v }
                    }
                    _ = try copy.create(cls.name, plain)
                    if !linked.isEmpty {
                        linked[pkName] = doc[pkName] ?? .null
                        links.append((cls.name, linked))
                    }
                }
            }
            // Links once every object exists.
            for (cls, doc) in links { _ = try copy.create(cls, doc, update: .modified) }
        }
    }

    /// A realm's committed data into a new local file, without the sync metadata (identity,
    /// cursors, pending changes, subscriptions).
    public static func copy(from source: Store, toLocal target: Configuration) throws {
        try source.writeCopy(to: target)
        var configuration = target
        configuration.schema = nil
        let copy = try Store(configuration)
        defer { copy.close() }
        try copy.write {
            try copy.withMetadata { sql in
                for table in ClientTables.tables {
                    try sql.execute("DROP TABLE IF EXISTS \(table)")
                }
                if try sql.rows("SELECT count(*) FROM sqlite_schema WHERE name = '_atoll_holds'").first?.first != .int(0) {
                    try sql.execute("DELETE FROM _atoll_holds WHERE holder = 'sync'")
                }
                // Sync made the log keep values; a local file keeps them when its host asks.
                try sql.execute("DELETE FROM _atoll_meta WHERE key = 'changeLog'")
            }
        }
    }
}
