import Foundation

/// HTTP header fields in arrival order; names compare case-insensitively.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}
    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { add(name, value) }
    }

    /// The first value of `name`, or nil.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value }
        set {
            fields.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
            if let value = newValue { fields.append((name, value)) }
        }
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    /// Comma-separated tokens of `name` across its lines, lowercased ("Connection: keep-alive, Upgrade").
    func tokens(_ name: String) -> [String] {
        values(name).flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }
}

/// A request as the server's handlers see it.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path without the query, percent-decoded.
    public var path: String
    /// The query string after `?` (raw), empty when none.
    public var query: String
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Values of the route's `:name` segments.
    public var pathParameters: [String: String] = [:]
    /// The peer's address ("127.0.0.1:51234").
    public var remoteAddress: String

    public init(method: String, path: String, query: String = "", headers: HTTPHeaders = [:],
                body: [UInt8] = [], remoteAddress: String = "") {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The query's `name=value` pairs, percent-decoded (`+` as space).
    public var queryItems: [String: String] {
        var items: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if let name = parts.first { items[name] = parts.count > 1 ? parts[1] : "" }
        }
        return items
    }

    /// The body as UTF-8 text (nil if it is not valid UTF-8).
    public var text: String? { String(validating: body, as: UTF8.self) }

    /// Decodes a JSON body; throws `HTTPError` 400 (or 415 when the content type is not JSON).
    public func decodeJSON<T: Decodable>(_ type: T.Type) throws -> T {
        if let contentType = headers["Content-Type"], !contentType.lowercased().hasPrefix("application/json") {
            throw HTTPError(.unsupportedMediaType, "expected application/json, got \(contentType)")
        }
        do {
            return try JSONDecoder().decode(type, from: Data(body))
        } catch {
            throw HTTPError(.badRequest, "invalid JSON body: \(error)")
        }
    }

    /// Parses a JSON body into Foundation values (dictionaries, arrays, strings, numbers).
    public func jsonObject() throws -> Any {
        do {
            return try JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed])
        } catch {
            throw HTTPError(.badRequest, "invalid JSON body")
        }
    }
}

/// An HTTP status code with its reason phrase.
public struct HTTPStatus: Sendable, Equatable, ExpressibleByIntegerLiteral {
    public var code: Int
    public init(_ code: Int) { self.code = code }
    public init(integerLiteral value: Int) { self.code = value }

    public static let ok: HTTPStatus = 200
    public static let created: HTTPStatus = 201
    public static let noContent: HTTPStatus = 204
    public static let switchingProtocols: HTTPStatus = 101
    public static let badRequest: HTTPStatus = 400
    public static let unauthorized: HTTPStatus = 401
    public static let forbidden: HTTPStatus = 403
    public static let notFound: HTTPStatus = 404
    public static let methodNotAllowed: HTTPStatus = 405
    public static let requestTimeout: HTTPStatus = 408
    public static let conflict: HTTPStatus = 409
    public static let lengthRequired: HTTPStatus = 411
    public static let payloadTooLarge: HTTPStatus = 413
    public static let uriTooLong: HTTPStatus = 414
    public static let unsupportedMediaType: HTTPStatus = 415
    public static let upgradeRequired: HTTPStatus = 426
    public static let tooManyRequests: HTTPStatus = 429
    public static let headerFieldsTooLarge: HTTPStatus = 431
    public static let internalServerError: HTTPStatus = 500
    public static let notImplemented: HTTPStatus = 501
    public static let serviceUnavailable: HTTPStatus = 503
    public static let httpVersionNotSupported: HTTPStatus = 505

    public var reason: String {
        switch code {
        case 100: return "Continue"
        case 101: return "Switching Protocols"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 422: return "Unprocessable Content"
        case 426: return "Upgrade Required"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        default: return "Status \(code)"
        }
    }
}

/// A response from a handler. `Content-Length` is set by the server.
public struct HTTPResponse: Sendable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A text response (`text/plain; charset=utf-8` unless `contentType` says otherwise).
    public init(status: HTTPStatus = .ok, text: String, contentType: String = "text/plain; charset=utf-8") {
        self.init(status: status, headers: ["Content-Type": contentType], body: Array(text.utf8))
    }

    /// A JSON response from JSON text already encoded.
    public init(status: HTTPStatus = .ok, jsonText: String) {
        self.init(status: status, headers: ["Content-Type": "application/json"], body: Array(jsonText.utf8))
    }

    /// A JSON response from an `Encodable` value.
    public init<T: Encodable>(status: HTTPStatus = .ok, json value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        self.init(status: status, headers: ["Content-Type": "application/json"], body: Array(try encoder.encode(value)))
    }

    /// The standard error body: `{"error": message, "status": code}`.
    public static func error(_ status: HTTPStatus, _ message: String) -> HTTPResponse {
        let body = (try? JSONSerialization.data(withJSONObject: ["error": message, "status": status.code],
                                                options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(body))
    }

    private static func clean(_ text: String) -> String {
        text.contains(where: { $0 == "\r" || $0 == "\n" }) ? text.filter { $0 != "\r" && $0 != "\n" } : text
    }

    /// The bytes of the status line, headers and body.
    func serialized(keepAlive: Bool, head: Bool = false) -> [UInt8] {
        var text = "HTTP/1.1 \(status.code) \(status.reason)\r\n"
        for (name, value) in headers.fields
        where name.caseInsensitiveCompare("Content-Length") != .orderedSame
            && name.caseInsensitiveCompare("Connection") != .orderedSame
            && name.caseInsensitiveCompare("Transfer-Encoding") != .orderedSame {
            // A CR or LF in a header would split the response (header injection): drop them.
            text += "\(Self.clean(name)): \(Self.clean(value))\r\n"
        }
        // 1xx, 204 and 304 have no body (RFC 9110 §6.4.1): one sent anyway would be read as
        // the start of the next response.
        let bodyAllowed = status.code >= 200 && status.code != 204 && status.code != 304
        if bodyAllowed { text += "Content-Length: \(body.count)\r\n" }
        if !keepAlive { text += "Connection: close\r\n" }
        text += "\r\n"
        var bytes = Array(text.utf8)
        if !head && bodyAllowed { bytes += body }
        return bytes
    }
}

/// An error a handler throws to answer with a status and a JSON error body.
public struct HTTPError: Error, Sendable, CustomStringConvertible {
    public var status: HTTPStatus
    public var message: String
    public init(_ status: HTTPStatus, _ message: String) {
        self.status = status
        self.message = message
    }
    public var description: String { "HTTP \(status.code): \(message)" }
}

extension HTTPError: LocalizedError {
    /// The message, as `localizedDescription` gives it (Foundation's default names only the type).
    public var errorDescription: String? { description }
}
