import AtollBenchSupport
import AtollPostgres
import AtollProtocol
import AtollServer
import AtollStore
import AtollSync
import Foundation
import Synchronization

// atoll-cluster-bench: the sync server on PostgreSQL with several instances (bench/README.md,
// "Cluster"). For each configuration — one instance on SQLite, then 1, 2 and 3 instances on one
// PostgreSQL database — in this process, over loopback:
//   W  WRITERS clients, spread over the instances, each commits TXNS transactions of SIZE small
//      objects as fast as it can; a reader on the first instance waits until it has every object:
//      objects integrated and delivered per second;
//   P  a client on the first instance commits one object, a client on the last instance sees it
//      (p50, p99 of SAMPLES): propagation between instances (through NOTIFY).
// BENCH_POSTGRES names a database URL whose cluster may create databases (one per run).

let env = ProcessInfo.processInfo.environment
let writers = Int(env["BENCH_CLUSTER_WRITERS"] ?? "") ?? 3
let transactions = Int(env["BENCH_CLUSTER_TXNS"] ?? "") ?? 100
let size = Int(env["BENCH_CLUSTER_SIZE"] ?? "") ?? 50
let samples = Int(env["BENCH_CLUSTER_SAMPLES"] ?? "") ?? 100
let configurations = (env["BENCH_CLUSTER_CONFIGS"] ?? "sqlite,pg1,pg2,pg3").split(separator: ",").map(String.init)



let schema = Schema([ObjectSchema(name: "Item", primaryKey: "_id", properties: [
    Property(name: "_id", type: .int), Property(name: "name", type: .string), Property(name: "age", type: .int),
])])

/// A new database on BENCH_POSTGRES's cluster.
func freshDatabase() throws -> String {
    guard let url = env["BENCH_POSTGRES"], var parts = URLComponents(string: url) else {
        fail("set BENCH_POSTGRES=postgresql://… (make bench-cluster starts a cluster and sets it)")
    }
    let name = "atoll_bench_\(getpid())_\(Int(now() * 1000))"
    let admin = try PostgresConnection(url: url)
    defer { admin.close() }
    try admin.execute("CREATE DATABASE \(name)")
    parts.path = "/" + name
    return parts.string ?? url
}

struct Result {
    var name: String
    var objectsPerSecond: Double
    var p50: Double
    var p99: Double
}

func run(_ name: String, instances: Int, postgres: Bool) throws -> Result {
    let dir = NSTemporaryDirectory() + "atoll-cluster-bench-\(getpid())-\(name)"
    try? FileManager.default.removeItem(atPath: dir)
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let url = postgres ? try freshDatabase() : nil
    var servers = [SyncServer]()
    for i in 0..<instances {
        var c = ServerConfiguration()
        c.port = 0
        c.dataDirectory = dir + "/server-\(i)"
        c.logLevel = .error
        c.postgresURL = url
        c.maxUploadsPerSecond = 0
        let s = try SyncServer(configuration: c)
        try s.start()
        servers.append(s)
    }
    func client(_ label: String, on server: SyncServer) throws -> (ClientSession, Store) {
        let app = try ClientApp(configuration: ClientAppConfiguration(appId: "default", baseURL: server.url, metadataDirectory: dir + "/\(label)"))
        let user = try runToCompletion { try await app.login(.anonymous) }
        var sync = ClientSyncConfiguration(mode: .flexible)
        sync.initialSubscriptions = [SubscriptionQuery(name: "all", className: "Item")]
        let configuration = Configuration(path: dir + "/\(label).realm", schema: schema)
        let session = try ClientSession.openRealm(user: user, storeConfiguration: configuration, sync: sync,
                                                options: OpenOptions(downloadBeforeOpen: .always, timeout: 600))
        return (session, try Store(configuration))
    }

    // P: first instance -> last instance.
    let (sessionA, a) = try client("a", on: servers[0])
    let (sessionB, b) = try client("b", on: servers[instances - 1])
    // B's observer wakes the waiting loop (no polling: on two cores a spinning waiter takes the
    // CPU the database needs).
    let arrived = NSCondition()
    let token = try b.observe { _ in
        arrived.lock()
        arrived.broadcast()
        arrived.unlock()
    }
    var latencies = [Double]()
    for i in 0..<samples {
        let key = Int64(1_000_000_000 + i)
        let start = now()
        try a.write { _ = try a.create("Item", ["_id": .int(key), "name": .string("p-\(i)"), "age": .int(0)]) }
        arrived.lock()
        while true {
            _ = try b.refresh()
            if try b.object("Item", primaryKey: .int(key)) != nil { break }
            if now() - start > 10 { fail("\(name): object \(key) did not reach the last instance's client in 10 s") }
            _ = arrived.wait(until: Date().addingTimeInterval(0.05))
        }
        arrived.unlock()
        latencies.append((now() - start) * 1000)
    }
    token.invalidate()
    let sorted = latencies.sorted()
    func percentile(_ p: Double) -> Double { sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }

    // W: writers spread over the instances; the reader is on the first instance.
    let (sessionR, reader) = try client("reader", on: servers[0])
    var clients = [(ClientSession, Store)]()
    for w in 0..<writers { clients.append(try client("w\(w)", on: servers[w % instances])) }
    let before = try reader.objects("Item").count()
    let total = writers * transactions * size
    let start = now()
    let group = DispatchGroup()
    let failed = Mutex<String?>(nil)
    for (w, (session, store)) in clients.enumerated() {
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            do {
                for t in 0..<transactions {
                    try store.write {
                        _ = try store.createMany("Item", (0..<size).map { i in
                            let id = Int64(w * 10_000_000 + t * size + i)
                            return ["_id": .int(id), "name": .string("w\(w)-\(t)-\(i)"), "age": .int(Int64(i))]
                        })
                    }
                }
                try session.waitForUpload(timeout: 600)
            } catch {
                failed.withLock { $0 = "writer \(w): \(error)" }
            }
        }
    }
    group.wait()
    if let message = failed.withLock({ $0 }) { fail("\(name): \(message)") }
    // The reader counts when its store changed (or every 50 ms), not in a loop that would take a
    // core from the instances.
    let changed = NSCondition()
    let readerToken = try reader.observe { _ in
        changed.lock()
        changed.broadcast()
        changed.unlock()
    }
    changed.lock()
    while true {
        _ = try reader.refresh()
        let have = try reader.objects("Item").count() - before
        if have >= total { break }
        if now() - start > 600 { fail("\(name): the reader has \(have) of \(total) objects after 600 s") }
        _ = changed.wait(until: Date().addingTimeInterval(0.05))
    }
    changed.unlock()
    readerToken.invalidate()
    let elapsed = now() - start
    for (session, store) in clients + [(sessionA, a), (sessionB, b), (sessionR, reader)] {
        session.release()
        store.close()
    }
    for s in servers {
        let done = DispatchSemaphore(value: 0)
        Task.detached { await s.shutdown(); done.signal() }
        done.wait()
    }
    return Result(name: name, objectsPerSecond: Double(total) / elapsed, p50: percentile(0.5), p99: percentile(0.99))
}

print("cluster: \(writers) writers x \(transactions) transactions x \(size) objects; \(samples) propagation samples")
var baseline: Double?
for configuration in configurations {
    let result: Result
    switch configuration {
    case "sqlite": result = try run("1 instance, SQLite", instances: 1, postgres: false)
    case "pg1": result = try run("1 instance, PostgreSQL", instances: 1, postgres: true)
    case "pg2": result = try run("2 instances, PostgreSQL", instances: 2, postgres: true)
    case "pg3": result = try run("3 instances, PostgreSQL", instances: 3, postgres: true)
    default: fail("unknown configuration '\(configuration)' (sqlite, pg1, pg2, pg3)")
    }
    if configuration == "sqlite" { baseline = result.objectsPerSecond }
    let ratio = baseline.map { String(format: "  %.2fx SQLite", result.objectsPerSecond / $0) } ?? ""
    print("  " + result.name.padding(toLength: 26, withPad: " ", startingAt: 0)
          + String(format: "W %8.0f objects/s", result.objectsPerSecond) + ratio
          + String(format: "   P p50 %6.2f ms  p99 %6.2f ms", result.p50, result.p99))
}
