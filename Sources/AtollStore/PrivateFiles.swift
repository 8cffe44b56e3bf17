import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Files only their owner may read: the server's data and secrets, a client's users file (it
/// holds refresh tokens). Made with mode 0600 in directories of mode 0700, whatever the
/// process's umask, and tightened to those modes when they exist with more. SQLite makes a
/// database's `-wal` and `-shm` files with the database file's mode, so preparing the database
/// file before SQLite opens it covers them too.
public enum PrivateFiles {
    public static let fileMode: mode_t = 0o600
    public static let directoryMode: mode_t = 0o700

    /// Makes `path` and its missing parents (the ones it makes: mode 0700). With `tighten`, an
    /// existing `path` loses group and other permissions too: a directory that is the program's
    /// own (the server's data directory), not one it was merely given (a client's working
    /// directory).
    /// - Throws: `AtollError(.file)` when a directory cannot be made or changed.
    public static func directory(_ path: String, tighten: Bool) throws {
        let existed = access(path, F_OK) == 0
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: Int(directoryMode)])
        } catch {
            throw AtollError(.file, "cannot create the directory '\(path)': \(error.localizedDescription)")
        }
        if tighten || !existed { try restrict(path, to: directoryMode) }
    }

    /// Makes an empty `path` with mode 0600 when there is none (an empty file is an empty SQLite
    /// database), or takes group and other permissions off the one there, and off a database's
    /// `-wal`, `-shm` and `-journal` files next to it.
    /// - Throws: `AtollError(.file)` when the file cannot be made or changed.
    public static func file(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, fileMode)
        guard fd >= 0 else {
            throw AtollError(.file, "cannot create '\(path)': \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & 0o077 != 0, fchmod(fd, fileMode) != 0 {
            throw AtollError(.file, "cannot make '\(path)' private (mode 0600): \(String(cString: strerror(errno)))")
        }
        for suffix in ["-wal", "-shm", "-journal"] {
            if access(path + suffix, F_OK) == 0 { try restrict(path + suffix, to: fileMode) }
        }
    }

    /// Writes `bytes` to `path` (replacing what it held), made with mode 0600 or set to it
    /// before anything is written.
    /// - Throws: `AtollError(.file)` when it cannot be written whole.
    public static func write(_ bytes: [UInt8], to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, fileMode)
        guard fd >= 0 else { throw AtollError(.file, "cannot create '\(path)': \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fchmod(fd, fileMode) == 0 else {
            throw AtollError(.file, "cannot make '\(path)' private (mode 0600): \(String(cString: strerror(errno)))")
        }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress.map { $0 + offset }, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw AtollError(.file, "cannot write '\(path)': \(String(cString: strerror(errno)))") }
            offset += n
        }
        guard fsync(fd) == 0 else { throw AtollError(.file, "cannot write '\(path)': \(String(cString: strerror(errno)))") }
    }

    /// Takes the permissions that `mode` does not give off an existing `path`.
    private static func restrict(_ path: String, to mode: mode_t) throws {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw AtollError(.file, "cannot read the mode of '\(path)': \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & 0o777 & ~mode != 0 else { return }
        guard chmod(path, info.st_mode & 0o777 & mode) == 0 else {
            throw AtollError(.file, "cannot take others' permissions off '\(path)': \(String(cString: strerror(errno)))")
        }
    }
}
