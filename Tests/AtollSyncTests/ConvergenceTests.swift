import AtollJSON
import AtollNet
import AtollProtocol
import AtollServer
import AtollStore
@testable import AtollSync
import AtollTestSupport
import CJansson
import Foundation
import XCTest

/// What the merge rules (docs/protocol.md) say the data must be, worked out by the test from the operations it
/// made, without the engine's clocks: each kind of object is written so that its outcome is
/// decided by one rule alone.
///
/// - `counter-*`: only counter adds, so the score is the sum of every client's adds.
/// - `labels-*`: adds of values no one removes, removes of values no one adds: the set is the
///   start, less what was removed, plus what was added.
/// - `attrs-*`: dictionary key `c<i>` written only by client i: its last write (or erase) stays.
/// - `tags-*`: list values appended once each, erased or moved only by the client that appended
///   them: what was appended and not erased is there, once each.
/// - `doomed-*`: erased once while others go on writing: deletes win, it is gone.
/// - `shared-*`: anyone sets name, level and the embedded info: the name ends as one of the
///   names written, and the last round proves last-writer-wins by clock, not by arrival.
/// - `fresh-*`: created by any client, sometimes by two at once: it exists, merged.
/// - `revived-*`: deleted (15% of all operations), replaced whole (which brings a deleted key
///   back), re-created and written field by field, by anyone: no one rule decides them, so they
///   are checked by the replicas agreeing with the server, and the last round decides two of
///   them by clock: an older delete loses to a newer delete-and-create (a replace of an object
///   the writer still has is an update, and a delete wins over updates), an older replace to a
///   newer delete.
struct ConvergenceModel {
    var scores: [String: Int64] = [:]
    var labels: [String: Set<String>] = [:]
    var attrs: [String: [String: String]] = [:]
    var tags: [String: [String: Int]] = [:]
    var doomed: Set<String> = []
    var names: [String: Set<String>] = [:]
    var created: Set<String> = []
    var lastName: [String: String] = [:]
    /// The revived keys' final round: present with this name, or gone (nil).
    var lastRevived: [String: String?] = [:]
    /// Every name a revived key was given.
    var revivedNames: [String: Set<String>] = [:]
}

/// The randomized convergence harness. N clients write at random to a few shared objects while
/// their connections are cut and restored and the server restarts; at the end every replica and
/// the server hold the same data, and it is what `ConvergenceModel` says. The first half of the
/// clients (at least two) are devices of one email/password user; the others each have their own
/// anonymous user.
///
/// Environment: `ATOLL_CONVERGENCE_SEED` (default 1), `ATOLL_CONVERGENCE_CLIENTS` (5),
/// `ATOLL_CONVERGENCE_OPS` (300), `ATOLL_CONVERGENCE_RESTARTS` (2), `ATOLL_CONVERGENCE_KEEP=1`
/// (keep the realm files and the server's data, whose history shows every changeset), and with
/// `ATOLL_SYNC_STORE=postgres` `ATOLL_CONVERGENCE_INSTANCES` (3: instances on one database, the
/// clients spread over them, restarts taking one instance at a time). The seed fixes the
/// operations and the fault schedule; thread timing is the machine's, so a failure names its
/// seed and is re-run with it.
final class ConvergenceTests: XCTestCase {
    static let schemaJSON = """
    [{"name": "Item", "primaryKey": "_id", "properties": {"_id": "string", "name": "string?", "score": "int",
      "level": "int", "tags": "string[]", "labels": "string<>", "attrs": "string{}", "info": "Info?"}},
     {"name": "Info", "embedded": true, "properties": {"city": "string?", "zip": "int"}}]
    """

    /// The server: one instance, or on PostgreSQL several sharing one database (clients spread
    /// over them, restarts one instance at a time). Clients reach their instance in process
    /// (`transport(for:)`), and the instance that replaces it after a restart, as they would
    /// at the same URL.
    final class Server: @unchecked Sendable {
        let directory: String
        var configuration = ServerConfiguration()
        private let lock = NSLock()
        private var running: [SyncServer] = []
        private(set) var instances: [SyncServer] {
            get { lock.withLock { running } }
            set { lock.withLock { running = newValue } }
        }
        private var restarted = 0

        init(directory: String, instances count: Int) throws {
            self.directory = directory
            configuration.port = 0
            configuration.logLevel = .error
            configuration.postgresURL = try TestPostgres.syncStoreURL()
            for i in 0..<count {
                let s = try SyncServer(configuration: configuration(i))
                try s.start(listening: false)
                instances.append(s)
            }
        }

        /// Instance `i`'s configuration: its own data directory (on PostgreSQL, its cache).
        private func configuration(_ i: Int) -> ServerConfiguration {
            var c = configuration
            c.dataDirectory = directory + (i == 0 ? "/server" : "/server-\(i)")
            return c
        }

        /// The way client `n` reaches its instance.
        func transport(for n: Int) -> ClientTransport {
            .forwarding { [weak self] in
                guard let self else { return nil }
                let all = self.instances
                return all[n % all.count].inProcessTransport
            }
        }

        func stop() {
            for s in instances {
                let done = DispatchSemaphore(value: 0)
                Task {
                    await s.shutdown()
                    done.signal()
                }
                done.wait()
            }
        }

        /// Stops one instance (each in turn) and starts it again on the same data.
        func restart() throws {
            let i = restarted % instances.count
            restarted += 1
            let old = instances[i]
            let done = DispatchSemaphore(value: 0)
            Task {
                await old.shutdown()
                done.signal()
            }
            done.wait()
            let again = try SyncServer(configuration: configuration(i))
            try again.start(listening: false)
            instances[i] = again
        }
    }

    struct Client {
        let number: Int
        let session: ClientSession
        let store: Store
        var paused = false
    }

    func testRandomClientsConvergeToWhatTheRulesSay() throws {
        let env = ProcessInfo.processInfo.environment
        let seed = UInt64(env["ATOLL_CONVERGENCE_SEED"] ?? "") ?? 1
        let clientCount = max(2, Int(env["ATOLL_CONVERGENCE_CLIENTS"] ?? "") ?? 5)
        let operations = max(10, Int(env["ATOLL_CONVERGENCE_OPS"] ?? "") ?? 300)
        let restarts = max(0, Int(env["ATOLL_CONVERGENCE_RESTARTS"] ?? "") ?? 2)
        // On PostgreSQL, three instances by default: concurrent integration on several of them.
        let instanceCount = TestPostgres.syncOnPostgres ? max(1, Int(env["ATOLL_CONVERGENCE_INSTANCES"] ?? "") ?? 3) : 1
        print("convergence: seed \(seed), \(clientCount) clients, \(operations) operations, \(restarts) server restarts, \(instanceCount) instance(s)")
        var random = SplitMix64(seed: seed)

        let directory = NSTemporaryDirectory() + "atoll-convergence-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer {
            if env["ATOLL_CONVERGENCE_KEEP"] == "1" { print("convergence: the files are kept in \(directory)") } else { try? FileManager.default.removeItem(atPath: directory) }
        }
        let server = try Server(directory: directory, instances: instanceCount)
        defer { server.stop() }
        let schema = try {
            let json = try EJSON.load(Self.schemaJSON)
            defer { json_decref(json) }
            return try SchemaJSON.schema(json)
        }()

        var clients = [Client]()
        let sharedUser = max(2, clientCount / 2)
        for i in 0..<clientCount {
            let app = try ClientApp(configuration: ClientAppConfiguration(appId: "default", baseURL: "http://in-process",
                                                              metadataDirectory: directory + "/app\(i)", connectTimeout: 5,
                                                              transport: server.transport(for: i)))
            let user: ClientUser
            if i < sharedUser {
                if i == 0 { try runToCompletion { try await app.registerEmail("devices@example.com", password: "secret-1") } }
                user = try runToCompletion { try await app.login(.emailPassword(email: "devices@example.com", password: "secret-1")) }
            } else {
                user = try runToCompletion { try await app.login(.anonymous) }
            }
            var sync = ClientSyncConfiguration(mode: .flexible)
            sync.initialSubscriptions = [SubscriptionQuery(name: "all", className: "Item")]
            let configuration = Configuration(path: directory + "/client\(i).realm", schema: schema)
            let session = try ClientSession.open(user: user, storeConfiguration: configuration, sync: sync)
            try session.waitForInitialDownload(timeout: 30)
            clients.append(Client(number: i, session: session, store: try Store(configuration)))
        }
        defer { for c in clients { c.store.close(); c.session.release() } }

        // The objects every rule is tried on, made by client 0 and seen by all before the run.
        var model = ConvergenceModel()
        let first = clients[0].store
        let startLabels = (0..<6).map { "r\($0)" }
        try first.write {
            for n in 0..<2 {
                _ = try first.create("Item", ["_id": .string("counter-\(n)"), "score": .int(0)])
                model.scores["counter-\(n)"] = 0
                _ = try first.create("Item", ["_id": .string("labels-\(n)"), "labels": .list(startLabels.map { .string($0) })])
                model.labels["labels-\(n)"] = Set(startLabels)
                _ = try first.create("Item", ["_id": .string("attrs-\(n)")])
                model.attrs["attrs-\(n)"] = [:]
                _ = try first.create("Item", ["_id": .string("tags-\(n)")])
                model.tags["tags-\(n)"] = [:]
                _ = try first.create("Item", ["_id": .string("doomed-\(n)"), "name": .string("start")])
            }
            for n in 0..<3 {
                _ = try first.create("Item", ["_id": .string("shared-\(n)"), "name": .string("start"),
                                              "info": .object(["city": .string("start")])])
                model.names["shared-\(n)"] = ["start"]
            }
        }
        try settle(clients)

        // The run: random operations on random clients, cuts and resumes, server restarts.
        let restartAt = Set((0..<restarts).map { (operations * ($0 + 1)) / (restarts + 1) })
        var faults = 0
        var counter = 0
        func unique(_ c: Client) -> String {
            counter += 1
            return "c\(c.number)-\(counter)"
        }
        for step in 0..<operations {
            if restartAt.contains(step) {
                try server.restart()
                faults += 1
            }
            let i = Int.random(in: 0..<clients.count, using: &random)
            if Int.random(in: 0..<20, using: &random) == 0 {
                if clients[i].paused { clients[i].session.resume() } else { clients[i].session.pause() }
                clients[i].paused.toggle()
                faults += 1
            }
            let c = clients[i]
            let store = c.store
            _ = try store.refresh()
            let n = Int.random(in: 0..<2, using: &random)
            try store.write {
                for _ in 0...Int.random(in: 0..<3, using: &random) {
                    // Three in twenty operations delete, two replace a revived key whole, one
                    // sets a field of it; the rest are the other kinds, evenly.
                    let kind = Int.random(in: 0..<20, using: &random)
                    if kind < 6 {
                        let key = "revived-\(Int.random(in: 0..<4, using: &random))"
                        let exists = try store.object("Item", primaryKey: .string(key)) != nil
                        let v = unique(c)
                        switch kind {
                        case 0..<3:
                            if exists { try store.delete("Item", primaryKey: .string(key)) }
                        case 3..<5:
                            _ = try store.create("Item", Self.whole(key, v, level: Int64(counter)), update: .all)
                            model.revivedNames[key, default: []].insert(v)
                        default:
                            guard exists else { break }
                            _ = try store.create("Item", ["_id": .string(key), "name": .string(v)], update: .modified)
                            model.revivedNames[key, default: []].insert(v)
                        }
                        continue
                    }
                    switch Int.random(in: 0..<9, using: &random) {
                    case 0:
                        let delta = Int64.random(in: -5...10, using: &random)
                        try store.addInteger("Item", primaryKey: .string("counter-\(n)"), property: "score", delta)
                        model.scores["counter-\(n)", default: 0] += delta
                    case 1:
                        let key = "labels-\(n)"
                        if Bool.random(using: &random) {
                            let v = unique(c)
                            _ = try store.setInsert("Item", primaryKey: .string(key), property: "labels", .string(v))
                            model.labels[key, default: []].insert(v)
                        } else {
                            let v = startLabels[Int.random(in: 0..<startLabels.count, using: &random)]
                            _ = try store.setErase("Item", primaryKey: .string(key), property: "labels", .string(v))
                            model.labels[key]?.remove(v)
                        }
                    case 2:
                        let key = "attrs-\(n)"
                        if Int.random(in: 0..<4, using: &random) == 0 {
                            _ = try store.dictionaryErase("Item", primaryKey: .string(key), property: "attrs", key: "c\(c.number)")
                            model.attrs[key]?["c\(c.number)"] = nil
                        } else {
                            let v = unique(c)
                            try store.dictionarySet("Item", primaryKey: .string(key), property: "attrs", key: "c\(c.number)", .string(v))
                            model.attrs[key, default: [:]]["c\(c.number)"] = v
                        }
                    case 3:
                        let key = "tags-\(n)"
                        guard case .list(let items)? = try store.value("Item", primaryKey: .string(key), property: "tags") else { break }
                        let own = items.indices.filter { items[$0].stringValue?.hasPrefix("c\(c.number)-") == true }
                        switch Int.random(in: 0..<4, using: &random) {
                        case 0 where !own.isEmpty:
                            let at = own[Int.random(in: 0..<own.count, using: &random)]
                            try store.listErase("Item", primaryKey: .string(key), property: "tags", at: at)
                            if let v = items[at].stringValue { model.tags[key]?[v] = nil }
                        case 1 where !own.isEmpty:
                            let from = own[Int.random(in: 0..<own.count, using: &random)]
                            try store.listMove("Item", primaryKey: .string(key), property: "tags", from: from,
                                               to: Int.random(in: 0..<items.count, using: &random))
                        default:
                            let v = unique(c)
                            try store.listInsert("Item", primaryKey: .string(key), property: "tags", .string(v),
                                                 at: Int.random(in: 0...items.count, using: &random))
                            model.tags[key, default: [:]][v] = 1
                        }
                    case 4:
                        let key = "doomed-\(n)"
                        guard try store.object("Item", primaryKey: .string(key)) != nil else { break }
                        if Int.random(in: 0..<6, using: &random) == 0 {
                            try store.delete("Item", primaryKey: .string(key))
                            model.doomed.insert(key)
                        } else {
                            _ = try store.create("Item", ["_id": .string(key), "name": .string(unique(c)),
                                                          "level": .int(Int64(counter))], update: .modified)
                            try store.listInsert("Item", primaryKey: .string(key), property: "tags", .string(unique(c)), at: 0)
                        }
                    case 5, 6:
                        let key = "shared-\(Int.random(in: 0..<3, using: &random))"
                        let v = unique(c)
                        var doc: Document = ["_id": .string(key), "name": .string(v)]
                        if Bool.random(using: &random) { doc["level"] = .int(Int64(counter)) }
                        if Bool.random(using: &random) { doc["info"] = .object(["city": .string(v), "zip": .int(Int64(counter))]) }
                        _ = try store.create("Item", doc, update: .modified)
                        model.names[key, default: []].insert(v)
                    case 7:
                        let key = "fresh-\(Int.random(in: 0..<(operations / 10 + 1), using: &random))"
                        let v = unique(c)
                        if try store.object("Item", primaryKey: .string(key)) == nil {
                            _ = try store.create("Item", ["_id": .string(key), "name": .string(v), "tags": .list([.string(v)])])
                            model.tags[key, default: [:]][v] = 1
                        } else {
                            _ = try store.create("Item", ["_id": .string(key), "name": .string(v)], update: .modified)
                        }
                        model.created.insert(key)
                        model.names[key, default: []].insert(v)
                    default:
                        let key = "shared-\(Int.random(in: 0..<3, using: &random))"
                        _ = try store.addInteger("Item", primaryKey: .string(key), property: "score", 1)
                    }
                }
            }
        }

        // Last writer wins by clock, not by arrival: a paused client writes each shared name
        // first, a connected one later; the older write arrives last and must lose.
        let older = clients[0], newer = clients[1]
        for c in [older, newer] where !clients[c.number].paused {
            c.session.pause()
            clients[c.number].paused = true
        }
        newer.session.resume()
        clients[newer.number].paused = false
        // The same for deletes and re-creates: the older delete of revived-0 loses to the newer
        // delete-and-create (which leaves exactly what it created: nothing older survives its
        // delete), the older replace of revived-1 to the newer delete.
        try older.store.write {
            for n in 0..<3 { _ = try older.store.create("Item", ["_id": .string("shared-\(n)"), "name": .string("older-\(n)")], update: .modified) }
            if try older.store.object("Item", primaryKey: .string("revived-0")) != nil { try older.store.delete("Item", primaryKey: .string("revived-0")) }
            _ = try older.store.create("Item", Self.whole("revived-1", "older-r1", level: 1), update: .all)
        }
        Thread.sleep(forTimeInterval: 0.3)
        _ = try newer.store.refresh()
        try newer.store.write {
            for n in 0..<3 {
                _ = try newer.store.create("Item", ["_id": .string("shared-\(n)"), "name": .string("newer-\(n)")], update: .modified)
                model.lastName["shared-\(n)"] = "newer-\(n)"
            }
            // Deleted where it is, or made and deleted (an erase either way: a create alone on a
            // key this replica saw erased would merge with writes newer than that erase), then
            // created whole.
            if try newer.store.object("Item", primaryKey: .string("revived-0")) == nil {
                _ = try newer.store.create("Item", ["_id": .string("revived-0")])
            }
            try newer.store.delete("Item", primaryKey: .string("revived-0"))
            _ = try newer.store.create("Item", Self.whole("revived-0", "newer-r0", level: 2), update: .all)
            model.lastRevived["revived-0"] = "newer-r0"
            // Deleted where it is, or made and deleted in one transaction: an erase either way.
            if try newer.store.object("Item", primaryKey: .string("revived-1")) == nil {
                _ = try newer.store.create("Item", ["_id": .string("revived-1")])
            }
            try newer.store.delete("Item", primaryKey: .string("revived-1"))
            model.lastRevived["revived-1"] = .some(nil)
        }
        try newer.session.waitForUpload(timeout: 60)

        for i in clients.indices where clients[i].paused {
            clients[i].session.resume()
            clients[i].paused = false
        }
        try settle(clients)

        // Every replica and the server hold the same data...
        // On PostgreSQL, the server's data is what a new instance reads from the database: its
        // cache, made at start.
        var serverFile = server.directory + "/server/default/data.realm"
        if server.configuration.postgresURL != nil {
            var other = server.configuration
            other.port = 0
            other.dataDirectory = directory + "/another-instance"
            let instance = try SyncServer(configuration: other)
            let done = DispatchSemaphore(value: 0)
            Task {
                await instance.shutdown()
                done.signal()
            }
            done.wait()
            serverFile = other.dataDirectory + "/default/cache.realm"
        }
        let serverStore = try Store(Configuration(path: serverFile))
        defer { serverStore.close() }
        let expected = try Self.canonical(serverStore)
        // Objects that differ from the server or from the rules: the summary's "data lost".
        var violations = 0
        func check(_ ok: Bool, _ message: @autoclosure () -> String) {
            if !ok { violations += 1 }
            XCTAssertTrue(ok, "seed \(seed): " + message())
        }
        for c in clients {
            _ = try c.store.refresh()
            let got = try Self.canonical(c.store)
            let differences = Set(got).symmetricDifference(expected).sorted()
            check(differences.isEmpty, "client \(c.number) differs from the server:\n"
                  + differences.map { (got.contains($0) ? "  client: " : "  server: ") + $0 }.joined(separator: "\n"))
        }
        // ...and it is what the rules say.
        let objects = Dictionary(try serverStore.objects("Item").documents().compactMap { d in d["_id"]?.stringValue.map { ($0, d) } },
                                 uniquingKeysWith: { a, _ in a })
        for (key, score) in model.scores { check(objects[key]?["score"] == .int(score), "\(key): score \(String(describing: objects[key]?["score"])), the adds sum to \(score)") }
        for (key, labels) in model.labels {
            var got = Set<String>()
            if case .list(let items)? = objects[key]?["labels"] { got = Set(items.compactMap(\.stringValue)) }
            check(got == labels, "\(key): labels \(got.sorted()), expected \(labels.sorted())")
        }
        for (key, attrs) in model.attrs {
            var got = [String: String]()
            if case .object(let d)? = objects[key]?["attrs"] { got = Dictionary(uniqueKeysWithValues: d.map { ($0.0, $0.1.stringValue ?? "") }) }
            check(got == attrs, "\(key): attrs \(got), expected \(attrs)")
        }
        for (key, tags) in model.tags {
            var got = [String]()
            if case .list(let items)? = objects[key]?["tags"] { got = items.compactMap(\.stringValue).sorted() }
            check(got == tags.keys.sorted(), "\(key): tags \(got), expected \(tags.keys.sorted())")
        }
        for key in model.doomed { check(objects[key] == nil, "\(key) was erased: deletes win") }
        for key in model.created { check(objects[key] != nil, "\(key) was created") }
        for (key, names) in model.names where model.lastName[key] == nil {
            check(objects[key]?["name"]?.stringValue.map(names.contains) ?? false, "\(key)'s name was never written")
        }
        for (key, name) in model.lastName { check(objects[key]?["name"] == .string(name), "\(key): the newest write wins") }
        for (key, last) in model.lastRevived {
            if let name = last {
                let expected = Self.whole(key, name, level: 2)
                check(objects[key].map { d in zip(expected.keys, expected.values).allSatisfy { d[$0.0] == $0.1 } } ?? false,
                      "\(key): the newer delete-and-create wins over the older delete, got \(String(describing: objects[key]))")
            } else {
                check(objects[key] == nil, "\(key): the newer delete wins over the older replace")
            }
        }
        for (key, names) in model.revivedNames where model.lastRevived[key] == nil {
            if let d = objects[key] { check(d["name"]?.stringValue.map(names.contains) ?? false, "\(key)'s name was never written") }
        }
        stressReport(suite: "convergence", rounds: 1, operations: operations, faults: faults, lost: violations,
                     figures: "seed \(seed), \(clientCount) clients, \(objects.count) objects, \(restarts) server restarts, \(instanceCount) instance(s)")
        print("convergence: seed \(seed): \(clientCount) replicas and the server checked on \(objects.count) objects; \(faults) faults injected")
    }

    /// Waits until every client has uploaded and downloaded everything (twice over: a download
    /// may make another client's rebase upload).
    func settle(_ clients: [Client]) throws {
        for _ in 0..<2 {
            for c in clients { try c.session.waitForUpload(timeout: 60) }
            for c in clients { try c.session.waitForDownload(timeout: 60) }
        }
    }

    /// A whole Item, every property given: what a replace with `update: .all` leaves.
    static func whole(_ key: String, _ name: String, level: Int64) -> Document {
        ["_id": .string(key), "name": .string(name), "score": .int(0), "level": .int(level), "tags": .list([.string(name)]),
         "labels": .list([.string(name)]), "attrs": .object(["by": .string(name)]), "info": .object(["city": .string(name), "zip": .int(level)])]
    }

    /// Every Item as sorted JSON lines, sets sorted (their order is each replica's own).
    static func canonical(_ store: Store) throws -> [String] {
        try store.objects("Item").documents().map { doc -> String in
            var d = doc
            if case .list(let labels)? = d["labels"] {
                d["labels"] = .list(labels.sorted { EJSON.serialize($0) < EJSON.serialize($1) })
            }
            return EJSON.serialize(.object(d))
        }.sorted()
    }
}
