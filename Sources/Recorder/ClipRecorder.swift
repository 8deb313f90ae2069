import Media

/// What the clip writer must do, in order.
public enum ClipCommand: Sendable, Equatable {
    /// Open a new clip file whose first frame is the keyframe captured at `clip.start`.
    case open(ClipInfo)
    /// The next GOP of the open clip, whole, ended where its last frame stops showing (the
    /// next keyframe, or the first frame left out of the clip; nil when the stream ended).
    case video(GOP)
    case audio(AudioChunk)
    /// Finish the open clip.
    case close(ClipClosing)
}

/// What started an event.
public enum TriggerCause: String, Sendable, Equatable, Codable {
    /// The motion detector.
    case motion
    /// An outside signal: `vigil trigger`, or MQTT's `record/set`.
    case external
}

/// Facts about a clip known when it opens.
public struct ClipInfo: Sendable, Equatable {
    /// Counts events since the agent started, from 1.
    public var event: Int
    /// 1 for the clip an event starts with; 2 and on for the parts `max_clip` splits off.
    public var part: Int
    /// Capture time of the clip's first frame (a keyframe).
    public var start: Timestamp
    /// When the motion began.
    public var trigger: Timestamp
    /// The score of the frame that confirmed the motion.
    public var score: Double
    /// What started the event.
    public var cause: TriggerCause = .motion
}

/// Facts about a clip known when it closes.
public struct ClipClosing: Sendable, Equatable {
    public enum Reason: Sendable, Equatable {
        /// The event ended (post-roll over).
        case eventEnded
        /// The clip reached `max_clip`; the event goes on in the next part.
        case split
        /// The stream ended or the agent is stopping.
        case finished

        /// As the log's "clip saved" says it.
        public var said: String {
            switch self {
            case .eventEnded: "post_roll over"
            case .split: "max_clip"
            case .finished: "stopped"
            }
        }
    }

    public var reason: Reason
    /// The highest motion score of the event so far.
    public var peakScore: Double
    /// What the clip's record says recorded it: what started the event, or `.external` when an
    /// outside trigger was taken while the clip was open (`ClipRecorder.outsideTriggerTaken`).
    public var cause: TriggerCause

    public init(reason: Reason, peakScore: Double, cause: TriggerCause = .motion) {
        self.reason = reason
        self.peakScore = peakScore
        self.cause = cause
    }
}

/// Joins the event state machine's actions with the encoded stream: keeps the pre-roll ring,
/// and turns a start into "open a clip at the right keyframe, write the pre-roll GOPs, then
/// each GOP as it completes", a split into "close before the next keyframe, open the next part
/// at it", and an end into "close after the last frame of the event".
///
/// GOPs travel whole from the ring to the writer: the ring groups samples once, a GOP is
/// complete (and ended) when the next keyframe arrives — each sample reports the GOP it
/// completed (`Recorded.completedGOP`), which the clip and the live view both take — and the
/// GOP being recorded when a clip closes goes as far as the clip does.
///
/// A value with no clock, thread or I/O: every sample goes to exactly one clip or none, in
/// order, so nothing between the pre-roll keyframe and the live stream is lost or repeated.
public struct ClipRecorder: Sendable {
    public private(set) var ring: PreRollBuffer

    private enum State: Sendable, Equatable {
        case idle
        /// An event started before any keyframe was seen: it opens at the first one.
        case waitingForKeyframe(ClipInfo)
        /// The ring's newest GOP (the one being recorded) belongs to this clip.
        case recording(ClipInfo)
    }

    private var state: State = .idle
    /// Events so far; they are numbered on from it.
    public private(set) var events: Int
    private var peak = 0.0
    private var pendingSplit: (at: Timestamp, part: Int)?
    private var pendingEnd: Timestamp?
    /// Sound at or after a pending split, held until the keyframe that splits is known.
    private var heldAudio: [AudioChunk] = []

    /// `eventsBefore`: the events a recorder this one replaces numbered (after a reload or a
    /// broken stream the numbers go on, so no two clips claim one event).
    public init(preRoll: Timestamp.Duration, maxBytes: Int, eventsBefore: Int = 0) {
        ring = PreRollBuffer(preRoll: preRoll, maxBytes: maxBytes)
        events = eventsBefore
    }

    /// The clip being written, if any.
    public var openClip: ClipInfo? {
        if case .recording(let info) = state { return info }
        return nil
    }

    public var isRecording: Bool { openClip != nil }

    // MARK: Events

    /// An outside trigger (`vigil trigger`, MQTT's `record/set`) was taken while an event is
    /// open: it lengthens the event, and the clip open now — and the parts after it — are
    /// recorded on it, so their records say `external`. A clip already closed keeps its cause.
    public mutating func outsideTriggerTaken() {
        switch state {
        case .idle: break
        case .waitingForKeyframe(var info):
            info.cause = .external
            state = .waitingForKeyframe(info)
        case .recording(var info):
            info.cause = .external
            state = .recording(info)
        }
    }

    /// `cause`: what started the event, for a `start`.
    public mutating func handle(_ action: EventAction, cause: TriggerCause = .motion) -> [ClipCommand] {
        switch action {
        case let .start(trigger, _, score):
            // The event before ended on this very frame (its post-roll ran out as new motion
            // was confirmed): its clip closes at that end, then the new one opens.
            var commands: [ClipCommand] = []
            if case .recording = state { commands = closeNow(at: pendingEnd, reason: .eventEnded) }
            state = .idle
            events += 1
            peak = score
            pendingSplit = nil
            pendingEnd = nil
            heldAudio = []
            guard let contents = ring.clipContents(forTrigger: trigger), let first = contents.gops.first else {
                state = .waitingForKeyframe(
                    ClipInfo(event: events, part: 1, start: trigger, trigger: trigger, score: score, cause: cause))
                return commands
            }
            let info = ClipInfo(
                event: events, part: 1, start: first.start, trigger: trigger, score: score, cause: cause)
            state = .recording(info)
            // Every GOP but the newest is complete; the newest follows when it is.
            return commands + [.open(info)] + contents.gops.dropLast().map(ClipCommand.video)
                + contents.audio.map(ClipCommand.audio)
        case let .split(at, part):
            guard case .recording = state else { return [] }
            pendingSplit = (at, part)
            return []
        case let .end(at, _, peakScore, _):
            peak = max(peak, peakScore)
            switch state {
            case .idle: return []
            case .waitingForKeyframe:
                state = .idle
                return []
            case .recording:
                pendingEnd = at
                // Held sound (after a pending split) is kept only up to the end of the event.
                heldAudio = heldAudio.compactMap { $0.split(at: at).before }
                return []
            }
        }
    }

    /// What the detector made of each frame: its score updates the running peak while
    /// recording; `runStart` (the start of the run of motion the frame is in, or nil) is what
    /// the ring must reach back to for a clip that run may start. While a clip is recorded
    /// the run is that clip's (its GOPs are already on their way to it): the ring then keeps
    /// only the pre-roll of the next event, not the whole event besides.
    public mutating func noteFrame(score: Double, runStart: Timestamp?) {
        if state != .idle { peak = max(peak, score) }
        if case .recording = state {
            ring.keepFrom = nil
        } else {
            ring.keepFrom = runStart
        }
    }

    // MARK: Media

    /// What one encoded sample made.
    public struct Recorded: Sendable {
        /// For the clip writer, in order.
        public var commands: [ClipCommand] = []
        /// The GOP the sample completed — its keyframe ended the one before, at the keyframe's
        /// time — reported this once, whether a clip takes it or not (the live view takes every
        /// one); nil when it completed none. A clip's `.video` of a complete GOP is this one.
        public var completedGOP: GOP?
    }

    public mutating func handle(_ sample: EncodedSample) -> Recorded {
        // The event's end before this sample, which is no keyframe: the GOP being recorded is
        // cut here, short of complete (taken before the ring gives it the sample).
        var cut: GOP?
        if case .recording = state, let end = pendingEnd, sample.pts > end, !sample.isKeyframe {
            cut = ring.newestGOP?.ended(at: sample.pts)
        }
        // The ring groups the samples into GOPs: where a GOP ends is found there, once.
        var recorded = Recorded(completedGOP: ring.append(sample))
        switch state {
        case .idle:
            break
        case .waitingForKeyframe(var info):
            if sample.isKeyframe {
                info.start = sample.pts
                state = .recording(info)
                recorded.commands = [.open(info)]
            }
        case .recording(let info):
            // The GOP being recorded, as far as this clip has it (`sample` not in it).
            let current = recorded.completedGOP ?? cut
            var commands: [ClipCommand] = []
            if let end = pendingEnd, sample.pts > end {
                commands = current.map { [.video($0)] } ?? []
                commands += heldAudio.map(ClipCommand.audio)
                commands.append(.close(ClipClosing(reason: .eventEnded, peakScore: peak, cause: info.cause)))
                state = .idle
                pendingEnd = nil
                pendingSplit = nil
                heldAudio = []
            } else if let split = pendingSplit, sample.isKeyframe, sample.pts >= split.at {
                pendingSplit = nil
                commands = current.map { [.video($0)] } ?? []
                var after: [AudioChunk] = []
                for chunk in heldAudio {
                    let (b, a) = chunk.split(at: sample.pts)
                    if let b { commands.append(.audio(b)) }
                    if let a { after.append(a) }
                }
                heldAudio = []
                commands.append(.close(ClipClosing(reason: .split, peakScore: peak, cause: info.cause)))
                let next = ClipInfo(
                    event: info.event, part: split.part, start: sample.pts, trigger: info.trigger, score: info.score,
                    cause: info.cause)
                state = .recording(next)
                commands.append(.open(next))
                commands += after.map(ClipCommand.audio)
            } else if sample.isKeyframe {
                commands = current.map { [.video($0)] } ?? []
            }
            recorded.commands = commands
        }
        return recorded
    }

    public mutating func handle(_ chunk: AudioChunk) -> [ClipCommand] {
        defer { ring.append(chunk) }
        guard case .recording = state else { return [] }
        var chunk = chunk
        if let end = pendingEnd {
            guard let before = chunk.split(at: end).before else { return [] }
            chunk = before
        }
        if let split = pendingSplit {
            let (before, after) = chunk.split(at: split.at)
            if let after { heldAudio.append(after) }
            return before.map { [.audio($0)] } ?? []
        }
        return [.audio(chunk)]
    }

    /// The stream ended (or the agent stops) at `time`: the open clip is closed now, its last
    /// GOP ended at `time` (open-ended when nil).
    public mutating func finish(at time: Timestamp?) -> [ClipCommand] {
        defer {
            state = .idle
            pendingEnd = nil
            pendingSplit = nil
            heldAudio = []
        }
        guard case .recording = state else { return [] }
        return closeNow(at: time, reason: .finished)
    }

    /// The open clip's last commands: the GOP being recorded, ended at `time` (open-ended when
    /// nil), the sound held for it, the close.
    private func closeNow(at time: Timestamp?, reason: ClipClosing.Reason) -> [ClipCommand] {
        var commands = ring.newestGOP.map { [ClipCommand.video($0.ended(at: time))] } ?? []
        commands += heldAudio.map(ClipCommand.audio)
        commands.append(.close(ClipClosing(reason: reason, peakScore: peak, cause: openClip?.cause ?? .motion)))
        return commands
    }
}
