import AtollJSON
import AtollNet
import AtollProtocol
import AtollServer
import AtollStore
import AtollSync
import CJansson
import Foundation
import XCTest

/// A server and clients in this process, over loopback: real sockets, real files.
final class SyncHarness: @unchecked Sendable {
    let directory: String
    let server: SyncServer

    static let schemaJSON = """
    [{"name": "Task", "primaryKey": "_id", "properties": {"_id": "string", "name": "string?", "owner_id": "string?",
      "done": "bool", "priority": "int", "tags": "string[]", "labels": "string<>", "attrs": "string{}"}}]
    """

    static var schema: Schema {
        // The test's own fixed text: it parses.
        guard let json = try? EJSON.load(schemaJSON) else { return Schema() }
        defer { json_decref(json) }
        return (try? SchemaJSON.schema(json)) ?? Schema()
    }

    init(config: String? = nil, authHooks: (@Sendable (inout AuthConfigurationProxy) -> Void)? = nil) throws {
        directory = NSTemporaryDirectory() + "atoll-sync-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var configuration = ServerConfiguration()
        if let config {
            let file = directory + "/config.json"
            try config.write(toFile: file, atomically: true, encoding: .utf8)
            configuration = try ServerConfiguration(file: file)
        }
        configuration.port = 0
        configuration.dataDirectory = directory + "/server"
        configuration.logLevel = .error
        server = try SyncServer(configuration: configuration)
        try server.start()
    }

    deinit {
        let server = self.server
        let done = DispatchSemaphore(value: 0)
        Task {
            await server.shutdown()
            done.signal()
        }
        done.wait()
        try? FileManager.default.removeItem(atPath: directory)
    }

    func app(_ name: String, appId: String = "default") throws -> App {
        try App(configuration: AppConfiguration(appId: appId, baseURL: server.url, metadataDirectory: directory + "/\(name)", connectTimeout: 5))
    }

    /// Opens a synced realm for a user: the session and the app's own store handle.
    func open(_ user: User, _ file: String, mode: SyncConfiguration.Mode = .flexible,
              subscriptions: [QuerySubscription] = [], schema: Schema = SyncHarness.schema) throws -> (SyncSession, Store) {
        var sync = SyncConfiguration(mode: mode)
        sync.initialSubscriptions = subscriptions
        let configuration = Configuration(path: directory + "/" + file, schema: schema)
        let session = try SyncSession.open(user: user, storeConfiguration: configuration, sync: sync)
        return (session, try Store(configuration))
    }
}

/// Placeholder so that harness users can pass auth settings later without importing AtollAuth.
struct AuthConfigurationProxy {}

/// Runs an async call from a test's (non-pool) thread.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    guard let result = box.result else { throw SyncError(.internalServerError, "no result") }
    return try result.get()
}

final class ResultBox<T>: @unchecked Sendable { var result: Result<T, Error>? }

final class SyncTests: XCTestCase {
    func testTwoClientsShareDataLive() throws {
        let h = try SyncHarness()
        let appA = try h.app("a"), appB = try h.app("b")
        let ann = try blocking { try await appA.login(.anonymous) }
        let bob = try blocking { try await appB.login(.anonymous) }
        let all = [QuerySubscription(name: "all", className: "Task")]
        let (sa, storeA) = try h.open(ann, "a.realm", subscriptions: all)
        let (sb, storeB) = try h.open(bob, "b.realm", subscriptions: all)
        defer { sa.release(); sb.release() }
        try sa.waitForInitialDownload(timeout: 10)
        try sb.waitForInitialDownload(timeout: 10)

        try storeA.write {
            _ = try storeA.create("Task", ["_id": .string("t1"), "name": .string("Buy milk"), "priority": .int(2),
                                           "tags": .list([.string("home"), .string("shop")])])
        }
        try sa.waitForUpload(timeout: 10)
        try sb.waitForDownload(timeout: 10)
        _ = try storeB.refresh()
        let t1 = try storeB.object("Task", primaryKey: .string("t1"))
        XCTAssertEqual(t1?["name"], .string("Buy milk"))
        XCTAssertEqual(t1?["tags"], .list([.string("home"), .string("shop")]))

        // Both edit: different fields merge, list inserts both survive.
        try storeA.write {
            try storeA.listInsert("Task", primaryKey: .string("t1"), property: "tags", .string("a-first"), at: 0)
            _ = try storeA.create("Task", ["_id": .string("t1"), "done": .bool(true)], update: .modified)
        }
        try storeB.write {
            try storeB.listInsert("Task", primaryKey: .string("t1"), property: "tags", .string("b-last"), at: 2)
            _ = try storeB.create("Task", ["_id": .string("t1"), "priority": .int(5)], update: .modified)
        }
        for s in [sa, sb] { try s.waitForUpload(timeout: 10) }
        for s in [sa, sb] { try s.waitForDownload(timeout: 10) }
        _ = try storeA.refresh()
        _ = try storeB.refresh()
        let a = try storeA.object("Task", primaryKey: .string("t1"))
        let b = try storeB.object("Task", primaryKey: .string("t1"))
        XCTAssertEqual(a, b)
        XCTAssertEqual(a?["done"], .bool(true))
        XCTAssertEqual(a?["priority"], .int(5))
        XCTAssertEqual(a?["tags"], .list(["a-first", "home", "shop", "b-last"].map { .string($0) }))

        // Erase on one side reaches the other.
        try storeB.write { try storeB.delete("Task", primaryKey: .string("t1")) }
        try sb.waitForUpload(timeout: 10)
        try sa.waitForDownload(timeout: 10)
        _ = try storeA.refresh()
        XCTAssertNil(try storeA.object("Task", primaryKey: .string("t1")))
    }
}
