import Media

/// When the MQTT client tries the broker again, and what it says about it: a value without a
/// clock or I/O (the connection thread passes the time, in seconds of its clock). The waits
/// are Media's `Retry` (the one retry/backoff type); what this adds is MQTT's policy: which
/// failures are said, how long a connection must last before the waits start again from 1 s,
/// and take-overs.
///
/// | what happened | next try | said |
/// |---|---|---|
/// | no connection made: refused, no route, no answer, a name that does not resolve (yet) | after 1 s, doubling to 5 s | the first failure of an outage |
/// | the broker said no: a login refused, a certificate not trusted | after 1 s, doubling to 60 s | the first failure of that kind |
/// | a connection lost (a link cut, a broker restarted) | after 1 s, doubling to 5 s while the connections last less than 10 s | each loss |
/// | another agent seen connected with this client id since our last connection (`ClientPresence`) | — | once, with the fix, until a connection finds none |
/// | a connection lost while another agent uses this client id | after 60 s, doubling to 10 min | — (debug) |
/// | connected | — | the recovery: how long it was down, the tries |
///
/// So the broker is found within a few seconds of coming up however long it was away (a board
/// that boots before the broker's after a power cut); a link that drops connections is tried
/// again within a few seconds each time; a login that stays wrong costs a try a minute; and two
/// agents that share a client id do not throw each other off every second. A take-over is never
/// concluded from timing alone: a broker that speaks MQTT 3.1.1 (or mosquitto before 2.0.15,
/// in MQTT 5 too) says nothing to the client it drops, so only another agent's presence shows it.
public struct BrokerRetry: Sendable, Equatable {
    /// What went wrong.
    public enum Failure: Sendable, Equatable {
        /// No connection was made, or none was answered.
        case unreachable
        /// The broker (or TLS) said no.
        case refused
        /// A connection that was up went down.
        case lost
    }

    /// What to say, at warning or error level.
    public enum Say: Sendable, Equatable {
        /// The first failure of an outage, or the first of another kind within it; each loss.
        case outage(Failure)
        /// Another agent uses this client id: the broker lets one connect at a time.
        case sharedClientID
    }

    /// What to do after a failure.
    public struct Decision: Sendable, Equatable {
        /// Seconds until the next try.
        public var retryIn: Double
        /// What to log; nil: nothing (debug at most).
        public var say: Say?
        /// The loss is another agent's taking the connection over (with the same client id).
        public var takenOver = false

        public init(retryIn: Double, say: Say?, takenOver: Bool = false) {
            self.retryIn = retryIn
            self.say = say
            self.takenOver = takenOver
        }
    }

    /// A connection made, and what to say about it.
    public struct Recovery: Sendable, Equatable {
        /// The first connection of the run.
        public var first: Bool
        /// Seconds from the first failure of the outage it ends; nil when nothing failed.
        public var down: Double?
        /// Tries it took, this one included.
        public var tries: Int
    }

    public static let firstDelay = 1.0
    public static let unreachableMaximum = 5.0
    public static let refusedMaximum = 60.0
    /// A connection that lasts less than this keeps the waits growing (it is no sign that the
    /// broker is back for good); one that lasts longer starts them again from `firstDelay`.
    public static let shortSession = 10.0
    public static let takeOverFirst = 60.0
    public static let takeOverMaximum = 600.0

    /// The waits between tries: they grow from failure to failure, across short sessions, and
    /// start again from `firstDelay` after a long session (or a take-over).
    private var waits = Retry(
        first: .init(seconds: BrokerRetry.firstDelay), maximum: .init(seconds: BrokerRetry.refusedMaximum))
    /// The outage under way (from its first failure to the next connection): how long it
    /// lasted and how many tries it took.
    private var outage = Retry(maximum: .init(seconds: BrokerRetry.refusedMaximum))
    /// The kind of failure last said in this outage.
    private var said: Failure?
    /// When the connection up now was made.
    private var connectedAt: Double?
    private var everConnected = false
    /// Another agent was seen connected with this client id, and no connection since found
    /// none: a loss is its taking the connection over.
    public private(set) var sharedClientID = false
    private var sharedSaid = false
    /// The waits after take-overs.
    private var takeOvers = Retry(
        first: .init(seconds: BrokerRetry.takeOverFirst), maximum: .init(seconds: BrokerRetry.takeOverMaximum))

    public init() {}

    /// A try failed, or the connection was lost, at `now`.
    public mutating func failed(_ failure: Failure, at now: Double) -> Decision {
        let time = Timestamp(seconds: now)
        let session = connectedAt.map { now - $0 }
        connectedAt = nil
        if !outage.isFailing { said = nil }
        _ = outage.failed(at: time)
        if failure == .lost, let session {
            // A connection held longer than any agent sharing the id waits: that agent is gone.
            if sharedClientID && session > Self.takeOverMaximum + Self.shortSession { endSharing() }
            if sharedClientID {
                waits.reset()
                return Decision(retryIn: takeOvers.failed(at: time).retryIn.seconds, say: nil, takenOver: true)
            }
            if session >= Self.shortSession { waits.reset() }
        }
        let maximum = failure == .refused ? Self.refusedMaximum : Self.unreachableMaximum
        let next = waits.failed(at: time, upTo: .init(seconds: maximum)).retryIn.seconds
        var say: Say?
        if said != failure && !(failure == .unreachable && said == .lost) {
            say = .outage(failure)
            said = failure
        }
        return Decision(retryIn: next, say: say)
    }

    /// A connection was made at `now`: what to say.
    public mutating func connected(at now: Double) -> Recovery {
        defer {
            connectedAt = now
            everConnected = true
            said = nil
        }
        // Every failure of the outage was a try (a loss too: a connection that did not last),
        // and this one worked.
        let ended = outage.succeeded(at: Timestamp(seconds: now))
        return Recovery(first: !everConnected, down: ended?.down.seconds, tries: (ended?.tries ?? 0) + 1)
    }

    /// What a connection found of the agents with this client id: another one connected since
    /// our last connection (`another`), or none. Says so the first time in a row.
    public mutating func presence(another: Bool) -> Say? {
        guard another else {
            endSharing()
            return nil
        }
        sharedClientID = true
        guard !sharedSaid else { return nil }
        sharedSaid = true
        return .sharedClientID
    }

    private mutating func endSharing() {
        sharedClientID = false
        sharedSaid = false
        takeOvers.reset()
    }
}

/// How often Home Assistant's discovery configs go out again when it asks for them (`online`
/// on its status topic): at once when the last announcement is `interval` seconds old, else
/// once when it is — a burst of requests makes at most one more announcement after it. A
/// value without a clock.
public struct AnnouncementPacing: Sendable, Equatable {
    public static let interval = 5.0
    private var last: Double?
    private var pending = false

    public init() {}

    /// The configs went out at `now` (at a connection): what was asked before is answered.
    public mutating func announced(at now: Double) {
        last = now
        pending = false
    }

    /// Home Assistant asked at `now`: whether to announce now (else it is held, for `due`).
    public mutating func requested(at now: Double) -> Bool {
        if let last, now - last < Self.interval {
            pending = true
            return false
        }
        announced(at: now)
        return true
    }

    /// Whether the announcement held back is due at `now` (true once).
    public mutating func due(at now: Double) -> Bool {
        guard pending, let last, now - last >= Self.interval else { return false }
        announced(at: now)
        return true
    }
}

/// A warning anyone can cause many times a second (a command that says nothing): said the
/// first time, then counted; the count goes with the next one said, at most one every
/// `interval` seconds, or alone once the interval is over (or at a stop). A value without a
/// clock.
public struct RepeatedWarning: Sendable, Equatable {
    public let interval: Double
    private var lastSaid: Double?
    /// Occurrences since the last line, not said one by one.
    public private(set) var unsaid = 0

    public init(interval: Double) { self.interval = interval }

    /// It happened again at `now`: nil to say nothing, else say it, with the number of earlier
    /// ones that were not said (0 the first time).
    public mutating func occurred(at now: Double) -> Int? {
        if let lastSaid, now - lastSaid < interval {
            unsaid += 1
            return nil
        }
        defer {
            lastSaid = now
            unsaid = 0
        }
        return unsaid
    }

    /// The count not said yet, to say alone: once the interval since the last line is over,
    /// or at once with `now` nil (a stop); nil when there is nothing to say.
    public mutating func flush(at now: Double?) -> Int? {
        guard unsaid > 0 else { return nil }
        if let now, let lastSaid, now - lastSaid < interval { return nil }
        defer {
            unsaid = 0
            if let now { lastSaid = now }
        }
        return unsaid
    }
}
