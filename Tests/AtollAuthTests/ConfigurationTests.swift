import AtollAuth
import AtollJSON
import AtollStore
import XCTest

/// `AuthConfiguration(appId:json:)`: Atoll's shape, App Services' export shape, and errors.
final class ConfigurationTests: XCTestCase {
    private func parse(_ json: String) throws -> AuthConfiguration {
        try AuthConfiguration(appId: "app", json: try EJSON.parse(json))
    }

    private func assertRefused(_ json: String, _ message: String, line: UInt = #line) {
        XCTAssertThrowsError(try parse(json), line: line) { error in
            guard let error = error as? AtollError else { return XCTFail("\(error)", line: line) }
            XCTAssertEqual(error.code, .invalidArgument, line: line)
            XCTAssertTrue(error.message.contains(message), "'\(error.message)' lacks '\(message)'", line: line)
        }
    }

    private let secret = "0123456789abcdef0123456789abcdef"

    func testDefaults() throws {
        let c = try parse("{}")
        XCTAssertEqual(c.appId, "app")
        XCTAssertTrue(c.anonymous)
        XCTAssertTrue(c.apiKeys)
        XCTAssertEqual(c.emailPassword?.autoConfirm, true)
        XCTAssertNil(c.customJWT)
        XCTAssertEqual(c.accessTokenLifetime, 1800)
        XCTAssertEqual(c.refreshTokenLifetime, 60 * 24 * 3600)
    }

    func testOurShape() throws {
        let c = try parse("""
        {"anonymous": false, "apiKeys": false, "accessTokenLifetime": 60, "refreshTokenLifetime": 3600.5,
         "emailPassword": {"autoConfirm": false, "resetPasswordUrl": "https://x/reset", "tokenLifetime": 600},
         "customJWT": {"algorithm": "HS256", "secret": "\(secret)", "audience": ["a", "b"], "issuer": "https://idp",
                       "idClaim": "uid", "metadataFields": {"name.first": "firstName"}}}
        """)
        XCTAssertFalse(c.anonymous)
        XCTAssertFalse(c.apiKeys)
        XCTAssertEqual(c.accessTokenLifetime, 60)
        XCTAssertEqual(c.refreshTokenLifetime, 3600.5)
        XCTAssertEqual(c.emailPassword?.autoConfirm, false)
        XCTAssertEqual(c.emailPassword?.resetPasswordUrl, "https://x/reset")
        XCTAssertEqual(c.emailPassword?.tokenLifetime, 600)
        let jwt = try XCTUnwrap(c.customJWT)
        XCTAssertEqual(jwt.algorithm, .hs256)
        XCTAssertEqual(jwt.signingKeys, [secret])
        XCTAssertEqual(jwt.audience, ["a", "b"])
        XCTAssertEqual(jwt.issuer, "https://idp")
        XCTAssertEqual(jwt.idClaim, "uid")
        XCTAssertEqual(jwt.metadataFields, [.init(claim: "name.first", field: "firstName")])

        XCTAssertNil(try parse(#"{"emailPassword": false}"#).emailPassword)
        XCTAssertEqual(try parse(#"{"emailPassword": true}"#).emailPassword?.autoConfirm, true)
    }

    func testRS256KeyFromAFile() throws {
        let directory = try temporaryDirectory()
        let key = try TestJWT.makeRSAKey(in: directory)
        let path = (directory as NSString).appendingPathComponent("rsa.pub.pem")
        let c = try parse(#"{"customJWT": {"algorithm": "RS256", "publicKeyFile": "\#(path)"}}"#)
        XCTAssertEqual(c.customJWT?.algorithm, .rs256)
        XCTAssertEqual(c.customJWT?.signingKeys, [key.publicKeyPEM])
        assertRefused(#"{"customJWT": {"algorithm": "RS256", "publicKeyFile": "/nonexistent/key.pem"}}"#, "cannot read")
        // The private key file is not a public key.
        assertRefused(#"{"customJWT": {"algorithm": "RS256", "publicKeyFile": "\#(key.privateKeyPath)"}}"#, "not a PEM public key")
    }

    func testExportShapeAsAnArray() throws {
        let c = try parse("""
        [{"name": "anon-user", "type": "anon-user", "disabled": true},
         {"name": "local-userpass", "type": "local-userpass", "disabled": false,
          "config": {"autoConfirm": true, "resetPasswordUrl": "https://app/reset", "runConfirmationFunction": false}},
         {"name": "api-key", "type": "api-key", "disabled": false},
         {"name": "oauth2-google", "type": "oauth2-google", "disabled": true},
         {"name": "custom-token", "type": "custom-token", "disabled": false,
          "config": {"audience": "my-aud", "signingAlgorithm": "HS256", "useJWKURI": false},
          "secret_config": {"signingKeys": ["\(secret)"]},
          "metadata_fields": [{"required": false, "name": "name.first", "field_name": "firstName"},
                              {"required": true, "name": "email"}]}]
        """)
        XCTAssertFalse(c.anonymous, "disabled in the export")
        XCTAssertTrue(c.apiKeys)
        XCTAssertEqual(c.emailPassword?.autoConfirm, true)
        XCTAssertEqual(c.emailPassword?.resetPasswordUrl, "https://app/reset")
        let jwt = try XCTUnwrap(c.customJWT)
        XCTAssertEqual(jwt.audience, ["my-aud"])
        XCTAssertEqual(jwt.signingKeys, [secret])
        XCTAssertEqual(jwt.metadataFields, [.init(claim: "name.first", field: "firstName"),
                                            .init(claim: "email", field: "email", required: true)])
    }

    func testExportShapeAsAnObjectAndUnderProviders() throws {
        var c = try parse("""
        {"anon-user": {"name": "anon-user", "type": "anon-user", "disabled": false},
         "local-userpass": {"name": "local-userpass", "type": "local-userpass", "config": {}}}
        """)
        XCTAssertTrue(c.anonymous)
        XCTAssertFalse(c.apiKeys, "not listed: off")
        XCTAssertEqual(c.emailPassword?.autoConfirm, false, "App Services' default")
        XCTAssertNil(c.customJWT)

        c = try parse(#"{"accessTokenLifetime": 90, "providers": [{"name": "api-key", "type": "api-key"}]}"#)
        XCTAssertEqual(c.accessTokenLifetime, 90)
        XCTAssertTrue(c.apiKeys)
        XCTAssertFalse(c.anonymous)
        XCTAssertNil(c.emailPassword)
    }

    func testErrors() {
        assertRefused(#""yes""#, "expected an object or an array")
        assertRefused(#"{"anonymus": true}"#, "unknown key(s) anonymus")
        assertRefused(#"{"anonymous": "yes"}"#, "auth.anonymous: expected true or false, got string")
        assertRefused(#"{"accessTokenLifetime": "1h"}"#, "auth.accessTokenLifetime: expected a number")
        assertRefused(#"{"accessTokenLifetime": 0}"#, "auth.accessTokenLifetime: expected seconds from 1")
        assertRefused(#"{"refreshTokenLifetime": 1e300}"#, "auth.refreshTokenLifetime: expected seconds from 1")
        assertRefused(#"{"emailPassword": {"autoconfirm": true}}"#, "auth.emailPassword: unknown key 'autoconfirm'")
        assertRefused(#"{"emailPassword": 1}"#, "auth.emailPassword: expected true, false or an object")
        assertRefused(#"{"customJWT": {"algorithm": "HS512", "secret": "\#(secret)"}}"#, "auth.customJWT.algorithm: expected \"HS256\" or \"RS256\"")
        assertRefused(#"{"customJWT": {"algorithm": "HS256"}}"#, "auth.customJWT: give \"secret\"")
        assertRefused(#"{"customJWT": {"secret": "short"}}"#, "at least 32 bytes")
        assertRefused(#"{"customJWT": {"algorithm": "RS256", "publicKey": "not pem"}}"#, "signing key 0: not a PEM public key")
        assertRefused(#"{"customJWT": {"secret": "\#(secret)", "audience": [1]}}"#, "auth.customJWT.audience: expected strings")
        assertRefused(#"{"customJWT": {"secret": "\#(secret)", "metadataFields": [{"field": "x"}]}}"#, "missing \"name\"")
        assertRefused(#"{"customJWT": {"secret": "\#(secret)", "metadataFields": {"a": "x", "b": "x"}}}"#, "'x' is given twice")
        assertRefused(#"{"anonymous": true, "providers": []}"#, "either \"providers\" or anonymous")
        assertRefused(#"[{"name": "oauth2-apple", "type": "oauth2-apple"}]"#, "'oauth2-apple' is not supported")
        assertRefused(#"[{"disabled": false}]"#, "auth.0: a provider needs a \"type\"")
        assertRefused(#"[3]"#, "auth.0: expected a provider object")
        assertRefused(#"[{"type": "anon-user"}, {"type": "anon-user"}]"#, "given twice")
        assertRefused(#"[{"type": "custom-token", "config": {"useJWKURI": true}}]"#, "JWK URIs are not supported")
        assertRefused(#"[{"type": "custom-token", "config": {}}]"#, "auth.0.secret_config: missing \"signingKeys\"")
        assertRefused(#"[{"type": "local-userpass", "config": {"autoConfirm": "yes"}}]"#, "auth.0.config.autoConfirm: expected true or false")
    }

    func testServiceRefusesABadConfiguration() throws {
        var c = AuthConfiguration(appId: "a/b")
        XCTAssertThrowsError(try AuthService(configuration: c, directory: try temporaryDirectory())) { error in
            XCTAssertEqual((error as? AtollError)?.code, .invalidArgument)
        }
        c = AuthConfiguration(appId: "app")
        c.customJWT = CustomJWTConfiguration(algorithm: .rs256, signingKeys: ["-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"])
        XCTAssertThrowsError(try AuthService(configuration: c, directory: try temporaryDirectory())) { error in
            XCTAssertEqual((error as? AtollError)?.code, .invalidArgument)
        }
    }
}
