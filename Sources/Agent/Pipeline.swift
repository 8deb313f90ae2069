import Capture
import Configuration
import FoundationEssentials
import Logging
import Media
import MotionDetection
import Overlay
import POSIX
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

/// What the pipeline takes, one at a time (`Pipeline.step`).
enum PipelineInput: Sendable {
    /// A frame, with what was asked from outside since the previous one (`AgentControl.take`).
    case frame(VideoFrame, requests: AgentControl.Requests = AgentControl.Requests())
    /// Sound from the microphone.
    case audio(AudioChunk)
    /// The camera went away: the open clip is closed.
    case interrupted
    /// Time passed with nothing to take (the wait for the next item ran out): a source silent
    /// since `silenceDue` is stalled.
    case tick
    /// A reloaded configuration and what it changes: applied at the first frame with no event open.
    case reload(Settings, plan: ReloadPlan)
    /// The source ended (or failed); or, with nil, the capture queue closed.
    case end(CaptureError?)
}

/// What one step of the pipeline gives back, in order.
enum PipelineOutput: Sendable {
    /// For the writer's queue: `cost` bytes against its bound; `wake: false` for sound, which
    /// waits in the writer until the next GOP.
    case writer(WriterItem, cost: Int, wake: Bool)
    /// For the event sinks.
    case event(AgentEvent)
    /// For live viewers (`LiveFeed`): a stream begins or is interrupted, an access unit came out
    /// of the encoder (with the sound heard since the one before), or a GOP is complete (with
    /// the sound heard since the GOP before).
    case live(LiveFeed.Update)
    /// The stream is over: nothing more goes to the writer; the source's error, if it failed.
    case finished(CaptureError?)
}

/// The pipeline, a step: motion detection on each frame's luma, the event state machine, the
/// encoder, and the pre-roll ring and clip logic. `step` takes one input (a frame, sound, an
/// interruption, time passing with nothing to take, a reload, the end) with the bytes the
/// writer's queue holds then, and returns what it makes: writer commands, sink events, what live
/// viewers get. It never touches a queue, a thread or the live feed, so a test drives it frame
/// by frame; `run` is the pipeline thread, which only moves values between the capture queue,
/// `step`, the writer queue, the sinks and the live feed. It never waits on the disk: when the
/// writer falls behind by more than `writerBacklogLimit` bytes, whole GOPs are dropped
/// (counted), so clips stay
/// decodable.
///
/// Its decisions are values it drives: `EventStateMachine` (when events start, split and
/// end), `ClipRecorder` (which GOPs go to which clip), `StallWatch` (when a quiet source
/// counts as stalled), `KeyframeSchedule` (when a keyframe is due) and `ReloadPlan` (what a
/// reloaded configuration changes, applied between events).
///
/// `@unchecked Sendable`: other threads touch only `pendingReload` (a Mutex), which `run`
/// turns into a `.reload` input; everything else belongs to the thread that steps it.
final class Pipeline: @unchecked Sendable {
    var settings: Settings
    let log: Logger
    let stats: Stats
    /// The bytes the writer's queue held when this step began (its input), before the step's
    /// outputs (`outputCost`).
    var writerLoad = 0
    /// This step's outputs so far, and their cost to the writer's queue.
    var outputs: [PipelineOutput] = []
    var outputCost = 0
    /// A reload waiting for the first frame with no event open, and what it changes.
    var reloadWaiting: (settings: Settings, plan: ReloadPlan)?
    var outside = OutsideTrigger()
    var detecting = true
    /// What started the open event.
    var cause = TriggerCause.motion
    /// The open clip's picture so far: its frame with the highest score (`snapshot.*`), sent
    /// to the writer just before the clip's close.
    var peakPicture: (score: Double, picture: SnapshotPicture)?
    /// When `latest.jpg` was last taken (`snapshot.live_interval`).
    var lastLive: Timestamp?
    /// The text drawn into each frame (`overlay.*`), made for the stream's picture height;
    /// nil when there is none.
    var overlay: (drawer: TextOverlay, text: OverlayText)?
    /// Whether the log said the overlay's text had to be shortened (once per run).
    var overlayShortenedSaid = false
    /// What the pipeline reads the time from (the agent's `Clock`), and the wall clock.
    let clock: Clock
    let wallNow: @Sendable () -> Date
    var detector: MotionDetector
    var eventLogic: EventStateMachine
    var recorder: ClipRecorder
    /// Make the encoder for each stream (after an interruption the format may differ): the
    /// hardware one (`preferred`) while it works — `EncoderFailures` says when it is given up —
    /// then x264 (`fallback`).
    let encoders: EncoderChoice
    var hardwareFailures = EncoderFailures()
    var hardwareGivenUp = false
    var encoder: (any VideoEncoder)?
    /// Where the stream's keyframes go, whichever encoder makes them.
    var keyframes: KeyframeSchedule
    var stall = StallWatch()
    /// When the last input was taken (the clock's reading): the stall timeout counts from it.
    var lastInput: Timestamp?
    var firstFrame: Timestamp?
    var droppingVideo = false
    /// What the writer was last told about the stream, and the sound format once sound came.
    var streamInfo: StreamInfo?
    var audioFormat: AudioTrackFormat?
    /// The sound captured since the last complete GOP, which goes with the next to live viewers.
    var heard = HeardSound()
    /// The sound captured since the last access unit, which goes with the next to live viewers.
    var heardByFrame = HeardSound()
    /// A reloaded configuration from another thread, for `run` to step in.
    private let pendingReload = Mutex<(settings: Settings, plan: ReloadPlan)?>(nil)

    /// Hands the pipeline a reload (from any thread): `run` steps it in at the next frame; one
    /// that comes before is merged with it.
    func reload(_ settings: Settings, plan: ReloadPlan) {
        pendingReload.withLock { waiting in
            waiting = (settings, waiting.map { $0.plan.merging(plan) } ?? plan)
        }
    }

    static let writerBacklogLimit = 64 << 20

    init(
        settings: Settings, encoders: EncoderChoice, log: Logger,
        stats: Stats, clock: Clock, wallNow: @escaping @Sendable () -> Date
    ) {
        self.settings = settings
        self.encoders = encoders
        keyframes = KeyframeSchedule(interval: .init(seconds: settings.encoder.keyframeInterval))
        self.log = log.with(("component", "pipeline"))
        self.stats = stats
        self.clock = clock
        self.wallNow = wallNow
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
    var isIdle: Bool { eventLogic.state == .idle && !recorder.isRecording }

    /// How long the pipeline waits for the source before it counts as stalled (`.tick`);
    /// nil: for ever.
    var silenceTimeout: Double? { stall.timeout(streaming: encoder != nil) }

    /// When the source, silent since the last input, counts as stalled (a `.tick` then says
    /// so); nil: never.
    var silenceDue: Timestamp? {
        guard let timeout = silenceTimeout, let lastInput else { return nil }
        return lastInput + .init(seconds: timeout)
    }

    /// The pipeline thread: capture items in, through `step` (with the writer queue's load),
    /// outputs to the writer's queue, the sinks and the live feed, until the stream is over; the
    /// source's error, if it failed. Never inlined: `make test-instructions` tells the pipeline
    /// thread's own work by this function (vigil-bench's Instructions.swift).
    @inline(never)
    func run(
        _ frames: WorkQueue<CaptureItem>, control: AgentControl, writer: WorkQueue<WriterItem>,
        sinks: any EventSink, live: LiveFeed
    ) -> CaptureError? {
        while true {
            let input: PipelineInput
            // The whole stall timeout of time the process ran (`pop`), from now: the tick
            // that ends it finds the source silent since `silenceDue`.
            switch frames.pop(waitingAtMost: silenceTimeout) {
            case .element(.frame(let frame)):
                if let new = pendingReload.withLock({ value in
                    defer { value = nil }
                    return value
                }) {
                    deliver(step(.reload(new.settings, plan: new.plan)), writer: writer, sinks: sinks, live: live)
                }
                input = .frame(frame, requests: control.take())
            case .element(.audio(let chunk)): input = .audio(chunk)
            case .element(.interrupted): input = .interrupted
            case .element(.end(let error)): input = .end(error)
            case .timedOut: input = .tick
            case .closed: input = .end(nil)
            }
            let outputs = step(input, writerLoad: writer.load)
            if case .finished(let error) = deliver(outputs, writer: writer, sinks: sinks, live: live) { return error }
        }
    }

    enum Delivered {
        case going
        case finished(CaptureError?)
    }

    /// Hands outputs on; `.finished` when the stream is over.
    @discardableResult
    func deliver(
        _ outputs: [PipelineOutput], writer: WorkQueue<WriterItem>, sinks: any EventSink, live: LiveFeed
    ) -> Delivered {
        var delivered = Delivered.going
        for output in outputs {
            switch output {
            case .writer(let item, let cost, let wake): writer.push(item, cost: cost, wake: wake)
            case .event(let event): sinks.handle(event)
            case .live(let update): live.take(update)
            case .finished(let error): delivered = .finished(error)
            }
        }
        return delivered
    }

    /// One input in, what it makes out; `writerLoad`: the bytes the writer's queue holds now.
    func step(_ input: PipelineInput, writerLoad: Int = 0) -> [PipelineOutput] {
        outputs = []
        outputCost = 0
        self.writerLoad = writerLoad
        if case .tick = input {} else { lastInput = clock.now() }
        switch input {
        case .frame(let frame, let requests):
            switch stall.frame(at: frame.timestamp) {
            case .next: break
            case .afterStall: notify(.framesAgain)
            case .jumped(let by):
                notify(.frameTimesJumped(seconds: by.seconds, closingClip: !isIdle))
                interrupt()
                _ = stall.frame(at: frame.timestamp)
            }
            do { try process(frame, requests: requests) } catch {
                if case .deviceFailed = error, encoders.preferred != nil {
                    hardwareFailed(error)
                    break
                }
                notify(.encoderFailed(error: error.description))
                finish()
                outputs.append(.finished(.readFailed(source: "encoder", frame: 0, reason: error.description)))
            }
        case .audio(let chunk):
            if audioFormat == nil, let info = streamInfo {
                audioFormat = AudioTrackFormat(sampleRate: chunk.sampleRate, channels: chunk.channels)
                var updated = info
                updated.audio = audioFormat
                streamInfo = updated
                emit(.stream(updated))
            }
            // Before the first frame no clip can hold it.
            if audioFormat != nil {
                send(recorder.handle(chunk))
                // For live viewers while the stream goes on (its next GOP takes it).
                if encoder != nil {
                    heard.hear(chunk)
                    heardByFrame.hear(chunk)
                }
            }
        case .interrupted:
            interrupt()
        case .tick:
            guard let due = silenceDue, let seconds = silenceTimeout, clock.now() >= due else { break }
            let open = recorder.isRecording || eventLogic.state != .idle
            notify(.sourceStalled(seconds: seconds, closingClip: open))
            stall.timedOut()
            interrupt()
        case .reload(let new, let plan):
            reloadWaiting = (new, reloadWaiting.map { $0.plan.merging(plan) } ?? plan)
        case .end(let error):
            finish()
            outputs.append(.finished(error))
        }
        return outputs
    }

    /// Logs `notice`, and returns it for the sinks.
    func notify(_ notice: Notice) {
        notice.log(to: log)
        outputs.append(.event(.notice(notice)))
    }

    /// Queues `item` for the writer.
    func emit(_ item: WriterItem, cost: Int = 0, wake: Bool = true) {
        outputs.append(.writer(item, cost: cost, wake: wake))
        outputCost += cost
    }

    /// The stream broke off (a camera lost, a source stalled): closes the open clip; what was
    /// held belongs to the stream that ended, and the next one starts afresh — the detector
    /// too, or motion still going on when frames come again would carry the start of a run of
    /// motion from before the break, and the new event a trigger before its clip.
    func interrupt() {
        finish()
        outputs.append(.live(.interrupt))
        heard = HeardSound()
        heardByFrame = HeardSound()
        outside.stop()  // asked of the stream that ended (its times may not go on in the next)
        stall.streamEnded()
        detector = MotionDetector(settings: settings.motion, mask: settings.motionMask)
        eventLogic = EventStateMachine(settings: EventSettings(settings.recording))
        recorder = Pipeline.clipRecorder(settings, after: recorder)
    }

    func process(_ frame: VideoFrame, requests: AgentControl.Requests) throws(EncoderError) {
        if encoder == nil { try start(with: frame) }
        applyReloadIfIdle()

        takeRequests(requests, at: frame.timestamp)

        let t0 = clock.now()
        let result = detector.process(frame.luma, at: frame.timestamp)
        let t1 = clock.now()
        var commands: [ClipCommand] = []
        // Motion counts while detection is on; an outside recording counts as motion.
        let moving = detecting && result.motion
        let held = outside.holds(at: frame.timestamp)
        let actions = eventLogic.handle(
            .frame(
                time: frame.timestamp, motion: moving || held, score: result.score,
                motionStart: moving ? result.motionStart : frame.timestamp))
        if actions.contains(where: { if case .start = $0 { true } else { false } }) {
            followWallClock()
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
                notify(.overlayShortened(pattern: overlay.text.pattern, charactersThatFit: fit, drawn: text))
            }
            overlay.drawer.draw(text, into: frame)
        }
        let samples = try encoder?.encode(frame, keyframe: keyframes.keyframeDue(at: frame.timestamp)) ?? []
        let t2 = clock.now()
        for sample in samples { commands += recorded(sample) }
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
    func takePictures(of frame: VideoFrame, score: Double) {
        let snapshot = settings.snapshot
        if snapshot.enabled, !isIdle, score > peakPicture?.score ?? -1 {
            if let picture = picture(of: frame) { peakPicture = (score, picture) }
        }
        if snapshot.liveInterval > 0,
            lastLive.map({ (frame.timestamp - $0).seconds >= snapshot.liveInterval }) ?? true
        {
            lastLive = frame.timestamp
            if let picture = picture(of: frame) {
                emit(.livePicture(picture, quality: snapshot.quality))
            }
        }
    }

    func picture(of frame: VideoFrame) -> SnapshotPicture? {
        do {
            return try SnapshotPicture(
                copying: frame, rotation: settings.camera.rotation, width: settings.snapshot.width)
        } catch {
            log.warning("no snapshot of this frame", [("error", .string(error.description))])
            return nil
        }
    }

    /// Takes what was asked from outside since the last frame.
    func takeRequests(_ requests: AgentControl.Requests, at time: Timestamp) {
        if let (on, by) = requests.detection, on != detecting {
            detecting = on
            log.info(on ? "motion detection on" : "motion detection off", [("asked_by", .string(by))])
            outputs.append(.event(.detection(on)))
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

    /// Logs an event action, and tells the sinks when motion starts or ends.
    func note(_ action: EventAction) {
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
                outputs.append(
                    .event(
                        .motionStarted(MotionStarted(trigger: stream.wallClock(trigger), score: score, cause: cause))))
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
                outputs.append(
                    .event(
                        .motionEnded(
                            MotionEnded(end: stream.wallClock(at), peakScore: peak, parts: parts, cause: cause))))
            }
        }
    }

    /// Hands commands to the writer; over the backlog limit, whole GOPs are dropped (counted
    /// per sample) until the writer catches up, so every GOP that is written is decodable.
    func send(_ commands: [ClipCommand]) {
        for command in commands {
            switch command {
            case .video(let gop):
                if writerLoad + outputCost > Pipeline.writerBacklogLimit {
                    if !droppingVideo { log.warning("the disk is falling behind; dropping video until it catches up") }
                    droppingVideo = true
                    stats.update { $0.samplesDroppedAtWriter += gop.count }
                    continue
                }
                if droppingVideo { log.info("the disk caught up; writing video again") }
                droppingVideo = false
                emit(.clip(command), cost: gop.byteCount)
            case .audio(let chunk):
                // Sound waits in the writer until the next GOP; it need not wake it.
                emit(.clip(command), cost: chunk.data.count, wake: false)
            case .close:
                // The clip's picture goes just before its close; the next part has its own.
                if let (_, picture) = peakPicture {
                    emit(.snapshot(picture, quality: settings.snapshot.quality))
                }
                peakPicture = nil
                emit(.clip(command))
            case .open:
                emit(.clip(command))
            }
        }
    }

    /// `sample` into the ring and the clip logic: its commands for the writer. The GOP it
    /// completed, if any, goes to live viewers whole, with the sound heard since the one before;
    /// the sample itself goes to them at once, with the sound heard since the sample before.
    func recorded(_ sample: EncodedSample) -> [ClipCommand] {
        let recorded = recorder.handle(sample)
        if let gop = recorded.completedGOP { outputs.append(.live(.gop(gop, sound: heard.take()))) }
        outputs.append(.live(.frame(sample, sound: heardByFrame.take())))
        return recorded.commands
    }

    /// End of stream: flushes the encoder, ends an open event, closes its clip.
    func finish() {
        var commands: [ClipCommand] = []
        if let encoder {
            do {
                for sample in try encoder.flush() { commands += recorded(sample) }
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
    func applyReloadIfIdle() {
        guard isIdle, let (new, plan) = reloadWaiting else { return }
        reloadWaiting = nil
        if plan.detectionChanged { detector = MotionDetector(settings: new.motion, mask: new.motionMask) }
        if plan.eventsChanged { eventLogic = EventStateMachine(settings: EventSettings(new.recording)) }
        if plan.preRollChanged { recorder = Pipeline.clipRecorder(new, after: recorder) }
        // What needs a restart comes as it began (the agent keeps the camera, the encoder and
        // its keyframe interval out of a reload).
        settings = new
        if plan.overlayChanged, let stream = streamInfo { makeOverlay(height: stream.video.height) }
        log.info("reloaded settings in effect")
    }
}
