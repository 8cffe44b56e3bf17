import AtollStore
import Foundation
import XCTest

// Shared helpers of the store's tests: uniquely named temporary realm files (removed when the
// test ends), stores opened on them, and assertions on `AtollError`.

extension XCTestCase {
    /// A path for a new realm file in a directory of its own, unique to this call. The directory
    /// (with the file and its `-wal`/`-shm` companions) is removed when the test ends.
    func temporaryRealmPath(_ name: String = "test.realm") -> String {
        // A child process (see `runInChildProcess`) works inside its parent's directory, which the
        // parent removes: a child that crashes cannot clean up after itself.
        let base = ProcessInfo.processInfo.environment["ATOLL_TESTS_TMP"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory
        let directory = base.appendingPathComponent("atoll-tests-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory.appendingPathComponent(name).path
    }

    /// Opens a store on a new temporary file; it is closed when the test ends.
    func openTemporaryStore(_ schema: Schema?, schemaVersion: UInt64 = 0, path: String? = nil,
                            file: StaticString = #filePath, line: UInt = #line) throws -> Store {
        let store = try Store(Configuration(path: path ?? temporaryRealmPath(), schema: schema,
                                            schemaVersion: schemaVersion))
        addTeardownBlock { store.close() }
        return store
    }

    /// Opens a store on `path` (closed when the test ends).
    func open(_ path: String, _ schema: Schema?, schemaVersion: UInt64 = 0, readOnly: Bool = false,
              writeTimeoutMilliseconds: Int? = nil) throws -> Store {
        let store = try Store(Configuration(path: path, schema: schema, schemaVersion: schemaVersion,
                                            readOnly: readOnly, writeTimeoutMilliseconds: writeTimeoutMilliseconds))
        addTeardownBlock { store.close() }
        return store
    }
}

/// Asserts that `expression` throws an `AtollError` with `code` whose message contains every one
/// of `substrings`. Returns the error for further checks.
@discardableResult
func assertAtollError<T>(_ expression: @autoclosure () throws -> T, _ code: AtollError.Code,
                         _ substrings: String..., file: StaticString = #filePath, line: UInt = #line) -> AtollError? {
    do {
        let value = try expression()
        XCTFail("expected AtollError .\(code), got a result: \(value)", file: file, line: line)
        return nil
    } catch let error as AtollError {
        XCTAssertEqual(error.code, code, "message: \(error.message)", file: file, line: line)
        for s in substrings {
            XCTAssertTrue(error.message.contains(s), "message '\(error.message)' lacks '\(s)'", file: file, line: line)
        }
        return error
    } catch {
        XCTFail("expected AtollError .\(code), got \(error)", file: file, line: line)
        return nil
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

extension XCTestCase {
    /// Runs `body` in a child process (this test binary, running only this test), so that a crash
    /// in the library fails this one test instead of ending the whole run. Use it for inputs that
    /// have crashed the library; the child's failures and crashes are reported here.
    func runInChildProcess(_ function: String = #function, file: StaticString = #filePath, line: UInt = #line,
                           _ body: () throws -> Void) throws {
        let name = String(reflecting: type(of: self)) + "/" + function.replacingOccurrences(of: "()", with: "")
        let key = "ATOLL_TESTS_CHILD"
        if ProcessInfo.processInfo.environment[key] == name {
            try body()
            return
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = [name]
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("atoll-tests-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        var environment = ProcessInfo.processInfo.environment
        environment[key] = name
        environment["ATOLL_TESTS_TMP"] = scratch.path
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let output = String(decoding: data, as: UTF8.self)
        let tail = output.split(separator: "\n").suffix(25).joined(separator: "\n")
        XCTAssertNotEqual(process.terminationReason, .uncaughtSignal,
                          "\(name) crashed its process (signal \(process.terminationStatus)):\n\(tail)", file: file, line: line)
        XCTAssertEqual(process.terminationStatus, 0, "\(name) failed in its child process:\n\(tail)", file: file, line: line)
        if process.terminationReason == .exit, process.terminationStatus == 0 {
            XCTAssertTrue(output.contains("Executed 1 test"), "the child process did not run \(name):\n\(tail)",
                          file: file, line: line)
        }
    }
}

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
