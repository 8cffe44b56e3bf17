import AtollAuth
import AtollJSON
import CJansson
import AtollStore
import Foundation

/// How an app's clients sync: flexible (named queries) or partition (one value per realm).
public enum SyncMode: Sendable, Equatable {
    case flexible
    case partition(key: String)
}

/// One app the server serves (docs/server.md, "Config file").
public struct ServerAppConfiguration: Sendable {
    public var id: String
    /// The schema; nil in development mode until the first client brings one.
    public var schema: Schema?
    /// Whether clients may add classes and properties (the schema comes from the first clients).
    public var developmentMode: Bool
    public var mode: SyncMode
    /// The partition key served to partition-sync clients (also in a flexible app, so that such
    /// clients keep working after the app moved to flexible sync).
    public var partitionKey: String?
    /// Fields subscriptions may query, for every class (nil: any field).
    public var queryableFields: Set<String>?
    /// Per class, more queryable fields.
    public var classQueryableFields: [String: Set<String>] = [:]
    public var rules: Rules
    /// The `"rules"` as the config (or the admin console's saved rules) wrote them, shown by the
    /// admin API; nil for the open rules of the default app.
    public var rulesSource: Value?
    /// The `"auth"` part of the config, read by the app API.
    public var auth: Value?
    /// Whether `auth` is what the admin console saved (`admin-auth.json`), whose settings may not
    /// name key files, rather than the config file's.
    public var authFromConsole = false
    /// What one user's subscriptions may cost (`"queryLimits"`).
    public var queryLimits = QueryLimits()

    /// The default app: flexible sync, development mode, everyone may read and write.
    public init(id: String) {
        self.id = id
        schema = nil
        developmentMode = true
        mode = .flexible
        partitionKey = nil
        queryableFields = nil
        rules = .open
        auth = nil
    }

    /// An app from the config file's `apps` entry:
    /// `{"id", "developmentMode", "schema": [...], "sync": {"mode": "flexible"|"partition",
    /// "partitionKey", "queryableFields": [...]}, "auth": {...}, "rules": {...}}`. The Atlas
    /// export's sync shapes are taken too: `"sync": {"flexible_sync": {"queryable_fields_names": [...]}}`
    /// and `"sync": {"partition": {"key": "_partition"}}`.
    public init(json: Value) throws {
        guard case .object(let d) = json else { throw AtollError(.invalidArgument, "apps: each app must be an object") }
        guard case .string(let id)? = d["id"] ?? d["app_id"] ?? d["name"], !id.isEmpty,
              id.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
            throw AtollError(.invalidArgument, "apps: each app needs an \"id\" of letters, digits, - and _")
        }
        self.init(id: id)
        if case .list = d["schema"] {
            let json = EJSON.make(d["schema"] ?? .null)
            defer { json_decref(json) }
            let schema = try SchemaJSON.schema(json)
            try schema.validate()
            self.schema = schema
            developmentMode = false
        }
        if let dev = d["developmentMode"] ?? d["development_mode_enabled"] {
            guard case .bool(let b) = dev else { throw AtollError(.invalidArgument, "app \(id): \"developmentMode\" must be true or false") }
            developmentMode = b
        }
        if schema == nil, !developmentMode {
            throw AtollError(.invalidArgument, "app \(id): without a \"schema\" the app must be in development mode")
        }
        if let sync = d["sync"] {
            guard case .object(let s) = sync else { throw AtollError(.invalidArgument, "app \(id): \"sync\" must be an object") }
            var fields: [Value]?
            if case .object(let flexible)? = s["flexible_sync"] {
                mode = .flexible
                if case .list(let f)? = flexible["queryable_fields_names"] { fields = f }
            }
            if case .object(let partition)? = s["partition"] {
                guard case .string(let key)? = partition["key"] else { throw AtollError(.invalidArgument, "app \(id): sync.partition needs a \"key\"") }
                mode = .partition(key: key)
                partitionKey = key
            }
            if case .string(let key)? = s["partitionKey"] { partitionKey = key }
            switch s["mode"] {
            case .string("flexible")?: mode = .flexible
            case .string("partition")?:
                guard let key = partitionKey else { throw AtollError(.invalidArgument, "app \(id): partition sync needs \"partitionKey\"") }
                mode = .partition(key: key)
            case nil: break
            default: throw AtollError(.invalidArgument, "app \(id): sync.mode must be \"flexible\" or \"partition\"")
            }
            if case .list(let f)? = s["queryableFields"] { fields = f }
            if let fields {
                queryableFields = Set(try fields.map { v in
                    guard case .string(let name) = v else { throw AtollError(.invalidArgument, "app \(id): queryable fields are names") }
                    return name
                })
            }
            if case .object(let perClass)? = s["classQueryableFields"] {
                for (cls, v) in perClass {
                    guard case .list(let names) = v else { throw AtollError(.invalidArgument, "app \(id): classQueryableFields.\(cls) must be an array") }
                    classQueryableFields[cls] = Set(names.compactMap(\.stringValue))
                }
            }
        }
        if let rules = d["rules"] {
            self.rules = try Rules(json: rules)
            rulesSource = rules
            if let defaults = d["defaultRule"] ?? d["default_rule"] { self.rules.defaultRoles = try Rules.roles(defaults, context: "default_rule") }
        } else if !developmentMode {
            throw AtollError(.invalidArgument, "app \(id): an app with a fixed schema needs \"rules\" (use {\"default\": {\"roles\": [{\"name\": \"all\", \"read\": true, \"write\": true}]}} to allow everything)")
        }
        auth = d["auth"]
        if let limits = d["queryLimits"] { queryLimits = try QueryLimits(json: limits) }
    }
}

/// The server: where it listens, where its data is, what it serves.
public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 9090
    public var dataDirectory = "./atoll-data"
    public var apps: [ServerAppConfiguration] = [ServerAppConfiguration(id: "default")]
    public var logLevel: LogLevel = .info
    /// The largest message a client may send.
    public var maxMessageBytes = 16 << 20
    /// Bytes the server may hold queued for one connection whose client does not read them
    /// (a bootstrap larger than this cannot be sent to it); past it the connection closes with
    /// 1008 and the client resumes from its cursor when it comes back.
    public var maxQueuedBytes = 256 << 20
    /// Bytes the server may hold queued for all the connections of one user of an app together:
    /// past it, the connection that would queue more closes with 1008. Without it, a user's
    /// connections that never read would each hold up to `maxQueuedBytes`.
    public var maxQueuedBytesPerUser = 256 << 20
    /// Bytes of messages read from all the connections of an app and not yet handled (each
    /// connection may have four messages' worth, at least 64 MB): past it, the connection whose
    /// message would go over gets `tooManyMessages` and closes. Without it, many connections
    /// each sending large uploads at once would together hold any amount.
    public var maxPendingBytesPerApp = 256 << 20
    /// Upload messages a connection may send per second (a bucket that holds one second of
    /// them) before it gets `tooManyMessages` and is closed with 1008; 0: no limit. The default
    /// is far above what a client sends (one upload per commit, waited for or batched) and stops
    /// a flood within a second.
    public var maxUploadsPerSecond = 1000
    /// `bind` and `query` messages a connection may send per second (a bucket that holds one
    /// second of them), each of which may start a catch-up or a bootstrap; 0: no limit. Over it
    /// the client gets `tooManyMessages` and the connection closes with 1008. A client binds
    /// each of its user's realms and sends a query for each subscription change: the default
    /// leaves room for a hundred realms reconnecting at once.
    public var maxQueriesPerSecond = 100
    /// How far (seconds) a changeset's clock may be ahead of the server's wall clock; 0: no
    /// limit. A clock ahead wins every conflict until real time catches up, and every device
    /// that hears of it moves its own clock there (docs/protocol.md, "Clocks"): the default, a
    /// minute, is more than clocks kept by NTP drift apart and bounds how long a wrong one wins.
    /// Such an upload gets `clockAhead` and the connection closes; the client retries after a
    /// backoff and gets through once the server's time is near enough.
    public var maxClockAheadSeconds = 60
    /// What a commit of the apps' stores survives, and so an acknowledged upload (`"durability"`):
    /// `.full` (the default) a power loss or an operating system crash, `.normal` a crash of
    /// the process only. The users files are always `.full`.
    public var durability: Durability = .full
    /// Seconds a connection has to send its first byte after it was accepted, and a request head
    /// once it started one; silent sockets are closed after that, so that they cannot hold the
    /// connection slots (`maxConnections`) that everyone else needs.
    public var headerTimeoutSeconds = 10.0
    /// Open connections (HTTP and WebSocket) the server takes at once; more are answered 503.
    public var maxConnections = 10_000
    /// Open connections from one address (IP); more are answered 503, so that one host cannot
    /// take every slot; 0: no limit. Behind a reverse proxy every client has the proxy's address:
    /// raise it there (or give 0) and limit per client in the proxy.
    public var maxConnectionsPerAddress = 256
    /// Open sync connections of one user of an app (on this instance); more are answered 429
    /// with `Retry-After`, so that one token cannot hold thousands of sockets (from many
    /// addresses, or behind a proxy); 0: no limit. A device holds one connection per user and
    /// app, whatever the number of its realms.
    public var maxConnectionsPerUser = 100
    /// Failed logins a minute, per email/password account, per address, and new users (anonymous
    /// logins, registrations) a minute per address, before the app API answers 429 with
    /// `Retry-After`; 0: no limit. Guessing a password costs an attacker a minute per ten tries,
    /// and one host cannot fill the users table.
    public var attemptLimits = AttemptLimits(failedLoginsPerAccount: 10, failedLoginsPerAddress: 60, signupsPerAddress: 100)
    /// The admin console's key (`"admin": {"key": "..."}`); nil: the key in the data directory's
    /// `admin.key`, made on first start (docs/admin-api.md).
    public var adminKey: String?
    /// The PostgreSQL database several instances share (`"store": {"postgres": "postgresql://…"}`,
    /// docs/deploy.md); nil: each app's SQLite store in the data directory.
    public var postgresURL: String?
    /// Objects an instance reads from PostgreSQL into its cache per transaction when it catches
    /// up at start (not in the config file: a test makes it small, to cross batches with links).
    package var postgresCatchUpBatch = 5000

    public init() {}

    /// A config file: `{"host", "port", "data", "logLevel", "apps": [...]}` (every key optional).
    public init(file: String) throws {
        self.init()
        guard let data = FileManager.default.contents(atPath: file) else {
            throw AtollError(.file, "cannot read the config file '\(file)'")
        }
        let value = try EJSON.parse(String(decoding: data, as: UTF8.self))
        guard case .object(let d) = value else { throw AtollError(.invalidArgument, "the config file must hold a JSON object") }
        if case .string(let h)? = d["host"] { host = h }
        if case .int(let p)? = d["port"] {
            guard (0...65535).contains(p) else { throw AtollError(.invalidArgument, "port must be 0...65535") }
            port = Int(p)
        }
        if case .string(let dir)? = d["data"] { dataDirectory = dir }
        if case .string(let l)? = d["logLevel"] {
            guard let level = LogLevel(rawValue: l) else { throw AtollError(.invalidArgument, "logLevel must be debug, info, warning or error") }
            logLevel = level
        }
        if let v = d["maxMessageBytes"] {
            guard case .int(let n) = v, n >= 1024 else { throw AtollError(.invalidArgument, "maxMessageBytes must be an integer of at least 1024") }
            maxMessageBytes = Int(n)
        }
        for (key, target) in [("maxQueuedBytes", \ServerConfiguration.maxQueuedBytes),
                              ("maxQueuedBytesPerUser", \ServerConfiguration.maxQueuedBytesPerUser),
                              ("maxPendingBytesPerApp", \ServerConfiguration.maxPendingBytesPerApp)] {
            guard let v = d[key] else { continue }
            guard case .int(let n) = v, n >= 1 << 20, n <= 1 << 40 else {
                throw AtollError(.invalidArgument, "\(key) must be an integer from 1048576 (1 MB) to 1099511627776 (1 TB)")
            }
            self[keyPath: target] = Int(n)
        }
        if let v = d["maxUploadsPerSecond"] {
            guard case .int(let n) = v, n >= 0 else { throw AtollError(.invalidArgument, "maxUploadsPerSecond must be an integer, 0 or more (0: no limit)") }
            maxUploadsPerSecond = Int(n)
        }
        if let v = d["maxQueriesPerSecond"] {
            guard case .int(let n) = v, n >= 0 else { throw AtollError(.invalidArgument, "maxQueriesPerSecond must be an integer, 0 or more (0: no limit)") }
            maxQueriesPerSecond = Int(n)
        }
        if let v = d["maxClockAheadSeconds"] {
            guard case .int(let n) = v, n >= 0, n <= 10 * 365 * 86_400 else {
                throw AtollError(.invalidArgument, "maxClockAheadSeconds must be an integer from 0 (no limit) to 315360000 (ten years)")
            }
            maxClockAheadSeconds = Int(n)
        }
        if let v = d["durability"] {
            guard let text = v.stringValue, let mode = Durability(rawValue: text) else {
                throw AtollError(.invalidArgument, "durability must be \"full\" or \"normal\"")
            }
            durability = mode
        }
        if let v = d["headerTimeoutSeconds"] {
            guard let n = v.doubleValue, n.isFinite, n > 0, n <= 3600 else {
                throw AtollError(.invalidArgument, "headerTimeoutSeconds must be a number of seconds above 0, at most 3600")
            }
            headerTimeoutSeconds = n
        }
        if let v = d["maxConnections"] {
            guard case .int(let n) = v, n >= 1, n <= 10_000_000 else {
                throw AtollError(.invalidArgument, "maxConnections must be an integer from 1 to 10000000")
            }
            maxConnections = Int(n)
        }
        if let v = d["maxConnectionsPerAddress"] {
            guard case .int(let n) = v, n >= 0, n <= 10_000_000 else {
                throw AtollError(.invalidArgument, "maxConnectionsPerAddress must be an integer from 0 (no limit) to 10000000")
            }
            maxConnectionsPerAddress = Int(n)
        }
        if let v = d["maxConnectionsPerUser"] {
            guard case .int(let n) = v, n >= 0, n <= 10_000_000 else {
                throw AtollError(.invalidArgument, "maxConnectionsPerUser must be an integer from 0 (no limit) to 10000000")
            }
            maxConnectionsPerUser = Int(n)
        }
        for (key, path) in [("maxFailedLoginsPerAccountPerMinute", \AttemptLimits.failedLoginsPerAccount),
                            ("maxFailedLoginsPerAddressPerMinute", \AttemptLimits.failedLoginsPerAddress),
                            ("maxSignupsPerAddressPerMinute", \AttemptLimits.signupsPerAddress)] {
            guard let v = d[key] else { continue }
            guard case .int(let n) = v, n >= 0, n <= 1_000_000 else {
                throw AtollError(.invalidArgument, "\(key) must be an integer from 0 (no limit) to 1000000")
            }
            attemptLimits[keyPath: path] = Int(n)
        }
        if let admin = d["admin"] {
            guard case .object(let a) = admin, case .string(let key)? = a["key"] else {
                throw AtollError(.invalidArgument, "admin: must be {\"key\": \"...\"}")
            }
            guard key.utf8.count >= 16, key.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                throw AtollError(.invalidArgument, "admin.key: at least 16 characters, ASCII, no spaces")
            }
            adminKey = key
        }
        if let store = d["store"] {
            guard case .object(let st) = store, case .string(let url)? = st["postgres"], !url.isEmpty else {
                throw AtollError(.invalidArgument, "store: must be {\"postgres\": \"postgresql://…\"} (without it, SQLite in the data directory)")
            }
            postgresURL = url
        }
        if case .list(let items)? = d["apps"] {
            apps = try items.map { try ServerAppConfiguration(json: $0) }
            var seen = Set<String>()
            for app in apps where !seen.insert(app.id).inserted {
                throw AtollError(.invalidArgument, "two apps are named '\(app.id)'")
            }
        }
    }
}
