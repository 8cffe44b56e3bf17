import AtollStore
import Foundation
import XCTest

// Helpers shared by the Swift test targets: uniquely named temporary realm files (removed when
// the test ends), crash isolation in a child process, and assertions on `AtollError`.

extension XCTestCase {
    /// A path for a new realm file in a directory of its own, unique to this call. The directory
    /// (with the file and its `-wal`/`-shm` companions) is removed when the test ends.
    public func temporaryRealmPath(_ name: String = "test.realm") -> String {
        // A child process (see `runInChildProcess`) works inside its parent's directory, which the
        // parent removes: a child that crashes cannot clean up after itself.
        let base = ProcessInfo.processInfo.environment["ATOLL_TESTS_TMP"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory
        let directory = base.appendingPathComponent("atoll-tests-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory.appendingPathComponent(name).path
    }

}

/// Asserts that `expression` throws an `AtollError` with `code` whose message contains every one
/// of `substrings`. Returns the error for further checks.
@discardableResult
public func assertAtollError<T>(_ expression: @autoclosure () throws -> T, _ code: AtollError.Code,
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

extension XCTestCase {
    /// Runs `body` in a child process (this test binary, running only this test), so that a crash
    /// in the library fails this one test instead of ending the whole run. Use it for inputs that
    /// have crashed the library; the child's failures and crashes are reported here.
    public func runInChildProcess(_ function: String = #function, file: StaticString = #filePath, line: UInt = #line,
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

/// A small deterministic generator (SplitMix64): the same seed gives the same "random" cases.
public struct SplitMix64: RandomNumberGenerator {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
