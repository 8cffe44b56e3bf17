import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation

// Downloads applied in one transaction each, after the local changes are translated (so that
// pending writes merge): a bootstrap's batches as one, evicting what the new view lacks.

extension ClientSession {
    func download(_ m: ServerMessage.Download) throws {
        let serverVersion = m.serverVersion
        var instructions = [(SyncInstruction, Clock)]()
        for item in m.changesets {
            let cs = try item.decode().changeset
            instructions.reserveCapacity(instructions.count + cs.instructions.count)
            for ins in cs.instructions { instructions.append((ins, cs.clock)) }
        }
        if let b = m.bootstrap {
            // A bootstrap's objects carry their own clocks.
            if bootstrapBuffer.isEmpty { bootstrapBuffer = instructions } else { bootstrapBuffer += instructions }
            emit(.progress(direction: "download", transferred: Int(b.sent), transferable: Int(b.total),
                           estimate: b.total == 0 ? 1 : Double(b.sent) / Double(b.total)))
            guard b.last else { return }
            let batch = bootstrapBuffer
            bootstrapBuffer = []
            try apply(batch, serverVersion: serverVersion, bootstrap: true)
            if let recovering {
                self.recovering = nil
                try recover(recovering)
            }
            return
        }
        if let p = m.progress {
            emit(.progress(direction: "download", transferred: Int(p.downloaded), transferable: Int(p.downloadable),
                           estimate: p.downloadable == 0 ? 1 : Double(p.downloaded) / Double(p.downloadable)))
        }
        try apply(instructions, serverVersion: serverVersion, bootstrap: false)
    }

    /// Applies downloaded instructions in one transaction, after translating local changes
    /// (so that the pending set and list identities are current).
    ///
    /// The commit does not wait for the disk (`.normal`): one lost to a power loss goes with its
    /// download cursor, and is downloaded again. Only a suffix of such commits can be lost (the
    /// next local commit, `.full`, syncs the log up to itself), so a version number used again
    /// after it was never an upload's.
    func apply(_ instructions: [(SyncInstruction, Clock)], serverVersion: UInt64, bootstrap: Bool) throws {
        try store.write(durability: .normal) {
            try store.withMetadata { sql in
                try translateLocal(sql)
                let pending = try pendingIndex()
                let applier = Applier(store: store, sql: sql, pending: pending)
                for (ins, c) in instructions {
                    if c != .zero { clock.observe(c) }
                    if let carried = ins.newestCarriedClock { clock.observe(carried) }
                }
                // What a bootstrap may evict: the objects the device held before it.
                let held = bootstrap ? try heldObjects(sql) : [:]
                try applier.applyDownload(instructions)
                if bootstrap { try evictOutside(held, instructions, pending, sql) }
                if try ClientTables.int(sql, "downloadCursor") < Int64(serverVersion) {
                    try ClientTables.set(sql, "downloadCursor", .int(Int64(serverVersion)))
                }
                try ClientTables.set(sql, "clock", .string(clock.last.description))
                if store.writeHasChanges, let v = store.writeVersion { try ClientTables.markApplied(sql, v) }
            }
        }
    }

    /// The primary keys of the objects of the synced classes the device holds, by class.
    func heldObjects(_ sql: MetadataSQL) throws -> [String: [Value]] {
        var out = [String: [Value]]()
        for cls in try syncedClasses(sql) where store.schema.classes.first(where: { $0.name == cls })?.primaryKey != nil {
            let keys = try store.primaryKeys(cls)
            if !keys.isEmpty { out[cls] = keys }
        }
        return out
    }

    /// After a bootstrap: objects the device held before it (`held`) that the new view does not
    /// hold leave the device (not the server), unless a pending change names them.
    func evictOutside(_ held: [String: [Value]], _ instructions: [(SyncInstruction, Clock)],
                              _ pending: PendingIndex, _ sql: MetadataSQL) throws {
        guard !held.isEmpty else { return }
        var keep = Set<ObjectID>()
        for (ins, _) in instructions where ins.op == .upsert && held[ins.className] != nil { keep.insert(ins.objectID) }
        for (cls, keys) in held {
            for pk in keys {
                let id = ObjectID(cls, pk)
                if keep.contains(id) || pending.touched.contains(id) { continue }
                try ClientTables.hideLinks(sql, store.schema, to: id)
                do { try store.delete(cls, primaryKey: pk) } catch let error as AtollError where error.code == .notFound { continue }
                try ClientTables.dropLists(sql, cls, keyText(pk))
            }
        }
    }

    /// The classes whose objects come from the server: every class any subscription version
    /// names (flexible), or the classes with the partition key (partition).
    func syncedClasses(_ sql: MetadataSQL) throws -> Set<String> {
        var out = Set<String>()
        if case .partition = configuration.mode {
            for cls in store.schema.classes where !cls.isEmbedded && cls.primaryKey != nil { out.insert(cls.name) }
            return out
        }
        for text in try ClientTables.subscriptionQueries(sql) {
            for q in try Self.subscriptions(stored: text) { out.insert(q.className) }
        }
        return out
    }
}
