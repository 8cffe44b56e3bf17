import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation

// Waiting for uploads, downloads and subscriptions: marks round-tripped through the server,
// woken by the session's condition.

extension ClientSession {
    /// Waits until every local change made before the call is on the server.
    /// - Throws: `SyncError(.timeout)`, or the session's fatal error.
    public func waitForUpload(timeout: Double) throws {
        connection.sync { processLocal() }
        let target = try store.withMetadata { sql in try ClientTables.newestPending(sql) }
        try wait(timeout: timeout, what: "upload") { target <= self.uploadedThrough }
    }

    /// Waits until everything the server had when the call was made is applied here.
    public func waitForDownload(timeout: Double, cancelled: () -> Bool = { false }) throws {
        let request = connection.sync { () -> Int in
            marksSent += 1
            if bound { connection.send(.mark(session: number, request: Int64(marksSent))) }
            return marksSent
        }
        try wait(timeout: timeout, what: "download", cancelled: cancelled) { self.marksAnswered >= request }
    }

    /// Waits for a subscription version to be complete.
    /// - Throws: `SyncError(.invalidFlexibleSyncSubscriptions)` with the server's reason when it
    ///   was refused, `.timeout`.
    public func waitForSubscriptions(version: Int64, timeout: Double, cancelled: () -> Bool = { false }) throws {
        try wait(timeout: timeout, what: "subscriptions", cancelled: cancelled) {
            if let message = self.queryErrors[version] { throw SyncError(.invalidFlexibleSyncSubscriptions, message) }
            return self.completedQueryVersion >= version
        }
    }

    /// Waits for a condition (checked under the lock); fails on timeout, on a fatal error of the
    /// session, or when it stops.
    func wait(timeout: Double, what: String, _ done: () throws -> Bool) throws {
        try wait(timeout: timeout, what: what, cancelled: { false }, done)
    }

    /// `wait`, also ending (with a timeout error) as soon as `cancelled` says so.
    func wait(timeout: Double, what: String, cancelled: () -> Bool, _ done: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        let errorsAtStart = errorCount
        let interruptionsAtStart = interruptions
        while try !done() {
            if interruptions != interruptionsAtStart || cancelled() { throw SyncError(.timeout, "waiting for \(what) was cancelled") }
            if _state == .inactive {
                throw lastError ?? SyncError(.connectionFailed, "the session stopped")
            }
            if errorCount > errorsAtStart, let e = lastError, e.isFatal { throw e }
            if Date() >= deadline {
                if let e = lastError, errorCount > errorsAtStart, e.code == .timeout || e.code == .connectionFailed {
                    throw SyncError(.timeout, "waiting for \(what) timed out after \(timeout) s (\(e.message))")
                }
                throw SyncError(.timeout, "waiting for \(what) timed out after \(timeout) s")
            }
            _ = lock.wait(until: min(deadline, Date().addingTimeInterval(0.5)))
        }
    }

    /// Makes the waits under way throw (a cancelled AsyncOpen).
    func interruptWaits() {
        lock.withLock {
            interruptions += 1
            lock.broadcast()
        }
    }

    /// The subscription version whose completion means the realm holds the server's data:
    /// the newest non-error version (partition sync: 0).
    func activeQueryVersion() throws -> Int64 {
        if case .partition = configuration.mode { return 0 }
        return try store.withMetadata { sql in try ClientTables.newestSubscriptionSet(sql, usable: true)?.version ?? 0 }
    }

    /// Whether this file ever completed a download.
    var hasDownloaded: Bool {
        (try? store.withMetadata { sql in try ClientTables.int(sql, "downloadedOnce") }) == 1
    }

    /// Waits for the realm to hold the server's data: its subscriptions bootstrapped, then a
    /// round trip (what `downloadBeforeOpen` and AsyncOpen do).
    public func waitForInitialDownload(timeout: Double, cancelled: () -> Bool = { false }) throws {
        let start = Date()
        try waitForSubscriptions(version: try activeQueryVersion(), timeout: timeout, cancelled: cancelled)
        try waitForDownload(timeout: max(0.1, timeout - Date().timeIntervalSince(start)), cancelled: cancelled)
        try onQueue { try store.write { try store.withMetadata { sql in try ClientTables.set(sql, "downloadedOnce", .int(1)) } } }
    }
}
