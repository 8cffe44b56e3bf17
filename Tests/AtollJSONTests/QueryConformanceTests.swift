import AtollJSON
import AtollStore
import CJansson
import Foundation
import XCTest

/// The query conformance suite (Tests/conformance/README.md): every case of
/// Tests/conformance/queries.json runs on one in-memory store holding the file's data set, and
/// the primary keys it returns are compared with the case's `expect` (or the error code with its
/// `error`). Each failing case gets its own failure message, so one run lists them all.
///
/// `ATOLL_CONFORMANCE_FILE` names another file of the same shape to run instead.
final class QueryConformanceTests: XCTestCase {
    static var suiteFile: URL {
        if let path = ProcessInfo.processInfo.environment["ATOLL_CONFORMANCE_FILE"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("conformance/queries.json")
    }

    func testConformance() throws {
        let text = try String(contentsOf: Self.suiteFile, encoding: .utf8)
        try withJSON(text) { root in
            let store: Store
            do {
                store = try Self.load(root)
            } catch {
                XCTFail("the data set of \(Self.suiteFile.lastPathComponent) does not load: \(error)")
                return
            }
            guard let cases = json_object_get(root, "cases"), cases.pointee.type == JSON_ARRAY else {
                XCTFail("\(Self.suiteFile.lastPathComponent) has no \"cases\" array")
                return
            }
            var failed = 0
            let count = json_array_size(cases)
            for i in 0..<count {
                if let failure = Self.run(json_array_get(cases, i), index: i, store) {
                    failed += 1
                    XCTFail(failure)
                }
            }
            print("query conformance: \(count - failed) of \(count) cases pass")
        }
    }

    // MARK: - Data set

    /// A store with the file's schema and objects, inserted class by class in the file's order.
    static func load(_ root: JSONRef) throws -> Store {
        guard let schemaJSON = json_object_get(root, "schema") else {
            throw AtollError(.invalidJSON, "no \"schema\"")
        }
        let schema = try SchemaJSON.schema(schemaJSON)
        let store = try Store(Configuration(inMemory: true, schema: schema))
        guard let objects = json_object_get(root, "objects"), objects.pointee.type == JSON_OBJECT else {
            throw AtollError(.invalidJSON, "no \"objects\" object")
        }
        try store.write {
            var iter = json_object_iter(objects)
            while let it = iter {
                let className = String(cString: json_object_iter_key(it))
                let list = json_object_iter_value(it)!
                for i in 0..<json_array_size(list) {
                    do {
                        _ = try store.create(className, try EJSON.document(json_array_get(list, i)))
                    } catch let e as AtollError {
                        throw e.prefixed("\(className) object \(i)")
                    }
                }
                iter = json_object_iter_next(objects, it)
            }
        }
        return store
    }

    // MARK: - Cases

    /// Runs one case; returns the failure message, or nil when it passes.
    static func run(_ json: JSONRef, index: Int, _ store: Store) -> String? {
        let name = string(json, "name") ?? "case \(index)"
        let className = string(json, "class") ?? ""
        let query = string(json, "query") ?? ""
        let label = "\(name) — \(className): \(query)"
        do {
            var arguments = [Value]()
            if let args = json_object_get(json, "args") {
                for i in 0..<json_array_size(args) { arguments.append(try EJSON.value(json_array_get(args, i))) }
            }
            if let code = string(json, "error") {
                do {
                    let results = try store.objects(className, where: query, arguments)
                    _ = try results.documents()
                    return "\(label): expected error \(code), got a result"
                } catch let e as AtollError {
                    let wanted: AtollError.Code? = ["querySyntax": .querySyntax, "queryInvalid": .queryInvalid][code]
                    return e.code == wanted ? nil : "\(label): expected error \(code), got \(e.code): \(e.message)"
                }
            }
            guard let expectJSON = json_object_get(json, "expect") else { return "\(label): no \"expect\"" }
            var expected = [Value]()
            for i in 0..<json_array_size(expectJSON) { expected.append(try EJSON.value(json_array_get(expectJSON, i))) }
            let ordered = json_object_get(json, "ordered").map { $0.pointee.type == JSON_TRUE } ?? false

            guard let key = store.schema[className]?.primaryKey else {
                return "\(label): class '\(className)' has no primary key"
            }
            let results = try store.objects(className, where: query, arguments)
            var got = try results.documents().map { $0[key] ?? .null }
            let count = try results.count()
            if !ordered {
                got.sort { EJSON.serialize($0) < EJSON.serialize($1) }
                expected.sort { EJSON.serialize($0) < EJSON.serialize($1) }
            }
            if got != expected {
                return "\(label): expected \(show(expected)), got \(show(got))"
            }
            if count != got.count {
                return "\(label): count() is \(count) but \(got.count) objects were read"
            }
            return nil
        } catch {
            return "\(label): \(error)"
        }
    }

    static func string(_ json: JSONRef, _ key: String) -> String? {
        guard let v = json_object_get(json, key), let s = json_string_value(v) else { return nil }
        return String(cString: s)
    }

    static func show(_ values: [Value]) -> String {
        "[" + values.map { EJSON.serialize($0) }.joined(separator: ", ") + "]"
    }
}
