import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation

// Local commits read and translated into changesets (pending until acknowledged), uploaded in
// order within the message size, and dropped when the server acknowledges them.

extension ClientSession {
    /// Translates new local change-log entries into pending changesets (their own transaction,
    /// or the caller's), then uploads what is new.
    func processLocal() {
        guard !store.isClosed else { return }
        do {
            // The session's handle reads a snapshot: see the app's commits.
            _ = try store.refresh()
            let processed = try store.withMetadata { sql in UInt64(try ClientTables.int(sql, "processedLocal")) }
            if try store.version() > processed {
                try store.write { try store.withMetadata { sql in try translateLocal(sql) } }
            }
            try upload()
        } catch {
            report(SyncError(.clientInternalError, "local changes could not be prepared for upload: \(error)"))
        }
    }

    /// Inside a write: every entry after the last translated one, except the client's own.
    func translateLocal(_ sql: MetadataSQL) throws {
        let processed = UInt64(try ClientTables.int(sql, "processedLocal"))
        let applied = try ClientTables.applied(sql, after: processed)
        // The session's own commits (downloads) are not read: a bootstrap's entry is large.
        let entries = try store.changes(after: processed, skipping: applied)
        guard let newest = entries.last?.version else { return }
        if let first = entries.first?.version, first > processed + 1, processed > 0 {
            report(SyncError(.clientInternalError, "local changes \(processed + 1)...\(first - 1) were pruned before they could be uploaded"))
        }
        let translator = Translator(store: store, sql: sql, clock: clock)
        for entry in entries where !applied.contains(entry.version) {
            guard let cs = try translator.translate(entry) else { continue }
            // Stored ready to send: one changeset text, or its parts (one per line) when it is
            // larger than a message should be.
            let text = Self.parts(of: cs).joined(separator: "\n")
            try ClientTables.addPending(sql, version: entry.version, text: text)
        }
        try ClientTables.set(sql, "processedLocal", .int(Int64(newest)))
        try ClientTables.set(sql, "clock", .string(clock.last.description))
        try ClientTables.forgetApplied(sql, through: newest)
        try store.holdChangeLog(from: newest)
    }

    func pendingChangesets(after version: UInt64 = 0, maxBytes: Int = .max) throws -> [SyncChangeset] {
        try readPending(after: version, maxBytes: maxBytes).changesets
    }


    /// The pending changesets after `version` (up to about `maxBytes`), their versions, and
    /// whether every one was parsed before.
    func readPending(after version: UInt64, maxBytes: Int) throws -> (changesets: [SyncChangeset], versions: [UInt64], cached: Bool) {
        try store.withMetadata { sql in
            var out = [SyncChangeset]()
            var versions = [UInt64]()
            var cached = true
            var bytes = 0
            for p in try ClientTables.pending(sql, after: version) {
                if !out.isEmpty, bytes + p.bytes > maxBytes { break }
                bytes += p.bytes
                versions.append(p.version)
                if let known = parsedPending[p.version], known.text == p.text {
                    out.append(known.changeset)
                    continue
                }
                cached = false
                var whole: SyncChangeset?
                for part in Self.lines(p.text) {
                    let cs = try EncodedChangeset(stored: part).decode().changeset
                    if whole == nil { whole = cs } else { whole?.instructions += cs.instructions }
                }
                if let whole {
                    out.append(whole)
                    parsedPending[p.version] = (p.text, whole)
                }
            }
            if version == 0, maxBytes == .max {
                // Everything pending was read: forget what was acknowledged or reset since.
                let live = Set(versions)
                parsedPending = parsedPending.filter { live.contains($0.key) }
            }
            return (out, versions, cached)
        }
    }

    /// The index of everything pending (built again only when the pending changesets changed).
    func pendingIndex() throws -> PendingIndex {
        let pending = try readPending(after: 0, maxBytes: .max)
        if pending.cached, let known = pendingIndexCache, known.versions == pending.versions { return known.index }
        let index = PendingIndex(pending.changesets)
        pendingIndexCache = (pending.versions, index)
        return index
    }

    /// Sends the pending changesets the server has not been sent on this connection.
    func upload() throws {
        guard bound, state == .active else { return }
        while true {
            // The pending texts as stored (translated once), a message of up to about 1 MB; a
            // changeset larger than a message travels in parts.
            let batch = try store.withMetadata { sql -> [(version: UInt64, text: String)] in
                var out = [(version: UInt64, text: String)]()
                var bytes = 0
                for p in try ClientTables.pending(sql, after: lastSent, limit: 1000) {
                    if !out.isEmpty, bytes + p.bytes > 1 << 20 { break }
                    bytes += p.bytes
                    out.append((p.version, p.text))
                }
                return out
            }
            guard !batch.isEmpty else { return }
            // Small changesets share a message; the parts of a large one go one per message.
            var group = [WireChangeset]()
            func send() {
                guard !group.isEmpty else { return }
                connection.send(.upload(session: number, changesets: group))
                group = []
            }
            for row in batch {
                let parts = Self.lines(row.text)
                if parts.count == 1 { group.append(.encoded(EncodedChangeset(stored: row.text))); continue }
                send()
                for part in parts {
                    group = [.encoded(EncodedChangeset(stored: part))]
                    send()
                }
            }
            send()
            lastSent = batch.last?.version ?? lastSent
            let total = try store.withMetadata { sql in try ClientTables.pendingBytes(sql) }
            uploadTotal = max(uploadTotal, Int(total))
        }
    }

    /// The lines of a stored pending text (its parts), split on the bytes: a long text is not
    /// walked character by character.
    static func lines(_ text: String) -> [String] {
        text.utf8.split(separator: UInt8(ascii: "\n")).map { String(Substring($0)) }
    }

    /// The largest part of one changeset in one upload message.
    static let partBytes = 4 << 20

    /// A changeset's wire text, or (when larger than `partBytes`) the texts of its parts: the
    /// same `clientVersion` and clock, `"more": true` on all but the last. Each part is encoded
    /// once; a part that comes out too large is halved.
    static func parts(of cs: SyncChangeset) -> [String] {
        @Sendable func encode(_ slice: ArraySlice<SyncInstruction>, more: Bool) -> String {
            var piece = cs
            piece.instructions = Array(slice)
            return EncodedChangeset(piece, more: more).text
        }
        let whole = cs.instructions[...]
        // About 100 bytes an instruction: a first guess of the part size, corrected below.
        let perPart = max(1, partBytes / 100)
        if whole.count <= perPart {
            let text = encode(whole, more: false)
            if text.utf8.count <= partBytes || whole.count == 1 { return [text] }
        }
        var out = [String]()
        var pending = [whole]
        var chunks = [ArraySlice<SyncInstruction>]()
        while let next = pending.popLast() {
            if next.count > perPart {
                let mid = next.startIndex + next.count / 2
                pending.append(next[mid...])
                pending.append(next[..<mid])
            } else {
                chunks.append(next)
            }
        }
        // The parts are encoded on all cores; one that comes out too large is halved here.
        var texts = concurrentMap(chunks.count) { [chunks] i in encode(chunks[i], more: i < chunks.count - 1) }
        var i = 0
        while i < chunks.count {
            let chunk = chunks[i]
            if texts[i].utf8.count > partBytes, chunk.count > 1 {
                let mid = chunk.startIndex + chunk.count / 2
                chunks.replaceSubrange(i...i, with: [chunk[..<mid], chunk[mid...]])
                texts.replaceSubrange(i...i, with: [encode(chunks[i], more: true), encode(chunks[i + 1], more: i + 1 < chunks.count - 1)])
                continue
            }
            out.append(texts[i])
            i += 1
        }
        return out
    }

    func acknowledge(_ version: UInt64) throws {
        try store.write {
            try store.withMetadata { sql in
                try ClientTables.dropPending(sql, through: version)
                try ClientTables.set(sql, "uploadCursor", .int(Int64(version)))
            }
        }
        lastSent = max(lastSent, version)
        lock.withLock {
            uploadedThrough = max(uploadedThrough, version)
            lock.broadcast()
        }
        let left = try store.withMetadata { sql in try ClientTables.pendingBytes(sql) }
        let total = max(uploadTotal, Int(left))
        emit(.progress(direction: "upload", transferred: total - Int(left), transferable: total,
                       estimate: total == 0 ? 1 : Double(total - Int(left)) / Double(total)))
        if left == 0 { uploadTotal = 0 }
        try upload()
    }
}
