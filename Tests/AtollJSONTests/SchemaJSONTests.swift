import AtollJSON
import AtollStore
import CJansson
import Foundation
import XCTest

final class SchemaJSONTests: XCTestCase {
    private func schema(_ text: String) throws -> Schema {
        try withJSON(text) { try SchemaJSON.schema($0) }
    }

    private func assertSchemaError(_ text: String, _ substrings: String..., file: StaticString = #filePath, line: UInt = #line) {
        let error = assertAtollError(try schema(text), .schema, file: file, line: line)
        for s in substrings {
            XCTAssertTrue(error?.message.contains(s) ?? false, "'\(error?.message ?? "")' lacks '\(s)'", file: file, line: line)
        }
    }

    /// A class with one property written as `type` (shorthand or object form).
    private func oneProperty(_ type: String) -> String {
        #"[{"name": "A", "properties": {"p": \#(type)}}, {"name": "Dog", "primaryKey": "id", "properties": {"id": "int"}}]"#
    }

    static let example = #"""
    [
      {"name": "Person", "primaryKey": "_id",
       "properties": {"_id": "objectId", "name": "string", "age": "int?", "tags": "string[]", "scores": "int?[]",
                      "dog": "Dog?", "dogs": "Dog[]", "address": "Address",
                      "born": {"type": "date", "optional": true},
                      "weight": {"type": "double", "default": 10.5},
                      "level": {"type": "int", "indexed": true, "default": 5},
                      "nicknames": {"type": "list", "objectType": "string"},
                      "maybe": {"type": "list", "objectType": "int", "optional": true},
                      "friend": {"type": "object", "objectType": "Person"},
                      "pal": {"type": "Person"},
                      "since": {"type": "date", "default": {"$date": "2026-01-01T00:00:00Z"}},
                      "dec": "decimal128", "dec2": "decimal", "u": "uuid?", "bin": "data", "f": "float", "b": "bool"}},
      {"name": "Dog", "primaryKey": "id", "properties": {"id": "int", "name": {"type": "string", "indexed": true}}},
      {"name": "Address", "embedded": true, "properties": {"city": "string"}}
    ]
    """#

    static let exampleSchema = Schema([
        ObjectSchema(name: "Person", primaryKey: "_id", properties: [
            Property(name: "_id", type: .objectId),
            Property(name: "name", type: .string),
            Property(name: "age", type: .int, isOptional: true),
            Property(name: "tags", type: .string, collection: .list),
            Property(name: "scores", type: .int, collection: .list, isOptional: true),
            Property(name: "dog", type: .object, objectType: "Dog"),
            Property(name: "dogs", type: .object, objectType: "Dog", collection: .list),
            Property(name: "address", type: .object, objectType: "Address"),
            Property(name: "born", type: .date, isOptional: true),
            Property(name: "weight", type: .double, defaultValue: .double(10.5)),
            Property(name: "level", type: .int, isIndexed: true, defaultValue: .int(5)),
            Property(name: "nicknames", type: .string, collection: .list),
            Property(name: "maybe", type: .int, collection: .list, isOptional: true),
            Property(name: "friend", type: .object, objectType: "Person"),
            Property(name: "pal", type: .object, objectType: "Person"),
            Property(name: "since", type: .date, defaultValue: .date(Timestamp(milliseconds: 1_767_225_600_000))),
            Property(name: "dec", type: .decimal128),
            Property(name: "dec2", type: .decimal128),
            Property(name: "u", type: .uuid, isOptional: true),
            Property(name: "bin", type: .data),
            Property(name: "f", type: .float),
            Property(name: "b", type: .bool),
        ]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [
            Property(name: "id", type: .int), Property(name: "name", type: .string, isIndexed: true),
        ]),
        ObjectSchema(name: "Address", isEmbedded: true, properties: [Property(name: "city", type: .string)]),
    ])

    func testShorthandAndObjectNotation() throws {
        let parsed = try schema(Self.example)
        XCTAssertEqual(parsed, Self.exampleSchema)
        XCTAssertNoThrow(try parsed.validate())
        XCTAssertEqual(parsed["Person"]?[property: "dog"]?.typeName, "Dog?")
        XCTAssertEqual(parsed["Person"]?[property: "dogs"]?.typeName, "Dog[]")
        XCTAssertEqual(parsed["Person"]?[property: "scores"]?.typeName, "int?[]")
    }

    func testAParsedSchemaOpensAStore() throws {
        let store = try Store(Configuration(path: temporaryRealmPath(), schema: try schema(Self.example)))
        defer { store.close() }
        try store.write {
            try store.create("Person", ["_id": .objectId(ObjectId(hex: "507f1f77bcf86cd799439011")!), "name": .string("Ann"),
                                        "address": .object(["city": .string("Oslo")])])
        }
        let ann = try XCTUnwrap(store.objects("Person").documents().first)
        XCTAssertEqual(ann["weight"], .double(10.5))
        XCTAssertEqual(ann["level"], .int(5))
        XCTAssertEqual(ann["since"], .date(Timestamp(milliseconds: 1_767_225_600_000)))
        XCTAssertEqual(ann["address"], .object(["city": .string("Oslo")]))
    }

    func testAnUnknownTypeNameIsALinkToAMissingClass() throws {
        let parsed = try schema(oneProperty(#""strnig""#))
        XCTAssertEqual(parsed["A"]?[property: "p"], Property(name: "p", type: .object, objectType: "strnig"))
        assertAtollError(try parsed.validate(), .schema, "property 'A.p' links to class 'strnig', which is not in the schema")
    }

    func testUnsupportedTypes() {
        assertSchemaError(oneProperty(#""counter""#), "property 'A.p': type 'counter' is not supported")
        assertSchemaError(oneProperty(#"{"type": "list", "objectType": "set"}"#), "a list of set is not supported")
        assertSchemaError(oneProperty(#"{"type": "linkingObjects", "objectType": "Dog"}"#), #"linkingObjects needs a "property" string"#)
        assertSchemaError(oneProperty(#"{"type": "int", "property": "x"}"#), #""property" belongs to linkingObjects properties only"#)
        assertSchemaError(oneProperty(#""Dog?<>""#), "sets of objects cannot hold null")
        assertSchemaError(oneProperty(#"{"type": "set", "objectType": "Dog", "optional": true}"#), "sets of objects cannot hold null")
    }

    func testCollectionsMixedAndBacklinks() throws {
        let text = #"""
            [{"name": "A", "primaryKey": "id", "properties": {"id": "int", "s": "int<>", "os": "string?<>", "d": "int{}",
              "ld": "Dog{}", "m": "mixed", "ml": "mixed[]", "md": "mixed{}", "sd": "Dog<>",
              "s2": {"type": "set", "objectType": "uuid"}, "d2": {"type": "dictionary", "objectType": "Dog"}}},
             {"name": "Dog", "primaryKey": "id", "properties": {"id": "int",
              "owners": {"type": "linkingObjects", "objectType": "A", "property": "sd"}}}]
            """#
        let parsed = try schema(text)
        try parsed.validate()
        let a = try XCTUnwrap(parsed["A"])
        XCTAssertEqual(a[property: "s"], Property(name: "s", type: .int, collection: .set))
        XCTAssertEqual(a[property: "os"], Property(name: "os", type: .string, collection: .set, isOptional: true))
        XCTAssertEqual(a[property: "d"], Property(name: "d", type: .int, collection: .dictionary))
        XCTAssertEqual(a[property: "ld"], Property(name: "ld", type: .object, objectType: "Dog", collection: .dictionary, isOptional: true))
        XCTAssertEqual(a[property: "m"], Property(name: "m", type: .mixed, isOptional: true))
        XCTAssertEqual(a[property: "ml"]?.typeName, "mixed[]")
        XCTAssertEqual(a[property: "md"]?.typeName, "mixed{}")
        XCTAssertEqual(a[property: "sd"]?.typeName, "Dog<>")
        XCTAssertEqual(a[property: "s2"]?.typeName, "uuid<>")
        XCTAssertEqual(a[property: "d2"], a[property: "ld"].map { var p = $0; p.name = "d2"; return p })
        XCTAssertEqual(parsed["Dog"]?[property: "owners"],
                       Property(name: "owners", type: .linkingObjects, objectType: "A", linkOriginProperty: "sd"))
        XCTAssertEqual(parsed["Dog"]?[property: "owners"]?.typeName, "linkingObjects<A.sd>")
        // The object form written back reads back the same.
        let json = SchemaJSON.make(parsed)
        defer { json_decref(json) }
        XCTAssertEqual(try SchemaJSON.schema(json), parsed)
    }

    func testMalformedProperties() {
        assertSchemaError(oneProperty("5"), "property 'A.p' must be a type string or an object, not an integer")
        assertSchemaError(oneProperty(#"{"type": "int", "indexd": true}"#), "property 'A.p': unknown key 'indexd'")
        assertSchemaError(oneProperty(#"{"optional": true}"#), #"property 'A.p' needs a "type" string"#)
        assertSchemaError(oneProperty(#"{"type": "list"}"#), #"property 'A.p': a list needs an "objectType""#)
        assertSchemaError(oneProperty(#"{"type": "object"}"#), #"an object property needs an "objectType""#)
        assertSchemaError(oneProperty(#"{"type": "object", "objectType": "Dog", "optional": false}"#),
                          "links to objects are always optional")
        assertSchemaError(oneProperty(#"{"type": "Dog", "optional": false}"#), "links to objects are always optional")
        assertSchemaError(oneProperty(#""Dog?[]""#), "lists of objects cannot hold null ('Dog?[]')")
        assertSchemaError(oneProperty(#"{"type": "list", "objectType": "Dog", "optional": true}"#),
                          "lists of objects cannot hold null")
        assertSchemaError(oneProperty(#""list""#), "type 'list' needs the object form with an \"objectType\"")
        assertSchemaError(oneProperty(#""?""#), "property 'A.p': empty type")
        assertSchemaError(oneProperty(#"{"type": "int", "optional": "yes"}"#), #""optional" must be true or false"#)
        assertSchemaError(oneProperty(#"{"type": "int", "objectType": 5}"#), #""objectType" must be a string"#)
        assertSchemaError(oneProperty(#"{"type": "date", "default": {"$date": "nope"}}"#),
                          "property 'A.p': default: invalid $date 'nope'")
    }

    func testMalformedClasses() {
        assertSchemaError(#"{"name": "A", "properties": {}}"#, "the schema must be an array of object schemas, not an object")
        assertSchemaError("[5]", "schema entry 0 must be an object, not an integer")
        assertSchemaError(#"[{"name": "A", "properties": {}}, {"properties": {}}]"#, #"schema entry 1 needs a "name" string"#)
        assertSchemaError(#"[{"name": 5, "properties": {}}]"#, #"schema entry 0 needs a "name" string"#)
        assertSchemaError(#"[{"name": "A", "properties": {}, "primarykey": "x"}]"#, "class 'A': unknown key 'primarykey'")
        assertSchemaError(#"[{"name": "A"}]"#, #"class 'A' needs a "properties" object"#)
        assertSchemaError(#"[{"name": "A", "properties": []}]"#, #"class 'A' needs a "properties" object"#)
        assertSchemaError(#"[{"name": "A", "embedded": "yes", "properties": {}}]"#, #"class 'A': "embedded" must be true or false"#)
        assertSchemaError(#"[{"name": "A", "asymmetric": true, "properties": {}}]"#, "asymmetric classes are not supported")
        assertSchemaError(#"[{"name": "A", "primaryKey": 1, "properties": {}}]"#, #"class 'A': "primaryKey" must be a string"#)
    }

    func testNullAndFalseOptionalKeysAreAccepted() throws {
        let parsed = try schema(#"[{"name": "A", "primaryKey": null, "embedded": false, "asymmetric": false, "properties": {"p": "int"}}]"#)
        XCTAssertEqual(parsed, Schema([ObjectSchema(name: "A", properties: [Property(name: "p", type: .int)])]))
    }

    func testMakeRoundTrip() throws {
        let made = dumpAndRelease(SchemaJSON.make(Self.exampleSchema))
        XCTAssertEqual(try schema(made), Self.exampleSchema)
    }

    func testMakeWritesTheObjectForm() {
        let small = Schema([
            ObjectSchema(name: "Dog", primaryKey: "id", properties: [
                Property(name: "id", type: .int),
                Property(name: "name", type: .string, isOptional: true, isIndexed: true),
                Property(name: "owner", type: .object, objectType: "Person"),
                Property(name: "tags", type: .string, collection: .list),
                Property(name: "n", type: .int, defaultValue: .int(5)),
            ]),
            ObjectSchema(name: "Person", isEmbedded: true, properties: []),
        ])
        XCTAssertEqual(dumpAndRelease(SchemaJSON.make(small)),
                       #"[{"name":"Dog","primaryKey":"id","embedded":false,"properties":{"#
                       + #""id":{"type":"int","optional":false,"indexed":false},"#
                       + #""name":{"type":"string","optional":true,"indexed":true},"#
                       + #""owner":{"type":"object","objectType":"Person","optional":true,"indexed":false},"#
                       + #""tags":{"type":"list","objectType":"string","optional":false,"indexed":false},"#
                       + #""n":{"type":"int","optional":false,"indexed":false,"default":5}}},"#
                       + #"{"name":"Person","embedded":true,"properties":{}}]"#)
    }

    func testAStoredSchemaRoundTripsThroughJSON() throws {
        let path = temporaryRealmPath()
        let first = try Store(Configuration(path: path, schema: try schema(Self.example)))
        first.close()
        let reopened = try Store(Configuration(path: path))
        defer { reopened.close() }
        let made = dumpAndRelease(SchemaJSON.make(reopened.schema))
        XCTAssertEqual(try schema(made), Self.exampleSchema)
    }
}
