import Synchronization

/// Requests from outside the agent — `vigil trigger`, MQTT's command topics, the web page —
/// and nothing else: record now (or stop), motion detection on or off, delete a clip. Any
/// thread may ask; nothing waits. The pipeline thread takes the first two at its next frame
/// (`take`); a deletion goes to the writer's queue while the agent runs. What a sink may read
/// and do besides (the live feed, the counters, the uploads, announcing an event) is its
/// `SinkContext`, handed to it when the agent starts.
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
    /// The running agent's: why a recording cannot be asked now, and where deletions go.
    private let readCamera = Mutex<(@Sendable () -> String?)?>(nil)
    private let deleter = Mutex<(@Sendable (String, String) -> Bool)?>(nil)

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

    /// What `deleteClip` asks: the agent's writer queue, once it runs (a test stands in for it).
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
