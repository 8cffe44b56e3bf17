import AtollJSON
import AtollStore
import CJansson
import Foundation

// The read-only commands: schema, query, info. Each takes its arguments (after the command's
// name) and writes its result to standard output.

enum Commands {
    /// Opens an existing realm file; read-only unless `readOnly` is false.
    /// - Throws: a failure naming the path when there is no such file, it is not a realm, or
    ///   SQLite cannot open it.
    static func open(_ path: String, readOnly: Bool = true) throws -> Store {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ExitError.failure("'\(path)': no such file")
        }
        guard !isDirectory.boolValue else { throw ExitError.failure("'\(path)' is a directory, not a realm file") }
        // Read-only first: opening a file that is not a realm for writing would make it one.
        let check = try Store(Configuration(path: path, readOnly: true))
        guard try check.isRealm() else {
            check.close()
            throw ExitError.failure("'\(path)' is not an Atoll realm (it has no Atoll tables)")
        }
        if readOnly { return check }
        check.close()
        return try Store(Configuration(path: path))
    }

    // MARK: - schema

    static func schema(_ words: [String]) throws {
        let args = try Arguments(command: "schema", words, flags: [:], valued: [:])
        let path = try args.positional("REALM", required: 1)[0]
        let store = try open(path)
        defer { store.close() }
        let json = json_object()!
        defer { json_decref(json) }
        json_object_set_new(json, "schemaVersion", json_integer(json_int_t(clamping: store.schemaVersion)))
        json_object_set_new(json, "schema", SchemaJSON.make(store.schema))
        try Output.standard.write(pretty(json) + "\n")
    }

    /// JSON text indented by two spaces.
    static func pretty(_ json: JSONRef) -> String {
        guard let text = json_dumps(json, 2 | 0x200 /* JSON_INDENT(2) | JSON_ENCODE_ANY */) else { return "null" }
        defer { free(text) }
        return String(cString: text)
    }

    // MARK: - query

    static func query(_ words: [String]) throws {
        let args = try Arguments(command: "query", words, flags: ["--count": "count", "--pretty": "pretty"],
                                 valued: ["--limit": "limit"])
        let positional = try args.positional("REALM CLASS", required: 2, optional: 2)
        let limit = try args.count("limit")
        var arguments = [Value]()
        if positional.count == 4 {
            let parsed: Value
            do { parsed = try EJSON.parse(positional[3]) } catch let error as AtollError {
                throw ExitError.failure("the query arguments: \(error.message)")
            }
            guard case .list(let values) = parsed else {
                throw ExitError.failure("the query arguments must be a JSON array, such as '[3, \"Rex\"]'")
            }
            arguments = values
        }
        let store = try open(positional[0])
        defer { store.close() }
        let className = positional[1]
        guard let cls = store.schema[className] else {
            let names = store.schema.classes.map(\.name).joined(separator: ", ")
            throw ExitError.failure("no class named '\(className)' in the schema (classes: \(names.isEmpty ? "none" : names))")
        }
        let results = try store.objects(className, where: positional.count > 2 ? positional[2] : "", arguments)
        let out = Output.standard
        if args.flags.contains("count") {
            let n = try results.count()
            try out.write("\(limit.map { min($0, n) } ?? n)\n")
            return
        }
        let indent = args.flags.contains("pretty")
        var first = true
        try store.readSnapshot {
            try RealmTransfer.forEachPage(of: results, limit: limit) { page in
                var text = ""
                for object in page {
                    let json = RealmTransfer.make(object, cls, store.schema)
                    let body = indent ? "  " + pretty(json).replacingOccurrences(of: "\n", with: "\n  ") : EJSON.dump(json)
                    json_decref(json)
                    text += (first ? (indent ? "[\n" : "[") : ",\n") + body
                    first = false
                }
                try out.write(text)
            }
        }
        try out.write(first ? "[]\n" : (indent ? "\n]\n" : "]\n"))
    }

    // MARK: - info

    static func info(_ words: [String]) throws {
        let args = try Arguments(command: "info", words, flags: ["--json": "json"], valued: [:])
        let path = try args.positional("REALM", required: 1)[0]
        let store = try open(path)
        defer { store.close() }
        let (stats, counts) = try store.readSnapshot {
            (try store.statistics(), try store.schema.classes.map { ($0, try store.objects($0.name).count()) })
        }
        let size = fileSize(path)
        let walSize = fileSize(path + "-wal")
        // Whether its log keeps values (docs/changelog.md, "What the log keeps").
        let keepsValues = try store.changeLogKeepsValues()
        if args.flags.contains("json") {
            let json = json_object()!
            defer { json_decref(json) }
            func set(_ key: String, _ n: Int64, in object: JSONRef = json) {
                json_object_set_new(object, key, json_integer(json_int_t(n)))
            }
            json_object_set_new(json, "path", EJSON.make(.string(path)))
            set("fileSize", size)
            set("walSize", walSize)
            set("pageSize", stats.pageSize)
            set("pageCount", stats.pageCount)
            set("freePages", stats.freePageCount)
            set("usedBytes", stats.usedBytes)
            set("freeBytes", stats.freeBytes)
            set("schemaVersion", Int64(clamping: store.schemaVersion))
            set("version", Int64(clamping: stats.version))
            let log = json_object()!
            set("entries", stats.changeLogEntries, in: log)
            set("chunks", stats.changeLogChunks, in: log)
            set("bytes", stats.changeLogBytes, in: log)
            json_object_set_new(log, "keepsValues", keepsValues ? json_true() : json_false())
            json_object_set_new(json, "changeLog", log)
            let objects = json_object()!
            for (cls, n) in counts { set(cls.name, Int64(n), in: objects) }
            json_object_set_new(json, "objects", objects)
            try Output.standard.write(pretty(json) + "\n")
            return
        }
        let width = max(16, (counts.map { $0.0.name.count + 4 }.max() ?? 0))
        func line(_ label: String, _ value: String) -> String {
            label.padding(toLength: max(width, label.count + 1), withPad: " ", startingAt: 0) + value + "\n"
        }
        var text = line("file", path)
        text += line("file size", byteCount(size))
        text += line("wal file", byteCount(walSize))
        text += line("page size", "\(stats.pageSize) bytes")
        text += line("pages", "\(stats.pageCount) (\(stats.pageCount - stats.freePageCount) used, \(stats.freePageCount) free)")
        text += line("used", byteCount(stats.usedBytes))
        text += line("free", byteCount(stats.freeBytes))
        text += line("schema version", "\(store.schemaVersion)")
        text += line("version", "\(stats.version)")
        text += line("change log", "\(stats.changeLogEntries) entries, \(stats.changeLogChunks) chunks, \(byteCount(stats.changeLogBytes))"
                     + (keepsValues ? ", values kept" : ", without values"))
        let total = counts.filter { !$0.0.isEmbedded }.reduce(0) { $0 + $1.1 }
        text += line("objects", "\(total)")
        for (cls, n) in counts {
            text += line("  " + cls.name, "\(n)" + (cls.isEmbedded ? " (embedded)" : ""))
        }
        try Output.standard.write(text)
    }
}
