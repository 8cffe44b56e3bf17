import AtollPostgres
import AtollProtocol
@testable import AtollServer
import AtollStore
import AtollSync
import AtollTestSupport
import Foundation
import XCTest

/// An instance's cache of a PostgreSQL storage (docs/deploy.md, "How instances share one
/// database"): kept across restarts when it is this database's, made again when it is not.
final class SharedStorageTests: XCTestCase {
    func testACacheIsKeptAcrossRestartsOnlyForItsOwnDatabase() throws {
        guard TestPostgres.syncOnPostgres else { throw XCTSkip("the servers' data is in SQLite in this run (ATOLL_SYNC_STORE=postgres runs it)") }
        let first = try TestPostgres.freshDatabase()
        let h = try SyncHarness(postgresURL: first)
        let app = try h.app("writer")
        let user = try runToCompletion { try await app.login(.anonymous) }
        let (session, store) = try h.open(user, "writer.realm", subscriptions: [SubscriptionQuery(name: "all", className: "Task")])
        try session.waitForInitialDownload(timeout: 10)
        try store.write {
            for key in ["t1", "t2"] { _ = try store.create("Task", ["_id": .string(key), "name": .string(key)]) }
        }
        try session.waitForUpload(timeout: 10)
        session.release()
        store.close()
        let directory = h.directory + "/server"
        h.stopServer()

        // Behind the server's back, t2 goes from the database (its history stays). A cache made
        // again would lose it; a kept cache still has it.
        let db = try PostgresConnection(url: first)
        try db.execute("DELETE FROM atoll_sync_objects WHERE key = $1", ["\"t2\""])
        db.close()
        XCTAssertEqual(try tasks(afterAStartOn: first, directory: directory), ["t1", "t2"],
                       "the cache of this database was not kept across the restart")

        // Another database (empty): nothing of the first may be served from the cache.
        XCTAssertEqual(try tasks(afterAStartOn: try TestPostgres.freshDatabase(), directory: directory), [],
                       "a cache made from another database was kept")
    }

    /// A new instance reads the app in batches, each written in a transaction of its own; links
    /// between objects of different batches (and a cycle) arrive whole.
    func testANewInstanceReadsLinkedObjectsInBatches() throws {
        guard TestPostgres.syncOnPostgres else { throw XCTSkip("the servers' data is in SQLite in this run (ATOLL_SYNC_STORE=postgres runs it)") }
        let url = try TestPostgres.freshDatabase()
        let h = try SyncHarness(postgresURL: url)
        let schema = Schema([ObjectSchema(name: "Person", primaryKey: "_id", properties: [
            Property(name: "_id", type: .string), Property(name: "friend", type: .object, objectType: "Person", isOptional: true),
        ])])
        let app = try h.app("people")
        let user = try runToCompletion { try await app.login(.anonymous) }
        let (session, store) = try h.open(user, "people.realm", subscriptions: [SubscriptionQuery(name: "all", className: "Person")],
                                          schema: schema)
        try session.waitForInitialDownload(timeout: 10)
        let names = (1...7).map { "p\($0)" }
        try store.write {
            for n in names { _ = try store.create("Person", ["_id": .string(n)]) }
            // Each names the next; the last names the first.
            for (i, n) in names.enumerated() {
                _ = try store.create("Person", ["_id": .string(n), "friend": .string(names[(i + 1) % names.count])], update: .modified)
            }
        }
        try session.waitForUpload(timeout: 10)
        session.release()
        store.close()
        h.stopServer()

        var configuration = ServerConfiguration()
        configuration.postgresCatchUpBatch = 2
        configuration.port = 0
        configuration.dataDirectory = h.directory + "/another-instance"
        configuration.logLevel = .error
        configuration.postgresURL = url
        let other = try SyncServer(configuration: configuration)
        _ = try runToCompletion { await other.shutdown() }
        let cache = try Store(Configuration(path: configuration.dataDirectory + "/default/cache.realm"))
        defer { cache.close() }
        for (i, n) in names.enumerated() {
            XCTAssertEqual(try cache.object("Person", primaryKey: .string(n))?["friend"], .string(names[(i + 1) % names.count]), n)
        }
    }

    /// Starts and stops an instance on `url` with its data in `directory`; the Tasks its cache
    /// holds then.
    private func tasks(afterAStartOn url: String, directory: String) throws -> [String] {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataDirectory = directory
        configuration.logLevel = .error
        configuration.postgresURL = url
        let server = try SyncServer(configuration: configuration)
        _ = try runToCompletion { await server.shutdown() }
        let cache = try Store(Configuration(path: directory + "/default/cache.realm"))
        defer { cache.close() }
        guard cache.schema.classes.contains(where: { $0.name == "Task" }) else { return [] }
        return try cache.objects("Task").documents().compactMap { $0["_id"]?.stringValue }.sorted()
    }
}
