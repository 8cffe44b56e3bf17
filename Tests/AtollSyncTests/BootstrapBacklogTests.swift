import AtollJSON
import AtollProtocol
@testable import AtollServer
import AtollStore
import Foundation
import XCTest

/// A session's messages that wait for its bootstrap are handled after it as they would have been
/// when they came: not at all for a connection whose token expired meanwhile, and within a bound
/// per user.
final class BootstrapBacklogTests: XCTestCase {
    /// A connection's server end that keeps what is sent and how it closed.
    final class Transport: SyncTransport, @unchecked Sendable {
        var sent: [String] = []
        var closeCode: UInt16?
        func send(_ text: String) throws { sent.append(text) }
        func close(code: UInt16, reason: String) { closeCode = code }
        var remoteAddress: String { "test" }

        /// The `type` of each message sent, and the `code` of each error.
        var types: [String] { sent.compactMap { try? Wire.decode($0) }.compactMap { try? $0.string("type") } }
        var errorCodes: [String] {
            sent.compactMap { try? Wire.decode($0) }.filter { (try? $0.string("type")) == "error" }.compactMap { try? $0.string("code") }
        }
    }

    /// The simulation's app, one connection of user "u" to it, and the bootstraps it starts, run
    /// when the test says (as the simulation does).
    struct World {
        let app: ServerApp
        let bootstraps = SimBootstraps()
        let transport = Transport()
        let connection: SyncConnection

        init(_ test: XCTestCase, limits: SyncLimits? = nil, expiresAt: Double? = nil) throws {
            app = try ServerApp(configuration: ServerAppConfiguration(json: try EJSON.parse(Simulation.appJSON)), directory: test.simulationDirectory(),
                              log: Logger(level: .error), metrics: Metrics())
            if let limits { app.limits = limits }
            app.bootstrapRunner = { [bootstraps] _, work in bootstraps.add(work) }
            connection = SyncConnection(transport: transport, user: RuleUser(id: "u"), app: app, expiresAt: expiresAt)
        }

        func receive(_ text: String) { app.queue.sync { connection.receive(text) } }

        /// Binds session 1 as a new file and subscribes to every Item: its bootstrap waits.
        func bindAndSubscribe() {
            receive(#"{"type":"bind","session":1,"mode":"flexible","file":null,"downloadCursor":0}"#)
            receive(#"{"type":"query","session":1,"version":1,"queries":[{"name":"all","class":"Item","query":"TRUEPREDICATE","args":[]}]}"#)
        }

        /// Uploads changeset `version`, the create of Item `k<version>` with `text`.
        func upload(_ version: Int, text: String) {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            receive(#"{"type":"upload","session":1,"changesets":[{"clientVersion":\#(version),"lastServerVersion":0,"clock":[\#(now + Int64(version)),0,77],"#
                    + #""instructions":[{"op":"create","class":"Item","primaryKey":"k\#(version)","object":{"text":"\#(text)","n":1,"owner":""}}]}]}"#)
        }

        var latestVersion: UInt64 { app.queue.sync { app.latestVersion } }
        var pendingBytes: Int { app.pendingBytes.load(ordering: .relaxed) }

        func close() {
            app.connectionClosed(connection)
            bootstraps.runAll()
            app.close()
        }
    }

    func testAnUploadThatWaitedForABootstrapIsNotIntegratedAfterItsTokenExpired() throws {
        let world = try World(self, expiresAt: Date().timeIntervalSince1970 + 0.5)
        world.bindAndSubscribe()
        world.upload(1, text: "late")
        XCTAssertEqual(world.bootstraps.count, 1, "the query's bootstrap waits; the upload waits behind it")
        Thread.sleep(forTimeInterval: 0.7)
        world.bootstraps.runAll()
        XCTAssertEqual(world.latestVersion, 0, "the upload was integrated after its token expired")
        XCTAssertEqual(world.transport.closeCode, 1008)
        XCTAssertEqual(world.pendingBytes, 0)
        world.close()
    }

    func testAnUploadThatWaitedForABootstrapIsIntegratedAfterIt() throws {
        let world = try World(self)
        world.bindAndSubscribe()
        world.upload(1, text: "on time")
        XCTAssertEqual(world.latestVersion, 0, "the upload waits for the bootstrap")
        XCTAssertGreaterThan(world.pendingBytes, 0, "the waiting upload's bytes stay counted")
        world.bootstraps.runAll()
        XCTAssertEqual(world.latestVersion, 1)
        XCTAssertEqual(world.pendingBytes, 0)
        // The bootstrap, its completion, then the upload's acknowledgement.
        XCTAssertEqual(Array(world.transport.types.suffix(3)), ["download", "queryComplete", "uploadAck"], "\(world.transport.types)")
        XCTAssertNil(world.transport.closeCode)
        world.close()
    }

    func testWhatOneUserHasWaitingForItsBootstrapsIsBounded() throws {
        let world = try World(self, limits: SyncLimits(maxUploadsPerSecond: 0, maxPendingBytes: 4000))
        world.bindAndSubscribe()
        // Uploads of about 1 kB each while the bootstrap waits: the fourth goes past 4,000 bytes.
        for v in 1...5 { world.upload(v, text: String(repeating: "x", count: 900)) }
        XCTAssertEqual(world.transport.errorCodes, ["tooManyMessages"], "\(world.transport.sent)")
        XCTAssertEqual(world.transport.closeCode, 1008)
        // Three held (about 3,200 bytes); the fourth was refused, the fifth not read.
        let held = world.app.queue.sync { world.app.heldBytes["u"] ?? 0 }
        XCTAssertGreaterThan(held, 3000)
        XCTAssertLessThanOrEqual(held, 4000)
        // The connection goes: what it had waiting is uncounted, and nothing of it is integrated.
        world.close()
        XCTAssertNil(world.app.heldBytes["u"])
        XCTAssertEqual(world.pendingBytes, 0)
        XCTAssertEqual(world.app.latestVersion, 0)
    }
}
