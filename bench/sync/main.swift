import AtollBenchSupport
import AtollProtocol
import AtollServer
import AtollStore
import AtollSync
import CSQLite
import Foundation

// atoll-sync-bench: sync over loopback (bench/README.md, "Sync"). One atoll-server in this
// process, clients with their own files and users:
//   L  commit on client A -> the observer of client B sees the object (p50, p99 of SAMPLES)
//   T  client A writes N small objects in one transaction -> client B has them all (objects/s)
//   B  a new client opens with downloadBeforeOpen: .always on the N objects (seconds, objects/s)
// and, for scale, raw SQLite inserting the same N rows in one transaction in this run.

let n = Int(ProcessInfo.processInfo.environment["BENCH_SYNC_N"] ?? "") ?? 100_000
let samples = Int(ProcessInfo.processInfo.environment["BENCH_SYNC_SAMPLES"] ?? "") ?? 300
/// T': the objects per transaction (0: T' is left out).
let batch = Int(ProcessInfo.processInfo.environment["BENCH_SYNC_BATCH"] ?? "") ?? 1_000



let schema = Schema([ObjectSchema(name: "Item", primaryKey: "_id", properties: [
    Property(name: "_id", type: .int), Property(name: "name", type: .string), Property(name: "age", type: .int),
])])

let dir = NSTemporaryDirectory() + "atoll-sync-bench-\(getpid())"
try? FileManager.default.removeItem(atPath: dir)
try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: dir) }

var serverConfiguration = ServerConfiguration()
serverConfiguration.port = 0
serverConfiguration.dataDirectory = dir + "/server"
serverConfiguration.logLevel = .error
let server = try SyncServer(configuration: serverConfiguration)
try server.start()

func client(_ name: String) throws -> (ClientSession, Store) {
    let app = try ClientApp(configuration: ClientAppConfiguration(appId: "default", baseURL: server.url, metadataDirectory: dir + "/\(name)"))
    let user = try runToCompletion { try await app.login(.anonymous) }
    var sync = ClientSyncConfiguration(mode: .flexible)
    sync.initialSubscriptions = [SubscriptionQuery(name: "all", className: "Item")]
    let configuration = Configuration(path: dir + "/\(name).realm", schema: schema)
    let session = try ClientSession.openRealm(user: user, storeConfiguration: configuration, sync: sync,
                                            options: OpenOptions(downloadBeforeOpen: .always, timeout: 600))
    return (session, try Store(configuration))
}

let (sessionA, a) = try client("a")
let (sessionB, b) = try client("b")

// MARK: - L: commit -> other client's observer

final class Arrivals: @unchecked Sendable {
    let lock = NSCondition()
    var waitingFor: Int64 = -1
    var seenAt: Double = 0
}
let arrivals = Arrivals()
let token = try b.observe { _ in
    arrivals.lock.lock()
    let key = arrivals.waitingFor
    arrivals.lock.unlock()
    guard key >= 0, (try? b.object("Item", primaryKey: .int(key))) != nil else { return }
    arrivals.lock.lock()
    if arrivals.waitingFor == key {
        arrivals.seenAt = now()
        arrivals.waitingFor = -1
        arrivals.lock.broadcast()
    }
    arrivals.lock.unlock()
}
var latencies = [Double]()
for i in 0..<samples {
    let key = Int64(1_000_000_000 + i)
    arrivals.lock.lock()
    arrivals.waitingFor = key
    arrivals.lock.unlock()
    let start = now()
    try a.write { _ = try a.create("Item", ["_id": .int(key), "name": .string("latency-\(i)"), "age": .int(Int64(i % 100))]) }
    arrivals.lock.lock()
    let deadline = Date().addingTimeInterval(10)
    while arrivals.waitingFor == key, arrivals.lock.wait(until: deadline) {}
    let seen = arrivals.waitingFor == -1 ? arrivals.seenAt : 0
    arrivals.lock.unlock()
    guard seen > 0 else { fail("object \(key) did not reach client B in 10 s") }
    latencies.append((seen - start) * 1000)
}
token.invalidate()
let sorted = latencies.sorted()
func percentile(_ p: Double) -> Double { sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }

// MARK: - T: N objects from A, integrated, fanned out and applied on B

func metric(_ name: String) -> Double {
    server.metrics.prometheus().split(separator: "\n")
        .first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) } ?? 0
}

let before = try b.objects("Item").count()
let tStart = now()
try a.write {
    _ = try a.createMany("Item", (0..<n).map { i in ["_id": .int(Int64(i)), "name": .string("item-\(i)"), "age": .int(Int64(i % 100))] })
}
let committed = now()
try sessionA.waitForUpload(timeout: 600)
let uploaded = now()
try sessionB.waitForDownload(timeout: 600)
_ = try b.refresh()
let tEnd = now()
let got = try b.objects("Item").count() - before
guard got == n else { fail("client B has \(got) of \(n) objects") }
let integrationSeconds = metric("atoll_integration_seconds_sum")

// MARK: - B: bootstrap of everything to a new client

let bStart = now()
let (sessionC, c) = try client("c")
let bEnd = now()
let bootstrapped = try c.objects("Item").count()
guard bootstrapped == n + samples else { fail("the new client has \(bootstrapped) of \(n + samples) objects") }

// MARK: - T in transactions: the same N objects written in transactions of `batch`

sessionC.release()
c.close()
var t2Start = 0.0, t2Committed = 0.0, t2End = 0.0
if batch > 0 {
    let before2 = try b.objects("Item").count()
    t2Start = now()
    for first in stride(from: 0, to: n, by: batch) {
        try a.write {
            _ = try a.createMany("Item", (first..<min(first + batch, n)).map { i in
                ["_id": .int(Int64(10_000_000 + i)), "name": .string("item-\(i)"), "age": .int(Int64(i % 100))]
            })
        }
    }
    t2Committed = now()
    try sessionA.waitForUpload(timeout: 600)
    try sessionB.waitForDownload(timeout: 600)
    _ = try b.refresh()
    t2End = now()
    let got2 = try b.objects("Item").count() - before2
    guard got2 == n else { fail("client B has \(got2) of \(n) objects written in transactions") }
}

// MARK: - Raw SQLite, same rows

var db: OpaquePointer?
sqlite3_open(dir + "/raw.sqlite", &db)
sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; CREATE TABLE Item(_id INTEGER PRIMARY KEY, name TEXT, age INTEGER)", nil, nil, nil)
let rStart = now()
sqlite3_exec(db, "BEGIN", nil, nil, nil)
var stmt: OpaquePointer?
sqlite3_prepare_v2(db, "INSERT INTO Item VALUES (?, ?, ?)", -1, &stmt, nil)
let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
for i in 0..<n {
    sqlite3_bind_int64(stmt, 1, Int64(i))
    sqlite3_bind_text(stmt, 2, "item-\(i)", -1, transient)
    sqlite3_bind_int64(stmt, 3, Int64(i % 100))
    sqlite3_step(stmt)
    sqlite3_reset(stmt)
}
sqlite3_finalize(stmt)
sqlite3_exec(db, "COMMIT", nil, nil, nil)
let rEnd = now()
sqlite3_close(db)

let throughput = Double(n) / (tEnd - tStart)
print("""
sync over loopback (one process: server + 3 clients), N = \(n), \(samples) latency samples
  L  commit on A -> B's observer       p50 \(String(format: "%.2f", percentile(0.5))) ms   p99 \(String(format: "%.2f", percentile(0.99))) ms   max \(String(format: "%.2f", sorted.last ?? 0)) ms
  T  \(n) objects A -> server -> B     \(String(format: "%.2f", tEnd - tStart)) s = \(Int(throughput)) objects/s  (commit \(String(format: "%.2f", committed - tStart)) s, upload+integrate \(String(format: "%.2f", uploaded - committed)) s, fan-out+apply \(String(format: "%.2f", tEnd - uploaded)) s; server integration in all: \(String(format: "%.2f", integrationSeconds)) s)
\(batch == 0 ? "  T' left out (BENCH_SYNC_BATCH=0)" : "  T' the same in transactions of \(batch)  \(String(format: "%.2f", t2End - t2Start)) s = \(Int(Double(n) / (t2End - t2Start))) objects/s  (the last commit at \(String(format: "%.2f", t2Committed - t2Start)) s)")
  B  bootstrap of \(n + samples) objects     \(String(format: "%.2f", bEnd - bStart)) s = \(Int(Double(n + samples) / (bEnd - bStart))) objects/s (login, open, download, apply; the server sent \(Int(metric("atoll_bootstrap_objects_total"))) objects in \(Int(metric("atoll_bootstraps_total"))) bootstraps in all)
  raw SQLite: \(n) rows in one transaction  \(String(format: "%.3f", rEnd - rStart)) s; T takes \(String(format: "%.1f", (tEnd - tStart) / (rEnd - rStart)))x that
""")
sessionA.release()
sessionB.release()
a.close(); b.close()
let stopped = DispatchSemaphore(value: 0)
Task.detached { await server.shutdown(); stopped.signal() }
stopped.wait()
