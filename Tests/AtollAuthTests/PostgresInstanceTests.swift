@testable import AtollAuth
import AtollJSON
import AtollNet
import AtollPostgres
import AtollServer
import AtollStore
import Foundation
import XCTest

/// Several `atoll-server` instances on one PostgreSQL database: services opened on one app's
/// rows, each with its own connection, as two processes would be. Skipped without
/// ATOLL_TEST_POSTGRES.
final class PostgresInstanceTests: AuthTestCase {
    override class var storage: TestStorage { .postgres }

    func testTokensOfOneInstanceWorkOnTheOther() async throws {
        let app = try newApp()
        let a = try makeHarness(app: app), b = try makeHarness(app: app)
        let tokens = try await a.login("anon-user", [:])
        XCTAssertEqual(try b.service.verifyAccessToken(tokens.access).id, tokens.userId)
        var reply = try await b.request("GET", "auth/profile", bearer: tokens.access)
        XCTAssertEqual(reply["user_id"], tokens.userId, reply.text)
        reply = try await b.request("POST", "auth/session", bearer: tokens.refresh)
        XCTAssertEqual(reply.status, 201, reply.text)
        XCTAssertEqual(try a.service.verifyAccessToken(try XCTUnwrap(reply["access_token"])).id, tokens.userId)

        // Registered on one, logged in on the other; an API key made on one logs in on the other.
        reply = try await a.register("ida@example.com", "password")
        XCTAssertEqual(reply.status, 201)
        let ida = try await b.login("local-userpass", ["username": .string("ida@example.com"), "password": .string("password")])
        reply = try await b.post("auth/api_keys", ["name": .string("ci")], bearer: ida.refresh)
        let key = try XCTUnwrap(reply["key"], reply.text)
        let byKey = try await a.login("api-key", ["key": .string(key)])
        XCTAssertEqual(byKey.userId, ida.userId)
        XCTAssertEqual(Set(try a.service.allUsers().map(\.id)), Set(try b.service.allUsers().map(\.id)))
    }

    func testARefreshTokenRevokedOnOneIsRefusedByTheOther() async throws {
        let app = try newApp()
        let a = try makeHarness(app: app), b = try makeHarness(app: app)
        let tokens = try await a.login("anon-user", [:])
        var reply = try await b.request("POST", "auth/session", bearer: tokens.refresh)
        XCTAssertEqual(reply.status, 201, "valid on the other before it is revoked")
        try await a.logOut(tokens.refresh, checkedOn: b)

        // Revoking all of a user's sessions on one.
        let again = try await b.login("anon-user", [:])
        try a.service.revokeSessions(again.userId)
        reply = try await b.request("POST", "auth/session", bearer: again.refresh)
        XCTAssertEqual(reply.status, 401)
    }

    func testAUserDisabledOrDeletedOnOneIsRefusedByTheOther() async throws {
        let app = try newApp()
        let a = try makeHarness(app: app), b = try makeHarness(app: app)
        _ = try await a.register("jo@example.com", "password")
        let credentials: Document = ["username": .string("jo@example.com"), "password": .string("password")]
        let tokens = try await b.login("local-userpass", credentials)

        try a.service.setDisabled(tokens.userId, true)
        XCTAssertThrowsError(try b.service.verifyAccessToken(tokens.access)) { error in
            XCTAssertEqual((error as? AuthError)?.kind, .userDisabled)
        }
        var reply = try await b.post("auth/providers/local-userpass/login", credentials)
        XCTAssertEqual(reply.errorCode, "UserDisabled")
        reply = try await b.request("POST", "auth/session", bearer: tokens.refresh)
        XCTAssertEqual(reply.status, 401)

        // Enabled again on one, the user logs in again: the tokens of before stay refused on
        // both (their session went with the disable).
        try b.service.setDisabled(tokens.userId, false)
        XCTAssertThrowsError(try a.service.verifyAccessToken(tokens.access)) { error in
            XCTAssertEqual((error as? AuthError)?.kind, .invalidSession)
        }
        let again = try await b.login("local-userpass", credentials)
        XCTAssertEqual(try a.service.verifyAccessToken(again.access).id, tokens.userId)
        try b.service.deleteUser(tokens.userId)
        XCTAssertThrowsError(try a.service.verifyAccessToken(again.access)) { error in
            XCTAssertEqual((error as? AuthError)?.kind, .invalidSession)
        }
        reply = try await a.register("jo@example.com", "password")
        XCTAssertEqual(reply.status, 201, "the email is free again on both")
    }

    /// Both instances are inside their registration transactions (past any check) when they
    /// insert: only the unique constraint can keep the email to one identity.
    func testTheSameEmailRegisteredOnBothAtOnceMakesOneIdentity() throws {
        let app = try newApp()
        let services = [try app.open(), try app.open()]
        addTeardownBlock { services.forEach { $0.close() } }
        var register = HTTPRequest(method: "POST", path: "/api/client/v2.0/app/\(app.appId)/auth/providers/local-userpass/register",
                                   headers: ["Content-Type": "application/json"],
                                   body: Array(#"{"email": "kim@example.com", "password": "password"}"#.utf8))
        register.pathParameters = ["app": app.appId, "provider": "local-userpass"]
        let request = register

        let results = try race(app, lockTable: "atoll_auth_users") { try services[$0].register(request).status }
        let statuses = results.compactMap { try? $0.get() }
        let errors = results.compactMap { result -> AuthError? in
            if case .failure(let error) = result { return error as? AuthError }
            return nil
        }
        XCTAssertEqual(statuses, [201], "\(results)")
        XCTAssertEqual(errors, [AuthError(.accountNameInUse, "name already in use")], "\(results)")

        let database = try TestPostgres.connect(self)
        XCTAssertEqual(try database.value("SELECT count(*) FROM atoll_auth_identities WHERE app_id = $1 AND email = $2",
                                          [app.appId, "kim@example.com"]), "1")
        XCTAssertEqual(try database.value("SELECT count(*) FROM atoll_auth_users WHERE app_id = $1", [app.appId]), "1",
                       "the refused registration left no user")
    }

    /// Both instances try to store a key at the same moment: one wins, both use its key.
    func testInstancesStartingAtOnceShareOneSigningKey() throws {
        let app = try newApp()
        try PostgresAuthStore(appId: app.appId, url: try XCTUnwrap(TestPostgres.url)).close()   // makes the tables
        let results = try race(app, lockTable: "atoll_auth_signing_keys") { _ in try app.open() }
        let services = try results.map { try $0.get() }
        addTeardownBlock { services.forEach { $0.close() } }
        XCTAssertEqual(services.count, 2)

        let key = try app.signingKey()
        let claims: Document = ["sub": .string("nobody"), "aud": .string(app.appId), "typ": .string("access"),
                                "exp": .int(TestJWT.now + 60), "sid": .string("no-session")]
        for service in services {
            // Signed with the stored key: each instance checks the signature with it, then finds no user.
            XCTAssertThrowsError(try service.verifyAccessToken(TestJWT.hs256(claims, key: key))) { error in
                XCTAssertEqual((error as? AuthError)?.message, "invalid session: the token's user no longer exists")
            }
        }
        let tokens = try services[0].loginResponse(userId: try services[0].store.transaction { try services[0].store.createUser().id },
                                                   deviceId: "d")
        XCTAssertNotNil(try services[1].verifyAccessToken(try XCTUnwrap(tokens["access_token"]?.stringValue)))
    }

    /// Instances starting at once on a database without the tables: one makes them, the others
    /// find them.
    func testInstancesStartingAtOnceOnAnEmptyDatabaseMakeTheTablesOnce() throws {
        let url = try XCTUnwrap(TestPostgres.url)
        let database = try TestPostgres.connect(self)
        let schema = "atoll_test_\(UUID().uuidString.prefix(8).lowercased())"
        try database.execute("CREATE SCHEMA \(schema)")
        addTeardownBlock { _ = try? database.execute("DROP SCHEMA \(schema) CASCADE") }
        let inSchema = url.contains("://")
            ? url + (url.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
            : url + " options=-csearch_path=\(schema)"

        let app = try newApp()
        let opened = Locked([Result<AuthService, Error>]())
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let result = Result { try PostgresAuthStore.service(configuration: AuthConfiguration(appId: app.appId), url: inSchema) }
            opened.update { $0.append(result) }
        }
        let services = try opened.value.map { try $0.get() }
        defer { services.forEach { $0.close() } }
        XCTAssertEqual(services.count, 4)
        XCTAssertEqual(try database.value("SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'atoll_auth_%'", [schema]), "6")
        XCTAssertEqual(try database.value("SELECT count(*) FROM \(schema).atoll_auth_signing_keys WHERE app_id = $1", [app.appId]), "1")
        let tokens = try services[0].loginResponse(userId: try services[0].store.transaction { try services[0].store.createUser().id },
                                                   deviceId: "d")
        for service in services {
            XCTAssertNotNil(try service.verifyAccessToken(try XCTUnwrap(tokens["access_token"]?.stringValue)))
        }
    }

    func testAConnectionThatBrokeIsMadeAgain() async throws {
        let h = try makeHarness()
        let tokens = try await h.login("anon-user", [:])
        let database = try TestPostgres.connect(self)
        func terminate(line: UInt = #line) throws {
            let killed = try database.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = $1",
                                              [PostgresAuthStore.applicationName(appId: h.appId)])
            XCTAssertEqual(killed, [["t"]], "the service's one connection was ended", line: line)
        }
        try terminate()
        XCTAssertEqual(try h.service.verifyAccessToken(tokens.access).id, tokens.userId, "a read after the break")
        try terminate()
        let again = try await h.login("anon-user", [:])   // a write after the break
        XCTAssertEqual(try h.service.allUsers().count, 2)
        try terminate()
        let reply = try await h.request("DELETE", "auth/session", bearer: again.refresh)
        XCTAssertEqual(reply.status, 204)
    }

    // MARK: - Helpers

    /// Runs `work(0)` and `work(1)` on two threads while `table` is locked against writes, waits
    /// until both wait for that lock, then lets them go: two instances writing at the same moment.
    private func race<T>(_ app: TestApp, lockTable table: String, _ work: @escaping @Sendable (Int) throws -> T) throws -> [Result<T, Error>] {
        let locker = try TestPostgres.connect(self), watcher = try TestPostgres.connect(self)
        try locker.execute("BEGIN")
        try locker.execute("LOCK TABLE \(table) IN EXCLUSIVE MODE")
        let results = Locked([Result<T, Error>]())
        let group = DispatchGroup()
        for i in 0..<2 {
            DispatchQueue.global().async(group: group) {
                let result = Result { try work(i) }
                results.update { $0.append(result) }
            }
        }
        var waiting = 0
        let deadline = Date().addingTimeInterval(30)
        while waiting < 2, Date() < deadline {
            usleep(20_000)
            waiting = Int(try watcher.value("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
                                            [PostgresAuthStore.applicationName(appId: app.appId)]) ?? "") ?? 0
        }
        try locker.execute("COMMIT")
        group.wait()
        XCTAssertEqual(waiting, 2, "both instances waited for the lock on \(table) (\(results.value))")
        return results.value
    }
}

/// A value several threads change under a lock.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value { lock.withLock { stored } }

    func update(_ change: (inout Value) -> Void) { lock.withLock { change(&stored) } }
}
