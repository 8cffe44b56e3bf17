import AtollJSON
import AtollProtocol
import AtollStore
import CJansson
import Foundation

/// The last sync errors an app sent (compensating writes, client resets, refused
/// subscriptions…), newest last, at most `capacity`: what the admin console's Sync view lists.
struct RecentSyncErrors {
    struct Entry {
        var time: Date
        var user: String
        var error: SyncErrorMessage
    }

    static let capacity = 200
    private(set) var entries: [Entry] = []

    mutating func add(_ error: SyncErrorMessage, user: String) {
        entries.append(Entry(time: Date(), user: user, error: error))
        if entries.count > Self.capacity { entries.removeFirst(entries.count - Self.capacity) }
    }
}

/// An admin API failure: the HTTP status, a stable code and a message (docs/admin-api.md, "Errors").
struct AdminError: Error {
    var status: Int
    var code: String
    var message: String

    init(_ status: Int, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    static func badRequest(_ message: String) -> AdminError { AdminError(400, "BadRequest", message) }
}

/// What the admin API reads and changes in an app's sync engine. Every method here runs on the
/// app's queue (the caller wraps it in `queue.sync`), as the sync messages do.
extension ServerApp {
    // MARK: - Sessions

    /// The bound sessions, grouped by connection: user, address, subscriptions and cursors.
    func adminConnections() -> Value {
        var byConnection = [(SyncConnection, [Session])]()
        for perConnection in sessions.values {
            guard let first = perConnection.values.first else { continue }
            byConnection.append((first.connection, perConnection.values.sorted { $0.number < $1.number }))
        }
        byConnection.sort { ($0.0.user.id, $0.1.first?.file ?? 0) < ($1.0.user.id, $1.1.first?.file ?? 0) }
        return .list(byConnection.map { connection, sessions in
            .doc([
                "id": .string(String(UInt(bitPattern: ObjectIdentifier(connection).hashValue), radix: 16)),
                "user": .string(connection.user.id),
                "address": .string(connection.transport.remoteAddress),
                "sessions": .list(sessions.map(adminSession)),
            ])
        })
    }

    private func adminSession(_ s: Session) -> Value {
        let state = s.ready ? "active" : (s.partitionMode || s.queryVersion >= 0 ? "bootstrapping" : "waiting for subscriptions")
        return .doc([
            "session": .int(s.number),
            "file": .int(s.file),
            "mode": .string(s.partitionMode ? "partition" : "flexible"),
            "partition": s.partitionMode ? s.partition : .null,
            "state": .string(state),
            "queryVersion": .int(s.queryVersion),
            "subscriptions": .list(s.subscriptions.map { sub in
                .doc(["name": .string(sub.name), "class": .string(sub.className), "query": .string(sub.query),
                      "args": .list(sub.arguments)])
            }),
            "objectsInView": .int(Int64(s.inView.values.reduce(0) { $0 + $1.count })),
            "uploadCursor": .int(Int64(s.uploadCursor)),
            "downloadCursor": .int(Int64(s.downloadCursor)),
        ])
    }

    /// The recent sync errors, newest first.
    func adminErrors() -> Value {
        .list(recentErrors.entries.reversed().map { e in
            .doc([
                "time": .date(Timestamp(e.time)),
                "user": .string(e.user),
                "session": e.error.session.map { .int($0) } ?? .null,
                "code": .string(e.error.code.rawValue),
                "action": .string(e.error.code.action),
                "message": .string(e.error.message),
                "compensatingWrites": .list(e.error.compensatingWrites.map(\.wireValue)),
            ])
        })
    }

    /// Closes every sync connection of a user (disabled or deleted: its reconnection is refused).
    /// Returns how many were closed.
    func closeConnections(ofUser userId: String) -> Int {
        var closed = 0
        for connection in connections.values where connection.user.id == userId {
            connection.close(code: 1008, reason: "closed by the admin")
            closed += 1
        }
        return closed
    }

    /// Closes the connections a user's ended sessions opened (a logout: that session; nil: all of
    /// the user's); call on the app's queue. The number closed.
    func closeConnections(ofUser userId: String, session: String?) -> Int {
        var closed = 0
        for connection in connections.values where connection.user.id == userId && (session == nil || connection.session == session) {
            connection.close(code: 1008, reason: "logged out")
            closed += 1
        }
        return closed
    }

    // MARK: - Rules

    /// Checks rules as the server reads them at start (`Rules(json:)`), checks each role's RQL
    /// filter's syntax, and compiles it against the class's schema (each class the rules name, and
    /// each class the default roles cover); throws the reason of the first that fails.
    func validateRules(_ json: Value) throws -> Rules {
        let rules: Rules
        do { rules = try Rules(json: json) } catch { throw AdminError(400, "InvalidRule", "\(error)") }
        for (cls, roles) in rules.classes.sorted(by: { $0.key < $1.key }).map({ ($0.key, $0.value) }) + [("default", rules.defaultRoles ?? [])] {
            for role in roles {
                for (what, filter) in [("read", role.read), ("write", role.write)] {
                    guard case .query(let text) = filter.kind else { continue }
                    do { try Store.checkQuerySyntax(text) } catch {
                        throw AdminError(400, "InvalidRule", "rules.\(cls), role '\(role.name)', \(what) '\(filter.source)': \(error)")
                    }
                }
            }
        }
        for (cls, roles) in rules.classes.sorted(by: { $0.key < $1.key }) {
            guard schema.classes.contains(where: { $0.name == cls }) else {
                if configuration.developmentMode { continue }
                throw AdminError(400, "InvalidRule", "rules.\(cls): there is no class '\(cls)' in the schema")
            }
            for role in roles { try compile(role, cls) }
        }
        for role in rules.defaultRoles ?? [] {
            for cls in schema.classes where !cls.isEmbedded && rules.classes[cls.name] == nil { try compile(role, cls.name) }
        }
        return rules
    }

    private func compile(_ role: Role, _ cls: String) throws {
        for (what, filter) in [("read", role.read), ("write", role.write)] {
            guard case .query(let text) = filter.kind else { continue }
            // Bound for a user without data (nulls), or with empty lists where a list is expected.
            let count = filter.arguments.count
            do {
                _ = try store.objects(cls, where: text, Array(repeating: .null, count: count))
            } catch {
                do { _ = try store.objects(cls, where: text, Array(repeating: .list([]), count: count)) } catch {
                    throw AdminError(400, "InvalidRule", "rules.\(cls), role '\(role.name)', \(what) '\(filter.source)': \(error)")
                }
            }
        }
    }

    /// Uses new rules from now on. Every bound session's view is computed again and bootstrapped
    /// anew, so that connected devices gain what they may read now and lose what they may not.
    func replaceRules(_ rules: Rules, source: Value) {
        configuration.rules = rules
        configuration.rulesSource = source
        for s in sessions.values.flatMap(\.values) {
            do {
                try computeViews(s)
                if s.ready || s.bootstrap != nil { try startBootstrap(s, version: max(s.queryVersion, 0)) }
            } catch {
                log.warning("a session could not be bootstrapped under the new rules",
                            ["app": configuration.id, "user": s.user.id, "error": "\(error)"])
            }
        }
    }

    // MARK: - Data

    func classInfo(_ name: String) throws -> ObjectSchema {
        guard let cls = schema.classes.first(where: { $0.name == name }) else {
            throw AdminError(404, "ClassNotFound", "no class named '\(name)' in app '\(configuration.id)'")
        }
        return cls
    }

    /// Every class with its primary key and object count.
    func adminClasses() throws -> Value {
        .list(try schema.classes.map { cls in
            .doc([
                "name": .string(cls.name),
                "primaryKey": cls.primaryKey.map { .string($0) } ?? .null,
                "embedded": .bool(cls.isEmbedded),
                "count": .int(Int64(cls.isEmbedded ? 0 : try store.objects(cls.name).count())),
                "properties": .list(cls.properties.map { p in
                    .doc(["name": .string(p.name), "type": .string(p.typeName)])
                }),
            ])
        })
    }

    /// One page of an RQL query's results.
    func adminQuery(_ cls: String, _ query: String, _ arguments: [Value], offset: Int, limit: Int) throws -> Value {
        let info = try classInfo(cls)
        guard !info.isEmbedded else { throw AdminError.badRequest("'\(cls)' is embedded; query its owner") }
        let results: Results
        let count: Int
        let objects: [Document]
        do {
            results = try store.objects(cls, where: query, arguments)
            count = try results.count()
            objects = try results.documents(offset: offset, limit: limit)
        } catch {
            throw AdminError(400, "InvalidQuery", "\(error)")
        }
        return .doc(["class": .string(cls), "count": .int(Int64(count)), "offset": .int(Int64(offset)),
                     "objects": .list(objects.map { .object($0) })])
    }

    func adminObject(_ cls: String, _ primaryKey: Value) throws -> Document {
        _ = try classInfo(cls)
        let doc: Document?
        do { doc = try store.object(cls, primaryKey: primaryKey) } catch { throw AdminError.badRequest("\(error)") }
        guard let doc else { throw AdminError(404, "ObjectNotFound", "no \(cls) with primary key \(Wire.encode(primaryKey))") }
        return doc
    }

    /// Sets fields of one object as a client's upload would: integrated by the Integrator in one
    /// transaction with a history entry (file 0, user "admin"), then fanned out to the sessions
    /// that see the object. All fields are set or none. Returns the object as stored and the new
    /// server version.
    func adminUpdate(_ cls: String, _ primaryKey: Value, _ fields: Document) throws -> (Document, UInt64) {
        let info = try classInfo(cls)
        guard let pkName = info.primaryKey, !info.isEmbedded else {
            throw AdminError.badRequest("objects of '\(cls)' have no primary key; edit them from a client")
        }
        guard !fields.isEmpty else { throw AdminError.badRequest("\"set\" names no field") }
        _ = try adminObject(cls, primaryKey)
        var instructions = [SyncInstruction]()
        for (name, value) in fields {
            guard let p = info[property: name] else { throw AdminError.badRequest("'\(cls)' has no property '\(name)'") }
            guard name != pkName else { throw AdminError.badRequest("the primary key '\(name)' cannot be changed") }
            guard p.collection == .single, p.type != .linkingObjects,
                  !(p.type == .object && schema.classes.first(where: { $0.name == p.objectType })?.isEmbedded == true) else {
                throw AdminError.badRequest("'\(cls).\(name)' is \(p.typeName): collections and embedded objects are edited from a client")
            }
            var v = value
            // JSON has one kind of number: 3 for a double property means 3.0.
            if case .int(let i) = value, p.type == .double { v = .double(Double(i)) }
            if case .int(let i) = value, p.type == .float { v = .float(Float(i)) }
            instructions.append(SyncInstruction(.set, cls, primaryKey, path: [.key(name)], value: v))
        }
        let clock = try adminClock(cls, primaryKey)
        let changeset = SyncChangeset(clock: clock, instructions: instructions)
        let started = DispatchTime.now().uptimeNanoseconds
        var effects: EncodedEffects?
        var version = latestVersion
        try storage.write(self, file: nil) { _ in
            version = latestVersion
            let result = try Integrator(store: store).integrate(changeset)
            if let refused = result.rejected.first {
                // Throwing rolls the whole transaction back: nothing is half-saved.
                throw AdminError(400, "WriteRefused", refused.reason)
            }
            guard !result.effects.isEmpty else { return SyncCommit() }
            version = latestVersion + 1
            let encoded = EncodedEffects(result.effects, serverVersion: version, clock: clock)
            effects = encoded
            return SyncCommit(entry: HistoryEntry(version: version, file: 0, clientVersion: 0, clock: clock, user: "admin",
                                                  changeset: encoded.changeset.text),
                              touched: encoded.order + result.changedWithoutEffects)
        }
        latestVersion = version
        metrics.integrated(seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9, instructions: instructions.count)
        if let effects {
            try fanOut(effects, version: version, clock: clock, origin: nil)
        }
        log.info("object edited in the admin console", ["app": configuration.id, "class": cls, "version": "\(version)"])
        return (try adminObject(cls, primaryKey), version)
    }

    /// A clock newer than every clock the object has, so that the edit wins last-writer-wins:
    /// now, or one step after the newest when a device's clock ran ahead.
    private func adminClock(_ cls: String, _ primaryKey: Value) throws -> Clock {
        let newest = try ServerSyncTables(store: store).newestClock(cls, keyText(primaryKey))
        let now = Clock(milliseconds: Int64(Date().timeIntervalSince1970 * 1000), counter: 0, node: 0)
        return now > newest ? now : Clock(milliseconds: newest.milliseconds, counter: newest.counter + 1, node: 0)
    }

    /// The schema as Realm JS notation (docs/schema.md).
    func schemaJSON() -> Value {
        let json = SchemaJSON.make(schema)
        defer { json_decref(json) }
        return (try? EJSON.value(json)) ?? .list([])
    }
}
