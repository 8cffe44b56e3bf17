import AtollStore
@testable import AtollSync
import XCTest

/// What a session reports when its own work on the device fails (an error of the client's, not
/// the server's), and when the server sends what the protocol does not have.
final class ClientErrorTests: XCTestCase {
    /// A simulation of one device, bound and subscribed, with nothing left to do.
    private func settledDevice() throws -> Simulation {
        var configuration = SimConfiguration()
        configuration.devices = 1
        configuration.users = 1
        let sim = try Simulation(configuration: configuration, directory: simulationDirectory() + "/run")
        do { try sim.settle() } catch {
            sim.close()
            throw error
        }
        return sim
    }

    func testALocalFailureIsTheClientsOwnErrorNotTheServers() throws {
        let sim = try settledDevice()
        defer { sim.close() }
        let device = sim.devices[0]
        // The table of pending changes is gone: preparing the next upload fails on the device.
        let store = device.session.store
        try store.write { try store.withMetadata { sql in try sql.execute("DROP TABLE _atoll_sync_pending") } }
        try device.write([.create(key: 0, text: "local", n: 1, tags: [])])
        while device.link.runTask() {}
        let errors = device.link.errors
        let local = try XCTUnwrap(errors.first { $0.code == .clientInternalError }, "\(errors)")
        XCTAssertTrue(local.message.contains("local changes could not be prepared for upload"), local.message)
        XCTAssertTrue(local.isFatal)
        XCTAssertFalse(errors.contains { $0.code == .internalServerError }, "\(errors)")
    }

    func testAMessageOutsideTheProtocolIsBadMessageAndTheConnectionIsMadeAgain() throws {
        let sim = try settledDevice()
        defer { sim.close() }
        let device = sim.devices[0]
        let n = device.session.number
        // A type the protocol does not have (for a session, and for none), a known type with a
        // field of the wrong kind, text that is not JSON: each refused the same way.
        let cases = [(#"{"type":"surprise","session":\#(n)}"#, "unknown message type 'surprise'"),
                     (#"{"type":"surprise"}"#, "unknown message type 'surprise'"),
                     (#"{"type":"download","session":\#(n),"serverVersion":"7","changesets":[]}"#, #""serverVersion" must be an integer"#),
                     (#"{"type":"uploadAck","session":\#(n)}"#, #""clientVersion" must be an integer"#),
                     ("not json", "not JSON")]
        for (key, (text, expected)) in cases.enumerated() {
            XCTAssertTrue(device.link.isConnected, text)
            let before = device.link.errors.count
            device.link.inject(text)
            device.link.deliverDown()
            let error = try XCTUnwrap(device.link.errors.dropFirst(before).first, text)
            XCTAssertEqual(error.code, .badMessage, text)
            XCTAssertTrue(error.message.contains(expected), error.message)
            XCTAssertFalse(device.link.isConnected, "the client closes, as the server does with a client's message outside the protocol")
            // It connects again and syncs on.
            try device.write([.create(key: key + 1, text: "after", n: 2, tags: [])])
            try sim.settle()
            XCTAssertTrue(device.link.isConnected)
        }
        XCTAssertEqual(try SimOracle.check(sim, scratch: simulationDirectory()), [])
    }
}
