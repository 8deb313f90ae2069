import FoundationEssentials
import POSIX
import Recorder

/// Local time from the C library (`CalendarTime.local`: `localtime_r`), which follows `TZ` and
/// /etc/localtime. FoundationEssentials alone would take every time zone for UTC.
public struct SystemTimeZone: LocalTimeZone {
    public init() {}

    public func localTime(_ date: Date) -> LocalTime {
        CalendarTime.local(secondsSince1970: date.timeIntervalSince1970) {
            LocalTime(year: $0, month: $1, day: $2, hour: $3, minute: $4, second: $5, utcOffset: $6)
        }
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
