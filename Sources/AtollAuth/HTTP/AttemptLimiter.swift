import Dispatch
import Synchronization

/// How many attempts the app API takes, per minute, before it answers 429 with `Retry-After`
/// (docs/server.md, "Accounts and tokens"). 0: no limit. The sync server sets them from its
/// config; a service made by itself has none.
public struct AttemptLimits: Sendable, Equatable {
    /// Failed logins of one email/password account.
    public var failedLoginsPerAccount = 0
    /// Failed logins (any provider) from one address.
    public var failedLoginsPerAddress = 0
    /// New users from one address: anonymous logins (each makes a user) and registrations.
    public var signupsPerAddress = 0

    public init(failedLoginsPerAccount: Int = 0, failedLoginsPerAddress: Int = 0, signupsPerAddress: Int = 0) {
        self.failedLoginsPerAccount = failedLoginsPerAccount
        self.failedLoginsPerAddress = failedLoginsPerAddress
        self.signupsPerAddress = signupsPerAddress
    }
}

/// Attempts per key (an account, an address) as token buckets: `perMinute` at once, then one
/// more every 60/`perMinute` seconds. Checking does not take; the caller takes what counted (a
/// failure, a new user), so that a client within the limit is never refused.
final class AttemptLimiter: Sendable {
    let perMinute: Int
    private struct Bucket {
        var tokens: Double
        var updated: Double
    }
    private struct State {
        var buckets: [String: Bucket] = [:]
        /// Buckets kept before the full ones are dropped: keys an attacker makes up (emails,
        /// addresses) cost memory only while their buckets are not full again.
        var pruneAt = 4096
    }
    private let state = Mutex(State())

    /// `perMinute` 0 or less: no limit.
    init(perMinute: Int) { self.perMinute = max(0, perMinute) }

    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    private var rate: Double { Double(perMinute) / 60 }

    private func refilled(_ bucket: Bucket?, at now: Double) -> Bucket {
        guard let bucket else { return Bucket(tokens: Double(perMinute), updated: now) }
        return Bucket(tokens: min(Double(perMinute), bucket.tokens + rate * (now - bucket.updated)), updated: now)
    }

    /// Whole seconds until `key` may try again (at least 1), or nil when it may now.
    func retryAfter(_ key: String) -> Int? {
        guard perMinute > 0 else { return nil }
        let now = Self.now()
        let bucket = refilled(state.withLock { $0.buckets[key] }, at: now)
        guard bucket.tokens < 1 else { return nil }
        return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
    }

    /// Counts one attempt of `key`.
    func take(_ key: String) {
        guard perMinute > 0 else { return }
        let now = Self.now()
        state.withLock { state in
            var bucket = refilled(state.buckets[key], at: now)
            bucket.tokens = max(0, bucket.tokens - 1)
            state.buckets[key] = bucket
            if state.buckets.count > state.pruneAt {
                state.buckets = state.buckets.filter { refilled($0.value, at: now).tokens < Double(perMinute) }
                state.pruneAt = max(4096, 2 * state.buckets.count)
            }
        }
    }
}

/// The app API's limiters, from `AttemptLimits`.
struct AttemptGuards: Sendable {
    let failedByAccount: AttemptLimiter
    let failedByAddress: AttemptLimiter
    let signupsByAddress: AttemptLimiter

    init(_ limits: AttemptLimits) {
        failedByAccount = AttemptLimiter(perMinute: limits.failedLoginsPerAccount)
        failedByAddress = AttemptLimiter(perMinute: limits.failedLoginsPerAddress)
        signupsByAddress = AttemptLimiter(perMinute: limits.signupsPerAddress)
    }

    /// Refuses a login while its account (an email, already normalized) or its address has used
    /// up its failures; counts nothing (`failedLogin` does). The account is refused whatever the
    /// password, so that guessing stops for everyone, not only for one address.
    /// - Throws: `AuthError(.tooManyRequests)` with the seconds to wait.
    func admitLogin(account: String?, address: String) throws {
        if let account, let wait = failedByAccount.retryAfter(account) {
            throw AuthError(.tooManyRequests, "too many failed logins for this account; try again in \(wait) s", retryAfter: wait)
        }
        if let wait = failedByAddress.retryAfter(address) {
            throw AuthError(.tooManyRequests, "too many failed logins from this address; try again in \(wait) s", retryAfter: wait)
        }
    }

    func failedLogin(account: String?, address: String) {
        if let account { failedByAccount.take(account) }
        failedByAddress.take(address)
    }

    /// Refuses a new user from an address over its limit, and counts it otherwise.
    /// - Throws: `AuthError(.tooManyRequests)` with the seconds to wait.
    func admitSignup(address: String) throws {
        if let wait = signupsByAddress.retryAfter(address) {
            throw AuthError(.tooManyRequests, "too many new users from this address; try again in \(wait) s", retryAfter: wait)
        }
        signupsByAddress.take(address)
    }
}
