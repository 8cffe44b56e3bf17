@preconcurrency import Glibc
import AtollJSON
import AtollStore
import Foundation

// The commands that move whole realms: export, import, compact. They show progress on stderr
// when it is a terminal.

extension Commands {
    // MARK: - export

    static func export(_ words: [String]) throws {
        let args = try Arguments(command: "export", words, flags: [:], valued: ["-o": "output", "--output": "output"])
        let path = try args.positional("REALM", required: 1)[0]
        let store = try open(path)
        defer { store.close() }
        let out: Output
        if let file = args.options["output"], file != "-" {
            guard let stream = fopen(file, "wb") else {
                throw ExitError.failure("cannot write '\(file)': \(String(cString: strerror(errno)))")
            }
            out = Output(stream, name: "'\(file)'")
        } else {
            out = Output.standard
        }
        let progress = ProgressLine()
        defer { progress.clear() }
        do {
            try RealmTransfer.export(store, progress: { p in
                progress.update { "export: \(p.className) \(p.done)/\(p.total ?? 0)" }
            }, to: out.write)
            try out.finish()
            if out !== Output.standard { fclose(out.stream) }
        } catch {
            if out !== Output.standard, let file = args.options["output"] {
                fclose(out.stream)
                unlink(file)
            }
            throw error
        }
    }

    // MARK: - import

    static func importRealm(_ words: [String]) throws {
        let args = try Arguments(command: "import", words, flags: [:], valued: [:])
        let positional = try args.positional("REALM FILE", required: 2)
        let (path, source) = (positional[0], positional[1])
        // The import reads its input twice: standard input is copied to a temporary file first.
        let spooled = source == "-" ? try spoolStandardInput() : nil
        defer { if let spooled { unlink(spooled) } }
        let exportPath = spooled ?? source
        if spooled == nil, !FileManager.default.fileExists(atPath: source) {
            throw ExitError.failure("'\(source)': no such file")
        }
        let progress = ProgressLine()
        let summary: RealmTransfer.ImportSummary
        do {
            summary = try RealmTransfer.importRealm(from: exportPath, to: path) { p in
                progress.update {
                    p.step == .create ? "import: creating \(p.className) \(p.done)"
                        : "import: linking \(p.className) \(p.done)/\(p.total ?? 0)"
                }
            }
            progress.clear()
        } catch {
            progress.clear()
            throw error
        }
        let classes = summary.objectCounts.map { "\($0.className) \($0.count)" }.joined(separator: ", ")
        try Output.standard.write("imported \(summary.objectCount) objects into '\(path)'\(classes.isEmpty ? "" : " (\(classes))")\n")
    }

    /// Copies standard input to a new temporary file and returns its path.
    private static func spoolStandardInput() throws -> String {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("atoll-import-XXXXXX").path
        var name = Array(template.utf8CString)
        let fd = mkstemp(&name)
        guard fd >= 0 else { throw ExitError.failure("cannot create a temporary file: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                let message = String(cString: strerror(errno))
                unlink(path)
                throw ExitError.failure("cannot read standard input: \(message)")
            }
            var written = 0
            while written < n {
                let w = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + written, n - written) }
                guard w > 0 else {
                    let message = String(cString: strerror(errno))
                    unlink(path)
                    throw ExitError.failure("cannot write the temporary file '\(path)': \(message)")
                }
                written += w
            }
        }
        return path
    }

    // MARK: - compact

    static func compact(_ words: [String]) throws {
        let args = try Arguments(command: "compact", words, flags: [:], valued: [:])
        let path = try args.positional("REALM", required: 1)[0]
        let store = try open(path, readOnly: false)
        defer { store.close() }
        let before = fileSize(path) + fileSize(path + "-wal")
        let progress = ProgressLine()
        progress.update { "compact: \(path) (\(byteCount(before)))…" }
        do {
            try store.compact()
            progress.clear()
        } catch {
            progress.clear()
            throw error
        }
        store.close()
        let after = fileSize(path) + fileSize(path + "-wal")
        try Output.standard.write("compacted '\(path)': \(before) -> \(after) bytes (\(before >= after ? "freed \(byteCount(before - after))" : "grew by \(byteCount(after - before))"))\n")
    }
}
