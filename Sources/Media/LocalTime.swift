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

/// The rules that turn a moment into local time: the agent's is POSIX's `SystemTimeZone`, which
/// asks the C library (`localtime_r`, following `TZ` and /etc/localtime) — FoundationEssentials
/// alone knows no time zone but UTC; a `TimeZone` is one too (Recorder's `ClipNaming.swift`).
public protocol LocalTimeZone: Sendable {
    /// The local time of the whole second `secondsSince1970` falls in.
    func localTime(secondsSince1970: Double) -> LocalTime
}
