import AtollJSON
import AtollProtocol
import AtollStore
import XCTest

/// The wire form of changesets (docs/protocol.md, "Instructions and changesets"): a new
/// object's first values fold into its `create`, runs of them into `creates` groups, a
/// bootstrap's objects into `upserts` groups, and all unfold into the same instructions.
final class WireTests: XCTestCase {
    let clock = Clock(milliseconds: 1_764_489_600_000, node: 17)

    func set(_ pk: Int64, _ path: [PathElement], _ value: Value?) -> SyncInstruction {
        SyncInstruction(.set, "Task", .int(pk), path: path, value: value)
    }

    /// The changeset after encoding to text and decoding again.
    func roundTrip(_ instructions: [SyncInstruction]) throws -> (SyncChangeset, [Value]) {
        let cs = SyncChangeset(clientVersion: 3, clock: clock, instructions: instructions)
        let value = try EJSON.parse(Wire.encode(cs.wireValue))
        guard case .object(let d) = value, case .list(let wire)? = d["instructions"] else {
            XCTFail("not a changeset")
            return (cs, [])
        }
        return (try SyncChangeset(wire: value), wire)
    }

    func testANewObjectsValuesFoldIntoItsCreateAndUnfoldInOrder() throws {
        let instructions = [
            SyncInstruction(.create, "Task", .int(1)),
            set(1, [.key("name")], .string("Call Ann")),
            set(1, [.key("done")], .bool(false)),
            set(1, [.key("due")], .null),
            SyncInstruction(.create, "Task", .int(2)),
        ]
        let (back, wire) = try roundTrip(instructions)
        XCTAssertEqual(back.instructions, instructions)
        XCTAssertEqual(wire.count, 2)
        guard case .object(let first) = wire[0], case .object(let object)? = first["object"] else { return XCTFail("not folded: \(wire)") }
        XCTAssertEqual(object.keys, ["name", "done", "due"])
        guard case .object(let second) = wire[1] else { return XCTFail() }
        XCTAssertNil(second["object"], "a create without values has no object")
    }

    func testOnlyTheObjectsOwnTopLevelSetsFoldOnceEach() throws {
        let instructions = [
            SyncInstruction(.create, "Task", .int(1)),
            set(1, [.key("name")], .string("a")),
            set(1, [.key("name")], .string("b")),          // a second write of one property: not folded
            SyncInstruction(.create, "Task", .int(2)),
            set(1, [.key("done")], .bool(true)),          // another object's set: not folded
            SyncInstruction(.create, "Task", .int(3)),
            set(3, [.key("address"), .key("city")], .string("Oslo")),   // a path into an embedded object
            SyncInstruction(.create, "Task", .int(4)),
            SyncInstruction(.listInsert, "Task", .int(4), path: [.key("tags")], value: .string("x"),
                            element: ElementID(clock, 9), after: nil),
            set(4, [.key("name")], .string("after the list")),
        ]
        let (back, wire) = try roundTrip(instructions)
        XCTAssertEqual(back.instructions, instructions)
        XCTAssertEqual(wire.count, instructions.count - 1, "only the first set folds")
    }

    func testAFoldedCreateFromAPeerIsReadAndABadOneRefused() throws {
        let text = """
        {"clock": [1764489600000, 0, 5], "instructions": [
          {"op": "create", "class": "Task", "primaryKey": 7, "object": {"name": "x", "tags": null}}]}
        """
        let cs = try SyncChangeset(wire: EJSON.parse(text))
        XCTAssertEqual(cs.instructions, [SyncInstruction(.create, "Task", .int(7)), set(7, [.key("name")], .string("x")),
                                         set(7, [.key("tags")], .null)])
        let bad = #"{"clock": [1, 0, 5], "instructions": [{"op": "create", "class": "Task", "primaryKey": 7, "object": [1]}]}"#
        XCTAssertThrowsError(try SyncChangeset(wire: EJSON.parse(bad))) { error in
            XCTAssertTrue("\(error)".contains("\"object\" must be an object"), "\(error)")
        }
    }

    // MARK: - Instructions as values

    func testACopiedInstructionChangesAloneAndEqualsWhatHoldsTheSame() {
        var a = SyncInstruction(.upsert, "Task", .int(1))
        a.object = ["_id": .int(1), "name": .string("a")]
        a.clock = clock
        a.fieldClocks["name"] = clock
        var b = a
        b.fieldClocks["done"] = .zero
        b.clock = .zero
        b.lists["tags"] = ListSequence()
        XCTAssertEqual(a.fieldClocks, ["name": clock], "the copy's change is its own")
        XCTAssertEqual(a.clock, clock)
        XCTAssertEqual(a.lists, [:])
        XCTAssertNotEqual(a, b)
        b.fieldClocks["done"] = nil
        b.clock = clock
        b.lists = [:]
        XCTAssertEqual(a, b)
        XCTAssertEqual(a.hashValue, b.hashValue)
        // Fields set back to nothing: equal to an instruction that never had them.
        let plain = SyncInstruction(.set, "Task", .int(1), path: [.key("name")], value: .string("x"))
        var touched = plain
        touched.clock = clock
        touched.clock = nil
        XCTAssertEqual(plain, touched)
        XCTAssertEqual(Set([plain, touched]).count, 1)
    }

    // MARK: - New objects in groups

    func testRunsOfNewObjectsThatSetTheSamePropertiesTravelAsCreatesGroups() throws {
        func create(_ cls: String, _ pk: Int64, _ values: KeyValuePairs<String, Value>) -> [SyncInstruction] {
            [SyncInstruction(.create, cls, .int(pk))] + values.map { SyncInstruction(.set, cls, .int(pk), path: [.key($0.key)], value: $0.value) }
        }
        let instructions = create("Task", 1, ["name": .string("a"), "done": .bool(false)])
            + create("Task", 2, ["name": .string("b"), "done": .bool(true)])
            + create("Task", 3, ["name": .string("c"), "done": .null])
            + create("Task", 4, ["done": .bool(true), "name": .string("d")])       // another order: its own form
            + create("Person", 5, ["name": .string("e")])
            + create("Person", 6, ["name": .string("f")])
            + [set(6, [.key("done")], .bool(true))]                               // not the new object's: ends the run
            + create("Person", 7, ["name": .string("g")])
        let (back, wire) = try roundTrip(instructions)
        XCTAssertEqual(back.instructions, instructions)
        let forms = wire.map { value -> String in
            guard case .object(let d) = value, case .string(let op)? = d["op"], case .string(let cls)? = d["class"] else { return "?" }
            if case .list(let keys)? = d["primaryKeys"] { return "\(op) \(cls) \(keys.count)" }
            return "\(op) \(cls)"
        }
        XCTAssertEqual(forms, ["creates Task 3", "create Task", "creates Person 2", "set Task", "create Person"])
        guard case .object(let group) = wire[0] else { return XCTFail() }
        XCTAssertEqual(group["fields"], .list([.string("name"), .string("done")]))
        XCTAssertEqual(group["objects"], .list([.list([.string("a"), .bool(false)]), .list([.string("b"), .bool(true)]),
                                                 .list([.string("c"), .null])]))
    }

    func testABadCreatesGroupIsRefusedWithWhatIsWrong() throws {
        let good: [String: String] = ["class": #""Task""#, "fields": #"["name", "done"]"#, "primaryKeys": "[1, 2]",
                                      "objects": #"[["a", true], ["b", false]]"#]
        func instructions(_ changes: [String: String?]) throws -> [SyncInstruction] {
            var merged = good
            for (k, v) in changes { merged[k] = v }
            let fields = merged.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \($0.value)" }
            let text = #"[{"op": "creates", "# + fields.joined(separator: ", ") + "}]"
            guard case .list(let values) = try EJSON.parse(text) else { throw ProtocolError("not a list") }
            return try SyncInstruction.instructions(wire: values)
        }
        XCTAssertEqual(try instructions([:]).map(\.op), [.create, .set, .set, .create, .set, .set])
        let bad: [([String: String?], String)] = [
            (["class": nil], "\"class\" must be a string"),
            (["fields": #"["name", "name"]"#], "distinct property names"),
            (["fields": #"["name", 2]"#], "distinct property names"),
            (["fields": #""name""#], "\"fields\" must be an array"),
            (["primaryKeys": "[1]"], "one primary key per object"),
            (["objects": #"[["a", true], ["b"]]"#], "one value per field"),
            (["objects": #"[["a", true], {"name": "b"}]"#], "one value per field"),
        ]
        for (change, message) in bad {
            XCTAssertThrowsError(try instructions(change), "\(change)") { error in
                XCTAssertTrue("\(error)".contains(message), "\(change): \(error)")
            }
        }
    }

    // MARK: - Upserts in groups

    func upsert(_ pk: Int64, _ object: Document, clock: Clock) -> SyncInstruction {
        var u = SyncInstruction(.upsert, "Task", .int(pk))
        u.object = object
        u.clock = clock
        return u
    }

    func testABootstrapsPlainUpsertsTravelAsGroupsAndComeBackTheSame() throws {
        let later = Clock(milliseconds: 1_764_489_600_500, node: 3)
        var withFieldClock = upsert(4, ["_id": .int(4), "name": .string("d")], clock: clock)
        withFieldClock.fieldClocks = ["name": later]
        var other = upsert(9, ["_id": .int(9), "name": .string("z")], clock: clock)
        other.className = "Note"
        let upserts = [
            upsert(1, ["_id": .int(1), "name": .string("a")], clock: clock),
            upsert(2, ["_id": .int(2), "name": .string("b")], clock: later),
            upsert(3, ["_id": .int(3), "name": .null], clock: clock),
            withFieldClock,                                                          // needs its field clocks
            upsert(5, ["_id": .int(5), "name": .string("e")], clock: clock),
            upsert(6, ["_id": .int(6), "name": .string("f"), "done": .bool(true)], clock: clock),   // other fields
            upsert(7, ["_id": .int(7), "name": .string("g"), "done": .bool(false)], clock: clock),
            other,                                                                   // another class
        ]
        let grouped = SyncInstruction.groupedWireValues(upserts[...], primaryKey: "_id")
        XCTAssertEqual(grouped.map(\.range), [0..<3, 3..<4, 4..<5, 5..<7, 7..<8])
        guard case .object(let group) = grouped[0].value else { return XCTFail("not an object") }
        XCTAssertEqual(group["op"], .string("upserts"))
        XCTAssertEqual(group["fields"], .list([.string("_id"), .string("name")]))
        XCTAssertEqual(group["clocks"], .list([clock.value, later.value]), "each clock once")
        XCTAssertEqual(group["clock"], .list([.int(0), .int(1), .int(0)]))
        // Through text and back: the same upserts, in order.
        let text = "[" + grouped.map { Wire.encode($0.value) }.joined(separator: ",") + "]"
        guard case .list(let values) = try EJSON.parse(text) else { return XCTFail("not a list") }
        XCTAssertEqual(try SyncInstruction.instructions(wire: values), upserts)
    }

    func testABadUpsertsGroupIsRefusedWithWhatIsWrong() throws {
        let good: [String: String] = ["class": #""Task""#, "key": #""_id""#, "fields": #"["_id", "name"]"#,
                                      "objects": #"[[1, "a"], [2, "b"]]"#, "clocks": "[[1, 0, 5]]", "clock": "[0, 0]"]
        func instructions(_ changes: [String: String]) throws -> [SyncInstruction] {
            let fields = good.merging(changes) { $1 }.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \($0.value)" }
            let text = #"[{"op": "upserts", "# + fields.joined(separator: ", ") + "}]"
            guard case .list(let values) = try EJSON.parse(text) else { throw ProtocolError("not a list") }
            return try SyncInstruction.instructions(wire: values)
        }
        XCTAssertEqual(try instructions([:]).map(\.primaryKey), [.int(1), .int(2)])
        let bad: [([String: String], String)] = [
            (["key": #""id""#], "\"key\" must be one of \"fields\""),
            (["fields": #"["_id", "_id"]"#], "distinct property names"),
            (["objects": #"[[1, "a"], [2]]"#], "one value per field"),
            (["objects": #"[[1, "a"], {"_id": 2}]"#], "one value per field"),
            (["clock": "[0]"], "one clock per object"),
            (["clock": "[0, 1]"], "indexes into \"clocks\""),
            (["clocks": "[[1, 0]]"], "\"clocks\" holds clocks"),
        ]
        for (change, message) in bad {
            XCTAssertThrowsError(try instructions(change), "\(change)") { error in
                XCTAssertTrue("\(error)".contains(message), "\(change): \(error)")
            }
        }
    }

    // MARK: - Clocks as text (metadata tables)

    func testAClocksTextComesBackTheSameAndBadTextIsRefused() {
        for c in [clock, Clock.zero, Clock(milliseconds: .max, counter: 7, node: .max), Clock(milliseconds: 5, counter: -1, node: 2)] {
            XCTAssertEqual(Clock(text: c.description), c)
        }
        for bad in ["", "1.2", "1.2.3.4", "1..3", ".1.2", "1.2.", "a.b.c", "1.2.3 ", "--1.2.3", "1-.2.3", "9223372036854775808.0.1"] {
            XCTAssertNil(Clock(text: bad), bad)
        }
    }

    /// Object identities hash by key alone: objects of two classes with one key stay two.
    func testObjectsOfTwoClassesWithOneKeyAreTwoAndGroupByClassInOrder() {
        let ids = [ObjectID("Task", .int(1)), ObjectID("Note", .int(1)), ObjectID("Task", .string("1")),
                   ObjectID("Task", .int(2)), ObjectID("Note", .int(3))]
        XCTAssertEqual(Set(ids).count, 5)
        XCTAssertEqual(Set(ids + ids).count, 5)
        let grouped = ids.keysByClass
        XCTAssertEqual(grouped.map(\.className), ["Task", "Note"])
        XCTAssertEqual(grouped.map(\.keys), [[.int(1), .string("1"), .int(2)], [.int(1), .int(3)]])
        // The objects of instructions, each once in the order of its first instruction.
        let instructions = [SyncInstruction(.create, "Task", .int(1)), SyncInstruction(.create, "Note", .int(1)),
                            SyncInstruction(.erase, "Task", .int(1)), SyncInstruction(.create, "Note", .int(1)),
                            SyncInstruction(.create, "Task", .int(2))]
        XCTAssertEqual(instructions.objectIDs, [ObjectID("Task", .int(1)), ObjectID("Note", .int(1)), ObjectID("Task", .int(2))])
        XCTAssertEqual([SyncInstruction]().objectIDs, [])
    }
}
