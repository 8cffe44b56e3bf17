import AtollServer
import Foundation

// atoll-server: the sync server (docs/server.md).
//
//   atoll-server [--config FILE] [--host HOST] [--port PORT] [--data DIR] [--log-level LEVEL]
//
// With no arguments: one app, "default", on 127.0.0.1:9090, data in ./atoll-data, anonymous and
// email/password login, development mode. The first line on stdout is `listening on URL`.

let usage = """
usage: atoll-server [--config FILE] [--host HOST] [--port PORT] [--data DIR] [--log-level debug|info|warning|error]

  --config FILE   apps, auth providers, schemas, sync modes and rules (JSON; docs/server.md)
  --host HOST     address to listen on (default 127.0.0.1)
  --port PORT     port (default 9090; 0 picks a free one)
  --data DIR      where each app's data lives (default ./atoll-data)
  --log-level L   structured logs on stderr at this level and above (default info)

"""

/// The signals that stop the server gracefully.
func stopSignals() -> sigset_t {
    var set = sigset_t()
    sigemptyset(&set)
    sigaddset(&set, SIGINT)
    sigaddset(&set, SIGTERM)
    return set
}

// Blocked in this thread before any other starts (threads inherit the mask): only the sigwait
// at the end takes them.
var blocked = stopSignals()
pthread_sigmask(SIG_BLOCK, &blocked, nil)

/// Writes to stdout or stderr; a reader that went away (a closed pipe) is not an error: the
/// server goes on serving.
func say(_ text: String, to handle: FileHandle = .standardOutput) {
    try? handle.write(contentsOf: Data(text.utf8))
}

func fail(_ message: String) -> Never {
    say("atoll-server: \(message)\n", to: .standardError)
    exit(2)
}

// Everything the server makes is its user's only (keys, users, data; docs/server.md, "Files on
// disk"): the stores set their modes themselves, this covers what else may be made.
umask(0o077)

var arguments = Array(CommandLine.arguments.dropFirst())
var options = [String: String]()
while let first = arguments.first {
    arguments.removeFirst()
    switch first {
    case "-h", "--help":
        say(usage)
        exit(0)
    case "--config", "--host", "--port", "--data", "--log-level":
        guard let value = arguments.first else { fail("\(first) needs a value\n\(usage)") }
        arguments.removeFirst()
        options[first] = value
    default:
        fail("unknown argument '\(first)'\n\(usage)")
    }
}

var configuration = ServerConfiguration()
do {
    if let file = options["--config"] { configuration = try ServerConfiguration(file: file) }
} catch {
    fail("\(error)")
}
if let host = options["--host"] { configuration.host = host }
if let port = options["--port"] {
    guard let p = Int(port), (0...65535).contains(p) else { fail("--port must be 0...65535") }
    configuration.port = p
}
if let data = options["--data"] { configuration.dataDirectory = data }
if let level = options["--log-level"] {
    guard let l = LogLevel(rawValue: level) else { fail("--log-level must be debug, info, warning or error") }
    configuration.logLevel = l
}

let server: SyncServer
do {
    server = try SyncServer(configuration: configuration)
} catch {
    fail("\(error)")
}
do {
    try server.start()
} catch {
    fail("\(error)")
}
say("listening on \(server.url)\n")
// The admin console (docs/admin-api.md): its address, and its key when this start made it.
var keyLine: String
switch server.adminKey.source {
case .config: keyLine = "admin key: the one in the config file (\"admin\": {\"key\"})"
case .file(let path, created: true): keyLine = "admin key: \(server.adminKey.key) (new; saved in \(path))"
case .file(let path, created: false): keyLine = "admin key: in \(path)"
}
say("admin console: \(server.adminURL)\n\(keyLine)\n")

// SIGINT and SIGTERM: a graceful shutdown (what was acknowledged is committed already). They are
// blocked from the first line on and taken here with sigwait, so that a stop sent as soon as the
// server listens is neither lost nor an abrupt exit (a dispatch signal source arms itself
// asynchronously, and `dispatchMain` unblocks signals on this thread).
var stop = stopSignals()
var received: Int32 = 0
while sigwait(&stop, &received) != 0 {}
let stopped = DispatchSemaphore(value: 0)
Task.detached {
    await server.shutdown()
    stopped.signal()
}
stopped.wait()
exit(0)
