internal import Glibc
import Media

/// The one clock the agent reads: monotonic time as a `Timestamp` (Media's), the time V4L2 and
/// ALSA stamp frames and sound with. Every reading of time goes through one — the pipeline's,
/// the writer's and the housekeeping's decisions, the retries of devices, the broker and
/// uploads, a hook's timeout — and is injected where it is read: `vigil run` passes
/// `.monotonic` (`CLOCK_MONOTONIC`), a test a manual clock it moves itself (TestSupport's
/// `ManualClock`), so a stepped agent can be moved in time without waiting.
///
/// Waits are not readings: a thread that waits (`Condition`, `Event`, `StopToken`, `sleep`)
/// waits on the real monotonic clock, whatever clock the code it runs reads.
///
/// Named as the issue names it: this module's `Clock` shadows the standard library's protocol
/// of that name wherever POSIX is imported (a module's own declarations win over the standard
/// library's), and no module of the project uses Swift's.
public struct Clock: Sendable {
    private let read: @Sendable () -> Timestamp

    /// A clock that reads `read`: a test's.
    public init(_ read: @escaping @Sendable () -> Timestamp) { self.read = read }

    /// What the clock reads now.
    public func now() -> Timestamp { read() }

    /// `CLOCK_MONOTONIC`: seconds since boot, never stepped (a board without a clock battery
    /// may set its wall clock from the network long after it booted).
    public static let monotonic = Clock { monotonicNow() }

    private static func monotonicNow() -> Timestamp {
        var ts = timespec()
        // Fails only for an unknown clock or a bad pointer; Linux always has CLOCK_MONOTONIC.
        let status = clock_gettime(CLOCK_MONOTONIC, &ts)
        precondition(status == 0, "clock_gettime(CLOCK_MONOTONIC) failed")
        return Timestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }

    /// Sleeps the calling thread until `CLOCK_MONOTONIC` reads `deadline` (at once if it has
    /// passed): a real wait, for pacing a source in real time and for polling. A signal does
    /// not cut it short (the deadline is absolute).
    public static func sleep(untilMonotonic deadline: Timestamp) {
        guard deadline.nanoseconds > 0 else { return }
        var ts = timespec(
            tv_sec: Int(deadline.nanoseconds / 1_000_000_000), tv_nsec: Int(deadline.nanoseconds % 1_000_000_000))
        // clock_nanosleep returns the error number instead of setting errno. Anything but EINTR
        // (EINVAL for a bad time) cannot be slept away: return.
        _ = try? retryOnInterrupt(.errorNumber) { clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) }
    }

    /// Sleeps the calling thread `seconds` of the monotonic clock.
    public static func sleep(seconds: Double) {
        sleep(untilMonotonic: monotonicNow() + Timestamp.Duration(seconds: seconds))
    }
}
