// Fuzz target "sync": sync protocol messages (docs/testing.md). An input is client messages, one
// JSON text per line. Each line is decoded as the server decodes it (`Wire.decode`), its
// changesets and instructions decoded and re-encoded (a decoded changeset must decode again from
// its own wire form), and then it is handled by an in-process `SyncApp` (the server's engine,
// with its store in a scratch directory) through an in-memory connection, as a WebSocket would
// deliver it: bind, query, upload (integration into the store), mark, unbind. The bootstraps
// the app starts (off its queue) run after the message that started them.
//
// Contract checked: nothing traps (a client's clock also observes each changeset's clocks and
// reads on, as after a download); every `error` the server sends has a known code and a
// non-empty message, and none is `internalServerError` (bad input is named as such).
import AtollFuzzSupport
import AtollJSON
import AtollProtocol
import AtollServer
import AtollStore
import Foundation

/// The client side of an in-memory connection: what the server sends is kept.
final class MemoryPeer: SyncTransport, @unchecked Sendable {
    var sent: [String] = []
    var closed = false
    func send(_ text: String) throws { sent.append(text) }
    func close(code: UInt16, reason: String) { closed = true }
    var remoteAddress: String { "fuzz" }
}

/// The bootstraps the app started (they run off its queue), run on this thread after each
/// message, so that the replies are all in before they are checked.
final class Bootstraps: @unchecked Sendable {
    var waiting: [@Sendable () -> Void] = []
    func runAll() { while !waiting.isEmpty { waiting.removeFirst()() } }
}

/// The app: development mode (a bind's schema may add classes), open rules, a schema with every
/// kind of property.
let appJSON = """
{"id": "fuzz", "developmentMode": true, "schema": [
 {"name": "Task", "primaryKey": "_id", "properties": {"_id": "objectId", "name": "string", "done": "bool",
  "n": "int", "d": "double?", "tags": "string[]", "set": "int<>", "dict": "mixed{}", "m": "mixed",
  "owner": "User?", "sub": "Sub?", "subs": "Sub[]", "when": "date?", "dec": "decimal128?", "u": "uuid?", "bin": "data?"}},
 {"name": "User", "primaryKey": "_id", "properties": {"_id": "string", "tasks": "Task[]", "age": "int?"}},
 {"name": "Sub", "embedded": true, "properties": {"x": "int", "inner": "Sub?", "link": "User?"}},
 {"name": "Counter", "primaryKey": "_id", "properties": {"_id": "int", "value": "int"}}]}
"""

let configuration: AppConfiguration = {
    do { return try AppConfiguration(json: try EJSON.parse(appJSON)) } catch { fuzzFailure("the app does not load: \(error)") }
}()
let log = Logger(level: .error)
let directory = fuzzScratchDirectory("fuzz-sync")
/// ATOLL_FUZZ_VERBOSE=1 prints each message and the server's replies (to write seeds).
let verbose = ProcessInfo.processInfo.environment["ATOLL_FUZZ_VERBOSE"] != nil

/// Decodes what a message carries the way both sides do, and checks the round trip.
func decodeParts(_ message: Fields) {
    var changesets = (try? message.list("changesets")) ?? []
    if let one = message["changeset"] { changesets.append(one) }
    for value in changesets {
        guard let changeset = try? SyncChangeset(wire: value) else { continue }
        // What a client does with the clocks of a download (SyncSession): move its own clock
        // past them, then take readings for its next commits.
        let clock = HybridClock(node: 1)
        clock.observe(changeset.clock)
        for instruction in changeset.instructions {
            if let c = instruction.clock { clock.observe(c) }
            for c in instruction.fieldClocks.values { clock.observe(c) }
        }
        _ = clock.now()
        _ = clock.stamp(wall: 0)
        do {
            let again = try SyncChangeset(wire: changeset.wireValue)
            guard again.instructions.count == changeset.instructions.count else {
                fuzzFailure("a changeset of \(changeset.instructions.count) instructions reads back with \(again.instructions.count)")
            }
        } catch {
            fuzzFailure("a decoded changeset does not decode from its own wire form: \(error)\n\(Wire.encode(changeset.wireValue))")
        }
    }
    for value in (try? message.list("instructions")) ?? [] {
        _ = try? SyncInstruction(wire: value)
    }
}

func checkReplies(_ peer: MemoryPeer, from start: Int, after line: Substring) {
    for text in peer.sent[start...] {
        guard let reply = try? Wire.decode(text) else { fuzzFailure("the server sent a message that does not decode: \(text)") }
        guard (try? reply.string("type")) == "error" else { continue }
        guard let code = try? reply.string("code"), SyncErrorCode(rawValue: code) != nil else {
            fuzzFailure("an error without a known code: \(text)")
        }
        guard let message = try? reply.string("message"), !message.isEmpty else { fuzzFailure("an error without a message: \(text)") }
        if code == SyncErrorCode.internalServerError.rawValue {
            fuzzFailure("internalServerError for the message \(line): \(message)")
        }
    }
}

func fuzzSync(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)
    try? FileManager.default.removeItem(atPath: directory)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let app: SyncApp
    do { app = try SyncApp(configuration: configuration, directory: directory, log: log, metrics: Metrics()) } catch {
        fuzzFailure("the app does not open: \(error)")
    }
    let bootstraps = Bootstraps()
    app.bootstrapRunner = { _, work in bootstraps.waiting.append(work) }
    let peer = MemoryPeer()
    let connection = SyncConnection(transport: peer, user: RuleUser(id: "fuzz-user"), app: app)
    for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
        if let message = try? Wire.decode(String(line)) { decodeParts(message) }
        let start = peer.sent.count
        app.queue.sync { connection.receive(String(line)) }
        bootstraps.runAll()
        checkReplies(peer, from: start, after: line)
        if verbose { print(">> \(line)\n" + peer.sent[start...].map { "<< " + $0 }.joined(separator: "\n")) }
        if peer.closed { break }
    }
    app.connectionClosed(connection)
    bootstraps.runAll()
    app.close()
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    fuzzSync(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    return 0
}

#if ATOLL_LIBFUZZER
/// The entry point SwiftPM links as `main` (it renames an executable's main to
/// `<module>_main`): libFuzzer's driver, with this target.
@_cdecl("atoll_fuzz_sync_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    FuzzDriver.run(argc, argv, fuzzerTestOneInput)
}
#else
@main struct Replay {
    static func main() { exit(FuzzReplay.main(name: "atoll-fuzz-sync", fuzzSync)) }
}
#endif
