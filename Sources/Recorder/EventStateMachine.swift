import Media

/// How long events last: the `recording.post_roll` and `recording.max_clip` settings.
public struct EventSettings: Sendable, Equatable {
    /// An event ends this long after the last frame with motion; motion resuming before then
    /// continues the same event.
    public var postRoll: Timestamp.Duration
    /// A clip is split into parts of at most about this length, counted from the trigger (the
    /// first part also holds the pre-roll before it).
    public var maxClip: Timestamp.Duration

    public init(postRoll: Timestamp.Duration, maxClip: Timestamp.Duration) {
        self.postRoll = postRoll
        self.maxClip = maxClip
    }
}

/// What the event state machine is told.
public enum EventInput: Sendable, Equatable {
    /// The detector's verdict on the frame captured at `time`: `motion` as in
    /// `MotionResult.motion`, its `score`, and `motionStart`, the first frame of the run of
    /// frames over the threshold (the trigger time; the frame's own time when nil).
    case frame(time: Timestamp, motion: Bool, score: Double, motionStart: Timestamp?)
    /// The stream ends (end of file, camera gone, shutdown) at `time`: an open event ends now,
    /// its post-roll cut short.
    case finish(at: Timestamp)
}

/// What the recorder must do.
public enum EventAction: Sendable, Equatable {
    /// A new event. Motion began at `trigger` and was confirmed by the frame at `confirmedAt`
    /// (`min_frames` later). The recorder starts the clip at the first keyframe at or before
    /// `trigger − pre_roll` that it still holds.
    case start(trigger: Timestamp, confirmedAt: Timestamp, score: Double)
    /// The current part of the clip has reached `max_clip`: the recorder ends it just before
    /// the first keyframe at or after `at` and starts part number `part` (2, 3, …) at that
    /// keyframe, so that every frame is in exactly one part. The next split is due `max_clip`
    /// after `at`.
    case split(at: Timestamp, part: Int)
    /// The event is over. The clip holds the frames captured up to and including `at`:
    /// `lastMotion + post_roll`, or the finish time when the stream ended first.
    /// `peakScore` is the highest score seen during the event; `parts` how many parts it has.
    case end(at: Timestamp, lastMotion: Timestamp, peakScore: Double, parts: Int)
}

/// The event logic: idle → motion → post-roll → idle, with clip splitting.
///
/// A value with no clock, thread or I/O: it is driven by frame timestamps and detector
/// verdicts, and answers with actions. Inputs older than the last one are ignored.
///
/// - idle: a frame with motion starts an event (`start`) → motion.
/// - motion: a frame without motion → post-roll (the last motion is the previous frame).
/// - post-roll: a frame with motion → motion (the same event, also when the frame is past
///   the post-roll but its run of motion began within it); once a frame's time is past
///   `lastMotion + post_roll` the event ends (`end` at that instant) → idle; a frame exactly
///   at that instant still belongs to the event.
/// - in motion or post-roll, when a frame's time reaches `partStart + max_clip` a `split` is
///   due at that instant (one split per frame however long the gap before it).
/// - `finish` ends an open event at once.
public struct EventStateMachine: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        case idle
        case motion
        case postRoll
    }

    public let settings: EventSettings
    public private(set) var state: State = .idle
    /// The open event's trigger, part start, last motion frame and peak score.
    public private(set) var trigger: Timestamp?
    private var partStart = Timestamp.zero
    private var part = 1
    private var lastMotion = Timestamp.zero
    private var peak = 0.0
    private var lastTime: Timestamp?

    public init(settings: EventSettings) {
        self.settings = settings
    }

    /// The moment the open event will end if no more motion comes (post-roll only).
    public var endDue: Timestamp? { state == .postRoll ? lastMotion + settings.postRoll : nil }

    public mutating func handle(_ input: EventInput) -> [EventAction] {
        switch input {
        case let .frame(time, motion, score, motionStart):
            return frame(time: time, motion: motion, score: score, motionStart: motionStart)
        case let .finish(time):
            return finish(at: time)
        }
    }

    private mutating func frame(time: Timestamp, motion: Bool, score: Double, motionStart: Timestamp?) -> [EventAction]
    {
        if let lastTime, time < lastTime { return [] }
        lastTime = time
        var actions: [EventAction] = []

        // What fell due before this frame: the end of a post-roll that has run out (this
        // frame is then no longer part of the event, unless its run of motion began within
        // the post-roll), or a split.
        if let due = endDue, time > due, !(motion && (motionStart ?? time) <= due) {
            actions.append(closeEvent(at: due))
        }
        if state != .idle, time >= partStart + settings.maxClip {
            // One split at the latest due instant: parts in a gap without frames would be empty.
            let length = settings.maxClip.nanoseconds
            let elapsed = (time - partStart).nanoseconds
            let at = partStart + Timestamp.Duration(nanoseconds: (elapsed / length) * length)
            part += 1
            partStart = at
            actions.append(.split(at: at, part: part))
        }

        if motion {
            if state == .idle {
                let start = min(motionStart ?? time, time)
                trigger = start
                partStart = start
                part = 1
                peak = score
                actions.append(.start(trigger: start, confirmedAt: time, score: score))
            }
            state = .motion
            lastMotion = time
            peak = max(peak, score)
        } else if state != .idle {
            if state == .motion { state = .postRoll }
            peak = max(peak, score)
            if let due = endDue, time >= due {
                actions.append(closeEvent(at: due))
            }
        }
        return actions
    }

    private mutating func finish(at time: Timestamp) -> [EventAction] {
        let time = max(time, lastTime ?? time)
        lastTime = time
        guard state != .idle else { return [] }
        let end = min(time, endDue ?? time)
        return [closeEvent(at: end)]
    }

    private mutating func closeEvent(at time: Timestamp) -> EventAction {
        let action = EventAction.end(at: time, lastMotion: lastMotion, peakScore: peak, parts: part)
        state = .idle
        trigger = nil
        part = 1
        peak = 0
        return action
    }
}
