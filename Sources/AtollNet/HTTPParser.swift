import CHTTPParser
import Foundation

/// One parsed HTTP message head and body (request or response).
struct ParsedMessage {
    var method = ""
    var target = ""
    var status = 0
    var versionMajor = 1
    var versionMinor = 1
    var headers = HTTPHeaders()
    var body: [UInt8] = []
    var keepAlive = true
    var upgrade = false
}

/// What feeding bytes to the parser gave.
enum ParseResult {
    /// Every byte was consumed and the message is not complete yet.
    case needMore
    /// A message is complete; `consumed` bytes of this feed belong to it (the rest is the next
    /// message, or for an upgrade, the new protocol's first bytes).
    case message(ParsedMessage, consumed: Int)
    /// The bytes are not acceptable; answer with this status (400, 413, 414, 431, 505).
    case failure(HTTPStatus, String)
}

/// Node's http-parser (libhttp-parser) wrapped for one connection: limits on the head and
/// the body, chunked bodies decoded, one message at a time (the parser pauses after each).
final class HTTPMessageParser {
    private var parser = http_parser()
    private var current = ParsedMessage()
    private var fieldName: [UInt8] = []
    private var fieldValue: [UInt8] = []
    private var inValue = false
    private var targetBytes: [UInt8] = []
    private var headBytes = 0
    private var limitHit: (HTTPStatus, String)?
    private var completed: ParsedMessage?
    private let maxHeaderBytes: Int
    private let maxBodyBytes: Int
    /// For responses: the request was HEAD (no body follows).
    var expectsNoBody = false

    init(request: Bool, maxHeaderBytes: Int, maxBodyBytes: Int) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
        self.isRequest = request
        http_parser_init(&parser, request ? HTTP_REQUEST : HTTP_RESPONSE)
    }

    /// Whether a message has started (bytes of it arrived) and not finished.
    private(set) var inMessage = false
    /// Whether the current message's head has been read (its body may still be arriving).
    private(set) var headComplete = false
    /// Set when a request's head asked `Expect: 100-continue` and its body is still to come;
    /// the server answers 100 and clears it.
    var wantsContinue = false

    nonisolated(unsafe) private static var settings: http_parser_settings = {
        var settings = http_parser_settings()
        http_parser_settings_init(&settings)
        settings.on_message_begin = { parser in
            guard let me = HTTPMessageParser.owner(parser) else { return 1 }
            me.inMessage = true
            return 0
        }
        settings.on_url = { parser, at, length in
            guard let me = HTTPMessageParser.owner(parser), let at else { return 1 }
            me.targetBytes.append(contentsOf: UnsafeRawBufferPointer(start: at, count: length))
            if me.targetBytes.count > me.maxHeaderBytes {
                me.limitHit = (.uriTooLong, "request target longer than \(me.maxHeaderBytes) bytes")
                return 1
            }
            return 0
        }
        settings.on_status = { _, _, _ in 0 }
        settings.on_header_field = { parser, at, length in
            guard let me = HTTPMessageParser.owner(parser), let at else { return 1 }
            if me.inValue { me.finishField() }
            me.fieldName.append(contentsOf: UnsafeRawBufferPointer(start: at, count: length))
            return me.countHead(length)
        }
        settings.on_header_value = { parser, at, length in
            guard let me = HTTPMessageParser.owner(parser), let at else { return 1 }
            me.inValue = true
            me.fieldValue.append(contentsOf: UnsafeRawBufferPointer(start: at, count: length))
            return me.countHead(length)
        }
        settings.on_headers_complete = { parser in
            guard let me = HTTPMessageParser.owner(parser), let parser else { return -1 }
            if me.inValue || !me.fieldName.isEmpty { me.finishField() }
            me.headComplete = true
            let p = parser.pointee
            me.current.versionMajor = Int(p.http_major)
            me.current.versionMinor = Int(p.http_minor)
            if p.type == HTTP_REQUEST.rawValue {
                me.current.method = String(cString: http_method_str(http_method(rawValue: p.method)))
                me.current.target = String(decoding: me.targetBytes, as: UTF8.self)
            } else {
                me.current.status = Int(p.status_code)
            }
            if p.http_major != 1 {
                me.limitHit = (.httpVersionNotSupported, "HTTP/\(p.http_major).\(p.http_minor) is not supported")
                return -1
            }
            if p.type == HTTP_REQUEST.rawValue {
                let hosts = me.current.headers.values("Host").count
                if p.http_minor >= 1 && hosts == 0 {
                    me.limitHit = (.badRequest, "HTTP/1.1 request without a Host header")
                    return -1
                }
                if hosts > 1 {
                    me.limitHit = (.badRequest, "more than one Host header")
                    return -1
                }
            }
            // Content-Length known in advance: refuse before reading a byte of the body.
            if p.flags & UInt32(F_CHUNKED.rawValue) == 0, p.content_length != UInt64.max,
               p.content_length > UInt64(me.maxBodyBytes) {
                me.limitHit = (.payloadTooLarge, "body of \(p.content_length) bytes is over the limit of \(me.maxBodyBytes)")
                return -1
            }
            if p.type == HTTP_REQUEST.rawValue, me.current.headers["Expect"]?.lowercased() == "100-continue",
               p.flags & UInt32(F_CHUNKED.rawValue) != 0 || (p.content_length != UInt64.max && p.content_length > 0) {
                me.wantsContinue = true
            }
            return me.expectsNoBody ? 1 : 0
        }
        settings.on_body = { parser, at, length in
            guard let me = HTTPMessageParser.owner(parser), let at else { return 1 }
            if me.current.body.count + length > me.maxBodyBytes {
                me.limitHit = (.payloadTooLarge, "body is over the limit of \(me.maxBodyBytes) bytes")
                return 1
            }
            me.current.body.append(contentsOf: UnsafeRawBufferPointer(start: at, count: length))
            return 0
        }
        settings.on_message_complete = { parser in
            guard let me = HTTPMessageParser.owner(parser), let parser else { return 1 }
            me.current.keepAlive = http_should_keep_alive(parser) != 0
            me.current.upgrade = parser.pointee.upgrade == 1
            me.completed = me.current
            me.current = ParsedMessage()
            me.targetBytes = []
            me.headBytes = 0
            me.inMessage = false
            me.headComplete = false
            me.wantsContinue = false
            me.lineChecked = false
            me.lineBytes = []
            // Trailer fields of a chunked body come through the header callbacks: drop them.
            me.fieldName.removeAll(keepingCapacity: true)
            me.fieldValue.removeAll(keepingCapacity: true)
            me.inValue = false
            http_parser_pause(parser, 1)
            return 0
        }
        return settings
    }()

    private static func owner(_ parser: UnsafeMutablePointer<http_parser>?) -> HTTPMessageParser? {
        guard let data = parser?.pointee.data else { return nil }
        return Unmanaged<HTTPMessageParser>.fromOpaque(data).takeUnretainedValue()
    }

    private func countHead(_ length: Int) -> Int32 {
        headBytes += length
        if headBytes > maxHeaderBytes {
            limitHit = (.headerFieldsTooLarge, "header fields longer than \(maxHeaderBytes) bytes")
            return 1
        }
        return 0
    }

    private func finishField() {
        current.headers.add(String(decoding: fieldName, as: UTF8.self),
                            String(decoding: fieldValue, as: UTF8.self).trimmingCharacters(in: .whitespaces))
        fieldName.removeAll(keepingCapacity: true)
        fieldValue.removeAll(keepingCapacity: true)
        inValue = false
    }

    // The request line, checked on its own: Debian builds http-parser without its strict mode,
    // which lets a line like "GET / HTTX/1.1" through.
    private var lineBytes: [UInt8] = []
    private var lineChecked = false
    private let isRequest: Bool

    /// Checks the request line (RFC 9112 §3: method SP target SP "HTTP/" digit "." digit) once it
    /// is complete; nil while it is fine or still incomplete.
    private func checkRequestLine(_ bytes: UnsafeRawBufferPointer) -> ParseResult? {
        var index = 0
        while !lineChecked && index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == 10 {
                if lineBytes.last == 13 { lineBytes.removeLast() }
                // Empty lines before a request are allowed and ignored (RFC 9112 §2.2).
                if lineBytes.isEmpty { continue }
                lineChecked = true
                if !Self.validRequestLine(lineBytes) {
                    return .failure(.badRequest, "malformed request line")
                }
                lineBytes = []
            } else {
                lineBytes.append(byte)
                // Long lines are the parser's to refuse (414).
                if lineBytes.count > maxHeaderBytes { lineChecked = true; lineBytes = [] }
            }
        }
        return nil
    }

    private static func validRequestLine(_ line: [UInt8]) -> Bool {
        let parts = line.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else { return false }
        let tokenCharacters = Set("!#$%&'*+-.^_`|~".utf8)
        guard parts[0].allSatisfy({ tokenCharacters.contains($0) || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }) else {
            return false
        }
        let version = Array(parts[2])
        return version.count == 8 && version.starts(with: Array("HTTP/".utf8))
            && (48...57).contains(version[5]) && version[6] == 46 && (48...57).contains(version[7])
    }

    /// Feeds bytes (an empty buffer means the peer closed: ends a read-until-close body).
    func feed(_ bytes: UnsafeRawBufferPointer) -> ParseResult {
        if isRequest && !lineChecked, let failure = checkRequestLine(bytes) { return failure }
        if HTTP_PARSER_ERRNO_VALUE(parser) == HPE_PAUSED.rawValue { http_parser_pause(&parser, 0) }
        let consumed = withUnsafeMutablePointer(to: &parser) { pointer -> Int in
            pointer.pointee.data = Unmanaged.passUnretained(self).toOpaque()
            defer { pointer.pointee.data = nil }
            return http_parser_execute(pointer, &Self.settings,
                                       bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
        }
        if let message = completed {
            completed = nil
            return .message(message, consumed: consumed)
        }
        if let (status, message) = limitHit {
            return .failure(status, message)
        }
        let errnoValue = HTTP_PARSER_ERRNO_VALUE(parser)
        if errnoValue != HPE_OK.rawValue && errnoValue != HPE_PAUSED.rawValue {
            let name = http_errno(rawValue: errnoValue)
            if name == HPE_HEADER_OVERFLOW {
                return .failure(.headerFieldsTooLarge, "header fields too large")
            }
            return .failure(.badRequest, String(cString: http_errno_description(name)))
        }
        return .needMore
    }
}

private func HTTP_PARSER_ERRNO_VALUE(_ parser: http_parser) -> UInt32 { UInt32(parser.http_errno) }
