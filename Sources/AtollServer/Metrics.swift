import Foundation
import Synchronization

/// The server's numbers, for `GET /metrics` (Prometheus text format).
public final class Metrics: Sendable {
    struct Counters {
        var connectionsOpened = 0, connections = 0, sessions = 0
        var uploads = 0, uploadedInstructions = 0, rejectedWrites = 0
        var downloads = 0, downloadBytes = 0
        var bootstraps = 0, bootstrapObjects = 0, bootstrapBytes = 0
        var integrationSeconds = 0.0
        /// Integration times in buckets: ≤1 ms, ≤5, ≤25, ≤100, ≤500, > 500.
        var integrationBuckets = [Int](repeating: 0, count: 6)
        var errors: [String: Int] = [:]
    }

    static let bucketBounds = [0.001, 0.005, 0.025, 0.1, 0.5]
    private let state = Mutex(Counters())

    package init() {}

    func update(_ body: (inout Counters) -> Void) { state.withLock { body(&$0) } }

    func integrated(seconds: Double, instructions: Int) {
        update { c in
            c.uploads += 1
            c.uploadedInstructions += instructions
            c.integrationSeconds += seconds
            let i = Self.bucketBounds.firstIndex { seconds <= $0 } ?? Self.bucketBounds.count
            c.integrationBuckets[i] += 1
        }
    }

    func error(_ code: String) { update { $0.errors[code, default: 0] += 1 } }

    /// A copy of the counters (the admin API and tests read them).
    var snapshot: Counters { state.withLock { $0 } }

    /// The Prometheus exposition text.
    public func prometheus(extra: [(String, String, Double)] = []) -> String {
        let c = snapshot
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: Double, labels: String = "") {
            out += "# HELP atoll_\(name) \(help)\n# TYPE atoll_\(name) \(type)\n"
            out += "atoll_\(name)\(labels) \(value == value.rounded() ? String(Int64(value)) : String(value))\n"
        }
        metric("connections", "gauge", "Open sync connections.", Double(c.connections))
        metric("connections_opened_total", "counter", "Sync connections accepted.", Double(c.connectionsOpened))
        metric("sessions", "gauge", "Bound sync sessions.", Double(c.sessions))
        metric("uploads_total", "counter", "Changesets integrated.", Double(c.uploads))
        metric("uploaded_instructions_total", "counter", "Instructions in integrated changesets.", Double(c.uploadedInstructions))
        metric("rejected_writes_total", "counter", "Objects refused by the rules (compensating writes).", Double(c.rejectedWrites))
        metric("downloads_total", "counter", "Download messages sent.", Double(c.downloads))
        metric("download_bytes_total", "counter", "Bytes of download messages sent.", Double(c.downloadBytes))
        metric("bootstraps_total", "counter", "Subscription bootstraps sent.", Double(c.bootstraps))
        metric("bootstrap_objects_total", "counter", "Objects sent in bootstraps.", Double(c.bootstrapObjects))
        metric("bootstrap_bytes_total", "counter", "Bytes sent in bootstraps.", Double(c.bootstrapBytes))
        out += "# HELP atoll_integration_seconds Time to integrate one changeset.\n# TYPE atoll_integration_seconds histogram\n"
        var cumulative = 0
        for (i, bound) in Self.bucketBounds.enumerated() {
            cumulative += c.integrationBuckets[i]
            out += "atoll_integration_seconds_bucket{le=\"\(bound)\"} \(cumulative)\n"
        }
        cumulative += c.integrationBuckets[Self.bucketBounds.count]
        out += "atoll_integration_seconds_bucket{le=\"+Inf\"} \(cumulative)\n"
        out += "atoll_integration_seconds_sum \(c.integrationSeconds)\natoll_integration_seconds_count \(c.uploads)\n"
        out += "# HELP atoll_sync_errors_total Sync errors sent, by code.\n# TYPE atoll_sync_errors_total counter\n"
        for (code, n) in c.errors.sorted(by: { $0.key < $1.key }) { out += "atoll_sync_errors_total{code=\"\(code)\"} \(n)\n" }
        for (name, help, value) in extra { metric(name, "gauge", help, value) }
        return out
    }
}
