import AtollProtocol
import AtollStore
import Foundation

/// Appends a suite's row to the `make stress` summary (tests/stress/summary.py), when
/// ATOLL_STRESS_REPORT names the report file.
func stressReport(suite: String, rounds: Int, operations: Int, faults: Int, lost: Int, figures: String) {
    guard let report = ProcessInfo.processInfo.environment["ATOLL_STRESS_REPORT"] else { return }
    let line = Wire.encode(.doc(["suite": .string(suite), "rounds": .int(Int64(rounds)), "operations": .int(Int64(operations)),
                                 "faults": .int(Int64(faults)), "lost": .int(Int64(lost)), "crashes": .int(0),
                                 "figures": .string(figures)]))
    if !FileManager.default.fileExists(atPath: report) { _ = FileManager.default.createFile(atPath: report, contents: nil) }
    guard let handle = FileHandle(forWritingAtPath: report) else { return }
    defer { try? handle.close() }
    _ = try? handle.seekToEnd()
    try? handle.write(contentsOf: Data((line + "\n").utf8))
}
