// Fuzz target "http": the server's HTTP API in process (docs/testing.md). An input is one HTTP/1.1
// request as a client sends it (request line, headers, blank line, body). It is parsed by the
// connections' parser (http-parser, with the server's limits), routed and handled by a
// `SyncServer` that is never started: the app API (auth providers, sessions, profile, API keys),
// the admin API, health and metrics. No socket is involved.
//
// To let inputs reach the handlers behind tokens, the harness replaces `$ADMIN` with the admin
// key, and `$ACCESS`, `$REFRESH` and `$USER` with the tokens and id of a new anonymous user
// (logged in for the input). A head with neither Content-Length nor Transfer-Encoding gets a
// Content-Length for what follows it, so that mutated bodies are read whole.
//
// Contract checked: nothing traps; no answer is a 500; every answer of 400 and above has a JSON
// body with a non-empty "error".
import AtollAuth
import AtollFuzzSupport
import AtollJSON
import AtollNet
import AtollProtocol
import AtollServer
import Foundation

let adminKey = "fuzz-admin-key-0123456789abcdef"
let directory = fuzzScratchDirectory("fuzz-http")

let server: SyncServer = {
    try? FileManager.default.removeItem(atPath: directory)
    let config = """
    {"id": "fuzz", "developmentMode": true,
     "schema": [{"name": "Task", "primaryKey": "_id", "properties": {"_id": "int", "name": "string", "owner": "string?", "tags": "string[]"}}],
     "auth": {"anonymous": true, "emailPassword": {"autoConfirm": true}, "apiKeys": true},
     "rules": {"Task": {"roles": [{"name": "owner", "read": "owner == %user.id", "write": "owner == %user.id"}]}}}
    """
    do {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataDirectory = directory
        configuration.logLevel = .error
        configuration.adminKey = adminKey
        // Every input makes a user from one address: the sign-up and login limits would answer
        // 429 after a hundred (what is fuzzed here is what the routes make of their input).
        configuration.attemptLimits = AttemptLimits()
        configuration.apps = [try ServerAppConfiguration(json: try EJSON.parse(config))]
        let server = try SyncServer(configuration: configuration)
        // The data directory goes when the process ends (libFuzzer exits through exit()).
        atexit { try? FileManager.default.removeItem(atPath: directory) }
        return server
    } catch {
        fuzzFailure("the server does not open: \(error)")
    }
}()

final class Answer: @unchecked Sendable { var response: HTTPResponse? }

/// The answer to raw request bytes, waiting for the handler.
func answer(_ bytes: [UInt8]) -> HTTPResponse {
    let box = Answer()
    let done = DispatchSemaphore(value: 0)
    Task {
        box.response = await server.answer(raw: bytes)
        done.signal()
    }
    done.wait()
    guard let response = box.response else { fuzzFailure("no answer") }
    return response
}

/// A new anonymous user's tokens and id.
func anonymousUser() -> (access: String, refresh: String, id: String) {
    let body = "{}"
    let request = "POST /api/client/v2.0/app/fuzz/auth/providers/anon-user/login HTTP/1.1\r\nHost: fuzz\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    let response = answer(Array(request.utf8))
    guard response.status.code == 200, let text = String(validating: response.body, as: UTF8.self),
          case .object(let d)? = try? EJSON.parse(text),
          case .string(let access)? = d["access_token"], case .string(let refresh)? = d["refresh_token"],
          case .string(let id)? = d["user_id"] else {
        fuzzFailure("the anonymous login failed: \(response.status.code) \(String(decoding: response.body, as: UTF8.self))")
    }
    return (access, refresh, id)
}

/// The input with its placeholders replaced and, when its head has no length, one added.
func prepare(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
    var text = Array(bytes)
    func replace(_ placeholder: String, _ value: String) {
        let p = Array(placeholder.utf8), v = Array(value.utf8)
        var out = [UInt8](), i = 0
        out.reserveCapacity(text.count)
        while i < text.count {
            if text[i] == p[0], i + p.count <= text.count, Array(text[i..<(i + p.count)]) == p {
                out += v
                i += p.count
            } else {
                out.append(text[i])
                i += 1
            }
        }
        text = out
    }
    let has: (String) -> Bool = { name in text.count >= name.utf8.count && String(decoding: text, as: UTF8.self).contains(name) }
    replace("$ADMIN", adminKey)
    if has("$ACCESS") || has("$REFRESH") || has("$USER") {
        let user = anonymousUser()
        replace("$ACCESS", user.access)
        replace("$REFRESH", user.refresh)
        replace("$USER", user.id)
    }
    // Where the head ends (CRLF CRLF, or LF LF), and whether it has a length.
    let crlf: [UInt8] = [13, 10, 13, 10], lf: [UInt8] = [10, 10]
    var end: (index: Int, count: Int)?
    for i in 0..<text.count {
        if i + 4 <= text.count, Array(text[i..<(i + 4)]) == crlf { end = (i, 4); break }
        if i + 2 <= text.count, Array(text[i..<(i + 2)]) == lf { end = (i, 2); break }
    }
    guard let end else { return text }
    let head = String(decoding: text[..<end.index], as: UTF8.self).lowercased()
    if head.contains("content-length") || head.contains("transfer-encoding") { return text }
    let bodyCount = text.count - end.index - end.count
    let eol: [UInt8] = end.count == 4 ? [13, 10] : [10]
    return Array(text[..<end.index]) + eol + Array("Content-Length: \(bodyCount)".utf8) + Array(text[end.index...])
}

func fuzzHTTP(_ bytes: UnsafeRawBufferPointer) {
    let request = prepare(bytes)
    let response = answer(request)
    let status = response.status.code
    if status == 500 {
        fuzzFailure("500 for the request\n\(String(decoding: request, as: UTF8.self))\nanswer: \(String(decoding: response.body, as: UTF8.self))")
    }
    guard status >= 400 else { return }
    guard let text = String(validating: response.body, as: UTF8.self), case .object(let d)? = try? EJSON.parse(text),
          case .string(let message)? = d["error"], !message.isEmpty else {
        fuzzFailure("\(status) without an error message for the request\n\(String(decoding: request, as: UTF8.self))\nanswer: \(String(decoding: response.body, as: UTF8.self))")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    fuzzHTTP(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    return 0
}

#if ATOLL_LIBFUZZER
/// The entry point SwiftPM links as `main` (it renames an executable's main to
/// `<module>_main`): libFuzzer's driver, with this target.
@_cdecl("atoll_fuzz_http_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    FuzzDriver.run(argc, argv, fuzzerTestOneInput)
}
#else
@main struct Replay {
    static func main() { exit(FuzzReplay.main(name: "atoll-fuzz-http", fuzzHTTP)) }
}
#endif
