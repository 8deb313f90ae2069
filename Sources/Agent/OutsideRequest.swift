import Media

/// What an outside request asks — `vigil trigger`'s line on its socket, `POST /api/trigger`'s
/// JSON, MQTT's `record/set` — each front end reading its own wire format into it: record for
/// some seconds, record until stopped, or stop. One parser of the seconds, one set of limits and
/// one set of words for what is refused, whichever way the request came.
public enum OutsideRequest: Sendable, Equatable {
    /// Record for `seconds` (from 1 to `OutsideTrigger.longest`), then the post-roll.
    case record(seconds: Double)
    /// Record until `stop`, for `recording.max_clip` at most.
    case recordUntilStopped
    /// End an outside recording: the event goes on through its post-roll, or while there is motion.
    case stop

    /// How long a request that gives no seconds records (`vigil trigger`, `POST /api/trigger`
    /// with `{}`): MQTT's `ON` records until `OFF` instead.
    public static let defaultSeconds = 10.0

    /// What a request may ask, for the messages of every front end.
    public static let accepted = OutsideTrigger.accepted

    /// The seconds `text` asks to record for (plain decimal, from 1 to 3600:
    /// `OutsideTrigger.seconds`), or `defaultSeconds` when it gives none.
    public static func seconds(_ text: Substring?) -> Result<Double, OutsideRequestError> {
        guard let text else { return .success(defaultSeconds) }
        guard let seconds = OutsideTrigger.seconds(text) else {
            return .failure(OutsideRequestError(given: String(text)))
        }
        return .success(seconds)
    }

    /// The seconds `number` (already read: JSON's) asks to record for, from 1 to 3600, or
    /// `defaultSeconds` when there is none.
    public static func seconds(_ number: Double?) -> Result<Double, OutsideRequestError> {
        guard let number else { return .success(defaultSeconds) }
        guard number >= 1, number <= OutsideTrigger.longest.seconds else {
            return .failure(OutsideRequestError(given: DecimalText.short(number, 3)))
        }
        return .success(number)
    }
}

/// A request whose seconds cannot be recorded: what it gave, and what is taken.
public struct OutsideRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    public var given: String

    public var description: String { "\"\(given)\" is not \(OutsideRequest.accepted)" }
}

extension AgentControl {
    /// Hands `request` to the agent, with who asked (`vigil trigger`, `web`, `mqtt`: the log
    /// and the journal's trigger say it).
    public func ask(_ request: OutsideRequest, by: String) {
        switch request {
        case .record(let seconds): record(seconds: seconds, by: by)
        case .recordUntilStopped: record(seconds: nil, by: by)
        case .stop: stopRecording(by: by)
        }
    }
}
