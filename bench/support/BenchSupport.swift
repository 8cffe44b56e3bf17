// What the Swift benchmark programs (bench/swift, bench/typed, bench/sync, bench/cluster) share: the clock, the output
// lines bench/run parses, failing a run, and the benchmark's seeded random keys.
import Foundation

/// Seconds on CLOCK_MONOTONIC.
public func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

/// Prints a figure: `<name> <seconds>`.
public func emit(_ name: String, _ seconds: Double) { print(name, String(format: "%.6f", seconds)) }

/// Prints the figure and, as a comment, the CLOCK_MONOTONIC span it covers (to cut a profile
/// recorded with `perf record -k mono` into workloads: `perf report --time START,END`).
public func emit(_ name: String, from t0: Double, to t1: Double) {
    emit(name, t1 - t0)
    print("# span \(name) \(String(format: "%.6f", t0)) \(String(format: "%.6f", t1))")
}

/// Ends the run with a message on stderr, prefixed by the program's name.
public func fail(_ message: String) -> Never {
    let program = CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent } ?? "bench"
    FileHandle.standardError.write(Data("\(program): \(message)\n".utf8))
    exit(1)
}

/// The benchmark's shared random keys: splitmix64 from a fixed seed, key = next % n (the same
/// generator as bench/raw_sqlite.c, bench/cabi.c and bench/python_bench.py).
public struct SplitMix64 {
    public var state: UInt64
    public init(state: UInt64) { self.state = state }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// malloc, out of the optimizer's sight.
public let opaqueMalloc = unsafeBitCast(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc"),
                                        to: (@convention(c) (Int) -> UnsafeMutableRawPointer?).self)
/// The seed of the W4 keys.
public let benchSeed: UInt64 = 20_240_601
/// How many primary-key reads W4 makes.
public let w4Reads = 100_000

/// The keys W4 reads, the same in every contender: `w4Reads` draws of splitmix64 from
/// `benchSeed`, each `% n`.
public func w4Keys(_ n: Int) -> [Int] {
    var rng = SplitMix64(state: benchSeed)
    return (0..<w4Reads).map { _ in Int(rng.next() % UInt64(n)) }
}
