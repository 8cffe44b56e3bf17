import AtollStore
@_exported import AtollTestSupport
import Foundation
import XCTest

// Helpers of the store's tests: stores opened on temporary files, schema shorthands, a second
// process. Temporary paths, crash isolation and error assertions are in AtollTestSupport.

extension XCTestCase {
    /// Opens a store on a new temporary file; it is closed when the test ends.
    /// `changeLogValues`: the change log keeps values (for tests that read `changes(after:)`).
    func openTemporaryStore(_ schema: Schema?, schemaVersion: UInt64 = 0, path: String? = nil, changeLogValues: Bool = false,
                            file: StaticString = #filePath, line: UInt = #line) throws -> Store {
        let store = try Store(Configuration(path: path ?? temporaryRealmPath(), schema: schema,
                                            schemaVersion: schemaVersion, changeLogValues: changeLogValues))
        addTeardownBlock { store.close() }
        return store
    }

    /// Opens a store on `path` (closed when the test ends).
    func open(_ path: String, _ schema: Schema?, schemaVersion: UInt64 = 0, readOnly: Bool = false,
              writeTimeoutMilliseconds: Int? = nil, changeLogValues: Bool = false) throws -> Store {
        let store = try Store(Configuration(path: path, schema: schema, schemaVersion: schemaVersion,
                                            readOnly: readOnly, writeTimeoutMilliseconds: writeTimeoutMilliseconds,
                                            changeLogValues: changeLogValues))
        addTeardownBlock { store.close() }
        return store
    }
}

// MARK: - Schema shorthands

extension Property {
    static func int(_ name: String, optional: Bool = false, indexed: Bool = false, default d: Value? = nil) -> Property {
        Property(name: name, type: .int, isOptional: optional, isIndexed: indexed, defaultValue: d)
    }
    static func string(_ name: String, optional: Bool = false, indexed: Bool = false, default d: Value? = nil) -> Property {
        Property(name: name, type: .string, isOptional: optional, isIndexed: indexed, defaultValue: d)
    }
    static func link(_ name: String, _ target: String) -> Property {
        Property(name: name, type: .object, objectType: target)
    }
    static func list(_ name: String, _ type: PropertyType, optional: Bool = false) -> Property {
        Property(name: name, type: type, collection: .list, isOptional: optional)
    }
    static func links(_ name: String, _ target: String) -> Property {
        Property(name: name, type: .object, objectType: target, collection: .list)
    }
}

extension Store {
    /// The primary keys (`.int`) of the objects a query returns, in order.
    func intKeys(_ className: String, _ query: String = "", _ arguments: [Value] = [],
                 primaryKey: String = "id") throws -> [Int64] {
        try objects(className, where: query, arguments).documents().map { doc in
            guard case .int(let i)? = doc[primaryKey] else { return -1 }
            return i
        }
    }

    /// The string primary keys of the objects a query returns, in order.
    func stringKeys(_ className: String, _ query: String = "", _ arguments: [Value] = [],
                    primaryKey: String = "id") throws -> [String] {
        try objects(className, where: query, arguments).documents().map { doc in
            guard case .string(let s)? = doc[primaryKey] else { return "<none>" }
            return s
        }
    }
}

extension Value {
    var intValue: Int64? { if case .int(let i) = self { return i } else { return nil } }
    var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    var documentValue: Document? { if case .object(let d) = self { return d } else { return nil } }
    var listValue: [Value]? { if case .list(let l) = self { return l } else { return nil } }
}

// MARK: - Crash isolation

/// This test binary, started to run one test with extra environment variables (a second process
/// for multi-process tests).
final class TestProcess: @unchecked Sendable {
    let process = Process()
    private let pipe = Pipe()
    private var data = Data()
    private let reader = DispatchGroup()

    /// Starts the test `test` ("Module.Class/method").
    init(_ test: String, environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = [test]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        reader.enter()
        DispatchQueue.global().async { [pipe, reader] in
            let all = pipe.fileHandleForReading.readDataToEndOfFile()
            self.data = all
            reader.leave()
        }
    }

    /// Waits for the process; returns whether it ran its test and passed, and its output.
    func finish() -> (passed: Bool, output: String) {
        process.waitUntilExit()
        reader.wait()
        let output = String(decoding: data, as: UTF8.self)
        let passed = process.terminationReason == .exit && process.terminationStatus == 0
            && output.contains("Executed 1 test")
        return (passed, output.split(separator: "\n").suffix(25).joined(separator: "\n"))
    }
}
