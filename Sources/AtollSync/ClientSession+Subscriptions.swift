import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation

// Flexible sync's subscription sets: versions kept in the realm, sent when they change, and
// their state as the server answers (complete, error).

extension ClientSession {
    func setUpSubscriptions() throws {
        let count = try store.withMetadata { sql in try ClientTables.subscriptionSetCount(sql) }
        guard case .flexible = configuration.mode else { return }
        if count == 0 || configuration.rerunOnOpen, !configuration.initialSubscriptions.isEmpty || count == 0 {
            _ = try updateSubscriptions { set in
                for s in configuration.initialSubscriptions {
                    if let i = set.firstIndex(where: { $0.name == s.name && !s.name.isEmpty }) { set[i] = s } else { set.append(s) }
                }
            }
        }
    }

    /// The newest subscription set: version, state, error, subscriptions.
    public func subscriptions() throws -> (version: Int64, state: String, error: String?, subscriptions: [SubscriptionQuery]) {
        try store.withMetadata { sql in
            guard let set = try ClientTables.newestSubscriptionSet(sql) else { return (0, "complete", nil, []) }
            let subs = try Self.subscriptions(stored: set.queries)
            let state = set.state == "pending" && bootstrapping ? "bootstrapping" : set.state
            return (set.version, state, set.error, subs)
        }
    }

    var bootstrapping: Bool { !bootstrapBuffer.isEmpty }

    /// Makes a new subscription set version from the newest one changed by `body`, and sends
    /// it. Returns the new version.
    public func updateSubscriptions(_ body: (inout [SubscriptionQuery]) throws -> Void) throws -> Int64 {
        guard case .flexible = configuration.mode else {
            throw SyncError(.badSyncPartitionValue, "a partition-sync realm has no subscriptions")
        }
        // The session's handle has one write transaction at a time: it is written on the queue.
        let version = try onQueue { try store.write {
            try store.withMetadata { sql -> Int64 in
                let current = try subscriptions()
                var set = current.subscriptions
                try body(&set)
                let next = current.version + 1
                try ClientTables.addSubscriptionSet(sql, version: next, queries: Wire.encode(.list(set.map(\.wireValue))))
                return next
            }
        } }
        connection.async { [self] in try? sendQuery() }
        return version
    }

    /// Sends the newest subscription version that the server has not refused (on the queue).
    func sendQuery() throws {
        guard bound else { return }
        let set = try store.withMetadata { sql in try ClientTables.newestSubscriptionSet(sql, usable: true) }
        let version = set?.version ?? 0
        // A version sent on this binding is not sent again (an update made before the bind
        // would otherwise go twice, and the server would bootstrap it twice).
        guard version != querySent else { return }
        querySent = version
        let subscriptions = try set.map { try Self.subscriptions(stored: $0.queries) } ?? []
        connection.send(.query(ClientMessage.Query(session: number, version: version, subscriptions: subscriptions,
                                                   complete: set?.state == "complete")))
    }

    /// A subscription set's queries, from the JSON text the device stores them as.
    static func subscriptions(stored text: String) throws -> [SubscriptionQuery] {
        guard case .list(let items) = try EJSON.parse(text) else { return [] }
        return try items.map { try SubscriptionQuery(wire: $0) }
    }
}
