import AtollJSON
import AtollProtocol
@testable import AtollServer
import AtollStore
import Foundation
import XCTest

/// A session's messages that wait for its bootstrap are handled after it as they would have been
/// when they came: not at all for a connection whose token expired meanwhile.
final class BootstrapBacklogTests: XCTestCase {
    /// A connection's server end that keeps what is sent and how it closed.
    final class Transport: SyncTransport, @unchecked Sendable {
        var sent: [String] = []
        var closeCode: UInt16?
        func send(_ text: String) throws { sent.append(text) }
        func close(code: UInt16, reason: String) { closeCode = code }
        var remoteAddress: String { "test" }
    }

    /// The bootstraps the app started, run by the test (as the simulation does).
    final class Waiting: @unchecked Sendable {
        var jobs: [@Sendable () -> Void] = []
        func runAll() { while !jobs.isEmpty { jobs.removeFirst()() } }
    }

    func testAnUploadThatWaitedForABootstrapIsNotIntegratedAfterItsTokenExpired() throws {
        let directory = simulationDirectory()
        let app = try SyncApp(configuration: AppConfiguration(json: try EJSON.parse(Simulation.appJSON)), directory: directory,
                              log: Logger(level: .error), metrics: Metrics())
        let waiting = Waiting()
        app.bootstrapRunner = { _, work in waiting.jobs.append(work) }
        let transport = Transport()
        let connection = SyncConnection(transport: transport, user: RuleUser(id: "u"), app: app,
                                        expiresAt: Date().timeIntervalSince1970 + 0.5)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for text in [
            #"{"type":"bind","session":1,"mode":"flexible","file":null,"downloadCursor":0}"#,
            #"{"type":"query","session":1,"version":1,"queries":[{"name":"all","class":"Item","query":"TRUEPREDICATE","args":[]}]}"#,
            #"{"type":"upload","session":1,"changesets":[{"clientVersion":1,"lastServerVersion":0,"clock":[\#(now),0,77],"#
                + #""instructions":[{"op":"create","class":"Item","primaryKey":"k1","object":{"text":"late","n":1,"owner":""}}]}]}"#,
        ] {
            app.queue.sync { connection.receive(text) }
        }
        XCTAssertEqual(waiting.jobs.count, 1, "the query's bootstrap waits; the upload waits behind it")
        Thread.sleep(forTimeInterval: 0.7)
        waiting.runAll()
        XCTAssertEqual(app.queue.sync { app.latestVersion }, 0, "the upload was integrated after its token expired")
        XCTAssertEqual(transport.closeCode, 1008)
        XCTAssertEqual(app.pendingBytes.load(ordering: .relaxed), 0)
        app.connectionClosed(connection)
        app.close()
    }

    func testAnUploadThatWaitedForABootstrapIsIntegratedAfterIt() throws {
        let directory = simulationDirectory()
        let app = try SyncApp(configuration: AppConfiguration(json: try EJSON.parse(Simulation.appJSON)), directory: directory,
                              log: Logger(level: .error), metrics: Metrics())
        let waiting = Waiting()
        app.bootstrapRunner = { _, work in waiting.jobs.append(work) }
        let transport = Transport()
        let connection = SyncConnection(transport: transport, user: RuleUser(id: "u"), app: app)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for text in [
            #"{"type":"bind","session":1,"mode":"flexible","file":null,"downloadCursor":0}"#,
            #"{"type":"query","session":1,"version":1,"queries":[{"name":"all","class":"Item","query":"TRUEPREDICATE","args":[]}]}"#,
            #"{"type":"upload","session":1,"changesets":[{"clientVersion":1,"lastServerVersion":0,"clock":[\#(now),0,77],"#
                + #""instructions":[{"op":"create","class":"Item","primaryKey":"k1","object":{"text":"on time","n":1,"owner":""}}]}]}"#,
        ] {
            app.queue.sync { connection.receive(text) }
        }
        XCTAssertEqual(app.queue.sync { app.latestVersion }, 0, "the upload waits for the bootstrap")
        XCTAssertGreaterThan(app.pendingBytes.load(ordering: .relaxed), 0, "the waiting upload's bytes stay counted")
        waiting.runAll()
        XCTAssertEqual(app.queue.sync { app.latestVersion }, 1)
        XCTAssertEqual(app.pendingBytes.load(ordering: .relaxed), 0)
        let types = transport.sent.compactMap { try? Wire.decode($0) }.compactMap { try? $0.string("type") }
        // The bootstrap, its completion, then the upload's acknowledgement.
        XCTAssertEqual(Array(types.suffix(3)), ["download", "queryComplete", "uploadAck"], "\(types)")
        XCTAssertNil(transport.closeCode)
        app.connectionClosed(connection)
        app.close()
    }

    func testWhatOneUserHasWaitingForItsBootstrapsIsBounded() throws {
        let app = try SyncApp(configuration: AppConfiguration(json: try EJSON.parse(Simulation.appJSON)), directory: simulationDirectory(),
                              log: Logger(level: .error), metrics: Metrics())
        app.limits = SyncLimits(maxUploadsPerSecond: 0, maxPendingBytes: 4000)
        let waiting = Waiting()
        app.bootstrapRunner = { _, work in waiting.jobs.append(work) }
        let transport = Transport()
        let connection = SyncConnection(transport: transport, user: RuleUser(id: "u"), app: app)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        app.queue.sync {
            connection.receive(#"{"type":"bind","session":1,"mode":"flexible","file":null,"downloadCursor":0}"#)
            connection.receive(#"{"type":"query","session":1,"version":1,"queries":[{"name":"all","class":"Item","query":"TRUEPREDICATE","args":[]}]}"#)
        }
        // Uploads of about 1 kB each while the bootstrap waits: the fourth goes past 4,000 bytes.
        for v in 1...5 {
            let text = #"{"type":"upload","session":1,"changesets":[{"clientVersion":\#(v),"lastServerVersion":0,"clock":[\#(now + Int64(v)),0,77],"#
                + #""instructions":[{"op":"create","class":"Item","primaryKey":"k\#(v)","object":{"text":"\#(String(repeating: "x", count: 900))","n":1,"owner":""}}]}]}"#
            app.queue.sync { connection.receive(text) }
        }
        let errors = transport.sent.compactMap { try? Wire.decode($0) }.filter { (try? $0.string("type")) == "error" }
        XCTAssertEqual(errors.compactMap { try? $0.string("code") }, ["tooManyMessages"], "\(transport.sent)")
        XCTAssertEqual(transport.closeCode, 1008)
        // Three held (about 3,200 bytes); the fourth was refused, the fifth not read.
        let held = app.queue.sync { app.heldBytes["u"] ?? 0 }
        XCTAssertGreaterThan(held, 3000)
        XCTAssertLessThanOrEqual(held, 4000)
        // The connection goes: what it had waiting is uncounted, and nothing of it is integrated.
        app.connectionClosed(connection)
        waiting.runAll()
        XCTAssertEqual(app.queue.sync { app.heldBytes["u"] }, nil)
        XCTAssertEqual(app.pendingBytes.load(ordering: .relaxed), 0)
        XCTAssertEqual(app.queue.sync { app.latestVersion }, 0)
        app.close()
    }
}
