import AtollJSON
import AtollNet
import AtollProtocol
import AtollServer
import AtollStore
import AtollTestSupport
@testable import AtollSync
@testable import AtollAuth
import CJansson
import Foundation
import Synchronization
import XCTest

/// A server and clients in this process, with real files. The clients reach the server through
/// its in-process transport (its HTTP parser and routes, and a `MemorySocket` for the sync
/// connection: no port is opened), unless `network`: then over loopback, with real sockets.
final class SyncHarness: @unchecked Sendable {
    let directory: String
    let server: SyncServer
    let network: Bool

    static let schemaJSON = """
    [{"name": "Task", "primaryKey": "_id", "properties": {"_id": "string", "name": "string?", "owner_id": "string?",
      "done": "bool", "priority": "int", "tags": "string[]", "labels": "string<>", "attrs": "string{}"}}]
    """

    static var schema: Schema {
        // The test's own fixed text: it parses.
        guard let json = try? EJSON.load(schemaJSON) else { return Schema() }
        defer { json_decref(json) }
        return (try? SchemaJSON.schema(json)) ?? Schema()
    }

    private let stopped = NSLock()
    private var isStopped = false

    /// `postgresURL`: the PostgreSQL database to keep the server's data in (default: a new one in
    /// a run on PostgreSQL, none on SQLite); `network`: listen on a free loopback port and give
    /// the clients the network transport.
    init(config: String? = nil, postgresURL: String? = nil, network: Bool = false) throws {
        self.network = network
        directory = NSTemporaryDirectory() + "atoll-sync-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var configuration = ServerConfiguration()
        if let config {
            let file = directory + "/config.json"
            try config.write(toFile: file, atomically: true, encoding: .utf8)
            configuration = try ServerConfiguration(file: file)
        }
        configuration.port = 0
        configuration.dataDirectory = directory + "/server"
        configuration.logLevel = .error
        configuration.postgresURL = try postgresURL ?? TestPostgres.syncStoreURL()
        server = try SyncServer(configuration: configuration)
        try server.start(listening: network)
    }

    /// Shuts the server down (once); the directory stays until the harness goes.
    func stopServer() {
        let first = stopped.withLock { () -> Bool in
            defer { isStopped = true }
            return !isStopped
        }
        guard first else { return }
        let server = self.server
        let done = DispatchSemaphore(value: 0)
        Task {
            await server.shutdown()
            done.signal()
        }
        done.wait()
    }

    deinit {
        stopServer()
        try? FileManager.default.removeItem(atPath: directory)
    }

    func app(_ name: String, appId: String = "default") throws -> ClientApp {
        try ClientApp(configuration: appConfiguration(name, appId: appId))
    }

    func appConfiguration(_ name: String, appId: String = "default") -> ClientAppConfiguration {
        ClientAppConfiguration(appId: appId, baseURL: network ? server.url : "http://in-process", metadataDirectory: directory + "/\(name)",
                               connectTimeout: 5, transport: network ? .network : server.inProcessTransport)
    }

    /// Opens a synced realm for a user: the session and the app's own store handle.
    func open(_ user: ClientUser, _ file: String, mode: ClientSyncConfiguration.Mode = .flexible,
              subscriptions: [SubscriptionQuery] = [], schema: Schema = SyncHarness.schema) throws -> (ClientSession, Store) {
        var sync = ClientSyncConfiguration(mode: mode)
        sync.initialSubscriptions = subscriptions
        let configuration = Configuration(path: directory + "/" + file, schema: schema)
        let session = try ClientSession.open(user: user, storeConfiguration: configuration, sync: sync)
        return (session, try Store(configuration))
    }

    /// Two anonymous users' realms ("a", "b"), each subscribed to every Task, their first
    /// downloads done; `errors` gets the first one's sync errors. The caller releases the sessions.
    func twoClients(errors: ErrorLog? = nil) throws -> (sa: ClientSession, a: Store, sb: ClientSession, b: Store) {
        let appA = try app("a"), appB = try app("b")
        if let errors { _ = appA.addErrorHandler { e, _ in errors.add(e) } }
        let ann = try runToCompletion { try await appA.login(.anonymous) }
        let bob = try runToCompletion { try await appB.login(.anonymous) }
        let all = [SubscriptionQuery(name: "all", className: "Task")]
        let (sa, storeA) = try open(ann, "a.realm", subscriptions: all)
        let (sb, storeB) = try open(bob, "b.realm", subscriptions: all)
        do {
            try sa.waitForInitialDownload(timeout: 10)
            try sb.waitForInitialDownload(timeout: 10)
        } catch {
            sa.release()
            sb.release()
            throw error
        }
        return (sa, storeA, sb, storeB)
    }
}

final class SyncTests: XCTestCase {
    /// A server made and let go without ever being started (a host that changed its mind, the
    /// convergence test's look at the database through a second instance) must not trap.
    func testAServerThatNeverStartedShutsDownAndGoes() throws {
        let directory = NSTemporaryDirectory() + "atoll-unstarted-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataDirectory = directory
        configuration.logLevel = .error
        configuration.postgresURL = try TestPostgres.syncStoreURL()
        var server: SyncServer? = try SyncServer(configuration: configuration)
        let unstarted = try XCTUnwrap(server)
        _ = try runToCompletion { await unstarted.shutdown() }
        server = nil
        // And one let go without a shutdown.
        server = try SyncServer(configuration: configuration)
        server = nil
        XCTAssertNil(server)
    }

    func testTwoClientsShareDataLive() throws { try shareDataLive(network: false) }

    /// The same over loopback: the network transport (HTTP client, WebSocket, the server's
    /// listener) gives what the in-process one gives.
    func testTwoClientsShareDataLiveOverLoopback() throws { try shareDataLive(network: true) }

    private func shareDataLive(network: Bool) throws {
        let h = try SyncHarness(network: network)
        let (sa, storeA, sb, storeB) = try h.twoClients()
        defer { sa.release(); sb.release() }

        try storeA.write {
            _ = try storeA.create("Task", ["_id": .string("t1"), "name": .string("Buy milk"), "priority": .int(2),
                                           "tags": .list([.string("home"), .string("shop")])])
        }
        try sa.waitForUpload(timeout: 10)
        try sb.waitForDownload(timeout: 10)
        _ = try storeB.refresh()
        let t1 = try storeB.object("Task", primaryKey: .string("t1"))
        XCTAssertEqual(t1?["name"], .string("Buy milk"))
        XCTAssertEqual(t1?["tags"], .list([.string("home"), .string("shop")]))

        // Both edit, neither having seen the other's edit (offline): different fields merge,
        // list inserts both survive, each where its writer put it.
        sa.pause()
        sb.pause()
        try storeA.write {
            try storeA.listInsert("Task", primaryKey: .string("t1"), property: "tags", .string("a-first"), at: 0)
            _ = try storeA.create("Task", ["_id": .string("t1"), "done": .bool(true)], update: .modified)
        }
        try storeB.write {
            try storeB.listInsert("Task", primaryKey: .string("t1"), property: "tags", .string("b-last"), at: 2)
            _ = try storeB.create("Task", ["_id": .string("t1"), "priority": .int(5)], update: .modified)
        }
        sa.resume()
        sb.resume()
        for s in [sa, sb] { try s.waitForUpload(timeout: 10) }
        for s in [sa, sb] { try s.waitForDownload(timeout: 10) }
        _ = try storeA.refresh()
        _ = try storeB.refresh()
        let a = try storeA.object("Task", primaryKey: .string("t1"))
        let b = try storeB.object("Task", primaryKey: .string("t1"))
        XCTAssertEqual(a, b)
        XCTAssertEqual(a?["done"], .bool(true))
        XCTAssertEqual(a?["priority"], .int(5))
        XCTAssertEqual(a?["tags"], .list(["a-first", "home", "shop", "b-last"].map { .string($0) }))

        // Counters: concurrent increments on both sides add up, connected and offline.
        try storeA.write { try storeA.addInteger("Task", primaryKey: .string("t1"), property: "priority", 10) }
        try storeB.write { try storeB.addInteger("Task", primaryKey: .string("t1"), property: "priority", 100) }
        for s in [sa, sb] { try s.waitForUpload(timeout: 10) }
        for s in [sa, sb] { try s.waitForDownload(timeout: 10) }
        _ = try storeA.refresh()
        _ = try storeB.refresh()
        XCTAssertEqual(try storeA.value("Task", primaryKey: .string("t1"), property: "priority"), .int(115))
        XCTAssertEqual(try storeB.value("Task", primaryKey: .string("t1"), property: "priority"), .int(115))
        sa.pause()
        sb.pause()
        try storeA.write { try storeA.addInteger("Task", primaryKey: .string("t1"), property: "priority", 1000) }
        try storeB.write { try storeB.addInteger("Task", primaryKey: .string("t1"), property: "priority", 10000) }
        sa.resume()
        sb.resume()
        for s in [sa, sb] { try s.waitForUpload(timeout: 10) }
        for s in [sa, sb] { try s.waitForDownload(timeout: 10) }
        _ = try storeA.refresh()
        _ = try storeB.refresh()
        XCTAssertEqual(try storeA.value("Task", primaryKey: .string("t1"), property: "priority"), .int(11115))
        XCTAssertEqual(try storeB.value("Task", primaryKey: .string("t1"), property: "priority"), .int(11115))

        // Erase on one side reaches the other.
        try storeB.write { try storeB.delete("Task", primaryKey: .string("t1")) }
        try sb.waitForUpload(timeout: 10)
        try sa.waitForDownload(timeout: 10)
        _ = try storeA.refresh()
        XCTAssertNil(try storeA.object("Task", primaryKey: .string("t1")))
    }
}

/// Owner-only rules, partition sync, subscriptions, errors, resets: the engine against a real
/// server in this process.
final class SyncRulesTests: XCTestCase {
    static let ownersConfig = """
    {"apps": [
      {"id": "owners", "developmentMode": true, "sync": {"mode": "flexible", "partitionKey": "owner_id"},
       "rules": {"Task": {"roles": [{"name": "owner", "read": "owner_id == %user.id", "write": "owner_id == %user.id"}]}}},
      {"id": "parts", "developmentMode": true, "sync": {"mode": "partition", "partitionKey": "owner_id"},
       "rules": {"default": {"roles": [{"name": "owner", "read": "owner_id == %user.id", "write": "owner_id == %user.id"}]}}}
    ]}
    """

    func testOwnerRulesLimitWhatEachUserSeesAndRefuseForgedWrites() throws {
        let h = try SyncHarness(config: Self.ownersConfig)
        let appA = try h.app("a", appId: "owners"), appB = try h.app("b", appId: "owners")
        let ann = try runToCompletion { try await appA.login(.anonymous) }
        let bob = try runToCompletion { try await appB.login(.anonymous) }
        let errors = ErrorLog()
        appA.addErrorHandler { e, _ in errors.add(e) }
        let all = [SubscriptionQuery(name: "all", className: "Task")]
        let (sa, storeA) = try h.open(ann, "a.realm", subscriptions: all)
        let (sb, storeB) = try h.open(bob, "b.realm", subscriptions: all)
        defer { sa.release(); sb.release() }
        try sa.waitForInitialDownload(timeout: 10)
        try sb.waitForInitialDownload(timeout: 10)

        try storeA.write { _ = try storeA.create("Task", ["_id": .string("a1"), "owner_id": .string(ann.id), "name": .string("Ann's")]) }
        try storeB.write { _ = try storeB.create("Task", ["_id": .string("b1"), "owner_id": .string(bob.id), "name": .string("Bob's")]) }
        // Ann writes a task that claims to be Bob's: refused, undone on Ann's device, never on Bob's.
        try storeA.write { _ = try storeA.create("Task", ["_id": .string("forged"), "owner_id": .string(bob.id)]) }
        for s in [sa, sb] { try s.waitForUpload(timeout: 10) }
        for s in [sa, sb] { try s.waitForDownload(timeout: 10) }
        _ = try storeA.refresh()
        _ = try storeB.refresh()
        XCTAssertEqual(try storeA.objects("Task").documents().compactMap { $0["_id"] }, [.string("a1")])
        XCTAssertEqual(try storeB.objects("Task").documents().compactMap { $0["_id"] }, [.string("b1")])
        let rejected = errors.all.first { $0.code == .writeRejected }
        XCTAssertEqual(rejected?.compensatingWrites.map(\.primaryKey), [.string("forged")])
        XCTAssertEqual(rejected?.isFatal, false)
    }

    func testPartitionSyncIsOneQueryPerClass() throws {
        let h = try SyncHarness(config: Self.ownersConfig)
        let appA = try h.app("a", appId: "parts"), appB = try h.app("b", appId: "parts")
        let ann = try runToCompletion { try await appA.login(.anonymous) }
        let bob = try runToCompletion { try await appB.login(.anonymous) }
        // Ann on two devices (two files) shares her partition; Bob sees only his.
        let (s1, d1) = try h.open(ann, "ann1.realm", mode: .partition(.string(ann.id)))
        let (s2, d2) = try h.open(ann, "ann2.realm", mode: .partition(.string(ann.id)))
        let (s3, d3) = try h.open(bob, "bob.realm", mode: .partition(.string(bob.id)))
        defer { s1.release(); s2.release(); s3.release() }
        for s in [s1, s2, s3] { try s.waitForInitialDownload(timeout: 10) }
        try d1.write { _ = try d1.create("Task", ["_id": .string("p1"), "owner_id": .string(ann.id)]) }
        try s1.waitForUpload(timeout: 10)
        for s in [s2, s3] { try s.waitForDownload(timeout: 10) }
        _ = try d2.refresh()
        _ = try d3.refresh()
        XCTAssertNotNil(try d2.object("Task", primaryKey: .string("p1")))
        XCTAssertNil(try d3.object("Task", primaryKey: .string("p1")))
        // A partition session has no subscriptions to change.
        XCTAssertThrowsError(try s1.updateSubscriptions { _ in })
    }

    /// A bootstrap travels in groups of objects (one array of values each), split so that each
    /// download stays within its 1 MB: 500 objects of 40 KB are one page of the server's, 20 MB
    /// (unsplit, it went as one message, and the progress moved twice). The progress counts
    /// objects up to the view's total, and what arrives equals what was written, grouped or not
    /// (objects with list elements, set elements or dictionary keys travel alone).
    func testALargeBootstrapArrivesWholeInMessagesThatFitWithItsProgress() throws {
        let h = try SyncHarness()
        let writer = try runToCompletion { try await h.app("a").login(.anonymous) }
        let reader = try runToCompletion { try await h.app("b").login(.anonymous) }
        let all = [SubscriptionQuery(name: "all", className: "Task")]
        let (sw, w) = try h.open(writer, "w.realm", subscriptions: all)
        defer { sw.release() }
        try sw.waitForInitialDownload(timeout: 10)
        let big = String(repeating: "x", count: 40_000)
        try w.write {
            for i in 0..<500 {
                _ = try w.create("Task", ["_id": .string("big-\(i)"), "name": .string(big + "\(i)"), "priority": .int(Int64(i))])
            }
            for i in 0..<300 {
                var doc: Document = ["_id": .string("small-\(i)"), "name": i % 7 == 0 ? .null : .string("s\(i)"), "done": .bool(i % 2 == 0)]
                if i % 3 == 0 { doc["tags"] = .list([.string("a"), .string("b\(i)")]) }
                if i % 5 == 0 { doc["labels"] = .list([.string("l\(i)")]) }
                if i % 11 == 0 { doc["attrs"] = .object(["k": .string("v\(i)")]) }
                _ = try w.create("Task", doc)
            }
        }
        try sw.waitForUpload(timeout: 60)

        final class Seen: @unchecked Sendable {
            let lock = NSLock()
            var progress: [(Int, Int)] = []
            var session: ClientSession?
        }
        let seen = Seen()
        let opened = DispatchSemaphore(value: 0)
        let configuration = Configuration(path: h.directory + "/r.realm", schema: SyncHarness.schema)
        var sync = ClientSyncConfiguration(mode: .flexible)
        sync.initialSubscriptions = all
        let task = AsyncOpenTask(user: reader, storeConfiguration: configuration, sync: sync, timeout: 60, offlineFallback: false) { state in
            switch state {
            case .progress(let done, let total, _): seen.lock.withLock { seen.progress.append((done, total)) }
            case .open(let s): seen.lock.withLock { seen.session = s }; opened.signal()
            case .error: opened.signal()
            default: break
            }
        }
        XCTAssertEqual(opened.wait(timeout: .now() + 90), .success)
        _ = task
        let sr = try XCTUnwrap(seen.lock.withLock { seen.session })
        defer { sr.release() }
        let r = try Store(configuration)
        defer { r.close() }
        func sorted(_ store: Store) throws -> [Document] {
            try store.objects("Task").documents().map { doc in
                var d = doc
                if case .list(let labels)? = d["labels"] { d["labels"] = .list(labels.sorted { "\($0)" < "\($1)" }) }
                return d
            }.sorted { "\($0["_id"] ?? .null)" < "\($1["_id"] ?? .null)" }
        }
        XCTAssertEqual(try r.objects("Task").count(), 800)
        XCTAssertTrue(try sorted(r) == sorted(w), "the reader's objects are the writer's")
        // Objects sent over the view's 800, growing with each message; then the completion.
        let events = seen.lock.withLock { seen.progress }
        let progress = events.dropLast()
        XCTAssertEqual(events.last.map { [$0.0, $0.1] }, [1, 1], "\(events)")
        XCTAssertGreaterThan(progress.count, 10, "a 20 MB bootstrap reports its progress along the way")
        XCTAssertEqual(progress.last.map { [$0.0, $0.1] }, [800, 800])
        XCTAssertTrue(progress.allSatisfy { $0.1 == 800 } && zip(progress, progress.dropFirst()).allSatisfy { $0.0 < $1.0 }, "\(events)")
    }

    /// A writer subscribed to every Task, which writes t0…t9 (priority 0…9), and a reader with
    /// `subscriptions` that has downloaded what they hold.
    private func writerAndReader(_ h: SyncHarness, reader subscriptions: [SubscriptionQuery])
        throws -> (sw: ClientSession, w: Store, sr: ClientSession, r: Store) {
        let appA = try h.app("a"), appB = try h.app("b")
        let writer = try runToCompletion { try await appA.login(.anonymous) }
        let reader = try runToCompletion { try await appB.login(.anonymous) }
        let (sw, w) = try h.open(writer, "w.realm", subscriptions: [SubscriptionQuery(name: "all", className: "Task")])
        let (sr, r) = try h.open(reader, "r.realm", subscriptions: subscriptions)
        try sw.waitForInitialDownload(timeout: 10)
        try w.write {
            for i in 0..<10 { _ = try w.create("Task", ["_id": .string("t\(i)"), "priority": .int(Int64(i))]) }
        }
        try sw.waitForUpload(timeout: 10)
        try sr.waitForInitialDownload(timeout: 10)
        try sr.waitForDownload(timeout: 10)
        _ = try r.refresh()
        return (sw, w, sr, r)
    }

    func testSubscriptionChangesBootstrapAndEvict() throws {
        let h = try SyncHarness()
        let (sw, w, sr, r) = try writerAndReader(h, reader: [
            SubscriptionQuery(name: "high", className: "Task", query: "priority > $0", arguments: [.int(5)])])
        defer { sw.release(); sr.release() }
        XCTAssertEqual(try r.objects("Task").count(), 4)
        // Widening the query bootstraps the new objects.
        let v2 = try sr.updateSubscriptions { set in
            set[0].query = "priority > $0"
            set[0].arguments = [.int(1)]
        }
        try sr.waitForSubscriptions(version: v2, timeout: 10)
        _ = try r.refresh()
        XCTAssertEqual(try r.objects("Task").count(), 8)
        XCTAssertEqual(try sr.subscriptions().state, "complete")
        // Narrowing it evicts the objects that left, keeps those that stayed.
        let narrowed = try sr.updateSubscriptions { set in set[0].arguments = [.int(6)] }
        try sr.waitForSubscriptions(version: narrowed, timeout: 10)
        _ = try r.refresh()
        XCTAssertEqual(try r.objects("Task").documents().compactMap { $0["_id"]?.stringValue }.sorted(), ["t7", "t8", "t9"])
        // A query the server does not serve: refused with its reason; the previous set stays.
        let v3 = try sr.updateSubscriptions { set in set.append(SubscriptionQuery(name: "sorted", className: "Task", query: "priority > 0 SORT(priority ASC)")) }
        XCTAssertThrowsError(try sr.waitForSubscriptions(version: v3, timeout: 10)) { error in
            XCTAssertEqual((error as? SyncError)?.code, .invalidFlexibleSyncSubscriptions)
        }
        XCTAssertEqual(try sr.subscriptions().state, "error")
        XCTAssertNotNil(try sr.subscriptions().error)
        // Removing the subscription evicts the objects from the device, not from the server.
        let v4 = try sr.updateSubscriptions { set in set.removeAll() }
        try sr.waitForSubscriptions(version: v4, timeout: 10)
        _ = try r.refresh()
        XCTAssertEqual(try r.objects("Task").count(), 0)
        try sw.waitForDownload(timeout: 10)
        _ = try w.refresh()
        XCTAssertEqual(try w.objects("Task").count(), 10)
    }

    func testASubscriptionToTheWholeClassBesideANarrowerOneHoldsEverythingUntilItGoes() throws {
        let h = try SyncHarness()
        let (sw, w, sr, r) = try writerAndReader(h, reader: [
            SubscriptionQuery(name: "high", className: "Task", query: "priority > $0", arguments: [.int(5)]),
            SubscriptionQuery(name: "every", className: "Task", query: "TRUEPREDICATE"),
        ])
        defer { sw.release(); sr.release() }
        XCTAssertEqual(try r.objects("Task").count(), 10, "the whole class, whatever the other query")
        // Live: a low-priority object arrives too, and a change that leaves "high" keeps it.
        try w.write {
            _ = try w.create("Task", ["_id": .string("low"), "priority": .int(0)])
            _ = try w.create("Task", ["_id": .string("t9"), "priority": .int(1)], update: .modified)
        }
        try sw.waitForUpload(timeout: 10)
        try sr.waitForDownload(timeout: 10)
        _ = try r.refresh()
        XCTAssertEqual(try r.objects("Task").count(), 11)
        XCTAssertEqual(try r.object("Task", primaryKey: .string("t9"))?["priority"], .int(1))
        // Without it, the narrower query alone: the rest is evicted.
        let v2 = try sr.updateSubscriptions { set in set.removeAll { $0.name == "every" } }
        try sr.waitForSubscriptions(version: v2, timeout: 10)
        _ = try r.refresh()
        XCTAssertEqual(try r.objects("Task").documents().compactMap { $0["_id"]?.stringValue }.sorted(), ["t6", "t7", "t8"])
    }

    func testOfflineWritesUploadOnResumeAndSurviveRestarts() throws {
        let h = try SyncHarness()
        let appA = try h.app("a"), appB = try h.app("b")
        let ann = try runToCompletion { try await appA.login(.anonymous) }
        let bob = try runToCompletion { try await appB.login(.anonymous) }
        let all = [SubscriptionQuery(name: "all", className: "Task")]
        var (sa, storeA) = try h.open(ann, "a.realm", subscriptions: all)
        let (sb, storeB) = try h.open(bob, "b.realm", subscriptions: all)
        defer { sb.release() }
        try sa.waitForInitialDownload(timeout: 10)
        try sb.waitForInitialDownload(timeout: 10)
        sa.pause()
        try storeA.write { _ = try storeA.create("Task", ["_id": .string("offline"), "name": .string("written offline")]) }
        XCTAssertThrowsError(try sa.waitForUpload(timeout: 0.5))
        sa.resume()
        try sa.waitForUpload(timeout: 10)
        try sb.waitForDownload(timeout: 10)
        _ = try storeB.refresh()
        XCTAssertEqual(try storeB.object("Task", primaryKey: .string("offline"))?["name"], .string("written offline"))
        // The app closes and opens again: same file identity, resumes from its cursors.
        storeA.close()
        sa.release()
        try storeB.write { _ = try storeB.create("Task", ["_id": .string("while-away")]) }
        try sb.waitForUpload(timeout: 10)
        (sa, storeA) = try h.open(ann, "a.realm", subscriptions: all)
        defer { sa.release() }
        try sa.waitForDownload(timeout: 10)
        _ = try storeA.refresh()
        XCTAssertNotNil(try storeA.object("Task", primaryKey: .string("while-away")))
        XCTAssertEqual(try storeA.objects("Task").count(), 2)
    }

    /// A synced realm is `.full`: one that came back at an earlier commit after a power loss
    /// would number new commits as versions the server has, and lose them.
    func testASyncedRealmRefusesNormalDurability() throws {
        let h = try SyncHarness()
        let user = try runToCompletion { try await h.app("a").login(.anonymous) }
        var configuration = Configuration(path: h.directory + "/normal.realm", schema: SyncHarness.schema)
        configuration.durability = .normal
        XCTAssertThrowsError(try ClientSession.open(user: user, storeConfiguration: configuration, sync: ClientSyncConfiguration(mode: .flexible))) {
            XCTAssertEqual(($0 as? AtollError)?.code, .invalidArgument, "\($0)")
        }
        configuration.durability = .full
        try ClientSession.open(user: user, storeConfiguration: configuration, sync: ClientSyncConfiguration(mode: .flexible)).release()
    }

    /// On sockets: what it checks is the network transport's own timeout on a TCP peer that
    /// accepts and never answers.
    func testAnUnreachableServerIsATimeoutOrAConnectionFailure() throws {
        // A listener that never answers: connecting times out.
        let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(silent) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(silent, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        listen(silent, 1)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(silent, $0, &len) } }
        let port = Int(UInt16(bigEndian: addr.sin_port))

        let h = try SyncHarness()
        let app = try h.app("a")
        let user = try runToCompletion { try await app.login(.anonymous) }
        // The same user, through an app whose base URL is the silent listener (token reused).
        let offline = try ClientApp(configuration: ClientAppConfiguration(appId: "default", baseURL: "http://127.0.0.1:\(port)",
                                                               metadataDirectory: h.directory + "/a", connectTimeout: 0.5))
        guard let again = offline.currentUser else { return XCTFail("the user was not kept") }
        XCTAssertEqual(again.id, user.id)
        let configuration = Configuration(path: h.directory + "/offline.realm", schema: SyncHarness.schema)
        var sync = ClientSyncConfiguration(mode: .flexible)
        sync.initialSubscriptions = [SubscriptionQuery(name: "all", className: "Task")]
        XCTAssertThrowsError(try ClientSession.openRealm(user: again, storeConfiguration: configuration, sync: sync,
                                                       options: OpenOptions(downloadBeforeOpen: .always, timeout: 2))) { error in
            XCTAssertEqual((error as? SyncError)?.code, .timeout, "\(error)")
        }
        // AutoOpen: the data on the device opens instead.
        let s = try ClientSession.openRealm(user: again, storeConfiguration: configuration, sync: sync,
                                          options: OpenOptions(downloadBeforeOpen: .always, timeout: 1, offlineFallback: true))
        s.release()
    }

    /// A session paused while its connection was being made, and resumed before that attempt
    /// ended, connects again at once (it used to wait on the stale attempt, and then never
    /// connect: a pause cutting an upload left it "connecting" for good).
    func testAResumeDuringAConnectAttemptConnectsAgain() throws {
        // A transport whose connect never answers: each attempt hangs (for longer than the test).
        let attempts = Mutex(0)
        let hanging = ClientTransport(
            request: { _, _, _, _, _, _ in throw NetError.closed("no app API here") },
            connect: { _, _ in
                attempts.withLock { $0 += 1 }
                try await Task.sleep(for: .seconds(30))
                throw NetError.timeout("connect")
            })
        func waitForAttempts(_ n: Int, within seconds: Double) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if attempts.withLock({ $0 }) >= n { return true }
                usleep(20_000)
            }
            return false
        }

        let h = try SyncHarness()
        let app = try h.app("a")
        _ = try runToCompletion { try await app.login(.anonymous) }
        var configuration = h.appConfiguration("a")
        configuration.transport = hanging
        let slow = try ClientApp(configuration: configuration)
        guard let user = slow.currentUser else { return XCTFail("the user was not kept") }
        var sync = ClientSyncConfiguration(mode: .flexible)
        sync.initialSubscriptions = [SubscriptionQuery(name: "all", className: "Task")]
        let session = try ClientSession.open(user: user, storeConfiguration: Configuration(path: h.directory + "/slow.realm", schema: SyncHarness.schema),
                                           sync: sync)
        defer { session.release() }
        XCTAssertTrue(waitForAttempts(1, within: 10), "the session never tried to connect")
        session.pause()
        session.resume()
        XCTAssertTrue(waitForAttempts(2, within: 5), "the resumed session did not try to connect again while the first attempt hung")
        XCTAssertEqual(session.connectionState, .connecting)
    }

    func testClientResetAfterTheServerLostItsData() throws {
        let r = try ResetScenario(.recoverUnsyncedChanges)
        defer { r.finish() }
        // The unsynced change is recovered and uploaded; the server only had it from this client.
        r.waitForTheReset()
        XCTAssertNotNil(r.errors.all.first { $0.code == .clientReset })
        try r.session.waitForInitialDownload(timeout: 10)
        try r.session.waitForUpload(timeout: 10)
        _ = try r.store.refresh()
        // The realm is the server's state plus the recovered change: "synced" was lost with the
        // server's data, "unsynced" was written again and uploaded.
        XCTAssertNotNil(try r.store.object("Task", primaryKey: .string("unsynced")))
        XCTAssertNil(try r.store.object("Task", primaryKey: .string("synced")))
        let other = try ClientApp(configuration: ClientAppConfiguration(appId: "default", baseURL: "http://in-process", metadataDirectory: r.dir + "/other",
                                                                        transport: r.transport))
        let otherUser = try runToCompletion { try await other.login(.anonymous) }
        let otherSession = try ClientSession.open(user: otherUser, storeConfiguration: Configuration(path: r.dir + "/o.realm", schema: SyncHarness.schema), sync: r.sync)
        defer { otherSession.release() }
        try otherSession.waitForInitialDownload(timeout: 10)
        let otherStore = try Store(Configuration(path: r.dir + "/o.realm", schema: SyncHarness.schema))
        XCTAssertEqual(try otherStore.objects("Task").documents().compactMap { $0["_id"] }, [.string("unsynced")])
    }
}

/// A changeset whose clock is ahead of the server's by more than `maxClockAheadSeconds` would
/// win every conflict, and every device that heard of it would move its clock there.
final class ClockAheadTests: XCTestCase {
    func testAClockAheadIsRefusedUntilTheServerCatchesUpThenArrives() throws {
        let h = try SyncHarness(config: #"{"maxClockAheadSeconds": 2}"#)
        let errors = ErrorLog()
        let (sa, storeA, sb, storeB) = try h.twoClients(errors: errors)
        defer { sa.release(); sb.release() }

        // A's clock hears of a time 4 s ahead (as from a device whose wall clock is fast).
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        sa.clock.observe(Clock(milliseconds: now + 4_000, node: 0))
        let started = Date()
        try storeA.write { _ = try storeA.create("Task", ["_id": .string("early"), "name": .string("from a fast clock")]) }
        // Refused at first (it is more than 2 s ahead), then accepted once the server's time
        // is near enough: the client waits the `retryAfter` the server gave, not less.
        try sa.waitForUpload(timeout: 20)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1.5)
        let refusals = errors.all.filter { $0.code == .clockAhead }
        XCTAssertFalse(refusals.isEmpty, "\(errors.all)")
        XCTAssertTrue(refusals.allSatisfy { !$0.isFatal && $0.message.contains("ahead of the server's") }, "\(refusals)")
        XCTAssertLessThanOrEqual(refusals.count, 3, "the client retried without waiting: \(refusals)")
        try sb.waitForDownload(timeout: 10)
        _ = try storeB.refresh()
        XCTAssertEqual(try storeB.object("Task", primaryKey: .string("early"))?["name"], .string("from a fast clock"))
    }
}

/// The limits a config file sets, and the values it refuses.
final class ClientFilePermissionTests: XCTestCase {
    /// The users file holds refresh tokens: only its owner may read it, whatever the umask, and a
    /// metadata directory the app makes is its owner's only.
    func testTheUsersFileAndTheDirectoryMadeForItArePrivate() throws {
        let directory = NSTemporaryDirectory() + "atoll-client-modes-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let previous = umask(0o022)
        defer { umask(previous) }
        let app = try ClientApp(configuration: ClientAppConfiguration(appId: "modes", metadataDirectory: directory + "/meta"))
        _ = app
        func mode(_ path: String) throws -> Int {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            return (attributes[.posixPermissions] as? Int ?? -1) & 0o777
        }
        XCTAssertEqual(try mode(directory + "/meta"), 0o700)
        XCTAssertEqual(try mode(directory + "/meta/atoll-users-modes.realm"), 0o600)
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: directory + "/meta/atoll-users-modes.realm" + suffix) {
            XCTAssertEqual(try mode(directory + "/meta/atoll-users-modes.realm" + suffix), 0o600, suffix)
        }
    }
}

final class ServerLimitConfigurationTests: XCTestCase {
    func testLimitsParseAndBadValuesAreRefused() throws {
        let file = NSTemporaryDirectory() + "atoll-limits-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: file) }
        let defaults = ServerConfiguration()
        XCTAssertEqual([defaults.maxClockAheadSeconds, defaults.maxQueriesPerSecond, defaults.maxUploadsPerSecond], [60, 100, 1000])
        XCTAssertEqual([defaults.maxQueuedBytes, defaults.maxQueuedBytesPerUser, defaults.maxPendingBytesPerApp], [256 << 20, 256 << 20, 256 << 20])
        XCTAssertEqual([defaults.maxConnections, defaults.maxConnectionsPerAddress], [10_000, 256])
        XCTAssertEqual(defaults.headerTimeoutSeconds, 10)
        XCTAssertEqual(defaults.attemptLimits, AttemptLimits(failedLoginsPerAccount: 10, failedLoginsPerAddress: 60, signupsPerAddress: 100))
        let cases: [(key: String, good: [(String, Int)], bad: [String], read: (ServerConfiguration) -> Int)] = [
            ("maxClockAheadSeconds", [("0", 0), ("5", 5), ("315360000", 315_360_000)], ["-1", "315360001", "\"1h\"", "1.5"], \.maxClockAheadSeconds),
            ("maxQueriesPerSecond", [("0", 0), ("7", 7)], ["-1", "\"7\"", "2.5", "null"], \.maxQueriesPerSecond),
            ("maxQueuedBytes", [("1048576", 1 << 20), ("1099511627776", 1 << 40)], ["0", "1048575", "1099511627777", "\"1MB\""], \.maxQueuedBytes),
            ("maxQueuedBytesPerUser", [("33554432", 32 << 20)], ["-1", "1024", "null"], \.maxQueuedBytesPerUser),
            ("maxPendingBytesPerApp", [("33554432", 32 << 20)], ["0", "1.5e9"], \.maxPendingBytesPerApp),
            ("headerTimeoutSeconds", [("1", 1), ("2.5", 2), ("3600", 3600)], ["0", "-1", "3601", "\"10\""], { Int($0.headerTimeoutSeconds) }),
            ("maxConnections", [("1", 1), ("20000", 20_000)], ["0", "-5", "2.5", "\"many\""], \.maxConnections),
            ("maxConnectionsPerAddress", [("0", 0), ("16", 16)], ["-1", "1.5", "null"], \.maxConnectionsPerAddress),
            ("maxFailedLoginsPerAccountPerMinute", [("0", 0), ("3", 3)], ["-1", "1.5", "1000001"], \.attemptLimits.failedLoginsPerAccount),
            ("maxFailedLoginsPerAddressPerMinute", [("0", 0), ("30", 30)], ["-1", "\"30\""], \.attemptLimits.failedLoginsPerAddress),
            ("maxSignupsPerAddressPerMinute", [("0", 0), ("5", 5)], ["-2", "true"], \.attemptLimits.signupsPerAddress),
        ]
        XCTAssertEqual(defaults.durability, .full)
        for (text, expected) in [("\"full\"", Durability.full), ("\"normal\"", .normal)] {
            try #"{"durability": \#(text)}"#.write(toFile: file, atomically: true, encoding: .utf8)
            XCTAssertEqual(try ServerConfiguration(file: file).durability, expected)
        }
        for text in ["\"off\"", "1", "null"] {
            try #"{"durability": \#(text)}"#.write(toFile: file, atomically: true, encoding: .utf8)
            XCTAssertThrowsError(try ServerConfiguration(file: file), text)
        }
        for c in cases {
            for (text, expected) in c.good {
                try #"{"\#(c.key)": \#(text)}"#.write(toFile: file, atomically: true, encoding: .utf8)
                XCTAssertEqual(c.read(try ServerConfiguration(file: file)), expected, "\(c.key): \(text)")
            }
            for text in c.bad {
                try #"{"\#(c.key)": \#(text)}"#.write(toFile: file, atomically: true, encoding: .utf8)
                XCTAssertThrowsError(try ServerConfiguration(file: file), "\(c.key): \(text)") { error in
                    XCTAssertTrue("\(error)".contains(c.key), "\(error)")
                }
            }
        }
    }
}

final class ErrorLog: @unchecked Sendable {
    private let lock = NSLock()
    private var errors: [SyncError] = []
    func add(_ e: SyncError) { lock.withLock { errors.append(e) } }
    var all: [SyncError] { lock.withLock { errors } }
}

/// Changesets larger than a message: uploaded in parts, integrated whole, downloaded in batches.
final class LargeChangesetTests: XCTestCase {
    func testPartsReassembleToTheChangeset() throws {
        let big = SyncChangeset(clientVersion: 7, clock: Clock(milliseconds: 5, node: 3), instructions: (0..<60_000).map { i in
            SyncInstruction(.set, "Task", .string("t\(i % 100)"), path: [.key("name")], value: .string(String(repeating: "x", count: 60)))
        })
        let parts = ClientSession.parts(of: big)
        XCTAssertGreaterThan(parts.count, 1)
        var joined = [SyncInstruction]()
        for (i, text) in parts.enumerated() {
            XCTAssertLessThanOrEqual(text.utf8.count, ClientSession.partBytes)
            let value = try EJSON.parse(text)
            guard case .object(let d) = value else { return XCTFail("not an object") }
            XCTAssertEqual(d["more"], i < parts.count - 1 ? Value.bool(true) : nil)
            let cs = try SyncChangeset(wire: value)
            XCTAssertEqual(cs.clientVersion, 7)
            XCTAssertEqual(cs.clock, big.clock)
            joined += cs.instructions
        }
        XCTAssertEqual(joined, big.instructions)
        XCTAssertEqual(ClientSession.parts(of: SyncChangeset(clock: big.clock, instructions: Array(big.instructions.prefix(3)))).count, 1)
    }

    func testALargeTransactionReachesTheOtherClient() throws {
        let h = try SyncHarness()
        let appA = try h.app("a"), appB = try h.app("b")
        let ann = try runToCompletion { try await appA.login(.anonymous) }
        let bob = try runToCompletion { try await appB.login(.anonymous) }
        let all = [SubscriptionQuery(name: "all", className: "Task")]
        let (sa, a) = try h.open(ann, "a.realm", subscriptions: all)
        let (sb, b) = try h.open(bob, "b.realm", subscriptions: all)
        defer { sa.release(); sb.release() }
        try sa.waitForInitialDownload(timeout: 30)
        try sb.waitForInitialDownload(timeout: 30)
        let n = 20_000
        try a.write {
            _ = try a.createMany("Task", (0..<n).map { i in
                ["_id": .string("t\(i)"), "name": .string(String(repeating: "n", count: 100)), "priority": .int(Int64(i))]
            })
        }
        try sa.waitForUpload(timeout: 120)
        try sb.waitForDownload(timeout: 120)
        _ = try b.refresh()
        XCTAssertEqual(try b.objects("Task").count(), n)
        XCTAssertEqual(try b.object("Task", primaryKey: .string("t\(n - 1)"))?["priority"], .int(Int64(n - 1)))
    }
}

/// Access tokens: refreshed before they expire, and after the server refuses one.
final class TokenTests: XCTestCase {
    func testExpiringAndRefusedTokensAreRefreshed() throws {
        // Access tokens live 5 s here: every use is within a minute of expiry, so each refreshes.
        let h = try SyncHarness(config: #"{"apps": [{"id": "short", "developmentMode": true, "auth": {"accessTokenLifetime": 5}}, {"id": "default", "developmentMode": true}]}"#)
        let shortApp = try h.app("s", appId: "short")
        let shortUser = try runToCompletion { try await shortApp.login(.anonymous) }
        let first = shortUser.accessToken
        let refreshed = try runToCompletion { try await shortUser.validAccessToken() }
        XCTAssertNotEqual(refreshed, first)

        // A token the server refuses (here: its signature tampered, far from expiry) is replaced
        // through the refresh token: for an app API call, and when the sync connection is refused.
        let app = try h.app("a")
        let user = try runToCompletion { try await app.login(.anonymous) }
        let good = user.accessToken
        user.update(access: good + "x", refresh: user.refreshToken, state: .loggedIn)
        XCTAssertEqual(try runToCompletion { try await user.authorizedCall("GET", "/auth/profile") }["user_id"], .string(user.id))
        XCTAssertNotEqual(user.accessToken, good + "x")
        user.update(access: user.accessToken + "x", refresh: user.refreshToken, state: .loggedIn)
        let (session, _) = try h.open(user, "t.realm", subscriptions: [SubscriptionQuery(name: "all", className: "Task")])
        defer { session.release() }
        try session.waitForInitialDownload(timeout: 10)
        // A refresh token the server no longer honours logs the user out.
        let refresh = user.refreshToken
        _ = try runToCompletion { try await app.call("DELETE", "/auth/session", bearer: refresh) }
        XCTAssertThrowsError(try runToCompletion { try await user.refreshAccessToken() })
        XCTAssertFalse(user.isLoggedIn)
    }
}

/// Every credential and user operation of the client, against the server's app API.
final class ClientUserTests: XCTestCase {
    static let secret = "0123456789abcdef0123456789abcdef"

    func jwt(_ claims: String) -> String {
        func b64(_ bytes: [UInt8]) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        let body = b64(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + b64(Array(claims.utf8))
        return body + "." + b64(Crypto.hmacSHA256(key: Array(Self.secret.utf8), Array(body.utf8)))
    }

    func testEveryCredentialAndUserOperation() throws {
        let h = try SyncHarness(config: """
            {"apps": [{"id": "default", "developmentMode": true,
                       "auth": {"customJWT": {"algorithm": "HS256", "secret": "\(Self.secret)"}}}]}
            """)
        let app = try h.app("a")
        // Email/password.
        try runToCompletion { try await app.registerEmail("ann@example.com", password: "secret-1") }
        XCTAssertThrowsError(try runToCompletion { try await app.login(.emailPassword(email: "ann@example.com", password: "wrong-1")) }) {
            XCTAssertEqual(($0 as? SyncError)?.code, .authFailed)
        }
        let ann = try runToCompletion { try await app.login(.emailPassword(email: "ann@example.com", password: "secret-1")) }
        XCTAssertEqual(app.currentUser?.id, ann.id)
        XCTAssertEqual(ann.provider, "local-userpass")
        // A user API key (made with the refresh token, as Realm does) logs the same user in.
        let created = try runToCompletion { try await app.call("POST", "/auth/api_keys", body: .doc(["name": .string("laptop")]), bearer: ann.refreshToken) }
        guard let key = created["key"]?.stringValue else { return XCTFail("no key in \(created)") }
        try runToCompletion { try await app.logOut(ann) }
        XCTAssertNil(app.currentUser)
        let again = try runToCompletion { try await app.login(.apiKey(key)) }
        XCTAssertEqual(again.id, ann.id)
        // Custom JWT: the same external id is the same user.
        let exp = Int(Date().timeIntervalSince1970) + 600
        let t1 = jwt(#"{"sub":"ext-1","exp":\#(exp)}"#), t2 = jwt(#"{"sub":"ext-1","exp":\#(exp + 1)}"#)
        let expired = jwt(#"{"sub":"ext-1","exp":1}"#)
        let j1 = try runToCompletion { try await app.login(.jwt(t1)) }
        let j2 = try runToCompletion { try await app.login(.jwt(t2)) }
        XCTAssertEqual(j1.id, j2.id)
        XCTAssertThrowsError(try runToCompletion { try await app.login(.jwt(expired)) })
        // Users, switching, removing, deleting.
        let anon = try runToCompletion { try await app.login(.anonymous) }
        XCTAssertEqual(app.currentUser?.id, anon.id)
        XCTAssertEqual(Set(app.allUsers.filter(\.isLoggedIn).map(\.id)), [ann.id, j1.id, anon.id])
        try app.switchUser(again)
        XCTAssertEqual(app.currentUser?.id, ann.id)
        try runToCompletion { try await app.remove(anon) }
        XCTAssertFalse(app.allUsers.contains { $0.id == anon.id })
        try runToCompletion { try await app.delete(ann) }
        XCTAssertThrowsError(try runToCompletion { try await app.login(.apiKey(key)) })
        // A restarted app (a new object on the same users file) still has its logged-in user.
        let restarted = try ClientApp(configuration: app.configuration)
        XCTAssertEqual(restarted.allUsers.filter(\.isLoggedIn).map(\.id), [j1.id])
    }
}

/// The server a scenario's clients reach now.
final class CurrentServer: Sendable {
    let server = Mutex<SyncServer?>(nil)
}

/// A client that synced, wrote while paused, and then found the server without its data (the
/// server restarted with its users but not its data.realm, reached at the same URL); the session is
/// resumed, so the reset is under way.
final class ResetScenario {
    let dir = NSTemporaryDirectory() + "atoll-reset-\(UUID().uuidString)"
    let store: Store
    let session: ClientSession
    let errors = ErrorLog()
    let sync: ClientSyncConfiguration
    /// The server after the loss.
    let server: SyncServer
    /// The clients' way to the server: to the first, and after the loss to the second (as a
    /// server restarted on the same port is reached at the same URL).
    let transport: ClientTransport
    private let current = CurrentServer()

    init(_ mode: ClientResetStrategy) throws {
        transport = .forwarding { [current] in current.server.withLock { $0?.inProcessTransport } }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataDirectory = dir + "/server"
        configuration.logLevel = .error
        configuration.postgresURL = try TestPostgres.syncStoreURL()
        let first = try SyncServer(configuration: configuration)
        try first.start(listening: false)
        current.server.withLock { $0 = first }
        let app = try ClientApp(configuration: ClientAppConfiguration(appId: "default", baseURL: "http://in-process",
                                                                      metadataDirectory: dir + "/app", transport: transport))
        let user = try runToCompletion { try await app.login(.anonymous) }
        let errors = self.errors
        app.addErrorHandler { e, _ in errors.add(e) }
        var sync = ClientSyncConfiguration(mode: .flexible)
        sync.initialSubscriptions = [SubscriptionQuery(name: "all", className: "Task")]
        sync.clientResetMode = mode
        self.sync = sync
        let config = Configuration(path: dir + "/c.realm", schema: SyncHarness.schema)
        let session = try ClientSession.open(user: user, storeConfiguration: config, sync: sync)
        let store = try Store(config)
        self.session = session
        self.store = store
        try session.waitForInitialDownload(timeout: 10)
        try store.write { _ = try store.create("Task", ["_id": .string("synced")]) }
        try session.waitForUpload(timeout: 10)
        session.pause()
        try store.write { _ = try store.create("Task", ["_id": .string("unsynced")]) }
        _ = try runToCompletion { await first.shutdown() }
        if let url = configuration.postgresURL {
            try TestPostgres.forgetSyncData(url, app: "default")
        } else {
            try FileManager.default.removeItem(atPath: dir + "/server/default/data.realm")
        }
        server = try SyncServer(configuration: configuration)
        try server.start(listening: false)
        current.server.withLock { $0 = server }
        session.resume()
    }

    /// Until the session reported its client reset (at most 15 s).
    func waitForTheReset() {
        let deadline = Date().addingTimeInterval(15)
        while errors.all.first(where: { $0.code == .clientReset }) == nil, Date() < deadline { usleep(50_000) }
    }

    func finish() {
        session.release()
        store.close()
        let server = self.server
        _ = try? runToCompletion { await server.shutdown() }
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// Client reset modes other than recovery.
final class ClientResetModeTests: XCTestCase {
    func testDiscardDropsUnsyncedChanges() throws {
        let r = try ResetScenario(.discardUnsyncedChanges)
        defer { r.finish() }
        r.waitForTheReset()
        try r.session.waitForInitialDownload(timeout: 10)
        _ = try r.store.refresh()
        XCTAssertEqual(try r.store.objects("Task").count(), 0, "the server lost 'synced'; 'unsynced' was discarded")
        XCTAssertEqual(r.errors.all.first { $0.code == .clientReset }?.isFatal, false)
    }

    func testManualReportsAndStops() throws {
        let r = try ResetScenario(.manual)
        defer { r.finish() }
        let deadline = Date().addingTimeInterval(15)
        while r.session.state != .inactive, Date() < deadline { usleep(50_000) }
        XCTAssertEqual(r.session.state, .inactive)
        XCTAssertEqual(r.errors.all.first { $0.code == .clientReset }?.isFatal, true)
        _ = try r.store.refresh()
        XCTAssertEqual(try r.store.objects("Task").count(), 2, "a manual reset leaves the file alone")
    }
}
