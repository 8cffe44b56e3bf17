import Foundation

/// Keeps a change callback registered; `invalidate()` (or releasing the token) unregisters it.
///
/// After `invalidate()` returns, the callback is never called again: if it is running on
/// another thread, `invalidate()` waits for it to return. Invalidating a token inside its own
/// callback is allowed; `onInvalidate` then runs when that callback returns.
public final class NotificationToken: @unchecked Sendable {
    private let condition = NSCondition()
    private var alive = true
    private var running: pthread_t?
    private var finishWhenReturned = false
    private var finished = false
    /// Runs once, after the last call of the callback (a C host's `free_userdata`).
    var onInvalidate: (() -> Void)?
    weak var notifier: Notifier?

    package init() {}

    deinit { invalidate() }

    public var isInvalidated: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !alive
    }

    /// Runs `action` once, after the callback's last call (when the token is invalidated, or
    /// when the callback invalidating it returns). Replaces an action given before.
    public func whenInvalidated(_ action: @escaping @Sendable () -> Void) {
        condition.lock()
        let now = finished
        if !now { onInvalidate = action }
        condition.unlock()
        if now { action() }
    }

    /// Unregisters the callback. Idempotent.
    public func invalidate() {
        condition.lock()
        guard alive else {
            condition.unlock()
            return
        }
        alive = false
        let me = pthread_self()
        while let r = running, pthread_equal(r, me) == 0 { condition.wait() }
        let inOwnCallback = running != nil
        if inOwnCallback { finishWhenReturned = true }
        condition.unlock()
        notifier?.remove(self)
        if !inOwnCallback { finish() }
    }

    /// Calls `body` (the callback with its change) unless the token was invalidated.
    package func run(_ body: () -> Void) {
        condition.lock()
        guard alive else {
            condition.unlock()
            return
        }
        running = pthread_self()
        condition.unlock()
        body()
        condition.lock()
        running = nil
        let finishNow = finishWhenReturned
        condition.broadcast()
        condition.unlock()
        if finishNow { finish() }
    }

    private func finish() {
        condition.lock()
        let action = finished ? nil : onInvalidate
        finished = true
        onInvalidate = nil
        condition.unlock()
        action?()
    }
}
