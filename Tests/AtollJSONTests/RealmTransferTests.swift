import AtollJSON
import AtollStore
import CJansson
import Foundation
import XCTest

/// Export and import of whole realms: exact round trips of every type, links in every shape,
/// and imports that fail leaving nothing.
final class RealmTransferTests: XCTestCase {
    /// Every type the store has: scalars required and optional, lists, sets, dictionaries, mixed,
    /// links (to classes with and without primary key, forward, in cycles), link collections,
    /// embedded objects (nested, in lists and dictionaries, with and without links), backlinks.
    static let schemaJSON = #"""
    [
     {"name": "All", "primaryKey": "_id", "properties": {
       "_id": "objectId",
       "b": "bool", "i": "int", "f": "float", "d": "double", "s": "string", "bin": "data", "t": "date",
       "oid": "objectId", "u": "uuid", "dec": "decimal128",
       "ob": "bool?", "oi": "int?", "of": "float?", "od": "double?", "os": "string?", "obin": "data?",
       "ot": "date?", "ooid": "objectId?", "ou": "uuid?", "odec": "decimal128?",
       "li": "int[]", "lod": "double?[]", "ls": "string[]", "lf": "float[]", "lt": "date[]", "ldec": "decimal128?[]",
       "si": "int<>", "ss": "string<>", "sbin": "data<>", "su": "uuid?<>",
       "di": "int{}", "dos": "string?{}", "df": "float{}",
       "m": "mixed", "lm": "mixed[]", "sm": "mixed<>", "dm": "mixed{}",
       "person": "Person?", "people": "Person[]", "peopleSet": "Person<>", "peopleMap": "Person{}",
       "note": "Note?", "notes": "Note[]", "noteMap": "Note{}",
       "place": "Place?", "places": "Place[]", "placeMap": "Place{}",
       "plain": "Plain?", "plains": "Plain[]",
       "mixedDefault": {"type": "mixed", "default": 5},
       "doubleDefault": {"type": "double", "default": 2.5, "indexed": true},
       "gadget": "Gadget?", "tags": "Tag[]"}},
     {"name": "Person", "primaryKey": "id", "properties": {
       "id": "int", "name": "string", "friend": "Person?", "best": "Person[]",
       "fans": {"type": "linkingObjects", "objectType": "All", "property": "person"}}},
     {"name": "Note", "properties": {"text": "string", "next": "Note?", "about": "mixed"}},
     {"name": "Place", "embedded": true, "properties": {"city": "string", "geo": "Geo?", "visitors": "Person[]"}},
     {"name": "Geo", "embedded": true, "properties": {"lat": "double", "lon": "double", "near": "Note?", "any": "mixed"}},
     {"name": "Plain", "embedded": true, "properties": {"label": "string", "n": "int[]", "inner": "Plain?"}},
     {"name": "Tag", "primaryKey": "name", "properties": {"name": "string"}},
     {"name": "Gadget", "primaryKey": "_id", "properties": {"_id": "uuid", "tag": "Tag?", "self": "Gadget?"}}
    ]
    """#

    static let strangeStrings = [
        "", "héllo ✓ 😀", "quote \" backslash \\ slash /", "\u{1}\u{1F}\t\n\r", "\u{FFFF}\u{10FFFF}",
        "a\u{2028}b\u{2029}", "e\u{301} vs é", "{\"$oid\": \"not one\"}", "$ref", "日本語のテキスト",
    ]

    private func schema() throws -> Schema {
        try withJSON(Self.schemaJSON) { try SchemaJSON.schema($0) }
    }

    private func open(_ path: String, schema: Schema? = nil, version: UInt64 = 0) throws -> Store {
        let store = try Store(Configuration(path: path, schema: schema, schemaVersion: version))
        addTeardownBlock { store.close() }
        return store
    }

    private func exportText(_ store: Store, pageSize: Int = 500) throws -> String {
        var text = ""
        try RealmTransfer.export(store, pageSize: pageSize) { text += $0 }
        return text
    }

    /// Writes `text` to a new file and returns its path.
    private func file(_ text: String, _ name: String = "export.json") throws -> String {
        let path = (temporaryRealmPath() as NSString).deletingLastPathComponent + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    private func oid(_ n: Int) -> ObjectId { ObjectId(hex: String(format: "%024x", n))! }

    private func link(_ className: String, _ key: Value) -> Value { .link(ObjectLink(className: className, primaryKey: key)) }

    /// A realm holding every type, with cycles, forward references, gaps in row keys.
    private func everyTypeRealm() throws -> Store {
        let store = try open(temporaryRealmPath("original.realm"), schema: schema(), version: 7)
        let uuid = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        try store.write {
            // Tags with string keys created out of order; a gadget linking to itself.
            for name in ["zeta", "alpha", "mid"] { try store.create("Tag", ["name": .string(name)]) }
            try store.create("Gadget", ["_id": .uuid(uuid), "tag": .string("alpha")])
            try store.create("Gadget", ["_id": .uuid(uuid), "self": .uuid(uuid)], update: .modified)
            // People in a cycle, one linking to itself, and a negative key.
            for (id, name) in [(2, "Bob"), (1, "Ann"), (-5, "Neg"), (3, "Cy")] {
                try store.create("Person", ["id": .int(Int64(id)), "name": .string(name)])
            }
            try store.create("Person", ["id": .int(1), "friend": .int(2), "best": .list([.int(2), .int(3), .int(2)])], update: .modified)
            try store.create("Person", ["id": .int(2), "friend": .int(1)], update: .modified)
            try store.create("Person", ["id": .int(3), "friend": .int(3)], update: .modified)
            // Notes (no primary key) in a cycle, with a gap in their keys.
            for text in ["first", "gone", "second", "third"] { try store.create("Note", ["text": .string(text)]) }
            try store.objects("Note", where: "text == 'gone'").deleteAll()
            try store.create("Note", [Store.objectKeyName: .int(1), "next": .int(3), "about": link("Person", .int(2))], update: .modified)
            try store.create("Note", [Store.objectKeyName: .int(3), "next": .int(1), "about": link("Note", .int(4))], update: .modified)
            try store.create("Note", [Store.objectKeyName: .int(4), "about": .list([.float(1.5), link("Note", .int(4))])], update: .modified)

            let geo: Value = .object(["lat": .double(-0.0), "lon": .double(.infinity), "near": .int(3),
                                      "any": .object(["f": .float(.nan), "to": link("Gadget", .uuid(uuid))])])
            let extremes: Document = [
                "_id": .objectId(oid(1)),
                "b": .bool(true), "i": .int(.min), "f": .float(0.1), "d": .double(.nan), "s": .string(Self.strangeStrings[1]),
                "bin": .data([0, 1, 0x7F, 0x80, 0xFF]), "t": .date(Timestamp(milliseconds: -62_135_596_800_001)),
                "oid": .objectId(oid(0xFFFF)), "u": .uuid(uuid), "dec": .decimal(Decimal128("-1234567890123456789012345678901234E-10")!),
                "ob": .bool(false), "oi": .int(.max), "of": .float(-.infinity), "od": .double(-0.0), "os": .string(""),
                "obin": .data([]), "ot": .date(Timestamp(milliseconds: 253_402_300_800_000)), "ooid": .null, "ou": .null,
                "odec": .decimal(.nan),
                "li": .list([.int(3), .int(1), .int(3)]), "lod": .list([.double(.infinity), .null, .double(-.infinity), .double(0.1 + 0.2)]),
                "ls": .list(Self.strangeStrings.map { .string($0) }),
                "lf": .list([.float(-0.0), .float(.nan), .float(.leastNonzeroMagnitude), .float(.greatestFiniteMagnitude)]),
                "lt": .list([.date(Timestamp(milliseconds: 0)), .date(Timestamp(milliseconds: -1))]),
                "ldec": .list([.decimal(.infinity), .null, .decimal(.negativeInfinity), .decimal(Decimal128("1.5")!)]),
                "si": .list([.int(9), .int(-1), .int(9), .int(0)]), "ss": .list([.string("b"), .string("a")]),
                "sbin": .list([.data([1]), .data([])]), "su": .list([.null, .uuid(uuid)]),
                "di": .object(["z": .int(1), "a": .int(-2)]), "dos": .object(["k": .null, "ü": .string("v")]),
                "df": .object(["nan": .float(.nan), "neg": .float(-0.0)]),
                "m": .float(-0.0),
                "lm": .list([.null, .bool(true), .int(1), .float(1), .double(1), .string("1"), .data([1]),
                             .date(Timestamp(milliseconds: 1)), .objectId(oid(1)), .uuid(uuid), .decimal(Decimal128("1")!),
                             link("Person", .int(-5)), link("Note", .int(1)),
                             .list([.float(2.5), .list([]), .object([:])]), .object(["x": .list([link("Tag", .string("mid"))])])]),
                "sm": .list([.int(1), .double(1), .float(1), .string("1"), .null]),
                "dm": .object(["a": link("Gadget", .uuid(uuid)), "b": .object(["c": .float(3)]), "n": .null]),
                "person": .int(3), "people": .list([.int(1), .int(1), .int(-5)]), "peopleSet": .list([.int(2), .int(1)]),
                "peopleMap": .object(["x": .int(2), "none": .null]),
                "note": .int(4), "notes": .list([.int(3), .int(1)]), "noteMap": .object(["n": .int(1)]),
                "place": .object(["city": .string("Oslo"), "geo": geo, "visitors": .list([.int(2)])]),
                "places": .list([.object(["city": .string("A")]), .object(["city": .string("B"), "visitors": .list([.int(3), .int(1)])])]),
                "placeMap": .object(["home": .object(["city": .string("C"), "geo": .object(["lat": .double(1), "lon": .double(2)])])]),
                "plain": .object(["label": .string("outer"), "n": .list([.int(1)]), "inner": .object(["label": .string("inner")])]),
                "plains": .list([.object(["label": .string("p")])]),
                "mixedDefault": .null, "doubleDefault": .double(-1),
                "gadget": .uuid(uuid), "tags": .list([.string("mid"), .string("zeta")]),
            ]
            try store.create("All", extremes)
            // A forward link in a mixed value: oid(2) is created after oid(1) links to it.
            try store.create("All", ["_id": .objectId(oid(2)), "m": link("All", .objectId(oid(1))),
                                     "s": .string(Self.strangeStrings.joined(separator: "|"))])
            try store.create("All", ["_id": .objectId(oid(3))])   // every property at its default
            // A forward link in export order: oid(1) comes first and links to oid(2).
            try store.create("All", ["_id": .objectId(oid(1)), "sm": .list([.int(1), .double(1), .float(1), .string("1"), .null,
                                                                             link("All", .objectId(oid(2)))])], update: .modified)
        }
        return store
    }

    // MARK: - Round trips

    func testEveryTypeRoundTripsByteForByte() throws {
        let original = try everyTypeRealm()
        let exported = try exportText(original)
        let copyPath = temporaryRealmPath("copy.realm")
        let summary = try RealmTransfer.importRealm(from: try file(exported), to: copyPath)
        XCTAssertEqual(summary.schemaVersion, 7)
        XCTAssertEqual(summary.objectCounts.map(\.className), ["All", "Person", "Note", "Tag", "Gadget"])
        XCTAssertEqual(summary.objectCounts.map(\.count), [3, 4, 3, 3, 1])
        XCTAssertEqual(summary.objectCount, 14)

        let copy = try open(copyPath)
        XCTAssertEqual(copy.schemaVersion, 7)
        XCTAssertEqual(copy.schema, original.schema)
        let again = try exportText(copy)
        XCTAssertEqual(again, exported)
        XCTAssertEqual(Array(again.utf8), Array(exported.utf8))

        // What a user reads back, beyond the text: types kept, links, backlinks, the gap.
        let all = try XCTUnwrap(copy.object("All", primaryKey: .objectId(oid(1))))
        guard case .float(let m)? = all["m"], m.sign == .minus else { return XCTFail("m is \(String(describing: all["m"]))") }
        XCTAssertEqual(all["lm"]?.listValue?[3], .float(1), "a float in a mixed list stays a float")
        XCTAssertEqual(all["lm"]?.listValue?[4], .double(1))
        XCTAssertEqual(all["mixedDefault"], .null, "null, not the default, after import")
        XCTAssertEqual(try copy.object("All", primaryKey: .objectId(oid(3)))?["mixedDefault"], .int(5))
        XCTAssertEqual(try copy.value("Person", primaryKey: .int(3), property: "fans"), .list([.objectId(oid(1))]))
        XCTAssertEqual(try copy.object("Note", key: ObjectKey(4))?["about"],
                       .list([.float(1.5), link("Note", .int(4))]))
        XCTAssertNil(try copy.object("Note", key: ObjectKey(2)))
        XCTAssertEqual(try copy.object("Note", key: ObjectKey(1))?["next"], .int(3))
        XCTAssertEqual(try copy.objects("Place").count(), try original.objects("Place").count())
        XCTAssertEqual(try copy.objects("Geo").count(), 2)
        XCTAssertEqual(try copy.objects("Plain").count(), 3)
        // One write transaction: one change-log entry.
        XCTAssertEqual(try copy.version(), 1)
    }

    func testPageSizeDoesNotChangeTheText() throws {
        let store = try everyTypeRealm()
        XCTAssertEqual(try exportText(store, pageSize: 1), try exportText(store, pageSize: 500))
        XCTAssertEqual(try exportText(store, pageSize: 2), try exportText(store))
    }

    func testTheExportIsOneJSONObjectInTheDocumentedShape() throws {
        let text = try exportText(try everyTypeRealm())
        try withJSON(text) { json in
            XCTAssertEqual(EJSON.dump(json_object_get(json, "format")), #""atoll-export""#)
            XCTAssertEqual(json_integer_value(json_object_get(json, "version")), 1)
            XCTAssertEqual(json_integer_value(json_object_get(json, "schemaVersion")), 7)
            XCTAssertEqual(json_array_size(json_object_get(json, "schema")), 8)
            let objects = try XCTUnwrap(json_object_get(json, "objects"))
            var names = [String]()
            var it = json_object_iter(objects)
            while let i = it {
                names.append(String(cString: json_object_iter_key(i)))
                it = json_object_iter_next(objects, i)
            }
            XCTAssertEqual(names, ["All", "Person", "Note", "Tag", "Gadget"], "schema order, embedded classes left out")
            let notes = try XCTUnwrap(json_object_get(objects, "Note"))
            XCTAssertEqual(EJSON.dump(json_array_get(notes, 1)), #"{"_atoll_key":3,"text":"second","next":1,"about":{"$ref":"Note","$id":4}}"#)
            let tags = try XCTUnwrap(json_object_get(objects, "Tag"))
            XCTAssertEqual(EJSON.dump(tags), #"[{"name":"zeta"},{"name":"alpha"},{"name":"mid"}]"#, "row-key order")
            let first = try XCTUnwrap(json_array_get(json_object_get(objects, "All"), 0))
            XCTAssertEqual(EJSON.dump(json_object_get(first, "m")), #"{"$numberFloat":"-0.0"}"#)
            XCTAssertEqual(EJSON.dump(json_object_get(first, "f")), "0.10000000000000001", "floats outside mixed are plain numbers")
            XCTAssertNil(json_object_get(json_array_get(json_object_get(objects, "Person"), 0), "fans"), "linkingObjects are not exported")
        }
        XCTAssertTrue(text.hasPrefix("{\"format\": \"atoll-export\", \"version\": 1, \"schemaVersion\": 7,\n \"schema\": [\n  {"))
        XCTAssertTrue(text.hasSuffix("\n  ]\n }\n}\n"))
    }

    func testEmptyRealmsRoundTrip() throws {
        for schema in [try schema(), Schema()] {
            let original = try open(temporaryRealmPath(), schema: schema, version: 2)
            let exported = try exportText(original)
            let copyPath = temporaryRealmPath()
            let summary = try RealmTransfer.importRealm(from: try file(exported), to: copyPath)
            XCTAssertEqual(summary.objectCount, 0)
            let copy = try open(copyPath)
            XCTAssertEqual(copy.schema, original.schema)
            XCTAssertEqual(copy.schemaVersion, 2)
            XCTAssertEqual(try exportText(copy), exported)
            XCTAssertEqual(try copy.version(), 0, "an import of nothing writes no change-log entry")
        }
        let none = try exportText(try open(temporaryRealmPath(), schema: Schema()))
        XCTAssertEqual(none, "{\"format\": \"atoll-export\", \"version\": 1, \"schemaVersion\": 0,\n \"schema\": [],\n \"objects\": {}\n}\n")
    }

    func testAnExportOfAnotherLayoutImportsToo() throws {
        // Pretty-printed by another tool, keys reordered inside objects, a link written as a
        // DBRef, "_atoll_key" left out: what matters is the JSON, not the layout.
        let text = """
            {
              "version": 1,
              "format": "atoll-export",
              "schema": [
                {"name": "Person", "primaryKey": "id", "properties": {"id": "int", "friend": "Person?", "note": "Note?"}},
                {"name": "Note", "properties": {"text": "string"}}
              ],
              "schemaVersion": 4,
              "objects": {
                "Person": [ { "friend": 2, "id": 1, "note": 1 }, { "id": 2, "friend": {"$ref": "Person", "$id": 1} } ],
                "Note": [ { "text": "no key given" } ]
              }
            }
            """
        let path = temporaryRealmPath()
        XCTAssertEqual(try RealmTransfer.importRealm(from: try file(text), to: path).objectCount, 3)
        let store = try open(path)
        XCTAssertEqual(store.schemaVersion, 4)
        XCTAssertEqual(try store.object("Person", primaryKey: .int(1)), ["id": .int(1), "friend": .int(2), "note": .int(1)])
        XCTAssertEqual(try store.object("Person", primaryKey: .int(2))?["friend"], .int(1))
    }

    func testProgressIsReported() throws {
        let store = try everyTypeRealm()
        var steps = [RealmTransfer.Progress]()
        var text = ""
        try RealmTransfer.export(store, pageSize: 1, progress: { steps.append($0) }) { text += $0 }
        XCTAssertEqual(steps.filter { $0.className == "Person" }.map(\.done), [1, 2, 3, 4])
        XCTAssertEqual(steps.last, RealmTransfer.Progress(step: .export, className: "Gadget", done: 1, total: 1))
        steps = []
        try RealmTransfer.importRealm(from: try file(text), to: temporaryRealmPath()) { steps.append($0) }
        XCTAssertTrue(steps.contains(RealmTransfer.Progress(step: .create, className: "Person", done: 4, total: nil)))
        XCTAssertEqual(steps.last, RealmTransfer.Progress(step: .link, className: "Gadget", done: 1, total: 1))
    }

    // MARK: - Refusals and failures

    func testImportRefusesAnExistingRealm() throws {
        let original = try everyTypeRealm()
        let exportPath = try file(try exportText(original))
        let existing = original.configuration.path!
        let before = try Data(contentsOf: URL(fileURLWithPath: existing))
        assertAtollError(try RealmTransfer.importRealm(from: exportPath, to: existing), .file,
                         "exists and is not empty", "import writes a new realm")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: existing)), before)
        XCTAssertEqual(try original.objects("All").count(), 3)

        // A stale WAL beside a new path would be replayed into the new realm.
        let stale = temporaryRealmPath()
        XCTAssertTrue(FileManager.default.createFile(atPath: stale + "-wal", contents: Data([1, 2, 3])))
        assertAtollError(try RealmTransfer.importRealm(from: exportPath, to: stale), .file, "-wal' exists")
        XCTAssertFalse(FileManager.default.fileExists(atPath: stale))

        // An empty file is a new realm.
        let empty = temporaryRealmPath()
        XCTAssertTrue(FileManager.default.createFile(atPath: empty, contents: Data()))
        XCTAssertEqual(try RealmTransfer.importRealm(from: exportPath, to: empty).objectCount, 14)
    }

    /// Imports `text` into a new path and into an empty file: both must fail with `code` and
    /// leave no file (the empty file empty).
    private func assertImportFails(_ text: String, _ code: AtollError.Code, _ substrings: String...,
                                   file: StaticString = #filePath, line: UInt = #line) throws {
        let exportPath = try self.file(text, "bad-\(UUID().uuidString).json")
        let path = temporaryRealmPath()
        let error = assertAtollError(try RealmTransfer.importRealm(from: exportPath, to: path), code, file: file, line: line)
        for s in substrings {
            XCTAssertTrue(error?.message.contains(s) ?? false, "'\(error?.message ?? "")' lacks '\(s)'", file: file, line: line)
        }
        let directory = (path as NSString).deletingLastPathComponent
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [], "a failed import leaves no file",
                       file: file, line: line)
        let empty = temporaryRealmPath()
        XCTAssertTrue(FileManager.default.createFile(atPath: empty, contents: Data()))
        assertAtollError(try RealmTransfer.importRealm(from: exportPath, to: empty), code, file: file, line: line)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: (empty as NSString).deletingLastPathComponent),
                       [(empty as NSString).lastPathComponent], file: file, line: line)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: empty)).count, 0, file: file, line: line)
    }

    func testFailedImportsLeaveNothing() throws {
        let good = try exportText(try everyTypeRealm())
        let header = #"{"format": "atoll-export", "version": 1, "schemaVersion": 1, "schema": [{"name": "P", "primaryKey": "id", "properties": {"id": "int", "n": "int", "p": "P?", "m": "mixed"}}], "objects": "#
        // The first pass: a wrong type, a duplicate key, an unknown property.
        try assertImportFails(header + #"{"P": [{"id": 1, "n": "x"}]}}"#, .typeMismatch, "object 0 of class 'P'", "'P.n' is int")
        try assertImportFails(header + #"{"P": [{"id": 1}, {"id": 1}]}}"#, .duplicatePrimaryKey, "object 1 of class 'P'")
        try assertImportFails(header + #"{"P": [{"id": 1, "nope": 1}]}}"#, .noSuchProperty, "no property 'nope'")
        // The second pass, after every object was created: a link to nothing.
        try assertImportFails(header + #"{"P": [{"id": 1, "p": 1}, {"id": 2, "p": 3}]}}"#, .notFound, "object 1 of class 'P'", "no P with primary key 3")
        try assertImportFails(header + #"{"P": [{"id": 1, "m": {"$ref": "P", "$id": 9}}]}}"#, .notFound)
        // Not an export, or not a finished one: the failure is found before anything is kept.
        try assertImportFails(header + #"{"P": [{"id": 1}]}"#, .invalidJSON, "expected '}'")
        try assertImportFails(header + #"{"P": [{"id": 1}]}} trailing"#, .invalidJSON, "the end of the file")
        try assertImportFails(header + #"{"P": [{"id": 1}, ]}}"#, .invalidJSON, "expected a value, found ']'")
        try assertImportFails(header + #"{"Q": []}}"#, .noSuchClass, "class 'Q'")
        try assertImportFails(header + #"{"P": [], "P": []}}"#, .invalidJSON, "twice")
        try assertImportFails(header + #"{"P": [[1]]}}"#, .invalidJSON, "an array, not an object")
        try assertImportFails(String(good.dropLast(40)), .invalidJSON)
        try assertImportFails(good.replacingOccurrences(of: #""version": 1"#, with: #""version": 2"#), .invalidJSON,
                              "format version 2", "reads version 1")
        try assertImportFails(good.replacingOccurrences(of: "atoll-export", with: "other"), .invalidJSON, "not an Atoll export")
        try assertImportFails(#"{"objects": {}, "format": "atoll-export"}"#, .invalidJSON, "\"format\" is missing (or comes after \"objects\")")
        try assertImportFails("[1, 2]", .invalidJSON, "expected '{'")
        try assertImportFails("", .invalidJSON, "the end of the file")
        try assertImportFails(#"{"format": "atoll-export", "version": 1, "schemaVersion": 0, "schema": [{"name": "P"}], "objects": {}}"#,
                              .schema, "needs a \"properties\" object")
        try assertImportFails(#"{"format": "atoll-export", "version": 1, "schemaVersion": 0, "schema": [{"name": "P", "primaryKey": "x", "properties": {"id": "int"}}], "objects": {}}"#,
                              .schema, "primary key 'x'")
    }

    func testImportOfAMissingFileCreatesNothing() throws {
        let path = temporaryRealmPath()
        assertAtollError(try RealmTransfer.importRealm(from: path + ".json", to: path), .file, "cannot open")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
    }
}
