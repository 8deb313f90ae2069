internal import Glibc
import Media

/// A mutex with a condition variable, whose timed waits run on the monotonic clock (a board
/// without a clock battery may set its wall clock from the network long after booting).
///
/// `@unchecked Sendable`: the pthread objects are made for use from several threads.
public final class Condition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits for a `broadcast` (or a spurious wake-up); call it holding the lock, in `withLock`.
    public func wait() {
        pthread_cond_wait(condition, mutex)
    }

    /// Like `wait()`, giving up after `seconds`.
    public func wait(seconds: Double) {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let whole = seconds.rounded(.down)
        deadline.tv_sec += Int(whole)
        deadline.tv_nsec += Int((seconds - whole) * 1_000_000_000)
        if deadline.tv_nsec >= 1_000_000_000 {
            deadline.tv_sec += 1
            deadline.tv_nsec -= 1_000_000_000
        }
        pthread_cond_timedwait(condition, mutex, &deadline)
    }

    public func broadcast() {
        pthread_cond_broadcast(condition)
    }
}

/// Something that happens once, that threads can wait for: a thread's end, the pipeline's
/// drain. A `StopToken` that is only ever stopped.
public final class Event: Sendable {
    private let token = StopToken()

    public init() {}

    public func signal() { token.stop() }

    /// Whether `signal` was called.
    public var isSignalled: Bool { token.isStopped }

    public func wait() { token.wait() }

    /// Waits at most `seconds`; false when it has not happened by then.
    @discardableResult
    public func wait(seconds: Double) -> Bool { token.wait(seconds: seconds) }
}

/// Starts a named thread running `body`; `join()` waits for it to finish.
public final class JoinableThread: Sendable {
    private let finished = Event()
    public func join() { finished.wait() }
    /// Waits at most `seconds`; false when the thread is still running.
    public func join(timeout seconds: Double) -> Bool { finished.wait(seconds: seconds) }
    fileprivate func markFinished() { finished.signal() }
}

/// Starts one of the agent's own threads. Without it the agent cannot run: when the system
/// refuses a thread (a task or memory limit reached), it says so and exits 71 (EX_OSERR)
/// rather than trap.
@discardableResult
public func startThread(_ name: String, _ body: @escaping @Sendable () -> Void) -> JoinableThread {
    let handle = JoinableThread()
    startEssentialThread(name) {
        body()
        handle.markFinished()
    }
    return handle
}

/// `startDetachedThread` for a thread the agent cannot do without: on failure, a message and exit 71.
public func startEssentialThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    do { try startDetachedThread(name, body) } catch {
        _ = try? FileDescriptor(unowned: 2).writeAll("vigil: \(error.description)\n")
        exit(71)  // EX_OSERR
    }
}

/// The system refused a new thread.
public struct ThreadStartError: Error, CustomStringConvertible {
    var name: String
    var code: Int32
    public var description: String {
        "cannot start the \(name) thread: \(SystemError(code).text) — is the service's task limit (TasksMax) or memory too low?"
    }
}

/// What a new thread runs, passed through pthread_create's context pointer.
private final class ThreadStart {
    let name: String
    let body: @Sendable () -> Void
    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}

/// Names the calling thread (what `top -H` and /proc show); the kernel keeps 15 bytes.
/// Glibc's `pthread_setname_np` is a GNU extension Swift does not see: this is what it does.
/// A thread left unnamed works the same, so a failure is not reported.
private func nameThisThread(_ name: String) {
    guard let comm = try? FileDescriptor(opening: "/proc/thread-self/comm", .writeOnly) else { return }
    _ = try? comm.writeAll(Array(name.utf8.prefix(15)))
}

/// Starts a detached thread named `name`.
public func startDetachedThread(_ name: String, _ body: @escaping @Sendable () -> Void) throws(ThreadStartError) {
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    let context = Unmanaged.passRetained(ThreadStart(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, &attributes,
        { context in
            let start = Unmanaged<ThreadStart>.fromOpaque(context!).takeRetainedValue()
            nameThisThread(start.name)
            start.body()
            return nil
        }, context)
    if result != 0 {
        Unmanaged<ThreadStart>.fromOpaque(context).release()
        throw ThreadStartError(name: name, code: result)
    }
}

/// What the agent's waiting threads wait on instead of polling a flag: `stop` ends every wait,
/// now and later, at once; `ring` ends the waits in progress (or the next one) once, so a
/// periodic task looks again at what it was waiting for (a reload changed its interval).
///
/// `@unchecked Sendable`: `stopped` and `rung` are read and written only while holding `condition`.
public final class StopToken: @unchecked Sendable {
    private let condition = Condition()
    private var stopped = false
    private var rung = false

    public init() {}

    /// For good: every wait returns true from now on.
    public func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    public var isStopped: Bool { condition.withLock { stopped } }

    /// Wakes the threads waiting now (or the next one to wait) once.
    public func ring() {
        condition.withLock {
            rung = true
            condition.broadcast()
        }
    }

    /// Waits until stopped; a ring does not end this wait.
    public func wait() {
        condition.withLock {
            while !stopped { condition.wait() }
        }
    }

    /// Waits `seconds`, or less when stopped or rung; true when stopped.
    @discardableResult
    public func wait(seconds: Double) -> Bool {
        let deadline = Clock.monotonic.now() + Timestamp.Duration(seconds: seconds)
        return condition.withLock {
            while !stopped && !rung {
                let remaining = (deadline - Clock.monotonic.now()).seconds
                if remaining <= 0 { break }
                condition.wait(seconds: remaining)
            }
            rung = false
            return stopped
        }
    }
}
