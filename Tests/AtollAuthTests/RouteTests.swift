import AtollAuth
import AtollJSON
import AtollNet
import AtollStore
import XCTest

/// What every route shares: the app id in the path, providers turned off or unknown, bad bodies.
class RouteTests: AuthTestCase {
    func testWrongAppIdIs404() async throws {
        let h = try makeHarness()
        let reply = try await h.request("POST", "auth/providers/anon-user/login", json: "{}", app: "another-app")
        XCTAssertEqual(reply.status, 404)
        XCTAssertEqual(reply.errorCode, "AppNotFound")
        XCTAssertEqual(reply.json.documentValue?["status"], .int(404))
        XCTAssertEqual(try h.service.allUsers().count, 0)
    }

    func testUnknownAndTurnedOffProviders() async throws {
        let h = try makeHarness { configuration in
            configuration.anonymous = false
            configuration.emailPassword = nil
        }
        for path in ["auth/providers/anon-user/login", "auth/providers/local-userpass/register",
                     "auth/providers/local-userpass/login", "auth/providers/custom-token/login",
                     "auth/providers/oauth2-google/login"] {
            let reply = try await h.request("POST", path, json: "{}")
            XCTAssertEqual(reply.status, 404, path)
            XCTAssertEqual(reply.errorCode, "AuthProviderNotFound", path)
        }
    }

    func testEmailPasswordRoutesBelongToLocalUserpass() async throws {
        let h = try makeHarness()
        let reply = try await h.request("POST", "auth/providers/anon-user/register", json: #"{"email":"a@b.co","password":"123456"}"#)
        XCTAssertEqual(reply.status, 404)
        XCTAssertEqual(reply.errorCode, "AuthProviderNotFound")
    }

    func testBadBodiesAre400() async throws {
        let h = try makeHarness()
        let cases: [(String, String, String)] = [
            ("auth/providers/local-userpass/register", "{not json", "not valid JSON"),
            ("auth/providers/local-userpass/register", "[1, 2]", "must be a JSON object"),
            ("auth/providers/local-userpass/register", "", "not valid JSON"),
            ("auth/providers/local-userpass/register", #"{"email": "a@b.co"}"#, "missing \"password\""),
            ("auth/providers/local-userpass/register", #"{"email": 1, "password": "123456"}"#, "\"email\" must be a string"),
            ("auth/providers/local-userpass/register", #"{"email": {"$oid": "bad"}, "password": "123456"}"#, "not valid JSON"),
            ("auth/providers/local-userpass/login", #"{"password": "123456"}"#, "missing \"username\""),
            ("auth/providers/local-userpass/confirm", #"{"token": "t"}"#, "missing \"tokenId\""),
            ("auth/providers/local-userpass/reset", #"{"token": "t", "tokenId": "i"}"#, "missing \"password\""),
            ("auth/providers/api-key/login", "{}", "missing \"key\""),
            ("auth/providers/anon-user/login", "nope", "not valid JSON"),
        ]
        for (path, body, message) in cases {
            let reply = try await h.request("POST", path, json: body)
            XCTAssertEqual(reply.status, 400, "\(path) \(body): \(reply.text)")
            XCTAssertEqual(reply.errorCode, "BadRequest", "\(path) \(body)")
            XCTAssertTrue(reply["error"]?.contains(message) ?? false, "\(path) \(body): \(reply.text) lacks \(message)")
        }
        // Bytes that are not UTF-8.
        let reply = try await h.request("POST", "auth/providers/api-key/login", rawBody: [0x7b, 0x22, 0xff, 0x22, 0x7d])
        XCTAssertEqual(reply.status, 400)
        XCTAssertTrue(reply["error"]?.contains("UTF-8") ?? false, reply.text)
    }
}

/// Several apps on one server.
class MultiAppTests: AuthTestCase {
    func testEachAppHasItsOwnUsersAndKey() async throws {
        let todoApp = try newApp("todo"), chatApp = try newApp("chat")
        let todo = try todoApp.open()
        var chatConfiguration = AuthConfiguration(appId: chatApp.appId)
        chatConfiguration.anonymous = false
        let chat = try chatApp.open(chatConfiguration)
        let server = try HTTPServer()
        AuthService.install([todoApp.appId: todo, chatApp.appId: chat], on: server)
        try server.start()
        addTeardownBlock {
            await server.shutdown()
            todo.close()
            chat.close()
        }
        func post(_ app: String, _ path: String, _ body: String, bearer: String? = nil) async throws -> Reply {
            var headers: HTTPHeaders = ["Content-Type": "application/json"]
            if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
            let r = try await HTTPClient.request("POST", "\(server.url)/api/client/v2.0/app/\(app)/\(path)",
                                                 headers: headers, body: Array(body.utf8))
            return Reply(status: r.status, text: r.text)
        }
        var reply = try await post(todoApp.appId, "auth/providers/anon-user/login", "{}")
        XCTAssertEqual(reply.status, 200)
        let access = try XCTUnwrap(reply["access_token"])
        let refresh = try XCTUnwrap(reply["refresh_token"])
        reply = try await post(chatApp.appId, "auth/providers/anon-user/login", "{}")
        XCTAssertEqual(reply.errorCode, "AuthProviderNotFound", "chat has anonymous logins off")
        reply = try await post(chatApp.appId, "auth/providers/local-userpass/register", #"{"email":"h@example.com","password":"123456"}"#)
        XCTAssertEqual(reply.status, 201)
        reply = try await post("other", "auth/providers/anon-user/login", "{}")
        XCTAssertEqual(reply.errorCode, "AppNotFound")

        // One app's tokens mean nothing to the other.
        reply = try await post(chatApp.appId, "auth/session", "", bearer: refresh)
        XCTAssertEqual(reply.status, 401)
        XCTAssertThrowsError(try chat.verifyAccessToken(access))
        XCTAssertEqual(try todo.allUsers().count, 1)
        XCTAssertEqual(try chat.allUsers().map(\.data), [["email": .string("h@example.com")]])
        XCTAssertNotEqual(try todoApp.signingKey(), try chatApp.signingKey())
        // An email is one identity per app: the other app may register it too.
        reply = try await post(todoApp.appId, "auth/providers/local-userpass/register", #"{"email":"h@example.com","password":"654321"}"#)
        XCTAssertEqual(reply.status, 201, reply.text)
        XCTAssertEqual(try todo.allUsers().count, 2)
    }
}

/// RouteTests on PostgreSQL (skipped without ATOLL_TEST_POSTGRES).
final class RouteTestsOnPostgres: RouteTests {
    override class var storage: TestStorage { .postgres }

    override func testWrongAppIdIs404() async throws { try await super.testWrongAppIdIs404() }
    override func testUnknownAndTurnedOffProviders() async throws { try await super.testUnknownAndTurnedOffProviders() }
    override func testEmailPasswordRoutesBelongToLocalUserpass() async throws { try await super.testEmailPasswordRoutesBelongToLocalUserpass() }
    override func testBadBodiesAre400() async throws { try await super.testBadBodiesAre400() }
}

/// MultiAppTests on PostgreSQL (skipped without ATOLL_TEST_POSTGRES).
final class MultiAppTestsOnPostgres: MultiAppTests {
    override class var storage: TestStorage { .postgres }

    override func testEachAppHasItsOwnUsersAndKey() async throws { try await super.testEachAppHasItsOwnUsersAndKey() }
}
