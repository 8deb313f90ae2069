import Media

/// An outside recording (`vigil trigger`, MQTT's `record/set`): the frames from the one it is
/// asked at to its end count as motion, so the event machine starts, splits and ends it as it
/// does any event — the pre-roll before it, the post-roll after it.
///
/// It ends after the seconds asked for, when stopped, or — asked without an end — after
/// `max_clip`: a forgotten `ON` never records for ever. A new request while one holds extends
/// it to the later end.
///
/// A value with no clock: the caller passes the frame times.
public struct OutsideTrigger: Sendable, Equatable {
    /// The last instant that counts as motion; nil when none holds.
    public private(set) var until: Timestamp?

    public init() {}

    /// The longest a request may ask for: an hour (`vigil trigger --seconds`'s limit).
    public static let longest = Timestamp.Duration(seconds: 3600)

    /// The seconds a request says (`vigil trigger --seconds`, its socket, MQTT's `record/set`):
    /// plain decimal seconds (`30`, `2.5`) from 1 to `longest`; nil for anything else — no
    /// sign, exponent, hexadecimal (`0x10`), `inf` or spaces, which `Double(_:)` would read.
    public static func seconds(_ text: some StringProtocol) -> Double? {
        let text = String(text)
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let isDigits = { (part: Substring) in !part.isEmpty && part.allSatisfy { ("0"..."9").contains($0) } }
        guard parts.allSatisfy(isDigits), let seconds = Double(text), seconds >= 1,
            seconds <= longest.seconds
        else { return nil }
        return seconds
    }

    /// What `seconds(_:)` accepts, for messages.
    public static let accepted = "plain decimal seconds from 1 to 3600 (such as 30 or 2.5)"

    /// Records from `time` for `seconds`, or up to `maxClip` when nil.
    public mutating func record(seconds: Double?, at time: Timestamp, maxClip: Timestamp.Duration) {
        let length = seconds.map { Timestamp.Duration(seconds: min(max($0, 0), Self.longest.seconds)) } ?? maxClip
        let end = time + length
        until = max(until ?? end, end)
    }

    public mutating func stop() { until = nil }

    /// Whether the frame at `time` counts as motion; a hold that has run out ends.
    public mutating func holds(at time: Timestamp) -> Bool {
        guard let until else { return false }
        guard time <= until else {
            self.until = nil
            return false
        }
        return true
    }
}
