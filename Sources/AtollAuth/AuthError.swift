import AtollJSON
import AtollNet
import AtollStore
import Foundation

/// A failure of the app API: what went wrong (`kind`) and a message that names it.
///
/// Over HTTP it becomes `{"error": message, "error_code": kind.errorCode, "status": status}` with
/// the kind's status; the error codes are App Services' where it has one.
public struct AuthError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kinds of failure. Closed for a given version; new kinds may be added.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// A missing, malformed, unknown, revoked or forged token (401 `InvalidSession`).
        case invalidSession
        /// A token past its expiry (401 `InvalidSession`, as App Services: clients refresh on it).
        case expired
        /// The user is disabled (401 `UserDisabled`).
        case userDisabled
        /// Wrong email or password (401 `InvalidPassword`).
        case invalidPassword
        /// The email/password user has not confirmed its email yet (401 `UserNotConfirmed`).
        case userNotConfirmed
        /// An API key or custom JWT that does not log anyone in (401 `AuthError`).
        case invalidCredentials
        /// A body that is not a JSON object, or a field missing or of the wrong type (400 `BadRequest`).
        case badRequest
        /// A field whose value is not allowed: a short password, a malformed email (400 `InvalidParameter`).
        case invalidParameter
        /// A confirmation or reset token that is unknown, used or expired (400 `UserpassTokenInvalid`).
        case invalidUserpassToken
        /// The path's app id is not this service's (404 `AppNotFound`).
        case appNotFound
        /// An unknown provider, or one the configuration turns off (404 `AuthProviderNotFound`).
        case providerNotFound
        /// No such user (404 `UserNotFound`).
        case userNotFound
        /// No such API key for this user (404 `APIKeyNotFound`).
        case apiKeyNotFound
        /// The email is registered already (409 `AccountNameInUse`).
        case accountNameInUse
        /// The user's email is confirmed already (409 `UserAlreadyConfirmed`).
        case userAlreadyConfirmed
        /// The user has an API key of that name already (409 `APIKeyAlreadyExists`).
        case apiKeyAlreadyExists
        /// Too many failed logins of an account or from an address, or too many new users from
        /// an address, this minute (429 `TooManyRequests`, with `Retry-After`).
        case tooManyRequests
        /// A failure of the server itself: its store, OpenSSL (500 `InternalServerError`).
        case `internal`

        /// The HTTP status the kind is answered with.
        public var status: Int {
            switch self {
            case .invalidSession, .expired, .userDisabled, .invalidPassword, .userNotConfirmed, .invalidCredentials: return 401
            case .badRequest, .invalidParameter, .invalidUserpassToken: return 400
            case .appNotFound, .providerNotFound, .userNotFound, .apiKeyNotFound: return 404
            case .accountNameInUse, .userAlreadyConfirmed, .apiKeyAlreadyExists: return 409
            case .tooManyRequests: return 429
            case .internal: return 500
            }
        }

        /// The `error_code` of the JSON error body.
        public var errorCode: String {
            switch self {
            case .invalidSession, .expired: return "InvalidSession"
            case .userDisabled: return "UserDisabled"
            case .invalidPassword: return "InvalidPassword"
            case .userNotConfirmed: return "UserNotConfirmed"
            case .invalidCredentials: return "AuthError"
            case .badRequest: return "BadRequest"
            case .invalidParameter: return "InvalidParameter"
            case .invalidUserpassToken: return "UserpassTokenInvalid"
            case .appNotFound: return "AppNotFound"
            case .providerNotFound: return "AuthProviderNotFound"
            case .userNotFound: return "UserNotFound"
            case .apiKeyNotFound: return "APIKeyNotFound"
            case .accountNameInUse: return "AccountNameInUse"
            case .userAlreadyConfirmed: return "UserAlreadyConfirmed"
            case .apiKeyAlreadyExists: return "APIKeyAlreadyExists"
            case .tooManyRequests: return "TooManyRequests"
            case .internal: return "InternalServerError"
            }
        }
    }

    /// What went wrong; decides the HTTP status and `error_code`.
    public var kind: Kind
    /// What went wrong, for people: the `error` of the JSON body.
    public var message: String
    /// Seconds the client should wait before it tries again (`tooManyRequests`): the response's
    /// `Retry-After`.
    public var retryAfter: Int?

    /// An error of a kind, with its message.
    public init(_ kind: Kind, _ message: String, retryAfter: Int? = nil) {
        self.kind = kind
        self.message = message
        self.retryAfter = retryAfter
    }

    /// `"<error_code>: <message>"`.
    public var description: String { "\(kind.errorCode): \(message)" }

    /// The error as an HTTP response: `{"error", "error_code", "status"}`.
    var response: HTTPResponse {
        let body: Document = ["error": .string(message), "error_code": .string(kind.errorCode),
                              "status": .int(Int64(kind.status))]
        var response = HTTPResponse(status: HTTPStatus(kind.status), jsonText: EJSON.serialize(.object(body)))
        if let retryAfter { response.headers["Retry-After"] = String(retryAfter) }
        return response
    }

    /// Any error as an `AuthError`: the store's and others' become `.internal` (their message is
    /// kept for the server's own callers, not sent to clients: see `AuthService.answer`).
    static func wrap(_ error: Error) -> AuthError {
        error as? AuthError ?? AuthError(.internal, "\(error)")
    }
}

extension AuthError: LocalizedError {
    /// The message, as `localizedDescription` gives it (Foundation's default names only the type).
    public var errorDescription: String? { description }
}
