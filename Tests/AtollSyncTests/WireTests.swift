import AtollJSON
import AtollProtocol
import AtollStore
import XCTest

/// The wire form of changesets (docs/protocol.md, "Instructions and changesets"): a new
/// object's first values fold into its `create`, and unfold into the same instructions.
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
}
