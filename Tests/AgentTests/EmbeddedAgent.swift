import AgentTestSupport
import Capture
import Configuration
import Foundation
import H264
import Logging
import Media
import QuickTime
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent

/// The agent without threads or a clock, the way swift-nio's `EmbeddedChannel` drives a
/// channel pipeline: the test hands each frame (with what was asked from outside at it) to
/// the `Pipeline`'s `step`, and every writer command it returns to the `ClipWriter`'s `step`,
/// on the test's own thread. The clocks are the frames' times (the monotonic clock reads the
/// time of the frame being stepped; the wall clock `wallOrigin` plus that), the disk is a
/// `MemoryStorage` that still holds real `.mov` bytes, and the events are those the agent's
/// sinks get — the journal and the hooks too. So what a test asserts is exactly what happens
/// at a frame, and nothing waits.
final class EmbeddedAgent {
    let settings: Settings
    let storage: MemoryStorage
    let logs = MemoryLogSink()
    let events = EventRecorder { _ in }
    let pipeline: Pipeline
    let writer: ClipWriter
    private let sinks: EventSinks
    /// What the pipeline returned when the stream ended (the source's error).
    private(set) var ended: CaptureError??
    /// The bytes the writer's queue holds, as each step is told (the embedded writer takes
    /// every item at once: 0 unless a test says otherwise).
    var writerLoad = 0
    /// What live viewers were given, step after step.
    private(set) var live: [LiveFeed.Update] = []
    /// The time of the frame being stepped: what the monotonic clock reads.
    private let clock = ManualClock()
    static let wallOrigin = Date(timeIntervalSince1970: 1_796_000_000)

    init(config: String = testConfig(), storage: MemoryStorage = MemoryStorage()) throws {
        settings = try TemporaryDirectory.with("vigil-embedded") { directory in
            let path = directory.file("vigil.conf")
            try config.write(toFile: path, atomically: true, encoding: .utf8)
            return try Settings.load(path: path)
        }
        storage.now = EmbeddedAgent.wallOrigin
        self.storage = storage
        let log = Logger.agent(settings, sink: logs)
        sinks = EventSinks([JournalSink(log: log), HookSink(settings.hooks, log: log), events])
        let clock = self.clock
        let monotonicNow: @Sendable () -> Timestamp = { clock.now }
        let wallNow: @Sendable () -> Date = { EmbeddedAgent.wallOrigin.addingTimeInterval(clock.now.seconds) }
        let stats = Stats()
        writer = ClipWriter(
            settings: WriterSettings(settings, storage: storage), log: log, stats: stats, events: sinks,
            monotonicNow: monotonicNow, wallNow: wallNow)
        pipeline = Pipeline(
            settings: settings, encoders: EncoderChoice(fallback: X264EncoderFactory(settings: settings.encoder.x264)),
            log: log, stats: stats,
            monotonicNow: monotonicNow, wallNow: wallNow)
        guard case .ready = writer.bringUpStorage() else { throw EmbeddedError.storageNotReady }
    }

    enum EmbeddedError: Error { case storageNotReady }

    /// Steps one input through the pipeline, and what it returns through the writer and the sinks.
    func step(_ input: PipelineInput) {
        if case .frame(let frame, _) = input { clock.now = frame.timestamp }
        for output in pipeline.step(input, writerLoad: writerLoad) {
            switch output {
            case .writer(let item, _, _): writer.step(.item(item))
            case .event(let event): sinks.handle(event)
            case .live(let update): live.append(update)
            case .finished(let error):
                writer.step(.end)
                ended = .some(error)
            }
        }
    }

    /// Steps every frame of `source`, each with the requests `asked` makes at it, then the end.
    func run(
        _ source: any FrameSource, asked: (VideoFrame) -> AgentControl.Requests = { _ in AgentControl.Requests() }
    ) throws {
        while let frame = try source.nextFrame() { step(.frame(frame, requests: asked(frame))) }
        step(.end(nil))
    }

    /// The clips in the storage, sorted.
    var clipFiles: [String] { storage.fileNames.filter { $0.hasSuffix(".mov") } }

    /// The events journal's records.
    func journal() throws -> [ClipRecord] { try EventsJournal(storage: storage).records().records }

    var errors: [String] { logs.written(at: .error) }
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

/// A clock that reads what the test set it to.
final class ManualClock: Sendable {
    private let time = Mutex(Timestamp.zero)
    var now: Timestamp {
        get { time.withLock { $0 } }
        set { time.withLock { $0 = newValue } }
    }
}
