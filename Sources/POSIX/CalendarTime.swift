internal import Glibc
import Media

/// A moment as a calendar and a clock show it, from the C library (`localtime_r`, `gmtime_r`):
/// local time follows `TZ` and /etc/localtime — FoundationEssentials alone would take every
/// time zone for UTC.
public enum CalendarTime {
    /// `secondsSince1970` (whole seconds, rounded down) in the system's time zone.
    public static func local(secondsSince1970: Double) -> LocalTime {
        var seconds = time_t(secondsSince1970.rounded(.down))
        var t = tm()
        localtime_r(&seconds, &t)
        return fields(t)
    }

    /// `secondsSince1970` (whole seconds, rounded down) in UTC.
    public static func utc(secondsSince1970: Double) -> LocalTime {
        var seconds = time_t(secondsSince1970.rounded(.down))
        var t = tm()
        gmtime_r(&seconds, &t)
        return fields(t)
    }

    private static func fields(_ t: tm) -> LocalTime {
        LocalTime(
            year: Int(t.tm_year) + 1900, month: Int(t.tm_mon) + 1, day: Int(t.tm_mday), hour: Int(t.tm_hour),
            minute: Int(t.tm_min), second: Int(t.tm_sec), utcOffset: t.tm_gmtoff)
    }
}

/// The system's time zone, the agent's: local time from the C library (`CalendarTime.local`),
/// which follows `TZ` and /etc/localtime.
public struct SystemTimeZone: LocalTimeZone {
    public init() {}

    public func localTime(secondsSince1970: Double) -> LocalTime {
        CalendarTime.local(secondsSince1970: secondsSince1970)
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
