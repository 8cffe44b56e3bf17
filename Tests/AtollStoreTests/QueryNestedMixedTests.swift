@testable import AtollStore
import XCTest

/// Key paths into the collections nested in a mixed value, as deep as a query may write them.
final class QueryNestedMixedTests: XCTestCase {
    private func boxStore() throws -> Store {
        let schema = Schema([ObjectSchema(name: "Box", primaryKey: "_id", properties: [
            Property(name: "_id", type: .int), Property(name: "value", type: .mixed, isOptional: true),
        ])])
        return try openTemporaryStore(schema)
    }

    /// `{"k": {"k": … 7}}`, `depth` dictionaries deep, with a list of `[0, 7]` at the bottom.
    private func nested(_ depth: Int) -> Value {
        var v = Value.list([.int(0), .int(7)])
        for _ in 0..<depth { v = .object(["k": v]) }
        return v
    }

    func testADeepPathFindsItsValueAndItsSQLGrowsWithTheStepsNotTwiceEachStep() throws {
        let store = try boxStore()
        try store.write {
            _ = try store.create("Box", ["_id": .int(1), "value": nested(30)])
            _ = try store.create("Box", ["_id": .int(2), "value": nested(29)])
        }
        func path(_ keys: Int, _ tail: String) -> String { "value" + String(repeating: ".k", count: keys) + tail + " == 7" }
        // Each step was a call on the previous step's value and type calls: both held it, so
        // 30 steps made 2^30 copies (the fuzzer's query of 20 steps took 2 GB). Checked first,
        // on short paths, so that without it the test fails rather than runs out of memory.
        let six = try store.objects("Box", where: path(6, "[1]")).compiled.condition.utf8.count
        let twelve = try store.objects("Box", where: path(12, "[1]")).compiled.condition.utf8.count
        guard twelve < 3 * six else {
            return XCTFail("the SQL of a path twice as long is \(twelve) bytes against \(six)")
        }
        XCTAssertEqual(try store.objects("Box", where: path(30, "[1]")).primaryKeyValues(), [.int(1)])
        XCTAssertEqual(try store.objects("Box", where: path(29, "[LAST]")).primaryKeyValues(), [.int(2)])
        XCTAssertEqual(try store.objects("Box", where: "ANY " + path(30, "[*]")).primaryKeyValues(), [.int(1)])
        XCTAssertEqual(try store.objects("Box", where: path(30, "[0]")).count(), 0)
    }

    func testAStepThroughAScalarOrAMissingKeyIsNull() throws {
        let store = try boxStore()
        try store.write {
            _ = try store.create("Box", ["_id": .int(1), "value": .object(["k": .int(7), "l": .list([.object(["m": .int(7)])])])])
        }
        XCTAssertEqual(try store.objects("Box", where: "value.k.k == 7").count(), 0)
        XCTAssertEqual(try store.objects("Box", where: "value.x.k == nil").count(), 1)
        XCTAssertEqual(try store.objects("Box", where: "value.l[0].m == 7").primaryKeyValues(), [.int(1)])
        XCTAssertEqual(try store.objects("Box", where: "value.l[0].m.@type == 'int'").count(), 1)
        XCTAssertEqual(try store.objects("Box", where: "value.l[0].@size == 1").count(), 1)
    }

    func testAPathDeeperThanTheLimitIsAQueryErrorNotAnSQLiteOne() throws {
        let store = try boxStore()
        let deep = "value" + String(repeating: ".k", count: QueryCompiler.maxNestedSteps + 1) + " == 7"
        XCTAssertThrowsError(try store.objects("Box", where: deep).count()) { error in
            XCTAssertEqual((error as? AtollError)?.code, .queryInvalid, "\(error)")
        }
        let atTheLimit = "value" + String(repeating: ".k", count: QueryCompiler.maxNestedSteps) + " == 7"
        XCTAssertEqual(try store.objects("Box", where: atTheLimit).count(), 0)
    }
}
