import FoundationEssentials
import Glibc
import Recorder

/// Local time from the C library (`localtime_r`), which follows `TZ` and /etc/localtime.
/// FoundationEssentials alone would take every time zone for UTC.
public struct SystemTimeZone: LocalTimeZone {
    public init() {}

    public func localTime(_ date: Date) -> LocalTime {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var t = tm()
        localtime_r(&seconds, &t)
        return LocalTime(
            year: Int(t.tm_year) + 1900, month: Int(t.tm_mon) + 1, day: Int(t.tm_mday),
            hour: Int(t.tm_hour), minute: Int(t.tm_min), second: Int(t.tm_sec), utcOffset: t.tm_gmtoff)
    }
}

extension ClipNaming {
    /// Names in the system's local time.
    init(pattern: String, camera: String) {
        self.init(pattern: pattern, camera: camera, timeZone: SystemTimeZone())
    }
}

extension ClipRecord {
    /// A journal timestamp in the system's local time.
    static func timestamp(_ date: Date) -> String {
        timestamp(date, timeZone: SystemTimeZone())
    }
}
