// atoll-net-bench: the network layer's load benchmark (bench/README.md, "Network").
//
//   atoll-net-bench --peer PATH [--connections 1000] [--rate 20000] [--seconds 10] [--peak-seconds 5]
//                   [--http-seconds 5]
//
// Starts `atoll-net-peer serve` as its own process (so its memory is the server's alone), then:
//   1. idle memory: the server's resident memory before and after N WebSocket connections are open;
//   2. paced echo: N connections, `rate` small (32-byte) binary messages/s in total for `seconds`,
//      each carrying its send time: messages echoed/s, round trip p50/p99/max;
//   3. peak echo: every connection keeps one message in flight, as fast as the echoes come back;
//   4. HTTP with wrk (Debian's wrk): GET /health (a small JSON handler) with 1 keep-alive connection
//      and with 100.
// Prints one line per figure, then a JSON summary line ("summary {...}").
@preconcurrency import Glibc
import AtollNet
import Foundation
import Synchronization

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("atoll-net-bench: \(message)\n".utf8))
    exit(2)
}

let arguments: [String: String] = {
    var parsed: [String: String] = [:]
    var iterator = CommandLine.arguments.dropFirst().makeIterator()
    while let name = iterator.next() {
        guard name.hasPrefix("--"), let value = iterator.next() else { fail("usage: --name value …") }
        parsed[String(name.dropFirst(2))] = value
    }
    return parsed
}()
func intArgument(_ name: String, _ fallback: Int) -> Int {
    guard let text = arguments[name] else { return fallback }
    guard let value = Int(text), value > 0 else { fail("--\(name) must be a positive integer") }
    return value
}
guard let peer = arguments["peer"] else { fail("--peer PATH (the atoll-net-peer program) is required") }
let connectionCount = intArgument("connections", 1000)
let rate = intArgument("rate", 20000)
let seconds = intArgument("seconds", 10)
let peakSeconds = intArgument("peak-seconds", 5)
let httpSeconds = intArgument("http-seconds", 5)

var limit = rlimit()
if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

@Sendable func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func residentKB(pid: Int32) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
}

func format(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }

var summary: [String: Any] = ["connections": connectionCount, "rate": rate, "seconds": seconds]
@MainActor func report(_ key: String, _ value: Double, _ unit: String, _ label: String, digits: Int = 2) {
    print("\(label): \(format(value, digits)) \(unit)")
    fflush(nil)
    summary[key] = value
}

// MARK: the server

let server = Process()
server.executableURL = URL(fileURLWithPath: peer)
server.arguments = ["serve", "--port", "0"]
let serverOutput = Pipe()
server.standardOutput = serverOutput
do { try server.run() } catch { fail("cannot start \(peer): \(error)") }
defer { if server.isRunning { server.terminate() } }
var firstLine = Data()
while !firstLine.contains(10) {
    let chunk = serverOutput.fileHandleForReading.availableData
    if chunk.isEmpty { fail("the server exited before it listened") }
    firstLine.append(chunk)
}
guard let line = String(data: firstLine, encoding: .utf8)?.split(separator: "\n").first,
      let url = line.split(separator: " ").last.map(String.init), line.hasPrefix("listening on ") else {
    fail("unexpected first line from the server")
}
let wsURL = url.replacingOccurrences(of: "http://", with: "ws://") + "/ws/echo"
let pid = server.processIdentifier

func run(_ body: @escaping @Sendable () async throws -> Void) {
    let done = DispatchSemaphore(value: 0)
    let failure = Mutex<String?>(nil)
    Task {
        do { try await body() } catch { failure.withLock { $0 = "\(error)" } }
        done.signal()
    }
    done.wait()
    if let message = failure.withLock({ $0 }) { fail(message) }
}

// Warm the server up (one request, one socket), then take its idle memory.
run {
    _ = try await HTTPClient.request("GET", "\(url)/health")
    let socket = try await WebSocket.connect(to: wsURL)
    socket.close()
}
Thread.sleep(forTimeInterval: 0.3)
let rssBefore = residentKB(pid: pid)

// MARK: 1. connections and idle memory

/// Round trips measured on the client loop's thread.
final class Measurements: @unchecked Sendable {
    let lock = Mutex<(samples: [Double], received: Int)>(([], 0))
    func record(_ bytes: [UInt8]) {
        guard bytes.count >= 8 else { return }
        let sent = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        let rtt = Double(monotonicNanos() &- sent) / 1e6
        lock.withLock {
            $0.samples.append(rtt)
            $0.received += 1
        }
    }
    func take() -> (samples: [Double], received: Int) {
        lock.withLock { state in
            defer { state = ([], 0) }
            return state
        }
    }
}
let measurements = Measurements()
/// In the peak phase, each echo sends the next message on the same socket.
let peakMode = Atomic<Bool>(false)

@Sendable func message() -> [UInt8] {
    var bytes = [UInt8](repeating: 0x2a, count: 32)
    let now = monotonicNanos()
    withUnsafeBytes(of: now) { bytes.replaceSubrange(0..<8, with: $0) }
    return bytes
}

let opened = Date()
let sockets = Mutex<[WebSocket]>([])
run {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for index in 0..<connectionCount {
            if index >= 64 { try await group.next() }
            group.addTask {
                var options = WebSocketClientOptions()
                options.connectTimeout = 30
                let socket = try await WebSocket.connect(to: wsURL, options: options)
                socket.onEvent = { event in
                    if case let .binary(bytes) = event {
                        measurements.record(bytes)
                        if peakMode.load(ordering: .relaxed) { try? socket.send(message()) }
                    }
                }
                sockets.withLock { $0.append(socket) }
            }
        }
        try await group.waitForAll()
    }
}
let openSeconds = Date().timeIntervalSince(opened)
let allSockets = sockets.withLock { $0 }
Thread.sleep(forTimeInterval: 1.0)
let rssIdle = residentKB(pid: pid)
report("open_seconds", openSeconds, "s", "open \(connectionCount) WebSocket connections")
report("server_rss_before_kb", Double(rssBefore), "KB", "server memory before")
report("server_rss_idle_kb", Double(rssIdle), "KB", "server memory with \(connectionCount) idle connections")
report("server_kb_per_idle_connection", Double(rssIdle - rssBefore) / Double(connectionCount), "KB",
       "server memory per idle connection (target < 64 KB)")

// MARK: 2. paced echo

_ = measurements.take()
let tickSeconds = 0.005
let perTick = max(1, Int(Double(rate) * tickSeconds))
var sent = 0
var next = 0
let start = monotonicNanos()
let end = start + UInt64(seconds) * 1_000_000_000
var tick = start
while tick < end {
    for _ in 0..<perTick {
        do {
            try allSockets[next].send(message())
            sent += 1
        } catch {
            fail("send failed: \(error)")
        }
        next = (next + 1) % allSockets.count
    }
    tick += UInt64(tickSeconds * 1e9)
    let now = monotonicNanos()
    if tick > now { usleep(UInt32((tick - now) / 1000)) }
}
let sendSeconds = Double(monotonicNanos() - start) / 1e9
var waited = 0.0
while measurements.lock.withLock({ $0.received }) < sent && waited < 5 {
    Thread.sleep(forTimeInterval: 0.05)
    waited += 0.05
}
let rssLoaded = residentKB(pid: pid)
let paced = measurements.take()
let pacedSorted = paced.samples.sorted()
report("paced_sent", Double(sent), "", "paced: messages sent", digits: 0)
report("paced_received", Double(paced.received), "", "paced: echoes received", digits: 0)
report("paced_echoes_per_second", Double(paced.received) / sendSeconds, "msg/s", "paced: echoes/s (target 20,000)", digits: 0)
report("paced_rtt_p50_ms", percentile(pacedSorted, 0.5), "ms", "paced: round trip p50")
report("paced_rtt_p99_ms", percentile(pacedSorted, 0.99), "ms", "paced: round trip p99 (target < 50 ms)")
report("paced_rtt_max_ms", pacedSorted.last ?? .nan, "ms", "paced: round trip max")
report("server_rss_loaded_kb", Double(rssLoaded), "KB", "server memory under load")

// MARK: 3. peak echo

peakMode.store(true, ordering: .relaxed)
let peakStart = monotonicNanos()
for socket in allSockets { try? socket.send(message()) }
Thread.sleep(forTimeInterval: Double(peakSeconds))
peakMode.store(false, ordering: .relaxed)
let peakElapsed = Double(monotonicNanos() - peakStart) / 1e9
Thread.sleep(forTimeInterval: 0.5)
let peak = measurements.take()
let peakSorted = peak.samples.sorted()
report("peak_echoes_per_second", Double(peak.received) / peakElapsed, "msg/s", "peak: echoes/s, one in flight per connection", digits: 0)
report("peak_rtt_p50_ms", percentile(peakSorted, 0.5), "ms", "peak: round trip p50")
report("peak_rtt_p99_ms", percentile(peakSorted, 0.99), "ms", "peak: round trip p99")

for socket in allSockets { socket.close() }
Thread.sleep(forTimeInterval: 0.5)

// MARK: 4. HTTP with wrk

func wrk(connections: Int, threads: Int) -> (requests: Double, latency: String)? {
    let candidates = ["/usr/bin/wrk", "/usr/local/bin/wrk"]
    guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = ["-t\(threads)", "-c\(connections)", "-d\(httpSeconds)s", "--latency", "\(url)/health"]
    let output = Pipe()
    process.standardOutput = output
    guard (try? process.run()) != nil else { return nil }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    var requests = Double.nan
    var p99 = "?"
    for line in text.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        if fields.first == "Requests/sec:", fields.count > 1 { requests = Double(fields[1]) ?? .nan }
        if fields.first == "99%", fields.count > 1 { p99 = String(fields[1]) }
        if line.contains("Non-2xx") || line.contains("Socket errors") { print("wrk: \(line.trimmingCharacters(in: .whitespaces))") }
    }
    return (requests, p99)
}

if let single = wrk(connections: 1, threads: 1) {
    report("http_rps_1_connection", single.requests, "req/s", "HTTP GET /health, 1 keep-alive connection (p99 \(single.latency))", digits: 0)
}
if let hundred = wrk(connections: 100, threads: 2) {
    report("http_rps_100_connections", hundred.requests, "req/s", "HTTP GET /health, 100 keep-alive connections (p99 \(hundred.latency))", digits: 0)
}
if summary["http_rps_1_connection"] == nil { print("HTTP: wrk not found (apt-get install wrk)") }

server.terminate()
server.waitUntilExit()
if let data = try? JSONSerialization.data(withJSONObject: summary, options: [.sortedKeys]) {
    print("summary " + String(decoding: data, as: UTF8.self))
}
