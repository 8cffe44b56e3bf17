import AtollAuth
import AtollJSON
import AtollNet
import AtollPostgres
import AtollServer
import AtollStore
import COpenSSL
import Foundation
import XCTest

/// An `AuthService` of a test app, installed on an HTTP server on a free loopback port; both
/// are shut down when the test ends.
final class AuthHarness: @unchecked Sendable {
    let app: TestApp
    let service: AuthService
    let server: HTTPServer
    var appId: String { app.appId }

    init(app: TestApp, configuration: AuthConfiguration) throws {
        self.app = app
        service = try app.open(configuration)
        server = try HTTPServer()
        service.install(on: server)
        try server.start()
    }

    /// The app's base URL: `http://127.0.0.1:PORT/api/client/v2.0/app/<appId>`.
    var base: String { "\(server.url)/api/client/v2.0/app/\(appId)" }

    func stop() async {
        await server.shutdown()
        service.close()
    }

    /// Sends a request to `base + "/" + path` with a JSON body (text, as a client would send it).
    func request(_ method: String, _ path: String, json: String? = nil, rawBody: [UInt8]? = nil,
                 bearer: String? = nil, app: String? = nil) async throws -> Reply {
        var headers: HTTPHeaders = [:]
        if json != nil || rawBody != nil { headers["Content-Type"] = "application/json" }
        if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
        let url = "\(server.url)/api/client/v2.0/app/\(app ?? appId)/\(path)"
        let response = try await HTTPClient.request(method, url, headers: headers, body: rawBody ?? Array((json ?? "").utf8))
        return Reply(status: response.status, text: response.text)
    }

    func post(_ path: String, _ body: Document, bearer: String? = nil) async throws -> Reply {
        try await request("POST", path, json: EJSON.serialize(.object(body)), bearer: bearer)
    }

    /// Logs in with a provider and returns the tokens, failing the test on another status.
    func login(_ provider: String, _ body: Document, file: StaticString = #filePath, line: UInt = #line) async throws -> Tokens {
        let reply = try await post("auth/providers/\(provider)/login", body)
        XCTAssertEqual(reply.status, 200, reply.text, file: file, line: line)
        return Tokens(access: reply["access_token"] ?? "", refresh: reply["refresh_token"] ?? "",
                      userId: reply["user_id"] ?? "", deviceId: reply["device_id"] ?? "")
    }

    /// Logs a refresh token out here (204), then checks that `checker` (this harness or
    /// another instance of its app) refuses it: to refresh (401 InvalidSession), to log out again.
    func logOut(_ refresh: String, checkedOn checker: AuthHarness, file: StaticString = #filePath, line: UInt = #line) async throws {
        var reply = try await request("DELETE", "auth/session", bearer: refresh)
        XCTAssertEqual(reply.status, 204, reply.text, file: file, line: line)
        reply = try await checker.request("POST", "auth/session", bearer: refresh)
        XCTAssertEqual(reply.status, 401, file: file, line: line)
        XCTAssertEqual(reply.errorCode, "InvalidSession", file: file, line: line)
        reply = try await checker.request("DELETE", "auth/session", bearer: refresh)
        XCTAssertEqual(reply.status, 401, "a revoked token cannot be revoked again", file: file, line: line)
    }

    /// Registers and (with auto-confirm) may log in.
    func register(_ email: String, _ password: String) async throws -> Reply {
        try await post("auth/providers/local-userpass/register", ["email": .string(email), "password": .string(password)])
    }
}

struct Tokens {
    var access: String
    var refresh: String
    var userId: String
    var deviceId: String
}

/// A response: its status and JSON body.
struct Reply {
    var status: Int
    var text: String

    var json: Value { (try? EJSON.parse(text)) ?? .null }

    /// A string field of the body.
    subscript(key: String) -> String? { json.documentValue?[key]?.stringValue }

    var errorCode: String? { self["error_code"] }
}

/// What the confirmation and reset hooks were given.
final class Mailbox: @unchecked Sendable {
    private let lock = NSLock()
    private var letters: [(email: String, token: String, tokenId: String)] = []

    var hook: EmailPasswordConfiguration.Hook {
        { [self] email, token, tokenId in lock.withLock { letters.append((email, token, tokenId)) } }
    }

    var all: [(email: String, token: String, tokenId: String)] { lock.withLock { letters } }
    var last: (email: String, token: String, tokenId: String)? { all.last }
}

extension XCTestCase {
    /// A new directory, removed when the test ends.
    func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("atoll-auth-tests-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }
}

// MARK: - Storages

/// Where a test's services keep their data.
enum TestStorage: String, Sendable {
    /// `auth.realm` and `auth.key` in a temporary directory.
    case sqlite
    /// Rows of a fresh app id in the database of ATOLL_TEST_POSTGRES.
    case postgres
}

/// The PostgreSQL database of the tests, when ATOLL_TEST_POSTGRES names one.
enum TestPostgres {
    static let variable = "ATOLL_TEST_POSTGRES"

    static var url: String? {
        guard let url = ProcessInfo.processInfo.environment[variable], !url.isEmpty else { return nil }
        return url
    }

    static let skipMessage = "PostgreSQL variant skipped: set \(variable) to a database URL "
        + "(postgresql://postgres@127.0.0.1:PORT/atoll) to run it; make test does"

    /// A new connection to the test database, closed when the test ends.
    static func connect(_ test: XCTestCase) throws -> PostgresConnection {
        guard let url else { throw XCTSkip(skipMessage) }
        let connection = try PostgresConnection(url: url)
        test.addTeardownBlock { connection.close() }
        return connection
    }
}

/// One test app's data: a temporary directory (SQLite) or the rows of a fresh app id (so that
/// tests, and runs, share the test database without meeting). Services opened on one `TestApp`
/// are what several server instances of one app are.
struct TestApp: Sendable {
    let storage: TestStorage
    let appId: String
    /// The SQLite store's directory; with PostgreSQL, a directory for the test's other files.
    let directory: String

    /// A service on this app's data (another instance of the app, with PostgreSQL).
    func open(_ configuration: AuthConfiguration? = nil) throws -> AuthService {
        let configuration = configuration ?? AuthConfiguration(appId: appId)
        switch storage {
        case .sqlite: return try AuthService(configuration: configuration, directory: directory)
        case .postgres: return try PostgresAuthStore.service(configuration: configuration, url: postgresURL())
        }
    }

    private func postgresURL() throws -> String {
        guard let url = TestPostgres.url else { throw XCTSkip(TestPostgres.skipMessage) }
        return url
    }

    /// The key that signs the app's access tokens, read where the storage keeps it.
    func signingKey() throws -> [UInt8] {
        switch storage {
        case .sqlite:
            return Array(try Data(contentsOf: URL(fileURLWithPath: (directory as NSString).appendingPathComponent("auth.key"))))
        case .postgres:
            let hex = try PostgresConnection(url: postgresURL())
                .value("SELECT encode(key, 'hex') FROM atoll_auth_signing_keys WHERE app_id = $1", [appId])
            return try XCTUnwrap(hex.flatMap(TestJWT.bytes(hex:)), "no signing key for \(appId)")
        }
    }

    /// What the storage keeps of the secrets: password hashes, refresh token ids, API key hashes.
    func storedSecrets() throws -> (passwordHashes: [String], refreshTokens: [String], apiKeyHashes: [String]) {
        switch storage {
        case .sqlite:
            let store = try Store(Configuration(path: (directory as NSString).appendingPathComponent("auth.realm")))
            defer { store.close() }
            func column(_ className: String, _ property: String) throws -> [String] {
                try store.objects(className).documents().compactMap { $0[property]?.stringValue }
            }
            return (try column("Identity", "passwordHash"), try column("RefreshToken", "_id"), try column("ApiKey", "keyHash"))
        case .postgres:
            let connection = try PostgresConnection(url: postgresURL())
            func column(_ table: String, _ name: String) throws -> [String] {
                try connection.execute("SELECT \(name) FROM \(table) WHERE app_id = $1 AND \(name) IS NOT NULL", [appId])
                    .compactMap { $0.first ?? nil }
            }
            return (try column("atoll_auth_identities", "password_hash"), try column("atoll_auth_refresh_tokens", "hash"),
                    try column("atoll_auth_api_keys", "key_hash"))
        }
    }
}

/// A test case whose services keep their data in `storage`: SQLite here. Each such class has a
/// subclass `<Class>OnPostgres` that says `.postgres` and declares every test again, calling
/// super: Linux's XCTest runs only the tests a class declares itself. The PostgreSQL variants
/// are skipped without ATOLL_TEST_POSTGRES; `StorageVariantTests` checks that none is missing.
class AuthTestCase: XCTestCase {
    class var storage: TestStorage { .sqlite }

    override func setUpWithError() throws {
        try super.setUpWithError()
        if Self.storage == .postgres, TestPostgres.url == nil { throw XCTSkip(TestPostgres.skipMessage) }
    }

    /// A new app: its id is `name` and a random suffix; its rows are deleted when the test ends.
    func newApp(_ name: String = "atoll-test") throws -> TestApp {
        let app = TestApp(storage: Self.storage, appId: "\(name)-\(UUID().uuidString.prefix(8).lowercased())",
                          directory: try temporaryDirectory())
        if app.storage == .postgres {
            let connection = try TestPostgres.connect(self)
            addTeardownBlock {
                // Deleting a user deletes its identities, tokens and keys (ON DELETE CASCADE).
                for table in ["atoll_auth_users", "atoll_auth_signing_keys"] {
                    _ = try? connection.execute("DELETE FROM \(table) WHERE app_id = $1", [app.appId])
                }
            }
        }
        return app
    }

    /// A started service and server of a new app (or of `app`: another instance of it);
    /// `configure` edits the configuration.
    func makeHarness(app: TestApp? = nil, _ configure: (inout AuthConfiguration) -> Void = { _ in }) throws -> AuthHarness {
        let app = try app ?? newApp()
        var configuration = AuthConfiguration(appId: app.appId)
        configure(&configuration)
        let harness = try AuthHarness(app: app, configuration: configuration)
        addTeardownBlock { await harness.stop() }
        return harness
    }
}

// MARK: - Tokens made by the tests, through OpenSSL directly

enum TestJWT {
    static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func hmacSHA256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), data, data.count, &out, &length)
        return Array(out.prefix(Int(length)))
    }

    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        let bytes = stride(from: 0, to: digits.count, by: 2).compactMap { UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16) }
        return bytes.count * 2 == digits.count ? bytes : nil
    }

    static func sha256Hex(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var digest = [UInt8](repeating: 0, count: 32)
        _ = SHA256(bytes, bytes.count, &digest)
        return digest.map { String(format: "%02x", $0) }.joined()
    }

    /// `header.claims` of a token, base64url.
    static func signingInput(alg: String, _ claims: Document) -> String {
        base64url(Array(EJSON.serialize(.object(["alg": .string(alg), "typ": .string("JWT")])).utf8)) + "."
            + base64url(Array(EJSON.serialize(.object(claims)).utf8))
    }

    static func hs256(_ claims: Document, key: [UInt8]) -> String {
        let input = signingInput(alg: "HS256", claims)
        return input + "." + base64url(hmacSHA256(key: key, Array(input.utf8)))
    }

    /// An RS256 token signed by `openssl dgst -sha256 -sign` with the PEM private key at `keyPath`.
    static func rs256(_ claims: Document, keyPath: String, directory: String) throws -> String {
        let input = signingInput(alg: "RS256", claims)
        let inputPath = (directory as NSString).appendingPathComponent("input-\(UUID().uuidString)")
        let signaturePath = inputPath + ".sig"
        try Data(input.utf8).write(to: URL(fileURLWithPath: inputPath))
        try runOpenSSL(["dgst", "-sha256", "-sign", keyPath, "-out", signaturePath, inputPath])
        let signature = try Data(contentsOf: URL(fileURLWithPath: signaturePath))
        return input + "." + base64url(Array(signature))
    }

    /// Makes an RSA key pair in `directory`: the private key's path and the public key's PEM.
    static func makeRSAKey(in directory: String, name: String = "rsa") throws -> (privateKeyPath: String, publicKeyPEM: String) {
        let key = (directory as NSString).appendingPathComponent("\(name).pem")
        let pub = (directory as NSString).appendingPathComponent("\(name).pub.pem")
        try runOpenSSL(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key])
        try runOpenSSL(["pkey", "-in", key, "-pubout", "-out", pub])
        return (key, try String(contentsOfFile: pub, encoding: .utf8))
    }

    static func runOpenSSL(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw AtollError(.internal, "openssl \(arguments.joined(separator: " ")) failed with status \(process.terminationStatus)")
        }
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970) }
}
