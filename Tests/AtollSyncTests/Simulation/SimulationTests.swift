import AtollStore
import AtollTestSupport
import Foundation
import XCTest

/// Sync's deterministic simulation (docs/testing.md, "Simulation"): random schedules of writes,
/// deliveries, cuts, pauses, restarts and clock jumps, each checked by the oracles once settled.
///
/// Environment: `ATOLL_SIM_SEED` (first seed, default 1), `ATOLL_SIM_SCHEDULES` (how many, default
/// 200), `ATOLL_SIM_STEPS` (steps per schedule, default 120). A failure prints its seed, its
/// trace, and a shrunk schedule as a regression test.
final class SimulationTests: XCTestCase {
    func testRandomSchedulesConverge() throws {
        let env = ProcessInfo.processInfo.environment
        let first = UInt64(env["ATOLL_SIM_SEED"] ?? "") ?? 1
        let count = Int(env["ATOLL_SIM_SCHEDULES"] ?? "") ?? 200
        var configuration = SimConfiguration()
        if let steps = Int(env["ATOLL_SIM_STEPS"] ?? "") { configuration.steps = steps }
        // ATOLL_SIM_WITHOUT=links,embedded,...: leave some kinds of writes out (to look at the rest).
        for name in (env["ATOLL_SIM_WITHOUT"] ?? "").split(separator: ",") {
            let kinds: [String: SimFeatures] = ["lists": .lists, "sets": .sets, "dictionaries": .dictionaries, "counters": .counters,
                                                "embedded": .embedded, "links": .links, "permissions": .permissions]
            if let k = kinds[String(name)] { configuration.features.remove(k) }
        }
        let directory = simulationDirectory()
        var failed = 0
        let started = Date()
        let stats = SimStats()
        for seed in first..<first + UInt64(count) {
            let steps = Simulation.schedule(seed: seed, configuration)
            let failures = try SimRunner.run(steps, configuration, directory: directory + "/s\(seed)", stats: stats)
            if !failures.isEmpty {
                failed += 1
                var message = "seed \(seed) (\(configuration)): \(failures.count) divergence(s):\n" + failures.prefix(10).joined(separator: "\n")
                if env["ATOLL_SIM_SHRINK"] != "0" {
                    var n = 0
                    let shrunk = SimShrinker.shrink(steps, devices: configuration.devices) { candidate in
                        n += 1
                        return !((try? SimRunner.run(candidate, configuration, directory: directory + "/shrink-\(seed)-\(n)")) ?? []).isEmpty
                    }
                    let again = (try? SimRunner.run(shrunk, configuration, directory: directory + "/shrunk-\(seed)")) ?? []
                    message += "\n\nshrunk to \(shrunk.count) steps (from \(steps.count)):\n"
                        + shrunk.enumerated().map { "  \($0.offset + 1). \($0.element)" }.joined(separator: "\n")
                        + "\nwhich gives:\n" + again.prefix(10).joined(separator: "\n")
                        + "\n\nas a regression test:\n" + SimShrinker.regressionTest(shrunk, configuration, seed: seed)
                }
                XCTFail(message)
                if failed >= Int(env["ATOLL_SIM_MAX_FAILURES"] ?? "3") ?? 3 { break }
            }
        }
        print("simulation: \(stats.schedules) schedules from seed \(first) in \(String(format: "%.1f", Date().timeIntervalSince(started))) s, \(failed) failed; "
              + stats.summary)
        // The schedules meet what they are there to meet (a simulation that never resets a
        // client proves nothing about resets).
        if count >= 200 {
            for (what, n) in [("operations", stats.operations), ("client resets", stats.errors["clientReset"] ?? 0),
                              ("refused clocks", stats.errors["clockAhead"] ?? 0), ("restores", stats.restores)] {
                XCTAssertGreaterThan(n, 0, "\(count) schedules had no \(what)")
            }
        }
    }
}

/// Schedules the simulation found failing, shrunk: each proves what it is named after.
final class SimulationRegressionTests: XCTestCase {
    /// Runs a schedule of `devices` devices (logged in as `users` users) and checks the oracles.
    func assertConverges(devices: Int, users: Int, _ steps: [SimStep], file: StaticString = #filePath, line: UInt = #line) throws {
        var configuration = SimConfiguration()
        configuration.devices = devices
        configuration.users = users
        let directory = simulationDirectory()
        let failures = try SimRunner.run(steps, configuration, directory: directory + "/run")
        XCTAssertEqual(failures, [], "\n" + failures.joined(separator: "\n"), file: file, line: line)
    }

    func testSeed47() throws {
        try assertConverges(devices: 3, users: 2, [
            .write(2, [.create(key: 0, text: "d2-12", n: 12, tags: ["t2", "u0"])]),
            .write(2, [.create(key: 3, text: "d2-22", n: 22, tags: ["t2", "u1"]), .listInsert(key: 0, at: 4, "d2-23")]),
            .write(0, [.create(key: 3, text: "d0-13", n: 13, tags: ["t0", "u1"])]),
            .write(0, [.delete(key: 3)]),
            .write(2, [.listInsert(key: 3, at: 1, "d2-29")]),
            .write(0, [.create(key: 3, text: "d0-22", n: 22, tags: ["t0", "u1"])]),
        ])
    }

    func testSeed1009() throws {
        try assertConverges(devices: 3, users: 2, [
            .write(2, [.create(key: 1, text: "d2-18", n: 18, tags: ["t2", "u0"])]),
            .write(1, [.create(key: 1, text: "d1-14", n: 14, tags: ["t1", "u2"]), .delete(key: 1),
                       .create(key: 1, text: "d1-16", n: 16, tags: ["t1", "u1"])]),
        ])
    }

    func testSeed3350() throws {
        try assertConverges(devices: 3, users: 2, [
            .run(2), .run(2),
            .write(2, [.create(key: 2, text: "d2-1", n: 1, tags: ["t2", "u1"]), .setAdd(key: 2, "a")]),
            .connect(2),
            .write(0, [.create(key: 2, text: "d0-7", n: 7, tags: ["t0", "u1"]), .dictSet(key: 2, "a", "d0-8")]),
            .run(2), .up(2), .up(2),
            .write(0, [.create(key: 2, text: "d0-17", n: 17, tags: ["t0", "u2"]), .add(key: 2, 4)]),
            .up(2),
        ])
    }

    func testSeed4813() throws {
        try assertConverges(devices: 3, users: 2, [
            .write(0, [.create(key: 0, text: "d0-8", n: 8, tags: ["t0", "u2"])]),
            .write(0, [.listErase(key: 0, at: 7)]),
            .write(0, [.listErase(key: 0, at: 3)]),
            .write(1, [.create(key: 0, text: "d1-24", n: 24, tags: ["t1", "u0"])]),
            .write(0, [.create(key: 0, text: "d0-21", n: 21, tags: ["t0", "u0"])]),
        ])
    }

    func testSeed5404() throws {
        try assertConverges(devices: 3, users: 2, [
            .run(2), .run(2),
            .write(2, [.create(key: 3, text: "d2-14", n: 14, tags: ["t2", "u2"]), .add(key: 3, 6)]),
            .connect(2), .run(2), .up(2), .up(2), .up(2),
            .restart,
        ])
    }

    func testSeed7411() throws {
        try assertConverges(devices: 3, users: 2, [
            .write(1, [.create(key: 1, text: "d1-19", n: 19, tags: ["t1", "u1"])]),
            .write(0, [.create(key: 1, text: "d0-4", n: 4, tags: ["t0", "u1"])]),
            .write(1, [.create(key: 3, text: "d1-23", n: 23, tags: ["t1", "u2"])]),
            .clock(1, -820),
            .write(1, [.delete(key: 1)]),
            .write(0, [.create(key: 1, text: "d0-13", n: 13, tags: ["t0", "u1"]), .add(key: 1, 6)]),
            .write(1, [.create(key: 1, text: "d1-34", n: 34, tags: ["t1", "u1"])]),
        ])
    }

    func testSeed1386() throws {
        try assertConverges(devices: 3, users: 2, [
            .write(1, [.create(key: 2, text: "d1-3", n: 3, tags: ["t1", "u0"])]),
            .write(1, [.create(key: 2, text: "d1-9", n: 9, tags: ["t1", "u0"])]),
            .write(1, [.delete(key: 2), .create(key: 2, text: "d1-32", n: 32, tags: ["t1", "u2"])]),
            .write(1, [.create(key: 1, text: "d1-34", n: 34, tags: ["t1", "u1"])]),
            .write(1, [.linkInsert(key: 1, target: 2, at: 5)]),
        ])
    }

    func testSeed139() throws {
        try assertConverges(devices: 3, users: 2, [
            .subscribe(1, .low),
            .write(2, [.create(key: 3, text: "d2-11", n: 11, tags: ["t2", "u2"])]),
            .write(1, [.create(key: 3, text: "d1-21", n: 21, tags: ["t1", "u0"])]),
            .write(1, [.replaceTags(key: 3, ["d1-22", "d"])]),
        ])
    }

    func testSeed334() throws {
        try assertConverges(devices: 3, users: 2, [
            .write(0, [.create(key: 2, text: "d0-7", n: 7, tags: ["t0", "u1"])]),
            .write(0, [.create(key: 1, text: "d0-8", n: 8, tags: ["t0", "u2"], owned: true)]),
            .write(1, [.create(key: 1, text: "d1-20", n: 20, tags: ["t1", "u2"], owned: true)]),
            .write(1, [.delete(key: 1)]),
            .write(0, [.linkInsert(key: 2, target: 1, at: 1)]),
        ])
    }

    func testSeed8() throws {
        try assertConverges(devices: 3, users: 2, [
            .write(1, [.create(key: 2, text: "d1-9", n: 9, tags: ["t1", "u0"])]),
            .write(0, [.create(key: 2, text: "d0-11", n: 11, tags: ["t0", "u2"])]),
            .write(0, [.create(key: 2, text: "d0-13", n: 13, tags: ["t0", "u1"])]),
            .write(1, [.listInsert(key: 2, at: 1, "d1-23")]),
        ])
    }
}

extension XCTestCase {
    /// Where a simulation keeps its files: in memory (/dev/shm) where the machine has it, since a
    /// schedule commits thousands of small transactions and the disk's syncs would be most of its
    /// time; else a temporary directory. Removed when the test ends.
    func simulationDirectory() -> String {
        let shm = "/dev/shm"
        guard FileManager.default.isWritableFile(atPath: shm) else {
            return URL(fileURLWithPath: temporaryRealmPath()).deletingLastPathComponent().path
        }
        let directory = shm + "/atoll-sim-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        return directory
    }
}

/// What the schedules of a run did, for its summary.
final class SimStats {
    var schedules = 0
    var steps = 0
    var operations = 0
    var restores = 0
    var errors = [String: Int]()

    var summary: String {
        "\(operations) operations in \(steps) steps; \(restores) restores from a backup; errors the devices saw: "
            + errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
}

/// Runs one schedule in a fresh world and checks it.
enum SimRunner {
    static func run(_ steps: [SimStep], _ configuration: SimConfiguration, directory: String, stats: SimStats? = nil) throws -> [String] {
        let sim = try Simulation(configuration: configuration, directory: directory)
        defer {
            if let stats {
                stats.schedules += 1
                stats.steps += steps.count
                stats.restores += sim.restores
                for step in steps { if case .write(_, let ops) = step { stats.operations += ops.count } }
                for d in sim.devices { for e in d.link.errors { stats.errors[e.code.rawValue, default: 0] += 1 } }
            }
            sim.close()
            try? FileManager.default.removeItem(atPath: directory)
        }
        do {
            try sim.run(steps)
            try sim.settle()
            return try SimOracle.check(sim, scratch: directory)
        } catch {
            return ["the schedule failed: \(error)"]
        }
    }
}
