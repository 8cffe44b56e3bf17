import AtollStore
import CJansson

/// Exports a realm to JSON and imports such an export into a new realm, exactly: exporting the
/// imported realm gives the same bytes again (docs/cli.md describes the format).
///
/// ```swift
/// var text = ""
/// try RealmTransfer.export(store) { text += $0 }
/// let summary = try RealmTransfer.importRealm(from: "dump.json", to: "copy.realm")
/// ```
///
/// The format, one JSON object:
///
/// ```json
/// {"format": "atoll-export", "version": 1, "schemaVersion": 3,
///  "schema": [ …the schema in the object form of SchemaJSON… ],
///  "objects": {
///   "Person": [
///    {"_id": 1, "name": "Ann", "dog": 7},
///    …
///   ],
///   "Note": [
///    {"_atoll_key": 1, "text": "a class without primary key"}
///   ]
///  }
/// }
/// ```
///
/// Classes come in schema order, embedded classes not listed (their objects are inside their
/// owners), objects in row-key order, values in Extended JSON as `EJSON.make` writes them (links
/// as the target's primary key, or as its row key for classes without one), except floats inside
/// mixed values: `{"$numberFloat": "1.5"}`, so that they do not come back as doubles. Objects of
/// classes without primary key carry their row key as `"_atoll_key"` (`Store.objectKeyName`).
public enum RealmTransfer {
    /// The `"format"` of an export.
    public static let format = "atoll-export"
    /// The `"version"` of the format this code writes and reads.
    public static let formatVersion = 1

    /// How far an export or import has come, reported as it goes.
    public struct Progress: Hashable, Sendable {
        /// What is being done.
        public enum Step: String, Hashable, Sendable {
            /// Writing the objects of a class.
            case export
            /// Import, first pass: creating objects with the properties that cannot hold links.
            case create
            /// Import, second pass: writing links, mixed values and embedded objects that may hold links.
            case link
        }

        public var step: Step
        /// The class whose objects are being written.
        public var className: String
        /// Objects of the class done so far.
        public var done: Int
        /// Objects of the class in all, when known (not during the first pass of an import).
        public var total: Int?

        public init(step: Step, className: String, done: Int, total: Int?) {
            self.step = step
            self.className = className
            self.done = done
            self.total = total
        }
    }

    // MARK: - Export

    /// Writes the export of a realm as JSON text, piece by piece: class by class, a page of
    /// objects at a time, never the whole realm at once. The realm is read in one snapshot
    /// (`Store.readSnapshot`), so commits made meanwhile by other handles are not mixed in.
    ///
    /// - Parameters:
    ///   - pageSize: how many objects are read (and handed to `write`) at a time.
    ///   - progress: called after each page, on the calling thread.
    ///   - write: receives the text in order; what it throws ends the export.
    /// - Throws: what the store throws (`.closed`, `.file`), and what `write` throws.
    public static func export(_ store: Store, pageSize: Int = 500, progress: ((Progress) -> Void)? = nil,
                              to write: (String) throws -> Void) throws {
        try store.readSnapshot {
            let schema = store.schema
            var text = "{\"format\": \(jsonString(format)), \"version\": \(formatVersion), "
                + "\"schemaVersion\": \(store.schemaVersion),\n \"schema\": ["
            let schemaJSON = SchemaJSON.make(schema)
            for i in 0..<json_array_size(schemaJSON) {
                text += (i == 0 ? "\n  " : ",\n  ") + EJSON.dump(json_array_get(schemaJSON, i))
            }
            json_decref(schemaJSON)
            text += schema.classes.isEmpty ? "],\n \"objects\": {" : "\n ],\n \"objects\": {"
            try write(text)
            let topLevel = schema.classes.filter { !$0.isEmbedded }
            for (c, cls) in topLevel.enumerated() {
                try write((c == 0 ? "\n  " : ",\n  ") + jsonString(cls.name) + ": [")
                let results = try store.objects(cls.name)
                let total = try results.count()
                var done = 0
                try forEachPage(of: results, pageSize: pageSize) { page in
                    var chunk = ""
                    for object in page {
                        chunk += (done == 0 ? "\n   " : ",\n   ") + dump(object, cls, schema)
                        done += 1
                    }
                    try write(chunk)
                    progress?(Progress(step: .export, className: cls.name, done: done, total: total))
                }
                if done == 0 { progress?(Progress(step: .export, className: cls.name, done: 0, total: total)) }
                try write(done == 0 ? "]" : "\n  ]")
            }
            try write(topLevel.isEmpty ? "}\n}\n" : "\n }\n}\n")
        }
    }

    /// Calls `body` with the matching objects, a page at a time, as an export writes them:
    /// objects of classes without primary key get their row key as `"_atoll_key"` first.
    /// - Throws: what the store throws, and what `body` throws.
    public static func forEachPage(of results: Results, pageSize: Int = 500, limit: Int? = nil,
                                   _ body: ([Document]) throws -> Void) throws {
        let withKey = results.store.schema[results.className].map { $0.primaryKey == nil && !$0.isEmbedded } ?? false
        let size = max(1, pageSize)
        var offset = 0
        while limit.map({ offset < $0 }) ?? true {
            let count = limit.map { min(size, $0 - offset) } ?? size
            // Keys first: `documents` continues from where the previous page ended (see Results).
            let keys = withKey ? try results.keys(offset: offset, limit: count) : []
            var page = try results.documents(offset: offset, limit: count)
            if withKey {
                page = zip(keys, page).map { key, doc in
                    Document(uniqueKeys: [(Store.objectKeyName, .int(key.rawValue))] + Array(doc))
                }
            }
            if page.isEmpty { return }
            try body(page)
            offset += page.count
            if page.count < count { return }
        }
    }

    // MARK: - Encoding objects

    /// The compact JSON text of one exported object.
    static func dump(_ object: Document, _ cls: ObjectSchema, _ schema: Schema) -> String {
        let json = make(object, cls, schema)
        defer { json_decref(json) }
        return EJSON.dump(json)
    }

    /// A new reference: the object as `EJSON.make` writes it, but with floats inside mixed
    /// values (at any depth, in embedded objects too) as `{"$numberFloat": …}`.
    public static func make(_ object: Document, _ cls: ObjectSchema, _ schema: Schema) -> JSONRef {
        let json = json_object()!
        for (key, value) in object {
            json_object_set_new(json, key, make(value, cls[property: key], schema))
        }
        return json
    }

    private static func make(_ value: Value, _ p: Property?, _ schema: Schema) -> JSONRef {
        guard let p else { return EJSON.make(value) }
        if p.type == .mixed { return makeMixed(value) }
        guard p.type == .object, let target = schema[p.objectType ?? ""], target.isEmbedded else { return EJSON.make(value) }
        switch (p.collection, value) {
        case (.single, .object(let doc)):
            return make(doc, target, schema)
        case (.dictionary, .object(let entries)):
            let json = json_object()!
            for (key, item) in entries {
                json_object_set_new(json, key, item.documentValue.map { make($0, target, schema) } ?? EJSON.make(item))
            }
            return json
        case (.list, .list(let items)):
            let json = json_array()!
            for item in items { json_array_append_new(json, item.documentValue.map { make($0, target, schema) } ?? EJSON.make(item)) }
            return json
        default:
            return EJSON.make(value)
        }
    }

    /// A mixed value (or a collection of them): nested lists and dictionaries hold mixed values.
    private static func makeMixed(_ value: Value) -> JSONRef {
        switch value {
        case .float(let f):
            let text = f.isNaN ? "NaN" : f.isInfinite ? (f > 0 ? "Infinity" : "-Infinity") : "\(f)"
            let json = json_object()!
            json_object_set_new(json, "$numberFloat", EJSON.makeString(text))
            return json
        case .list(let items):
            let json = json_array()!
            for item in items { json_array_append_new(json, makeMixed(item)) }
            return json
        case .object(let doc):
            let json = json_object()!
            for (key, item) in doc { json_object_set_new(json, key, makeMixed(item)) }
            return json
        default:
            return EJSON.make(value)
        }
    }

    static func jsonString(_ s: String) -> String {
        let json = EJSON.makeString(s)
        defer { json_decref(json) }
        return EJSON.dump(json)
    }
}
