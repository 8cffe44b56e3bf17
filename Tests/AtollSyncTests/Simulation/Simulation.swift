import AtollJSON
import AtollProtocol
@testable import AtollServer
import AtollStore
@testable import AtollSync
import Foundation

/// One step of a simulated schedule. Every step is valid in any state (a message to deliver when
/// none waits, a task to run when none is queued: nothing happens), so that a shrunk schedule
/// still runs.
enum SimStep: Hashable, CustomStringConvertible {
    /// Device d writes one transaction; its session is told of the commit (a queued task).
    case write(Int, [SimOp])
    /// Device d's session runs its next queued task (reading local commits, a pause, …).
    case run(Int)
    /// The server reads device d's next message.
    case up(Int)
    /// Device d reads the server's next message.
    case down(Int)
    /// Device d's connection is cut: what is in flight is lost.
    case cut(Int)
    /// Device d connects (after a cut, a pause, a server restart).
    case connect(Int)
    case pause(Int)
    case resume(Int)
    /// The server stops and starts again on its data; every connection is cut.
    case restart
    /// The server's data is backed up (during a restart).
    case backup
    /// The server starts again from its last backup (what came after is lost: clients ahead of
    /// it reset); nothing happens without a backup.
    case restore
    /// Device d's clock jumps by this many milliseconds (ahead or back).
    case clock(Int, Int64)
    /// Device d subscribes to one view of the items instead of its current one.
    case subscribe(Int, SimView)
    /// The server reads and sends the oldest bootstrap it has started (they run off its queue,
    /// and uploads and other bootstraps may come first); nothing happens when none waits.
    case bootstrap

    var description: String {
        switch self {
        case let .write(d, ops): return "d\(d) writes [" + ops.map(\.description).joined(separator: "; ") + "]"
        case let .run(d): return "d\(d) runs a task"
        case let .up(d): return "server reads d\(d)'s next message"
        case let .down(d): return "d\(d) reads the server's next message"
        case let .cut(d): return "d\(d)'s connection is cut"
        case let .connect(d): return "d\(d) connects"
        case let .pause(d): return "d\(d) pauses"
        case let .resume(d): return "d\(d) resumes"
        case .restart: return "the server restarts"
        case .backup: return "the server's data is backed up"
        case .restore: return "the server is restored from its backup"
        case let .clock(d, ms): return "d\(d)'s clock jumps \(ms) ms"
        case let .subscribe(d, view): return "d\(d) subscribes to \(view.query)"
        case .bootstrap: return "the server runs its oldest waiting bootstrap"
        }
    }

    /// The step as Swift source, for a regression test.
    var swiftSource: String {
        switch self {
        case let .write(d, ops): return ".write(\(d), [" + ops.map(\.swiftSource).joined(separator: ", ") + "])"
        case let .run(d): return ".run(\(d))"
        case let .up(d): return ".up(\(d))"
        case let .down(d): return ".down(\(d))"
        case let .cut(d): return ".cut(\(d))"
        case let .connect(d): return ".connect(\(d))"
        case let .pause(d): return ".pause(\(d))"
        case let .resume(d): return ".resume(\(d))"
        case .restart: return ".restart"
        case .backup: return ".backup"
        case .restore: return ".restore"
        case let .clock(d, ms): return ".clock(\(d), \(ms))"
        case let .subscribe(d, view): return ".subscribe(\(d), .\(view))"
        case .bootstrap: return ".bootstrap"
        }
    }
}

extension SimOp {
    var swiftSource: String {
        func s(_ t: String) -> String { "\"\(t)\"" }
        switch self {
        case let .create(k, t, n, tags, owned):
            return ".create(key: \(k), text: \(s(t)), n: \(n), tags: [\(tags.map(s).joined(separator: ", "))]" + (owned ? ", owned: true" : "") + ")"
        case let .setText(k, t): return ".setText(key: \(k), \(s(t)))"
        case let .setN(k, n): return ".setN(key: \(k), \(n))"
        case let .delete(k): return ".delete(key: \(k))"
        case let .listInsert(k, i, v): return ".listInsert(key: \(k), at: \(i), \(s(v)))"
        case let .listErase(k, i): return ".listErase(key: \(k), at: \(i))"
        case let .listMove(k, f, t): return ".listMove(key: \(k), from: \(f), to: \(t))"
        case let .listSet(k, i, v): return ".listSet(key: \(k), at: \(i), \(s(v)))"
        case let .replaceTags(k, tags): return ".replaceTags(key: \(k), [\(tags.map(s).joined(separator: ", "))])"
        case let .setAdd(k, v): return ".setAdd(key: \(k), \(s(v)))"
        case let .setRemove(k, v): return ".setRemove(key: \(k), \(s(v)))"
        case let .clearLabels(k): return ".clearLabels(key: \(k))"
        case let .dictSet(k, d, v): return ".dictSet(key: \(k), \(s(d)), \(s(v)))"
        case let .dictErase(k, d): return ".dictErase(key: \(k), \(s(d)))"
        case let .clearAttrs(k): return ".clearAttrs(key: \(k))"
        case let .add(k, d): return ".add(key: \(k), \(d))"
        case let .info(k, c, z): return ".info(key: \(k), city: \(c.map(s) ?? "nil"), zip: \(z))"
        case let .link(k, t): return ".link(key: \(k), target: \(t.map(String.init) ?? "nil"))"
        case let .linkInsert(k, t, i): return ".linkInsert(key: \(k), target: \(t), at: \(i))"
        }
    }
}

/// The shape of a simulated world: how many devices and users, how many keys their writes share,
/// what the writes touch.
struct SimConfiguration: Hashable, CustomStringConvertible {
    var devices = 3
    /// Device d logs in as user d % users (several devices of one user share its files' owner).
    var users = 2
    var keys = 4
    var steps = 120
    var features: SimFeatures = .all
    /// Server restarts and clock jumps among the steps.
    var restarts = true
    var clockJumps = true
    /// Subscription changes among the steps (objects move in and out of devices' views).
    var views = true
    /// Bootstraps wait for a `.bootstrap` step (or the settling) instead of running right after
    /// the step that started them: uploads and other sessions' work come in between.
    var deferredBootstraps = true

    var description: String { "\(devices) devices, \(users) users, \(keys) keys, \(steps) steps" }
}

/// A deterministic simulation of sync: an in-process server (`ServerApp`) and devices (each a realm
/// file written by its app and a `ClientSession` that syncs it) joined by in-memory links. Nothing
/// runs by itself: every delivery, task, cut, pause, restart and clock reading is a step of the
/// schedule, and a schedule made from a seed replays exactly.
final class Simulation {
    let configuration: SimConfiguration
    let directory: String
    /// The simulated wall clock (milliseconds), moved on by every step.
    private let time = SimTime()
    private(set) var server: ServerApp
    private(set) var devices: [SimDevice] = []
    /// The steps run so far.
    private(set) var trace: [SimStep] = []
    /// Every changeset the server was sent.
    let uploads = UploadLog()
    /// How many times the server was restored from a backup.
    private(set) var restores = 0
    /// The bootstraps the server started and has not run yet.
    private let bootstraps = SimBootstraps()
    /// Messages the server read while a bootstrap waited to run (what the catch-up after a
    /// bootstrap, and a session's backlog, are there for).
    private(set) var messagesDuringBootstraps = 0

    static let appJSON = """
    {"id": "sim", "developmentMode": false, "schema": \(SimSchema.json),
     "rules": {"default": {"roles": [{"name": "all", "read": true, "write": "owner == '' OR owner == %user.id"}]}}}
    """

    init(configuration: SimConfiguration, directory: String) throws {
        self.configuration = configuration
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        server = try Self.openServer(directory + "/server", time, bootstraps)
        for d in 0..<configuration.devices {
            devices.append(try SimDevice(index: d, user: "user\(d % max(1, configuration.users))", directory: directory, time: time))
            devices[d].link.uploads = uploads
            devices[d].link.now = { [time] in time.now }
        }
    }

    private static func openServer(_ directory: String, _ time: SimTime, _ bootstraps: SimBootstraps) throws -> ServerApp {
        let app = try ServerApp(configuration: AtollServer.ServerAppConfiguration(json: try EJSON.parse(appJSON)), directory: directory,
                              log: Logger(level: .error), metrics: Metrics())
        app.now = { time.now }
        app.bootstrapRunner = { _, work in bootstraps.add(work) }
        // A device's clock may run a minute ahead of the server's (its default).
        app.limits.maxClockAheadMilliseconds = 60_000
        return app
    }

    /// Closes every session and the server.
    func close() {
        for d in devices { d.close() }
        bootstraps.runAll()
        server.close()
    }

    // MARK: - Running

    func run(_ steps: [SimStep]) throws {
        for step in steps { try run(step) }
    }

    func run(_ step: SimStep) throws {
        trace.append(step)
        time.advance(by: 7)
        switch step {
        case let .write(d, ops): try devices[d].write(ops)
        case let .run(d): devices[d].link.runTask()
        case let .up(d):
            if devices[d].link.deliverUp(), !bootstraps.isEmpty { messagesDuringBootstraps += 1 }
        case let .down(d): devices[d].link.deliverDown()
        case let .cut(d): devices[d].link.disconnect(notifyServer: true)
        case let .connect(d): devices[d].link.connect(to: server, user: devices[d].userID)
        case let .pause(d): devices[d].session.pause()
        case let .resume(d): devices[d].session.resume()
        case .restart:
            try restartServer {}
        case .backup:
            try restartServer {
                try? FileManager.default.removeItem(atPath: directory + "/backup")
                try FileManager.default.copyItem(atPath: directory + "/server", toPath: directory + "/backup")
            }
        case .restore:
            guard FileManager.default.fileExists(atPath: directory + "/backup") else { return }
            restores += 1
            try restartServer {
                try FileManager.default.removeItem(atPath: directory + "/server")
                try FileManager.default.copyItem(atPath: directory + "/backup", toPath: directory + "/server")
            }
        case let .clock(d, ms): devices[d].clockOffset += ms
        case let .subscribe(d, view): try devices[d].subscribe(view)
        case .bootstrap: bootstraps.runOne()
        }
        if !configuration.deferredBootstraps { bootstraps.runAll() }
    }

    /// Stops the server (every connection is cut), runs `meanwhile` on its closed files, and
    /// starts it again.
    private func restartServer(_ meanwhile: () throws -> Void) throws {
        for d in devices { d.link.disconnect(notifyServer: false) }
        // Those started before the stop end before it (their sessions' connections are gone).
        bootstraps.runAll()
        server.close()
        try meanwhile()
        server = try Self.openServer(directory + "/server", time, bootstraps)
    }

    /// Brings every device back online and runs every task and message until nothing moves:
    /// the state after which replicas must agree.
    func settle() throws {
        for d in devices where d.session.state == .paused { d.session.resume() }
        for _ in 0..<50 {
            var moved = true
            var rounds = 0
            while moved {
                rounds += 1
                guard rounds < 100_000 else { throw SimFailure("the simulation does not settle (100,000 rounds)") }
                moved = false
                while bootstraps.runOne() { moved = true }
                for d in devices {
                    while d.link.runTask() { moved = true }
                    // A device the server told to wait: time passes until it may connect.
                    if !d.link.isConnected, d.link.wantsConnection, d.link.notBefore > time.now {
                        time.advance(by: d.link.notBefore - time.now)
                    }
                    if d.link.connect(to: server, user: d.userID) { moved = true }
                    d.session.processLocal()
                    while d.link.deliverUp() { moved = true }
                }
                for d in devices { while d.link.deliverDown() { moved = true } }
                time.advance(by: 3)
            }
            if try devices.allSatisfy({ try $0.isSettled() }) { return }
        }
        throw SimFailure("the devices do not settle: " + (try devices.filter { try !$0.isSettled() }.map { "d\($0.index)" }.joined(separator: ", ")))
    }

    // MARK: - Schedules

    /// A random schedule of `configuration.steps` steps.
    static func schedule(seed: UInt64, _ c: SimConfiguration) -> [SimStep] {
        var r = SimRandom(seed: seed)
        var steps = [SimStep]()
        var serial = Array(repeating: 0, count: c.devices)
        for _ in 0..<c.steps {
            let d = Int.random(in: 0..<c.devices, using: &r)
            let p = Double.random(in: 0..<1, using: &r)
            switch p {
            case ..<0.30:
                var ops = [SimOp]()
                for _ in 0..<Int.random(in: 1...3, using: &r) {
                    serial[d] += 1
                    ops.append(.random(&r, keys: c.keys, device: d, serial: serial[d], features: c.features))
                }
                steps.append(.write(d, ops))
            case ..<0.42: steps.append(.run(d))
            case ..<0.45: steps.append(c.deferredBootstraps ? .bootstrap : .run(d))
            case ..<0.65: steps.append(.up(d))
            case ..<0.85: steps.append(.down(d))
            case ..<0.89: steps.append(.cut(d))
            case ..<0.94: steps.append(.connect(d))
            case ..<0.96: steps.append(.pause(d))
            case ..<0.98: steps.append(.resume(d))
            case ..<0.985: if c.restarts { steps.append(.restart) }
            case ..<0.99:
                if c.restarts { steps.append(Bool.random(using: &r) ? .backup : .restore) }
            case ..<0.995 where c.views:
                steps.append(.subscribe(d, SimView.allCases[Int.random(in: 0..<SimView.allCases.count, using: &r)]))
            default:
                // Mostly small jumps; sometimes one past the server's limit (a minute), either way.
                if c.clockJumps {
                    let big = Int.random(in: 0..<4, using: &r) == 0
                    steps.append(.clock(d, big ? Int64.random(in: -180_000...180_000, using: &r) : Int64.random(in: -2_000...2_000, using: &r)))
                }
            }
        }
        return steps
    }
}

/// The bootstraps a simulated server started, run one at a time at steps of the schedule (on
/// the simulation's thread, as a worker of the real server would run them).
final class SimBootstraps: @unchecked Sendable {
    private var pending: [@Sendable () -> Void] = []
    var isEmpty: Bool { pending.isEmpty }
    var count: Int { pending.count }
    func add(_ job: @escaping @Sendable () -> Void) { pending.append(job) }
    /// Runs them all, and those they start.
    func runAll() { while runOne() {} }
    /// Runs the oldest; false when none waits.
    @discardableResult
    func runOne() -> Bool {
        guard !pending.isEmpty else { return false }
        pending.removeFirst()()
        return true
    }
}

/// The simulated wall clock, in milliseconds.
final class SimTime: @unchecked Sendable {
    private(set) var now: Int64 = 1_800_000_000_000
    func advance(by ms: Int64) { now += ms }
}

struct SimFailure: Error, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// One simulated device: a realm file, the app's handle of it, and its sync session, logged in
/// as one user over its own link.
final class SimDevice {
    let index: Int
    let userID: String
    let path: String
    let link: SimLink
    let app: ClientApp
    let user: ClientUser
    let store: Store
    let session: ClientSession
    /// How far this device's clock is from the simulated wall clock.
    var clockOffset: Int64 {
        get { offsetBox.value }
        set { offsetBox.value = newValue }
    }

    init(index: Int, user userID: String, directory: String, time: SimTime) throws {
        self.index = index
        self.userID = userID
        path = directory + "/d\(index).realm"
        let link = SimLink(device: index)
        self.link = link
        app = try ClientApp(configuration: AtollSync.ClientAppConfiguration(appId: "sim", baseURL: "http://simulation",
                                                                 metadataDirectory: directory + "/meta\(index)"))
        app.makeConnection = { _, _ in link }
        app.addErrorHandler { error, _ in link.errors.append(error) }
        user = ClientUser(app: app, id: userID)
        user.update(access: "simulated", refresh: "simulated", state: .loggedIn)
        var storeConfiguration = Configuration(path: path, schema: SimSchema.schema)
        // Filled in below: the closure reads this device's offset.
        let offset = OffsetBox()
        offsetBox = offset
        storeConfiguration.commitClock = { Timestamp(milliseconds: time.now + offset.value) }
        var sync = ClientSyncConfiguration(mode: .flexible)
        sync.initialSubscriptions = [SubscriptionQuery(name: "all", className: "Item")]
        sync.watchesLocalCommits = false
        let node = Int64(index + 1) * 1_000_003
        sync.makeNode = { node }
        session = try ClientSession.open(user: user, storeConfiguration: storeConfiguration, sync: sync)
        store = try Store(storeConfiguration)
    }

    private let offsetBox: OffsetBox
    private final class OffsetBox: @unchecked Sendable { var value: Int64 = 0 }

    /// The device's view: what its subscription set holds once complete.
    private(set) var view = SimView.all

    /// Replaces the device's subscription with one to `view` (a new subscription set version,
    /// sent by the session's next task).
    func subscribe(_ view: SimView) throws {
        self.view = view
        _ = try session.updateSubscriptions { set in set = [SubscriptionQuery(name: "items", className: "Item", query: view.query)] }
    }

    func write(_ ops: [SimOp]) throws {
        try store.write { for op in ops { try op.apply(to: store, user: userID) } }
        // What the commit observer would do.
        link.async { [session] in session.processLocal() }
    }

    /// Whether the device is online with nothing left to upload and its subscriptions complete.
    func isSettled() throws -> Bool {
        guard link.isConnected, link.tasks.isEmpty, link.up.isEmpty, link.down.isEmpty else { return false }
        let pending = try session.store.withMetadata { sql in
            try sql.rows("SELECT count(*) FROM _atoll_sync_pending").first?.first?.intValue ?? 0
        }
        let subscriptions = try session.subscriptions()
        return pending == 0 && subscriptions.state == "complete"
    }

    func close() {
        session.release()
        store.close()
    }
}

/// The views a simulated device subscribes to: the items whose `n` falls in a range (writes move
/// objects in and out of them), or all.
enum SimView: CaseIterable, Hashable {
    case all, low, high

    var query: String {
        switch self {
        case .all: return "TRUEPREDICATE"
        case .low: return "n < 20"
        case .high: return "n >= 10"
        }
    }
}
