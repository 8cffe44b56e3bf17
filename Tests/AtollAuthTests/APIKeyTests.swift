import AtollAuth
import AtollJSON
import AtollStore
import XCTest

/// The `auth/api_keys` routes, authorized with the refresh token.
class APIKeyTests: AuthTestCase {
    func testCreateListGetEnableDisableDelete() async throws {
        let h = try makeHarness()
        let owner = try await h.login("anon-user", [:])
        let stranger = try await h.login("anon-user", [:])

        var reply = try await h.post("auth/api_keys", ["name": .string("laptop")], bearer: owner.refresh)
        XCTAssertEqual(reply.status, 201, reply.text)
        let created = try XCTUnwrap(reply.json.documentValue)
        let id = try XCTUnwrap(created["_id"]?.stringValue)
        XCTAssertEqual(created["name"], .string("laptop"))
        XCTAssertEqual(created["disabled"], .bool(false))
        XCTAssertEqual(created["key"]?.stringValue?.count, 64)
        reply = try await h.post("auth/api_keys", ["name": .string("phone")], bearer: owner.refresh)
        let phoneId = try XCTUnwrap(reply["_id"])

        reply = try await h.post("auth/api_keys", ["name": .string("laptop")], bearer: owner.refresh)
        XCTAssertEqual(reply.status, 409)
        XCTAssertEqual(reply.errorCode, "APIKeyAlreadyExists")
        // Names are unique per user: another user may use the same one.
        reply = try await h.post("auth/api_keys", ["name": .string("laptop")], bearer: stranger.refresh)
        XCTAssertEqual(reply.status, 201)

        reply = try await h.request("GET", "auth/api_keys", bearer: owner.refresh)
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.json, .list([
            .object(["_id": .string(id), "name": .string("laptop"), "disabled": .bool(false)]),
            .object(["_id": .string(phoneId), "name": .string("phone"), "disabled": .bool(false)]),
        ]), "listed without the keys")

        reply = try await h.request("PUT", "auth/api_keys/\(id)/disable", bearer: owner.refresh)
        XCTAssertEqual(reply.status, 204)
        reply = try await h.request("GET", "auth/api_keys/\(id)", bearer: owner.refresh)
        XCTAssertEqual(reply.json, .object(["_id": .string(id), "name": .string("laptop"), "disabled": .bool(true)]))
        reply = try await h.request("PUT", "auth/api_keys/\(id)/enable", bearer: owner.refresh)
        XCTAssertEqual(reply.status, 204)
        reply = try await h.request("GET", "auth/api_keys/\(id)", bearer: owner.refresh)
        XCTAssertEqual(reply.json.documentValue?["disabled"], .bool(false))

        // Another user's key is not found for this one.
        for (method, path) in [("GET", "auth/api_keys/\(id)"), ("DELETE", "auth/api_keys/\(id)"),
                               ("PUT", "auth/api_keys/\(id)/disable"), ("GET", "auth/api_keys/nope")] {
            reply = try await h.request(method, path, bearer: stranger.refresh)
            XCTAssertEqual(reply.status, 404, "\(method) \(path)")
            XCTAssertEqual(reply.errorCode, "APIKeyNotFound", "\(method) \(path)")
        }

        reply = try await h.request("DELETE", "auth/api_keys/\(id)", bearer: owner.refresh)
        XCTAssertEqual(reply.status, 204)
        reply = try await h.request("GET", "auth/api_keys/\(id)", bearer: owner.refresh)
        XCTAssertEqual(reply.status, 404)
        reply = try await h.request("GET", "auth/api_keys", bearer: owner.refresh)
        XCTAssertEqual(reply.json.listValue?.count, 1)
    }

    func testAuthorizationAndBodies() async throws {
        let h = try makeHarness()
        let owner = try await h.login("anon-user", [:])
        // The access token does not manage keys (App Services wants the refresh token).
        var reply = try await h.post("auth/api_keys", ["name": .string("k")], bearer: owner.access)
        XCTAssertEqual(reply.status, 401)
        XCTAssertEqual(reply.errorCode, "InvalidSession")
        reply = try await h.request("GET", "auth/api_keys")
        XCTAssertEqual(reply.status, 401)

        for body in ["{}", #"{"name": 3}"#, #"{"name": ""}"#, "[]", "{bad"] {
            reply = try await h.request("POST", "auth/api_keys", json: body, bearer: owner.refresh)
            XCTAssertEqual(reply.status, 400, body)
        }
    }

    func testTurnedOff() async throws {
        let h = try makeHarness { $0.apiKeys = false }
        let owner = try await h.login("anon-user", [:])
        var reply = try await h.post("auth/api_keys", ["name": .string("k")], bearer: owner.refresh)
        XCTAssertEqual(reply.status, 404)
        XCTAssertEqual(reply.errorCode, "AuthProviderNotFound")
        reply = try await h.post("auth/providers/api-key/login", ["key": .string("x")])
        XCTAssertEqual(reply.status, 404)
    }
}

/// APIKeyTests on PostgreSQL (skipped without ATOLL_TEST_POSTGRES).
final class APIKeyTestsOnPostgres: APIKeyTests {
    override class var storage: TestStorage { .postgres }

    override func testCreateListGetEnableDisableDelete() async throws { try await super.testCreateListGetEnableDisableDelete() }
    override func testAuthorizationAndBodies() async throws { try await super.testAuthorizationAndBodies() }
    override func testTurnedOff() async throws { try await super.testTurnedOff() }
}
