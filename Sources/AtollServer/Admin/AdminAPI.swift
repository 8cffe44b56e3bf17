import AtollAuth
import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import Foundation

/// The admin API (docs/admin-api.md): JSON routes under `/api/admin/v1/`, each behind the admin
/// key (`Authorization: Bearer <key>`), and the console page at `/admin` that uses them.
///
/// Handlers run on the HTTP server's threads; whatever touches an app's sync engine runs on its
/// queue, one thing at a time with the uploads.
final class AdminAPI: Sendable {
    static let prefix = "/api/admin/v1"
    /// Saved rules and auth settings, in each app's data directory: they win over the config file.
    static let rulesFile = "admin-rules.json"
    static let authFile = "admin-auth.json"

    let key: AdminKey
    let apps: [String: ServerApp]
    let auth: [String: AuthService]
    let dataDirectory: String
    let history: MetricsHistory
    let startedAt = Date()

    /// Whether the apps' data is in a storage that several instances share (PostgreSQL): rules
    /// and auth settings then come from the config file that every instance reads, and the
    /// console does not change them in one instance only.
    let sharedStorage: Bool

    init(key: AdminKey, apps: [String: ServerApp], auth: [String: AuthService], dataDirectory: String, history: MetricsHistory,
         sharedStorage: Bool = false) {
        self.sharedStorage = sharedStorage
        self.key = key
        self.apps = apps
        self.auth = auth
        self.dataDirectory = dataDirectory
        self.history = history
    }

    /// An app's configuration with what the console saved in its data directory applied (at start).
    /// - Throws: the reason a saved file cannot be used (the server does not start with it).
    /// - Parameter shared: instances share the storage: a saved file is refused, since it would
    ///   be in force in this instance only.
    static func applySaved(to app: ServerAppConfiguration, dataDirectory: String, shared: Bool = false) throws -> ServerAppConfiguration {
        var app = app
        let directory = dataDirectory + "/" + app.id
        if shared {
            for name in [rulesFile, authFile] where FileManager.default.fileExists(atPath: directory + "/" + name) {
                throw AtollError(.invalidArgument, "\(directory)/\(name) holds settings saved by the admin console, which would apply to this instance only: with \"store\": {\"postgres\": …} move them into the config file every instance reads, and delete the file")
            }
            return app
        }
        if let data = FileManager.default.contents(atPath: directory + "/" + rulesFile) {
            let json = try EJSON.parse(String(decoding: data, as: UTF8.self))
            do { app.rules = try Rules(json: json) } catch {
                throw AtollError(.invalidArgument, "\(directory)/\(rulesFile): \(error)")
            }
            app.rulesSource = json
        }
        if let data = FileManager.default.contents(atPath: directory + "/" + authFile) {
            app.auth = try EJSON.parse(String(decoding: data, as: UTF8.self))
            app.authFromConsole = true
        }
        return app
    }

    // MARK: - Routes

    func install(on http: HTTPServer) {
        /// A JSON route behind the admin key; AdminError, AuthError and anything else become JSON errors.
        func route(_ method: String, _ path: String, _ body: @escaping @Sendable (HTTPRequest) throws -> Value) {
            http.route(method, Self.prefix + path) { [self] request in
                do {
                    try authorize(request)
                    return Self.json(200, try body(request))
                } catch let e as AdminError {
                    return Self.error(e)
                } catch {
                    return Self.error(AdminError(500, "InternalServerError", "the server failed: \(error)"))
                }
            }
        }
        http.route("GET", "/admin") { _ in Self.page(AdminConsole.html, "text/html; charset=utf-8") }
        http.route("GET", "/admin/console.js") { _ in Self.page(AdminConsole.script, "text/javascript; charset=utf-8") }
        http.route("GET", "/admin/console.css") { _ in Self.page(AdminConsole.style, "text/css; charset=utf-8") }

        route("GET", "/info") { [self] _ in
            .doc(["apps": .list(apps.keys.sorted().map { .string($0) }), "startedAt": .date(Timestamp(startedAt)),
                  "keySource": .string(key.source == .config ? "config" : "file")])
        }
        route("GET", "/apps") { [self] _ in .list(try apps.keys.sorted().map { try appSummary($0) }) }
        route("GET", "/apps/:app") { [self] r in try appSummary(try appId(r)) }
        route("PUT", "/apps/:app/rules") { [self] r in try saveRules(try app(r), try body(r)) }
        route("PUT", "/apps/:app/auth") { [self] r in try saveAuth(try app(r), try body(r)) }

        route("GET", "/apps/:app/users") { [self] r in
            let service = try authService(r)
            return .list(try authCall { try service.adminUsers(search: r.queryItems["search"] ?? "") }.map(Self.user))
        }
        route("POST", "/apps/:app/users/:user/disable") { [self] r in try setDisabled(r, true) }
        route("POST", "/apps/:app/users/:user/enable") { [self] r in try setDisabled(r, false) }
        route("DELETE", "/apps/:app/users/:user") { [self] r in
            let user = r.pathParameters["user"] ?? ""
            try authCall { try authService(r).deleteUser(user) }
            let closed = try closeEverywhere(user, try app(r))
            return .doc(["deleted": .string(user), "closedConnections": .int(Int64(closed))])
        }
        route("POST", "/apps/:app/users/:user/revoke_sessions") { [self] r in
            let user = r.pathParameters["user"] ?? ""
            try authCall { try authService(r).revokeSessions(user) }
            let closed = try closeEverywhere(user, try app(r))
            return .doc(["revoked": .string(user), "closedConnections": .int(Int64(closed))])
        }
        route("GET", "/apps/:app/users/:user/api_keys") { [self] r in
            let keys = try authCall { try authService(r).apiKeys(ofUser: r.pathParameters["user"] ?? "") }
            return .list(keys.map { .doc(["_id": .string($0.id), "name": .string($0.name), "disabled": .bool($0.disabled)]) })
        }
        route("DELETE", "/apps/:app/users/:user/api_keys/:key") { [self] r in
            try authCall { try authService(r).deleteAPIKey(r.pathParameters["user"] ?? "", r.pathParameters["key"] ?? "") }
            return .doc(["deleted": .string(r.pathParameters["key"] ?? "")])
        }

        route("GET", "/apps/:app/sync") { [self] r in
            let sync = try app(r)
            return sync.queue.sync {
                .doc(["serverVersion": .int(Int64(sync.latestVersion)), "connections": sync.adminConnections(),
                      "errors": sync.adminErrors()])
            }
        }
        route("GET", "/apps/:app/classes") { [self] r in
            let sync = try app(r)
            return try sync.queue.sync { try sync.adminClasses() }
        }
        route("POST", "/apps/:app/query") { [self] r in
            let sync = try app(r)
            let f = try fields(try body(r))
            let cls = try f.string("class")
            let query = try f.optionalString("query").flatMap { $0.isEmpty ? nil : $0 } ?? "TRUEPREDICATE"
            let args = try f.list("args")
            let offset = Int(try f.int("offset", default: 0))
            let limit = Int(try f.int("limit", default: 50))
            guard offset >= 0, (1...1000).contains(limit) else { throw AdminError.badRequest("offset must be ≥ 0 and limit 1...1000") }
            return try sync.queue.sync { try sync.adminQuery(cls, query, args, offset: offset, limit: limit) }
        }
        route("POST", "/apps/:app/object") { [self] r in
            let sync = try app(r)
            let f = try fields(try body(r))
            let cls = try f.string("class")
            let pk = try f.value("primaryKey")
            return .object(try sync.queue.sync { try sync.adminObject(cls, pk) })
        }
        route("PATCH", "/apps/:app/object") { [self] r in
            let sync = try app(r)
            let f = try fields(try body(r))
            let cls = try f.string("class")
            let pk = try f.value("primaryKey")
            guard case .object(let set) = try f.value("set") else { throw AdminError.badRequest("\"set\" must be an object of fields") }
            let (doc, version) = try sync.queue.sync { try sync.adminUpdate(cls, pk, set) }
            return .doc(["object": .object(doc), "serverVersion": .int(Int64(version))])
        }
        route("GET", "/metrics") { [self] _ in history.value }
    }

    private static func page(_ text: String, _ type: String) -> HTTPResponse {
        HTTPResponse(status: .ok, headers: [
            "Content-Type": type,
            "Cache-Control": "no-store",
            // Only this server's script and style; no inline script; never in a frame.
            "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        ], body: Array(text.utf8))
    }

    private func authorize(_ request: HTTPRequest) throws {
        guard let header = request.headers["authorization"], header.lowercased().hasPrefix("bearer ") else {
            throw AdminError(401, "Unauthorized", "the admin API needs the admin key: Authorization: Bearer <key>")
        }
        guard key.matches(String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)) else {
            throw AdminError(401, "Unauthorized", "wrong admin key")
        }
    }

    static func json(_ status: Int, _ value: Value) -> HTTPResponse {
        HTTPResponse(status: HTTPStatus(status), headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
                     body: Array(Wire.encode(value).utf8))
    }

    static func error(_ e: AdminError) -> HTTPResponse {
        json(e.status, .doc(["error": .string(e.message), "error_code": .string(e.code), "status": .int(Int64(e.status))]))
    }

    // MARK: - Requests

    private func appId(_ r: HTTPRequest) throws -> String {
        let id = r.pathParameters["app"] ?? ""
        guard apps[id] != nil else { throw AdminError(404, "AppNotFound", "no app '\(id)'") }
        return id
    }

    private func app(_ r: HTTPRequest) throws -> ServerApp {
        guard let app = apps[try appId(r)] else { throw AdminError(404, "AppNotFound", "no app") }
        return app
    }

    private func authService(_ r: HTTPRequest) throws -> AuthService {
        guard let service = auth[try appId(r)] else { throw AdminError(404, "AppNotFound", "no app") }
        return service
    }

    private func body(_ r: HTTPRequest) throws -> Value {
        guard let text = r.text, !text.isEmpty else { throw AdminError.badRequest("the body must be JSON") }
        do { return try EJSON.parse(text) } catch { throw AdminError.badRequest("the body is not JSON: \(error)") }
    }

    private func fields(_ v: Value) throws -> AdminFields {
        guard case .object(let d) = v else { throw AdminError.badRequest("the body must be a JSON object") }
        return AdminFields(document: d)
    }

    private func authCall<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as AuthError {
            throw AdminError(e.kind.status, e.kind.errorCode, e.message)
        }
    }

    /// Closes a user's connections here, and has instances sharing the storage close theirs (the
    /// user is disabled, deleted or without sessions in the database already: a failure to tell
    /// them leaves their open connections until their tokens expire). The number closed here.
    private func closeEverywhere(_ user: String, _ sync: ServerApp) throws -> Int {
        let closed = sync.queue.sync { sync.closeConnections(ofUser: user) }
        do { try sync.queue.sync { try sync.storage.announceDisabled(user: user) } } catch {
            sync.log.warning("other instances were not told to close a user's connections", ["user": user, "error": "\(error)"])
        }
        return closed
    }

    private func setDisabled(_ r: HTTPRequest, _ disabled: Bool) throws -> Value {
        let user = r.pathParameters["user"] ?? ""
        try authCall { try authService(r).setDisabled(user, disabled) }
        let closed = disabled ? try closeEverywhere(user, try app(r)) : 0
        return .doc(["user": .string(user), "disabled": .bool(disabled), "closedConnections": .int(Int64(closed))])
    }

    // MARK: - Apps

    private func appSummary(_ id: String) throws -> Value {
        guard let sync = apps[id], let service = auth[id] else { throw AdminError(404, "AppNotFound", "no app '\(id)'") }
        let c = service.configuration
        var providers = [Value]()
        if c.anonymous { providers.append(.doc(["type": .string("anon-user")])) }
        if let e = c.emailPassword {
            providers.append(.doc(["type": .string("local-userpass"), "autoConfirm": .bool(e.autoConfirm)]))
        }
        if c.apiKeys { providers.append(.doc(["type": .string("api-key")])) }
        if let j = c.customJWT {
            providers.append(.doc(["type": .string("custom-token"), "algorithm": .string(j.algorithm.rawValue),
                                   "audience": .list(j.audience.map { .string($0) }), "issuer": j.issuer.map { .string($0) } ?? .null]))
        }
        return sync.queue.sync {
            let conf = sync.configuration
            var syncDoc = Document()
            switch conf.mode {
            case .flexible: syncDoc["mode"] = .string("flexible")
            case .partition: syncDoc["mode"] = .string("partition")
            }
            syncDoc["partitionKey"] = conf.partitionKey.map { .string($0) } ?? .null
            syncDoc["queryableFields"] = conf.queryableFields.map { .list($0.sorted().map { .string($0) }) } ?? .null
            let savedRules = FileManager.default.fileExists(atPath: dataDirectory + "/" + id + "/" + Self.rulesFile)
            let savedAuth = FileManager.default.fileExists(atPath: dataDirectory + "/" + id + "/" + Self.authFile)
            return .doc([
                "id": .string(id),
                "developmentMode": .bool(conf.developmentMode),
                "sync": .object(syncDoc),
                "schema": sync.schemaJSON(),
                "rules": conf.rulesSource ?? .doc(["default": .doc(["roles": .list([.doc(["name": .string("all"), "read": .bool(true), "write": .bool(true)])])])]),
                "rulesSavedByAdmin": .bool(savedRules),
                "auth": .doc(["providers": .list(providers), "accessTokenLifetime": .double(c.accessTokenLifetime),
                              "refreshTokenLifetime": .double(c.refreshTokenLifetime)]),
                "authSaved": savedAuth ? (try? EJSON.parse(String(decoding: FileManager.default.contents(atPath: dataDirectory + "/" + id + "/" + Self.authFile) ?? Data(), as: UTF8.self))) ?? .null : .null,
                "serverVersion": .int(Int64(sync.latestVersion)),
            ])
        }
    }

    /// Validates, saves (a temporary file renamed over the old one), then applies: a rule that
    /// fails leaves both the file and the running rules as they were.
    private func saveRules(_ sync: ServerApp, _ json: Value) throws -> Value {
        try refuseWhenShared("rules")
        let rules = try sync.queue.sync { try sync.validateRules(json) }
        try save(json, sync.configuration.id, Self.rulesFile)
        sync.queue.sync { sync.replaceRules(rules, source: json) }
        return .doc(["saved": .bool(true), "rules": json])
    }

    /// Validates auth settings, puts them in force at once and saves them (they win over the
    /// config at the next start); when they cannot be saved, the old ones stay in force.
    private func saveAuth(_ sync: ServerApp, _ json: Value) throws -> Value {
        try refuseWhenShared("auth settings")
        let id = sync.configuration.id
        guard let service = auth[id] else { throw AdminError(404, "AppNotFound", "no app '\(id)'") }
        let previous = service.configuration
        do {
            // Checked as at start (AuthConfiguration(appId:json:) validates what it reads, and
            // reconfigure makes the custom-JWT keys) before anything changes.
            // No key files from here: the console's settings name no paths on the server.
            try service.reconfigure(try AuthConfiguration(appId: id, json: json, keyFiles: false))
        } catch {
            throw AdminError(400, "InvalidAuthConfig", "\(error)")
        }
        do { try save(json, id, Self.authFile) } catch {
            try? service.reconfigure(previous)
            throw error
        }
        return .doc(["saved": .bool(true), "auth": json])
    }

    private func refuseWhenShared(_ what: String) throws {
        guard sharedStorage else { return }
        throw AdminError(409, "SharedStorage", "the instances of this server share PostgreSQL: \(what) are set in the config file that every instance reads, not in one instance's console")
    }

    private func save(_ json: Value, _ app: String, _ name: String) throws {
        let path = dataDirectory + "/" + app + "/" + name
        let temporary = path + ".tmp"
        do {
            // admin-auth.json may hold the custom-JWT secret: mode 0600, as the signing key.
            try PrivateFiles.write(Array(Wire.encode(json).utf8), to: temporary)
            if rename(temporary, path) != 0 { throw AtollError(.file, String(cString: strerror(errno))) }
        } catch {
            unlink(temporary)
            throw AdminError(500, "InternalServerError", "cannot save \(name): \(error)")
        }
    }

    static func user(_ u: AdminUser) -> Value {
        .doc([
            "_id": .string(u.id),
            "createdAt": .date(u.createdAt),
            "disabled": .bool(u.disabled),
            "email": u.email.map { .string($0) } ?? .null,
            "identities": .list(u.identities.map { .doc(["id": .string($0.id), "provider_type": .string($0.providerType)]) }),
            "data": .object(u.data),
            "apiKeys": .int(Int64(u.apiKeyCount)),
            "sessions": .int(Int64(u.refreshTokenCount)),
        ])
    }
}

/// A request body's fields, read with admin errors (400 `BadRequest` naming the field).
struct AdminFields {
    var document: Document

    func value(_ key: String) throws -> Value {
        guard let v = document[key] else { throw AdminError.badRequest("\"\(key)\" is missing") }
        return v
    }

    func string(_ key: String) throws -> String {
        guard case .string(let s) = try value(key) else { throw AdminError.badRequest("\"\(key)\" must be a string") }
        return s
    }

    func optionalString(_ key: String) throws -> String? {
        guard let v = document[key], v != .null else { return nil }
        guard case .string(let s) = v else { throw AdminError.badRequest("\"\(key)\" must be a string") }
        return s
    }

    func int(_ key: String, default fallback: Int64) throws -> Int64 {
        guard let v = document[key], v != .null else { return fallback }
        guard case .int(let i) = v else { throw AdminError.badRequest("\"\(key)\" must be an integer") }
        return i
    }

    func list(_ key: String) throws -> [Value] {
        guard let v = document[key], v != .null else { return [] }
        guard case .list(let items) = v else { throw AdminError.badRequest("\"\(key)\" must be an array") }
        return items
    }
}
