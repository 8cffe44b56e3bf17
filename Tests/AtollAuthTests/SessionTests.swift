@testable import AtollAuth
import AtollJSON
import AtollNet
import AtollStore
import Foundation
import XCTest

/// Access and refresh tokens: refreshing, logging out, expiry, forgery, and users deleted or
/// disabled while their tokens are out.
class SessionTests: AuthTestCase {
    /// The service's signing key, read from its storage as only the server should.
    private func signingKey(_ h: AuthHarness) throws -> [UInt8] { try h.app.signingKey() }

    func testRefreshAndLogout() async throws {
        let h = try makeHarness()
        let tokens = try await h.login("anon-user", [:])
        var reply = try await h.request("POST", "auth/session", bearer: tokens.refresh)
        XCTAssertEqual(reply.status, 201, reply.text)
        let access = try XCTUnwrap(reply["access_token"])
        XCTAssertEqual(try h.service.verifyAccessToken(access).id, tokens.userId)
        XCTAssertEqual(h.service.counters.tokenRefreshes, 1)

        // An access token is not a refresh token, nor the reverse.
        reply = try await h.request("POST", "auth/session", bearer: tokens.access)
        XCTAssertEqual(reply.status, 401)
        XCTAssertEqual(reply.errorCode, "InvalidSession")
        reply = try await h.request("GET", "auth/profile", bearer: tokens.refresh)
        XCTAssertEqual(reply.status, 401)
        XCTAssertEqual(reply.errorCode, "InvalidSession")

        try await h.logOut(tokens.refresh, checkedOn: h)
        // The logout ends the session's access tokens too: the login's and the refreshed one.
        for token in [tokens.access, access] {
            XCTAssertThrowsError(try h.service.verifyAccessToken(token)) { error in
                XCTAssertEqual((error as? AuthError)?.kind, .invalidSession)
            }
        }

        // Missing or malformed headers.
        reply = try await h.request("POST", "auth/session")
        XCTAssertEqual(reply.json, .object(["error": .string("invalid session: missing Authorization: Bearer header"),
                                            "error_code": .string("InvalidSession"), "status": .int(401)]))
        reply = try await h.request("GET", "auth/profile", bearer: "")
        XCTAssertEqual(reply.status, 401)
    }

    func testAccessTokenClaims() async throws {
        let h = try makeHarness { $0.accessTokenLifetime = 120 }
        let tokens = try await h.login("anon-user", [:])
        let parts = tokens.access.split(separator: ".")
        XCTAssertEqual(parts.count, 3)
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
        let claims = try XCTUnwrap(try EJSON.parse(String(decoding: Data(base64Encoded: payload) ?? Data(), as: UTF8.self)).documentValue)
        XCTAssertEqual(claims["sub"], .string(tokens.userId))
        XCTAssertEqual(claims["aud"], .string(h.appId))
        XCTAssertEqual(claims["typ"], .string("access"))
        XCTAssertEqual(claims["jti"]?.stringValue?.count, 24)
        let iat = try XCTUnwrap(claims["iat"]?.intValue), exp = try XCTUnwrap(claims["exp"]?.intValue)
        XCTAssertEqual(exp - iat, 120)
        // The signature is HMAC-SHA256 of the first two parts with the key in auth.key.
        let signed = TestJWT.hs256(claims, key: try signingKey(h))
        XCTAssertEqual(signed.split(separator: ".").count, 3)
        XCTAssertEqual(try h.service.verifyAccessToken(signed).id, tokens.userId)
    }

    func testExpiredTamperedAndForeignTokens() async throws {
        let h = try makeHarness()
        let tokens = try await h.login("anon-user", [:])
        let other = try await h.login("anon-user", [:])
        let key = try signingKey(h)
        let now = TestJWT.now
        let valid: Document = ["sub": .string(tokens.userId), "aud": .string(h.appId), "typ": .string("access"),
                               "iat": .int(now), "exp": .int(now + 600), "jti": .string("x"),
                               "sid": .string(Crypto.sha256Hex(tokens.refresh))]
        XCTAssertEqual(try h.service.verifyAccessToken(TestJWT.hs256(valid, key: key)).id, tokens.userId)

        func refused(_ token: String, _ kind: AuthError.Kind, _ message: String, line: UInt = #line) async throws {
            XCTAssertThrowsError(try h.service.verifyAccessToken(token), line: line) { error in
                XCTAssertEqual((error as? AuthError)?.kind, kind, "\(error)", line: line)
                XCTAssertTrue((error as? AuthError)?.message.contains(message) ?? false, "\(error)", line: line)
            }
            let reply = try await h.request("GET", "auth/profile", bearer: token)
            XCTAssertEqual(reply.status, 401, line: line)
            XCTAssertEqual(reply.errorCode, "InvalidSession", line: line)
        }
        var expired = valid
        expired["iat"] = .int(now - 3600)
        expired["exp"] = .int(now - 1800)
        try await refused(TestJWT.hs256(expired, key: key), .expired, "expired")

        // Tampered: another user's id in the claims, the signature of the original kept.
        let parts = tokens.access.split(separator: ".")
        let otherParts = TestJWT.hs256(["sub": .string(other.userId), "aud": .string(h.appId), "typ": .string("access"),
                                        "exp": .int(now + 600)], key: [0]).split(separator: ".")
        try await refused("\(parts[0]).\(otherParts[1]).\(parts[2])", .invalidSession, "signature")
        // Signed with another key.
        try await refused(TestJWT.hs256(valid, key: Array(repeating: 7, count: 32)), .invalidSession, "signature")
        // Another app's token, a refresh-type token, no exp.
        var foreign = valid
        foreign["aud"] = .string("another-app")
        try await refused(TestJWT.hs256(foreign, key: key), .invalidSession, "another app")
        var wrongType = valid
        wrongType["typ"] = .string("refresh")
        try await refused(TestJWT.hs256(wrongType, key: key), .invalidSession, "not an access token")
        var noExp = valid
        noExp["exp"] = nil
        try await refused(TestJWT.hs256(noExp, key: key), .invalidSession, "no exp")
        // Garbage.
        try await refused("a.b", .invalidSession, "malformed")
        try await refused("!!!.???.***", .invalidSession, "base64url")
        try await refused(TestJWT.base64url(Array("[1]".utf8)) + ".e30.", .invalidSession, "not a JSON object")
        XCTAssertGreaterThanOrEqual(h.service.counters.invalidTokens, 9)
    }

    func testDeletedUsersTokensAreRefused() async throws {
        let h = try makeHarness()
        _ = try await h.register("erin@example.com", "password")
        let tokens = try await h.login("local-userpass", ["username": .string("erin@example.com"), "password": .string("password")])
        var reply = try await h.post("auth/api_keys", ["name": .string("k")], bearer: tokens.refresh)
        let key = try XCTUnwrap(reply["key"])

        reply = try await h.request("DELETE", "auth/delete", bearer: tokens.access)
        XCTAssertEqual(reply.status, 204)
        XCTAssertNil(try h.service.user(id: tokens.userId))
        XCTAssertEqual(try h.service.allUsers().count, 0)

        reply = try await h.request("GET", "auth/profile", bearer: tokens.access)
        XCTAssertEqual(reply.status, 401)
        XCTAssertTrue(reply["error"]?.contains("no longer exists") ?? false, reply.text)
        reply = try await h.request("POST", "auth/session", bearer: tokens.refresh)
        XCTAssertEqual(reply.status, 401)
        reply = try await h.post("auth/providers/api-key/login", ["key": .string(key)])
        XCTAssertEqual(reply.status, 401)
        reply = try await h.post("auth/providers/local-userpass/login",
                                 ["username": .string("erin@example.com"), "password": .string("password")])
        XCTAssertEqual(reply.errorCode, "InvalidPassword")
        // The email is free again.
        reply = try await h.register("erin@example.com", "password")
        XCTAssertEqual(reply.status, 201)

        // Deleting through the Swift API.
        let anon = try await h.login("anon-user", [:])
        try h.service.deleteUser(anon.userId)
        XCTAssertThrowsError(try h.service.verifyAccessToken(anon.access)) { error in
            XCTAssertEqual((error as? AuthError)?.kind, .invalidSession)
        }
        XCTAssertThrowsError(try h.service.deleteUser(anon.userId)) { error in
            XCTAssertEqual((error as? AuthError)?.kind, .userNotFound)
        }
    }

    func testDisabledUsers() async throws {
        let h = try makeHarness()
        _ = try await h.register("fay@example.com", "password")
        let credentials: Document = ["username": .string("fay@example.com"), "password": .string("password")]
        let tokens = try await h.login("local-userpass", credentials)

        try h.service.setDisabled(tokens.userId, true)
        XCTAssertEqual(try h.service.user(id: tokens.userId)?.disabled, true)
        XCTAssertThrowsError(try h.service.verifyAccessToken(tokens.access)) { error in
            XCTAssertEqual((error as? AuthError)?.kind, .userDisabled)
        }
        var reply = try await h.request("GET", "auth/profile", bearer: tokens.access)
        XCTAssertEqual(reply.status, 401)
        XCTAssertEqual(reply.errorCode, "UserDisabled")
        reply = try await h.post("auth/providers/local-userpass/login", credentials)
        XCTAssertEqual(reply.status, 401)
        XCTAssertEqual(reply.errorCode, "UserDisabled")

        // Enabled again: the tokens issued before the disable stay revoked, access and refresh;
        // a new login works.
        try h.service.setDisabled(tokens.userId, false)
        XCTAssertThrowsError(try h.service.verifyAccessToken(tokens.access)) { error in
            XCTAssertEqual((error as? AuthError)?.kind, .invalidSession)
        }
        reply = try await h.request("GET", "auth/profile", bearer: tokens.access)
        XCTAssertEqual(reply.status, 401)
        reply = try await h.request("POST", "auth/session", bearer: tokens.refresh)
        XCTAssertEqual(reply.status, 401)
        let again = try await h.login("local-userpass", credentials)
        XCTAssertEqual(try h.service.verifyAccessToken(again.access).id, tokens.userId)
        XCTAssertThrowsError(try h.service.setDisabled("000000000000000000000000", true)) { error in
            XCTAssertEqual((error as? AuthError)?.kind, .userNotFound)
        }
    }

    func testKeyAndDataSurviveARestart() async throws {
        let app = try newApp()
        let first = try makeHarness(app: app)
        let tokens = try await first.login("anon-user", [:])
        let key = try app.signingKey()
        XCTAssertEqual(key.count, 32)
        await first.stop()

        let second = try makeHarness(app: app)
        XCTAssertEqual(try app.signingKey(), key)
        XCTAssertEqual(try second.service.verifyAccessToken(tokens.access).id, tokens.userId)
        let reply = try await second.request("POST", "auth/session", bearer: tokens.refresh)
        XCTAssertEqual(reply.status, 201)
    }

    func testSecretsAreStoredHashed() async throws {
        let h = try makeHarness()
        _ = try await h.register("gil@example.com", "plain password")
        let tokens = try await h.login("local-userpass", ["username": .string("gil@example.com"), "password": .string("plain password")])
        let reply = try await h.post("auth/api_keys", ["name": .string("k")], bearer: tokens.refresh)
        let key = try XCTUnwrap(reply["key"])
        await h.stop()

        let stored = try h.app.storedSecrets()
        XCTAssertEqual(stored.passwordHashes.count, 1)
        let hash = try XCTUnwrap(stored.passwordHashes.first)
        XCTAssertTrue(hash.hasPrefix("scrypt$16384$8$1$"), hash)
        XCTAssertFalse(hash.contains("plain password"))
        XCTAssertEqual(stored.refreshTokens, [TestJWT.sha256Hex(tokens.refresh)])
        XCTAssertEqual(stored.apiKeyHashes, [TestJWT.sha256Hex(key)])
    }
}

/// SessionTests on PostgreSQL (skipped without ATOLL_TEST_POSTGRES).
final class SessionTestsOnPostgres: SessionTests {
    override class var storage: TestStorage { .postgres }

    override func testRefreshAndLogout() async throws { try await super.testRefreshAndLogout() }
    override func testAccessTokenClaims() async throws { try await super.testAccessTokenClaims() }
    override func testExpiredTamperedAndForeignTokens() async throws { try await super.testExpiredTamperedAndForeignTokens() }
    override func testDeletedUsersTokensAreRefused() async throws { try await super.testDeletedUsersTokensAreRefused() }
    override func testDisabledUsers() async throws { try await super.testDisabledUsers() }
    override func testKeyAndDataSurviveARestart() async throws { try await super.testKeyAndDataSurviveARestart() }
    override func testSecretsAreStoredHashed() async throws { try await super.testSecretsAreStoredHashed() }
}
