import AtollProtocol
import AtollStore
import Foundation
import Synchronization

/// The last hour of the server's counters, sampled every `interval` seconds from the same
/// `Metrics` that `GET /metrics` reports: the admin console draws its graphs from these samples
/// (rates are differences between neighbours).
// @unchecked: the timer is a GCD source, safe to resume and cancel from any thread.
final class MetricsHistory: @unchecked Sendable {
    struct Sample {
        var time: Date
        var counters: Metrics.Counters
    }

    let interval: Double
    let capacity: Int
    private let metrics: Metrics
    private let samples = Mutex([Sample]())
    private let timer: DispatchSourceTimer

    init(metrics: Metrics, interval: Double = 5, span: Double = 3600) {
        self.metrics = metrics
        self.interval = interval
        capacity = Int(span / interval) + 1
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "atoll.admin.metrics"))
    }

    /// Whether the timer was resumed: GCD traps on releasing a source that never was, as for a
    /// server made and shut down without being started.
    private let resumed = Mutex(false)

    /// Takes a sample now and every `interval` seconds after (once; later calls do nothing).
    func start() {
        guard resumed.withLock({ r in defer { r = true }; return !r }) else { return }
        timer.setEventHandler { [weak self] in self?.sample() }
        timer.schedule(deadline: .now(), repeating: interval)
        timer.resume()
    }

    func stop() { timer.cancel() }

    deinit {
        if !resumed.withLock({ $0 }) {
            timer.cancel()
            timer.resume()
        }
    }

    private func sample() {
        let s = Sample(time: Date(), counters: metrics.snapshot)
        samples.withLock { list in
            list.append(s)
            if list.count > capacity { list.removeFirst(list.count - capacity) }
        }
    }

    /// The samples, oldest first, and one taken now at the end.
    var value: Value {
        let now = Sample(time: Date(), counters: metrics.snapshot)
        let list = samples.withLock { $0 } + [now]
        return .doc([
            "interval": .double(interval),
            "samples": .list(list.map { s in
                let c = s.counters
                return .doc([
                    "time": .int(Int64(s.time.timeIntervalSince1970 * 1000)),
                    "connections": .int(Int64(c.connections)),
                    "sessions": .int(Int64(c.sessions)),
                    "uploads": .int(Int64(c.uploads)),
                    "uploadedInstructions": .int(Int64(c.uploadedInstructions)),
                    "rejectedWrites": .int(Int64(c.rejectedWrites)),
                    "downloads": .int(Int64(c.downloads)),
                    "downloadBytes": .int(Int64(c.downloadBytes)),
                    "integrationSeconds": .double(c.integrationSeconds),
                    "bootstraps": .int(Int64(c.bootstraps)),
                    "bootstrapObjects": .int(Int64(c.bootstrapObjects)),
                    "bootstrapBytes": .int(Int64(c.bootstrapBytes)),
                ])
            }),
        ])
    }
}
