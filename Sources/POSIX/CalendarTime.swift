internal import Glibc

/// A moment as a calendar and a clock show it, from the C library (`localtime_r`, `gmtime_r`):
/// local time follows `TZ` and /etc/localtime — FoundationEssentials alone would take every
/// time zone for UTC. Each call hands the fields to `make` (year, month, day, hour, minute,
/// second, and the offset from UTC in seconds east), so the caller builds its own value.
public enum CalendarTime {
    /// `secondsSince1970` (whole seconds, rounded down) in the system's time zone.
    public static func local<T>(
        secondsSince1970: Double, _ make: (Int, Int, Int, Int, Int, Int, Int) -> T
    ) -> T {
        var seconds = time_t(secondsSince1970.rounded(.down))
        var t = tm()
        localtime_r(&seconds, &t)
        return fields(t, make)
    }

    /// `secondsSince1970` (whole seconds, rounded down) in UTC.
    public static func utc<T>(secondsSince1970: Double, _ make: (Int, Int, Int, Int, Int, Int, Int) -> T) -> T {
        var seconds = time_t(secondsSince1970.rounded(.down))
        var t = tm()
        gmtime_r(&seconds, &t)
        return fields(t, make)
    }

    private static func fields<T>(_ t: tm, _ make: (Int, Int, Int, Int, Int, Int, Int) -> T) -> T {
        make(
            Int(t.tm_year) + 1900, Int(t.tm_mon) + 1, Int(t.tm_mday), Int(t.tm_hour), Int(t.tm_min), Int(t.tm_sec),
            t.tm_gmtoff)
    }
}

/// The wall clock (`CLOCK_REALTIME`).
public enum WallClock {
    /// Now: whole seconds since 1970 and the nanoseconds past them.
    public static func now() -> (seconds: Int, nanoseconds: Int) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return (now.tv_sec, now.tv_nsec)
    }
}
