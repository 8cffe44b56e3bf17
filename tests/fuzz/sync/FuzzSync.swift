// Fuzz target "sync": sync protocol messages (docs/testing.md). An input is client messages, one
// JSON text per line. Each line is decoded as the server decodes it (`ClientMessage`), encoded
// and decoded again (the same message must come back), and then it is handled by an in-process `ServerApp` (the server's engine,
// with its store in a scratch directory) through an in-memory connection, as a WebSocket would
// deliver it: bind, query, upload (integration into the store), mark, unbind. The bootstraps
// the app starts (off its queue) run after the message that started them.
//
// Contract checked: nothing traps (a client's clock also observes each changeset's clocks and
// reads on, as after a download); every message the server sends decodes as a client decodes it
// (`ServerMessage`) and round-trips; every `error` has a known code and a non-empty message, and
// none is `internalServerError` (bad input is named as such).
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

let configuration: ServerAppConfiguration = {
    do { return try ServerAppConfiguration(json: try EJSON.parse(appJSON)) } catch { fuzzFailure("the app does not load: \(error)") }
}()
let log = Logger(level: .error)
let directory = fuzzScratchDirectory("fuzz-sync")
/// ATOLL_FUZZ_VERBOSE=1 prints each message and the server's replies (to write seeds).
let verbose = ProcessInfo.processInfo.environment["ATOLL_FUZZ_VERBOSE"] != nil

/// Decodes a message as the server does, checks that its encoding decodes to the same message
/// (the encoder and the decoder agree on everything the decoder accepts), and takes the clocks of
/// its changesets as a client takes a download's.
func decodeParts(_ text: String) {
    guard let message = try? ClientMessage(text: text) else { return }
    let encoded = message.text
    do {
        let again = try ClientMessage(text: encoded)
        guard again.text == encoded else { fuzzFailure("a client message does not encode the same after a round trip:\n\(encoded)\n\(again.text)") }
    } catch {
        fuzzFailure("a decoded client message does not decode from its own encoding: \(error)\n\(encoded)")
    }
    guard case .upload(_, let changesets) = message else { return }
    for item in changesets {
        guard let (changeset, _) = try? item.decode() else { continue }
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
    }
}

/// Every reply decodes as a client decodes it (and round-trips); an error has a known code and a
/// message, and is never `internalServerError`.
func checkReplies(_ peer: MemoryPeer, from start: Int, after line: Substring) {
    for text in peer.sent[start...] {
        let reply: ServerMessage
        do { reply = try ServerMessage(text: text) } catch { fuzzFailure("the server sent a message a client cannot decode (\(error)): \(text)") }
        guard (try? ServerMessage(text: reply.text))?.text == reply.text else { fuzzFailure("a server message does not round-trip: \(text)") }
        guard case .error(let error) = reply else { continue }
        guard let raw = try? Wire.decode(text), let code = try? raw.string("code"), SyncErrorCode(rawValue: code) != nil else {
            fuzzFailure("an error without a known code: \(text)")
        }
        guard !error.message.isEmpty else { fuzzFailure("an error without a message: \(text)") }
        if error.code == .internalServerError {
            fuzzFailure("internalServerError for the message \(line): \(error.message)")
        }
    }
}

func fuzzSync(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)
    try? FileManager.default.removeItem(atPath: directory)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let app: ServerApp
    do { app = try ServerApp(configuration: configuration, directory: directory, log: log, metrics: Metrics()) } catch {
        fuzzFailure("the app does not open: \(error)")
    }
    let bootstraps = Bootstraps()
    app.bootstrapRunner = { _, work in bootstraps.waiting.append(work) }
    let peer = MemoryPeer()
    let connection = SyncConnection(transport: peer, user: RuleUser(id: "fuzz-user"), app: app)
    for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
        decodeParts(String(line))
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
