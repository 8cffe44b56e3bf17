import CSQLite
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// A realm's files: copies, compaction (explicit and at open), whether the file exists, and
// deleting it with its companions. Deleting and compacting at open need to know whether the
// file is open anywhere: in this process the registry `OpenFiles` says (Store.init adds to it,
// Store.close removes), in other processes SQLite's dead-man switch lock does (`DeadManSwitch`).

// MARK: - Copies and compaction

extension Store {
    /// Writes a copy of the realm's committed data to a new file (Realm's `writeCopy(toFile:)`).
    ///
    /// ```swift
    /// try store.writeCopy(to: "backup.realm")                    // compacted
    /// try store.writeCopy(to: "snapshot.realm", compact: false)  // page for page
    /// ```
    ///
    /// An in-memory store can be copied to a file this way. Other handles may read and write
    /// the realm meanwhile; the copy is the data as of one moment. A copy that fails leaves no
    /// file behind.
    /// - Parameter compact: true writes the data in as few pages as possible (SQLite's
    ///   `VACUUM INTO`); false copies every page as it is, free pages included (SQLite's online
    ///   backup).
    /// - Throws: `.alreadyInWrite` inside a write transaction (commit or cancel it first),
    ///   `.file` when `path` exists already (or a `-wal`, `-shm` or `-journal` file beside it
    ///   does) or cannot be written, `.invalidArgument` for an empty path or one with a NUL,
    ///   `.closed`.
    public func writeCopy(to path: String, compact: Bool = true) throws {
        // The copy is of the newest data (VACUUM INTO runs outside the handle's snapshot).
        try lockedOutsideSnapshot { conn in
            guard write == nil else {
                throw AtollError(.alreadyInWrite, "writeCopy: the realm is in a write transaction; commit or cancel it first")
            }
            try Self.reserveNewFile(path)
            do {
                if compact {
                    // VACUUM INTO accepts the empty file just reserved. No statement may be active.
                    conn.clearCache()
                    let vacuum = try conn.prepare("VACUUM INTO ?")
                    vacuum.bind(1, Self.sqliteFilename(path))
                    try vacuum.run()
                } else {
                    try backup(conn, to: path)
                }
            } catch let error as AtollError {
                _ = try? Self.removeFiles(path)
                throw error.prefixed("writeCopy to '\(path)'")
            }
        }
    }

    /// Writes a compacted copy of the realm to `configuration.path`, then checks that the copy
    /// opens with `configuration` (its schema and schema version, as `Store.init` checks them;
    /// additions to the schema are made in the copy). When it does not, the copy is removed.
    /// `shouldCompactOnLaunch` is not asked for the check.
    /// - Throws: `.invalidArgument` for an in-memory configuration or one without a path; the
    ///   errors of `writeCopy(to:compact:)`; those of `Store.init` (`.schemaMismatch`,
    ///   `.schema`...) when the copy does not open with the configuration.
    public func writeCopy(to configuration: Configuration) throws {
        guard !configuration.inMemory else {
            throw AtollError(.invalidArgument, "writeCopy: the configuration is in-memory; a copy needs a file \"path\"")
        }
        let path = try Self.filePath(configuration, "writeCopy")
        try writeCopy(to: path, compact: true)
        var check = configuration
        check.shouldCompactOnLaunch = nil
        do {
            try Store(check).close()
        } catch {
            _ = try? Self.removeFiles(path)
            let reason = (error as? AtollError) ?? AtollError(.internal, "\(error)")
            throw reason.prefixed("writeCopy: the copy at '\(path)' does not open with the configuration, so it was removed")
        }
    }

    /// Compacts the file: rewrites the data in as few pages as possible (SQLite's `VACUUM`) and
    /// gives the free pages back to the file system. Other handles and processes may keep the
    /// realm open; like `beginWrite`, this waits for another writer (up to the configured
    /// write timeout).
    /// - Throws: `.alreadyInWrite` inside a write transaction, `.readOnly`, `.busy` when another
    ///   connection kept the write lock past the write timeout, `.file`, `.closed`.
    public func compact() throws {
        try lockedOutsideSnapshot { conn in
            guard write == nil else {
                throw AtollError(.alreadyInWrite, "compact: the realm is in a write transaction; commit or cancel it first")
            }
            guard !configuration.readOnly else { throw AtollError(.readOnly, "compact: the realm was opened read-only") }
            try vacuum(conn)
        }
    }

    /// VACUUM, then a checkpoint that moves the rewritten pages from the WAL into the database
    /// file and truncates both. Reading connections can delay the truncation to a later
    /// checkpoint; that is not an error (the data is compacted either way).
    private func vacuum(_ conn: Connection) throws {
        conn.clearCache()
        do {
            try conn.execute("VACUUM")
        } catch let error as AtollError where error.code == .busy {
            throw AtollError(.busy, "cannot compact '\(configuration.path ?? "")': another connection holds the write lock (\(error.message))")
        }
        writeCount += 1
        rowCountStamp = -1
        guard !configuration.inMemory else { return }
        // Without waiting: a reader's snapshot (another handle's, kept until it refreshes)
        // would hold the checkpoint back for as long as it lives.
        sqlite3_busy_handler(conn.db, nil, nil)
        defer { installBusyHandler(conn) }
        do {
            try conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        } catch let error as AtollError where error.code == .busy {
            return
        }
    }

    /// Copies every page of the database to the (empty) file at `path` with SQLite's online
    /// backup.
    private func backup(_ conn: Connection, to path: String) throws {
        var handle: OpaquePointer?
        var rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        defer { sqlite3_close_v2(handle) }
        guard rc == SQLITE_OK, let destination = handle else {
            throw AtollError(.file, "cannot open the copy: \(handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory")")
        }
        guard let backup = sqlite3_backup_init(destination, "main", conn.db, "main") else {
            throw AtollError(.file, "cannot start the copy: \(String(cString: sqlite3_errmsg(destination)))")
        }
        rc = sqlite3_backup_step(backup, -1)
        let finished = sqlite3_backup_finish(backup)
        guard rc == SQLITE_DONE, finished == SQLITE_OK else {
            let message = String(cString: sqlite3_errmsg(destination))
            let code: AtollError.Code = (rc & 0xFF) == SQLITE_BUSY || (rc & 0xFF) == SQLITE_LOCKED ? .busy : .file
            throw AtollError(code, "the copy failed: \(message) (SQLite \(rc))")
        }
    }

    /// The file's size and the part of it that holds data, from the database's own counts:
    /// (page_count × page_size, (page_count − freelist_count) × page_size).
    func fileUsage(_ conn: Connection) throws -> (total: UInt64, used: UInt64) {
        func pragma(_ name: String) throws -> UInt64 {
            let s = try conn.statement("PRAGMA \(name)")
            defer { s.reset() }
            _ = try s.step()
            return UInt64(max(0, s.int64(0)))
        }
        let pageSize = try pragma("page_size")
        let pages = try pragma("page_count")
        let free = min(pages, try pragma("freelist_count"))
        return (pages * pageSize, (pages - free) * pageSize)
    }

    /// At open: asks `shouldCompactOnLaunch` and compacts when it says so and no other
    /// connection had the file open (`alone`, see `registerFile`). A writer that got in since
    /// makes SQLite's VACUUM wait for it; a `.busy` there skips the compaction.
    func compactOnLaunch(_ conn: Connection, alone: Bool) throws {
        guard let shouldCompact = configuration.shouldCompactOnLaunch, !configuration.readOnly,
              !configuration.inMemory else { return }
        let usage = try fileUsage(conn)
        guard shouldCompact(usage.total, usage.used), alone else { return }
        do {
            try vacuum(conn)
        } catch let error as AtollError where error.code == .busy {
            return
        }
    }
}

// MARK: - Files of a configuration

extension Store {
    /// Whether the database file of a configuration exists (Realm's `fileExists(for:)`).
    /// An in-memory configuration has no file: false.
    /// - Throws: `.invalidArgument` when the configuration has no path.
    public static func fileExists(_ configuration: Configuration) throws -> Bool {
        guard !configuration.inMemory else { return false }
        return exists(try filePath(configuration, "fileExists"))
    }

    /// Deletes the database file of a configuration with its `-wal`, `-shm` and `-journal`
    /// files (Realm's `deleteFiles(for:)`). Files that do not exist are not an error.
    ///
    /// Refused while the realm is open anywhere: by a store of this process, or by a connection
    /// of another process (SQLite holds a lock in the `-shm` file while a connection is open;
    /// this call holds that lock itself until the files are deleted). See docs/files.md for
    /// what cannot be seen.
    /// - Returns: whether any file was deleted (false for an in-memory configuration).
    /// - Throws: `.busy` while the realm is open (the message says whether in this process or
    ///   which process), `.file` when a file exists but cannot be deleted, `.invalidArgument`
    ///   when the configuration has no path.
    @discardableResult
    public static func deleteFiles(_ configuration: Configuration) throws -> Bool {
        guard !configuration.inMemory else { return false }
        let path = try filePath(configuration, "deleteFiles")
        let key = canonicalPath(path)
        return try OpenFiles.shared.whileClosed(key, path) {
            let lock = try DeadManSwitch.hold(database: key, shownAs: path)
            defer { if let fd = lock { closeDescriptor(fd) } }
            var deleted = try removeFiles(key)
            // A symbolic link at the configured path led to the file: remove the link too.
            if key != path, isSymbolicLink(path) { deleted = try removeFile(path) || deleted }
            return deleted
        }
    }

    /// The path of a file-backed configuration.
    static func filePath(_ configuration: Configuration, _ call: String) throws -> String {
        guard let path = configuration.path, !path.isEmpty else {
            throw AtollError(.invalidArgument, "\(call): the configuration needs a \"path\"")
        }
        guard !path.contains("\0") else { throw AtollError(.invalidArgument, "\(call): the path contains a NUL character") }
        return path
    }

    /// The name to give SQLite for a path: a plain path, never a URI, so that a leading "file:"
    /// in a user's path is not parsed.
    static func sqliteFilename(_ path: String) -> String {
        path.hasPrefix("file:") ? "./" + path : path
    }

    /// The suffixes of the files SQLite keeps beside a database.
    static let companionSuffixes = ["-wal", "-shm", "-journal"]

    /// Creates `path` as an empty file, failing when it or a companion file exists: a stale
    /// `-wal` beside a new database would be replayed into it.
    static func reserveNewFile(_ path: String) throws {
        guard !path.isEmpty else { throw AtollError(.invalidArgument, "the path is empty") }
        guard !path.contains("\0") else { throw AtollError(.invalidArgument, "the path contains a NUL character") }
        for name in [path] + companionSuffixes.map({ path + $0 }) where exists(name) {
            throw AtollError(.file, "'\(name)' exists already; choose a new path or delete the old files first")
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw AtollError(.file, "cannot create '\(path)': \(String(cString: strerror(errno)))") }
        closeDescriptor(fd)
    }

    /// Deletes a database file and its companions; returns whether any existed.
    /// - Throws: `.file` for a file that exists but cannot be deleted (the ones before it are
    ///   gone: the database file goes first, so that its data is never left without its WAL).
    static func removeFiles(_ path: String) throws -> Bool {
        var deleted = false
        for name in [path] + companionSuffixes.map({ path + $0 }) {
            deleted = try removeFile(name) || deleted
        }
        return deleted
    }

    private static func removeFile(_ name: String) throws -> Bool {
        if unlink(name) == 0 { return true }
        if errno == ENOENT { return false }
        throw AtollError(.file, "cannot delete '\(name)': \(String(cString: strerror(errno)))")
    }

    /// Whether something (a file, a directory, a link, even a dangling one) is at `path`.
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    private static func isSymbolicLink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK
    }

    /// The absolute path of a database file with its directories' symbolic links resolved (and
    /// the file's own, when it exists): the key of the registry of open files. SQLite resolves
    /// links the same way, so its `-shm` file sits beside this path.
    static func canonicalPath(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        if let resolved = realpath(absolute, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        guard let slash = absolute.lastIndex(of: "/") else { return absolute }
        let directory = String(absolute[..<slash])
        let name = String(absolute[absolute.index(after: slash)...])
        guard let resolved = realpath(directory.isEmpty ? "/" : directory, nil) else { return absolute }
        defer { free(resolved) }
        let base = String(cString: resolved)
        return (base == "/" ? "" : base) + "/" + name
    }

    /// Adds this store's file to the registry of open files. Returns whether the store is alone
    /// on the file: no other store of this process has it open and, when the configuration asks
    /// `shouldCompactOnLaunch` (the only user of the answer), no other process does either.
    func registerFile() -> Bool {
        guard !configuration.inMemory, let path = configuration.path else { return false }
        let key = Self.canonicalPath(path)
        fileKey = key
        let probe = configuration.shouldCompactOnLaunch != nil && !configuration.readOnly
        return OpenFiles.shared.add(key, probeOtherProcesses: probe)
    }

    /// Removes this store's file from the registry (after its connection closed); idempotent.
    func releaseFile() {
        guard let key = fileKey else { return }
        fileKey = nil
        OpenFiles.shared.remove(key)
    }
}

/// `close(2)`, which inside `Store` would mean `Store.close()`.
private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}

// MARK: - The registry of open files

/// The database files this process has open, by canonical path, with how many stores have each.
///
/// POSIX locks belong to the process, and closing any descriptor of a file drops all of them:
/// probing the `-shm` file of a realm this process has open would silently release SQLite's
/// own locks. So the registry is asked first, and the `-shm` file is only opened for files no
/// store of this process has open — under the registry's lock, so that none opens meanwhile.
final class OpenFiles: @unchecked Sendable {
    static let shared = OpenFiles()
    private let lock = NSLock()
    private var counts: [String: Int] = [:]

    /// Counts one more store on `key`. Returns true when none was open on it before and, if
    /// `probeOtherProcesses`, no other process holds its dead-man switch.
    func add(_ key: String, probeOtherProcesses: Bool) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let before = counts[key, default: 0]
        counts[key] = before + 1
        guard before == 0 else { return false }
        return probeOtherProcesses && !DeadManSwitch.isHeld(database: key)
    }

    func remove(_ key: String) {
        lock.lock()
        defer { lock.unlock() }
        guard let n = counts[key] else { return }
        counts[key] = n > 1 ? n - 1 : nil
    }

    /// Runs `body` while no store of this process has `key` open, holding the registry's lock
    /// so that none opens it meanwhile.
    /// - Throws: `.busy` when a store of this process has it open.
    func whileClosed<T>(_ key: String, _ shownAs: String, _ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        if let n = counts[key], n > 0 {
            throw AtollError(.busy, "cannot delete the files of '\(shownAs)': the realm is open in this process "
                + "(\(n) handle\(n == 1 ? "" : "s")); close \(n == 1 ? "it" : "them") first")
        }
        return try body()
    }
}

// MARK: - SQLite's dead-man switch

/// In WAL mode, every SQLite connection that has read a database holds a shared POSIX lock on
/// one byte of its `-shm` file until it closes: the "dead-man switch" of os_unix.c, at
/// UNIX_SHM_DMS = UNIX_SHM_BASE + SQLITE_SHM_NLOCK = (22 + 8) * 4 + 8 = 128. A connection
/// opening the file takes it shared (exclusively first, to learn whether it is the first one);
/// the last to close deletes the `-wal` and `-shm` files (a read-only connection leaves them).
///
/// The probes use open-file-description locks (F_OFD_*, Linux), which conflict with the
/// process-owned locks SQLite takes; F_OFD_GETLK reports the pid of a process-owned lock.
/// Never use these on a file this process has open (see `OpenFiles`).
enum DeadManSwitch {
    static let offset: off_t = 128
    #if os(Linux)
    private static let getLock: Int32 = 36  // F_OFD_GETLK, not imported into Swift
    private static let setLock: Int32 = 37  // F_OFD_SETLK
    #else
    private static let getLock = F_GETLK
    private static let setLock = F_SETLK
    #endif

    private static func request(_ type: Int32) -> flock {
        var f = flock()
        f.l_type = Int16(type)
        f.l_whence = Int16(SEEK_SET)
        f.l_start = offset
        f.l_len = 1
        return f
    }

    /// Whether another connection holds the switch (false when there is no `-shm` file, or it
    /// cannot be read: then nobody in WAL mode has the database open, or we cannot tell).
    static func isHeld(database: String) -> Bool {
        let fd = open(database + "-shm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var f = request(F_WRLCK)
        guard fcntl(fd, getLock, &f) == 0 else { return true }
        return Int32(f.l_type) != F_UNLCK
    }

    /// Takes the switch exclusively, so that no connection can take it (SQLite waits as for a
    /// busy lock) until the returned descriptor is closed.
    /// - Returns: the descriptor to close, or nil when there is no `-shm` file (no connection
    ///   in WAL mode has the database open).
    /// - Throws: `.busy` naming the process that has the database open; `.file` when the
    ///   `-shm` file cannot be opened or probed.
    static func hold(database: String, shownAs: String) throws -> Int32? {
        let name = database + "-shm"
        var fd = open(name, O_RDWR | O_CLOEXEC)
        var canHold = true
        if fd < 0, errno == EACCES || errno == EROFS {
            fd = open(name, O_RDONLY | O_CLOEXEC)
            canHold = false
        }
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw AtollError(.file, "cannot open '\(name)' to see whether the realm is open: \(String(cString: strerror(errno)))")
        }
        var f = request(F_WRLCK)
        if canHold, fcntl(fd, setLock, &f) == 0 { return fd }
        f = request(F_WRLCK)
        let probed = fcntl(fd, getLock, &f)
        close(fd)
        guard probed == 0 else {
            throw AtollError(.file, "cannot probe the locks of '\(name)': \(String(cString: strerror(errno)))")
        }
        guard Int32(f.l_type) != F_UNLCK else {
            // Free, but we could not take it (no write permission on the -shm file): go ahead.
            return nil
        }
        let who = f.l_pid > 0 ? "another process (pid \(f.l_pid))" : "another process"
        throw AtollError(.busy, "cannot delete the files of '\(shownAs)': the realm is open in \(who); close it first")
    }
}
