import AtollNet
import AtollStore

// User API keys, under `auth/api_keys`, authorized with the user's refresh token (as App
// Services does). A key is shown once, when made; only its SHA-256 is stored.

extension AuthService {
    /// The user of the request's refresh token, when API keys are on.
    private func apiKeyOwner(_ request: HTTPRequest) throws -> AuthRecord.User {
        guard configuration.apiKeys else {
            throw AuthError(.providerNotFound, "authentication provider '\(Provider.apiKey)' not found")
        }
        return try sessionUser(request)
    }

    private static func describe(_ key: AuthRecord.APIKey) -> Value {
        .object(["_id": .string(key.id), "name": .string(key.name), "disabled": .bool(key.disabled)])
    }

    /// The key of the path's `:id`, when it is the user's.
    private func pathKey(_ request: HTTPRequest, _ user: AuthRecord.User) throws -> AuthRecord.APIKey {
        let id = request.pathParameters["id"] ?? ""
        guard let key = try store.apiKey(id: id, userId: user.id) else {
            throw AuthError(.apiKeyNotFound, "API key not found: '\(id)'")
        }
        return key
    }

    /// `POST auth/api_keys` `{"name"}` → 201 `{"_id", "key", "name", "disabled": false}`.
    func createAPIKey(_ request: HTTPRequest) throws -> HTTPResponse {
        let user = try apiKeyOwner(request)
        let name = try RequestBody(request).string("name")
        guard (1...100).contains(name.count), !name.contains(where: { $0.isNewline || ($0.asciiValue.map { $0 < 0x20 } ?? false) }) else {
            throw AuthError(.invalidParameter, "an API key name is 1 to 100 characters, without control characters")
        }
        let secret = Crypto.hex(try Crypto.randomBytes(32))
        // The storage refuses a name the user has a key of (409 APIKeyAlreadyExists).
        let key = try store.transaction { try store.createAPIKey(userId: user.id, name: name, keyHash: Crypto.sha256Hex(secret)) }
        return Self.json(.object(["_id": .string(key.id), "key": .string(secret), "name": .string(key.name),
                                  "disabled": .bool(false)]), status: .created)
    }

    /// `GET auth/api_keys` → `[{"_id", "name", "disabled"}]`, oldest first.
    func listAPIKeys(_ request: HTTPRequest) throws -> HTTPResponse {
        let user = try apiKeyOwner(request)
        return Self.json(.list(try store.reading { try store.apiKeys(ofUser: user.id) }.map(Self.describe)))
    }

    /// `GET auth/api_keys/:id` → `{"_id", "name", "disabled"}`.
    func getAPIKey(_ request: HTTPRequest) throws -> HTTPResponse {
        let user = try apiKeyOwner(request)
        return Self.json(Self.describe(try store.reading { try pathKey(request, user) }))
    }

    /// `DELETE auth/api_keys/:id` → 204.
    func deleteAPIKey(_ request: HTTPRequest) throws -> HTTPResponse {
        let user = try apiKeyOwner(request)
        try store.transaction { try store.deleteAPIKey(try pathKey(request, user).id) }
        return HTTPResponse(status: .noContent)
    }

    /// `PUT auth/api_keys/:id/enable` and `…/disable` → 204.
    func setAPIKeyDisabled(_ request: HTTPRequest, _ disabled: Bool) throws -> HTTPResponse {
        let user = try apiKeyOwner(request)
        try store.transaction { try store.setAPIKeyDisabled(try pathKey(request, user).id, disabled) }
        return HTTPResponse(status: .noContent)
    }
}
