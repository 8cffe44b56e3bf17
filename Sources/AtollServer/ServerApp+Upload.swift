import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation
import Synchronization

// Uploads: each changeset checked (order, clock, list elements), integrated with the write
// rules, kept with the storage, acknowledged with what its uploader must be told of it.

extension ServerApp {
    func upload(_ changesets: [WireChangeset], _ s: Session) throws {
        var acked = s.uploadCursor
        var previousVersion: UInt64?
        for item in changesets {
            let decoded = try item.decode()
            var cs = decoded.changeset
            let more = decoded.more
            // One message's changesets go in increasing client versions: one that comes after a
            // newer one would be taken for a changeset integrated before and skipped without a
            // word, so it is refused. (Across messages a client may send again what it sent:
            // one that was killed, or lost an acknowledgement, does.)
            if let previous = previousVersion, cs.clientVersion <= previous {
                s.partial = nil
                throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion) is out of order: after \(previous) in the same upload, "
                                       + "changesets go in increasing client versions")
            }
            previousVersion = cs.clientVersion
            guard cs.clientVersion > s.clientAcked else { continue }
            if cs.clientVersion <= s.uploadCursor {
                // Integrated before its acknowledgement was lost, and with it what the client
                // was to be told of it: the state of its objects now tells it all the same.
                if more { continue }
                try tellOwnState(s, of: cs)
                continue
            }
            try checkClock(cs, s)
            if let refusal = clockAhead(cs, s) {
                s.partial = nil
                return refuse(s.connection, refusal, reason: "clock ahead")
            }
            try checkElements(cs)
            // A large changeset arrives in parts: it is integrated once the last one is in.
            if var partial = s.partial {
                // Taken out of the session first, so that the parts grow in place.
                s.partial = nil
                guard partial.clientVersion == cs.clientVersion else {
                    throw SyncErrorMessage(.badMessage, "changeset \(partial.clientVersion) was not finished before \(cs.clientVersion)")
                }
                guard partial.clock == cs.clock else {
                    throw SyncErrorMessage(.badMessage, "the parts of changeset \(cs.clientVersion) carry different clocks")
                }
                partial.instructions.append(contentsOf: cs.instructions)
                cs.instructions = partial.instructions
            }
            if more {
                guard cs.instructions.count <= 5_000_000 else {
                    s.partial = nil
                    throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion) is too large (over 5,000,000 instructions)")
                }
                s.partial = cs
                continue
            }
            s.partial = nil
            let started = DispatchTime.now().uptimeNanoseconds
            var result = Integration()
            var version = latestVersion
            var effects = EncodedEffects()
            var integratedBefore = false
            try storage.write(self, file: s.file) { cursor in
                // Another instance may have integrated it (the client's connection broke before
                // the acknowledgement came).
                guard cs.clientVersion > cursor else {
                    integratedBefore = true
                    return SyncCommit()
                }
                version = latestVersion
                // A large changeset's text, encoded on another core during integration as though
                // every instruction took effect, as they mostly do.
                let instructions = cs.instructions, clock = cs.clock, next = latestVersion + 1
                let speculative = instructions.count < instructionsWorthAnotherCore ? nil
                    : Eventually { EncodedEffects(instructions, serverVersion: next, clock: clock, onAllCores: false) }
                result = try Integrator(store: store, mayWrite: { [self] cls, keys in try self.mayWrite(s, cls, keys) },
                                        mayWriteAll: { [self] cls in self.mayWriteAll(s, cls) }).integrate(cs)
                var commit = SyncCommit(uploadCursor: (s.file, cs.clientVersion))
                if !result.effects.isEmpty {
                    version = next
                    // The effects are then the instructions: their text was made on the other core.
                    if result.effectsAreTheInstructions, let encoded = speculative?.value() {
                        effects = encoded
                    } else {
                        effects = EncodedEffects(result.effects, serverVersion: version, clock: cs.clock)
                    }
                    commit.entry = HistoryEntry(version: version, file: s.file, clientVersion: cs.clientVersion, clock: cs.clock,
                                                user: s.user.id, changeset: effects.changeset.text)
                }
                // Each object once (an object may both have effects and have changed without one,
                // and PostgreSQL's upsert refuses a row twice in one statement). The effects' order
                // names each object once already: most commits have nothing else.
                if result.changedWithoutEffects.isEmpty {
                    commit.touched = effects.order
                } else {
                    var seen = Set<ObjectID>()
                    commit.touched = (effects.order + result.changedWithoutEffects).filter { seen.insert($0).inserted }
                }
                return commit
            }
            s.uploadCursor = cs.clientVersion
            acked = cs.clientVersion
            if integratedBefore {
                try tellOwnState(s, of: cs)
                continue
            }
            latestVersion = version
            metrics.integrated(seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9, instructions: cs.instructions.count)
            // What the uploader is told of its own changeset (refused writes, corrections) goes
            // in one message with the changeset's acknowledgement, so that it merges it with what
            // it has not uploaded yet, only, and cannot get the one without the other.
            let mail = OwnMail()
            if !result.rejected.isEmpty {
                metrics.update { $0.rejectedWrites += result.rejected.count }
                try compensate(s, result.rejected, clientVersion: cs.clientVersion, into: mail)
            }
            if !result.effects.isEmpty || !result.corrections.isEmpty {
                try fanOut(effects, version: version, clock: cs.clock, origin: s, corrections: result.corrections, mail: mail)
            }
            if !mail.changesets.isEmpty { sendOwn(s, mail, acking: cs.clientVersion) }
        }
        s.clientAcked = max(s.clientAcked, acked)
        s.connection.send(.uploadAck(session: s.number, clientVersion: acked))
    }

    /// What the uploader is told of its own changeset, gathered to go with its acknowledgement:
    /// changesets of already-encoded instructions, each with its clock.
    final class OwnMail {
        var changesets: [(clock: Clock, texts: [String])] = []
        func add(_ clock: Clock, _ texts: [String]) { if !texts.isEmpty { changesets.append((clock, texts)) } }
    }

    /// Sends the uploader what it is told of its changeset `clientVersion`, with the changeset's
    /// acknowledgement (`uploadAck` in the download), at the latest version.
    func sendOwn(_ s: Session, _ mail: OwnMail, acking clientVersion: UInt64) {
        // A session that has not had its view yet gets it whole later: its cursor stays.
        let version = s.ready ? latestVersion : s.downloadCursor
        let changesets = mail.changesets.map {
            WireChangeset.encoded(EncodedChangeset(serverVersion: version, clock: $0.clock, instructions: $0.texts))
        }
        sendDownload(s.connection, ServerMessage.Download(session: s.number, serverVersion: version, changesets: changesets,
                                                          uploadAck: clientVersion))
        s.clientAcked = max(s.clientAcked, clientVersion)
        s.downloadCursor = max(s.downloadCursor, version)
    }

    /// A changeset the client sent again that was integrated already: the state now of every
    /// object it names, with its acknowledgement (what the client was told then is lost).
    func tellOwnState(_ s: Session, of cs: SyncChangeset) throws {
        let mail = OwnMail()
        try fanOut(EncodedEffects(), version: latestVersion, clock: .zero, origin: s, corrections: cs.instructions.objectIDs, mail: mail)
        sendOwn(s, mail, acking: cs.clientVersion)
    }

    /// The refusal of a changeset whose clock is further ahead of the server's wall clock than
    /// `limits.maxClockAheadMilliseconds`; nil when it is not (or there is no limit).
    func clockAhead(_ cs: SyncChangeset, _ s: Session) -> SyncErrorMessage? {
        let limit = limits.maxClockAheadMilliseconds
        guard limit > 0 else { return nil }
        let now = self.now()
        let (bound, overflow) = now.addingReportingOverflow(limit)
        guard !overflow, cs.clock.milliseconds > bound else { return nil }
        let ahead = cs.clock.milliseconds / 1000 - now / 1000
        // Whole seconds until the clock is near enough (the difference fits: both are positive).
        let wait = (cs.clock.milliseconds - bound + 999) / 1000
        return SyncErrorMessage(.clockAhead, "changeset \(cs.clientVersion) has a clock \(ahead) s ahead of the server's (at most \(limit / 1000) s): "
                                + "check the device's clock; the upload is tried again after \(wait) s",
                                session: s.number, retryAfter: wait)
    }

    /// Refuses (`badMessage`) a clock that is not a reading of the client file's own clock: a
    /// negative time or counter, a node that is not positive (a client's node is a random
    /// positive number, docs/protocol.md), a node other than the session's first changeset's, or
    /// a node another user's device used first. A clock borrowed from another device would tie
    /// with that device's writes and name list elements alike.
    func checkClock(_ cs: SyncChangeset, _ s: Session) throws {
        let c = cs.clock
        guard c.milliseconds >= 0, c.counter >= 0, c.node > 0 else {
            throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion): the clock \(c) is not a client's clock (negative, or node 0)")
        }
        if let node = s.node, node != c.node {
            throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion): the clock's node \(c.node) is not this client's (\(node))")
        }
        if s.node == nil {
            // A node is the user's whose device used it first: another user's clocks cannot
            // borrow it (to tie with that device's writes), whatever the session or instance.
            let owner = try storage.claimNode(c.node, user: s.user.id)
            guard owner == s.user.id else {
                throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion): the clock's node \(c.node) is another user's device's")
            }
        }
        s.node = c.node
    }

    /// Refuses (`badMessage`) list element identities newer than their changeset: an insert names
    /// its element by its own transaction's clock, and a clear marks a point it has seen. A
    /// later one would sort before every real insert, or clear inserts not yet made.
    func checkElements(_ cs: SyncChangeset) throws {
        for ins in cs.instructions where ins.op == .listInsert || ins.op == .listClear {
            if let e = ins.element, e.clock > cs.clock {
                throw SyncErrorMessage(.badMessage, "changeset \(cs.clientVersion): a \(ins.op.rawValue) of '\(ins.className)' names element \(e), "
                                       + "newer than the changeset's clock \(cs.clock)")
            }
        }
    }

    /// Whether the session's user may write any object of `cls`, whatever its state: the role's
    /// write rule always allows, and the session's view is the whole class.
    func mayWriteAll(_ s: Session, _ cls: String) -> Bool {
        guard let role = configuration.rules.role(cls, for: s.user), case .always = role.write.kind else { return false }
        return s.views[cls]?.isWholeClass == true
    }

    /// Which of a class's objects (as they are now in the store) the session's user may not
    /// write: primary key text → reason. The write rule and the session's view must both hold.
    func mayWrite(_ s: Session, _ cls: String, _ keys: [Value]) throws -> [ExactText: String] {
        func all(_ reason: String) -> [ExactText: String] {
            Dictionary(keys.map { (exactKey($0), reason) }, uniquingKeysWith: { a, _ in a })
        }
        guard let role = configuration.rules.role(cls, for: s.user) else { return all("no role lets this user write '\(cls)'") }
        var allowed = Set(keys.map(exactKey))
        var out = [ExactText: String]()
        switch role.write.kind {
        case .never: return all("the role '\(role.name)' may not write '\(cls)'")
        case .always: break
        case .query(let text):
            let args = role.write.bound(to: s.user)?.arguments ?? []
            let passing = try matching(cls, ViewQuery(cls, text: text, arguments: args, access: nil), among: keys)
            for k in allowed where !passing.contains(k) { out[k] = "write not allowed by the role '\(role.name)' (\(role.write.source))" }
            allowed = allowed.intersection(passing)
        }
        guard let view = s.views[cls] else {
            for k in allowed { out[k] = "'\(cls)' is outside the session's subscriptions" }
            return out
        }
        // The keys are of objects in the store: a view of the whole class holds them all.
        if view.isWholeClass { return out }
        let visible = try matching(cls, view, among: keys.filter { allowed.contains(exactKey($0)) })
        for k in allowed where !visible.contains(k) { out[k] = "the object is outside the session's subscriptions (or its read rule)" }
        return out
    }

    /// Tells the client which writes were refused, and puts the server's state of them in `mail`.
    func compensate(_ s: Session, _ rejected: [CompensatingWrite], clientVersion: UInt64, into mail: OwnMail) throws {
        let error = SyncErrorMessage(.writeRejected, "\(rejected.count) write(s) refused: " + (rejected.first?.reason ?? ""),
                                     session: s.number, compensatingWrites: rejected, clientVersion: clientVersion)
        metrics.error(error.code.rawValue)
        recentErrors.add(error, user: s.user.id)
        s.connection.send(.error(error))
        var texts = [String]()
        var restored = [ObjectID]()
        for r in rejected {
            let key = keyText(r.primaryKey)
            if let view = s.views[r.className], let doc = try storedObject(r.className, r.primaryKey),
               try matching(r.className, view, among: [r.primaryKey]).contains(ExactText(key)) {
                let meta = try ObjectMetadata.load(store, className: r.className, key: key)
                texts.append(meta.upsert(r.className, r.primaryKey, key, doc).wireText)
                s.inView[r.className, default: []].insert(ExactText(key))
                restored.append(ObjectID(r.className, r.primaryKey))
            } else {
                texts.append(SyncInstruction(.evict, r.className, r.primaryKey).wireText)
                s.inView[r.className]?.remove(ExactText(key))
            }
        }
        // The refused writes may have deleted these objects on the device, and its links to them.
        let refused = Set(rejected.map { ObjectID($0.className, $0.primaryKey) })
        for h in try linkHolders(s, of: restored) where !refused.contains(h) {
            guard let doc = try store.object(h.className, primaryKey: h.primaryKey) else { continue }
            let key = keyText(h.primaryKey)
            texts.append(try ObjectMetadata.load(store, className: h.className, key: key).upsert(h.className, h.primaryKey, key, doc).wireText)
        }
        mail.add(.zero, texts)
    }
}
