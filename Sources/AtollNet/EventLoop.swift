import CEpoll
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Something the loop watches: a socket's readiness events, and a periodic tick for deadlines.
/// Every method runs on the loop's thread.
protocol LoopHandler: AnyObject {
    func handleEvents(_ events: UInt32)
    /// Called about every `EventLoop.tickInterval` with the loop's monotonic clock (seconds).
    func tick(now: Double)
    /// The loop is stopping: close, and report it to whoever waits (no callbacks after this).
    func loopStopped()
}

/// One thread that waits on epoll and runs everything of the connections registered with it.
///
/// Thread model (docs/net.md): every callback of a server or a socket on this loop runs on its
/// thread, one at a time. Other threads hand work to it with `execute`, which queues the closure
/// and wakes the loop through an eventfd; the closure then runs on the loop thread.
public final class EventLoop: @unchecked Sendable {
    /// How often handlers are ticked for their timeouts (seconds).
    static let tickInterval = 0.1

    private let epoll: Int32
    private let wakeFD: Int32
    /// Work handed to the loop thread. Closures queued from the loop itself capture loop-only
    /// state; the loop runs each on its thread, so passing them through the lock is safe.
    private struct Work: @unchecked Sendable { let run: () -> Void }
    private let queue = Mutex<(work: [Work], open: Bool)>(([], true))
    private let stopped = Atomic<Bool>(false)
    private let threadStarted = Mutex<pthread_t?>(nil)
    // Loop-thread state.
    private var handlers: [Int32: LoopHandler] = [:]
    private var lastTick = 0.0
    /// Scratch space for reads, shared by the loop's connections: they copy out only what they keep.
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
    /// The loop's thread, joined by `stop()` (so that when it returns the thread has ended,
    /// thread-local state of the libraries included).
    private var thread: pthread_t = 0

    /// A loop for clients that don't bring their own; started on first use and never stopped.
    public static let shared: EventLoop = {
        // A loop that fails to start leaves its clients with a clear error at connect time.
        (try? EventLoop(name: "atoll-net-shared")) ?? EventLoop(failed: ())
    }()

    private let failedToStart: Bool

    /// Starts a loop on a new thread.
    public init(name: String = "atoll-net") throws {
        Self.ignoreSIGPIPE()
        let ep = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard ep >= 0 else { throw NetError.system("epoll_create1", errno) }
        let wake = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wake >= 0 else { close(ep); throw NetError.system("eventfd", errno) }
        epoll = ep
        wakeFD = wake
        failedToStart = false
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: wake))
        guard epoll_ctl(ep, EPOLL_CTL_ADD, wake, &event) == 0 else {
            let code = errno
            close(ep); close(wake)
            throw NetError.system("epoll_ctl", code)
        }
        // The thread holds a reference to the loop until its run ends.
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, 1 << 20)
        let context = Unmanaged.passRetained(LoopStart(loop: self, name: name)).toOpaque()
        let created = pthread_create(&thread, &attributes, { argument in
            guard let argument else { return nil }
            let start = Unmanaged<LoopStart>.fromOpaque(argument).takeRetainedValue()
            _ = pthread_setname_np(pthread_self(), String(start.name.prefix(15)))
            start.loop.run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<LoopStart>.fromOpaque(context).release()
            close(ep); close(wake)
            throw NetError.system("pthread_create", created)
        }
    }

    /// Writes to a socket the peer has reset raise SIGPIPE, which kills a process by default.
    /// Plain sockets send with MSG_NOSIGNAL, but OpenSSL writes with write(2); so the first loop
    /// sets SIGPIPE to ignored when the process still has the default (docs/net.md).
    private static let sigpipeIgnored: Bool = {
        var current = sigaction()
        if sigaction(SIGPIPE, nil, &current) == 0, current.__sigaction_handler.sa_handler == nil {
            signal(SIGPIPE, SIG_IGN)
        }
        return true
    }()

    private static func ignoreSIGPIPE() { _ = sigpipeIgnored }

    private init(failed: ()) {
        epoll = -1
        wakeFD = -1
        failedToStart = true
        queue.withLock { $0.open = false }
    }

    deinit {
        if !failedToStart {
            close(epoll)
            close(wakeFD)
        }
        readBuffer.deallocate()
    }

    /// True on the loop's own thread.
    public var inLoop: Bool {
        guard let id = threadStarted.withLock({ $0 }) else { return false }
        return pthread_equal(id, pthread_self()) != 0
    }

    /// Runs `work` on the loop thread: at once when called there, else soon after. Returns false
    /// (and drops the work) when the loop has stopped: it will never run.
    @discardableResult
    public func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        if inLoop { work(); return true }
        return enqueue(work)
    }

    /// Queues `work` for the loop thread even when called from it (it runs after the current
    /// event); false when the loop has stopped.
    @discardableResult
    func enqueue(_ work: @escaping () -> Void) -> Bool {
        let (accepted, first) = queue.withLock { queue -> (Bool, Bool) in
            guard queue.open else { return (false, false) }
            queue.work.append(Work(run: work))
            return (true, queue.work.count == 1)
        }
        if first { wake() }
        return accepted
    }

    private func wake() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { write(wakeFD, $0.baseAddress, 8) }
    }

    func checkRunning() throws {
        if failedToStart || stopped.load(ordering: .acquiring) { throw NetError.loopStopped }
    }

    /// Stops the loop thread after the work already queued; connections still open are closed
    /// (sockets get `.closed`, connects in progress fail). Work handed to a stopped loop is
    /// dropped. Returns when the thread has ended, unless called on it.
    public func stop() {
        guard !failedToStart, !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        wake()
        if inLoop {
            // The thread cannot wait for itself: it ends after the current event, on its own.
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }

    // MARK: registration (loop thread)

    func register(_ fd: Int32, events: UInt32, handler: LoopHandler) throws {
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 else { throw NetError.system("epoll_ctl", errno) }
        handlers[fd] = handler
    }

    func modify(_ fd: Int32, events: UInt32) {
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event)
    }

    func unregister(_ fd: Int32) {
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
        handlers[fd] = nil
    }

    var handlerCount: Int { handlers.count }

    // MARK: the loop

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    private func run() {
        threadStarted.withLock { $0 = pthread_self() }
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        lastTick = Self.now()
        while !stopped.load(ordering: .acquiring) {
            let count = events.withUnsafeMutableBufferPointer {
                epoll_wait(epoll, $0.baseAddress, Int32($0.count), Int32(Self.tickInterval * 1000))
            }
            if count > 0 {
                for index in 0..<Int(count) {
                    let fd = events[index].data.fd
                    if fd == wakeFD {
                        var value: UInt64 = 0
                        _ = withUnsafeMutableBytes(of: &value) { read(wakeFD, $0.baseAddress, 8) }
                        continue
                    }
                    // A handler closed by an earlier event of this batch is gone from the table.
                    handlers[fd]?.handleEvents(events[index].events)
                }
            }
            runQueued()
            let now = Self.now()
            if now - lastTick >= Self.tickInterval {
                lastTick = now
                for handler in Array(handlers.values) { handler.tick(now: now) }
            }
        }
        runQueued()
        // Whatever is still open is closed the normal way: awaiting connects fail, sockets report
        // `.closed`, descriptors are released.
        for handler in Array(handlers.values) { handler.loopStopped() }
        // From here work handed to the loop is refused (its callers learn it will not run).
        queue.withLock { $0.open = false }
        runQueued()
        handlers.removeAll()
    }

    private func runQueued() {
        while true {
            let work = queue.withLock { queue -> [Work] in
                let taken = queue.work
                queue.work = []
                return taken
            }
            if work.isEmpty { return }
            for item in work { item.run() }
        }
    }
}

/// What a new loop thread starts with.
private final class LoopStart {
    let loop: EventLoop
    let name: String
    init(loop: EventLoop, name: String) {
        self.loop = loop
        self.name = name
    }
}
