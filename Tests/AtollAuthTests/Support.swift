import AtollAuth
import AtollJSON
import AtollNet
import AtollStore
import COpenSSL
import Foundation
import XCTest

/// An `AuthService` in a temporary directory, installed on an HTTP server on a free loopback
/// port; both are shut down and the directory removed when the test ends.
final class AuthHarness: @unchecked Sendable {
    let directory: String
    let service: AuthService
    let server: HTTPServer
    let appId: String

    init(directory: String, configuration: AuthConfiguration) throws {
        self.directory = directory
        appId = configuration.appId
        service = try AuthService(configuration: configuration, directory: directory)
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

    /// A started service and server (`configure` edits the configuration of app "atoll-test").
    func makeHarness(directory: String? = nil, _ configure: (inout AuthConfiguration) -> Void = { _ in }) throws -> AuthHarness {
        var configuration = AuthConfiguration(appId: "atoll-test")
        configure(&configuration)
        let harness = try AuthHarness(directory: directory ?? temporaryDirectory(), configuration: configuration)
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
