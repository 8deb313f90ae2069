import Media
import Recorder

/// What the page (`/`) and the clip viewer (`/clip`) are asked in their query: the filters,
/// which every link of theirs keeps, and where in the clips (a day, an hour of it, the days
/// before one).
struct PageQuery: Sendable, Equatable {
    /// Only clips this started.
    var trigger: TriggerCause?
    /// Only clips whose upload stands so (`waiting`, `uploaded`, `failed`).
    var upload: String?
    /// Only damaged clips (true) or only whole ones (false).
    var damaged: Bool?
    /// One day's clips (`YYYY-MM-DD`); nil: the first screen.
    var day: String?
    /// One hour of the day (0–23); nil: its newest hour with clips.
    var hour: Int?
    /// The first screen's days older than this one (the days' paging).
    var daysBefore: String?
    /// A clip just deleted: not listed, though the agent's writer may not have deleted it yet.
    var deleted: String?

    static let uploadStates = ["waiting", "uploaded", "failed"]

    /// The query `parameters` make; a value the page cannot take, said.
    static func parse(_ parameters: [String: String]) -> Result<PageQuery, WebProblem> {
        var query = PageQuery()
        if let trigger = parameters["trigger"], !trigger.isEmpty {
            guard let cause = TriggerCause(rawValue: trigger) else {
                return .failure(WebProblem("trigger=\(trigger) is not a trigger: give motion or external."))
            }
            query.trigger = cause
        }
        if let upload = parameters["upload"], !upload.isEmpty {
            guard uploadStates.contains(upload) else {
                return .failure(
                    WebProblem("upload=\(upload) is not an upload state: give waiting, uploaded or failed."))
            }
            query.upload = upload
        }
        if let damaged = parameters["damaged"], !damaged.isEmpty {
            guard damaged == "true" || damaged == "false" else {
                return .failure(WebProblem("damaged=\(damaged) is neither true nor false."))
            }
            query.damaged = damaged == "true"
        }
        for (name, value) in [("day", parameters["day"]), ("days_before", parameters["days_before"])] {
            guard let value else { continue }
            guard WebSite.isDay(value) else {
                return .failure(
                    WebProblem("\(name)=\(value) is not a day: give one as YYYY-MM-DD, as the page links them."))
            }
            if name == "day" { query.day = value } else { query.daysBefore = value }
        }
        if let hour = parameters["hour"] {
            guard let number = Int(hour), (0...23).contains(number) else {
                return .failure(WebProblem("hour=\(hour) is not an hour of the day: give one from 0 to 23."))
            }
            query.hour = number
        }
        query.deleted = parameters["deleted"]
        return .success(query)
    }

    /// The catalogue's query for these filters (and the day, when one is asked).
    var clipQuery: ClipQuery {
        ClipQuery(day: day, cause: trigger, damaged: damaged, upload: upload)
    }

    /// The filters as query parameters, in the order the links give them.
    var filters: [(String, String)] {
        var pairs: [(String, String)] = []
        if let trigger { pairs.append(("trigger", trigger.rawValue)) }
        if let upload { pairs.append(("upload", upload)) }
        if let damaged { pairs.append(("damaged", damaged ? "true" : "false")) }
        return pairs
    }

    /// A link to `path` with these filters and then `more`, escaped for an attribute.
    func link(_ path: String, _ more: [(String, String)] = []) -> String {
        let pairs = filters + more
        guard !pairs.isEmpty else { return path }
        return path + "?"
            + pairs.map { "\($0.0)=\(WebSite.queryEncoded($0.1))" }.joined(separator: "&amp;")
    }

    /// Where the list is: the day and hour, as query parameters (for the viewer's way back).
    var place: [(String, String)] {
        var pairs: [(String, String)] = []
        if let day { pairs.append(("day", day)) }
        if let hour { pairs.append(("hour", String(hour))) }
        return pairs
    }
}

/// A clip's start in words a person reads: "Friday 4 December 2026, 10:15:00", from its record's
/// local time (`2026-12-04T10:15:00.000+01:00`); the text itself when it is no such time.
enum HumanTime {
    static let weekdays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    static let months = [
        "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
        "November", "December",
    ]

    static func text(_ start: String) -> String {
        let u = Array(start.utf8)
        guard u.count >= 19, let year = Int(String(start.prefix(4))),
            let month = Int(String(start.dropFirst(5).prefix(2))), (1...12).contains(month),
            let day = Int(String(start.dropFirst(8).prefix(2))), (1...31).contains(day)
        else { return start }
        return "\(weekdays[weekday(year, month, day)]) \(day) \(months[month - 1]) \(year), \(clock(start))"
    }

    /// The time of day, `HH:MM:SS`.
    static func clock(_ start: String) -> String {
        start.count >= 19 ? String(start.dropFirst(11).prefix(8)) : start
    }

    /// The hour of the day (0–23) a start says; nil for no time.
    static func hour(_ start: String) -> Int? {
        start.count >= 13 ? Int(String(start.dropFirst(11).prefix(2))) : nil
    }

    /// Seconds since midnight a start says; nil for no time.
    static func secondOfDay(_ start: String) -> Int? {
        guard start.count >= 19, let h = hour(start), let m = Int(String(start.dropFirst(14).prefix(2))),
            let s = Int(String(start.dropFirst(17).prefix(2)))
        else { return nil }
        return h * 3600 + m * 60 + s
    }

    /// 0 for Monday (days from 1970-01-01, a Thursday, by the civil calendar).
    static func weekday(_ year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return ((days % 7) + 7 + 3) % 7
    }
}
