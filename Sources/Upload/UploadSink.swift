import Agent
internal import CLinux
import Configuration
import FoundationEssentials
internal import Glibc
import Logging
import Media
import POSIX
import Recorder

/// Uploads as one of the agent's sinks: each saved clip is queued in `uploads.jsonl` (a line,
/// synced, on the writer's thread, before the next clip), and a thread of its own sends the
/// queue oldest first, one clip at a time, each verified on the server before its `uploaded`
/// line is written. A failure is tried again after 1 s, doubling to 10 minutes; recording never
/// waits for any of it. The queue outlives the agent: a clip queued and not uploaded when the
/// agent stops (or is killed, or loses power) is uploaded when it runs again.
///
/// `@unchecked Sendable`: the mutable state is guarded by `condition`; `store` is used by
/// the upload thread alone.
public final class UploadSink: EventSink, @unchecked Sendable {
    let settings: Settings.Upload
    let camera: String
    let log: Logger
    let wallNow: @Sendable () -> Date
    let timeZone: any LocalTimeZone
    private let store: RemoteStore
    private let condition = Condition()
    /// Guarded by `condition`.
    private var state = State()

    struct State {
        /// The queue, once the storage directory is the agent's (`storageReady`).
        var journal: UploadJournal?
        var storage: (any ClipStorage)?
        var stopping = false
        var thread: JoinableThread?
        /// When the next try may be (the monotonic clock), and the wait after a failure.
        var nextTry = 0.0
        var backoff = Self.firstBackoff
        /// The failures in a row, and what the last said (logged when it changes).
        var failures = 0
        var lastProblem: String?
        /// Clips handed to the writer to delete after their upload (not asked twice).
        var deleting: Set<String> = []
        /// The clip being sent now: deleted on the board meanwhile (a full disk), it is given
        /// up at once, so that its room is freed (an open file keeps it).
        var sending: String?

        static let firstBackoff = 1.0
    }

    /// The longest wait between tries: the wait doubles from 1 s up to it.
    let longestWait: Double
    /// Where clips are deleted after their upload (`upload.delete_local_after`): the agent's writer.
    let control: AgentControl

    /// Counts since the agent started, for `/metrics` and the tests (`waiting` is read from
    /// the queue when asked).
    private var counts = UploadFigures()

    /// `connectTimeout` and `stallTimeout` (seconds): how long connecting may take, and how
    /// long a transfer may send nothing, before the try is given up; `longestWait`: the
    /// longest wait between tries (10 minutes).
    public init(
        settings: Settings.Upload, camera: String, log: Logger, wallNow: @escaping @Sendable () -> Date = { Date() },
        timeZone: any LocalTimeZone, control: AgentControl = AgentControl(), connectTimeout: Int = 20,
        stallTimeout: Int = 60, longestWait: Double = 600
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
        self.longestWait = longestWait
        self.control = control
        self.log = log.with(("component", "upload"))
        self.wallNow = wallNow
        self.timeZone = timeZone
        store = RemoteStore(
            destination: destination, credentials: settings.credentials, camera: camera, transfer: transfer)
        control.attachUploads { [self] in uploadCounts }
    }

    /// What the queue holds now: the files waiting, oldest first.
    public var backlog: [String] { condition.withLock { state.journal?.backlog ?? [] } }

    public var uploadCounts: UploadFigures {
        condition.withLock {
            var figures = counts
            figures.waiting = state.journal?.backlogCount ?? 0
            return figures
        }
    }

    public func handle(_ event: AgentEvent) {
        switch event {
        case .storageReady(let storage):
            start(storage)
        case .clipSaved(let saved):
            queue(saved.record.file, in: saved.storage)
        case .clipsDeleted(let deleted):
            // The queue forgets them: waiting (retention on a full disk, a person), or uploaded.
            let known = condition.withLock {
                if let sending = state.sending, deleted.deletions.contains(where: { $0.clip.relativePath == sending }) {
                    store.transfer.abandon.turnOn()
                }
                return deleted.deletions.compactMap { deletion -> (Deletion, Bool)? in
                    let file = deletion.clip.relativePath
                    guard let journal = state.journal else { return nil }
                    if journal.waits(file) { return (deletion, true) }
                    return journal.uploads[file] != nil ? (deletion, false) : nil
                }
            }
            for (deletion, waiting) in known {
                append(
                    UploadRecord(
                        deleted: deletion.clip.relativePath, at: timestamp(),
                        reason: deletion.reason.description + (waiting ? ", before its upload" : "")),
                    in: deleted.storage)
            }
        default:
            break
        }
    }

    /// The storage directory is the agent's: the queue is read (and written anew when it has
    /// grown long), and the thread starts on it (once; later, after an outage, it is woken).
    private func start(_ storage: any ClipStorage) {
        let loaded = condition.withLock {
            if state.journal != nil { condition.broadcast() }
            return state.journal != nil
        }
        guard !loaded else { return }
        var journal: UploadJournal
        do { journal = try UploadJournal.read(from: storage) ?? UploadJournal() } catch {
            log.error(
                "the upload queue cannot be read; uploads wait until it can — check the file's permissions",
                [("path", .string(storage.path(UploadJournal.name))), ("error", .string(error.description))])
            return
        }
        if journal.wantsCompacting {
            let text = journal.compacted.flatMap(UploadJournal.line)
            do {
                try storage.replace(UploadJournal.name, with: text)
                journal = UploadJournal(text)
            } catch {
                log.warning("the upload queue was not shortened", [("error", .string(error.description))])
            }
        }
        log.info(
            "uploading clips",
            [
                ("to", .string(settings.destination?.display ?? "")), ("waiting", .int(journal.backlogCount)),
                ("libcurl", .string(CurlTransfer.version)),
            ])
        condition.withLock {
            state.journal = journal
            state.storage = storage
        }
        if let problem = settings.problem {
            log.error(
                "uploads wait: a file they need cannot be read; clips are queued and uploaded once it is put right and the agent restarted",
                [("problem", .string(problem.description))])
            return
        }
        let thread = startThread("upload") { [self] in run() }
        condition.withLock { state.thread = thread }
    }

    /// A clip saved: a `queued` line for it, and the thread woken.
    private func queue(_ file: String, in storage: any ClipStorage) {
        append(UploadRecord(queued: file, at: timestamp()), in: storage)
    }

    /// Appends a line to the queue (synced) and takes it into the one in memory.
    private func append(_ record: UploadRecord, in storage: any ClipStorage) {
        do {
            try storage.append(UploadJournal.line(record), to: UploadJournal.name)
        } catch {
            log.error(
                "the upload queue cannot be written; the clip is uploaded only if the agent runs until then",
                [
                    ("file", .string(record.file ?? "")), ("path", .string(storage.path(UploadJournal.name))),
                    ("error", .string(error.description)),
                ])
        }
        condition.withLock {
            guard state.journal != nil, state.storage?.root == storage.root else { return }
            state.journal?.apply(record)
            condition.broadcast()
        }
    }

    public func finish() {
        let thread = condition.withLock {
            state.stopping = true
            condition.broadcast()
            return state.thread
        }
        store.transfer.stop.turnOn()
        if let thread, !thread.join(timeout: 5) {
            log.warning("an upload was still going when the agent stopped; it starts again next time")
        }
    }

    // MARK: The upload thread

    /// What the thread does next.
    private enum Work {
        case upload(String, any ClipStorage)
        /// Clips uploaded `delete_local_after` ago, to delete on the board.
        case deleteLocal([String])
    }

    private func run() {
        // Recording first: the thread's reads and its CPU (MD5, TLS) yield to the agent's.
        if vigil_thread_background() != 0 {
            log.debug("the upload thread's priority could not be lowered", [("errno", .int(errno))])
        }
        while let work = next() {
            switch work {
            case .upload(let file, let storage):
                upload(file, from: storage)
                condition.withLock { state.sending = nil }
            case .deleteLocal(let files): deleteLocal(files)
            }
        }
    }

    private func upload(_ file: String, from storage: any ClipStorage) {
        let result: Result<(UploadReceipt, Int64), UploadProblem>
        do throws(UploadProblem) {
            var receipt = try store.upload(file, from: storage)
            var sent = receipt.bytes
            if settings.snapshots {
                let picture = ClipNaming.snapshotPath(of: file)
                if picture != file, storage.exists(picture) {
                    let withIt = try store.upload(picture, from: storage)
                    receipt.seconds += withIt.seconds
                    sent += withIt.bytes
                }
            }
            result = .success((receipt, sent))
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let (receipt, sent)):
            uploaded(file, receipt, sent: sent, in: storage)
        case .failure(.stopped):
            return
        case .failure(.fileGone) where condition.withLock({ !(state.journal?.waits(file) ?? false) }):
            // Deleted on the board while it was sent (retention on a full disk, a person): the
            // queue has forgotten it already, and the error line said it.
            log.debug("upload given up: the clip was deleted on the board", [("file", .string(file))])
        case .failure(.fileGone(let why)):
            // The directory must be there for a missing file to be gone (not a disk unmounted).
            if (try? storage.read(UploadJournal.name)) != nil {
                log.warning(
                    "a queued clip is not on the board any more; not uploaded",
                    [("file", .string(file)), ("why", .string(why))])
                append(
                    UploadRecord(deleted: file, at: timestamp(), reason: "not on the board when its upload began"),
                    in: storage)
            } else {
                failed(file, why)
            }
        case .failure(let problem):
            failed(file, problem.description)
        }
    }

    /// Hands the clips to the agent's writer to delete (it never deletes the clip being written,
    /// logs each, and tells the sinks: the journal drops its line, the queue its file).
    private func deleteLocal(_ files: [String]) {
        for file in files {
            // Asked once in a run: when no agent takes it (stopping), the next run asks again.
            condition.withLock { _ = state.deleting.insert(file) }
            _ = control.deleteClip(file, by: "upload.delete_local_after, after its upload")
        }
    }

    /// The next thing to do, waiting for it (a clip queued, the time of the next try, a clip's
    /// time to be deleted on the board); nil when the agent stops.
    private func next() -> Work? {
        condition.withLock {
            while !state.stopping {
                var wait: Double?
                if let after = settings.deleteLocalAfter, let journal = state.journal {
                    let now = wallNow()
                    var due: [String] = []
                    for (file, record) in journal.uploads where !state.deleting.contains(file) {
                        let at = ClipRecord.date(fromTimestamp: record.at) ?? now
                        let left = at.addingTimeInterval(after).timeIntervalSince(now)
                        if left <= 0 { due.append(file) } else { wait = min(wait ?? left, left) }
                    }
                    if !due.isEmpty { return .deleteLocal(due.sorted()) }
                }
                let now = Condition.now()
                if let storage = state.storage, let file = state.journal?.backlog.first {
                    if now >= state.nextTry {
                        state.sending = file
                        store.transfer.abandon.turnOff()
                        return .upload(file, storage)
                    }
                    wait = min(wait ?? .infinity, state.nextTry - now)
                }
                if let wait { condition.wait(seconds: min(wait, 3600)) } else { condition.wait() }
            }
            return nil
        }
    }

    /// `sent`: the bytes of the clip and its picture.
    private func uploaded(_ file: String, _ receipt: UploadReceipt, sent: Int64, in storage: any ClipStorage) {
        let at = timestamp()
        let seconds = (receipt.seconds * 1000).rounded() / 1000
        append(
            UploadRecord(uploaded: file, at: at, url: receipt.url, bytes: UInt64(receipt.bytes), seconds: seconds),
            in: storage)
        let (recovered, waiting) = condition.withLock {
            defer {
                state.failures = 0
                state.lastProblem = nil
                state.backoff = State.firstBackoff
                state.nextTry = 0
                counts.uploaded += 1
                counts.bytes += sent
            }
            return (state.failures, state.journal?.backlogCount ?? 0)
        }
        if recovered > 0 { log.info("uploads work again", [("failed_tries", .int(recovered))]) }
        log.info(
            "clip uploaded",
            [
                ("file", .string(file)), ("url", .string(receipt.url)), ("bytes", .int(receipt.bytes)),
                ("seconds", .seconds(receipt.seconds)), ("waiting", .int(waiting)),
            ])
        // MQTT's `uploaded` event, `hooks.on_upload`.
        control.announce(
            .clipUploaded(
                ClipUploaded(
                    file: file, path: storage.path(file), camera: camera, url: receipt.url, bytes: receipt.bytes,
                    seconds: seconds, at: at, waiting: waiting)))
    }

    private func failed(_ file: String, _ problem: String) {
        let (delay, repeated, failures) = condition.withLock {
            let delay = state.backoff
            state.nextTry = Condition.now() + delay
            state.backoff = min(longestWait, delay * 2)
            state.failures += 1
            counts.failures += 1
            defer { state.lastProblem = problem }
            return (delay, state.lastProblem == problem, state.failures)
        }
        // Each new problem is an error line; the same one again only now and then.
        if !repeated || failures.isPowerOfTwo {
            log.error(
                "upload failed; the clip stays queued and is tried again",
                [
                    ("file", .string(file)), ("error", .string(problem)), ("retry_in", .seconds(delay)),
                    ("failed_tries", .int(failures)),
                ])
        }
    }

    private func timestamp() -> String { ClipRecord.timestamp(wallNow(), timeZone: timeZone) }
}

/// Uploads cannot be set up at all (libcurl fails to start).
public struct UploadSetupError: Error, CustomStringConvertible {
    public var description: String
}

extension Int {
    fileprivate var isPowerOfTwo: Bool { self > 0 && (self & (self - 1)) == 0 }
}
