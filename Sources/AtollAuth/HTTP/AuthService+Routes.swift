import AtollJSON
import AtollNet
import AtollStore

// The HTTP routes (docs/app-api.md): where they are, how a handler's errors become answers,
// and the session and profile routes. Providers are in AuthService+Providers.swift, API keys in
// AuthService+APIKeys.swift.

extension AuthService {
    /// The path every route starts with; `:app` must be the configuration's app id.
    static let prefix = "/api/client/v2.0/app/:app/"

    /// Registers the app API's routes on `server` (before it starts):
    /// `auth/providers/:provider/…`, `auth/session`, `auth/profile`, `auth/delete`,
    /// `auth/api_keys…`, all under `/api/client/v2.0/app/:app/`. For several apps on one server,
    /// use `AuthService.install(_:on:)` once instead.
    public func install(on server: HTTPServer) {
        Self.install([configuration.appId: self], on: server)
    }

    /// Registers the routes once for several apps, each request going to the service of its
    /// `:app` (404 `AppNotFound` when there is none).
    ///
    /// ```swift
    /// AuthService.install(["todo": todoAuth, "chat": chatAuth], on: server)
    /// ```
    /// - Parameter services: the services by app id.
    public static func install(_ services: [String: AuthService], on server: HTTPServer) {
        /// `hashes`: the route computes a password hash for the email/password provider (it
        /// runs on `PasswordWork`'s threads then).
        func route(_ method: String, _ path: String, hashes: Bool = false,
                   _ handler: @escaping @Sendable (AuthService, HTTPRequest) throws -> HTTPResponse) {
            server.route(method, prefix + path) { request in
                let app = request.pathParameters["app"] ?? ""
                guard let service = services[app] else {
                    return AuthError(.appNotFound, "cannot find app using client app id '\(app)'").response
                }
                if hashes && request.pathParameters["provider"] == Provider.emailPassword {
                    return await PasswordWork.run { service.answer(request, handler) }
                }
                return service.answer(request, handler)
            }
        }
        route("POST", "auth/providers/:provider/login", hashes: true) { try $0.login($1) }
        route("POST", "auth/providers/:provider/register", hashes: true) { try $0.register($1) }
        route("POST", "auth/providers/:provider/confirm") { try $0.confirm($1) }
        route("POST", "auth/providers/:provider/confirm/send") { try $0.sendConfirmation($1) }
        route("POST", "auth/providers/:provider/reset", hashes: true) { try $0.resetPassword($1) }
        route("POST", "auth/providers/:provider/reset/send") { try $0.sendReset($1) }
        route("POST", "auth/session") { try $0.refreshSession($1) }
        route("DELETE", "auth/session") { try $0.logout($1) }
        route("GET", "auth/profile") { try $0.profile($1) }
        route("DELETE", "auth/delete") { try $0.deleteSelf($1) }
        route("POST", "auth/api_keys") { try $0.createAPIKey($1) }
        route("GET", "auth/api_keys") { try $0.listAPIKeys($1) }
        route("GET", "auth/api_keys/:id") { try $0.getAPIKey($1) }
        route("DELETE", "auth/api_keys/:id") { try $0.deleteAPIKey($1) }
        route("PUT", "auth/api_keys/:id/enable") { try $0.setAPIKeyDisabled($1, false) }
        route("PUT", "auth/api_keys/:id/disable") { try $0.setAPIKeyDisabled($1, true) }
    }

    /// Runs a handler and answers every failure itself: an `AuthError` with its status and
    /// `{"error", "error_code", "status"}`, anything else as a 500 that does not show the
    /// internal message.
    private func answer(_ request: HTTPRequest,
                        _ handler: (AuthService, HTTPRequest) throws -> HTTPResponse) -> HTTPResponse {
        do {
            return try handler(self, request)
        } catch let error as AuthError where error.kind != .internal {
            return error.response
        } catch {
            return AuthError(.internal, "internal server error").response
        }
    }

    /// A JSON response of a document (or, with `list`, an array).
    static func json(_ value: Value, status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, jsonText: EJSON.serialize(value))
    }

    /// The bearer token of the `Authorization` header.
    /// - Throws: `AuthError(.invalidSession)` when there is none.
    static func bearerToken(_ request: HTTPRequest) throws -> String {
        guard let header = request.headers["Authorization"] else {
            throw AuthError(.invalidSession, "invalid session: missing Authorization: Bearer header")
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw AuthError(.invalidSession, "invalid session: the Authorization header must be \"Bearer <token>\"")
        }
        return parts[1].trimmingCharacters(in: .whitespaces)
    }

    /// The user of the request's refresh token (what `auth/session` and `auth/api_keys` take).
    func sessionUser(_ request: HTTPRequest) throws -> AuthRecord.User {
        do { return try refreshTokenUser(try Self.bearerToken(request)) } catch let error as AuthError {
            if error.kind != .internal { count { $0.invalidTokens += 1 } }
            throw error
        }
    }

    // MARK: - Session

    /// `POST auth/session`, refresh token → `{"access_token"}` (201).
    func refreshSession(_ request: HTTPRequest) throws -> HTTPResponse {
        let user = try sessionUser(request)
        count { $0.tokenRefreshes += 1 }
        // Bound to the refresh token presented: its logout ends this access token too.
        let session = Crypto.sha256Hex(try Self.bearerToken(request))
        return Self.json(.object(["access_token": .string(makeAccessToken(userId: user.id, session: session))]), status: .created)
    }

    /// `DELETE auth/session`, refresh token → revoked (204).
    func logout(_ request: HTTPRequest) throws -> HTTPResponse {
        let session = Crypto.sha256Hex(try Self.bearerToken(request))
        let userId = try store.transaction { () -> String? in
            guard let stored = try store.refreshToken(hash: session) else { return nil }
            try store.deleteRefreshToken(hash: session)
            return stored.userId
        }
        guard let userId else {
            count { $0.invalidTokens += 1 }
            throw AuthError(.invalidSession, "invalid session: unknown or revoked refresh token")
        }
        sessionsEnded(userId: userId, session: session)
        return HTTPResponse(status: .noContent)
    }

    // MARK: - Profile

    /// `GET auth/profile`, access token → `{"user_id", "identities", "data", "type"}`.
    func profile(_ request: HTTPRequest) throws -> HTTPResponse {
        let user = try verifyAccessToken(try Self.bearerToken(request))
        let identities: [Value] = user.identities.map {
            .object(["id": .string($0.id), "provider_type": .string($0.providerType)])
        }
        return Self.json(.object([
            "user_id": .string(user.id), "identities": .list(identities), "data": .object(user.data),
            "custom_data": .object(user.customData), "type": .string("normal"),
        ]))
    }

    /// `DELETE auth/delete`, access token → the user and all of it deleted (204).
    func deleteSelf(_ request: HTTPRequest) throws -> HTTPResponse {
        let user = try verifyAccessToken(try Self.bearerToken(request))
        try deleteUser(user.id)
        return HTTPResponse(status: .noContent)
    }
}
