import Agent
import Configuration
import FoundationEssentials
import Logging
import Media
import POSIX
import Recorder
import Synchronization

/// Uploads as one of the agent's sinks: each clip is queued in `uploads.jsonl` when it starts
/// (a line, synced, on the writer's thread, before its first fragment is written: a clip on
/// the board is a clip in the queue, whatever moment a kill or a power cut comes), and a thread
/// of its own sends each once it is saved, oldest first, one clip at a time, each verified on
/// the server before its `uploaded` line is written. A failure is tried again after 1 s,
/// doubling to 10 minutes, the other clips meanwhile; a clip the server refuses again and again
/// while it takes the others is set aside. Recording never waits for any of it: the queue is
/// read on the upload thread, a line at a time, and kept in memory as one state per file
/// waiting or set aside (below), which is what retention asks (`UploadStatus`, which the agent
/// finds among its sinks and hands to the others in their `SinkContext`). The queue outlives
/// the agent: a clip queued and not uploaded when the agent stops (or is killed, or
/// loses power) is uploaded when it runs again.
///
/// `uploads.jsonl` is the queue's durable log; the clip catalogue is where everyone else reads
/// where each clip's upload stands (the page, `/api/clips`, `vigil clips`): the sink writes each
/// state there as it writes its line — waiting once the clip is saved (it has no entry before),
/// uploaded with its URL, failed (set aside) with the server's answer — on a connection of its
/// own, and at start writes what the queue knows and the catalogue lacks, and queues again what
/// the catalogue says waits and the queue does not name. An upload the catalogue holds leaves
/// the queue in memory (and its line the file, when it is next written anew): the sink keeps
/// what waits and what was set aside, not a state for every clip it ever uploaded.
///
/// `@unchecked Sendable`: the mutable state is guarded by `condition`; `store` is used by the
/// upload thread alone.
public final class UploadSink: EventSink, UploadStatus, @unchecked Sendable {
    let settings: Settings.Upload
    let camera: String
    let log: Logger
    let wallNow: @Sendable () -> Date
    /// What the sink reads the time from (the agent's `Clock`): when a clip is tried again.
    let clock: Clock
    let timeZone: any LocalTimeZone
    let store: RemoteStore
    let condition = Condition()
    /// Guarded by `condition`.
    var state = State()
    /// Held while `uploads.jsonl` is written (lines appended, the file written anew or moved
    /// aside) and while the upload thread opens it to read it, so that every line is in the
    /// queue in memory or in what the thread reads, never lost between them. Taken before
    /// `condition`, never while holding it.
    let fileLock = Condition()
    /// The sink's own connection to the storage directory's catalogue (opened when first
    /// needed, again after an error), with the directory's root.
    let catalogue = Mutex<(root: String, catalogue: any ClipCatalogue)?>(nil)

    struct State {
        /// What the agent's run lets the sink do (`start`): delete a clip after its upload,
        /// announce the upload to the other sinks. Until then, no agent does either.
        var context = SinkContext()
        /// The storage directory the queue is in, once it is the agent's (`storageReady`).
        var storage: (any ClipStorage)?
        /// The queue, once the upload thread has read it.
        var journal: UploadJournal?
        /// Lines appended while the queue is not read yet, taken into it when it is, with
        /// whether they reached the file.
        var pending: [(record: UploadRecord, written: Bool)] = []
        var stopping = false
        var thread: JoinableThread?
        /// Clips being recorded: queued when they started, sent once they are saved.
        var recording: Set<String> = []
        /// Clips saved since the upload thread last looked: it says them waiting in the
        /// catalogue before it sends any.
        var saved: [String] = []
        /// Clips whose `queued` line was written when they started (none is written again
        /// when they are saved).
        var queuedAtStart: Set<String> = []
        /// When the next try may be (on the sink's clock; nil: now), and the failures in a row
        /// with the wait each gives (`Retry`: 1 s doubling to `longestWait`).
        var nextTry: Timestamp?
        var retry = Retry(maximum: .init(seconds: 600))
        /// What the last failure said (logged when it changes).
        var lastProblem: String?
        /// The last try: its clip and whether it worked. A clip that fails right after another
        /// clip's upload worked is the next to wait for another (`avoid`), and the failure
        /// counts against it (`Tries.strikes`).
        var lastTry: (file: String, worked: Bool)?
        var avoid: String?
        /// Each clip's tries that failed, in this run.
        var tries: [String: Tries] = [:]
        /// Clips handed to the writer to delete after their upload (not asked twice).
        var deleting: Set<String> = []
        /// The clip being sent now: deleted on the board meanwhile (a full disk), it is given
        /// up at once, so that its room is freed (an open file keeps it).
        var sending: String?
        /// The queue's lines when writing it anew failed (tried again once it has doubled).
        var compactionFailedAt = 0
    }

    struct Tries {
        var failed = 0
        /// Tries that failed right after another clip's upload worked: evidence that the fault
        /// is this clip's, not the network's or the credentials'.
        var strikes = 0
    }

    /// A clip that failed this many times right after another clip's upload worked is set aside.
    static let setAsideAfter = 5

    /// The longest wait between tries (and between reads of a queue that cannot be read): the
    /// wait doubles from 1 s up to it.
    let longestWait: Timestamp.Duration

    /// Counts since the agent started, for `/metrics` and the tests (`waiting` is read from
    /// the queue when asked).
    var counts = UploadFigures()

    /// `connectTimeout` and `stallTimeout` (seconds): how long connecting may take, and how
    /// long a transfer may send nothing, before the try is given up; `longestWait`: the
    /// longest wait between tries (10 minutes); `clock`: the agent's.
    public init(
        settings: Settings.Upload, camera: String, log: Logger, wallNow: @escaping @Sendable () -> Date = { Date() },
        timeZone: any LocalTimeZone, connectTimeout: Int = 20,
        stallTimeout: Int = 60, longestWait: Double = 600, clock: Clock = .monotonic
    ) throws(UploadSetupError) {
        guard let destination = settings.destination else {
            throw UploadSetupError(description: "upload.url is not set")
        }
        let transfer: CurlTransfer
        do { transfer = try CurlTransfer(connectTimeout: connectTimeout, stallTimeout: stallTimeout) } catch {
            throw UploadSetupError(description: error.description)
        }
        if let kbit = settings.bandwidthKbit { transfer.maxSendRate = Int64(kbit) * 1000 / 8 }
        transfer.caFile = settings.credentials.caFile
        self.settings = settings
        self.camera = camera
        self.longestWait = .init(seconds: longestWait)
        self.log = log.with(("component", "upload"))
        self.wallNow = wallNow
        self.clock = clock
        self.timeZone = timeZone
        store = RemoteStore(
            destination: destination, credentials: settings.credentials, camera: camera, transfer: transfer,
            clock: clock)
        state.retry = Retry(maximum: self.longestWait)
    }

    /// What waits to be sent now, oldest first (not the clip being recorded).
    public var backlog: [String] {
        condition.withLock { (state.journal?.backlog ?? []).filter { !state.recording.contains($0) } }
    }

    public var uploadCounts: UploadFigures {
        condition.withLock {
            var figures = counts
            figures.waiting = waitingCount
            return figures
        }
    }

    /// The queue as retention and the web page see it.
    public var uploadQueue: UploadQueueState { condition.withLock { state.journal.map { .read($0) } ?? .reading } }

    /// The clips waiting, not the one being recorded (under `condition`).
    var waitingCount: Int {
        guard let journal = state.journal else { return 0 }
        return journal.backlogCount - state.recording.filter { journal.waits($0) }.count
    }

    /// The agent's run begins. The context is kept without the upload queue it hands the other
    /// sinks, which is this sink: holding itself, it would never go.
    public func start(_ context: SinkContext) {
        condition.withLock { state.context = context.withoutUploadStatus }
    }

    public func handle(_ event: AgentEvent) {
        switch event {
        case .storageReady(let storage):
            start(storage)
        case .clipStarted(let clip):
            started(clip)
        case .clipSaved(let saved):
            self.saved(saved.record.file, in: saved.storage)
        case .clipsDeleted(let deleted):
            forget(deleted)
        default:
            break
        }
    }

    /// The storage directory is the agent's: the upload thread starts on it (once; later,
    /// after an outage, it is woken). It reads the queue: nothing here waits for that.
    private func start(_ storage: any ClipStorage) {
        let first = condition.withLock {
            condition.broadcast()
            guard state.storage == nil else { return false }
            state.storage = storage
            return true
        }
        guard first else { return }
        let thread = startThread("upload") { [self] in run(on: storage) }
        condition.withLock { state.thread = thread }
    }

    /// A clip started: its `queued` line, before anything of it is on the disk but its empty
    /// file (a kill now leaves a file repair finishes or removes, and the clip queued). It is
    /// sent once it is saved.
    private func started(_ clip: ClipStarted) {
        let storage = condition.withLock { () -> (any ClipStorage)? in
            guard let storage = state.storage, storage.path(clip.file) == clip.path else { return nil }
            state.recording.insert(clip.file)
            return storage
        }
        guard let storage else { return }
        // Not in the catalogue: the clip has no entry before it is saved.
        if append([UploadRecord(queued: clip.file, at: timestamp())], in: storage, catalogue: false) {
            condition.withLock { _ = state.queuedAtStart.insert(clip.file) }
        }
    }

    /// A clip saved: it may be sent. Queued now unless it was when it started (a clip repaired
    /// at start, finished after a write error, held in memory while the storage was away).
    private func saved(_ file: String, in storage: any ClipStorage) {
        // Said waiting in the catalogue (its entry is there now) by the upload thread, before
        // it may send it — never after its upload said otherwise; the writer's thread, which
        // tells this, writes nothing in the catalogue here.
        let queued = condition.withLock {
            state.recording.remove(file)
            return state.queuedAtStart.remove(file) != nil
        }
        if !queued { append([UploadRecord(queued: file, at: timestamp())], in: storage, catalogue: false) }
        // Queued now in either case: the upload thread says it waiting unless it was sent
        // meanwhile.
        condition.withLock {
            state.saved.append(file)
            condition.broadcast()
        }
    }

    /// Clips deleted on the board (retention, a person, `delete_local_after`): the queue forgets
    /// them; then the one being sent is given up (the queue no longer waits for it).
    private func forget(_ deleted: ClipsDeleted) {
        let at = timestamp()
        let records = condition.withLock {
            deleted.deletions.compactMap { deletion -> UploadRecord? in
                let file = deletion.clip.relativePath
                state.recording.remove(file)
                state.queuedAtStart.remove(file)
                state.tries[file] = nil
                let waiting: Bool
                if let journal = state.journal {
                    guard let known = journal.state(of: file) else { return nil }
                    waiting = known == .waiting
                } else {
                    // The queue is being read: said as retention saw it (a line for a clip the
                    // queue never named is harmless).
                    waiting = deletion.notUploaded
                }
                return UploadRecord(
                    deleted: file, at: at, reason: deletion.reason.description + (waiting ? ", before its upload" : ""))
            }
        }
        // Not in the catalogue: the writer took the clips' entries out.
        append(records, in: deleted.storage, catalogue: false)
        condition.withLock {
            if let sending = state.sending, deleted.deletions.contains(where: { $0.clip.relativePath == sending }) {
                store.transfer.abandon.turnOn()
            }
        }
    }

    /// Appends lines to the queue (synced, in one write) and takes them into the one in
    /// memory, and with `catalogue` the states they give into the catalogue (`enter`); false
    /// when they could not be written (said).
    @discardableResult
    func append(_ records: [UploadRecord], in storage: any ClipStorage, catalogue: Bool = true) -> Bool {
        guard !records.isEmpty else { return true }
        return fileLock.withLock {
            var written = true
            do throws(FileError) {
                try storage.append(records.flatMap(UploadJournal.line), to: UploadJournal.name)
            } catch {
                written = false
                log.error(
                    "the upload queue cannot be written; the clip is uploaded only if the agent runs until then",
                    [
                        ("file", .string(records[0].file ?? "")), ("path", .string(storage.path(UploadJournal.name))),
                        ("error", .string(error.description)),
                    ])
            }
            let ours = condition.withLock {
                guard state.storage == nil || state.storage?.root == storage.root else { return false }
                if state.journal != nil {
                    for record in records { state.journal?.apply(record) }
                } else {
                    state.pending += records.map { ($0, written) }
                }
                condition.broadcast()
                return true
            }
            if ours && catalogue { enter(records, in: storage) }
            return written
        }
    }

    /// Writes where the clips of `records` stand into the catalogue (under `fileLock`, so that
    /// the catalogue takes the states in the order the queue does): a clip queued waits, one
    /// uploaded is at its URL, one set aside failed with the server's answer, one deleted has
    /// none. Said when it cannot be (the next start writes it).
    func enter(_ records: [UploadRecord], in storage: any ClipStorage) {
        let states = records.compactMap(Self.catalogueState)
        guard !states.isEmpty else { return }
        do throws(CatalogueError) { try sinkCatalogue(of: storage).setUploads(states) } catch {
            forgetCatalogue()
            log.warning(
                "where an upload stands is not written in the clip catalogue; the page and vigil clips show it once the agent starts again",
                [("file", .string(states[0].file)), ("error", .string(error.description))])
            return
        }
        // The catalogue holds the uploads now: the queue forgets them.
        condition.withLock {
            for record in records where record.uploaded != nil && forgets(record) {
                state.journal?.forgetUpload(record.uploaded ?? "")
            }
        }
    }

    /// Whether the queue may forget an upload the catalogue holds: yes, unless the clip is to
    /// be deleted on the board after it (`delete_local_after`, its copy read back).
    func forgets(_ upload: UploadRecord) -> Bool { settings.deleteLocalAfter == nil || upload.readBack != true }

    /// The catalogue's state for a line of the queue, and its clip.
    static func catalogueState(_ record: UploadRecord) -> (file: String, state: UploadState?)? {
        if let file = record.queued { return (file, .waiting) }
        if let file = record.uploaded { return (file, .uploaded(url: record.url ?? "")) }
        if let file = record.setAside { return (file, .failed(reason: record.reason ?? "")) }
        if let file = record.deleted { return (file, nil) }
        return nil
    }

    /// The sink's connection to `storage`'s catalogue, opened when there is none of it.
    func sinkCatalogue(of storage: any ClipStorage) throws(CatalogueError) -> any ClipCatalogue {
        try catalogue.withLock { (held) throws(CatalogueError) -> any ClipCatalogue in
            if let held, held.root == storage.root { return held.catalogue }
            let opened = try storage.openCatalogue()
            held = (storage.root, opened)
            return opened
        }
    }

    func forgetCatalogue() { catalogue.withLock { $0 = nil } }

    /// The agent stops: the upload thread is told to (a transfer under way is ended) and
    /// waited for 1.5 s at most.
    public func finish() {
        let thread = condition.withLock {
            state.stopping = true
            condition.broadcast()
            return state.thread
        }
        store.transfer.stop.turnOn()
        if let thread, !thread.join(timeout: 1.5) {
            log.warning("an upload was still going when the agent stopped; it starts again next time")
        }
    }

    func timestamp() -> String { ClipRecord.timestamp(wallNow(), timeZone: timeZone) }
}

/// Uploads cannot be set up at all (libcurl fails to start).
public struct UploadSetupError: Error, CustomStringConvertible {
    public var description: String
}
