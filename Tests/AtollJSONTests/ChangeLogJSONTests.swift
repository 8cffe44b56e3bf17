import AtollJSON
import AtollStore
import XCTest

final class ChangeLogJSONTests: XCTestCase {
    static let schema = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            Property(name: "id", type: .string), Property(name: "name", type: .string),
        ]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [
            Property(name: "id", type: .int), Property(name: "name", type: .string),
            Property(name: "owner", type: .object, objectType: "Person"),
            Property(name: "tags", type: .string, collection: .list),
            Property(name: "address", type: .object, objectType: "Address"),
        ]),
        ObjectSchema(name: "Address", isEmbedded: true, properties: [Property(name: "city", type: .string)]),
    ])

    /// A document's entries as a dictionary: JSON objects are unordered.
    private func dict(_ value: Value?) -> [String: Value]? {
        guard case .object(let doc)? = value else { return nil }
        return Dictionary(uniqueKeysWithValues: doc.map { ($0, $1) })
    }

    func testTheShapeOfTheLog() throws {
        let store = try Store(Configuration(path: temporaryRealmPath(), schema: Self.schema, changeLogValues: true))
        defer { store.close() }
        try store.write {
            try store.create("Person", ["id": .string("p1"), "name": .string("Ann")])
            try store.create("Dog", ["id": .int(1), "name": .string("Rex"), "owner": .string("p1"),
                                     "tags": .list([.string("a"), .string("b")]), "address": .object(["city": .string("Oslo")])])
        }
        try store.write { try store.delete("Dog", primaryKey: .int(1)) }
        let sets = try store.changes(after: 0)
        let text = dumpAndRelease(ChangeLogJSON.make(sets))

        guard case .list(let entries) = try EJSON.parse(text) else { return XCTFail("not an array: \(text)") }
        XCTAssertEqual(entries.count, 2)
        let first = try XCTUnwrap(dict(entries.first))
        XCTAssertEqual(Set(first.keys), ["version", "timestamp", "instructions"])
        XCTAssertEqual(first["version"], .int(1))
        XCTAssertEqual(first["timestamp"], .date(sets[0].timestamp))
        XCTAssertEqual(dict(entries.last)?["version"], .int(2))

        let instructions = try XCTUnwrap(first["instructions"]?.listValue).map { dict($0) }
        let expected: [[String: Value]] = [
            ["op": .string("create"), "class": .string("Person"), "primaryKey": .string("p1"), "path": .list([])],
            ["op": .string("set"), "class": .string("Person"), "primaryKey": .string("p1"), "path": .list([.string("name")]),
             "value": .string("Ann")],
            ["op": .string("create"), "class": .string("Dog"), "primaryKey": .int(1), "path": .list([])],
            ["op": .string("set"), "class": .string("Dog"), "primaryKey": .int(1), "path": .list([.string("name")]),
             "value": .string("Rex")],
            ["op": .string("set"), "class": .string("Dog"), "primaryKey": .int(1), "path": .list([.string("owner")]),
             "value": .link(ObjectLink(className: "Person", primaryKey: .string("p1")))],
            ["op": .string("set"), "class": .string("Dog"), "primaryKey": .int(1), "path": .list([.string("address")]),
             "value": .object(["city": .string("Oslo")])],
            ["op": .string("listInsert"), "class": .string("Dog"), "primaryKey": .int(1), "path": .list([.string("tags")]),
             "value": .string("a"), "index": .int(0)],
            ["op": .string("listInsert"), "class": .string("Dog"), "primaryKey": .int(1), "path": .list([.string("tags")]),
             "value": .string("b"), "index": .int(1)],
        ]
        XCTAssertEqual(instructions, expected)
        XCTAssertEqual(dict(entries.last)?["instructions"]?.listValue?.map { dict($0) },
                       [["op": .string("erase"), "class": .string("Dog"), "primaryKey": .int(1), "path": .list([])]])

        // The documented text of one instruction.
        XCTAssertTrue(text.hasPrefix(#"[{"version":1,"timestamp":{"$date":"\#(sets[0].timestamp.iso8601)"},"instructions":[{"op":"create","class":"Person","primaryKey":"p1","path":[]},"#),
                      text)
    }

    func testEveryInstructionField() {
        let listSet = Instruction(.listSet, "Dog", .int(1), path: [.key("addresses"), .index(2), .key("tags")],
                                  value: .date(Timestamp(milliseconds: 0)), index: 3)
        XCTAssertEqual(dumpAndRelease(ChangeLogJSON.make(listSet)),
                       #"{"op":"listSet","class":"Dog","primaryKey":1,"path":["addresses",2,"tags"],"value":{"$date":"1970-01-01T00:00:00.000Z"},"index":3}"#)
        let move = Instruction(.listMove, "Dog", .objectId(ObjectId(hex: "507f1f77bcf86cd799439011")!), path: [.key("tags")],
                               index: 0, toIndex: 4)
        XCTAssertEqual(dumpAndRelease(ChangeLogJSON.make(move)),
                       #"{"op":"listMove","class":"Dog","primaryKey":{"$oid":"507f1f77bcf86cd799439011"},"path":["tags"],"index":0,"toIndex":4}"#)
        for op in Instruction.Op.allCases {
            let text = dumpAndRelease(ChangeLogJSON.make(Instruction(op, "C", .null)))
            XCTAssertEqual(text, #"{"op":"\#(op.name)","class":"C","primaryKey":null,"path":[]}"#)
        }
        XCTAssertEqual(Instruction.Op.allCases.map(\.name),
                       ["create", "erase", "set", "listInsert", "listErase", "listSet", "listMove", "listClear",
                        "setInsert", "setErase", "setClear", "dictionarySet", "dictionaryErase", "dictionaryClear", "addInteger"])
    }

    func testAnEmptyLog() {
        XCTAssertEqual(dumpAndRelease(ChangeLogJSON.make([])), "[]")
    }
}
