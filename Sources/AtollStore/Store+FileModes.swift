import CSQLite
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// A realm file that cannot be written: a clear error when it is opened for writing (SQLite
// would open it read-only without a word and fail at the first write, or fail on a PRAGMA with
// "attempt to write a readonly database"), and a way to read it with "readOnly" even where its
// `-wal` and `-shm` companions cannot be made.

extension Store {
    /// Fails when a file just opened for writing cannot be written, or its directory cannot
    /// hold the `-wal` and `-shm` files that writing needs.
    /// - Throws: `.file`, naming the path and the reason (permissions, a read-only file system).
    static func checkWritable(_ conn: Connection, path: String) throws {
        if let db = conn.db, sqlite3_db_readonly(db, "main") == 1 {
            let reason = access(path, W_OK) == 0 ? "SQLite opened it read-only" : String(cString: strerror(errno))
            throw AtollError(.file, "cannot open '\(path)' for writing: the file is read-only (\(reason)); open it with \"readOnly\": true to read it")
        }
        let directory = parentDirectory(path)
        if access(directory, W_OK) != 0 {
            let reason = String(cString: strerror(errno))
            throw AtollError(.file, "cannot open '\(path)' for writing: its directory '\(directory)' is read-only (\(reason)), and the realm keeps its '-wal' and '-shm' files there; open it with \"readOnly\": true to read it")
        }
    }

    /// The SQLite filename that opens `path` for reading: the path itself, or, when its directory
    /// cannot be written and no `-wal` file is beside it (so SQLite could make no `-shm`, and
    /// nobody can be writing it), the file as immutable, read without any lock or companion file.
    static func readOnlyFilename(_ path: String) -> String {
        guard access(parentDirectory(path), W_OK) != 0, !exists(path + "-wal") else { return sqliteFilename(path) }
        let escaped = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "?#%"))) ?? path
        return "file:\(escaped)?immutable=1"
    }

    private static func parentDirectory(_ path: String) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        return directory.isEmpty ? "." : directory
    }
}
