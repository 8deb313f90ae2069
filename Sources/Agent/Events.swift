import Configuration
import FoundationEssentials
import Media
import POSIX
import Recorder

/// Where the agent's events go: the events journal and the hooks today, MQTT next. The
/// pipeline, the clip writer and the housekeeping thread know sinks only through this.
///
/// `handle` is called on the thread the event happened on — motion on the pipeline thread,
/// clips on the writer thread, stats on the housekeeping thread — in the order they happened
/// there, and after the clip's own work (a clip is saved, synced and indexed before
/// `clipSaved` goes out). It must return promptly: capture, encoding and writing wait for it.
/// A sink that talks to the network hands the event to a thread of its own.
public protocol EventSink: Sendable {
    /// The agent's run begins: what the sink may read and do while it lasts. Called once, on
    /// the thread that runs the agent, before any event.
    func start(_ context: SinkContext)
    func handle(_ event: AgentEvent)
    /// The agent is stopping and has handed over its last event: deliver what is still queued
    /// and let go, within `EventSinks.finishSeconds` whatever the network or the clients do.
    /// Called once, on a thread of its own: the sinks finish side by side.
    func finish()
}

extension EventSink {
    public func start(_ context: SinkContext) {}
    public func finish() {}
}

/// Something the agent did or saw.
public enum AgentEvent: Sendable {
    case motionStarted(MotionStarted)
    case motionEnded(MotionEnded)
    case clipStarted(ClipStarted)
    case clipSaved(ClipSaved)
    /// Retention deleted clips (one sweep's worth).
    case clipsDeleted(ClipsDeleted)
    /// The periodic stats line's figures.
    case stats(StatsReport)
    /// The configuration was reloaded: a sink takes what concerns it (hook programs, …).
    case reloaded(Settings)
    /// Motion detection was turned on or off (`AgentControl`).
    case detection(Bool)
    /// A device, the stream or the configuration changed as `Notice` says (also logged).
    case notice(Notice)
    /// The live picture (`latest.jpg`'s JPEG), every `snapshot.live_interval`.
    case livePicture([UInt8])
    /// The storage directory is claimed by this agent, repaired and swept: at start, and when it
    /// is back after an outage. What is in it is the agent's to work on from now on.
    case storageReady(any ClipStorage)
    /// A clip was uploaded and verified on the server (`upload.url`), by the upload sink.
    case clipUploaded(ClipUploaded)
}

/// An event began: motion confirmed.
public struct MotionStarted: Sendable, Equatable {
    /// When the motion began (wall clock of the capture).
    public var trigger: Date
    /// The score of the frame that confirmed it.
    public var score: Double
    /// Motion, or an outside signal.
    public var cause: TriggerCause
}

/// An event ended: post-roll over, or the stream ended.
public struct MotionEnded: Sendable, Equatable {
    public var end: Date
    public var peakScore: Double
    /// How many clips (`max_clip` parts) the event was written as.
    public var parts: Int
    /// What started the event, or `.external` when an outside trigger was taken during it.
    public var cause: TriggerCause = .motion
}

/// A clip file was opened.
public struct ClipStarted: Sendable, Equatable {
    /// Relative to the storage directory, and as people know it.
    public var file: String
    public var path: String
    public var camera: String
    /// Counts events since the agent started; `part` is 1, or 2 and on for `max_clip` parts.
    public var event: Int
    public var part: Int
    public var trigger: Date
    /// Seconds of video before the trigger (0 for a continuation part).
    public var preRoll: Double
    public var score: Double
    /// What started the event.
    public var cause: TriggerCause
}

/// A clip became a finished movie with its journal line.
public struct ClipSaved: Sendable {
    public enum Origin: Sendable, Equatable {
        /// Closed at the end of its event (or part, or when the agent stopped).
        case closed
        /// Given up after a write error and finished by repair.
        case abandoned
        /// Left unfinished by an earlier run, repaired at start.
        case repairedAtStart
    }

    /// The journal's line for it.
    public var record: ClipRecord
    /// The clip's file as people know it.
    public var path: String
    public var origin: Origin
    /// Why it was closed (`origin` `.closed`; nil for a clip finished by repair).
    public var reason: ClipClosing.Reason? = nil
    /// The storage directory it is in (a reload may have changed `storage.path` since).
    public var storage: any ClipStorage
    /// The picture of its peak frame (`record.snapshot`), as written beside it.
    public var snapshotJPEG: [UInt8]? = nil

    public init(
        record: ClipRecord, path: String, origin: Origin, reason: ClipClosing.Reason? = nil, storage: any ClipStorage,
        snapshotJPEG: [UInt8]? = nil
    ) {
        self.record = record
        self.path = path
        self.origin = origin
        self.reason = reason
        self.storage = storage
        self.snapshotJPEG = snapshotJPEG
    }
}

/// Clips retention deleted in one sweep.
public struct ClipsDeleted: Sendable {
    public var deletions: [Deletion]
    public var storage: any ClipStorage

    public init(deletions: [Deletion], storage: any ClipStorage) {
        self.deletions = deletions
        self.storage = storage
    }
}

/// A clip (and its picture, with `upload.snapshots`) is on the server, verified: what its line
/// in `uploads.jsonl` says.
public struct ClipUploaded: Sendable, Equatable {
    /// Relative to the storage directory, and as people know it.
    public var file: String
    public var path: String
    public var camera: String
    /// Where the clip is now (`s3://bucket/key`, `sftp://…`, `https://…`).
    public var url: String
    /// The clip's size (its picture not counted), and the seconds the upload took.
    public var bytes: Int64
    public var seconds: Double
    /// When it was verified (the wall clock, as the journals write it).
    public var at: String
    /// Clips still waiting after it.
    public var waiting: Int

    public init(
        file: String, path: String, camera: String, url: String, bytes: Int64, seconds: Double, at: String,
        waiting: Int
    ) {
        self.file = file
        self.path = path
        self.camera = camera
        self.url = url
        self.bytes = bytes
        self.seconds = seconds
        self.at = at
        self.waiting = waiting
    }
}

/// The figures of a stats line: totals since start, the change since the last line, and
/// over how many seconds.
public struct StatsReport: Sendable, Equatable {
    public var now: Counters
    public var previous: Counters
    public var seconds: Double
    /// Clips waiting to be uploaded, when uploads are set up (`upload.url`).
    public var uploadWaiting: Int? = nil
}

/// Every sink, called in order (the journal before the hooks, so a hook finds its clip's line).
public struct EventSinks: EventSink {
    public var sinks: [any EventSink]

    public init(_ sinks: [any EventSink]) {
        self.sinks = sinks
    }

    public func start(_ context: SinkContext) {
        for sink in sinks { sink.start(context) }
    }

    public func handle(_ event: AgentEvent) {
        for sink in sinks { sink.handle(event) }
    }

    /// How long a sink's `finish` may take: what it has not delivered by then is given up (the
    /// events journal and the upload queue keep what matters for the next run).
    public static let finishSeconds = 1.5

    public func finish() { _ = finishSideBySide() }

    /// Finishes every sink side by side, each on a thread of its own, so that one stuck on the
    /// network (a broker, an upload server, a hook) costs the others nothing, and waits for
    /// them: at most a second past `finishSeconds`. Returns the sinks still finishing then
    /// (the agent says so and exits without them).
    public func finishSideBySide() -> [String] {
        let finishing = sinks.map { sink in (sink, startThread("finish") { sink.finish() }) }
        // A wait: on the real monotonic clock.
        let deadline = Clock.monotonic.now() + Timestamp.Duration(seconds: Self.finishSeconds + 1)
        return finishing.filter { !$0.1.join(timeout: max(0, (deadline - Clock.monotonic.now()).seconds)) }.map {
            "\(type(of: $0.0))"
        }
    }
}
