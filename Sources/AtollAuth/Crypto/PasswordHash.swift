import Foundation
import Synchronization

/// Password hashes: scrypt (RFC 7914) through OpenSSL's `EVP_PBE_scrypt`, stored as one string
/// that carries its parameters and salt, so that the cost can be raised later without losing
/// the hashes already stored:
///
///     scrypt$16384$8$1$<salt, base64url>$<32-byte hash, base64url>
enum PasswordHash {
    /// The cost of new hashes: N = 2^14, r = 8, p = 1 (16 MB and some 50 ms per hash), the
    /// interactive-login parameters of RFC 7914 §2.
    static let n: UInt64 = 16384
    static let r: UInt64 = 8
    static let p: UInt64 = 1
    static let saltLength = 16
    static let hashLength = 32

    /// A new hash of `password`, with a new random salt.
    /// - Throws: `AuthError(.internal)` when OpenSSL fails.
    static func make(_ password: String) throws -> String {
        let salt = try Crypto.randomBytes(saltLength)
        let hash = try Crypto.scrypt(password: password, salt: salt, n: n, r: r, p: p, length: hashLength)
        return "scrypt$\(n)$\(r)$\(p)$\(Base64URL.encode(salt))$\(Base64URL.encode(hash))"
    }

    /// Whether `password` matches a stored hash (compared in constant time). A stored string this
    /// code cannot read matches nothing.
    static func verify(_ password: String, against stored: String) -> Bool {
        let parts = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0] == "scrypt",
              let n = UInt64(parts[1]), let r = UInt64(parts[2]), let p = UInt64(parts[3]),
              // Bounds keep a damaged row from asking for unbounded memory or time.
              n > 1, n <= 1 << 17, n & (n - 1) == 0, (1...16).contains(r), (1...4).contains(p),
              let salt = Base64URL.decode(parts[4]), let expected = Base64URL.decode(parts[5]),
              (16...64).contains(expected.count),
              let actual = try? Crypto.scrypt(password: password, salt: salt, n: n, r: r, p: p, length: expected.count)
        else { return false }
        return Crypto.constantTimeEqual(actual, expected)
    }

    /// A hash of nothing anyone knows, checked against when a login names an unknown user, so
    /// that the answer takes as long as for a wrong password and does not tell which it was.
    static let decoy = "scrypt$\(n)$\(r)$\(p)$" + Base64URL.encode([UInt8](repeating: 0, count: saltLength))
        + "$" + Base64URL.encode([UInt8](repeating: 0, count: hashLength))
}

/// Where the routes that compute password hashes run: on threads of their own, never on Swift's
/// cooperative pool (one thread per core), which serves every other route. A burst of
/// email/password logins, some 50 ms of scrypt each, would otherwise hold every thread of the
/// pool and leave health checks, token refreshes and sync upgrades waiting. At most all cores but
/// one hash at once; the requests beyond wait their turn here.
enum PasswordWork {
    private static let queues: [DispatchQueue] = (0..<max(1, ProcessInfo.processInfo.activeProcessorCount - 1)).map {
        DispatchQueue(label: "atoll.auth.password-\($0)")
    }
    private static let next = Atomic<Int>(0)

    /// Runs `body` on one of the hashing threads and returns what it returned.
    static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        let index = next.add(1, ordering: .relaxed).oldValue
        let queue = queues[Int(UInt(bitPattern: index) % UInt(queues.count))]
        return await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }
}
