@preconcurrency import Glibc
import Foundation

// Where output goes: a C stream (stdout or a file), messages and progress on stderr.

/// Text written to a C stream (buffered by the C library). The tool has one thread.
final class Output: @unchecked Sendable {
    let stream: UnsafeMutablePointer<FILE>
    let name: String

    init(_ stream: UnsafeMutablePointer<FILE>, name: String) {
        self.stream = stream
        self.name = name
    }

    static let standard = Output(stdout, name: "standard output")

    /// - Throws: a failure when the stream cannot take it (a full disk...).
    func write(_ text: String) throws {
        var text = text
        let written = text.withUTF8 { buffer in fwrite(buffer.baseAddress, 1, buffer.count, stream) }
        if written < text.utf8.count { throw failed() }
    }

    /// Flushes, and reports a write that failed.
    func finish() throws {
        if fflush(stream) != 0 || ferror(stream) != 0 { throw failed() }
    }

    private func failed() -> ExitError {
        ExitError.failure("cannot write to \(name): \(String(cString: strerror(errno)))")
    }
}

/// Prints `atoll: message` on stderr.
func printError(_ message: String) {
    fputs("atoll: \(message)\n", stderr)
}

/// One line of progress on stderr, rewritten in place, only when stderr is a terminal; at most
/// four times a second (the first update at once).
final class ProgressLine {
    let enabled: Bool
    private var last: UInt64 = 0
    private var shown = false

    init() {
        enabled = isatty(STDERR_FILENO) == 1
    }

    private static func now() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    /// Shows the text `make` returns, unless the last update was less than 250 ms ago.
    func update(_ make: () -> String) {
        guard enabled else { return }
        let t = Self.now()
        if shown, t - last < 250_000_000 { return }
        last = t
        shown = true
        fputs("\r\u{1B}[K" + make(), stderr)
        fflush(stderr)
    }

    /// Removes the line (before the command prints its result or an error).
    func clear() {
        guard shown else { return }
        fputs("\r\u{1B}[K", stderr)
        fflush(stderr)
        shown = false
    }
}

/// "1234 bytes (1.2 KiB)".
func byteCount(_ n: Int64) -> String {
    let units = ["KiB", "MiB", "GiB", "TiB"]
    guard n >= 1024 else { return "\(n) bytes" }
    var value = Double(n) / 1024
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return "\(n) bytes (\(String(format: "%.1f", value)) \(units[unit]))"
}

/// The size of a file on disk, or 0 when there is none.
func fileSize(_ path: String) -> Int64 {
    var info = stat()
    guard stat(path, &info) == 0 else { return 0 }
    return Int64(info.st_size)
}
