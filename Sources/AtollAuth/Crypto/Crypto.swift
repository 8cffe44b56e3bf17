import COpenSSL
import Foundation

/// The cryptography the app API needs, every primitive through OpenSSL: random bytes, SHA-256,
/// HMAC-SHA256, scrypt, constant-time comparison and RSA signature checks. Only the base64url
/// text encoding (RFC 4648 §5) is ours, on top of Foundation's base64.
enum Crypto {
    /// `count` bytes from OpenSSL's CSPRNG.
    /// - Throws: `AuthError(.internal)` when OpenSSL cannot give them (it never should).
    static func randomBytes(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else {
            throw AuthError(.internal, "RAND_bytes failed: \(openSSLError())")
        }
        return bytes
    }

    /// SHA-256 of `data`.
    static func sha256(_ data: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        // EVP_Digest fails only when out of memory; an empty digest then matches nothing stored.
        guard EVP_Digest(data, data.count, &digest, &length, EVP_sha256(), nil) == 1 else { return [] }
        return Array(digest.prefix(Int(length)))
    }

    /// SHA-256 of a string's UTF-8, as lowercase hex: how tokens and keys are stored.
    static func sha256Hex(_ text: String) -> String { hex(sha256(Array(text.utf8))) }

    /// HMAC-SHA256 of `data` with `key` (EVP_Q_mac).
    static func hmacSHA256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        let done = key.withUnsafeBytes { k in
            data.withUnsafeBufferPointer { d in
                EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, k.baseAddress, k.count, d.baseAddress, d.count,
                          &out, out.count, &length)
            }
        }
        // A MAC that could not be made verifies nothing: the empty result never compares equal.
        return done == nil ? [] : Array(out.prefix(length))
    }

    /// Whether two byte strings are equal, in time that depends only on their length.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count, !a.isEmpty else { return false }
        return CRYPTO_memcmp(a, b, a.count) == 0
    }

    /// scrypt (RFC 7914) of a password.
    /// - Throws: `AuthError(.internal)` when OpenSSL refuses the parameters.
    static func scrypt(password: String, salt: [UInt8], n: UInt64, r: UInt64, p: UInt64, length: Int) throws -> [UInt8] {
        var key = [UInt8](repeating: 0, count: length)
        let password = Array(password.utf8)
        // maxmem 0 would cap memory at OpenSSL's 32 MB default; allow what the parameters need.
        let memory = 128 * n * r * (p + 1) + (1 << 20)
        let done = password.withUnsafeBufferPointer { pass in
            pass.withMemoryRebound(to: CChar.self) { chars in
                EVP_PBE_scrypt(chars.baseAddress, chars.count, salt, salt.count, n, r, p, memory, &key, length)
            }
        }
        guard done == 1 else { throw AuthError(.internal, "EVP_PBE_scrypt failed: \(openSSLError())") }
        return key
    }

    /// The reason of OpenSSL's latest error on this thread (and clears its queue).
    static func openSSLError() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "unknown OpenSSL error" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

// MARK: - base64url

/// base64url without padding (RFC 7515 §2, RFC 4648 §5): the encoding of every JWT part.
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    static func encode(_ text: String) -> String { encode(Array(text.utf8)) }

    /// The bytes of base64url text, or nil when it has a character outside the alphabet
    /// (padding included: RFC 7515 leaves it out) or an impossible length.
    static func decode(_ text: Substring) -> [UInt8]? {
        guard text.utf8.allSatisfy({ isAlphabet($0) }), text.utf8.count % 4 != 1 else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard).map(Array.init)
    }

    private static func isAlphabet(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x5f
    }
}
