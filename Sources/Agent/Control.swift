import Recorder
import Synchronization

/// Requests from outside the pipeline — `vigil trigger`, MQTT's command topics — for the
/// pipeline thread, which takes them at its next frame. Any thread may ask; nothing waits.
public final class AgentControl: Sendable {
    /// What is asked and not yet taken.
    struct Requests {
        /// Record from the next frame, for this long (nil: until `stopRecording` or `max_clip`),
        /// and who asked (for the log).
        var record: (seconds: Double?, by: String)?
        /// End an outside recording, and who asked.
        var stopRecording: String?
        /// Motion detection on or off, and who asked.
        var detection: (Bool, by: String)?
    }

    private let pending = Mutex(Requests())
    private let detecting = Atomic<Bool>(true)
    private let readCounters = Mutex<(@Sendable () -> Counters)?>(nil)
    private let readCamera = Mutex<(@Sendable () -> String?)?>(nil)
    private let deleter = Mutex<(@Sendable (String, String) -> Bool)?>(nil)
    private let readUploads = Mutex<(@Sendable () -> UploadFigures)?>(nil)
    private let readUploadQueue = Mutex<(@Sendable () -> UploadQueueState)?>(nil)
    private let announcer = Mutex<(@Sendable (AgentEvent) -> Void)?>(nil)

    /// The encoded stream for live viewers: the agent publishes each complete GOP into it
    /// (once the web server has opened it).
    public let live = LiveFeed()

    public init() {}

    /// Records now as an outside event, for `seconds` (then the post-roll), or until
    /// `stopRecording` (at most `recording.max_clip`) when nil.
    /// `by` says who asked, for the log ("mqtt", "vigil trigger").
    public func record(seconds: Double? = nil, by: String) {
        pending.withLock {
            $0.record = (seconds, by)
            $0.stopRecording = nil
        }
    }

    /// Ends an outside recording: the event goes on through its post-roll, or while there is motion.
    public func stopRecording(by: String) {
        pending.withLock {
            $0.record = nil
            $0.stopRecording = by
        }
    }

    /// Turns motion detection on or off. Off, the detector goes on learning the picture and the
    /// pre-roll ring on filling, but motion starts no event; outside recordings still work.
    public func setDetection(_ on: Bool, by: String) {
        pending.withLock { $0.detection = (on, by) }
    }

    /// Whether motion detection is on (as last asked: the pipeline takes it at its next frame).
    public var detectionEnabled: Bool { pending.withLock { $0.detection?.0 } ?? detecting.load(ordering: .relaxed) }

    /// The agent's counters as they are now (frames, drops, clips, the ring, the disk's free
    /// space): what the stats line reports, without waiting for its interval. All zero before
    /// an agent runs with this control.
    public var counters: Counters { readCounters.withLock { $0 }?() ?? Counters() }

    /// Where `counters` reads from: the agent's, once it is made.
    func attach(_ read: @escaping @Sendable () -> Counters) { readCounters.withLock { $0 = read } }

    /// Why a request to record cannot be taken now — the camera delivers no frames (which one,
    /// since when) — or nil when it can.
    public var cameraProblem: String? { readCamera.withLock { $0 }?() }

    /// Where `cameraProblem` reads from: the agent's, once it is made.
    func attachCamera(_ read: @escaping @Sendable () -> String?) { readCamera.withLock { $0 = read } }

    /// Deletes a saved clip of the agent's, and its picture: the writer does it after what it is
    /// writing now (never the clip being written, never a file that is not one of the agent's
    /// clips), logs it (`clip deleted`, the reason `deleted by BY`) and tells the sinks, so
    /// the journal drops its line. False when no agent runs to do it.
    public func deleteClip(_ file: String, by: String) -> Bool {
        deleter.withLock { $0 }?(file, by) ?? false
    }

    /// The upload queue's figures now (all 0 without uploads).
    public var uploads: UploadFigures { uploadsIfRunning ?? UploadFigures() }

    /// The upload queue's figures, or nil when no upload sink runs (no `upload.url`, or it
    /// could not be set up).
    public var uploadsIfRunning: UploadFigures? { readUploads.withLock { $0 }?() }

    /// Where `uploads` reads from: the upload sink, once it is made.
    package func attachUploads(_ read: @escaping @Sendable () -> UploadFigures) { readUploads.withLock { $0 = read } }

    /// The upload queue as the upload sink holds it in memory (what retention keeps, what the
    /// web page marks), or nil when no upload sink runs. Nothing on the recording path ever
    /// reads `uploads.jsonl` itself.
    public var uploadQueue: UploadQueueState? { readUploadQueue.withLock { $0 }?() }

    /// Where `uploadQueue` reads from: the upload sink, once it is made.
    package func attachUploadQueue(_ read: @escaping @Sendable () -> UploadQueueState) {
        readUploadQueue.withLock { $0 = read }
    }

    /// Hands `event` to the sinks of the agent's run (the journal, the hooks, MQTT, …), from a
    /// sink of its own thread (the upload sink: `clipUploaded`). Dropped when no agent runs.
    package func announce(_ event: AgentEvent) { announcer.withLock { $0 }?(event) }

    /// Where `announce` hands events: the sinks of the agent's run, once it runs.
    package func attachAnnouncer(_ announce: (@Sendable (AgentEvent) -> Void)?) {
        announcer.withLock { $0 = announce }
    }

    /// What `deleteClip` asks: the agent's writer queue, once it runs.
    package func attachDeleter(_ delete: (@Sendable (String, String) -> Bool)?) { deleter.withLock { $0 = delete } }

    /// The pipeline takes what was asked.
    func take() -> Requests {
        pending.withLock { requests in
            defer { requests = Requests() }
            if let (on, _) = requests.detection { detecting.store(on, ordering: .relaxed) }
            return requests
        }
    }
}

/// The upload queue's figures since the agent started (`waiting`: now).
public struct UploadFigures: Sendable, Equatable {
    /// Clips queued and not uploaded yet.
    public var waiting = 0
    public var uploaded = 0
    public var bytes: Int64 = 0
    /// Tries that failed (each is tried again).
    public var failures = 0

    public init(waiting: Int = 0, uploaded: Int = 0, bytes: Int64 = 0, failures: Int = 0) {
        self.waiting = waiting
        self.uploaded = uploaded
        self.bytes = bytes
        self.failures = failures
    }
}

/// The upload queue as the upload sink holds it.
public enum UploadQueueState: Sendable {
    /// `uploads.jsonl` is being read (on the upload thread, when the agent starts).
    case reading
    case read(UploadJournal)
}
