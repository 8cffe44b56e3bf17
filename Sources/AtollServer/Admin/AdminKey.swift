import AtollStore
import COpenSSL
import Foundation

/// The admin console's key: from the config (`"admin": {"key": "..."}`) or, without one, the
/// data directory's `admin.key`, made on first start from 32 random bytes (64 hex digits, mode
/// 0600). There is always a key: the console is never open without one, whatever the host.
public struct AdminKey: Sendable {
    /// Where the key came from.
    public enum Source: Sendable, Equatable {
        case config
        /// The file in the data directory; `created` when this start made it.
        case file(path: String, created: Bool)
    }

    public let key: String
    public let source: Source
    private let digest: [UInt8]

    public static let fileName = "admin.key"

    init(key: String, source: Source) {
        self.key = key
        self.source = source
        digest = Self.sha256(key)
    }

    /// The config's key, or the data directory's (made when missing).
    /// - Throws: `AtollError(.file)` when the file cannot be read or made, or does not hold a key.
    static func load(configured: String?, dataDirectory: String) throws -> AdminKey {
        if let configured { return AdminKey(key: configured, source: .config) }
        try PrivateFiles.directory(dataDirectory, tighten: true)
        let path = dataDirectory + "/" + fileName
        if let data = FileManager.default.contents(atPath: path) {
            let key = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard key.utf8.count >= 16, !key.contains(where: \.isWhitespace) else {
                throw AtollError(.file, "'\(path)' does not hold an admin key (at least 16 characters); delete it to make a new one")
            }
            return AdminKey(key: key, source: .file(path: path, created: false))
        }
        var bytes = [UInt8](repeating: 0, count: 32)
        guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else { throw AtollError(.file, "OpenSSL could not make random bytes for the admin key") }
        let key = bytes.map { String(format: "%02x", $0) }.joined()
        // O_EXCL: two servers starting at once on one directory cannot make two keys.
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw AtollError(.file, "cannot create '\(path)': \(String(cString: strerror(errno)))") }
        let line = Array((key + "\n").utf8)
        let written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == line.count else { throw AtollError(.file, "cannot write '\(path)'") }
        return AdminKey(key: key, source: .file(path: path, created: true))
    }

    /// Whether `candidate` is the key. Both are hashed first and the digests compared with
    /// `CRYPTO_memcmp`, so the time taken tells neither the key's bytes nor its length.
    func matches(_ candidate: String) -> Bool {
        let other = Self.sha256(candidate)
        return digest.withUnsafeBytes { a in other.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, 32) == 0 } }
    }

    private static func sha256(_ text: String) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBufferPointer { SHA256($0.baseAddress, $0.count, &out) }
        return out
    }
}
