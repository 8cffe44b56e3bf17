import Foundation

/// Reduces a failing schedule to a short one that still fails: whole devices' steps, runs of
/// steps (halves, quarters, … single steps), then operations inside writes are taken out while
/// the schedule keeps failing (delta debugging). The result prints as a trace and as a
/// regression test.
enum SimShrinker {
    /// `fails` runs a candidate schedule and says whether it still fails.
    static func shrink(_ steps: [SimStep], devices: Int, budget: Int = 4_000, fails: ([SimStep]) -> Bool) -> [SimStep] {
        var best = steps
        var tries = 0
        func attempt(_ candidate: [SimStep]) -> Bool {
            guard tries < budget, candidate != best else { return false }
            tries += 1
            if fails(candidate) {
                best = candidate
                return true
            }
            return false
        }
        var progress = true
        while progress, tries < budget {
            progress = false
            // A device's steps, all at once.
            for d in 0..<devices where best.contains(where: { $0.device == d }) {
                if attempt(best.filter { $0.device != d }) { progress = true }
            }
            // Runs of steps, from large to single.
            var size = max(1, best.count / 2)
            while size >= 1 {
                var start = 0
                while start < best.count {
                    var candidate = best
                    candidate.removeSubrange(start..<min(start + size, candidate.count))
                    if attempt(candidate) { progress = true } else { start += size }
                }
                size /= 2
            }
            // Operations inside writes.
            for i in best.indices {
                guard i < best.count, case let .write(d, ops) = best[i], ops.count > 1 else { continue }
                for j in ops.indices.reversed() {
                    guard i < best.count, case let .write(_, current) = best[i], j < current.count else { continue }
                    var fewer = current
                    fewer.remove(at: j)
                    var candidate = best
                    candidate[i] = .write(d, fewer)
                    if attempt(candidate) { progress = true }
                }
            }
        }
        return best
    }

    /// A schedule as a regression test's body.
    static func regressionTest(_ steps: [SimStep], _ configuration: SimConfiguration, seed: UInt64) -> String {
        var lines = ["    /// Shrunk from seed \(seed) (\(configuration)).",
                     "    func testSeed\(seed)() throws {",
                     "        try assertConverges(devices: \(configuration.devices), users: \(configuration.users)"
                        + (configuration.deferredBootstraps ? ", deferredBootstraps: true" : "") + ", [",]
        for s in steps { lines.append("            \(s.swiftSource),") }
        lines += ["        ])", "    }"]
        return lines.joined(separator: "\n")
    }
}

extension SimStep {
    /// The device a step concerns (nil for a server restart).
    var device: Int? {
        switch self {
        case .write(let d, _), .run(let d), .up(let d), .down(let d), .cut(let d), .connect(let d), .pause(let d), .resume(let d),
             .clock(let d, _), .subscribe(let d, _):
            return d
        case .restart, .backup, .restore, .bootstrap: return nil
        }
    }
}
