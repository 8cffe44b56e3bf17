import AtollJSON
import AtollStore
import XCTest

final class ConfigurationJSONTests: XCTestCase {
    private func configuration(_ text: String) throws -> Configuration {
        try ConfigurationJSON.configuration(text)
    }

    func testEveryKey() throws {
        let c = try configuration(#"""
            {"path": "/tmp/x.realm", "inMemory": false, "schemaVersion": 3, "readOnly": true, "writeTimeoutMs": 250,
             "schema": [{"name": "Dog", "primaryKey": "id", "properties": {"id": "int", "name": "string?"}}]}
            """#)
        XCTAssertEqual(c.path, "/tmp/x.realm")
        XCTAssertFalse(c.inMemory)
        XCTAssertEqual(c.schemaVersion, 3)
        XCTAssertTrue(c.readOnly)
        XCTAssertEqual(c.writeTimeoutMilliseconds, 250)
        XCTAssertEqual(c.schema, Schema([ObjectSchema(name: "Dog", primaryKey: "id", properties: [
            Property(name: "id", type: .int), Property(name: "name", type: .string, isOptional: true),
        ])]))
    }

    func testDefaults() throws {
        let c = try configuration(#"{"path": "a.realm"}"#)
        XCTAssertEqual(c.path, "a.realm")
        XCTAssertFalse(c.inMemory)
        XCTAssertNil(c.schema)
        XCTAssertEqual(c.schemaVersion, 0)
        XCTAssertFalse(c.readOnly)
        XCTAssertNil(c.writeTimeoutMilliseconds)
        XCTAssertNil(try configuration("{}").path)
    }

    func testDurability() throws {
        XCTAssertEqual(try configuration(#"{"path": "a"}"#).durability, .full)
        XCTAssertEqual(try configuration(#"{"durability": "full"}"#).durability, .full)
        XCTAssertEqual(try configuration(#"{"durability": "normal"}"#).durability, .normal)
        for bad in [#""fast""#, #""FULL""#, "1", "null", "true"] {
            XCTAssertThrowsError(try configuration(#"{"durability": \#(bad)}"#), bad) {
                XCTAssertEqual(($0 as? AtollError)?.code, .invalidArgument, bad)
            }
        }
    }

    func testMinusOneWaitsForeverAndNullSchemaMeansStored() throws {
        let c = try configuration(#"{"path": "a", "writeTimeoutMs": -1, "schema": null}"#)
        XCTAssertNil(c.writeTimeoutMilliseconds)
        XCTAssertNil(c.schema)
        XCTAssertEqual(try configuration(#"{"writeTimeoutMs": 0}"#).writeTimeoutMilliseconds, 0)
    }

    func testUnknownKeys() {
        assertAtollError(try configuration(#"{"pth": "a.realm"}"#), .invalidArgument, #"unknown configuration key "pth""#)
        assertAtollError(try configuration(#"{"path": "a", "encryptionKey": "x"}"#), .invalidArgument,
                         #"unknown configuration key "encryptionKey""#)
        assertAtollError(try configuration(#"{"Path": "a"}"#), .invalidArgument, #""Path""#)
    }

    func testWrongTypes() {
        assertAtollError(try configuration(#"{"path": 5}"#), .invalidArgument, #"configuration "path" must be a string"#)
        assertAtollError(try configuration(#"{"path": null}"#), .invalidArgument, #"configuration "path" must be a string"#)
        assertAtollError(try configuration(#"{"inMemory": "yes"}"#), .invalidArgument, #"configuration "inMemory" must be true or false"#)
        assertAtollError(try configuration(#"{"readOnly": 1}"#), .invalidArgument, #"configuration "readOnly" must be true or false"#)
        assertAtollError(try configuration(#"{"schemaVersion": "3"}"#), .invalidArgument, #"configuration "schemaVersion" must be an integer"#)
        assertAtollError(try configuration(#"{"schemaVersion": 1.0}"#), .invalidArgument, "must be an integer")
        assertAtollError(try configuration(#"{"schemaVersion": -1}"#), .invalidArgument, #""schemaVersion" must be >= 0, not -1"#)
        assertAtollError(try configuration(#"{"writeTimeoutMs": 2.5}"#), .invalidArgument, #""writeTimeoutMs" must be an integer"#)
        assertAtollError(try configuration(#"{"writeTimeoutMs": -2}"#), .invalidArgument, #""writeTimeoutMs" must be -1 or >= 0, not -2"#)
        assertAtollError(try configuration(#"{"schema": {"name": "A"}}"#), .schema, "must be an array of object schemas")
        assertAtollError(try configuration(#"{"schema": [{"name": "A", "properties": {"p": "counter"}}]}"#), .schema,
                         "type 'counter' is not supported")
    }

    func testNotAnObjectOrNotJSON() {
        assertAtollError(try configuration("[1]"), .invalidJSON, "the configuration must be a JSON object, not an array")
        assertAtollError(try configuration(#"{"path": "a",}"#), .invalidJSON, "invalid JSON:", "line 1")
    }

    func testAParsedConfigurationOpensAStore() throws {
        let path = temporaryRealmPath()
        let escaped = path.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        let c = try configuration(#"{"path": "\#(escaped)", "schemaVersion": 2, "schema": [{"name": "Dog", "primaryKey": "id", "properties": {"id": "int"}}]}"#)
        let store = try Store(c)
        defer { store.close() }
        XCTAssertEqual(store.schemaVersion, 2)
        try store.write { try store.create("Dog", ["id": .int(1)]) }
        XCTAssertEqual(try store.objects("Dog").count(), 1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
    }
}
