import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation
import Synchronization

// Fan-out: what one integrated changeset changed in each ready session's view, sent as it was
// integrated where possible, with the objects that entered or left the view.

extension ServerApp {
    /// The objects the session holds that link to any of `targets` (a link, or a list of links):
    /// those to send again when the targets come (back) to the device.
    func linkHolders(_ s: Session, of targets: [ObjectID]) throws -> [ObjectID] {
        var out = [ObjectID]()
        var seen = Set(targets)
        for (cls, keys) in targets.keysByClass {
            guard let pkName = schema.classes.first(where: { $0.name == cls })?.primaryKey else { continue }
            for h in schema.classes where !h.isEmbedded && h.primaryKey != nil && s.views[h.name] != nil {
                let held = s.inView[h.name] ?? []
                guard !held.isEmpty else { continue }
                for p in h.properties where p.type == .object && p.objectType == cls && (p.collection == .single || p.isList) {
                    let path = "\(p.name).\(pkName)"
                    let query = p.collection == .single ? "\(path) IN $0" : "ANY \(path) IN $0"
                    for key in try store.objects(h.name, where: query, [.list(keys)]).primaryKeyValues() where held.contains(exactKey(key)) {
                        let id = ObjectID(h.name, key)
                        if seen.insert(id).inserted { out.append(id) }
                    }
                }
            }
        }
        return out
    }

    /// The object a refused write named, as stored; nil when there is none, also when the key
    /// cannot name one (of the wrong type for the class: the client gets an evict for it).
    func storedObject(_ cls: String, _ key: Value) throws -> Document? {
        do {
            return try store.object(cls, primaryKey: key)
        } catch let error as AtollError where error.code == .typeMismatch || error.code == .invalidArgument {
            return nil
        }
    }

    /// Sends each ready session what one integrated changeset changed in its view.
    /// `origin` is the uploading session (nil for an edit made in the admin console);
    /// `originFile` names the uploading client file when it uploaded through another instance.
    /// The origin gets what it does not know of its own changeset: the objects in `corrections`
    /// (their state now), and objects that entered its view without its creating them.
    func fanOut(_ effects: EncodedEffects, version: UInt64, clock: Clock, origin: Session?, originFile: Int64? = nil,
                corrections: [ObjectID] = [], mail: OwnMail? = nil) throws {
        let order = effects.order
        var keysByClass = [String: [Value]]()
        for id in order { keysByClass[id.className, default: []].append(id.primaryKey) }
        // Which touched objects exist now, per class.
        var live = [String: Set<ExactText>]()
        for (cls, keys) in keysByClass {
            live[cls] = try matching(cls, ViewQuery(cls, text: "TRUEPREDICATE", arguments: [], access: nil), among: keys)
        }
        let keys = order.map { exactKey($0.primaryKey) }
        let correct = Set(corrections)
        // The objects the effects name, made once and only when needed (a large changeset's are many).
        var namedSet: Set<ObjectID>?
        func named() -> Set<ObjectID> {
            if let namedSet { return namedSet }
            let made = Set(order)
            namedSet = made
            return made
        }
        // Sessions with the same view share one query.
        var cache = [String: [ViewQuery: Set<ExactText>]]()
        var metas = [String: ObjectMetadata]()
        var objectTexts = [Int: [String]]()
        func upsertText(_ cls: String, _ id: ObjectID, _ exact: ExactText) throws -> String? {
            let key = exact.text
            guard let doc = try store.object(cls, primaryKey: id.primaryKey) else { return nil }
            // Loaded once for the class's objects in the effects; an object corrected without
            // an effect of its own is loaded alone.
            let meta: ObjectMetadata
            if let known = metas[cls], known.created[exact] != nil {
                meta = known
            } else if metas[cls] == nil, keysByClass[cls]?.contains(id.primaryKey) == true {
                meta = try ObjectMetadata.load(store, className: cls, keys: keysByClass[cls] ?? [])
                metas[cls] = meta
            } else {
                meta = try ObjectMetadata.load(store, className: cls, key: key)
            }
            return meta.upsert(cls, id.primaryKey, key, doc).wireText
        }
        // One session's failure (its view's query, its socket) is its own: the others get the
        // changeset all the same, and the uploader is not told of an error for a write that was kept.
        func deliver(_ s: Session) throws {
            let isOrigin = s === origin || (originFile != nil && s.file == originFile)
            // What the session gets: objects' instructions as integrated, or other texts.
            var out = [Piece]()
            var whole = 0
            // The origin's objects that are gone, each told at its erase's clock.
            var gone = [ObjectID]()
            // Objects the session is sent whole that it may not have had: what it holds that
            // links to them comes too (its links to them read as none while they were missing).
            var entered = [ObjectID]()
            // The session's view of a class, which touched objects of the class exist, which it
            // holds and which it may see (all that exist, for a view of the whole class): looked
            // up once for each run of a class's objects, the held objects taken out of the
            // session while the run lasts.
            var runClass: String?
            var inView = false
            var existing = Set<ExactText>(), visible = Set<ExactText>()
            var wholeClass = false
            var held = Set<ExactText>()
            func endRun() {
                if let runClass, inView, !held.isEmpty { s.inView[runClass] = held }
                held = []
            }
            do {
                defer { endRun() }
                for (index, id) in order.enumerated() {
                    let cls = id.className
                    if runClass != cls {
                        endRun()
                        runClass = cls
                        inView = false
                        guard let view = s.views[cls] else { continue }
                        existing = live[cls] ?? []
                        wholeClass = view.isWholeClass
                        if wholeClass {
                            visible = []
                        } else if let known = cache[cls]?[view] { visible = known } else {
                            visible = try matching(cls, view, among: keysByClass[cls] ?? [])
                            cache[cls, default: [:]][view] = visible
                        }
                        held = s.inView.removeValue(forKey: cls) ?? []
                        held.reserveCapacity(held.count + (keysByClass[cls]?.count ?? 0))
                        inView = true
                    }
                    guard inView else { continue }
                    let key = keys[index]
                    if !existing.contains(key) {
                        let wasHeld = held.remove(key) != nil
                        if isOrigin {
                            if correct.contains(id) { gone.append(id) }
                        } else if wasHeld {
                            out.append(.text(SyncInstruction(.erase, cls, id.primaryKey).wireText))
                        }
                        continue
                    }
                    if wholeClass || visible.contains(key) {
                        if isOrigin {
                            // Its own new objects it has; anything else it may lack, or hold
                            // otherwise than the server.
                            if correct.contains(id) || (!held.contains(key) && !effects.createdObject(at: index)),
                               let text = try upsertText(cls, id, key) {
                                out.append(.text(text))
                                entered.append(id)
                            }
                            held.insert(key)
                        } else if held.contains(key) {
                            out.append(.integrated(index))
                            whole += 1
                        } else if effects.createdObject(at: index) {
                            // Created by this changeset (a create is an effect only when it made the
                            // object): its instructions are the whole object.
                            out.append(.integrated(index))
                            whole += 1
                            held.insert(key)
                        } else if let text = try upsertText(cls, id, key) {
                            out.append(.text(text))
                            held.insert(key)
                            entered.append(id)
                        }
                    } else if held.remove(key) != nil || (isOrigin && correct.contains(id)) {
                        out.append(.text(SyncInstruction(.evict, cls, id.primaryKey).wireText))
                    }
                }
            }
            if isOrigin, !corrections.isEmpty {
                // Corrected objects the effects do not name (none of the origin's instructions on
                // them took effect as written).
                let named = named()
                for id in corrections where !named.contains(id) {
                    let cls = id.className, key = exactKey(id.primaryKey)
                    guard let view = s.views[cls] else { continue }
                    var held = s.inView[cls] ?? []
                    defer { s.inView[cls] = held }
                    guard try store.object(cls, primaryKey: id.primaryKey) != nil else {
                        held.remove(key)
                        gone.append(id)
                        continue
                    }
                    if try view.isWholeClass || matching(cls, view, among: [id.primaryKey]).contains(key) {
                        if let text = try upsertText(cls, id, key) {
                            out.append(.text(text))
                            entered.append(id)
                        }
                        held.insert(key)
                    } else {
                        held.remove(key)
                        out.append(.text(SyncInstruction(.evict, cls, id.primaryKey).wireText))
                    }
                }
            }
            if isOrigin { try tellGone(s, gone, version: version, mail: mail) }
            if !entered.isEmpty {
                // Named in the changeset or not: its instructions there do not bring back its
                // links to what entered.
                for h in try linkHolders(s, of: entered) {
                    if let text = try upsertText(h.className, h, exactKey(h.primaryKey)) { out.append(.text(text)) }
                }
            }
            guard !out.isEmpty else { return }
            if isOrigin, let mail {
                // Goes with the changeset's acknowledgement.
                mail.add(clock, out.flatMap { piece -> [String] in
                    switch piece {
                    case .integrated(let index): return effects.texts(ofObjectAt: index)
                    case .text(let t): return [t]
                    }
                })
                s.downloadCursor = version
                return
            }
            let everything = whole == order.count && !order.isEmpty
            if everything, effects.bytes <= maxDownloadBytes {
                // Everything, as integrated: the history's text.
                sendChangeset(s, serverVersion: version, effects.changeset)
            } else {
                // Everything: the history's pieces; some: each object's own texts.
                let texts = everything ? effects.pieces : out.flatMap { piece -> [String] in
                    switch piece {
                    case .integrated(let index):
                        if let known = objectTexts[index] { return known }
                        let t = effects.texts(ofObjectAt: index)
                        objectTexts[index] = t
                        return t
                    case .text(let t): return [t]
                    }
                }
                // In messages of at most maxDownloadBytes; only the last moves the client's
                // cursor, so that a cut in between sends the whole again.
                var batch = [String]()
                var size = 0
                for t in texts {
                    if size + t.utf8.count > maxDownloadBytes, !batch.isEmpty {
                        send(s, serverVersion: s.downloadCursor, clock: clock, instructions: batch)
                        batch = []
                        size = 0
                    }
                    batch.append(t)
                    size += t.utf8.count
                }
                send(s, serverVersion: version, clock: clock, instructions: batch)
            }
            s.downloadCursor = version
        }
        for s in sessions.values.flatMap(\.values) where s.ready {
            do { try deliver(s) } catch { drop(s, because: error, while: "sending it a changeset") }
        }
    }

    /// Ends a session whose work failed: its client is told why and its connection closes (the
    /// client connects again and gets what it missed). Only that user's connection is touched.
    func drop(_ s: Session, because error: Error, while doing: String) {
        let message = (error as? SyncErrorMessage)?.message ?? "\(error)"
        log.error("a session failed", ["app": configuration.id, "user": s.user.id, "session": "\(s.number)", "while": doing, "error": message])
        var failure = (error as? SyncErrorMessage) ?? SyncErrorMessage(.internalServerError, "the server failed while \(doing): \(message)")
        failure.session = s.number
        s.ready = false
        refuse(s.connection, failure, reason: "a session failed")
    }

    /// Tells a session that objects it may hold are gone: an erase at each one's erase clock (so
    /// that its own newer create of it stands), or an eviction when the server never had it.
    func tellGone(_ s: Session, _ ids: [ObjectID], version: UInt64, mail: OwnMail? = nil) throws {
        for id in ids {
            let erased = try ServerSyncTables(store: store).record(id.className, keyText(id.primaryKey))?.erased
            let ins = SyncInstruction(erased == nil ? .evict : .erase, id.className, id.primaryKey)
            if let mail { mail.add(erased ?? .zero, [ins.wireText]) } else {
                send(s, serverVersion: version, clock: erased ?? .zero, instructions: [ins.wireText])
            }
        }
    }

    /// An integrated changeset's effects grouped by object, in the order of each object's first
    /// effect, and encoded once (docs/protocol.md: new objects fold into `creates` groups) in
    /// pieces of about `pieceBytes`: the history's text, and the download of every session that
    /// gets all of them. The texts of single objects are made only for a session that gets some
    /// of the objects and not all.
    struct EncodedEffects {
        /// The objects, in order.
        private(set) var order: [ObjectID] = []
        /// The effects with each object's together, and the range of each object's (as `order`).
        private var grouped: [SyncInstruction] = []
        private var ranges: [Range<Int>] = []
        /// The texts of runs of objects, in order: the history's instructions, comma-separated.
        private(set) var pieces: [String] = []
        /// The size of all the pieces.
        private(set) var bytes = 0
        /// The changeset, encoded as the history keeps it.
        private(set) var changeset = EncodedChangeset(stored: "")

        init() {}

        /// The effects of a changeset as the history keeps it.
        init(changeset text: String) throws {
            let cs = try EncodedChangeset(stored: text).decode().changeset
            self.init(cs.instructions, serverVersion: cs.serverVersion, clock: cs.clock)
        }

        /// `onAllCores`: the pieces are encoded on all cores (not when this runs beside the work
        /// that waits for it).
        init(_ effects: [SyncInstruction], serverVersion: UInt64, clock: Clock, pieceBytes: Int = 1 << 18, onAllCores: Bool = true) {
            // Runs of one object's instructions; an object seen again after another's run makes
            // the effects interleaved, and they are regrouped.
            var position = [ObjectID: Int]()
            var runs = [(object: Int, range: Range<Int>)]()
            var interleaved = false
            var start = effects.startIndex
            while start < effects.endIndex {
                var end = start + 1
                while end < effects.endIndex, effects[end].sameObject(as: effects[start]) { end += 1 }
                let id = effects[start].objectID
                if let p = position[id] {
                    runs.append((p, start..<end))
                    interleaved = true
                } else {
                    position[id] = order.count
                    order.append(id)
                    runs.append((order.count - 1, start..<end))
                }
                start = end
            }
            if interleaved {
                var offset = 0
                var byObject = [[Range<Int>]](repeating: [], count: order.count)
                for run in runs { byObject[run.object].append(run.range) }
                grouped.reserveCapacity(effects.count)
                for objectRuns in byObject {
                    for r in objectRuns { grouped += effects[r] }
                    ranges.append(offset..<grouped.count)
                    offset = grouped.count
                }
            } else {
                grouped = effects
                ranges = runs.map(\.range)
            }
            // Pieces: runs of objects of about 4,096 instructions, encoded on all cores, each
            // halved while too large.
            var spans = [Range<Int>]()
            var first = 0
            while first < order.count {
                var last = first
                while last + 1 < order.count, ranges[last + 1].upperBound - ranges[first].lowerBound <= 4_096 { last += 1 }
                spans.append(first..<last + 1)
                first = last + 1
            }
            let grouped = self.grouped, ranges = self.ranges
            @Sendable func encode(_ objects: Range<Int>) -> String {
                SyncInstruction.wireValues(grouped[ranges[objects.lowerBound].lowerBound..<ranges[objects.upperBound - 1].upperBound])
                    .map(Wire.encode).joined(separator: ",")
            }
            let texts = onAllCores ? concurrentMap(spans.count) { [spans] in encode(spans[$0]) } : spans.map(encode)
            for (span, encoded) in zip(spans, texts) {
                var todo = [(span, encoded)]
                while let (objects, text) = todo.popLast() {
                    if text.utf8.count > pieceBytes, objects.count > 1 {
                        let halves = [objects.lowerBound..<objects.lowerBound + objects.count / 2,
                                      objects.lowerBound + objects.count / 2..<objects.upperBound]
                        todo += halves.reversed().map { ($0, encode($0)) }
                        continue
                    }
                    pieces.append(text)
                    bytes += text.utf8.count + 1
                }
            }
            changeset = EncodedChangeset(serverVersion: serverVersion, clock: clock, instructions: pieces)
        }

        /// Whether the effects of the object at `index` (in `order`) created it.
        func createdObject(at index: Int) -> Bool { grouped[ranges[index].lowerBound].op == .create }

        /// The texts of the object at `index` (in `order`) alone.
        func texts(ofObjectAt index: Int) -> [String] { SyncInstruction.wireValues(grouped[ranges[index]]).map(Wire.encode) }
    }

    /// A part of a session's download: an object's instructions as integrated, or a text.
    enum Piece {
        /// The object at this index of the effects' order.
        case integrated(Int)
        case text(String)
    }

    /// Sends one `download` of one whole encoded changeset.
    func sendChangeset(_ s: Session, serverVersion: UInt64, _ changeset: EncodedChangeset) {
        sendDownload(s.connection, ServerMessage.Download(session: s.number, serverVersion: serverVersion, changesets: [.encoded(changeset)]))
    }
}
