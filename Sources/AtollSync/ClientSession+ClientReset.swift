import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation

// Client reset: the realm starts again from the server's state as a new client file, and the
// changes that were not uploaded are written again on top (recover modes).

extension ClientSession {
    func clientReset(_ error: SyncError) throws {
        let mode = configuration.clientResetMode
        var reported = SyncError(.clientReset, "client reset (\(mode.rawValue)): \(error.message)")
        reported.isFatal = mode == .manual
        report(reported)
        if mode == .manual {
            setState(.inactive)
            connection.detach(self)
            return
        }
        configuration.beforeReset?(store)
        let unsynced = mode == .discardUnsyncedChanges ? [] : try pendingChangesets()
        try store.write {
            try store.withMetadata { sql in
                try translateLocal(sql)
                for cls in store.schema.classes where !cls.isEmbedded && cls.primaryKey != nil {
                    _ = try store.objects(cls.name).deleteAll()
                }
                try ClientTables.forgetClientFile(sql)
                if let v = store.writeVersion, store.writeHasChanges { try ClientTables.markApplied(sql, v) }
            }
        }
        lock.withLock { completedQueryVersion = -1 }
        recovering = unsynced.isEmpty ? nil : unsynced
        // Bind again as a new client file: the server bootstraps the view from scratch.
        bound = false
        connection.rebind(self)
        if recovering == nil { configuration.afterReset?(store) }
    }

    /// Writes the changes that were not uploaded again, on top of the server's state, as new
    /// local writes (they are uploaded like any other).
    func recover(_ changesets: [SyncChangeset]) throws {
        do {
            try store.write {
                for cs in changesets { try Replayer(store: store).replay(cs) }
            }
        } catch {
            report(SyncError(.clientReset, "unsynced changes could not be recovered: \(error)"))
            if configuration.clientResetMode == .recoverUnsyncedChanges { throw error }
        }
        configuration.afterReset?(store)
        processLocal()
    }
}

/// Writes sync instructions back as ordinary local writes (client reset recovery): objects,
/// fields, set and dictionary elements by value, list inserts after their neighbour when it is
/// still there (else at the end).
struct Replayer {
    let store: Store

    func replay(_ cs: SyncChangeset) throws {
        for ins in cs.instructions {
            guard let pkName = store.schema.classes.first(where: { $0.name == ins.className })?.primaryKey else { continue }
            let exists = try store.object(ins.className, primaryKey: ins.primaryKey) != nil
            do {
                switch ins.op {
                case .create:
                    if !exists { var d = Document(); d[pkName] = ins.primaryKey; _ = try store.create(ins.className, d) }
                case .erase:
                    if exists { try store.delete(ins.className, primaryKey: ins.primaryKey) }
                case .set:
                    if exists { try store.apply(set: ins) }
                case .listInsert:
                    if exists, let p = ins.property, case .list(let items)? = try store.value(ins.className, primaryKey: ins.primaryKey, property: p) {
                        try store.listInsert(ins.className, primaryKey: ins.primaryKey, property: p, ins.value ?? .null, at: items.count)
                    }
                case .setInsert:
                    if exists, let p = ins.property { _ = try store.setInsert(ins.className, primaryKey: ins.primaryKey, property: p, ins.value ?? .null) }
                case .setErase:
                    if exists, let p = ins.property { _ = try store.setErase(ins.className, primaryKey: ins.primaryKey, property: p, ins.value ?? .null) }
                case .dictionarySet:
                    if exists, ins.path.count == 2, case .key(let p) = ins.path[0], case .key(let k) = ins.path[1] {
                        try store.dictionarySet(ins.className, primaryKey: ins.primaryKey, property: p, key: k, ins.value ?? .null)
                    }
                case .dictionaryErase:
                    if exists, ins.path.count == 2, case .key(let p) = ins.path[0], case .key(let k) = ins.path[1] {
                        _ = try store.dictionaryErase(ins.className, primaryKey: ins.primaryKey, property: p, key: k)
                    }
                case .addInteger:
                    if exists, let p = ins.property, case .int(let d)? = ins.value {
                        try store.addInteger(ins.className, primaryKey: ins.primaryKey, property: p, d)
                    }
                default:
                    // Element erases and sets name elements of the old state: they have no
                    // meaning on the new one.
                    break
                }
            } catch let e as AtollError where e.code == .notFound {
                continue
            }
        }
    }
}
