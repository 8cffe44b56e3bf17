import Foundation

// The observing API: realm, results, object and collection observers, host-driven delivery,
// and the change-log plumbing that delivery and pruning share.

extension Store {
    // MARK: - Observing

    /// Calls `callback` after commits (of this handle, another handle or another process),
    /// once per delivery, with the versions and classes the delivery covers.
    /// - Throws: `.closed`, `.alreadyInWrite` (observers are registered outside write
    ///   transactions, as in Realm).
    public func observe(_ callback: @escaping @Sendable (RealmChange) -> Void) throws -> NotificationToken {
        try register { _, token in
            let observer = RealmObserver(token: token, callback: callback)
            observer.version = viewVersion
            return observer
        }
    }

    /// Calls `callback` after commits, as `observe` does, with the version the store reached and
    /// nothing else: the change log is not read, so a large commit costs this observer nothing.
    /// What the sync client listens with for local writes to upload.
    /// - Throws: `.closed`, `.alreadyInWrite`.
    public func observeCommits(_ callback: @escaping @Sendable (UInt64) -> Void) throws -> NotificationToken {
        try register { _, token in
            let observer = CommitObserver(token: token, callback: callback)
            observer.version = viewVersion
            return observer
        }
    }

    /// Calls `callback` when the object changes (only in `keyPaths` when given, e.g.
    /// `["name", "dogs.name"]`) or is deleted; after a deletion it is not called again.
    /// - Parameter primaryKey: the object's primary key (its row key for classes without one).
    /// - Throws: `.noSuchClass`, `.notFound`, `.invalidArgument` (a bad key path), `.closed`,
    ///   `.alreadyInWrite`.
    public func observeObject(_ className: String, primaryKey: Value, keyPaths: [String]? = nil,
                              _ callback: @escaping @Sendable (ObjectChange) -> Void) throws -> NotificationToken {
        try register { conn, token in
            let (info, rowKey, reference) = try observedObject(className, primaryKey, conn)
            guard info.primaryKey != nil || !info.schema.isEmbedded,
                  let document = try readObject(info, rowKey, conn) else {
                throw AtollError(.notFound, "no \(className) with primary key \(primaryKey.shortDescription)")
            }
            let tree = try KeyPathTree.parse(keyPaths, root: info.schema, schema: schema)
            let observer = ObjectObserver(token: token, info: info, reference: reference, rowKey: rowKey,
                                          document: document, tree: tree, callback: callback)
            observer.version = viewVersion
            return observer
        }
    }

    /// Calls `callback` with the initial state of a list, set or dictionary property, then
    /// after each delivery that changed it (its elements, or what `keyPaths` names on the
    /// objects it links to: all their properties when nil).
    /// - Throws: `.noSuchClass`, `.noSuchProperty`, `.notFound`, `.invalidArgument`
    ///   (not a collection, a bad key path), `.closed`, `.alreadyInWrite`.
    public func observeCollection(_ className: String, primaryKey: Value, property: String, keyPaths: [String]? = nil,
                                  _ callback: @escaping @Sendable (CollectionChange) -> Void) throws -> NotificationToken {
        try register { conn, token in
            let (info, rowKey, reference) = try observedObject(className, primaryKey, conn)
            guard let p = info.schema[property: property] else {
                throw AtollError(.noSuchProperty, "class '\(className)' has no property '\(property)'")
            }
            guard p.isCollection, !p.isComputed else {
                throw AtollError(.invalidArgument, "'\(property)' of '\(className)' is not a list, set or dictionary")
            }
            var tree: KeyPathTree?
            if p.type == .object, let target = p.objectType.flatMap({ schema[$0] }) {
                tree = try KeyPathTree.parse(keyPaths, root: target, schema: schema)
            } else if keyPaths?.isEmpty == false {
                throw AtollError(.invalidArgument, "key paths need a collection of links; '\(property)' holds \(p.typeName)")
            }
            return CollectionObserver(token: token, info: info, reference: reference, rowKey: rowKey,
                                      property: p, tree: tree, callback: callback)
        }
    }

    /// The class, row key and change-log reference of an observed object.
    private func observedObject(_ className: String, _ primaryKey: Value, _ conn: Connection) throws -> (ClassInfo, Int64, Value) {
        let info = try classInfo(className)
        guard !info.schema.isEmbedded else {
            throw AtollError(.invalidArgument, "'\(className)' is embedded: observe its owner with a key path instead")
        }
        guard let rowKey = try rowKey(info, named: primaryKey, conn) else { throw AtollError(.notFound, "no \(className) with primary key \(primaryKey.shortDescription)") }
        return (info, rowKey, try reference(info, rowKey, conn))
    }

    /// Registers an observer on this store's notifier (created on first use) and schedules
    /// a delivery (the initial one for results and collections).
    func register(_ make: (Connection, NotificationToken) throws -> Observer) throws -> NotificationToken {
        let token = NotificationToken()
        try locked { conn in
            guard write == nil else {
                throw AtollError(.alreadyInWrite, "observers cannot be added inside a write transaction")
            }
            if !holdsSnapshot { viewVersion = try latestVersion(conn) }
            let observer = try make(conn, token)
            let n = try notifierForObservers()
            token.notifier = n
            n.add(observer)
        }
        return token
    }

    /// The store's notifier, created on first use.
    func notifierForObservers() throws -> Notifier {
        if let notifier { return notifier }
        let n = try Notifier(store: self, fileKey: notificationKey, mode: configuration.notificationDelivery)
        notifier = n
        return n
    }

    /// What names this store's data among the notifiers of the process: the canonical path,
    /// the in-memory name, or (for an unnamed in-memory store) the store itself.
    var notificationKey: String {
        if let fileKey { return fileKey }
        if configuration.inMemory, let name = configuration.path, !name.isEmpty { return "memory:" + name }
        return "store:\(ObjectIdentifier(self).hashValue)"
    }

    // MARK: - Host-driven delivery

    /// A descriptor that becomes readable when notifications are due (for `.host` delivery:
    /// poll it in the host's event loop, then call `deliverNotifications()`). Valid until the
    /// store is closed; do not read or close it.
    /// - Throws: `.closed`, `.invalidArgument` when the store delivers on its own thread.
    public func notificationDescriptor() throws -> Int32 {
        try locked { _ in
            guard configuration.notificationDelivery == .host else {
                throw AtollError(.invalidArgument, "the realm delivers notifications on its own thread (\"notifications\": \"thread\"); open it with \"host\" to deliver them yourself")
            }
            return try notifierForObservers().descriptor
        }
    }

    /// Refreshes the store and calls the callbacks of every due notification on this thread
    /// (`.host` delivery). Does nothing inside a write transaction (its commit makes the
    /// notifications due again).
    /// - Throws: `.closed`, `.invalidArgument` when the store delivers on its own thread.
    public func deliverNotifications() throws {
        let n: Notifier? = try locked { _ in
            guard configuration.notificationDelivery == .host else {
                throw AtollError(.invalidArgument, "the realm delivers notifications on its own thread (\"notifications\": \"thread\"); open it with \"host\" to deliver them yourself")
            }
            return notifier
        }
        guard let n else {
            try refresh()
            return
        }
        if !n.deliver() { throw AtollError(.closed, "the realm is closed") }
    }

    /// Runs one delivery's evaluation: refreshes the snapshot and passes the version it sees.
    /// Does nothing (returns) inside a write transaction.
    func deliveryPass(_ body: (Connection, UInt64) throws -> Void) throws {
        try lockedOutsideSnapshot { conn in
            guard write == nil else { return }
            if holdsSnapshot { try beginSnapshot(conn) } else { viewVersion = try latestVersion(conn) }
            try body(conn, viewVersion)
        }
    }

    /// Wakes the notifiers of this store's data in this process after a commit.
    func signalCommit() {
        NotifierRegistry.shared.signal(notificationKey)
    }

    // MARK: - The change log for observers

    /// The entries in `(after, upTo]` with their effects; `complete` is false when pruning
    /// removed some of them.
    func changeLogForObservers(after from: UInt64, upTo to: UInt64, _ conn: Connection) throws
        -> (sets: [ChangeSet], effects: [Instruction], complete: Bool) {
        guard to > from else { return ([], [], true) }
        let s = try conn.statement("SELECT version, committed_at FROM _atoll_versions WHERE version > ? AND version <= ? ORDER BY version")
        s.bind(1, Int64(clamping: from))
        s.bind(2, Int64(clamping: to))
        var sets = [ChangeSet]()
        while try s.step() {
            sets.append(ChangeSet(version: UInt64(s.int64(0)), timestamp: Timestamp(milliseconds: s.int64(1)), instructions: []))
        }
        s.reset()
        var effects = [Instruction]()
        let chunks = try conn.statement("SELECT chunk, instructions FROM _atoll_changes WHERE version = ? ORDER BY chunk")
        for i in sets.indices {
            chunks.bind(1, Int64(sets[i].version))
            while try chunks.step() {
                let decoded = try ChangeRecorder.decode(chunks.blob(1))
                if chunks.int64(0) == ChangeRecorder.effectsChunk { effects += decoded } else { sets[i].instructions += decoded }
            }
            chunks.reset()
        }
        return (sets, effects, UInt64(sets.count) == to - from)
    }

    // MARK: - Pruning

    /// How many of the newest entries pruning always keeps (for readers of `changes(after:)`).
    static let changeLogKept: UInt64 = 64

    /// Every `changeLogKept` commits, deletes the entries that no observer needs any more: older
    /// than the newest `changeLogKept`, than the oldest version an observer of this process
    /// diffs from, and than every other live process's hold (`_atoll_holds`; holds of
    /// processes that ended are removed). Runs inside the committing write transaction.
    func pruneChangeLog(_ conn: Connection, version: UInt64) throws {
        guard version % Self.changeLogKept == 0, version > Self.changeLogKept else { return }
        var floor = version - Self.changeLogKept
        if let mine = NotifierRegistry.shared.oldestVersion(notificationKey) { floor = min(floor, mine) }
        let exists = try conn.statement("SELECT count(*) FROM sqlite_schema WHERE name = '_atoll_holds'")
        _ = try exists.step()
        let hasHolds = exists.int64(0) > 0
        exists.reset()
        if hasHolds {
            let holds = try conn.statement("SELECT holder, version FROM _atoll_holds")
            var dead = [String]()
            while try holds.step() {
                let holder = holds.string(0)
                if holder == ProcessIdentity.current { continue }
                if holder == Self.syncHolder {
                    // The sync client's upload cursor: kept until the server has the changes.
                    floor = min(floor, UInt64(max(0, holds.int64(1))))
                    continue
                }
                if ProcessIdentity.isAlive(holder) {
                    floor = min(floor, UInt64(max(0, holds.int64(1))))
                } else {
                    dead.append(holder)
                }
            }
            holds.reset()
            for holder in dead {
                let d = try conn.statement("DELETE FROM _atoll_holds WHERE holder = ?")
                d.bind(1, holder)
                try d.run()
            }
        }
        guard floor > 0 else { return }
        for table in ["_atoll_changes", "_atoll_versions"] {
            let d = try conn.statement("DELETE FROM \(table) WHERE version <= ?")
            d.bind(1, Int64(floor))
            try d.run()
        }
    }

    // MARK: - Dependencies

    /// The classes whose changes can change the results of a query on `className`: every class
    /// linked to it, either way, at any distance (all classes when one of them has a mixed
    /// property, which may link anywhere).
    func relatedClasses(_ className: String) -> Set<String> {
        var seen: Set<String> = [className]
        var queue = [className]
        var neighbours = [String: Set<String>]()
        var anyMixed = false
        for cls in schema.classes {
            for p in cls.properties {
                if p.type == .mixed { anyMixed = true }
                guard let target = p.objectType else { continue }
                neighbours[cls.name, default: []].insert(target)
                neighbours[target, default: []].insert(cls.name)
            }
        }
        if anyMixed { return Set(schema.classes.map(\.name)) }
        while let next = queue.popLast() {
            for n in neighbours[next, default: []] where seen.insert(n).inserted { queue.append(n) }
        }
        return seen
    }
}

extension Results {
    /// Calls `callback` with the initial results, then after each delivery in which they
    /// changed: deletions, insertions, modifications (only of what `keyPaths` names, when
    /// given) and moves, with the objects' primary keys.
    /// - Throws: `.invalidArgument` (a bad key path), `.closed`, `.alreadyInWrite`.
    public func observe(keyPaths: [String]? = nil, _ callback: @escaping @Sendable (ResultsChange) -> Void) throws -> NotificationToken {
        try store.register { _, token in
            let tree = try KeyPathTree.parse(keyPaths, root: info.schema, schema: store.schema)
            return ResultsObserver(token: token, results: self, tree: tree,
                                   dependencies: store.relatedClasses(className), callback: callback)
        }
    }

    /// The results' changes as an asynchronous sequence (the initial state first). Ending
    /// the iteration unregisters the observer.
    public func changes(keyPaths: [String]? = nil) -> AsyncThrowingStream<ResultsChange, Error> {
        AsyncThrowingStream { continuation in
            do {
                let token = try observe(keyPaths: keyPaths) { continuation.yield($0) }
                continuation.onTermination = { _ in token.invalidate() }
            } catch {
                continuation.finish(throwing: error)
            }
        }
    }
}

extension Store {
    /// The realm's changes as an asynchronous sequence. Ending the iteration unregisters.
    public func changes() -> AsyncThrowingStream<RealmChange, Error> {
        AsyncThrowingStream { continuation in
            do {
                let token = try observe { continuation.yield($0) }
                continuation.onTermination = { _ in token.invalidate() }
            } catch {
                continuation.finish(throwing: error)
            }
        }
    }

    /// An object's changes as an asynchronous sequence; it ends after the object's deletion.
    public func objectChanges(_ className: String, primaryKey: Value, keyPaths: [String]? = nil)
        -> AsyncThrowingStream<ObjectChange, Error> {
        AsyncThrowingStream { continuation in
            do {
                let token = try observeObject(className, primaryKey: primaryKey, keyPaths: keyPaths) { change in
                    continuation.yield(change)
                    if change.deleted { continuation.finish() }
                }
                continuation.onTermination = { _ in token.invalidate() }
            } catch {
                continuation.finish(throwing: error)
            }
        }
    }
}
