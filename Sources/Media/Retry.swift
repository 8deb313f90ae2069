/// When to try again something that failed, and what an outage came to: the one retry/backoff
/// type. The agent's camera (reopened 1 s after it is lost, then 2, 4 … up to 30 s apart), its
/// microphone (up to 60 s), its storage directory (up to 30 s) and a full disk (retention at
/// most once a second); MQTT's broker (`BrokerRetry`: what to say, on these waits); uploads
/// (1 s doubling to 10 minutes).
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

    /// Failures in the outage under way, the one that began it included; 0 when nothing fails.
    public var failures: Int { isFailing ? tries + 1 : 0 }

    /// What a failure means.
    public struct Failure: Sendable, Equatable {
        /// True for the failure that starts an outage: the one to log.
        public var isFirst: Bool
        /// How long to wait before trying again.
        public var retryIn: Timestamp.Duration

        public init(isFirst: Bool, retryIn: Timestamp.Duration) {
            self.isFirst = isFirst
            self.retryIn = retryIn
        }
    }

    /// Something failed at `now` (the first loss, or a try that did not work). `upTo`, when
    /// given, caps this wait below `maximum` (a kind of failure that is tried again sooner).
    public mutating func failed(at now: Timestamp, upTo cap: Timestamp.Duration? = nil) -> Failure {
        let isFirst = failingSince == nil
        if isFirst {
            failingSince = now
            tries = 0
            delay = first
        } else {
            tries += 1
            let limit = max(first, min(cap ?? maximum, maximum))
            delay = Timestamp.Duration(nanoseconds: min(delay.nanoseconds * 2, limit.nanoseconds))
        }
        return Failure(isFirst: isFirst, retryIn: delay)
    }

    /// An outage that is over.
    public struct Recovery: Sendable, Equatable {
        /// From the first failure to the success.
        public var down: Timestamp.Duration
        /// Tries it took, the successful one included.
        public var tries: Int

        public init(down: Timestamp.Duration, tries: Int) {
            self.down = down
            self.tries = tries
        }
    }

    /// Something worked at `now`: the outage it ends, or nil when nothing was failing.
    public mutating func succeeded(at now: Timestamp) -> Recovery? {
        defer { reset() }
        return failingSince.map { Recovery(down: now - $0, tries: tries + 1) }
    }

    /// Forgets the outage without a recovery to say: the next failure begins a new one, from
    /// the first wait.
    public mutating func reset() {
        failingSince = nil
        tries = 0
        delay = first
    }
}
