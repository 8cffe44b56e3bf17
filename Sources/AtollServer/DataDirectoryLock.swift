import AtollStore
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One server per data directory: an exclusive `flock` on `atoll-server.lock` in it, taken before
/// anything in the directory is opened and held until the server shuts down (or its process
/// ends: the kernel drops the lock with the descriptor, so a crash leaves nothing to clean up).
/// Two servers writing one directory's SQLite files and keys would each integrate uploads under
/// versions the other also hands out.
final class DataDirectoryLock: @unchecked Sendable {
    static let fileName = "atoll-server.lock"

    private let fd: Mutex<Int32>
    let path: String

    /// Takes the lock, making the directory (mode 0700) when it is missing.
    /// - Throws: `AtollError(.busy)` when another process (or another server in this one) holds
    ///   it, `AtollError(.file)` when the directory or the lock file cannot be made.
    init(directory: String) throws {
        // The server's own directory: mode 0700, whoever made it (docs/server.md, "Files on disk").
        try PrivateFiles.directory(directory, tighten: true)
        path = directory + "/" + Self.fileName
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw AtollError(.file, "cannot open the lock file '\(path)': \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = String(cString: strerror(errno))
            close(fd)
            if busy {
                throw AtollError(.busy, "another atoll-server is using the data directory '\(directory)' (it holds '\(path)'); stop it or give this one another --data")
            }
            throw AtollError(.file, "cannot lock '\(path)': \(reason)")
        }
        // The holder's pid, for whoever looks (the lock, not the file, is what counts).
        let pid = Array("\(getpid())\n".utf8)
        if ftruncate(fd, 0) == 0 { _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } }
        self.fd = Mutex(fd)
    }

    /// Lets the directory go (a later server, in this process or another, may take it).
    func release() {
        fd.withLock { fd in
            guard fd >= 0 else { return }
            close(fd)
            fd = -1
        }
    }

    deinit { release() }
}
