import Agent
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

/// The agent in process, threads and all, on a test's environment (AgentTests, MQTTTests with
/// an MQTT sink, UploadTests): for what the threads, the queues and the stop do — a test of the
/// agent's logic steps it instead, on a clock it moves (AgentTests' `EmbeddedAgent`). Sources
/// the test makes (read as fast as they go), the real x264 encoder, one `MemoryStorage` for
/// every storage path, log lines and events collected in memory, no signals, the real
/// monotonic clock. Nothing here measures time: tests wait for what they expect, with generous
/// limits.
public final class AgentHarness: Sendable {
    /// Long enough for a busy shared host; only a broken agent waits this long.
    public static let patience = 300.0

    public let storage: MemoryStorage
    public let logs = MemoryLogSink()
    public let events: EventRecorder
    public let directory: TemporaryDirectory
    public let configPath: String
    public let agent: Agent
    private let outcome = Mutex<Agent.Outcome?>(nil)
    private let finished = DispatchSemaphore(value: 0)
    private let started = Mutex(false)

    /// An agent for the configuration `config` (written to a file, for reloads), recording
    /// into `storage`, reading what `openSource` opens (and `openMicrophone`: by default there
    /// is none); `onEvent` sees each event on the thread that sent it, after it is recorded;
    /// `sinks` makes more event sinks from the settings, the agent's control and its logger
    /// (MQTT's).
    public init(
        config: String, storage: MemoryStorage = MemoryStorage(),
        openSource: @escaping @Sendable (Settings.Camera) throws(CaptureError) -> OpenedSource,
        openMicrophone: @escaping @Sendable (Settings.Audio) throws(CaptureError) -> any AudioSource = {
            _ throws(CaptureError) in
            throw .cannotOpen(source: "microphone", reason: "none in these tests")
        },
        onEvent: @escaping @Sendable (AgentEvent) -> Void = { _ in },
        wallNow: @escaping @Sendable () -> Date = { Date() },
        encoders: EncoderChoice? = nil, control: AgentControl = AgentControl(),
        memoryForWaitingVideo: Int = DiskFullPolicy.memoryLimit,
        sinks: (Settings, AgentControl, Logger) throws -> [any EventSink] = { _, _, _ in [] }
    ) throws {
        directory = try TemporaryDirectory("vigil-agent-tests")
        configPath = directory.file("vigil.conf")
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let settings = try Settings.load(path: configPath)
        // Clips are stamped with the storage's time, and retention compares it with the wall
        // clock: both are now, so no clip is ever older than max_age_days.
        storage.now = Date()
        self.storage = storage
        events = EventRecorder(onEvent)
        var environment = AgentEnvironment(
            encoders: X264EncoderFactory(settings: settings.encoder.x264),
            openSource: openSource,
            openMicrophone: { audio, _ throws(CaptureError) in try openMicrophone(audio) },
            storage: { _ in storage },
            log: .agent(settings, sink: logs), sinks: [events],
            handlesSignals: false,
            clock: .monotonic, wallNow: wallNow)
        if let encoders { environment.encoders = encoders }
        environment.control = control
        environment.memoryForWaitingVideo = memoryForWaitingVideo
        environment.sinks += try sinks(settings, control, environment.log)
        agent = Agent(configPath: configPath, settings: settings, version: "test", environment: environment)
    }

    deinit { directory.remove() }

    /// Replaces the configuration file (for `reload`).
    public func rewriteConfig(_ text: String) throws {
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// Runs the agent on a thread of its own.
    public func start() {
        started.withLock { $0 = true }
        let agent = self.agent
        Thread.detachNewThread { [self] in
            let result = agent.run()
            outcome.withLock { $0 = result }
            finished.signal()
        }
    }

    /// What `run()` returned, waiting for it; nil if it did not return in time.
    public func waitForOutcome(timeout: Double = AgentHarness.patience) -> Agent.Outcome? {
        guard finished.wait(timeout: .now() + timeout) == .success else { return nil }
        finished.signal()  // for the next caller
        return outcome.withLock { $0 }
    }

    /// Runs the agent until it ends by itself (the end of the source) and returns what `run()`
    /// returned; an agent that has not ended in time is stopped, and nil returned.
    public func runToTheEnd() -> Agent.Outcome? {
        start()
        guard let outcome = waitForOutcome() else {
            _ = stopAndWait()
            return nil
        }
        return outcome
    }

    /// Stops the agent if it is still running and waits for it: what every test does last,
    /// so no agent outlives its test (also when the test failed half-way).
    public func stopAndWait() -> Agent.Outcome? {
        guard started.withLock({ $0 }) else { return nil }
        agent.stop(because: "the test ended")
        return waitForOutcome()
    }

    // MARK: Waiting

    /// Waits until `condition` holds (of the events, the storage, a broker…); false if it did
    /// not within `timeout` seconds.
    @discardableResult
    public func waitUntil(timeout: Double = AgentHarness.patience, _ condition: () -> Bool) -> Bool {
        TestSupport.waitUntil(timeout: timeout, condition)
    }

    /// Waits for the `count`th log line with message `message`; false if it did not come. Only
    /// for what nothing but the log says (a warning that is itself the behaviour under test):
    /// what happened is waited for in the events, the storage or on a broker (`waitUntil`).
    @discardableResult
    public func waitFor(_ message: String, count: Int = 1, timeout: Double = AgentHarness.patience) -> Bool {
        waitUntil(timeout: timeout) { lines(message).count >= count }
    }

    /// Waits until `count` clips were saved (the `clipSaved` events); false if they were not.
    @discardableResult
    public func waitForClips(_ count: Int = 1, timeout: Double = AgentHarness.patience) -> Bool {
        waitUntil(timeout: timeout) { events.clipsSaved.count >= count }
    }

    // MARK: What happened

    /// Every log line so far.
    public var output: String { logs.written.joined(separator: "\n") }

    /// The log lines with message `message`.
    public func lines(_ message: String) -> [String] { logLines(output, message) }

    /// The log lines at error level.
    public var errors: [String] { logs.written(at: .error) }
    public var warnings: [String] { logs.written(at: .warning) }

    /// The clips in the storage, sorted.
    public var clipFiles: [String] { storage.fileNames.filter { $0.hasSuffix(".mov") } }

    /// The events journal's records.
    public func journal() throws -> [ClipRecord] {
        try EventsJournal(storage: storage).records().records
    }

    /// Every clip in the storage must be a complete movie that ffprobe reads and ffmpeg
    /// decodes without a word; returns how many video frames each has, by name.
    @discardableResult
    public func expectCompletePlayableClips(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Int] {
        try AgentTestSupport.expectCompletePlayableClips(
            in: storage, scratch: directory, sourceLocation: sourceLocation)
    }
}

/// Every clip in `storage` must be a complete movie that ffprobe reads and ffmpeg decodes
/// without a word (each is copied into `scratch` for them); returns how many video frames
/// each has, by name.
@discardableResult
public func expectCompletePlayableClips(
    in storage: MemoryStorage, scratch: TemporaryDirectory, sourceLocation: SourceLocation = #_sourceLocation
) throws -> [String: Int] {
    var frames: [String: Int] = [:]
    for file in storage.fileNames.filter({ $0.hasSuffix(".mov") }) {
        let state = try MovieRepair.inspect(
            path: storage.path(file), opening: { _ throws(FileError) in try storage.openMovie(file) })
        #expect(state == .complete, "\(file) is not a complete movie", sourceLocation: sourceLocation)
        let path = scratch.file(file.replacingOccurrences(of: "/", with: "_"))
        try Data(try #require(storage.contents(file))).write(to: URL(fileURLWithPath: path))
        let probe = try expectPlayable(path, "\(file):", sourceLocation: sourceLocation)
        #expect(probe?.video?["codec_name"] == "h264", sourceLocation: sourceLocation)
        frames[file] = probe?.video?["nb_read_packets"].flatMap { Int($0) }
    }
    return frames
}

/// An event sink that keeps every event, and lets a test act on one as it happens.
public final class EventRecorder: EventSink {
    private let recorded = Mutex<[AgentEvent]>([])
    private let onEvent: @Sendable (AgentEvent) -> Void

    public init(_ onEvent: @escaping @Sendable (AgentEvent) -> Void) {
        self.onEvent = onEvent
    }

    public func handle(_ event: AgentEvent) {
        recorded.withLock { $0.append(event) }
        onEvent(event)
    }

    public var all: [AgentEvent] { recorded.withLock { $0 } }

    /// The kinds of the events so far, in the order they came.
    public var kinds: [AgentEvent.Kind] { all.map(\.kind) }

    public func count(_ kind: AgentEvent.Kind) -> Int { kinds.filter { $0 == kind }.count }

    public var clipsStarted: [ClipStarted] { all.compactMap { if case .clipStarted(let c) = $0 { c } else { nil } } }
    public var clipsSaved: [ClipSaved] { all.compactMap { if case .clipSaved(let c) = $0 { c } else { nil } } }
    /// Motion detection switched on (true) or off, in order.
    public var detections: [Bool] { all.compactMap { if case .detection(let on) = $0 { on } else { nil } } }
    /// What the agent said about its devices, stream and configuration, in order.
    public var notices: [Notice] { all.compactMap { if case .notice(let n) = $0 { n } else { nil } } }
    public var deletions: [Deletion] {
        all.flatMap { event -> [Deletion] in if case .clipsDeleted(let d) = event { d.deletions } else { [] } }
    }
}

extension AgentEvent {
    public enum Kind: Equatable, Sendable {
        case motionStarted, motionEnded, clipStarted, clipSaved, clipsDeleted, stats, reloaded, detection, notice
        case livePicture, storageReady, clipUploaded
    }

    public var kind: Kind {
        switch self {
        case .motionStarted: .motionStarted
        case .motionEnded: .motionEnded
        case .clipStarted: .clipStarted
        case .clipSaved: .clipSaved
        case .clipsDeleted: .clipsDeleted
        case .stats: .stats
        case .reloaded: .reloaded
        case .detection: .detection
        case .notice: .notice
        case .livePicture: .livePicture
        case .storageReady: .storageReady
        case .clipUploaded: .clipUploaded
        }
    }
}

/// A configuration for the agent's tests: 320×240 from `device`, one encoder thread, short
/// pre- and post-roll, no stats lines; `extra` adds settings (whole sections).
public func testConfig(
    device: String = "synthetic", recording: String = "pre_roll = 1.0; post_roll = 1.0; max_clip = 60.0;",
    storage: String = "", extra: String = ""
) -> String {
    """
    camera = { device = "\(device)"; name = "yard"; width = 320; height = 240; fps = 15.0; };
    encoder = { threads = 1; };
    recording = { \(recording) };
    storage = { path = "/memory/clips"; min_free_mb = 1; \(storage) };
    log = { level = "info"; stats_interval = 0; };
    \(extra)
    """
}

/// Opens a device from a script: the `n`th call (from 1) gets `open(n)`; `calls` counts them.
public final class DeviceScript<Device>: Sendable {
    private let opened = Mutex(0)
    private let open: @Sendable (Int) throws(CaptureError) -> Device

    public init(_ open: @escaping @Sendable (Int) throws(CaptureError) -> Device) {
        self.open = open
    }

    public var calls: Int { opened.withLock { $0 } }

    public func next() throws(CaptureError) -> Device {
        let n = opened.withLock { count -> Int in
            count += 1
            return count
        }
        return try open(n)
    }
}

extension Notice {
    /// What a notice is about, without its fields: what a test lists in order.
    public enum Kind: Equatable, Sendable, CaseIterable {
        case cameraOpen, cameraBack, cameraUnavailable, cameraLost, endOfSource, sourceStalled, framesAgain
        case frameTimesJumped, wallClockMoved, microphoneOpen, microphoneBack, microphoneUnavailable
        case microphoneFailed, reloadRefused, retentionChanged, restartNeeded, encoderChosen, encoding
        case hardwareEncoderCannotOpen, hardwareEncoderFailed, hardwareEncoderGivenUp, encoderFailed
        case storageUnavailable, storageBack, clipHeld, heldVideoFull, clipNotRecorded, clipWrittenFromMemory
        case clipLostWithTheStorage, journalRebuilt, diskFull, diskSpaceAgain, diskLow, snapshotNotSaved
        case latestPictureFailed, latestPictureWaitsForSpace, clipUnfinished, clipRepaired, clipMovedAside
        case clipNotRepaired, leftoverRemoved, overlayShortened
    }

    public var kind: Kind {
        switch self {
        case .cameraOpen: .cameraOpen
        case .cameraBack: .cameraBack
        case .cameraUnavailable: .cameraUnavailable
        case .cameraLost: .cameraLost
        case .endOfSource: .endOfSource
        case .sourceStalled: .sourceStalled
        case .framesAgain: .framesAgain
        case .frameTimesJumped: .frameTimesJumped
        case .wallClockMoved: .wallClockMoved
        case .microphoneOpen(_, _, _, let back): back ? .microphoneBack : .microphoneOpen
        case .microphoneUnavailable: .microphoneUnavailable
        case .microphoneFailed: .microphoneFailed
        case .reloadRefused: .reloadRefused
        case .retentionChanged: .retentionChanged
        case .restartNeeded: .restartNeeded
        case .encoderChosen: .encoderChosen
        case .encoding: .encoding
        case .hardwareEncoderCannotOpen: .hardwareEncoderCannotOpen
        case .hardwareEncoderFailed: .hardwareEncoderFailed
        case .hardwareEncoderGivenUp: .hardwareEncoderGivenUp
        case .encoderFailed: .encoderFailed
        case .storageUnavailable: .storageUnavailable
        case .storageBack: .storageBack
        case .clipHeld: .clipHeld
        case .heldVideoFull: .heldVideoFull
        case .clipNotRecorded: .clipNotRecorded
        case .clipWrittenFromMemory: .clipWrittenFromMemory
        case .clipLostWithTheStorage: .clipLostWithTheStorage
        case .journalRebuilt: .journalRebuilt
        case .diskFull: .diskFull
        case .diskSpaceAgain: .diskSpaceAgain
        case .diskLow: .diskLow
        case .snapshotNotSaved: .snapshotNotSaved
        case .latestPictureFailed: .latestPictureFailed
        case .latestPictureWaitsForSpace: .latestPictureWaitsForSpace
        case .clipUnfinished: .clipUnfinished
        case .clipRepaired: .clipRepaired
        case .clipMovedAside: .clipMovedAside
        case .clipNotRepaired: .clipNotRepaired
        case .leftoverRemoved: .leftoverRemoved
        case .overlayShortened: .overlayShortened
        }
    }

    /// The value of the log line's field `key`, as the line writes it.
    public func field(_ key: String) -> String? { line.fields.first { $0.0 == key }?.1.description }
}

extension EventRecorder {
    /// The notices but `encoding` (one for each stream): what changed, in order.
    public var changes: [Notice] { notices.filter { $0.kind != .encoding } }

    /// The notices of kind `kind`, in order.
    public func notices(_ kind: Notice.Kind) -> [Notice] { notices.filter { $0.kind == kind } }
}
