import Media

/// When to try again something that failed, and what to say about it: one type for the camera
/// (reopened 1 s after it is lost, then 2, 4 … up to 30 s apart), the microphone (up to 60 s)
/// and a full disk (retention at most once a second).
///
/// An outage is said once: the failure that starts it (`failed` says it is the first), the
/// recovery with how long it lasted and how many tries it took (`succeeded`) — never each
/// retry, which would fill the journal of a camera left unplugged for a week.
///
/// A value with no clock: the caller passes the time.
public struct Retry: Sendable, Equatable {
    /// The wait after the first failure; each further failure doubles it, up to `maximum`.
    public let first: Timestamp.Duration
    public let maximum: Timestamp.Duration
    /// The wait before the next try.
    public private(set) var delay: Timestamp.Duration
    /// When the outage began; nil while nothing is failing.
    public private(set) var failingSince: Timestamp?
    /// Tries since the outage began (failed ones, and the one that succeeded).
    public private(set) var tries = 0

    public init(first: Timestamp.Duration = .init(seconds: 1), maximum: Timestamp.Duration) {
        self.first = first
        self.maximum = max(first, maximum)
        delay = first
    }

    public var isFailing: Bool { failingSince != nil }

    /// What a failure means.
    public struct Failure: Sendable, Equatable {
        /// True for the failure that starts an outage: the one to log.
        public var isFirst: Bool
        /// How long to wait before trying again.
        public var retryIn: Timestamp.Duration
    }

    /// Something failed at `now` (the first loss, or a try that did not work).
    public mutating func failed(at now: Timestamp) -> Failure {
        let isFirst = failingSince == nil
        if isFirst {
            failingSince = now
            tries = 0
            delay = first
        } else {
            tries += 1
            delay = Timestamp.Duration(nanoseconds: min(delay.nanoseconds * 2, maximum.nanoseconds))
        }
        return Failure(isFirst: isFirst, retryIn: delay)
    }

    /// An outage that is over.
    public struct Recovery: Sendable, Equatable {
        /// From the first failure to the success.
        public var down: Timestamp.Duration
        /// Tries it took, the successful one included.
        public var tries: Int
    }

    /// Something worked at `now`: the outage it ends, or nil when nothing was failing.
    public mutating func succeeded(at now: Timestamp) -> Recovery? {
        defer {
            failingSince = nil
            tries = 0
            delay = first
        }
        return failingSince.map { Recovery(down: now - $0, tries: tries + 1) }
    }
}
