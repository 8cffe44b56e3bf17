import AtollStore
import CJansson
import Foundation

// Importing an export into a new realm file: one write transaction, two passes over the file.

extension RealmTransfer {
    /// What an import wrote.
    public struct ImportSummary: Hashable, Sendable {
        public var schemaVersion: UInt64
        /// The classes of the export's `"objects"`, in its order, with how many objects each had.
        public var objectCounts: [ClassCount]
        /// All objects written (embedded objects not counted).
        public var objectCount: Int { objectCounts.reduce(0) { $0 + $1.count } }
    }

    /// A class and a number of objects.
    public struct ClassCount: Hashable, Sendable {
        public var className: String
        public var count: Int
    }

    /// Imports an export (see `RealmTransfer`) into a new realm file, with the export's schema
    /// and schema version: all or nothing.
    ///
    /// The file is read twice and never held in memory whole, so it must be a regular file
    /// (spool a pipe to a temporary file first). The first pass creates every object with the
    /// properties that cannot hold links; the second writes links, link collections, mixed values
    /// and embedded objects that may hold links, so that cycles and links to objects later in the
    /// file work. Both passes are one write transaction.
    ///
    /// - Parameters:
    ///   - exportPath: the export file; its `"objects"` must come after the other keys.
    ///   - realmPath: the new realm. It must not exist, or be an empty file.
    ///   - progress: called every few hundred objects, on the calling thread.
    /// - Throws: `.file` when `realmPath` exists and is not empty, or a file cannot be read;
    ///   `.invalidJSON` for a file that is not an export (with the byte offset); `.schema` for
    ///   its schema; the store's errors for its objects, prefixed with the class and the object's
    ///   index. A failed import leaves no realm file (or the empty file as it was): the realm is
    ///   written under a hidden name beside `realmPath` (`.NAME.importing-…`) and renamed into
    ///   place when complete, so an import that is killed leaves only that hidden file.
    @discardableResult
    public static func importRealm(from exportPath: String, to realmPath: String,
                                   progress: ((Progress) -> Void)? = nil) throws -> ImportSummary {
        _ = try checkNewRealm(realmPath)
        let reader = try JSONStreamReader(path: exportPath)
        let header = try readHeader(reader)
        // The realm is written beside its path under a hidden name and renamed into place once
        // complete: an import that is killed half-way leaves nothing at `realmPath`.
        let url = URL(fileURLWithPath: realmPath)
        let partial = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).importing-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        var store: Store?
        do {
            let opened = try Store(Configuration(path: partial, schema: header.schema, schemaVersion: header.schemaVersion))
            store = opened
            let importer = Importer(store: opened, reader: reader, progress: progress)
            try opened.write {
                try importer.run(objectsAt: reader.offset)
            }
            opened.close()
            _ = try checkNewRealm(realmPath)
            guard rename(partial, realmPath) == 0 else {
                throw AtollError(.file, "cannot move the imported realm to '\(realmPath)': \(String(cString: strerror(errno)))")
            }
            return ImportSummary(schemaVersion: header.schemaVersion,
                                 objectCounts: importer.order.map { ClassCount(className: $0, count: importer.counts[$0] ?? 0) })
        } catch {
            store?.close()
            removeFailedRealm(partial)
            throw error
        }
    }

    // MARK: - The header

    struct Header {
        var schema: Schema
        var schemaVersion: UInt64
    }

    /// Reads the keys before `"objects"` and leaves the reader at the value of `"objects"`.
    private static func readHeader(_ reader: JSONStreamReader) throws -> Header {
        try reader.expect(0x7B, "'{' (an export is a JSON object)")
        var format: String?
        var version: Int64?
        var schemaVersion: UInt64?
        var schema: Schema?
        var first = true
        while true {
            if !first { try reader.expect(0x2C, "',' and the export's \"objects\"") }
            first = false
            let key = try reader.string("a key")
            try reader.expect(0x3A, "':'")
            if key == "objects" { break }
            let json = try reader.value()
            defer { json_decref(json) }
            switch key {
            case "format":
                guard json.pointee.type == JSON_STRING else { throw notAnExport("\"format\" is not a string") }
                format = try EJSON.validString(json)
                guard format == RealmTransfer.format else {
                    throw notAnExport("its \"format\" is \(RealmTransfer.jsonString(format ?? "")), not \"\(RealmTransfer.format)\"")
                }
            case "version":
                guard json.pointee.type == JSON_INTEGER else { throw notAnExport("\"version\" is not an integer") }
                version = Int64(json_integer_value(json))
                guard version == Int64(formatVersion) else {
                    throw AtollError(.invalidJSON, "the export is format version \(version ?? 0); this version of Atoll reads version \(formatVersion)")
                }
            case "schemaVersion":
                guard json.pointee.type == JSON_INTEGER, json_integer_value(json) >= 0 else {
                    throw notAnExport("\"schemaVersion\" is not an integer >= 0")
                }
                schemaVersion = UInt64(json_integer_value(json))
            case "schema":
                schema = try SchemaJSON.schema(json)
            default:
                throw notAnExport("unknown key \(RealmTransfer.jsonString(key))")
            }
        }
        guard format != nil else { throw notAnExport("\"format\" is missing (or comes after \"objects\")") }
        guard version != nil else { throw notAnExport("\"version\" is missing (or comes after \"objects\")") }
        guard let schema else { throw notAnExport("\"schema\" is missing (or comes after \"objects\")") }
        guard let schemaVersion else { throw notAnExport("\"schemaVersion\" is missing (or comes after \"objects\")") }
        return Header(schema: schema, schemaVersion: schemaVersion)
    }

    private static func notAnExport(_ why: String) -> AtollError {
        AtollError(.invalidJSON, "not an Atoll export: \(why)")
    }

    // MARK: - The new file

    /// Checks that `path` names no file, or an empty one (whose emptiness a failure restores).
    /// - Returns: whether the (empty) file existed.
    private static func checkNewRealm(_ path: String) throws -> Bool {
        guard !path.isEmpty else { throw AtollError(.invalidArgument, "the realm path is empty") }
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber
        if exists, isDirectory.boolValue || size?.int64Value != 0 {
            throw AtollError(.file, "'\(path)' exists and is not empty: import writes a new realm; remove it or choose another path")
        }
        // A stale WAL would be replayed into the new realm.
        for suffix in ["-wal", "-shm", "-journal"] where FileManager.default.fileExists(atPath: path + suffix) {
            throw AtollError(.file, "'\(path)\(suffix)' exists: import writes a new realm; remove it or choose another path")
        }
        return exists
    }

    private static func removeFailedRealm(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }
}

// MARK: - The two passes

/// Writes the objects of an export in two passes (see `RealmTransfer.importRealm`).
private final class Importer {
    let store: Store
    let reader: JSONStreamReader
    let progress: ((RealmTransfer.Progress) -> Void)?
    let schema: Schema
    /// For each class, the properties the second pass writes.
    var deferred: [String: Set<String>] = [:]
    /// The classes in the order of the export, and their object counts (after the first pass).
    var order: [String] = []
    var counts: [String: Int] = [:]
    /// The row keys the first pass gave objects of classes without primary key, in file order.
    var keys: [String: [Int64]] = [:]

    init(store: Store, reader: JSONStreamReader, progress: ((RealmTransfer.Progress) -> Void)?) {
        self.store = store
        self.reader = reader
        self.progress = progress
        schema = store.schema
        for cls in schema.classes {
            deferred[cls.name] = Set(cls.properties.filter { mayHoldLinks($0, visiting: []) }.map(\.name))
        }
    }

    /// Whether a property's values may link to top-level objects: links and link collections,
    /// mixed values, and embedded objects whose class has such a property (at any depth).
    private func mayHoldLinks(_ p: Property, visiting: Set<String>) -> Bool {
        if p.type == .mixed { return true }
        guard p.type == .object, let target = schema[p.objectType ?? ""] else { return false }
        guard target.isEmbedded else { return true }
        guard !visiting.contains(target.name) else { return false }
        return target.properties.contains { mayHoldLinks($0, visiting: visiting.union([target.name])) }
    }

    func run(objectsAt start: Int64) throws {
        try readObjects(pass: .create)
        try reader.skipWhitespace()
        guard try reader.peek() == nil else { throw reader.unexpected("the end of the file after the export") }
        try reader.seek(to: start)
        try readObjects(pass: .link)
    }

    /// Reads `"objects": {"Class": [{…}, …], …}` from the value on, calling the pass for each object.
    private func readObjects(pass: RealmTransfer.Progress.Step) throws {
        try reader.expect(0x7B, "'{' (the export's \"objects\")")
        var seen = Set<String>()
        if try !reader.consume(0x7D) {
            repeat {
                let className = try reader.string("a class name")
                guard let cls = schema[className] else {
                    throw AtollError(.noSuchClass, "the export's objects name class '\(className)', which is not in its schema")
                }
                guard seen.insert(className).inserted else {
                    throw AtollError(.invalidJSON, "the export lists the objects of class '\(className)' twice")
                }
                if pass == .create { order.append(className) }
                try reader.expect(0x3A, "':'")
                try reader.expect(0x5B, "'[' (the objects of class '\(className)')")
                var index = 0
                report(pass, className, 0)
                if try !reader.consume(0x5D) {
                    repeat {
                        let json = try reader.value()
                        defer { json_decref(json) }
                        guard json.pointee.type == JSON_OBJECT else {
                            throw AtollError(.invalidJSON, "object \(index) of class '\(className)' is \(EJSON.kind(json)), not an object")
                        }
                        do {
                            let object = try EJSON.document(json)
                            if pass == .create { try create(cls, object) } else { try link(cls, object, index) }
                        } catch let error as AtollError {
                            throw error.prefixed("object \(index) of class '\(className)'")
                        }
                        index += 1
                        if index % 256 == 0 { report(pass, className, index) }
                    } while try reader.consume(0x2C)
                    try reader.expect(0x5D, "',' or ']' after object \(index - 1) of class '\(className)'")
                }
                if pass == .create { counts[className] = index }
                report(pass, className, index)
            } while try reader.consume(0x2C)
            try reader.expect(0x7D, "',' or '}' in the export's \"objects\"")
        }
        try reader.expect(0x7D, "'}' (the end of the export; \"objects\" comes last)")
    }

    private func report(_ pass: RealmTransfer.Progress.Step, _ className: String, _ done: Int) {
        progress?(RealmTransfer.Progress(step: pass, className: className, done: done,
                                         total: pass == .link ? counts[className] : nil))
    }

    /// Pass 1: the object with the properties that cannot hold links.
    private func create(_ cls: ObjectSchema, _ object: Document) throws {
        let later = deferred[cls.name] ?? []
        let now = Document(uniqueKeys: object.filter { !later.contains($0.0) })
        let key = try store.create(cls.name, now, update: .error)
        if cls.primaryKey == nil { keys[cls.name, default: []].append(key.rawValue) }
    }

    /// Pass 2: the deferred properties that differ from what pass 1 left (null, empty, the default).
    private func link(_ cls: ObjectSchema, _ object: Document, _ index: Int) throws {
        let later = deferred[cls.name] ?? []
        let values = object.filter { key, value in
            guard later.contains(key), let p = cls[property: key] else { return false }
            switch value {
            case .null: return p.defaultValue != nil
            case .list(let items): return !items.isEmpty || p.collection == .single
            case .object(let doc): return !doc.isEmpty || p.collection != .dictionary
            default: return true
            }
        }
        guard !values.isEmpty else { return }
        let identity: (String, Value)
        if let pk = cls.primaryKey {
            identity = (pk, object[pk] ?? .null)
        } else {
            guard let key = keys[cls.name]?[safe: index] else {
                throw AtollError(.internal, "the second pass found more objects than the first")
            }
            identity = (Store.objectKeyName, .int(key))
        }
        try store.create(cls.name, Document(uniqueKeys: [identity] + values), update: .all)
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
