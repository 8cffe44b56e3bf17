import AtollJSON
import AtollStore

/// A JSON Web Token in compact serialization (RFC 7519, RFC 7515):
/// `base64url(header).base64url(claims).base64url(signature)`, read but not yet trusted.
struct JWT {
    var header: Document
    var claims: Document
    /// The bytes the signature covers: the first two parts and the dot between them.
    var signingInput: [UInt8]
    var signature: [UInt8]

    /// The longest token read (a header field of a typical server holds 16 KB).
    static let maxLength = 16 * 1024

    /// Splits and decodes a token.
    /// - Throws: `AuthError(kind)` saying what is malformed.
    init(_ token: String, failing kind: AuthError.Kind) throws {
        guard token.utf8.count <= Self.maxLength else { throw AuthError(kind, "the token is longer than \(Self.maxLength) bytes") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw AuthError(kind, "malformed token: expected three base64url parts separated by dots") }
        guard let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]) else {
            throw AuthError(kind, "malformed token: a part is not base64url")
        }
        func object(_ bytes: [UInt8], _ what: String) throws -> Document {
            guard !bytes.contains(0), let text = String(validating: bytes, as: UTF8.self),
                  case .object(let doc)? = try? EJSON.parse(text) else {
                throw AuthError(kind, "malformed token: its \(what) is not a JSON object")
            }
            return doc
        }
        header = try object(headerBytes, "header")
        claims = try object(claimBytes, "claims")
        signingInput = Array(parts[0].utf8) + [0x2e] + Array(parts[1].utf8)
        self.signature = signature
    }

    /// The header's `alg`.
    var algorithm: String? { header["alg"]?.stringValue }

    /// A claim by path, dots between levels (`"name.first"`); a claim whose own name has a dot is
    /// found first.
    func claim(_ path: String) -> Value? {
        if let direct = claims[path] { return direct }
        var current: Value = .object(claims)
        for part in path.split(separator: ".", omittingEmptySubsequences: false) {
            guard let next = current.documentValue?[String(part)] else { return nil }
            current = next
        }
        return current
    }

    /// The latest NumericDate taken, the end of the year 9999: a larger one (`1e300`, or `1e400`,
    /// which a parser may read as infinity) is no date but a token that would never expire.
    static let latestSeconds = 253_402_300_799.0

    /// A NumericDate claim (seconds since 1970); nil when it is missing.
    /// - Throws: `AuthError(kind)` when it is there but not a finite number of seconds from 1970
    ///   to the end of the year 9999.
    func seconds(_ name: String, failing kind: AuthError.Kind, _ what: String) throws -> Double? {
        guard let value = claims[name], !value.isNull else { return nil }
        guard let seconds = value.doubleValue, seconds.isFinite, (0...Self.latestSeconds).contains(seconds) else {
            throw AuthError(kind, "\(what): its \(name) is not a date (seconds since 1970, up to the year 9999)")
        }
        return seconds
    }

    /// A new HS256 token of `claims`.
    static func signHS256(_ claims: Document, key: [UInt8]) -> String {
        let header = Base64URL.encode(EJSON.serialize(.object(["alg": .string("HS256"), "typ": .string("JWT")])))
        let input = header + "." + Base64URL.encode(EJSON.serialize(.object(claims)))
        return input + "." + Base64URL.encode(Crypto.hmacSHA256(key: key, Array(input.utf8)))
    }
}

/// The keys a token's signature is checked against, by algorithm.
enum JWTVerifier: Sendable {
    case hs256([[UInt8]])
    case rs256([RSAPublicKey])

    var algorithm: String {
        switch self {
        case .hs256: return "HS256"
        case .rs256: return "RS256"
        }
    }

    /// Whether the token says this algorithm (never `none`, never another: RFC 8725 §3.1) and
    /// one of the keys made its signature.
    func verifies(_ jwt: JWT) -> Bool {
        guard jwt.algorithm == algorithm else { return false }
        switch self {
        case .hs256(let keys):
            return keys.contains { Crypto.constantTimeEqual(Crypto.hmacSHA256(key: $0, jwt.signingInput), jwt.signature) }
        case .rs256(let keys):
            return keys.contains { $0.verifiesRS256(jwt.signature, of: jwt.signingInput) }
        }
    }
}
