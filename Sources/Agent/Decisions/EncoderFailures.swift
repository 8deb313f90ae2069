import Media

/// When a failing hardware encoder is given up for x264: after `limit` failures within
/// `window` (3 in 10 minutes). Until then each failure closes the clip and opens the encoder
/// again; a device that hangs now and then keeps its few percent of a core, one that keeps
/// failing stops costing clips.
///
/// A value with no clock: the caller passes the time.
public struct EncoderFailures: Sendable, Equatable {
    public let limit: Int
    public let window: Timestamp.Duration
    /// The failures within the window, oldest first.
    public private(set) var recent: [Timestamp] = []

    public init(limit: Int = 3, window: Timestamp.Duration = .init(seconds: 600)) {
        self.limit = max(1, limit)
        self.window = window
    }

    public enum Verdict: Sendable, Equatable {
        /// Open the hardware encoder again.
        case reopen
        /// Use x264 from now on.
        case giveUp
    }

    /// The hardware encoder failed at `now`.
    public mutating func failed(at now: Timestamp) -> Verdict {
        recent.removeAll { now - $0 >= window }
        recent.append(now)
        return recent.count >= limit ? .giveUp : .reopen
    }
}
