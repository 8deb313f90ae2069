import Recorder

/// What a sink may read and do while the agent runs, handed to it when the run starts
/// (`EventSink.start`): the requests it may pass on from outside (`AgentControl`: MQTT's
/// commands, the web page's), the live feed, the agent's counters, the upload queue, and a way
/// to tell the other sinks something (`announce`). A sink that keeps it keeps it for the run;
/// nothing is attached to it later.
public struct SinkContext: Sendable {
    /// Where requests from outside go.
    public let requests: AgentControl
    /// The encoded stream for live viewers: the agent publishes each complete GOP into it,
    /// once a sink (the web server) has opened it.
    public let live: LiveFeed
    /// The upload queue, when a sink sends clips (it conforms to `UploadStatus`).
    public let uploadStatus: (any UploadStatus)?
    private let readCounters: @Sendable () -> Counters
    private let announcer: @Sendable (AgentEvent) -> Void

    /// What a sink gets outside an agent's run (tests): requests no agent takes, a feed of its
    /// own, zero counters, no uploads, announcements dropped — each as given.
    public init(
        requests: AgentControl = AgentControl(), live: LiveFeed = LiveFeed(),
        counters: @escaping @Sendable () -> Counters = { Counters() }, uploads: (any UploadStatus)? = nil,
        announce: @escaping @Sendable (AgentEvent) -> Void = { _ in }
    ) {
        self.requests = requests
        self.live = live
        readCounters = counters
        uploadStatus = uploads
        announcer = announce
    }

    /// The agent's counters as they are now (frames, drops, clips, the ring, the disk's free
    /// space): what the stats line reports, without waiting for its interval.
    public var counters: Counters { readCounters() }

    /// The upload queue's figures now (all 0 without uploads).
    public var uploads: UploadFigures { uploadStatus?.uploadCounts ?? UploadFigures() }

    /// The upload queue's figures, or nil when no upload sink runs (no `upload.url`, or it
    /// could not be set up).
    public var uploadsIfRunning: UploadFigures? { uploadStatus?.uploadCounts }

    /// The upload queue as the upload sink holds it in memory (what retention keeps, what the
    /// web page marks), or nil when no upload sink runs. Nothing on the recording path ever
    /// reads `uploads.jsonl` itself.
    public var uploadQueue: UploadQueueState? { uploadStatus?.uploadQueue }

    /// The same without the upload queue: what the sink that holds the queue keeps (keeping
    /// itself, it would never go).
    public var withoutUploadStatus: SinkContext {
        SinkContext(requests: requests, live: live, counters: readCounters, uploads: nil, announce: announcer)
    }

    /// Hands `event` to the sinks of the agent's run (the journal, the hooks, MQTT, …), from a
    /// sink's own thread (the upload sink: `clipUploaded`). Dropped once the sinks finish.
    public func announce(_ event: AgentEvent) { announcer(event) }
}

/// The upload queue as the sink that sends clips holds it (`UploadSink`): what retention keeps
/// until it is uploaded, what the web page and `/metrics` show. The agent finds it among its
/// sinks.
public protocol UploadStatus: Sendable {
    /// Its figures since the agent started (`waiting`: now).
    var uploadCounts: UploadFigures { get }
    /// What is uploaded, waiting, set aside — or still being read.
    var uploadQueue: UploadQueueState { get }
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
