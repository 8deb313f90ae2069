import FoundationEssentials

/// A second of wall-clock time as it reads where the agent runs: the calendar fields and the
/// offset from UTC then in force.
public struct LocalTime: Equatable, Sendable {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int
    /// Seconds east of UTC.
    public var utcOffset: Int

    public init(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, utcOffset: Int) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
        self.utcOffset = utcOffset
    }
}

/// The rules that turn dates into local time. FoundationEssentials alone knows no time zone
/// but UTC, so the agent passes one that asks the C library (`localtime_r`, which follows
/// `TZ` and /etc/localtime); a `TimeZone` is one too.
public protocol LocalTimeZone: Sendable {
    /// The local time of the whole second `date` falls in.
    func localTime(_ date: Date) -> LocalTime
}

extension TimeZone: LocalTimeZone {
    public func localTime(_ date: Date) -> LocalTime {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = self
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return LocalTime(
            year: c.year ?? 0, month: c.month ?? 0, day: c.day ?? 0, hour: c.hour ?? 0, minute: c.minute ?? 0,
            second: c.second ?? 0, utcOffset: secondsFromGMT(for: date))
    }
}
