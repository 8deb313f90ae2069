import Analysis
import Capture
import Configuration
import FoundationEssentials
import Logging
import Media
import MotionDetection
import Overlay
import QuickTime
import Recorder
import Snapshot
import Synchronization

extension EventSettings {
    /// The event timing `recording.*` sets.
    public init(_ recording: Settings.Recording) {
        self.init(postRoll: .init(seconds: recording.postRoll), maxClip: .init(seconds: recording.maxClip))
    }
}

/// What the capture thread hands the pipeline.
enum CaptureItem: Sendable {
    case frame(VideoFrame)
    /// Sound from the microphone, on the video's clock.
    case audio(AudioChunk)
    /// The camera went away (unplugged, stalled): the open clip is closed; frames may follow
    /// once it is back, possibly in another format.
    case interrupted
    /// The source ended (end of file) or failed; no more frames follow.
    case end(CaptureError?)
}

/// The processing thread: motion detection on each frame's luma, the event state machine,
/// the encoder, and the pre-roll ring and clip logic — producing writer commands. It never
/// waits on the disk: when the writer falls behind by more than `writerBacklogLimit` bytes,
/// whole GOPs are dropped (counted), so clips stay decodable.
///
/// Its decisions are values it drives: `EventStateMachine` (when events start, split and
/// end), `ClipRecorder` (which GOPs go to which clip), `StallWatch` (when a quiet source
/// counts as stalled), `KeyframeSchedule` (when a keyframe is due) and `ReloadPlan` (what a
/// reloaded configuration changes, applied between events).
///
/// `@unchecked Sendable`: other threads touch only `pendingReload` (a Mutex); everything else
/// belongs to the pipeline thread.
final class Pipeline: @unchecked Sendable {
    private var settings: Settings
    private let log: Logger
    private let stats: Stats
    private let writer: WorkQueue<WriterItem>
    private let sinks: any EventSink
    /// Outside requests: record now, detection on or off.
    private let control: AgentControl
    private var outside = OutsideTrigger()
    private var detecting = true
    /// What started the open event.
    private var cause = TriggerCause.motion
    /// The open clip's picture so far: its frame with the highest score (`snapshot.*`), sent
    /// to the writer just before the clip's close.
    private var peakPicture: (score: Double, picture: SnapshotPicture)?
    /// When `latest.jpg` was last taken (`snapshot.live_interval`).
    private var lastLive: Timestamp?
    /// The text drawn into each frame (`overlay.*`), made for the stream's picture height;
    /// nil when there is none.
    private var overlay: (drawer: TextOverlay, text: OverlayText)?
    /// Whether the log said the overlay's text had to be shortened (once per run).
    private var overlayShortenedSaid = false
    private let monotonicNow: @Sendable () -> Timestamp
    private var detector: MotionDetector
    private var eventLogic: EventStateMachine
    private var recorder: ClipRecorder
    /// Make the encoder for each stream (after an interruption the format may differ): the
    /// hardware one (`preferred`) while it works — `EncoderFailures` says when it is given up —
    /// then x264 (`fallback`).
    private let encoders: EncoderChoice
    private var hardwareFailures = EncoderFailures()
    private var hardwareGivenUp = false
    private var encoder: (any VideoEncoder)?
    /// Where the stream's keyframes go, whichever encoder makes them.
    private var keyframes: KeyframeSchedule
    private var stall = StallWatch()
    private var firstFrame: Timestamp?
    private var droppingVideo = false
    /// What the writer was last told about the stream, and the sound format once sound came.
    private var streamInfo: StreamInfo?
    private var audioFormat: AudioTrackFormat?
    /// A reloaded configuration, applied between events.
    let pendingReload = Mutex<Settings?>(nil)

    static let writerBacklogLimit = 64 << 20

    init(
        settings: Settings, encoders: EncoderChoice, log: Logger,
        stats: Stats, writer: WorkQueue<WriterItem>, sinks: any EventSink, control: AgentControl = AgentControl(),
        monotonicNow: @escaping @Sendable () -> Timestamp
    ) {
        self.settings = settings
        self.encoders = encoders
        keyframes = KeyframeSchedule(interval: .init(seconds: settings.encoder.keyframeInterval))
        self.log = log.with(("component", "pipeline"))
        self.stats = stats
        self.writer = writer
        self.sinks = sinks
        self.control = control
        self.monotonicNow = monotonicNow
        detector = MotionDetector(settings: settings.motion, mask: settings.motionMask)
        eventLogic = EventStateMachine(settings: EventSettings(settings.recording))
        recorder = Pipeline.clipRecorder(settings)
    }

    /// A clip recorder for `s`; one that replaces `previous` numbers events on from its.
    static func clipRecorder(_ s: Settings, after previous: ClipRecorder? = nil) -> ClipRecorder {
        ClipRecorder(
            preRoll: .init(seconds: s.recording.preRoll), maxBytes: s.recording.preRollMaxBytes,
            eventsBefore: previous?.events ?? 0)
    }

    /// True when no event is open (a reload may then replace the detection and event logic).
    private var isIdle: Bool { eventLogic.state == .idle && !recorder.isRecording }

    func run(_ frames: WorkQueue<CaptureItem>, wallClock: @Sendable () -> Date) -> CaptureError? {
        while true {
            let item: CaptureItem
            let timeout = stall.timeout(streaming: encoder != nil)
            switch frames.pop(waitingAtMost: timeout) {
            case .element(let next): item = next
            case .closed:
                finish()
                return nil
            case .timedOut:
                let open = recorder.isRecording || eventLogic.state != .idle
                log.warning(
                    "the source delivered nothing",
                    [("seconds", .seconds(timeout ?? 0)), ("closing_clip", .bool(open))])
                stall.timedOut()
                interrupt()
                continue
            }
            if case .frame(let frame) = item {
                switch stall.frame(at: frame.timestamp) {
                case .next: break
                case .afterStall: log.info("frames again")
                case .jumped(let by):
                    log.warning(
                        "the frame times jumped; what was recorded ends before the jump and the stream starts afresh",
                        [("seconds", .seconds(by.seconds)), ("closing_clip", .bool(!isIdle))])
                    interrupt()
                    _ = stall.frame(at: frame.timestamp)
                }
            }
            switch item {
            case .frame(let frame):
                do { try process(frame, wallClock: wallClock) } catch {
                    if case .deviceFailed = error, encoders.preferred != nil {
                        hardwareFailed(error)
                        continue
                    }
                    log.error("encoder failed; stopping", [("error", .string(error.description))])
                    finish()
                    return .readFailed(source: "encoder", frame: 0, reason: error.description)
                }
            case .audio(let chunk):
                if audioFormat == nil, let info = streamInfo {
                    audioFormat = AudioTrackFormat(sampleRate: chunk.sampleRate, channels: chunk.channels)
                    var updated = info
                    updated.audio = audioFormat
                    streamInfo = updated
                    writer.push(.stream(updated), cost: 0)
                }
                guard audioFormat != nil else { continue }  // before the first frame: no clip can hold it
                send(recorder.handle(chunk))
            case .interrupted:
                interrupt()
            case .end(let error):
                finish()
                return error
            }
        }
    }

    /// The stream broke off (a camera lost, a source stalled): closes the open clip; what was
    /// held belongs to the stream that ended, and the next one starts afresh — the detector
    /// too, or motion still going on when frames come again would carry the start of a run of
    /// motion from before the break, and the new event a trigger before its clip.
    private func interrupt() {
        finish()
        outside.stop()  // asked of the stream that ended (its times may not go on in the next)
        stall.streamEnded()
        detector = MotionDetector(settings: settings.motion, mask: settings.motionMask)
        eventLogic = EventStateMachine(settings: EventSettings(settings.recording))
        recorder = Pipeline.clipRecorder(settings, after: recorder)
    }

    private func process(_ frame: VideoFrame, wallClock: () -> Date) throws(EncoderError) {
        if encoder == nil { try start(with: frame, wallClock: wallClock) }
        applyReloadIfIdle()

        takeRequests(at: frame.timestamp)

        let t0 = monotonicNow()
        let result = detector.process(frame.luma, at: frame.timestamp)
        let t1 = monotonicNow()
        var commands: [ClipCommand] = []
        // Motion counts while detection is on; an outside recording counts as motion.
        let moving = detecting && result.motion
        let held = outside.holds(at: frame.timestamp)
        let actions = eventLogic.handle(
            .frame(
                time: frame.timestamp, motion: moving || held, score: result.score,
                motionStart: moving ? result.motionStart : frame.timestamp))
        if actions.contains(where: { if case .start = $0 { true } else { false } }) {
            followWallClock(wallClock)
            cause = held ? .external : .motion
        }
        let wasRecording = recorder.isRecording
        for action in actions {
            note(action)
            // An event that never opened a clip (no keyframe came) leaves its picture behind.
            if case .start = action, !wasRecording { peakPicture = nil }
            commands += recorder.handle(action, cause: cause)
        }
        recorder.noteFrame(score: result.score, runStart: result.runStart)
        // Drawn after detection has seen the frame, so a changing clock is never motion. The
        // pipeline is the frame's last reader before the encoder: nobody else sees the change.
        if let overlay, let stream = streamInfo {
            let format = frame.format
            let fit = overlay.drawer.charactersThatFit(pictureWidth: format.width, pictureHeight: format.height)
            let (text, shortened) = overlay.text.text(at: stream.wallClock(frame.timestamp), fitting: fit)
            if shortened && !overlayShortenedSaid {
                overlayShortenedSaid = true
                log.warning(
                    "overlay text too wide for the picture; shortened to keep the time (a shorter overlay.text, camera.name or overlay.scale fits)",
                    [
                        ("pattern", .string(overlay.text.pattern)), ("characters_that_fit", .int(fit)),
                        ("drawn", .string(text)),
                    ])
            }
            overlay.drawer.draw(text, into: frame)
        }
        let samples = try encoder?.encode(frame, keyframe: keyframes.keyframeDue(at: frame.timestamp)) ?? []
        let t2 = monotonicNow()
        for sample in samples { commands += recorder.handle(sample) }
        send(commands)
        // After the commands: a clip this frame closed does not get its picture, one it opened does.
        takePictures(of: frame, score: result.score)

        log.trace(
            "frame",
            [
                ("t", .seconds((frame.timestamp - (firstFrame ?? frame.timestamp)).seconds)),
                ("score", .fixed(result.score, 4)),
                ("threshold", .fixed(result.threshold, 4)), ("motion", .bool(result.motion)),
                ("light_switch", .bool(result.lightSwitch)),
            ])
        let ring = recorder.ring
        stats.update {
            $0.framesIn += 1
            $0.framesEncoded += samples.count
            $0.detectSeconds += (t1 - t0).seconds
            $0.encodeSeconds += (t2 - t1).seconds
            $0.lastScore = result.score
            $0.peakScore = max($0.peakScore, result.score)
            $0.ringSeconds = ring.span.seconds
            $0.ringBytes = ring.byteCount
        }
    }

    /// The snapshot of the open event (a copy of its highest-scoring frame so far, taken
    /// small), and now and then the live picture for `latest.jpg`. JPEG encoding and the file
    /// are the writer's.
    private func takePictures(of frame: VideoFrame, score: Double) {
        let snapshot = settings.snapshot
        if snapshot.enabled, !isIdle, score > peakPicture?.score ?? -1 {
            if let picture = picture(of: frame) { peakPicture = (score, picture) }
        }
        if snapshot.liveInterval > 0,
            lastLive.map({ (frame.timestamp - $0).seconds >= snapshot.liveInterval }) ?? true
        {
            lastLive = frame.timestamp
            if let picture = picture(of: frame) {
                writer.push(.livePicture(picture, quality: snapshot.quality), cost: 0)
            }
        }
    }

    private func picture(of frame: VideoFrame) -> SnapshotPicture? {
        do {
            return try SnapshotPicture(
                copying: frame, rotation: settings.camera.rotation, width: settings.snapshot.width)
        } catch {
            log.warning("no snapshot of this frame", [("error", .string(error.description))])
            return nil
        }
    }

    /// Takes what was asked from outside since the last frame.
    private func takeRequests(at time: Timestamp) {
        let requests = control.take()
        if let (on, by) = requests.detection, on != detecting {
            detecting = on
            log.info(on ? "motion detection on" : "motion detection off", [("asked_by", .string(by))])
            sinks.handle(.detection(on))
        }
        if let by = requests.stopRecording, outside.until != nil {
            outside.stop()
            log.info("outside recording stopped; the event ends after its post-roll", [("asked_by", .string(by))])
        }
        if let (seconds, by) = requests.record {
            outside.record(seconds: seconds, at: time, maxClip: eventLogic.settings.maxClip)
            // Taken during an event: it lengthens it, and the clip open now is recorded on it.
            if eventLogic.state != .idle {
                cause = .external
                recorder.outsideTriggerTaken()
            }
            log.info(
                "recording on an outside trigger",
                [
                    ("asked_by", .string(by)),
                    ("seconds", .seconds(((outside.until ?? time) - time).seconds)),
                ])
        }
    }

    /// Creates the encoder for the source's negotiated format and tells the writer about the stream.
    private func start(with frame: VideoFrame, wallClock: () -> Date) throws(EncoderError) {
        let format = frame.format
        let now = wallClock()
        let captured = Pipeline.wallClockOfCapture(
            frame.timestamp, now: now, monotonicNow: monotonicNow(),
            monotonicTimestamps: Pipeline.hasMonotonicTimestamps(settings.camera.device))
        let encoder = try makeEncoder(for: format)
        self.encoder = encoder
        makeOverlay(height: format.height)
        keyframes = KeyframeSchedule(interval: keyframes.interval)
        // After an interruption the origin stays that of the source's very first frame.
        let origin =
            streamInfo.map { ($0.firstFrame, $0.wallAtFirstFrame, $0.onMonotonicClock) }
            ?? (frame.timestamp, captured ?? now, captured != nil)
        if firstFrame == nil { firstFrame = frame.timestamp }
        var aspect: PixelAspectRatio?
        if let par = format.pixelAspectRatio, par.numerator != par.denominator, par.numerator > 0,
            let h = UInt32(exactly: par.numerator), let v = UInt32(exactly: par.denominator)
        {
            aspect = PixelAspectRatio(horizontalSpacing: h, verticalSpacing: v)
        }
        let video = VideoTrackFormat(
            width: format.width, height: format.height,
            sequenceParameterSet: encoder.sequenceParameterSet, pictureParameterSet: encoder.pictureParameterSet,
            rotation: settings.camera.rotation, pixelAspectRatio: aspect,
            color: format.height >= 720 ? .bt709 : .bt601)
        let info = StreamInfo(
            video: video, audio: audioFormat, firstFrame: origin.0, wallAtFirstFrame: origin.1,
            onMonotonicClock: origin.2)
        streamInfo = info
        writer.push(.stream(info), cost: 0)
        log.info(
            "encoding",
            [
                ("width", .int(format.width)), ("height", .int(format.height)),
                ("pixel_format", .string(format.pixelFormat.description)),
            ]
                + encoder.logDescription.map { ($0.name, .string($0.value)) } + [
                    ("keyframe_interval", .seconds(keyframes.interval.seconds))
                ])
    }

    /// The overlay for a picture `height` lines high (as stored: the text is drawn turned
    /// against `camera.rotation`, so that it reads upright as shown), as `overlay.*` says, in
    /// the font the settings read (none when it cannot be made: said once, and recording goes
    /// on without it).
    private func makeOverlay(height: Int) {
        let o = settings.overlay
        guard o.enabled, let font = o.font else {
            overlay = nil
            return
        }
        do {
            let drawer = try TextOverlay(
                font: font, position: o.position, scale: o.scale(forHeight: height),
                rotation: settings.camera.rotation)
            overlay = (drawer, OverlayText(pattern: o.text, camera: settings.camera.name))
        } catch {
            overlay = nil
            log.error("no text on the picture: the overlay cannot be made", [("error", .string(error.description))])
        }
    }

    /// The hardware encoder while it is used, x264 otherwise. A hardware encoder that cannot
    /// open is given up for x264, with a warning — except for the first stream when it was
    /// asked for by name (`encoder.backend = "v4l2"`): then the agent stops with the error.
    private func makeEncoder(for format: VideoFormat) throws(EncoderError) -> any VideoEncoder {
        if let hardware = encoders.preferred, !hardwareGivenUp {
            do { return try hardware.makeEncoder(for: format) } catch {
                if encoders.required && streamInfo == nil { throw error }
                hardwareGivenUp = true
                log.warning(
                    "the hardware encoder cannot open for this stream; recording with x264 from now on",
                    [("error", .string(error.description))])
            }
        }
        return try encoders.fallback.makeEncoder(for: format)
    }

    /// The hardware encoder failed: the clip is closed, and the next frame opens the encoder
    /// again — x264 once `EncoderFailures` gives the hardware one up.
    private func hardwareFailed(_ error: EncoderError) {
        let verdict = hardwareFailures.failed(at: monotonicNow())
        log.error(
            "the hardware encoder failed; the clip is closed and the encoder opened again",
            [("error", .string(error.description)), ("failures_in_10_min", .int(hardwareFailures.recent.count))])
        if encoder != nil { interrupt() }
        encoder = nil
        if verdict == .giveUp && !hardwareGivenUp {
            hardwareGivenUp = true
            log.error(
                "the hardware encoder failed \(hardwareFailures.limit) times in 10 minutes; recording with x264 from now on"
            )
        }
    }

    /// Cameras and the synthetic scene stamp frames with the monotonic clock when they are
    /// captured; a file's frames count from zero.
    static func hasMonotonicTimestamps(_ source: SourceSpecifier) -> Bool {
        if case .file = source { false } else { true }
    }

    /// The wall-clock time a frame stamped `timestamp` was captured, for a source on the
    /// monotonic clock: `now` less how long ago it was captured (clip names, creation times and
    /// trigger times then say when things happened, not when the pipeline got to them). Nil
    /// for a file, or a timestamp that does not look like the monotonic clock (then `now` it is).
    static func wallClockOfCapture(
        _ timestamp: Timestamp, now: Date, monotonicNow: Timestamp, monotonicTimestamps: Bool
    ) -> Date? {
        let age = (monotonicNow - timestamp).seconds
        guard monotonicTimestamps, age >= 0, age < 10 else { return nil }
        return now.addingTimeInterval(-age)
    }

    /// How far the wall clock may drift from the stream's mapping before it is taken again.
    static let wallClockTolerance = 1.0

    /// Clip names and times map capture times to the wall clock as it read when the stream
    /// began. When it has moved since (NTP stepped it: a board without a clock battery boots
    /// with a stale time), the mapping is taken again before an event starts, and the writer
    /// told — a stream on the monotonic clock only (a file's times are its own).
    private func followWallClock(_ wallClock: () -> Date) {
        guard let stream = streamInfo, stream.onMonotonicClock else { return }
        let drift = wallClock().timeIntervalSince(stream.wallClock(monotonicNow()))
        guard abs(drift) > Pipeline.wallClockTolerance else { return }
        var moved = stream
        moved.wallAtFirstFrame = stream.wallAtFirstFrame.addingTimeInterval(drift)
        streamInfo = moved
        writer.push(.stream(moved), cost: 0)
        log.info("the wall clock moved; clip names and times follow it", [("seconds", .seconds(drift))])
    }

    /// Logs an event action, and tells the sinks when motion starts or ends.
    private func note(_ action: EventAction) {
        let origin = firstFrame ?? .zero
        switch action {
        case let .start(trigger, confirmedAt, score):
            log.info(
                cause == .external ? "event started on an outside trigger" : "motion started",
                [
                    ("trigger", .seconds((trigger - origin).seconds)),
                    ("confirmed", .seconds((confirmedAt - origin).seconds)),
                    ("score", .fixed(score, 4)),
                ])
            if let stream = streamInfo {
                sinks.handle(
                    .motionStarted(MotionStarted(trigger: stream.wallClock(trigger), score: score, cause: cause)))
            }
        case let .split(at, part):
            log.info(
                "clip reached max_clip; splitting", [("at", .seconds((at - origin).seconds)), ("part", .int(part))])
        case let .end(at, lastMotion, peak, parts):
            log.info(
                "motion ended",
                [
                    ("end", .seconds((at - origin).seconds)), ("last_motion", .seconds((lastMotion - origin).seconds)),
                    ("peak_score", .fixed(peak, 4)), ("parts", .int(parts)),
                ])
            if let stream = streamInfo {
                sinks.handle(
                    .motionEnded(MotionEnded(end: stream.wallClock(at), peakScore: peak, parts: parts, cause: cause)))
            }
        }
    }

    /// Hands commands to the writer; over the backlog limit, whole GOPs are dropped (counted
    /// per sample) until the writer catches up, so every GOP that is written is decodable.
    private func send(_ commands: [ClipCommand]) {
        for command in commands {
            switch command {
            case .video(let gop):
                if writer.load > Pipeline.writerBacklogLimit {
                    if !droppingVideo { log.warning("the disk is falling behind; dropping video until it catches up") }
                    droppingVideo = true
                    stats.update { $0.samplesDroppedAtWriter += gop.count }
                    continue
                }
                if droppingVideo { log.info("the disk caught up; writing video again") }
                droppingVideo = false
                writer.push(.clip(command), cost: gop.byteCount)
            case .audio(let chunk):
                // Sound waits in the writer until the next GOP; it need not wake it.
                writer.push(.clip(command), cost: chunk.data.count, wake: false)
            case .close:
                // The clip's picture goes just before its close; the next part has its own.
                if let (_, picture) = peakPicture {
                    writer.push(.snapshot(picture, quality: settings.snapshot.quality), cost: 0)
                }
                peakPicture = nil
                writer.push(.clip(command), cost: 0)
            case .open:
                writer.push(.clip(command), cost: 0)
            }
        }
    }

    /// End of stream: flushes the encoder, ends an open event, closes its clip.
    private func finish() {
        var commands: [ClipCommand] = []
        if let encoder {
            do {
                for sample in try encoder.flush() { commands += recorder.handle(sample) }
            } catch {
                log.warning("encoder could not flush its last frames", [("error", .string(error.description))])
            }
            self.encoder = nil
        }
        let end = stall.lastFrame.map { $0 + stall.frameInterval }
        if let end {
            for action in eventLogic.handle(.finish(at: end)) {
                note(action)
                commands += recorder.handle(action)
            }
        }
        commands += recorder.finish(at: end)
        send(commands)
    }

    /// A reloaded configuration takes effect between events, as `ReloadPlan` says.
    private func applyReloadIfIdle() {
        guard isIdle,
            let new = pendingReload.withLock({ value -> Settings? in
                defer { value = nil }
                return value
            })
        else { return }
        let plan = ReloadPlan(from: settings, to: new)
        if plan.detectionChanged { detector = MotionDetector(settings: new.motion, mask: new.motionMask) }
        if plan.eventsChanged { eventLogic = EventStateMachine(settings: EventSettings(new.recording)) }
        if plan.preRollChanged { recorder = Pipeline.clipRecorder(new, after: recorder) }
        let overlayChanged = new.overlay != settings.overlay
        // What needs a restart comes as it began (the agent keeps the camera, the encoder and
        // its keyframe interval out of a reload).
        settings = new
        if overlayChanged, let stream = streamInfo { makeOverlay(height: stream.video.height) }
        log.info("reloaded settings in effect")
    }
}
