import Atoll
import AtollTestSupport
import Foundation
import Observation
import Synchronization
import XCTest
// Only the server's two types this test needs (the rest of AtollServer is not the typed API's).
import struct AtollServer.ServerConfiguration
import class AtollServer.SyncServer

// The sync API of the typed layer, as Realm's documentation samples use it, against a server in
// this process (reached through its in-process transport, real files in a temporary directory).

/// The `Task` of Realm's samples (`Task` is Swift's concurrency type here).
final class Todo: Object {
    @Persisted(primaryKey: true) var _id: ObjectId
    @Persisted var name = ""
    @Persisted var owner_id = ""
    @Persisted var priority = 0

    override class func className() -> String { "Task" }

    convenience init(_ name: String, owner: String, priority: Int = 0) {
        self.init()
        self.name = name
        self.owner_id = owner
        self.priority = priority
    }
}

/// A server with its data, and the apps' metadata, in a temporary directory. Its apps reach it
/// through its in-process transport (its HTTP routes, and a `MemorySocket` for sync: no port).
final class SyncFixture: @unchecked Sendable {
    let directory: URL
    let server: SyncServer
    /// The transport the apps are given: to this server, or to a server that comes back in its
    /// place (`init(..., replacing:)`), as a server restarted on the same port is reached.
    let transport: ClientTransport
    private let current: CurrentServer
    private let lock = NSLock()
    private var stopped = false

    /// The PostgreSQL database of a run on PostgreSQL (docs/testing.md), nil on SQLite.
    let postgresURL: String?

    /// `postgresURL`: the database of an earlier fixture, for a server that comes back on it;
    /// `replacing`: that fixture, whose apps then reach this server.
    init(directory: URL, config: String?, postgresURL: String? = nil, replacing earlier: SyncFixture? = nil) throws {
        self.directory = directory
        var configuration = ServerConfiguration()
        if let config {
            let file = directory.appendingPathComponent("server.json").path
            try config.write(toFile: file, atomically: true, encoding: .utf8)
            configuration = try ServerConfiguration(file: file)
        }
        configuration.port = 0
        configuration.dataDirectory = directory.appendingPathComponent("server").path
        configuration.logLevel = .error
        self.postgresURL = try postgresURL ?? TestPostgres.syncStoreURL()
        configuration.postgresURL = self.postgresURL
        server = try SyncServer(configuration: configuration)
        try server.start(listening: false)
        current = earlier?.current ?? CurrentServer()
        current.server.withLock { [server] in $0 = server }
        transport = earlier?.transport ?? .forwarding { [current] in current.server.withLock { $0?.inProcessTransport } }
    }

    /// Shuts the server down (once): it answers no more afterwards.
    func stop() async {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        if first { await server.shutdown() }
    }

    /// An app of the server, as one device sees it (its own metadata directory).
    func app(_ device: String, id: String = "default") -> App {
        App(id: id, configuration: AppConfiguration(
            baseURL: "http://in-process", metadataDirectory: directory.appendingPathComponent(device).path,
            syncTimeouts: SyncTimeoutOptions(connectTimeout: 5, downloadTimeout: 15), transport: transport))
    }

    /// Two anonymous users of one device's app, each with a realm subscribed to every task.
    func twoUsers() async throws -> (ann: User, annRealm: Realm, annSession: SyncSession,
                                     bob: User, bobRealm: Realm, bobSession: SyncSession) {
        let app = app("device")
        let ann = try await app.login(credentials: .anonymous)
        let bob = try await app.login(credentials: .anonymous)
        let annRealm = try await openAll(ann)
        let bobRealm = try await openAll(bob)
        return (ann, annRealm, try XCTUnwrap(annRealm.syncSession), bob, bobRealm, try XCTUnwrap(bobRealm.syncSession))
    }

    /// A user's flexible sync realm subscribed to every task, with the server's data.
    func openAll(_ user: User) async throws -> Realm {
        var config = user.flexibleSyncConfiguration(initialSubscriptions: { subs in
            subs.append(QuerySubscription<Todo>(name: "all"))
        })
        config.objectTypes = [Todo.self]
        return try await Realm(configuration: config, downloadBeforeOpen: .always)
    }
}

/// The server a fixture's apps reach now.
final class CurrentServer: Sendable {
    let server = Mutex<SyncServer?>(nil)
}

/// The states an `AsyncOpen` or `AutoOpen` went through, tracked with Observation.
final class StateLog: @unchecked Sendable {
    private let lock = NSLock()
    private var states: [AsyncOpenState] = []
    let finished = XCTestExpectation(description: "the open finished")

    func append(_ state: AsyncOpenState) {
        let done = lock.withLock { () -> Bool in
            states.append(state)
            switch state {
            case .open, .error: return states.filter(\.isFinal).count == 1
            default: return false
            }
        }
        if done { finished.fulfill() }
    }

    var all: [AsyncOpenState] { lock.withLock { states } }
}

extension AsyncOpenState {
    var isFinal: Bool {
        switch self {
        case .open, .error: return true
        default: return false
        }
    }
}

/// Records every state of `read()`: each change re-registers at once, on the thread that made
/// it (the state is stored before observers are told), so no state is missed.
func track(_ read: @escaping @Sendable () -> AsyncOpenState, into log: StateLog) {
    let state = withObservationTracking { read() } onChange: { track(read, into: log) }
    log.append(state)
}

final class SyncTests: XCTestCase {
    /// Runs a test against a new server, shut down afterwards.
    func withServer(config: String? = nil, _ body: (SyncFixture) async throws -> Void) async throws {
        let directory = URL(fileURLWithPath: temporaryRealmPath()).deletingLastPathComponent()
        let fixture = try SyncFixture(directory: directory, config: config)
        do {
            try await body(fixture)
        } catch {
            await fixture.stop()
            throw error
        }
        await fixture.stop()
    }

    func names(_ results: Results<Todo>) -> [String] { results.map(\.name).sorted() }

    // MARK: - Opening

    func testOpenWithInitialSubscriptionsRerunOnOpenAndDownloadBeforeOpen() async throws {
        try await withServer { f in
            let app = f.app("device")
            let writer = try await app.login(credentials: .anonymous)
            let user = try await app.login(credentials: .anonymous)
            XCTAssertEqual(app.currentUser, user)
            let shared = try await f.openAll(writer)
            try shared.write {
                shared.add(Todo("a", owner: user.id, priority: 3))
                shared.add(Todo("b", owner: user.id, priority: 7))
                shared.add(Todo("other's", owner: writer.id, priority: 9))
            }
            try await XCTUnwrap(shared.syncSession).wait(for: .upload)

            // The block runs at each open (rerunOnOpen): the threshold it reads is the one of the open.
            let threshold = Threshold(5)
            var config = user.flexibleSyncConfiguration(initialSubscriptions: { subs in
                let minimum = threshold.value
                subs.append(QuerySubscription<Todo>(name: "mine") { $0.owner_id == user.id && $0.priority >= minimum })
            }, rerunOnOpen: true)
            config.objectTypes = [Todo.self]

            let session: SyncSession
            weak var weakRealm: Realm?
            do {
                let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)
                XCTAssertEqual(names(realm.objects(Todo.self)), ["b"])
                let subs = realm.subscriptions
                XCTAssertEqual(subs.count, 1)
                XCTAssertEqual(subs.first(named: "mine")?.queryString, "(owner_id == $0 AND priority >= $1)")
                XCTAssertEqual(subs.first(named: "mine")?.objectClassName, "Task")
                XCTAssertEqual(subs.state, .complete)
                session = try XCTUnwrap(realm.syncSession)
                XCTAssertEqual(session.state, .active)
                weakRealm = realm
            }
            XCTAssertNil(weakRealm, "nothing else holds the realm")
            // The realm is gone: its session stopped with it.
            XCTAssertEqual(session.state, .inactive)

            // A background refresh: open again waiting for the server's newest data.
            try shared.write { shared.add(Todo("c", owner: user.id, priority: 1)) }
            try await XCTUnwrap(shared.syncSession).wait(for: .upload)
            threshold.value = 0
            let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)
            XCTAssertEqual(names(realm.objects(Todo.self)), ["a", "b", "c"])
            XCTAssertEqual(realm.subscriptions.count, 1, "the rerun replaced 'mine'")
        }
    }

    func testSubscriptionsUpdateFirstNamedDuplicateNameAndSubscribe() async throws {
        try await withServer { f in
            let app = f.app("device")
            let writer = try await app.login(credentials: .anonymous)
            let shared = try await f.openAll(writer)
            try shared.write {
                for (name, priority) in [("a", 3), ("b", 7), ("c", 9)] { shared.add(Todo(name, owner: writer.id, priority: priority)) }
            }
            try await XCTUnwrap(shared.syncSession).wait(for: .upload)

            let user = try await app.login(credentials: .anonymous)
            var config = user.flexibleSyncConfiguration()
            config.objectTypes = [Todo.self]
            let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)
            let subs = realm.subscriptions
            XCTAssertEqual(subs.count, 0)
            XCTAssertEqual(realm.objects(Todo.self).count, 0)

            try await subs.update {
                subs.append(QuerySubscription<Todo>(name: "high") { $0.priority > 5 })
            }
            XCTAssertEqual(names(realm.objects(Todo.self)), ["b", "c"])
            XCTAssertEqual(subs.first(named: "high")?.queryString, "priority > $0")
            XCTAssertEqual(subs.state, .complete)

            // Appending a name that is in the set is an error, and changes nothing.
            let version = subs.version
            do {
                try await subs.update { subs.append(QuerySubscription<Todo>(name: "high") { $0.priority > 1 }) }
                XCTFail("appending an existing name succeeded")
            } catch let error as AtollError {
                XCTAssertEqual(error.code, .subscriptionExists)
                XCTAssertTrue(error.message.contains("'high'"), error.message)
            }
            XCTAssertEqual(subs.version, version)
            XCTAssertEqual(subs.count, 1)

            // Outside update nothing changes; the error is kept.
            subs.append(QuerySubscription<Todo>(name: "stray"))
            XCTAssertEqual(realm.lastError?.code, .invalidArgument)
            XCTAssertEqual(subs.count, 1)

            // Replace one subscription by another, in the query language.
            try await subs.update {
                subs.remove(named: "high")
                subs.append(QuerySubscription<Todo>(name: "low", where: "priority <= $0", 3))
            }
            XCTAssertNil(subs.first(named: "high"))
            XCTAssertEqual(names(realm.objects(Todo.self)), ["a"])

            // Results.subscribe: a new name waits; the same query again makes no new version.
            let high = try await realm.objects(Todo.self).where { $0.priority > 5 }.subscribe(name: "high", waitForSync: .always)
            XCTAssertEqual(names(high), ["b", "c"])
            XCTAssertEqual(subs.count, 2)
            let settled = subs.version
            _ = try await realm.objects(Todo.self).where { $0.priority > 5 }.subscribe(name: "high")
            XCTAssertEqual(subs.version, settled)

            // A subscription's query changed in place.
            try await subs.update {
                subs.first(named: "low")?.updateQuery(toType: Todo.self) { $0.priority == 9 }
            }
            XCTAssertEqual(subs.first(named: "low")?.queryString, "priority == $0")
            XCTAssertEqual(names(realm.objects(Todo.self)), ["b", "c"])

            // Unsubscribing removes the subscription of the results' query.
            realm.objects(Todo.self).where { $0.priority > 5 }.unsubscribe()
            XCTAssertNil(subs.first(named: "high"))
            XCTAssertEqual(subs.map { $0.name }, ["low"])
        }
    }

    // MARK: - Partition sync and copies

    static let partitionApp = """
    {"apps": [{"id": "tasks", "developmentMode": true, "sync": {"mode": "partition", "partitionKey": "owner_id"}}]}
    """

    /// A new anonymous user of the partition app on a server started for the test, and the
    /// configuration of its own partition's realm.
    private func withPartitionUser(_ body: (SyncFixture, User, Realm.Configuration) async throws -> Void) async throws {
        try await withServer(config: Self.partitionApp) { f in
            let user = try await f.app("device", id: "tasks").login(credentials: .anonymous)
            var config = user.configuration(partitionValue: user.id)
            config.objectTypes = [Todo.self]
            try await body(f, user, config)
        }
    }

    func testAPartitionRealmOpensAgainWaitingForTheServer() async throws {
        try await withPartitionUser { f, user, config in
            // The server holds the partition's data before this file first opens, so that the
            // file's cursor is past 0 afterwards: the next open resumes rather than bootstraps.
            var writer = config
            writer.fileURL = f.directory.appendingPathComponent("writer.realm")
            do {
                let realm = try await Realm(configuration: writer, downloadBeforeOpen: .always)
                try realm.write { realm.add(Todo("first", owner: user.id, priority: 1)) }
                try await XCTUnwrap(realm.syncSession).wait(for: .upload)
            }
            do {
                let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)
                XCTAssertEqual(names(realm.objects(Todo.self)), ["first"])
            }
            // Opened again, as an app does at its next launch: it waits for the server, which
            // has nothing new, and opens. (It used to wait for a subscription set that a
            // partition file never stores as complete, and time out.)
            let started = Date()
            let again = try await Realm(configuration: config, downloadBeforeOpen: .always)
            XCTAssertEqual(names(again.objects(Todo.self)), ["first"])
            XCTAssertLessThan(Date().timeIntervalSince(started), 5, "opened once the server answered, not after a timeout")
        }
    }

    func testPartitionSyncConfiguration() async throws {
        try await withPartitionUser { f, user, config in
            XCTAssertEqual(config.syncConfiguration?.partitionValue, .string(user.id))
            XCTAssertEqual(config.syncConfiguration?.enableFlexibleSync, false)

            let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)
            try realm.write {
                realm.add(Todo("write docs", owner: user.id, priority: 2))
                realm.add(Todo("ship", owner: user.id, priority: 8))
            }
            try await XCTUnwrap(realm.syncSession).wait(for: .upload)

            // The same partition on another device (another file): opened at once, then waiting
            // for the download moves the realm to the server's data.
            var elsewhere = config
            elsewhere.fileURL = f.directory.appendingPathComponent("elsewhere.realm")
            let copy = try Realm(configuration: elsewhere)
            try await XCTUnwrap(copy.syncSession).wait(for: .download)
            XCTAssertEqual(names(copy.objects(Todo.self)), ["ship", "write docs"])

            // A partition realm has no subscriptions to update.
            do {
                try await copy.subscriptions.update {}
                XCTFail("a partition realm updated subscriptions")
            } catch let error as AtollError {
                XCTAssertEqual(error.code, .invalidArgument)
            }
        }
    }

    func testWriteCopyFromLocalToSyncedAndBack() async throws {
        try await withServer(config: Self.partitionApp) { f in
            let app = f.app("device", id: "tasks")
            let user = try await app.login(credentials: .anonymous)
            let local = try Realm(configuration: Realm.Configuration(fileURL: f.directory.appendingPathComponent("local.realm"),
                                                                     objectTypes: [Todo.self]))
            try local.write {
                local.add(Todo("plan", owner: user.id))
                local.add(Todo("build", owner: user.id))
            }

            var synced = user.configuration(partitionValue: user.id)
            synced.objectTypes = [Todo.self]
            try local.writeCopy(configuration: synced)
            let realm = try await Realm(configuration: synced, downloadBeforeOpen: .always)
            XCTAssertEqual(names(realm.objects(Todo.self)), ["build", "plan"])
            try await XCTUnwrap(realm.syncSession).wait(for: .upload)

            var elsewhere = synced
            elsewhere.fileURL = f.directory.appendingPathComponent("elsewhere.realm")
            let downloaded = try await Realm(configuration: elsewhere, downloadBeforeOpen: .always)
            XCTAssertEqual(names(downloaded.objects(Todo.self)), ["build", "plan"], "the copy's objects were uploaded")

            // Synced → local: the data without the sync state.
            let back = Realm.Configuration(fileURL: f.directory.appendingPathComponent("back.realm"), objectTypes: [Todo.self])
            try realm.writeCopy(configuration: back)
            let backRealm = try Realm(configuration: back)
            XCTAssertEqual(names(backRealm.objects(Todo.self)), ["build", "plan"])
            XCTAssertNil(backRealm.syncSession)
        }
    }

    func testALocalRealmsFileIsNotOpenedAsSynced() async throws {
        try await withServer(config: Self.partitionApp) { f in
            let app = f.app("device", id: "tasks")
            let user = try await app.login(credentials: .anonymous)
            let url = f.directory.appendingPathComponent("was-local.realm")
            let local = try Realm(configuration: Realm.Configuration(fileURL: url, objectTypes: [Todo.self]))
            try local.write { local.add(Todo("plan", owner: user.id)) }

            // Its change log kept no values, so nothing of it could be uploaded: refused, and
            // the file is left a local realm.
            var synced = user.configuration(partitionValue: user.id)
            synced.objectTypes = [Todo.self]
            synced.fileURL = url
            XCTAssertThrowsError(try Realm(configuration: synced)) { error in
                XCTAssertTrue("\(error)".contains("writeCopy"), "\(error)")
            }
            let again = try Realm(configuration: Realm.Configuration(fileURL: url, objectTypes: [Todo.self]))
            XCTAssertEqual(names(again.objects(Todo.self)), ["plan"])
            XCTAssertNil(again.syncSession)
        }
    }

    // MARK: - Errors

    func testErrorHandlerReceivesCompensatingWrites() async throws {
        let owners = """
        {"apps": [{"id": "owners", "developmentMode": true, "sync": {"mode": "flexible", "partitionKey": "owner_id"},
          "rules": {"Task": {"roles": [{"name": "owner", "read": "owner_id == %user.id", "write": "owner_id == %user.id"}]}}}]}
        """
        try await withServer(config: owners) { f in
            let app = f.app("device", id: "owners")
            let user = try await app.login(credentials: .anonymous)
            let rejected = Collector<(SyncError, User?)>()
            app.syncManager.errorHandler = { error, session in
                guard let error = error as? SyncError, error.code == .writeRejected else { return }
                rejected.append((error, session?.parentUser()))
            }
            defer { app.syncManager.errorHandler = nil }
            var config = user.flexibleSyncConfiguration(initialSubscriptions: { subs in
                subs.append(QuerySubscription<Todo>(name: "mine") { $0.owner_id == user.id })
            })
            config.objectTypes = [Todo.self]
            let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)

            let forged = Todo("not mine", owner: "someone-else")
            let forgedId = forged._id
            try realm.write {
                realm.add(Todo("mine", owner: user.id))
                realm.add(forged)
            }
            await fulfillment(of: [rejected.expectation(count: 1)], timeout: 15)
            let (error, sessionUser) = try XCTUnwrap(rejected.all.first)
            XCTAssertEqual(sessionUser, user)
            XCTAssertFalse(error.isFatal)
            XCTAssertEqual(error.compensatingWrites.map(\.className), ["Task"])
            XCTAssertEqual(error.compensatingWrites.first?.primaryKey, .objectId(forgedId))

            // The server undid the forged write on the device too.
            let session = try XCTUnwrap(realm.syncSession)
            try await session.wait(for: .upload)
            try await session.wait(for: .download)
            XCTAssertNil(realm.object(ofType: Todo.self, forPrimaryKey: forgedId))
            XCTAssertEqual(names(realm.objects(Todo.self)), ["mine"])
        }
    }

    // MARK: - AsyncOpen and AutoOpen

    func testAsyncOpenReportsProgressThenOpens() async throws {
        try await withServer { f in
            let app = f.app("device")
            let writer = try await app.login(credentials: .anonymous)
            let shared = try await f.openAll(writer)
            try shared.write {
                for i in 0..<20 { shared.add(Todo("task \(i)", owner: writer.id, priority: i)) }
            }
            try await XCTUnwrap(shared.syncSession).wait(for: .upload)

            let user = try await app.login(credentials: .anonymous)
            var config = user.flexibleSyncConfiguration(initialSubscriptions: { subs in
                subs.append(QuerySubscription<Todo>(name: "urgent") { $0.priority >= 10 })
            })
            config.objectTypes = [Todo.self]
            let open = AsyncOpen(app: app, configuration: config, timeout: 15)
            let log = StateLog()
            track({ open.state }, into: log)
            await fulfillment(of: [log.finished], timeout: 20)

            guard case .open(let realm) = open.state else { return XCTFail("not open: \(open.state)") }
            XCTAssertEqual(realm.objects(Todo.self).count, 10)
            XCTAssertEqual(realm.subscriptions.first(named: "urgent")?.queryString, "priority >= $0")
            let progress = log.all.compactMap { state -> Progress? in
                if case .progress(let p) = state { return p }
                return nil
            }
            XCTAssertFalse(progress.isEmpty, "no progress among \(log.all)")
            XCTAssertEqual(progress.last?.fractionCompleted, 1)
            XCTAssertEqual(try XCTUnwrap(realm.syncSession).state, .active)
        }
    }

    func testAsyncOpenFailsAndAutoOpenOpensLocalDataWhenTheServerIsUnreachable() async throws {
        try await withServer { f in
            let app = f.app("device")
            let user = try await app.login(credentials: .anonymous)
            var config = user.flexibleSyncConfiguration(initialSubscriptions: { subs in
                subs.append(QuerySubscription<Todo>(name: "all"))
            })
            config.objectTypes = [Todo.self]
            let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)
            try realm.write { realm.add(Todo("kept on the device", owner: user.id)) }
            try await XCTUnwrap(realm.syncSession).wait(for: .upload)

            await f.stop()   // the server answers no more from now on

            let asyncOpen = AsyncOpen(app: app, configuration: config, timeout: 1)
            let autoOpen = AutoOpen(app: app, configuration: config, timeout: 1)
            let asyncLog = StateLog(), autoLog = StateLog()
            track({ asyncOpen.state }, into: asyncLog)
            track({ autoOpen.state }, into: autoLog)
            await fulfillment(of: [asyncLog.finished, autoLog.finished], timeout: 15)

            guard case .error(let error) = asyncOpen.state else { return XCTFail("AsyncOpen did not fail: \(asyncOpen.state)") }
            let code = (error as? SyncError)?.code
            XCTAssertTrue(code == .timeout || code == .connectionFailed, "\(error)")

            guard case .open(let local) = autoOpen.state else { return XCTFail("AutoOpen did not open: \(autoOpen.state)") }
            XCTAssertEqual(names(local.objects(Todo.self)), ["kept on the device"])
        }
    }

    func testAsyncOpenWaitsForAUserToLogIn() async throws {
        try await withServer { f in
            let app = f.app("new device")
            XCTAssertNil(app.currentUser)
            // No sync configuration: the user who logs in gets their flexible sync realm.
            let open = AsyncOpen(app: app, configuration: Realm.Configuration(objectTypes: [Todo.self]), timeout: 10)
            let log = StateLog()
            track({ open.state }, into: log)
            guard case .waitingForUser = open.state else { return XCTFail("\(open.state)") }

            let user = try await app.login(credentials: .anonymous)
            await fulfillment(of: [log.finished], timeout: 15)
            guard case .open(let realm) = open.state else { return XCTFail("not open: \(open.state)") }
            XCTAssertEqual(realm.configuration.syncConfiguration?.user, user)
            XCTAssertEqual(realm.configuration.syncConfiguration?.enableFlexibleSync, true)
            XCTAssertEqual(realm.configuration.fileURL?.lastPathComponent, "flx_sync_default.realm")
        }
    }

    func testAnAppWithAnInvalidIdFailsWhenUsed() async throws {
        let app = App(id: "not an id!", configuration: AppConfiguration(baseURL: "http://127.0.0.1:9"))
        XCTAssertNil(app.currentUser)
        XCTAssertTrue(app.allUsers.isEmpty)
        do {
            _ = try await app.login(credentials: .anonymous)
            XCTFail("logged in to an app with an invalid id")
        } catch let error as AtollError {
            XCTAssertEqual(error.code, .invalidArgument)
            XCTAssertTrue(error.message.contains("appId"), error.message)
        }
    }

    // MARK: - Sessions

    func testOfflineWriteIsUploadedOnResume() async throws {
        try await withServer { f in
            let (ann, annRealm, annSession, _, bobRealm, bobSession) = try await f.twoUsers()

            annSession.pause()
            XCTAssertEqual(annSession.state, .paused)
            try annRealm.write { annRealm.add(Todo("written offline", owner: ann.id)) }
            try await bobSession.wait(for: .download)
            XCTAssertEqual(bobRealm.objects(Todo.self).count, 0, "a paused session uploaded")

            // The first report after resuming may restate what the server had (not complete).
            let completed = Collector<SyncSession.Progress>()
            let progressToken = annSession.addProgressNotification(for: .upload, mode: .forCurrentlyOutstandingWork) { progress in
                if progress.isTransferComplete { completed.append(progress) }
            }
            defer { progressToken?.invalidate() }
            annSession.resume()
            XCTAssertEqual(annSession.state, .active)
            try await annSession.wait(for: .upload)
            await fulfillment(of: [completed.expectation(count: 1)], timeout: 10)
            let done = try XCTUnwrap(completed.all.first)
            XCTAssertEqual(done.transferredBytes, done.transferrableBytes)
            try await bobSession.wait(for: .download)
            XCTAssertEqual(names(bobRealm.objects(Todo.self)), ["written offline"])
        }
    }

    func testCountersAddUpAcrossDevices() async throws {
        try await withServer { f in
            let (ann, annRealm, annSession, _, bobRealm, bobSession) = try await f.twoUsers()
            let post = Todo("liked", owner: ann.id, priority: 10)
            try annRealm.write { annRealm.add(post) }
            try await annSession.wait(for: .upload)
            try await bobSession.wait(for: .download)
            let bobsPost = try XCTUnwrap(bobRealm.object(ofType: Todo.self, forPrimaryKey: post._id))

            // Both add while apart: the adds sum, where two assignments would keep one.
            annSession.pause()
            bobSession.pause()
            try annRealm.write {
                try annRealm.increment(post, \.priority)
                try annRealm.increment(post, \.priority, by: 2)
            }
            try bobRealm.write { try bobRealm.increment(bobsPost, \.priority, by: 5) }
            XCTAssertEqual(post.priority, 13)
            XCTAssertEqual(bobsPost.priority, 15)
            annSession.resume()
            bobSession.resume()
            try await annSession.wait(for: .upload)
            try await bobSession.wait(for: .upload)
            try await annSession.wait(for: .download)
            try await bobSession.wait(for: .download)
            annRealm.refresh()
            bobRealm.refresh()
            XCTAssertEqual(post.priority, 18)
            XCTAssertEqual(bobsPost.priority, 18)

            // Outside a write, on an unmanaged object, through a key path that is not one property.
            XCTAssertThrowsError(try annRealm.increment(post, \.priority)) { XCTAssertEqual(($0 as? AtollError)?.code, .notInWrite) }
            try annRealm.write {
                XCTAssertThrowsError(try annRealm.increment(Todo("loose", owner: ""), \.priority)) {
                    XCTAssertEqual(($0 as? AtollError)?.code, .notFound)
                }
                XCTAssertThrowsError(try annRealm.increment(post, \.name.count)) {
                    XCTAssertEqual(($0 as? AtollError)?.code, .invalidArgument)
                }
            }
            XCTAssertEqual(post.priority, 18)
        }
    }

    func testClientResetRecoversUnsyncedChanges() async throws {
        let directory = URL(fileURLWithPath: temporaryRealmPath()).deletingLastPathComponent()
        let first = try SyncFixture(directory: directory, config: nil)
        let app = first.app("device")
        let ann = try await app.login(credentials: .anonymous)
        let calls = Collector<String>()
        var config = ann.flexibleSyncConfiguration(
            clientResetMode: .recoverUnsyncedChanges(beforeReset: { _ in calls.append("before") },
                                                     afterReset: { _, _ in calls.append("after") }),
            initialSubscriptions: { subs in subs.append(QuerySubscription<Todo>(name: "all")) })
        config.objectTypes = [Todo.self]
        let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)
        let session = try XCTUnwrap(realm.syncSession)
        try realm.write { realm.add(Todo("synced", owner: ann.id)) }
        try await session.wait(for: .upload)
        session.pause()
        try realm.write { realm.add(Todo("unsynced", owner: ann.id)) }

        // The server comes back, reached at the same URL, without its data (its users kept).
        await first.stop()
        if let url = first.postgresURL {
            try TestPostgres.forgetSyncData(url, app: "default")
        } else {
            try FileManager.default.removeItem(at: directory.appendingPathComponent("server/default/data.realm"))
        }
        let second = try SyncFixture(directory: directory, config: nil, postgresURL: first.postgresURL, replacing: first)
        do {
            session.resume()
            let deadline = Date().addingTimeInterval(15)
            while names(realm.objects(Todo.self)) != ["unsynced"], Date() < deadline {
                try await session.wait(for: .download)
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            // The server's state (which lost "synced"), plus the change that was not uploaded.
            XCTAssertEqual(names(realm.objects(Todo.self)), ["unsynced"])
            XCTAssertEqual(calls.all, ["before", "after"])
            try await session.wait(for: .upload)
            let bob = try await second.app("other").login(credentials: .anonymous)
            let other = try await second.openAll(bob)
            XCTAssertEqual(names(other.objects(Todo.self)), ["unsynced"])
        } catch {
            await second.stop()
            throw error
        }
        await second.stop()
    }

    func testTwoUsersSeeEachOthersWritesLive() async throws {
        try await withServer { f in
            let app = f.app("device")
            try await app.emailPasswordAuth.registerUser(email: "ann@example.com", password: "correct horse")
            let ann = try await app.login(credentials: .emailPassword(email: "ann@example.com", password: "correct horse"))
            let bob = try await app.login(credentials: .anonymous)
            XCTAssertEqual(app.currentUser, bob)
            XCTAssertEqual(Set(app.allUsers.keys), [ann.id, bob.id])

            let annRealm = try await f.openAll(ann)
            let bobRealm = try await f.openAll(bob)
            let seen = Collector<[String]>()
            let token = bobRealm.objects(Todo.self).observe { change in
                switch change {
                case .initial(let tasks): seen.append(tasks.map(\.name))
                case .update(let tasks, _, let insertions, _) where !insertions.isEmpty: seen.append(insertions.map { tasks[$0].name })
                default: break
                }
            }
            defer { token.invalidate() }
            await fulfillment(of: [seen.expectation(count: 1)], timeout: 10)

            try annRealm.write { annRealm.add(Todo("from Ann", owner: ann.id)) }
            await fulfillment(of: [seen.expectation(count: 2)], timeout: 15)
            XCTAssertEqual(seen.all, [[], ["from Ann"]])

            try await bob.logOut()
            XCTAssertFalse(bob.isLoggedIn)
            XCTAssertEqual(bob.state, .loggedOut)
            XCTAssertEqual(app.currentUser, ann)
        }
    }
}

/// A value the initial subscriptions block reads at each open.
final class Threshold: @unchecked Sendable {
    var value: Int
    init(_ value: Int) { self.value = value }
}
