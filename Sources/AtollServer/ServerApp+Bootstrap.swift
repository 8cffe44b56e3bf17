import AtollJSON
import AtollProtocol
import AtollStore
import Foundation
import Synchronization

// Bootstrap and resume: how a session gets its view whole (a new subscription set, a new file,
// new rules) and how a returning one catches up.
//
// A bootstrap reads from a snapshot of the store taken on the queue when it starts (a read-only
// handle of its own, whose WAL read transaction pins that version), and reads, encodes and sends
// on a worker thread: the queue goes on integrating everyone's uploads meanwhile. Until it ends,
// the session gets no changesets and its own messages wait in its backlog; when it ends, the
// queue catches the session up from the snapshot's version (`resume`) and then handles the
// backlog in order. So the client sees what it would have seen had the bootstrap run on the
// queue at the snapshot's version, followed by what came after.

/// A bootstrap being read and sent off the queue.
final class BootstrapJob: Sendable {
    /// Set on the queue when the session ends (its connection closed, the app closing): the
    /// job stops at its next page and sends nothing more.
    let cancelled = Atomic<Bool>(false)
    var isCancelled: Bool { cancelled.load(ordering: .relaxed) }
}

/// Where bootstraps run by default: a few at a time on threads of their own, shared fairly among
/// users. A freed worker takes the oldest waiting bootstrap of the user with the fewest running,
/// and among those, of the one whose last start is the oldest (in turn), so a user who starts a
/// hundred at once (a hundred connections) takes no more than its share: another user's waits
/// for one of them at most.
final class BootstrapWorkers: @unchecked Sendable {
    private let threads: DispatchQueue
    private let limit: Int
    private let lock = NSLock()
    /// Each user's waiting bootstraps, oldest first, with the order they came in.
    private var waiting: [String: [(order: Int, work: @Sendable () -> Void)]] = [:]
    private var running: [String: Int] = [:]
    /// When each user with waiting or running bootstraps last started one (in starts).
    private var lastStart: [String: Int] = [:]
    private var active = 0
    private var arrived = 0
    private var starts = 0

    init(name: String, limit: Int = min(8, max(2, ProcessInfo.processInfo.activeProcessorCount))) {
        threads = DispatchQueue(label: name, attributes: .concurrent)
        self.limit = limit
    }

    func run(user: String, _ work: @escaping @Sendable () -> Void) {
        lock.withLock {
            arrived += 1
            waiting[user, default: []].append((arrived, work))
        }
        startWaiting()
    }

    private func startWaiting() {
        while let (user, work) = lock.withLock({ takeNext() }) {
            threads.async { [self] in
                work()
                lock.withLock {
                    active -= 1
                    running[user] = (running[user] ?? 1) - 1
                    if running[user] == 0 {
                        running[user] = nil
                        if waiting[user] == nil { lastStart[user] = nil }
                    }
                }
                startWaiting()
            }
        }
    }

    /// The next bootstrap to start, if a worker is free (under the lock).
    private func takeNext() -> (String, @Sendable () -> Void)? {
        guard active < limit else { return nil }
        var best: (user: String, rank: (Int, Int, Int))?
        for (user, jobs) in waiting {
            guard let first = jobs.first else { continue }
            let rank = (running[user] ?? 0, lastStart[user] ?? 0, first.order)
            if let b = best, b.rank <= rank { continue }
            best = (user, rank)
        }
        guard let user = best?.user, let job = waiting[user]?.removeFirst() else { return nil }
        if waiting[user]?.isEmpty == true { waiting[user] = nil }
        active += 1
        starts += 1
        running[user, default: 0] += 1
        lastStart[user] = starts
        return (user, job.work)
    }
}

extension ServerApp {
    /// What a session had before a new subscription set, put back if the set's views fail.
    struct QueryState {
        var subscriptions: [SubscriptionQuery]
        var version: Int64
        var views: [String: ViewQuery]
        var ready: Bool
    }

    /// What a bootstrap's worker is given: nothing of the session but its number and connection
    /// (both fixed), and a store handle of its own.
    private struct BootstrapWork: @unchecked Sendable {
        let job: BootstrapJob
        let number: Int64
        let connection: SyncConnection
        let views: [(cls: String, pkName: String, view: ViewQuery)]
        let queryVersion: Int64
        /// The version the snapshot holds: what the bootstrap's downloads say they bring.
        let serverVersion: UInt64
        let reader: Store
        let maxDownloadBytes: Int
    }

    private enum BootstrapOutcome {
        /// Sent: the objects the client now holds, by class (primary key texts).
        case sent(held: [String: Set<ExactText>], objects: Int, bytes: Int)
        /// A view failed to evaluate before anything was sent.
        case refused(AtollError)
        /// Failed after something was sent, or cancelled.
        case failed(Error)
    }

    /// Starts sending the session its views whole (`version` is the subscription set's), as the
    /// store is now. With `previous`, a view that fails to evaluate (too costly) refuses the set
    /// and puts `previous` back; without it (partition sync, new rules) it ends the session.
    func startBootstrap(_ s: Session, version: Int64, previous: QueryState? = nil) throws {
        guard s.bootstrap == nil else {
            // One at a time: the client reads a bootstrap's batches as one whole.
            s.bootstrapAgain = true
            return
        }
        var views = [(cls: String, pkName: String, view: ViewQuery)]()
        for (cls, view) in s.views.sorted(by: { $0.key < $1.key }) {
            guard let pkName = schema.classes.first(where: { $0.name == cls })?.primaryKey else { continue }
            views.append((cls, pkName, view))
        }
        // Opened here, on the queue: its snapshot is the store at `latestVersion`.
        let reader = try Store(Configuration(path: path, readOnly: true))
        let job = BootstrapJob()
        s.bootstrap = job
        s.ready = false
        let work = BootstrapWork(job: job, number: s.number, connection: s.connection, views: views, queryVersion: version,
                                 serverVersion: latestVersion, reader: reader, maxDownloadBytes: maxDownloadBytes)
        let session = UncheckedSession(s)
        bootstrapsRunning.enter()
        bootstrapRunner(s.user.id) { [self] in
            defer { bootstrapsRunning.leave() }
            let started = DispatchTime.now().uptimeNanoseconds
            let outcome = readAndSend(work)
            reader.close()
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            queue.sync { finishBootstrap(session.value, work, outcome, seconds: seconds, previous: previous) }
        }
    }

    /// Ends a bootstrap on the queue: the session is caught up from the snapshot's version and
    /// its backlog handled, or its set refused, or the session dropped.
    private func finishBootstrap(_ s: Session, _ work: BootstrapWork, _ outcome: BootstrapOutcome, seconds: Double,
                                 previous: QueryState?) {
        guard !isClosed, s.bootstrap === work.job else { return }
        s.bootstrap = nil
        chargeBootstrap(s.user.id, seconds: seconds)
        // A session that ended meanwhile (unbound, its connection closed) is gone.
        guard !work.job.isCancelled, sessions[ObjectIdentifier(s.connection)]?[s.number] === s else { return }
        switch outcome {
        case let .sent(held, objects, bytes):
            metrics.update { c in
                c.bootstraps += 1
                c.bootstrapObjects += objects
                c.bootstrapBytes += bytes
            }
            log.debug("bootstrapped", ["app": configuration.id, "session": "\(s.number)", "objects": "\(objects)", "bytes": "\(bytes)",
                                       "seconds": String(format: "%.3f", seconds)])
            s.inView = held
            s.downloadCursor = work.serverVersion
            s.ready = true
            s.connection.send(.queryComplete(session: s.number, version: work.queryVersion, serverVersion: work.serverVersion))
            do {
                // What was integrated while the bootstrap ran.
                if latestVersion > work.serverVersion { try resume(s, from: work.serverVersion, known: held) }
            } catch {
                drop(s, because: error, while: "catching it up after its bootstrap")
                return
            }
        case .refused(let failure):
            if failure.code == .timeout { cooldowns[s.user.id] = DispatchTime.now().uptimeNanoseconds + UInt64(configuration.queryLimits.cooldownSeconds * 1e9) }
            guard let previous else {
                drop(s, because: failure, while: "sending it its view's objects")
                return
            }
            (s.subscriptions, s.queryVersion, s.views) = (previous.subscriptions, previous.version, previous.views)
            refuseQuery(s, version: work.queryVersion, "the subscriptions as a whole: \(failure.message)")
            if previous.ready {
                // It got no changesets while its set was tried: what it missed comes now.
                do { try resume(s, from: s.downloadCursor) } catch {
                    drop(s, because: error, while: "catching it up")
                    return
                }
            }
        case .failed(let error):
            if (error as? AtollError)?.code == .timeout {
                cooldowns[s.user.id] = DispatchTime.now().uptimeNanoseconds + UInt64(configuration.queryLimits.cooldownSeconds * 1e9)
            }
            drop(s, because: error, while: "sending it its subscriptions' objects")
            return
        }
        if s.bootstrapAgain {
            // The rules changed while it ran: the view is sent again under the new ones.
            s.bootstrapAgain = false
            do { try startBootstrap(s, version: max(s.queryVersion, 0)) } catch {
                drop(s, because: error, while: "sending it its view under new rules")
                return
            }
        }
        handleBacklog(s)
    }

    /// Handles the messages that waited for the session's bootstrap, in order, until one starts
    /// another bootstrap (the rest wait for that one). As when they arrive (`SyncConnection`),
    /// nothing more of a connection refused meanwhile, or whose token expired, is handled.
    func handleBacklog(_ s: Session) {
        while s.bootstrap == nil, !s.backlog.isEmpty {
            let (message, bytes) = s.backlog.removeFirst()
            s.connection.pendingBytes.subtract(bytes, ordering: .relaxed)
            releaseBacklog(s, bytes)
            guard !s.connection.throttled, !s.connection.endIfExpired() else { continue }
            handle(message, from: s.connection)
        }
    }

    /// Adds to what a user's bootstraps took lately (`bootstrapSecondsPerMinute`).
    func chargeBootstrap(_ user: String, seconds: Double) {
        bootstrapTime[user] = (bootstrapOwed(user) + seconds, DispatchTime.now().uptimeNanoseconds)
    }

    /// Stops every bootstrap (the app is closing); their sessions send nothing more.
    func cancelBootstraps() {
        for s in sessions.values.flatMap(\.values) { s.bootstrap?.cancelled.store(true, ordering: .relaxed) }
    }

    /// The worker's part: each view counted (a view too costly to evaluate fails here, before
    /// anything is sent), then its objects read, encoded and sent a page at a time, so that the
    /// client reads the first batches while the next are made. Touches nothing of the app but
    /// its metrics and log.
    private func readAndSend(_ work: BootstrapWork) -> BootstrapOutcome {
        var results = [(cls: String, pkName: String, results: Results)]()
        var total = 0
        do {
            for (cls, pkName, view) in work.views {
                let r = try view.results(work.reader, cls)
                total += try r.count()
                results.append((cls, pkName, r))
            }
        } catch let failure as AtollError where [.queryInvalid, .querySyntax, .timeout, .typeMismatch, .noSuchProperty].contains(failure.code) {
            return .refused(failure)
        } catch {
            return .failed(error)
        }
        let limit = work.maxDownloadBytes
        var held = [String: Set<ExactText>]()
        var sent = 0
        var bytes = 0
        var batch = [String]()
        var batchObjects = 0
        var batchBytes = 0
        // What the client does not read waits in its connection's queue, bounded per connection
        // and per user (`maxQueuedBytes`, `maxQueuedBytesPerUser`): past them it is dropped. (A
        // worker waiting for a client to read would be a worker a silent client takes away.)
        func flush(last: Bool) {
            sent += batchObjects
            let changeset = EncodedChangeset(serverVersion: work.serverVersion, clock: .zero, instructions: batch)
            let progress = ServerMessage.Bootstrap(queryVersion: work.queryVersion, sent: Int64(sent), total: Int64(max(total, sent)), last: last)
            bytes += sendDownload(work.connection, ServerMessage.Download(session: work.number, serverVersion: work.serverVersion,
                                                                          changesets: [.encoded(changeset)], bootstrap: progress))
            batch = []
            batchObjects = 0
            batchBytes = 0
        }
        func add(_ upserts: ArraySlice<SyncInstruction>, _ pkName: String) throws {
            for (value, range) in SyncInstruction.groupedWireValues(upserts, primaryKey: pkName) {
                let text = Wire.encode(value)
                // A group of large objects is split until it fits a message with room to spare.
                if text.utf8.count > limit / 2, range.count > 1 {
                    let mid = range.lowerBound + range.count / 2
                    try add(upserts[range.lowerBound..<mid], pkName)
                    try add(upserts[mid..<range.upperBound], pkName)
                    continue
                }
                // Messages of a quarter of the limit: the client reads one while the next is made.
                if batchBytes + text.utf8.count > limit / 4, !batch.isEmpty { flush(last: false) }
                batch.append(text)
                batchObjects += range.count
                batchBytes += text.utf8.count
            }
        }
        do {
            for (cls, pkName, r) in results {
                var keys = Set<ExactText>()
                var offset = 0
                while true {
                    if work.job.isCancelled { throw CancellationError() }
                    let docs = try r.documents(offset: offset, limit: Self.bootstrapPage)
                    if docs.isEmpty { break }
                    offset += docs.count
                    let meta = try ObjectMetadata.load(work.reader, className: cls, keys: docs.compactMap { $0[pkName] })
                    var upserts = [SyncInstruction]()
                    upserts.reserveCapacity(docs.count)
                    for doc in docs {
                        guard let pk = doc[pkName] else { continue }
                        let key = keyText(pk)
                        keys.insert(ExactText(key))
                        upserts.append(meta.upsert(cls, pk, key, doc))
                    }
                    try add(upserts[...], pkName)
                    if docs.count < Self.bootstrapPage { break }
                }
                held[cls] = keys
            }
            flush(last: true)
        } catch {
            return .failed(error)
        }
        return .sent(held: held, objects: sent, bytes: bytes)
    }

    /// Catches a returning client up: every object changed since its cursor by others is sent
    /// whole if it is in the view now, evicted if not. `known` is what the client holds (by
    /// class, primary key texts) when the server knows it, right after a bootstrap: only the
    /// changed objects' place in the view is then looked up, not the whole view's.
    func resume(_ s: Session, from cursor: UInt64, known: [String: Set<ExactText>]? = nil) throws {
        var touched = [ObjectID]()
        var seen = Set<ObjectID>()
        for entry in try storage.history(after: cursor, excludingFile: s.file) {
            let cs = try SyncChangeset(wire: try EJSON.parse(entry.changeset))
            for id in cs.instructions.objectIDs where seen.insert(id).inserted { touched.append(id) }
        }
        var held = [String: Set<ExactText>]()
        if let known {
            let changed = Dictionary(touched.keysByClass.map { ($0.className, $0.keys) }, uniquingKeysWith: +)
            for (cls, view) in s.views {
                var h = known[cls] ?? []
                if let keys = changed[cls] {
                    for k in keys { h.remove(exactKey(k)) }
                    h.formUnion(try matching(cls, view, among: keys))
                }
                held[cls] = h
            }
        } else {
            for (cls, view) in s.views { held[cls] = try matching(cls, view) }
        }
        var texts = [String]()
        var metas = [String: ObjectMetadata]()
        var upserted = [ObjectID]()
        s.inView = held
        // What left the view (or never was in it): the device may hold some of it. Only objects
        // the user may read are named; for the others, the device is told instead which objects
        // of their class the view holds (`keep`), and removes the rest itself.
        let subscribed = Set(s.subscriptions.map(\.className))
        var outside = [String: [Value]]()
        for id in touched where subscribed.contains(id.className) {
            let key = keyText(id.primaryKey)
            if held[id.className]?.contains(ExactText(key)) == true, let doc = try store.object(id.className, primaryKey: id.primaryKey) {
                let meta = try metas[id.className] ?? ObjectMetadata.load(store, className: id.className)
                metas[id.className] = meta
                texts.append(meta.upsert(id.className, id.primaryKey, key, doc).wireText)
                upserted.append(id)
            } else {
                outside[id.className, default: []].append(id.primaryKey)
            }
        }
        let access = readAccess(s.user)
        for (cls, keys) in outside.sorted(by: { $0.key < $1.key }) {
            let readable: Set<ExactText> = access.rule(cls) == .nothing ? []
                : try matching(cls, ViewQuery(cls, text: "TRUEPREDICATE", arguments: [], access: access), among: keys)
            if access.rule(cls) == .everything || keys.allSatisfy({ readable.contains(exactKey($0)) }) {
                for pk in keys { texts.append(SyncInstruction(.evict, cls, pk).wireText) }
            } else {
                var keep = SyncInstruction(.keep, cls, .null)
                keep.value = .list(try s.views[cls].map { try $0.results(store, cls).primaryKeyValues() } ?? [])
                texts.append(keep.wireText)
            }
        }
        // What the client holds that links to what it is sent (its links read as none while
        // those were missing).
        let sent = Set(touched)
        for h in try linkHolders(s, of: upserted) where !sent.contains(h) {
            guard let doc = try store.object(h.className, primaryKey: h.primaryKey) else { continue }
            let key = keyText(h.primaryKey)
            texts.append(try ObjectMetadata.load(store, className: h.className, key: key).upsert(h.className, h.primaryKey, key, doc).wireText)
        }
        // Split into messages; only the last moves the client's cursor to the latest version.
        var batches = [[String]]()
        var current = [String]()
        var size = 0
        for t in texts {
            if size + t.utf8.count > maxDownloadBytes, !current.isEmpty { batches.append(current); current = []; size = 0 }
            current.append(t)
            size += t.utf8.count
        }
        batches.append(current)
        let downloadable = texts.reduce(0) { $0 + $1.utf8.count }
        var downloaded = 0
        for (i, batch) in batches.enumerated() {
            downloaded += batch.reduce(0) { $0 + $1.utf8.count }
            let last = i == batches.count - 1
            send(s, serverVersion: last ? latestVersion : cursor, clock: .zero, instructions: batch,
                 progress: ServerMessage.Progress(downloaded: Int64(downloaded), downloadable: Int64(downloadable)))
        }
        s.inView = held
        s.ready = true
        s.downloadCursor = latestVersion
    }

    /// Sends one `download` with one changeset of already-encoded instructions; returns its size.
    @discardableResult
    func send(_ s: Session, serverVersion: UInt64, clock: Clock, instructions: [String], progress: ServerMessage.Progress? = nil) -> Int {
        let changeset = EncodedChangeset(serverVersion: serverVersion, clock: clock, instructions: instructions)
        return sendDownload(s.connection, ServerMessage.Download(session: s.number, serverVersion: serverVersion,
                                                                 changesets: [.encoded(changeset)], progress: progress))
    }

    /// Sends a `download` (from any thread), counted in the metrics; returns its size.
    @discardableResult
    func sendDownload(_ connection: SyncConnection, _ download: ServerMessage.Download) -> Int {
        let bytes = connection.send(.download(download))
        metrics.update { c in
            c.downloads += 1
            c.downloadBytes += bytes
        }
        return bytes
    }
}

/// Carries a session (queue-confined) through a bootstrap's worker, which only hands it back to
/// the queue.
private struct UncheckedSession: @unchecked Sendable {
    let value: Session
    init(_ value: Session) { self.value = value }
}
