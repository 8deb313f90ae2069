import AgentTestSupport
import Capture
import Configuration
import Foundation
import H264
import Logging
import Media
import POSIX
import QuickTime
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent

/// The agent without threads, on a clock the test moves, the way swift-nio's `EmbeddedChannel`
/// and `EmbeddedEventLoop.advanceTime(by:)` drive a channel: what the agent's threads do, done
/// on the test's own thread as the same steps — the camera's and the microphone's
/// (`CameraCapture`, `MicrophoneCapture`: frames, losses, tries to open them again), the
/// `Pipeline`'s, the `ClipWriter`'s and the `Housekeeping`'s — each when the clock says.
///
/// The clock is a `ManualClock`: a frame arrives when it reads the frame's time (a camera's
/// clock is the monotonic clock; `arrival` says otherwise), and moving it on (`advance`) does,
/// in order, whatever falls due meanwhile: the stall of a source that went silent, the writer's
/// next try of the storage, the next try to open a camera or a microphone, retention every
/// minute and the stats line. The wall clock is `wall` of the clock's reading. The disk is a
/// `MemoryStorage` that still holds real `.mov` bytes, and the events are those the agent's
/// sinks get — the journal and the hooks too. So what a test asserts is exactly what happens
/// at a frame or an instant, and nothing waits.
final class EmbeddedAgent {
    let directory: TemporaryDirectory
    let configPath: String
    let initial: Settings
    private(set) var settings: Settings
    let storage: MemoryStorage
    let logs = MemoryLogSink()
    let log: Logger
    let events: EventRecorder
    let clock: ManualClock
    let stats = Stats()
    let pipeline: Pipeline
    let writer: ClipWriter
    let housekeeping: Housekeeping
    let encoders: EncoderChoice
    private let sinks: EventSinks
    private let openSource: (Settings.Camera) throws(CaptureError) -> OpenedSource
    private let microphone: MicrophoneCapture?
    /// When the microphone's next step is due (a try to open it, or its next chunk's time).
    private var microphoneDue: Timestamp?
    private var pendingChunk: AudioChunk?
    /// The camera, once `start` has opened it (or found it missing), and when its next step is
    /// due: its next frame's arrival (the frame waits in `pendingFrame`), or its next try.
    private var camera: CameraCapture?
    private var cameraDue: Timestamp?
    private var pendingFrame: VideoFrame?
    /// When each frame reaches the pipeline; by default its capture time.
    let arrival: (VideoFrame) -> Timestamp
    /// What was asked from outside at each frame (`vigil trigger`, MQTT's commands).
    var asked: (VideoFrame) -> AgentControl.Requests = { _ in AgentControl.Requests() }
    /// What the pipeline returned when the stream ended (the source's error).
    private(set) var ended: CaptureError??
    /// The source could not be opened at start.
    private(set) var cannotOpen = false
    /// The bytes the writer's queue holds, as each step is told (the embedded writer takes
    /// every item at once: 0 unless a test says otherwise).
    var writerLoad = 0
    /// What live viewers were given, step after step.
    private(set) var live: [LiveFeed.Update] = []
    static let wallOrigin = Date(timeIntervalSince1970: 1_796_000_000)

    /// An agent for the configuration `config` (written to a file, for `reload`), recording
    /// into `storage`, reading what `openSource` opens (and `openMicrophone`: by default there
    /// is none); `onEvent` sees each event as it is handed to the sinks; `wall` is the wall
    /// clock at each reading of the manual one, `clock`.
    init(
        config: String = testConfig(), storage: MemoryStorage = MemoryStorage(), clock: ManualClock = ManualClock(),
        openSource: @escaping (Settings.Camera) throws(CaptureError) -> OpenedSource = { _ throws(CaptureError) in
            throw .cannotOpen(source: "camera", reason: "none given to this test")
        },
        openMicrophone: @escaping (Settings.Audio) throws(CaptureError) -> any AudioSource = {
            _ throws(CaptureError) in
            throw .cannotOpen(source: "microphone", reason: "none in these tests")
        },
        onEvent: @escaping @Sendable (AgentEvent) -> Void = { _ in },
        wall: @escaping @Sendable (Timestamp) -> Date = { EmbeddedAgent.wallOrigin.addingTimeInterval($0.seconds) },
        arrival: @escaping (VideoFrame) -> Timestamp = { $0.timestamp },
        encoders: EncoderChoice? = nil, memoryForWaitingVideo: Int = DiskFullPolicy.memoryLimit
    ) throws {
        directory = try TemporaryDirectory("vigil-embedded")
        configPath = directory.file("vigil.conf")
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        initial = try Settings.load(path: configPath)
        settings = initial
        self.clock = clock
        storage.now = wall(clock.now)
        self.storage = storage
        self.openSource = openSource
        self.arrival = arrival
        events = EventRecorder(onEvent)
        log = Logger.agent(initial, sink: logs)
        let log = self.log
        sinks = EventSinks([JournalSink(log: log), HookSink(initial.hooks, log: log, clock: clock.clock), events])
        let wallNow: @Sendable () -> Date = { wall(clock.now) }
        writer = ClipWriter(
            settings: WriterSettings(initial, storage: storage), log: log, stats: stats, events: sinks,
            clock: clock.clock, wallNow: wallNow, memoryLimit: memoryForWaitingVideo)
        self.encoders = encoders ?? EncoderChoice(fallback: X264EncoderFactory(settings: initial.encoder.x264))
        pipeline = Pipeline(
            settings: initial, encoders: self.encoders, log: log, stats: stats, clock: clock.clock, wallNow: wallNow)
        let statsInterval = initial.log.statsInterval.map(Double.init)
        housekeeping = Housekeeping(
            stats: stats, log: log, uploads: nil, watchdogInterval: nil, statsInterval: { statsInterval },
            at: clock.now)
        let sinks = self.sinks
        let notify: (Notice) -> Void = { notice in
            notice.log(to: log)
            sinks.handle(.notice(notice))
        }
        microphone =
            initial.audio.enabled
            ? MicrophoneCapture(
                initial.audio, open: { audio, _ throws(CaptureError) in try openMicrophone(audio) }, stats: stats,
                log: log, notify: notify) : nil
        microphoneDue = microphone == nil ? nil : clock.now
        switch writer.bringUpStorage() {
        case .ready: break
        case .unavailable(let reason): writer.storageUnavailable(reason)
        case let state: throw EmbeddedError.storageNotReady("\(state)")
        }
    }

    deinit { directory.remove() }

    enum EmbeddedError: Error { case storageNotReady(String) }

    /// What the agent's `run` would return now: nil while the stream goes on.
    var outcome: Agent.Outcome? {
        if cannotOpen { return .sourceCannotOpen }
        return ended.map { $0 == nil ? .stopped : .sourceFailed }
    }

    // MARK: Time

    /// What falls due on the clock, in the order things due at the same instant happen.
    private enum Due: Int, Comparable {
        /// The camera's next frame arrives, or its next try to open it.
        case camera
        case microphone
        /// The source has been silent since `Pipeline.silenceDue`.
        case silence
        /// The writer's next try of the storage directory.
        case writer
        case housekeeping

        static func < (a: Due, b: Due) -> Bool { a.rawValue < b.rawValue }
    }

    /// Moves the clock on to `instant`, doing what falls due on the way, in order: the frames
    /// that arrive meanwhile (with what is asked at each), the tries to open a camera or a
    /// microphone, the stall of a source gone silent, the writer's try of the storage,
    /// retention and the stats.
    func advance(to instant: Timestamp) {
        for _ in 0..<1_000_000 {
            pullCamera()
            var candidates: [(Timestamp, Due)] = [(housekeeping.due, .housekeeping)]
            if let time = cameraDue { candidates.append((time, .camera)) }
            if let time = microphoneDue { candidates.append((time, .microphone)) }
            if let time = pipeline.silenceDue { candidates.append((time, .silence)) }
            if let time = writer.due { candidates.append((time, .writer)) }
            let due = candidates.min { $0.0 < $1.0 || ($0.0 == $1.0 && $0.1 < $1.1) }
            guard let (time, what) = due, time <= instant, ended == nil else {
                clock.advance(to: instant)
                return
            }
            clock.advance(to: time)
            switch what {
            case .camera:
                cameraDue = nil
                if let frame = pendingFrame {
                    pendingFrame = nil
                    step(.frame(frame, requests: asked(frame)))
                }
            case .microphone: stepMicrophone()
            case .silence: step(.tick)
            case .writer: writer.step(.tick)
            case .housekeeping: deliver(housekeeping.step(at: clock.now))
            }
        }
        Issue.record("time does not move on: something falls due again and again at \(clock.now)")
    }

    /// Moves the clock on by `seconds` ("a second passes"): with no frame unless the camera
    /// delivers some meanwhile.
    func advance(seconds: Double) { advance(to: clock.now + .init(seconds: seconds)) }

    /// The camera's next step, when it has none due: its next frame (taken when the clock
    /// reaches its arrival), a loss, the time of its next try, or the end.
    private func pullCamera() {
        guard let camera, ended == nil, cameraDue == nil else { return }
        switch camera.next(at: clock.now) {
        case .frame(let frame, let lost):
            if lost > 0 { stats.update { $0.framesLostAtSource += lost } }
            pendingFrame = frame
            cameraDue = max(clock.now, arrival(frame))
        case .interrupted:
            step(.interrupted)
            pullCamera()
        case .opened: pullCamera()
        case .wait(let until): cameraDue = until
        case .end(let error): step(.end(error))
        }
    }

    private func deliver(_ outputs: [Housekeeping.Output]) {
        for output in outputs {
            switch output {
            case .writer(let item): writer.step(.item(item))
            case .event(let event): sinks.handle(event)
            case .watchdog: break
            }
        }
    }

    /// The microphone's steps due now: its chunks up to the clock, or a try to open it.
    private func stepMicrophone() {
        guard let microphone else { return }
        while ended == nil {
            if let chunk = pendingChunk {
                guard chunk.time <= clock.now else {
                    microphoneDue = chunk.time
                    return
                }
                pendingChunk = nil
                step(.audio(chunk))
            }
            switch microphone.next(at: clock.now) {
            case .chunk(let chunk): pendingChunk = chunk
            case .wait(let until):
                microphoneDue = until
                return
            }
        }
    }

    // MARK: Steps

    /// Steps one input through the pipeline, and what it returns through the writer and the sinks.
    func step(_ input: PipelineInput) {
        for output in pipeline.step(input, writerLoad: writerLoad) {
            switch output {
            case .writer(let item, _, _): writer.step(.item(item))
            case .event(let event): sinks.handle(event)
            case .live(let update): live.append(update)
            case .finished(let error):
                writer.step(.end)
                // The run is over: its storage directory is let go, as the agent's is when
                // `run` returns (another agent may start on it).
                writer.claim = nil
                ended = .some(error)
            }
        }
    }

    /// A frame of the test's own (no camera started), when the clock reaches its arrival time:
    /// what falls due before it happens first.
    func feed(_ frame: VideoFrame) {
        advance(to: arrival(frame))
        step(.frame(frame, requests: asked(frame)))
    }

    /// Opens the source as the agent does when it starts (a camera that is not there is said
    /// and waited for; a file that cannot be read ends the run), says which encoder records,
    /// and tries the microphone.
    func start(with first: (any FrameSource)? = nil) {
        guard camera == nil, !cannotOpen else { return }
        let sinks = self.sinks, log = self.log
        let notify: (Notice) -> Void = { notice in
            notice.log(to: log)
            sinks.handle(.notice(notice))
        }
        var source = first
        if source == nil {
            do {
                source = try CameraCapture.openAtStart(
                    initial.camera, open: { () throws(CaptureError) in try openSource(initial.camera) },
                    notify: notify)?.source
            } catch {
                cannotOpen = true
                return
            }
        }
        if let choice = encoders.announcement {
            notify(.encoderChosen(backend: choice.backend, reason: choice.reason, unsuitable: choice.warn))
        }
        let open = openSource, camera = initial.camera
        self.camera = CameraCapture(
            first: source, isCamera: camera.device.isCamera,
            open: { () throws(CaptureError) in try open(camera).source }, log: log, notify: notify, at: clock.now)
        if microphone != nil { stepMicrophone() }
    }

    /// Records from the camera until `condition` holds (true) or the stream ends (false):
    /// time moves on to each frame's arrival and each try to open a lost camera, and what
    /// falls due meanwhile happens.
    @discardableResult
    func run(until condition: () -> Bool = { false }) -> Bool {
        start()
        while camera != nil, ended == nil, !condition() {
            pullCamera()
            if let due = cameraDue { advance(to: due) }
        }
        return condition()
    }

    /// Records until the source ends: what `run()` returned.
    @discardableResult
    func runToTheEnd() -> Agent.Outcome? {
        run()
        return outcome
    }

    /// Steps every frame of `source`, each with the requests `asked` makes at it, then the end.
    func run(_ source: any FrameSource, asked: @escaping (VideoFrame) -> AgentControl.Requests) {
        self.asked = asked
        start(with: source)
        run()
    }

    /// The agent is stopped: the stream ends, the open clip is finished.
    func stop() {
        if ended == nil { step(.end(nil)) }
    }

    // MARK: Reloads

    /// Replaces the configuration file (for `reload`).
    func rewriteConfig(_ text: String) throws {
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// Reloads the configuration file, as the agent does on SIGHUP: the pipeline and the
    /// writer get it at their next step.
    func reload() {
        let sinks = self.sinks, log = self.log
        func notify(_ notice: Notice) {
            notice.log(to: log)
            sinks.handle(.notice(notice))
        }
        switch Agent.reloading(configPath, inUse: settings, initial: initial) {
        case .refused(let notice):
            notify(notice)
        case .applied(let applied, let plan, let notices):
            notices.forEach(notify)
            settings = applied
            if plan.changesPipeline { step(.reload(applied, plan: plan)) }
            if plan.storageChanged { writer.step(.item(.reload(WriterSettings(applied, storage: storage)))) }
            sinks.handle(.reloaded(applied))
        }
    }

    // MARK: What happened

    /// Every log line so far.
    var output: String { logs.written.joined(separator: "\n") }
    var errors: [String] { logs.written(at: .error) }
    var warnings: [String] { logs.written(at: .warning) }

    /// The clips in the storage, sorted.
    var clipFiles: [String] { storage.fileNames.filter { $0.hasSuffix(".mov") } }

    /// The events journal's records.
    func journal() throws -> [ClipRecord] { try EventsJournal(storage: storage).records().records }

    /// Every clip in the storage must be a complete movie that ffprobe reads and ffmpeg
    /// decodes without a word; returns how many video frames each has, by name.
    @discardableResult
    func expectCompletePlayableClips(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Int] {
        try AgentTestSupport.expectCompletePlayableClips(
            in: storage, scratch: directory, sourceLocation: sourceLocation)
    }
}

extension AgentControl.Requests {
    /// `vigil trigger --seconds SECONDS` (nil: until stopped or `max_clip`), asked by `by`.
    static func record(_ seconds: Double?, by: String = "test") -> Self {
        var requests = Self()
        requests.record = (seconds, by)
        return requests
    }

    /// Detection on or off, asked by `by`.
    static func detection(_ on: Bool, by: String = "test") -> Self {
        var requests = Self()
        requests.detection = (on, by)
        return requests
    }
}

extension TemporaryDirectory {
    /// Runs `body` with a new temporary directory, removed after it.
    @discardableResult
    static func with<T>(_ label: String, _ body: (TemporaryDirectory) throws -> T) throws -> T {
        let directory = try TemporaryDirectory(label)
        defer { directory.remove() }
        return try body(directory)
    }
}
