import Configuration
import FoundationEssentials
import Logging
import Media
import POSIX
import QuickTime
import Recorder
import Snapshot

/// What the clip writer needs to know about the stream, sent once the encoder exists.
struct StreamInfo: Sendable {
    var video: VideoTrackFormat
    var audio: AudioTrackFormat?
    /// Capture time of the source's first frame, and the wall clock then.
    var firstFrame: Timestamp
    var wallAtFirstFrame: Date
    /// True when capture times are on the monotonic clock (a camera, the synthetic scene):
    /// the mapping then follows the wall clock when it is stepped.
    var onMonotonicClock = false

    func wallClock(_ t: Timestamp) -> Date {
        wallAtFirstFrame.addingTimeInterval((t - firstFrame).seconds)
    }
}

/// Where clips go and how they are named and kept. A reload replaces it at once for what
/// comes next; the clip being written stays in the directory, under the name, it began with.
struct WriterSettings: Sendable {
    var storage: any ClipStorage
    var naming: ClipNaming
    var policy: RetentionPolicy
    var camera: String
    /// Clips wait to be uploaded (`upload.url` is set): retention keeps those the upload queue
    /// says wait (as the upload sink holds it: `UploadStatus.uploadQueue`), unless the disk is full.
    var holdsUploads = false

    /// What `s` says, for clips in `storage`.
    init(_ s: Settings, storage: any ClipStorage) {
        self.init(
            storage: storage, naming: ClipNaming(pattern: s.storage.filePattern, camera: s.camera.name),
            policy: RetentionPolicy(
                maxAgeDays: s.storage.maxAgeDays, maxSize: s.storage.maxSize, minFree: s.storage.minFree),
            camera: s.camera.name)
        holdsUploads = s.upload.enabled
    }

    init(storage: any ClipStorage, naming: ClipNaming, policy: RetentionPolicy, camera: String) {
        self.storage = storage
        self.naming = naming
        self.policy = policy
        self.camera = camera
    }
}

/// What the pipeline (and the housekeeping thread) hands the writer, in order.
enum WriterItem: Sendable {
    case stream(StreamInfo)
    case clip(ClipCommand)
    /// Run retention and measure free space.
    case housekeeping
    case reload(WriterSettings)
    /// The open clip's picture (its peak frame), written beside it as JPEG when it closes.
    case snapshot(SnapshotPicture, quality: Int)
    /// The current picture, for `latest.jpg`.
    case livePicture(SnapshotPicture, quality: Int)
    /// Delete a saved clip (and its picture), as someone asked (`AgentControl.deleteClip`).
    case delete(String, by: String)
}

/// The writer thread: turns clip commands into movie files, syncs each fragment to disk,
/// sends the clip events (the journal and the hooks are sinks), runs retention and repairs
/// what an earlier run left unfinished. Everything that can block on the disk happens here,
/// never on the capture or encoding path. Every file effect goes through `ClipStorage`, and
/// what to do when the disk is full is `DiskFullPolicy`'s to say.
///
/// `@unchecked Sendable`: start-up calls `prepare()` before the writer thread starts; from then
/// on only the writer thread uses it.
final class ClipWriter: @unchecked Sendable {
    var settings: WriterSettings
    let log: Logger
    let stats: Stats
    let events: any EventSink
    /// The upload queue, asked what waits (retention); nil without uploads.
    let uploads: (any UploadStatus)?
    /// What the writer reads the time from (the agent's `Clock`), and the wall clock.
    let clock: Clock
    let wallNow: @Sendable () -> Date
    var stream: StreamInfo?
    /// The storage directory's clip catalogue, while the directory is up (nil when it could
    /// not be opened: said, and the clips are still recorded).
    var catalogue: (any ClipCatalogue)?

    struct OpenClip {
        var writer: MovieWriter
        var info: ClipInfo
        var relativePath: String
        /// The directory the clip is in (a reload may change the settings' since).
        var storage: any ClipStorage
        var fragmentsSynced: Int
        /// False when the clip was opened before sound was known: it has no sound track.
        var hasAudio: Bool
        /// Set while the clip is recorded in memory, its storage directory not there: its
        /// file, which takes nothing until the directory is back. `relativePath` is then the
        /// name it is meant to have.
        var held: HeldMovieFile?
        /// Its first frame's capture time and just after its last GOP.
        var end: Timestamp?
    }
    var open: OpenClip?
    /// Parts this writer added to an event (a clip given up when its storage directory went
    /// away goes on in memory as a new part): the pipeline's later parts of the event are
    /// numbered after them.
    var partsAdded: (event: Int, count: Int)?
    /// Set while the clips held in memory are written (no clip given up then starts another).
    var writingHeld = false
    /// Clips that ended while the storage directory was not there, in memory until it is back,
    /// oldest first, with how each ended and its picture.
    var waiting: [(clip: OpenClip, closing: ClipClosing, picture: (SnapshotPicture, Int)?)] = []
    /// The open clip's picture, for its close.
    var snapshot: (picture: SnapshotPicture, quality: Int)?
    /// `latest.jpg` could not be written (said once until it can again).
    var liveFailing = false
    /// Set while `latest.jpg` waits for the disk to have room: whether that was said this time
    /// (at most hourly: `liveWaitingSaid`).
    var liveWaiting: Bool?
    var liveWaitingSaid: Timestamp?
    /// Set when a clip could not be opened or failed: its commands are skipped until the next open.
    var skipping = false
    var disk: DiskFullPolicy
    /// The storage directory, claimed and proven writable; nil while it is unavailable (not
    /// there yet, read-only, removed), which is retried as `storageOutage` says.
    var claim: (any StorageClaim)?
    var storageOutage = Retry(maximum: .init(seconds: 30))
    var nextStorageTry: Timestamp?
    /// The wall clock's steps, watched at each sweep, and what retention decided of each
    /// clip's age across them.
    var clockWatch = ClockWatch()
    var retentionClock = RetentionClock()
    /// The last sweep deleted a batch and the rules would delete more: the next goes as soon
    /// as the writer has nothing waiting.
    var sweepAgain = false
    /// Clips saved while the disk was too full for their catalogue entries: entered by the next
    /// sweep that finds room (`enterUnentered`), or at the next start.
    var unentered: [CatalogueEntry] = []
    /// At most this many are kept waiting (the rest are found again at the next start).
    static let unenteredLimit = 1000

    /// `memoryLimit`: the video kept in memory while the disk is full or not there, at most
    /// (`DiskFullPolicy.limit`).
    init(
        settings: WriterSettings, log: Logger, stats: Stats, events: any EventSink,
        uploads: (any UploadStatus)? = nil,
        clock: Clock, wallNow: @escaping @Sendable () -> Date,
        memoryLimit: Int = DiskFullPolicy.memoryLimit
    ) {
        self.settings = settings
        disk = DiskFullPolicy(limit: memoryLimit)
        self.log = log.with(("component", "writer"))
        self.stats = stats
        self.events = events
        self.uploads = uploads
        self.clock = clock
        self.wallNow = wallNow
    }

    /// What bringing the storage directory up came to.
    enum StorageState: Equatable {
        /// Claimed, writable, repaired and swept: clips can be recorded.
        case ready
        /// Not there yet (its parent missing: a USB disk not mounted), read-only, or failing:
        /// waited for.
        case unavailable(String)
        /// It cannot be made (permission denied, a file in the way): a person must act.
        case cannotCreate(String)
        /// Its lock cannot be taken (permission denied, something not a file in its place): a
        /// person must act.
        case cannotClaim(ClaimError)
        /// Another agent records into it.
        case claimedElsewhere(ClaimError)
    }

    /// Brings the storage directory up: made when missing (its parent must exist), claimed
    /// (one agent per directory), proven writable (a test file made, synced, removed), then
    /// its catalogue opened; then the clips an earlier run left open repaired — those the
    /// catalogue says were being recorded, or every clip when the catalogue does not list the
    /// clips on disk yet (then every clip on disk is given its journal line,
    /// `EventsJournal.rebuild`, and an entry) — and retention applied.
    func bringUpStorage() -> StorageState {
        let storage = settings.storage
        do { try storage.createRoot() } catch {
            return error.isMissing || error.isOutOfSpace || error.isReadOnly
                ? .unavailable(error.description) : .cannotCreate(error.description)
        }
        if claim == nil {
            // Only a lock another agent holds is another agent: a lock file that cannot be
            // made on a read-only card is storage to wait for.
            do { claim = try storage.claim() } catch {
                switch error.cause {
                case .held: return .claimedElsewhere(error)
                case .unavailable: return .unavailable(error.description)
                case .refused: return .cannotClaim(error)
                }
            }
        }
        do { try storage.probe() } catch { return .unavailable(error.description) }
        openCatalogue()
        // A catalogue that lists the clips on disk is trusted: only the clips it says were
        // being recorded are looked at. Otherwise (a new one, none) every clip is.
        if let catalogue, (try? catalogue.isSynchronized()) == true {
            removeLeftovers(catalogue)
            if !repairRecording(catalogue) || !journalIsWhole(catalogue) { rebuildJournalAndCatalogue() }
        } else {
            removeLeftovers()
            repairInterrupted()
            rebuildJournalAndCatalogue()
        }
        sweep()
        events.handle(.storageReady(settings.storage))
        return .ready
    }

    /// Makes the journal whole from the clips on disk (`EventsJournal.rebuild`: the whole
    /// journal read, every clip looked at) and the catalogue list what it lists.
    func rebuildJournalAndCatalogue() {
        var rebuilt: JournalRebuild?
        do {
            let rebuild = try EventsJournal(storage: settings.storage).rebuild(
                from: ClipStore(storage: settings.storage, naming: settings.naming))
            rebuilt = rebuild
            if let aside = rebuild.setAside {
                // Clips are still the record: the journal starts again beside what was there.
                log.error(
                    "the events journal is not a regular file; moved aside, a new journal is written from the clips on disk",
                    [
                        ("path", .string(settings.storage.path(EventsJournal.name))),
                        ("moved_to", .string(aside.movedTo.map(settings.storage.path) ?? "")),
                        ("error", .string(aside.problem)),
                    ])
            }
            if rebuild.written {
                notify(
                    .journalRebuilt(
                        added: rebuild.added.count, damagedDropped: rebuild.droppedDamaged,
                        duplicatesDropped: rebuild.droppedDuplicates, markedDamaged: rebuild.followed.count))
            }
        } catch {
            log.warning("events journal not rebuilt", [("error", .string(error.description))])
        }
        synchronizeCatalogue(with: rebuilt)
    }

    /// True when the storage directory is up; tries it again when an outage's next try is due.
    func storageIsReady() -> Bool {
        if nextStorageTry == nil { return true }
        let now = clock.now()
        if let due = nextStorageTry, now < due { return false }
        return bringUpOrWait()
    }

    /// Brings the storage up now; when it cannot be, the outage begins or goes on.
    func bringUpOrWait() -> Bool {
        switch bringUpStorage() {
        case .ready:
            if nextStorageTry != nil {
                nextStorageTry = nil
                let back = storageOutage.succeeded(at: clock.now())
                notify(
                    .storageBack(
                        path: settings.storage.root, down: back?.down.seconds ?? 0, attempts: back?.tries ?? 1))
                disk.storageBack()
            }
            writeHeldClips()
            return true
        case .unavailable(let reason), .cannotCreate(let reason):
            storageUnavailable(reason)
        case .claimedElsewhere(let error), .cannotClaim(let error):
            storageUnavailable(error.description)
        }
        return false
    }

    /// The storage directory cannot be used now: said once per outage, tried again as `Retry` says.
    /// Its claim is let go: the directory may come back as another mount, to be claimed again.
    func storageUnavailable(_ reason: String) {
        claim = nil
        catalogue = nil
        let failure = storageOutage.failed(at: clock.now())
        nextStorageTry = clock.now() + failure.retryIn
        if failure.isFirst {
            notify(.storageUnavailable(path: settings.storage.root, error: reason))
        } else {
            log.debug(
                "storage directory still unavailable",
                [("error", .string(reason)), ("retry_in", .seconds(failure.retryIn.seconds))])
        }
    }

    /// Logs `notice` and hands it to the sinks.
    func notify(_ notice: Notice) {
        notice.log(to: log)
        events.handle(.notice(notice))
    }

    /// The writer thread: items from the queue into `step`, a `.tick` when the storage is due
    /// to be tried again, `.end` once the queue is closed and drained.
    func run(_ queue: WorkQueue<WriterItem>) {
        while true {
            switch queue.pop(waitingAtMost: nextTry) {
            case .element(let item): step(.item(item))
            case .timedOut: step(.tick)
            case .closed:
                step(.end)
                return
            }
        }
    }

    /// How long the writer may wait for its next item: while the storage is down, until it is
    /// due to be tried again, even when nothing comes; nil: for ever.
    var nextTry: Double? {
        if sweepAgain && nextStorageTry == nil { return 0 }
        return nextStorageTry.map { max(0.05, ($0 - clock.now()).seconds) }
    }

    /// When a `.tick` has something to do (the storage's next try, retention's next batch);
    /// nil: nothing is due.
    var due: Timestamp? { sweepAgain && nextStorageTry == nil ? clock.now() : nextStorageTry }

    /// What the writer takes, one at a time (`step`).
    enum Input {
        /// From the pipeline (or housekeeping).
        case item(WriterItem)
        /// Time passed with nothing to do: try the storage again if it is due (`nextTry`).
        case tick
        /// Nothing more will come: the open clip is finished, held clips get a last try.
        case end
    }

    /// One input: its file effects through `ClipStorage`, its events to the sinks.
    func step(_ input: Input) {
        switch input {
        case .item(let item): handle(item)
        case .tick:
            if sweepAgain && nextStorageTry == nil {
                sweepAgain = false
                sweep()
            } else {
                _ = storageIsReady()
            }
        case .end:
            if open != nil {
                log.warning("writer stopped with a clip open; finishing it")
                closeClip(ClipClosing(reason: .finished, peakScore: 0))
            }
            lastTryForHeldClips()
        }
    }

    func handle(_ item: WriterItem) {
        switch item {
        case .stream(let info): stream = info
        case .reload(let new): settings = new
        case .housekeeping:
            // Not while the directory is not there: retention would say so every minute.
            if nextStorageTry == nil { sweep() }
        case .clip(let command): handle(command)
        case .snapshot(let picture, let quality): snapshot = (picture, quality)
        case .livePicture(let picture, let quality): writeLatest(picture, quality: quality)
        case .delete(let file, let by): delete(file, by: by)
        }
    }

    func handle(_ command: ClipCommand) {
        switch command {
        case .open(var info):
            if let added = partsAdded, added.event == info.event { info.part += added.count }
            openClip(info)
        case .video(let gop):
            guard let clip = open, !skipping else { return }
            if clip.held != nil { return hold(gop, in: clip) }
            do { try clip.writer.append(gop) } catch { recover(from: error, during: "writing video", gop: gop) }
            syncNewFragments()
        case .audio(let chunk):
            guard let clip = open, !skipping, clip.hasAudio else { return }
            do { try clip.writer.appendAudio(chunk.data, time: chunk.time) } catch {
                log.warning(
                    "audio not written", [("file", .string(clip.relativePath)), ("error", .string(error.description))])
            }
        case .close(let closing):
            closeClip(closing)
        }
    }

    /// After each new fragment, sync: a power cut then loses at most the GOP being recorded.
    func syncNewFragments() {
        guard let clip = open, clip.writer.fragmentsWritten > clip.fragmentsSynced else { return }
        do { try clip.writer.synchronize() } catch {
            log.warning(
                "cannot sync clip", [("file", .string(clip.relativePath)), ("error", .string(error.description))])
            open?.fragmentsSynced = clip.writer.fragmentsWritten
            return
        }
        open?.fragmentsSynced = clip.writer.fragmentsWritten
        if disk.synced(at: clock.now()) != nil {
            notify(.diskSpaceAgain(file: clip.relativePath))
        }
        // What is durable now, and how long after the motion began (the benchmark's latency).
        log.debug(
            "fragment on disk",
            [
                ("file", .string(clip.relativePath)), ("part", .int(clip.info.part)),
                ("fragments", .int(clip.writer.fragmentsWritten)),
                ("frames", .int(clip.writer.framesWritten)),
                ("through", .seconds((clip.info.start + clip.writer.durationWritten - clip.info.trigger).seconds)),
                (
                    "since_trigger",
                    .seconds(stream.map { wallNow().timeIntervalSince($0.wallClock(clip.info.trigger)) } ?? 0)
                ),
            ])
    }

    /// Opens a clip: on the disk, or in memory while the storage directory is not there.
    /// `continuing`: the event's clip was given up when the directory went away, and it goes on
    /// in this new part (its picture, to come, is kept).
    func openClip(_ info: ClipInfo, continuing: Bool = false) {
        if open != nil {
            log.warning("a clip opened while another was open; finishing the first")
            closeClip(ClipClosing(reason: .finished, peakScore: 0))
        }
        skipping = false
        if !continuing { snapshot = nil }  // one left by a clip that was never saved
        guard let stream else {
            log.error("clip not started: the stream is not described yet")
            skipping = true
            return
        }
        guard storageIsReady() else { return openHeld(info, stream: stream) }
        let started = stream.wallClock(info.start)
        let trigger = stream.wallClock(info.trigger)
        let storage = settings.storage
        let description = MovieDescription(creationTime: started, video: stream.video, audio: stream.audio)
        var attempt = 0, collisions = 0
        while true {
            attempt += 1
            let relative = freeName(for: started)
            let problem: (reason: String, outOfSpace: Bool)
            do {
                let writer = try MovieWriter(
                    output: try createMovie(relative), path: storage.path(relative), description: description)
                open = OpenClip(
                    writer: writer, info: info, relativePath: relative, storage: storage, fragmentsSynced: 0,
                    hasAudio: stream.audio != nil)
                stats.update { $0.recording = true }
                let preRoll = info.part == 1 ? (info.trigger - info.start).seconds : 0
                log.info(
                    info.part == 1 ? "clip started" : "clip continues in a new part",
                    [
                        ("file", .string(relative)), ("event", .int(info.event)), ("part", .int(info.part)),
                        ("trigger", .string(ClipRecord.timestamp(trigger))), ("preroll", .seconds(preRoll)),
                        ("cause", .string(info.cause.rawValue)),
                    ])
                events.handle(
                    .clipStarted(
                        ClipStarted(
                            file: relative, path: storage.path(relative), camera: settings.camera, event: info.event,
                            part: info.part, trigger: trigger, preRoll: preRoll, score: info.score, cause: info.cause)))
                return
            } catch let error as FileError {
                // Someone made a file of that name since it was picked: take the next one.
                if error.isAlreadyThere && collisions < 100 {
                    collisions += 1
                    attempt -= 1
                    continue
                }
                problem = (error.description, error.isOutOfSpace)
            } catch {
                problem = ("\(error)", false)
            }
            if disk.createFailed(outOfSpace: problem.outOfSpace, attempt: attempt) {
                log.warning("no space for a new clip; running retention", [("file", .string(relative))])
                sweep(fullDisk: ClipWriter.fullDiskHeadroom)
                continue
            }
            // The directory itself gone (a disk pulled, remounted read-only)? Then the clip
            // waits in memory for it like any clip of the outage.
            if !problem.outOfSpace, !bringUpOrWait() { return openHeld(info, stream: stream) }
            log.error(
                "cannot start a clip; this event is not recorded",
                [("file", .string(relative)), ("error", .string(problem.reason))])
            stats.update { $0.clipErrors += 1 }
            skipping = true
            return
        }
    }
}
