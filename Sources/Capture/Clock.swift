internal import Glibc
import Media
internal import POSIX

/// The monotonic clock that V4L2 and ALSA timestamps use (`CLOCK_MONOTONIC`).
public enum MonotonicClock {
    public static func now() -> Timestamp {
        var ts = timespec()
        // Fails only for an unknown clock or a bad pointer; Linux always has CLOCK_MONOTONIC.
        let status = clock_gettime(CLOCK_MONOTONIC, &ts)
        precondition(status == 0, "clock_gettime(CLOCK_MONOTONIC) failed")
        return Timestamp(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }

    /// Sleeps until the clock reads `deadline` (returns at once if it has passed).
    public static func sleep(until deadline: Timestamp) {
        guard deadline.nanoseconds > 0 else { return }
        var ts = timespec(
            tv_sec: Int(deadline.nanoseconds / 1_000_000_000), tv_nsec: Int(deadline.nanoseconds % 1_000_000_000))
        // clock_nanosleep returns the error number instead of setting errno. A signal that
        // interrupts it: sleep on (the deadline is absolute). Anything else (EINVAL for a bad
        // time) cannot be slept away: return.
        _ = try? retryOnInterrupt(.errorNumber) { clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) }
    }
}

/// Delivers frames no earlier than their timestamps say, relative to the first one.
struct Pacer {
    private var anchor: (clock: Timestamp, media: Timestamp)?

    /// Waits until `media` is due: the first call sets the anchor and returns at once.
    mutating func wait(for media: Timestamp) {
        guard let anchor else {
            self.anchor = (MonotonicClock.now(), media)
            return
        }
        MonotonicClock.sleep(until: anchor.clock + (media - anchor.media))
    }
}
