import AtollAuth
import AtollJSON
import AtollNet
import AtollStore
import Foundation
import XCTest

/// Each provider's login over HTTP, and email/password's registration, confirmation and reset.
class LoginTests: AuthTestCase {
    func testAnonymousLoginMakesANewUserEachTime() async throws {
        let h = try makeHarness()
        let first = try await h.login("anon-user", [:])
        let second = try await h.login("anon-user", [:])
        XCTAssertEqual(first.userId.count, 24)
        XCTAssertNotEqual(first.userId, second.userId)
        XCTAssertEqual(first.access.split(separator: ".").count, 3, "the access token is a JWT")
        XCTAssertEqual(first.deviceId.count, 24)

        // An empty body is taken as {}; a device id the client gives is kept.
        var reply = try await h.request("POST", "auth/providers/anon-user/login")
        XCTAssertEqual(reply.status, 200, reply.text)
        reply = try await h.post("auth/providers/anon-user/login",
                                 ["options": .object(["device": .object(["deviceId": .string("65f0c0ffee0000000000beef")])])])
        XCTAssertEqual(reply["device_id"], "65f0c0ffee0000000000beef")

        let user = try XCTUnwrap(try h.service.verifyAccessToken(first.access))
        XCTAssertEqual(user.id, first.userId)
        XCTAssertEqual(user.provider, "anon-user")
        XCTAssertEqual(user.identities.map(\.providerType), ["anon-user"])
        XCTAssertEqual(h.service.counters.logins["anon-user"], 4)
        XCTAssertEqual(try h.service.allUsers().count, 4)
    }

    func testConcurrentLoginsAllSucceed() async throws {
        let h = try makeHarness()
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try await h.login("anon-user", [:]).userId } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        XCTAssertEqual(ids.count, 8)
    }

    func testRegisterAndLoginWithAutoConfirm() async throws {
        let h = try makeHarness()
        var reply = try await h.register("Ada@Example.com", "correct horse")
        XCTAssertEqual(reply.status, 201, reply.text)
        XCTAssertEqual(reply.text, "{}")

        reply = try await h.register("ada@example.com", "another one")
        XCTAssertEqual(reply.status, 409)
        XCTAssertEqual(reply.errorCode, "AccountNameInUse")

        let tokens = try await h.login("local-userpass", ["username": .string("ada@example.com"), "password": .string("correct horse")])
        // "email" is accepted in place of "username"; emails compare without case.
        let again = try await h.login("local-userpass", ["email": .string("ADA@example.com"), "password": .string("correct horse")])
        XCTAssertEqual(tokens.userId, again.userId)

        reply = try await h.request("GET", "auth/profile", bearer: tokens.access)
        XCTAssertEqual(reply.status, 200, reply.text)
        let profile = try XCTUnwrap(reply.json.documentValue)
        XCTAssertEqual(profile["user_id"], .string(tokens.userId))
        XCTAssertEqual(profile["type"], .string("normal"))
        XCTAssertEqual(profile["data"], .object(["email": .string("ada@example.com")]))
        let identity = try XCTUnwrap(profile["identities"]?.listValue?.first?.documentValue)
        XCTAssertEqual(identity["provider_type"], .string("local-userpass"))
        XCTAssertEqual(identity["id"]?.stringValue?.count, 24)
        XCTAssertEqual(h.service.counters.registrations, 1)
    }

    func testWrongPasswordAndUnknownUser() async throws {
        let h = try makeHarness()
        _ = try await h.register("bob@example.com", "secret-1")
        for (user, password) in [("bob@example.com", "secret-2"), ("nobody@example.com", "secret-1")] {
            let reply = try await h.post("auth/providers/local-userpass/login",
                                         ["username": .string(user), "password": .string(password)])
            XCTAssertEqual(reply.status, 401)
            XCTAssertEqual(reply.json, .object(["error": .string("invalid username/password"),
                                                "error_code": .string("InvalidPassword"), "status": .int(401)]))
        }
        XCTAssertEqual(h.service.counters.loginFailures, 2)
    }

    func testRegistrationChecksEmailAndPassword() async throws {
        let h = try makeHarness()
        let cases: [(String, String, String)] = [
            ("short@example.com", "12345", "password must be between 6 and 128 characters"),
            ("long@example.com", String(repeating: "x", count: 129), "password must be between 6 and 128 characters"),
            ("no-at-sign.example.com", "123456", "invalid email address"),
            ("two@@example.com", "123456", "invalid email address"),
            ("no-domain@localhost", "123456", "invalid email address"),
            ("spa ce@example.com", "123456", "invalid email address"),
        ]
        for (email, password, message) in cases {
            let reply = try await h.register(email, password)
            XCTAssertEqual(reply.status, 400, email)
            XCTAssertEqual(reply.errorCode, "InvalidParameter", email)
            XCTAssertTrue(reply["error"]?.contains(message) ?? false, "\(email): \(reply.text)")
        }
        // 6 and 128 characters are allowed.
        var reply = try await h.register("six@example.com", "123456")
        XCTAssertEqual(reply.status, 201)
        reply = try await h.register("long@example.com", String(repeating: "é", count: 128))
        XCTAssertEqual(reply.status, 201)
        XCTAssertEqual(try h.service.allUsers().count, 2)
    }

    func testConfirmationFlow() async throws {
        let mail = Mailbox()
        let h = try makeHarness { configuration in
            configuration.emailPassword = EmailPasswordConfiguration(autoConfirm: false, confirmationHook: mail.hook)
        }
        var reply = try await h.register("carol@example.com", "password1")
        XCTAssertEqual(reply.status, 201)
        let letter = try XCTUnwrap(mail.last)
        XCTAssertEqual(letter.email, "carol@example.com")

        // Unconfirmed: the right password gets its own code, a wrong one the usual.
        let credentials: Document = ["username": .string("carol@example.com"), "password": .string("password1")]
        reply = try await h.post("auth/providers/local-userpass/login", credentials)
        XCTAssertEqual(reply.status, 401)
        XCTAssertEqual(reply.errorCode, "UserNotConfirmed")
        reply = try await h.post("auth/providers/local-userpass/login",
                                 ["username": .string("carol@example.com"), "password": .string("wrong-one")])
        XCTAssertEqual(reply.errorCode, "InvalidPassword")

        // Re-sending replaces the token: the first no longer confirms.
        reply = try await h.post("auth/providers/local-userpass/confirm/send", ["email": .string("carol@example.com")])
        XCTAssertEqual(reply.status, 200, reply.text)
        XCTAssertEqual(mail.all.count, 2)
        let second = try XCTUnwrap(mail.last)
        XCTAssertNotEqual(second.tokenId, letter.tokenId)
        reply = try await h.post("auth/providers/local-userpass/confirm",
                                 ["token": .string(letter.token), "tokenId": .string(letter.tokenId)])
        XCTAssertEqual(reply.status, 400)
        XCTAssertEqual(reply.errorCode, "UserpassTokenInvalid")
        // A right id with a wrong token does not confirm either.
        reply = try await h.post("auth/providers/local-userpass/confirm",
                                 ["token": .string(letter.token), "tokenId": .string(second.tokenId)])
        XCTAssertEqual(reply.errorCode, "UserpassTokenInvalid")

        reply = try await h.post("auth/providers/local-userpass/confirm",
                                 ["token": .string(second.token), "tokenId": .string(second.tokenId)])
        XCTAssertEqual(reply.status, 200, reply.text)
        _ = try await h.login("local-userpass", credentials)

        // A used token is gone; a confirmed user gets no new one.
        reply = try await h.post("auth/providers/local-userpass/confirm",
                                 ["token": .string(second.token), "tokenId": .string(second.tokenId)])
        XCTAssertEqual(reply.errorCode, "UserpassTokenInvalid")
        reply = try await h.post("auth/providers/local-userpass/confirm/send", ["email": .string("carol@example.com")])
        XCTAssertEqual(reply.status, 409)
        XCTAssertEqual(reply.errorCode, "UserAlreadyConfirmed")
        reply = try await h.post("auth/providers/local-userpass/confirm/send", ["email": .string("who@example.com")])
        XCTAssertEqual(reply.status, 404)
        XCTAssertEqual(reply.errorCode, "UserNotFound")
    }

    func testPasswordReset() async throws {
        let mail = Mailbox()
        let h = try makeHarness { configuration in
            configuration.emailPassword?.resetHook = mail.hook
        }
        _ = try await h.register("dan@example.com", "old-password")
        let before = try await h.login("local-userpass", ["username": .string("dan@example.com"), "password": .string("old-password")])

        var reply = try await h.post("auth/providers/local-userpass/reset/send", ["email": .string("dan@example.com")])
        XCTAssertEqual(reply.status, 200, reply.text)
        let letter = try XCTUnwrap(mail.last)
        XCTAssertEqual(letter.email, "dan@example.com")

        reply = try await h.post("auth/providers/local-userpass/reset",
                                 ["token": .string(letter.token), "tokenId": .string(letter.tokenId), "password": .string("short")])
        XCTAssertEqual(reply.status, 400)
        XCTAssertEqual(reply.errorCode, "InvalidParameter")
        reply = try await h.post("auth/providers/local-userpass/reset",
                                 ["token": .string((letter.token.first == "0" ? "1" : "0") + letter.token.dropFirst()), "tokenId": .string(letter.tokenId),
                                  "password": .string("new-password")])
        XCTAssertEqual(reply.errorCode, "UserpassTokenInvalid")
        reply = try await h.post("auth/providers/local-userpass/reset",
                                 ["token": .string(letter.token), "tokenId": .string(letter.tokenId), "password": .string("new-password")])
        XCTAssertEqual(reply.status, 200, reply.text)

        reply = try await h.post("auth/providers/local-userpass/login",
                                 ["username": .string("dan@example.com"), "password": .string("old-password")])
        XCTAssertEqual(reply.errorCode, "InvalidPassword")
        let after = try await h.login("local-userpass", ["username": .string("dan@example.com"), "password": .string("new-password")])
        XCTAssertEqual(after.userId, before.userId)
        // The reset revoked the sessions made with the old password.
        reply = try await h.request("POST", "auth/session", bearer: before.refresh)
        XCTAssertEqual(reply.status, 401)

        reply = try await h.post("auth/providers/local-userpass/reset/send", ["email": .string("who@example.com")])
        XCTAssertEqual(reply.errorCode, "UserNotFound")
    }

    func testAPIKeyLogin() async throws {
        let h = try makeHarness()
        let owner = try await h.login("anon-user", [:])
        var reply = try await h.post("auth/api_keys", ["name": .string("ci")], bearer: owner.refresh)
        XCTAssertEqual(reply.status, 201, reply.text)
        let key = try XCTUnwrap(reply["key"])
        let keyId = try XCTUnwrap(reply["_id"])

        let tokens = try await h.login("api-key", ["key": .string(key)])
        XCTAssertEqual(tokens.userId, owner.userId)

        reply = try await h.post("auth/providers/api-key/login", ["key": .string("not-a-key")])
        XCTAssertEqual(reply.status, 401)
        XCTAssertEqual(reply.errorCode, "AuthError")

        reply = try await h.request("PUT", "auth/api_keys/\(keyId)/disable", bearer: owner.refresh)
        XCTAssertEqual(reply.status, 204)
        reply = try await h.post("auth/providers/api-key/login", ["key": .string(key)])
        XCTAssertEqual(reply.status, 401)
        reply = try await h.request("PUT", "auth/api_keys/\(keyId)/enable", bearer: owner.refresh)
        XCTAssertEqual(reply.status, 204)
        _ = try await h.login("api-key", ["key": .string(key)])
        XCTAssertEqual(h.service.counters.logins["api-key"], 2)
    }

    // MARK: - Custom JWT

    private let secret = "a shared secret of at least 32 bytes, for HS256"

    func testCustomJWTWithHS256() async throws {
        let secret = self.secret
        let h = try makeHarness { configuration in
            var jwt = CustomJWTConfiguration(algorithm: .hs256, signingKeys: [secret])
            jwt.audience = ["atoll-app"]
            jwt.issuer = "https://idp.example.com"
            jwt.metadataFields = [.init(claim: "name.first", field: "firstName"), .init(claim: "email")]
            configuration.customJWT = jwt
        }
        let key = Array(secret.utf8)
        let claims: Document = ["sub": .string("ext-42"), "aud": .string("atoll-app"), "iss": .string("https://idp.example.com"),
                                "exp": .int(TestJWT.now + 600), "name": .object(["first": .string("Grace")]),
                                "email": .string("grace@example.com")]
        let first = try await h.login("custom-token", ["token": .string(TestJWT.hs256(claims, key: key))])
        var changed = claims
        changed["name"] = .object(["first": .string("Gracie")])
        let second = try await h.login("custom-token", ["token": .string(TestJWT.hs256(changed, key: key))])
        XCTAssertEqual(first.userId, second.userId, "the same external id is the same user")

        let user = try XCTUnwrap(try h.service.user(id: first.userId))
        XCTAssertEqual(user.provider, "custom-token")
        XCTAssertEqual(user.identities, [UserIdentity(id: "ext-42", providerType: "custom-token")])
        XCTAssertEqual(user.data, ["firstName": .string("Gracie"), "email": .string("grace@example.com")])

        // Refused: each with the reason in the message.
        func refused(_ token: String, _ message: String, line: UInt = #line) async throws {
            let reply = try await h.post("auth/providers/custom-token/login", ["token": .string(token)])
            XCTAssertEqual(reply.status, 401, line: line)
            XCTAssertEqual(reply.errorCode, "AuthError", line: line)
            XCTAssertTrue(reply["error"]?.contains(message) ?? false, "\(reply.text) lacks '\(message)'", line: line)
        }
        var expired = claims
        expired["exp"] = .int(TestJWT.now - 10)
        try await refused(TestJWT.hs256(expired, key: key), "expired")
        var noExp = claims
        noExp["exp"] = nil
        try await refused(TestJWT.hs256(noExp, key: key), "no exp")
        var otherAudience = claims
        otherAudience["aud"] = .list([.string("someone-else")])
        try await refused(TestJWT.hs256(otherAudience, key: key), "aud")
        var otherIssuer = claims
        otherIssuer["iss"] = .string("https://evil.example.com")
        try await refused(TestJWT.hs256(otherIssuer, key: key), "iss")
        try await refused(TestJWT.hs256(claims, key: Array("another secret that is also 32 bytes long".utf8)), "signature")
        // alg "none" and a token signed for another algorithm are refused.
        try await refused(TestJWT.signingInput(alg: "none", claims) + ".", "signature")
        try await refused("not.a.jwt", "malformed")
        try await refused("abc", "malformed")
    }

    func testCustomJWTRequiredMetadataAndIdClaim() async throws {
        let secret = self.secret
        let h = try makeHarness { configuration in
            var jwt = CustomJWTConfiguration(algorithm: .hs256, signingKeys: [secret])
            jwt.idClaim = "user.id"
            jwt.metadataFields = [.init(claim: "team", required: true)]
            configuration.customJWT = jwt
        }
        let key = Array(secret.utf8)
        let ok: Document = ["user": .object(["id": .string("u-7")]), "team": .string("blue"), "exp": .int(TestJWT.now + 60)]
        let tokens = try await h.login("custom-token", ["token": .string(TestJWT.hs256(ok, key: key))])
        XCTAssertEqual(try h.service.user(id: tokens.userId)?.identities.first?.id, "u-7")
        XCTAssertEqual(try h.service.user(id: tokens.userId)?.data, ["team": .string("blue")])

        var missing = ok
        missing["team"] = nil
        var reply = try await h.post("auth/providers/custom-token/login", ["token": .string(TestJWT.hs256(missing, key: key))])
        XCTAssertEqual(reply.status, 401)
        XCTAssertTrue(reply["error"]?.contains("required claim 'team'") ?? false, reply.text)
        var noId = ok
        noId["user"] = nil
        reply = try await h.post("auth/providers/custom-token/login", ["token": .string(TestJWT.hs256(noId, key: key))])
        XCTAssertTrue(reply["error"]?.contains("'user.id'") ?? false, reply.text)
    }

    func testCustomJWTWithRS256() async throws {
        let directory = try temporaryDirectory()
        let signer = try TestJWT.makeRSAKey(in: directory)
        let stranger = try TestJWT.makeRSAKey(in: directory, name: "stranger")
        let h = try makeHarness { configuration in
            configuration.customJWT = CustomJWTConfiguration(algorithm: .rs256, signingKeys: [signer.publicKeyPEM])
        }
        let claims: Document = ["sub": .string("rsa-user"), "exp": .int(TestJWT.now + 600)]
        let token = try TestJWT.rs256(claims, keyPath: signer.privateKeyPath, directory: directory)
        let tokens = try await h.login("custom-token", ["token": .string(token)])
        XCTAssertEqual(try h.service.user(id: tokens.userId)?.identities.first?.id, "rsa-user")

        let forged = try TestJWT.rs256(claims, keyPath: stranger.privateKeyPath, directory: directory)
        var reply = try await h.post("auth/providers/custom-token/login", ["token": .string(forged)])
        XCTAssertEqual(reply.status, 401)
        XCTAssertEqual(reply.errorCode, "AuthError")
        // An HS256 token "signed" with the public key as a secret (algorithm confusion) is refused.
        let confused = TestJWT.hs256(claims, key: Array(signer.publicKeyPEM.utf8))
        reply = try await h.post("auth/providers/custom-token/login", ["token": .string(confused)])
        XCTAssertEqual(reply.status, 401)
    }
}

/// LoginTests on PostgreSQL (skipped without ATOLL_TEST_POSTGRES).
final class LoginTestsOnPostgres: LoginTests {
    override class var storage: TestStorage { .postgres }

    override func testAnonymousLoginMakesANewUserEachTime() async throws { try await super.testAnonymousLoginMakesANewUserEachTime() }
    override func testConcurrentLoginsAllSucceed() async throws { try await super.testConcurrentLoginsAllSucceed() }
    override func testRegisterAndLoginWithAutoConfirm() async throws { try await super.testRegisterAndLoginWithAutoConfirm() }
    override func testWrongPasswordAndUnknownUser() async throws { try await super.testWrongPasswordAndUnknownUser() }
    override func testRegistrationChecksEmailAndPassword() async throws { try await super.testRegistrationChecksEmailAndPassword() }
    override func testConfirmationFlow() async throws { try await super.testConfirmationFlow() }
    override func testPasswordReset() async throws { try await super.testPasswordReset() }
    override func testAPIKeyLogin() async throws { try await super.testAPIKeyLogin() }
    override func testCustomJWTWithHS256() async throws { try await super.testCustomJWTWithHS256() }
    override func testCustomJWTRequiredMetadataAndIdClaim() async throws { try await super.testCustomJWTRequiredMetadataAndIdClaim() }
    override func testCustomJWTWithRS256() async throws { try await super.testCustomJWTWithRS256() }
}
