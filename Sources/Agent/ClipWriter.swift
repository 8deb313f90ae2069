import FoundationEssentials
import Logging
import Media
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
    private var settings: WriterSettings
    private let log: Logger
    private let stats: Stats
    private let events: any EventSink
    private let monotonicNow: @Sendable () -> Timestamp
    private let wallNow: @Sendable () -> Date
    private var stream: StreamInfo?

    private struct OpenClip {
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
    private var open: OpenClip?
    /// Parts this writer added to an event (a clip given up when its storage directory went
    /// away goes on in memory as a new part): the pipeline's later parts of the event are
    /// numbered after them.
    private var partsAdded: (event: Int, count: Int)?
    /// Set while the clips held in memory are written (no clip given up then starts another).
    private var writingHeld = false
    /// Clips that ended while the storage directory was not there, in memory until it is back,
    /// oldest first, with how each ended and its picture.
    private var waiting: [(clip: OpenClip, closing: ClipClosing, picture: (SnapshotPicture, Int)?)] = []
    /// The open clip's picture, for its close.
    private var snapshot: (picture: SnapshotPicture, quality: Int)?
    /// `latest.jpg` could not be written (said once until it can again).
    private var liveFailing = false
    /// Set while `latest.jpg` waits for the disk to have room: whether that was said this time
    /// (at most hourly: `liveWaitingSaid`).
    private var liveWaiting: Bool?
    private var liveWaitingSaid: Timestamp?
    /// Set when a clip could not be opened or failed: its commands are skipped until the next open.
    private var skipping = false
    private var disk: DiskFullPolicy
    /// The storage directory, claimed and proven writable; nil while it is unavailable (not
    /// there yet, read-only, removed), which is retried as `storageOutage` says.
    private var claim: (any StorageClaim)?
    private var storageOutage = Retry(maximum: .init(seconds: 30))
    private var nextStorageTry: Timestamp?
    /// The wall clock's steps, watched at each sweep, and what retention decided of each
    /// clip's age across them.
    private var clockWatch = ClockWatch()
    private var retentionClock = RetentionClock()

    /// `memoryLimit`: the video kept in memory while the disk is full or not there, at most
    /// (`DiskFullPolicy.limit`).
    init(
        settings: WriterSettings, log: Logger, stats: Stats, events: any EventSink,
        monotonicNow: @escaping @Sendable () -> Timestamp, wallNow: @escaping @Sendable () -> Date,
        memoryLimit: Int = DiskFullPolicy.memoryLimit
    ) {
        self.settings = settings
        disk = DiskFullPolicy(limit: memoryLimit)
        self.log = log.with(("component", "writer"))
        self.stats = stats
        self.events = events
        self.monotonicNow = monotonicNow
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
    /// the clips an earlier run left open repaired, every clip on disk given its journal line
    /// (`EventsJournal.rebuild`) and retention applied.
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
        removeLeftovers()
        repairInterrupted()
        do {
            let rebuild = try EventsJournal(storage: settings.storage).rebuild(
                from: ClipStore(storage: settings.storage, naming: settings.naming))
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
                log.warning(
                    "events journal rebuilt from the clips on disk",
                    [
                        ("added", .int(rebuild.added.count)), ("damaged_dropped", .int(rebuild.droppedDamaged)),
                        ("duplicates_dropped", .int(rebuild.droppedDuplicates)),
                        ("marked_damaged", .int(rebuild.followed.count)),
                    ])
            }
        } catch {
            log.warning("events journal not rebuilt", [("error", .string(error.description))])
        }
        sweep()
        return .ready
    }

    /// True when the storage directory is up; tries it again when an outage's next try is due.
    private func storageIsReady() -> Bool {
        if nextStorageTry == nil { return true }
        let now = monotonicNow()
        if let due = nextStorageTry, now < due { return false }
        return bringUpOrWait()
    }

    /// Brings the storage up now; when it cannot be, the outage begins or goes on.
    private func bringUpOrWait() -> Bool {
        switch bringUpStorage() {
        case .ready:
            if nextStorageTry != nil {
                nextStorageTry = nil
                let back = storageOutage.succeeded(at: monotonicNow())
                log.info(
                    "storage directory back",
                    [
                        ("path", .string(settings.storage.root)), ("down", .seconds(back?.down.seconds ?? 0)),
                        ("attempts", .int(back?.tries ?? 1)),
                    ])
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
        let failure = storageOutage.failed(at: monotonicNow())
        nextStorageTry = monotonicNow() + failure.retryIn
        if failure.isFirst {
            log.warning(
                "storage directory unavailable; clips wait for it — is the disk mounted and writable?",
                [("path", .string(settings.storage.root)), ("error", .string(reason))])
        } else {
            log.debug(
                "storage directory still unavailable",
                [("error", .string(reason)), ("retry_in", .seconds(failure.retryIn.seconds))])
        }
    }

    func run(_ queue: WorkQueue<WriterItem>) {
        while true {
            // While the storage is down, wake up to try it again even when nothing comes.
            let wait = nextStorageTry.map { max(0.05, ($0 - monotonicNow()).seconds) }
            switch queue.pop(waitingAtMost: wait) {
            case .element(let item): handle(item)
            case .timedOut: _ = storageIsReady()
            case .closed:
                if open != nil {
                    log.warning("writer stopped with a clip open; finishing it")
                    closeClip(ClipClosing(reason: .finished, peakScore: 0))
                }
                lastTryForHeldClips()
                return
            }
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
        }
    }

    private func handle(_ command: ClipCommand) {
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
    private func syncNewFragments() {
        guard let clip = open, clip.writer.fragmentsWritten > clip.fragmentsSynced else { return }
        do { try clip.writer.synchronize() } catch {
            log.warning(
                "cannot sync clip", [("file", .string(clip.relativePath)), ("error", .string(error.description))])
            open?.fragmentsSynced = clip.writer.fragmentsWritten
            return
        }
        open?.fragmentsSynced = clip.writer.fragmentsWritten
        if disk.synced(at: monotonicNow()) != nil {
            log.info("disk space again; the clip goes on", [("file", .string(clip.relativePath))])
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
    private func openClip(_ info: ClipInfo, continuing: Bool = false) {
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
                    output: try storage.createMovie(relative), path: storage.path(relative), description: description)
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

    /// Opens a clip while the storage directory is not there: recorded in memory (the movie
    /// writer keeps the GOPs its held file cannot take, as on a full disk) and written when
    /// the directory is back — unless the video already waiting has reached the limit.
    private func openHeld(_ info: ClipInfo, stream: StreamInfo) {
        let trigger = ClipRecord.timestamp(stream.wallClock(info.trigger))
        guard case .keep = disk.hold(0, beside: heldBytes) else {
            log.error(
                "clip not recorded: the storage directory is unavailable and the video waiting for it fills the memory it may take",
                [
                    ("event", .int(info.event)), ("part", .int(info.part)), ("trigger", .string(trigger)),
                    ("path", .string(settings.storage.root)), ("memory_mb", .int(disk.limit >> 20)),
                ])
            stats.update { $0.clipErrors += 1 }
            skipping = true
            return
        }
        let started = stream.wallClock(info.start)
        let relative = settings.naming.relativePath(for: started)
        let file = HeldMovieFile(path: settings.storage.path(relative))
        do {
            let writer = try MovieWriter(
                output: file, path: file.path,
                description: MovieDescription(creationTime: started, video: stream.video, audio: stream.audio))
            open = OpenClip(
                writer: writer, info: info, relativePath: relative, storage: settings.storage, fragmentsSynced: 0,
                hasAudio: stream.audio != nil, held: file)
        } catch {
            log.error(
                "cannot start a clip; this event is not recorded",
                [("event", .int(info.event)), ("error", .string(error.description))])
            stats.update { $0.clipErrors += 1 }
            skipping = true
            return
        }
        stats.update { $0.recording = true }
        log.warning(
            "the storage directory is unavailable; the clip is kept in memory until it is back",
            [
                ("event", .int(info.event)), ("part", .int(info.part)), ("trigger", .string(trigger)),
                ("path", .string(settings.storage.root)), ("memory_bytes", .int(heldBytes)),
            ])
    }

    /// The video waiting in memory for the storage directory: the open clip's and the clips
    /// that ended meanwhile.
    private var heldBytes: Int {
        waiting.reduce(0) { $0 + $1.clip.writer.bufferedBytes }
            + (open.flatMap { $0.held == nil ? nil : $0.writer.bufferedBytes } ?? 0)
    }

    /// A GOP of a clip recorded in memory: kept while the memory allows; past the limit the
    /// clip ends there (said once: what is dropped), and its event's other GOPs are dropped.
    private func hold(_ gop: GOP, in clip: OpenClip) {
        if case .full(let say) = disk.hold(gop.byteCount, beside: heldBytes) {
            if say {
                log.warning(
                    "the video waiting for the storage directory fills the memory it may take; the rest of this event and the events until the directory is back are not recorded",
                    [
                        ("event", .int(clip.info.event)), ("part", .int(clip.info.part)),
                        ("kept_seconds", .seconds(((clip.end ?? clip.info.start) - clip.info.start).seconds)),
                        ("memory_mb", .int(disk.limit >> 20)), ("waiting", .int(waiting.count)),
                    ])
            }
            if clip.end == nil {
                // Nothing of it was kept: no clip.
                open = nil
                stats.update {
                    $0.clipErrors += 1
                    $0.recording = false
                }
            } else {
                closeClip(ClipClosing(reason: .finished, peakScore: clip.info.score))
            }
            skipping = true
            return
        }
        do { try clip.writer.append(gop) } catch {
            // Its file takes nothing yet: the writer keeps the GOP (any other error drops it).
            guard case .file = error else {
                log.warning(
                    "video not kept", [("event", .int(clip.info.event)), ("error", .string(error.description))])
                return
            }
        }
        open?.end = gop.end ?? gop.lastTime
    }

    /// The storage directory is back: the clips that waited in memory become files, oldest
    /// first — those that ended are finished, journaled and said saved; the open one goes on
    /// on the disk. A clip that cannot be made yet waits for the next time.
    private func writeHeldClips() {
        guard !waiting.isEmpty || open?.held != nil else { return }
        writingHeld = true
        defer { writingHeld = false }
        // The clip being recorded now, set aside while those that ended are written.
        let current = open, currentSnapshot = snapshot, currentSkipping = skipping
        open = nil
        while let (clip, closing, picture) = waiting.first {
            let outcome = materialize(clip)
            if case .notYet = outcome { break }
            waiting.removeFirst()
            guard case .written(let written) = outcome else { continue }
            open = written
            snapshot = picture
            closeClip(closing)
        }
        open = current
        snapshot = currentSnapshot
        skipping = currentSkipping
        guard waiting.isEmpty, let clip = open, clip.held != nil else { return }
        switch materialize(clip) {
        case .written(let written):
            open = written
            syncNewFragments()
        case .gaveUp:
            open = nil
            skipping = true
        case .notYet:
            break
        }
    }

    /// What became of a clip held in memory when its storage directory came back.
    private enum Materialized {
        /// Its file is on the disk with what waited (or as much as the disk took).
        case written(OpenClip)
        /// Given up as far as it reached the disk (a write error): said, and repaired.
        case gaveUp
        /// Its file cannot be made yet: it goes on waiting.
        case notYet
    }

    /// Makes a clip held in memory a file on the disk: a free name, the file created (retention
    /// first when the disk is full), what waited written into it as the disk-full policy says.
    private func materialize(_ clip: OpenClip) -> Materialized {
        guard let held = clip.held, let stream else { return .notYet }
        let storage = settings.storage
        let started = stream.wallClock(clip.info.start)
        var attempt = 0
        while true {
            attempt += 1
            let relative = freeName(for: started)
            do {
                held.attach(try storage.createMovie(relative))
            } catch {
                if error.isAlreadyThere && attempt < 100 { continue }
                if disk.createFailed(outOfSpace: error.isOutOfSpace, attempt: attempt) {
                    sweep(fullDisk: Int64(clip.writer.bufferedBytes) + ClipWriter.fullDiskHeadroom)
                    continue
                }
                log.warning(
                    "a clip kept in memory cannot be written yet; it waits",
                    [("event", .int(clip.info.event)), ("error", .string(error.description))])
                if !error.isOutOfSpace { storageUnavailable(error.description) }
                return .notYet
            }
            var written = clip
            written.relativePath = relative
            written.storage = storage
            written.held = nil
            log.info(
                "clip written from memory; the storage directory is back",
                [
                    ("file", .string(relative)), ("event", .int(clip.info.event)), ("part", .int(clip.info.part)),
                    ("bytes", .int(clip.writer.bufferedBytes)),
                ])
            events.handle(
                .clipStarted(
                    ClipStarted(
                        file: relative, path: storage.path(relative), camera: settings.camera, event: clip.info.event,
                        part: clip.info.part, trigger: stream.wallClock(clip.info.trigger),
                        preRoll: clip.info.part == 1 ? (clip.info.trigger - clip.info.start).seconds : 0,
                        score: clip.info.score, cause: clip.info.cause)))
            do { try clip.writer.flush() } catch {
                // A full disk, or the directory gone again: as for any clip being written.
                open = written
                recover(from: error, during: "writing video kept in memory")
                defer { open = nil }
                return open.map(Materialized.written) ?? .gaveUp
            }
            return .written(written)
        }
    }

    /// The agent stops with clips in memory: the storage directory is tried once more; what
    /// cannot be written is lost, each said as an error with its times.
    private func lastTryForHeldClips() {
        guard !waiting.isEmpty else { return }
        _ = bringUpOrWait()
        for (clip, _, _) in waiting {
            let start = stream.map { ClipRecord.timestamp($0.wallClock(clip.info.start)) } ?? ""
            let end = stream.map { ClipRecord.timestamp($0.wallClock(clip.end ?? clip.info.start)) } ?? ""
            log.error(
                "clip lost: the storage directory was still unavailable when the agent stopped",
                [
                    ("event", .int(clip.info.event)), ("part", .int(clip.info.part)), ("start", .string(start)),
                    ("end", .string(end)), ("path", .string(settings.storage.root)),
                ])
            stats.update { $0.clipErrors += 1 }
        }
        waiting = []
    }

    /// A name from the pattern that no file has yet (clips started in the same second get -1, -2, ...),
    /// nor a damaged clip moved aside under it.
    private func freeName(for date: Date) -> String {
        var suffix = 0
        while true {
            let relative = settings.naming.relativePath(for: date, suffix: suffix)
            // The last suffix the pattern check allowed for: if that is taken too, creating
            // it fails and the event is said to go unrecorded — nothing is overwritten.
            let taken =
                settings.storage.exists(relative) || settings.storage.exists(ClipNaming.damagedPath(of: relative))
            if !taken || suffix == ClipPathLimits.maximumCollisionSuffix { return relative }
            suffix += 1
        }
    }

    /// A write failed: what the disk-full policy says — retention and another try, the video
    /// kept in memory meanwhile, or the clip given up as far as it got (its complete
    /// fragments stay playable, and are repaired at once).
    /// `gop`: the GOP whose write failed, if any — where the event goes on when the directory
    /// itself is gone.
    private func recover(from error: MovieWriterError, during what: String, gop: GOP? = nil) {
        guard let clip = open else { return }
        let outOfSpace: Bool = if case .file(let f) = error { f.isOutOfSpace } else { false }
        var decision = disk.writeFailed(outOfSpace: outOfSpace, buffered: clip.writer.bufferedBytes, at: monotonicNow())
        switch decision {
        case .sweepAndRetry(let sayFull), .keepWaiting(let sayFull):
            if sayFull {
                log.warning(
                    "disk full while \(what); running retention, keeping the video in memory until there is room",
                    [("file", .string(clip.relativePath))])
            }
        case .abandon: break
        }
        if case .sweepAndRetry = decision {
            sweep(fullDisk: Int64(clip.writer.bufferedBytes) + ClipWriter.fullDiskHeadroom)
            do {
                try clip.writer.flush()
                return
            } catch {
                decision = disk.retryFailed(buffered: clip.writer.bufferedBytes)
            }
        }
        guard decision == .abandon else { return }
        log.error(
            "clip abandoned after a write error; what is on disk is kept",
            [("file", .string(clip.relativePath)), ("error", .string(error.description))])
        clip.writer.abandon()
        repairAbandoned(clip, peakScore: clip.info.score)
        stats.update {
            $0.clipErrors += 1
            $0.recording = false
        }
        open = nil
        skipping = true
        // The directory itself gone (a disk pulled, a card remounted read-only)? The event goes
        // on in memory, as a new part from the GOP that did not reach the disk, until the
        // directory is back.
        if let gop, !outOfSpace, !writingHeld, !bringUpOrWait() {
            var next = clip.info
            next.part += 1
            next.start = gop.start
            partsAdded = (clip.info.event, (partsAdded?.event == clip.info.event ? partsAdded?.count ?? 0 : 0) + 1)
            openClip(next, continuing: true)
            if let held = open { hold(gop, in: held) }
        }
    }

    private func closeClip(_ closing: ClipClosing) {
        guard var clip = open else {
            skipping = false
            return
        }
        open = nil
        clip.info.cause = closing.cause  // an outside trigger taken while it was open
        stats.update { $0.recording = false }
        if clip.held != nil {
            // No video kept (the memory was full): nothing to write.
            guard clip.end != nil else {
                snapshot = nil
                return
            }
            // Finished when the storage directory is back, with its picture.
            waiting.append((clip, closing, snapshot))
            snapshot = nil
            log.info(
                "clip kept in memory until the storage directory is back",
                [
                    ("event", .int(clip.info.event)), ("part", .int(clip.info.part)),
                    ("seconds", .seconds(((clip.end ?? clip.info.start) - clip.info.start).seconds)),
                    ("bytes", .int(clip.writer.bufferedBytes)), ("waiting", .int(waiting.count)),
                    ("memory_bytes", .int(heldBytes)),
                ])
            return
        }
        let summary: MovieSummary
        do {
            summary = try clip.writer.close()
        } catch {
            log.error(
                "clip could not be finished; repairing what is on disk",
                [("file", .string(clip.relativePath)), ("error", .string(error.description))])
            clip.writer.abandon()
            stats.update { $0.clipErrors += 1 }
            repairAbandoned(clip, peakScore: closing.peakScore)
            return
        }
        guard
            var record = record(
                of: clip, start: summary.start, duration: summary.duration, frames: summary.videoFrames,
                audioFrames: summary.audioFrames, bytes: summary.bytes, peakScore: closing.peakScore)
        else { return }
        // A file that has no name any more (its directory removed while it was written) holds
        // nothing anyone can find: the event is lost, and said so — never "clip saved".
        guard clip.storage.exists(clip.relativePath) else {
            log.error(
                "clip lost: its file was removed while it was written",
                [
                    ("file", .string(clip.relativePath)), ("start", .string(record.start)),
                    ("end", .string(record.end)),
                    ("trigger", .string(record.triggerTime ?? "")), ("path", .string(clip.storage.root)),
                ])
            stats.update { $0.clipErrors += 1 }
            // Was it the clip, or the whole directory (a disk pulled)? Checked now, so the
            // next event is recorded when the directory is fine.
            _ = bringUpOrWait()
            return
        }
        stats.update { $0.clipsWritten += 1 }
        let picture = snapshot.flatMap { writeSnapshot($0.picture, quality: $0.quality, of: clip) }
        snapshot = nil
        record.snapshot = picture?.file
        // The journal's line (a sink) goes in before the clip is said saved: a clip logged as
        // saved is in the journal even if the agent is killed the next moment.
        events.handle(
            .clipSaved(
                ClipSaved(
                    record: record, path: clip.storage.path(clip.relativePath), origin: .closed, storage: clip.storage,
                    snapshotJPEG: picture?.jpeg))
        )
        log.info(
            "clip saved",
            [
                ("file", .string(clip.relativePath)), ("duration", .seconds(summary.duration.seconds)),
                ("frames", .int(summary.videoFrames)),
                ("bytes", .int(summary.bytes)), ("peak_score", .fixed(closing.peakScore, 4)),
                ("part", .int(clip.info.part)),
                (
                    "reason",
                    .string(
                        closing.reason == .split
                            ? "max_clip" : (closing.reason == .eventEnded ? "post_roll over" : "stopped"))
                ),
            ])
        sweep()
    }

    /// Writes `<clip>.jpg` beside the clip (whole or not at all); nil, with a warning, when it
    /// cannot be made or written — the clip is saved either way.
    private func writeSnapshot(
        _ picture: SnapshotPicture, quality: Int, of clip: OpenClip
    ) -> (
        file: String, jpeg: [UInt8]
    )? {
        let file = ClipNaming.snapshotPath(of: clip.relativePath)
        let jpeg: [UInt8]
        do { jpeg = try JPEGEncoder.encode(picture, quality: quality) } catch {
            return withoutSnapshot(file, "\(error)")
        }
        var attempt = 0
        while true {
            attempt += 1
            do {
                try clip.storage.replace(file, with: jpeg)
                return (file, jpeg)
            } catch {
                // The picture gets what its clip got: retention frees the oldest clips for
                // it (never this one), then one more try.
                guard error.isOutOfSpace, attempt == 1 else { return withoutSnapshot(file, error.description) }
                sweep(fullDisk: Int64(jpeg.count) + ClipWriter.fullDiskHeadroom, protecting: clip.relativePath)
            }
        }
    }

    /// The clip is saved without its picture: said, and nil.
    private func withoutSnapshot(_ file: String, _ problem: String) -> (file: String, jpeg: [UInt8])? {
        log.warning("the clip is saved without its snapshot", [("file", .string(file)), ("error", .string(problem))])
        return nil
    }

    /// Replaces `latest.jpg` with the current picture (`snapshot.live_interval`), unless the
    /// disk is short of space: a live picture never takes space a clip needs
    /// (`DiskFullPolicy.livePictureFits`).
    private func writeLatest(_ picture: SnapshotPicture, quality: Int) {
        guard storageIsReady() else { return }
        let storage = settings.storage
        let jpeg: [UInt8]
        do { jpeg = try JPEGEncoder.encode(picture, quality: quality) } catch {
            liveFailed("\(error)")
            return
        }
        guard
            disk.livePictureFits(
                bytes: jpeg.count, free: try? storage.freeBytes(), minFree: settings.policy.minFree,
                headroom: ClipWriter.fullDiskHeadroom)
        else {
            liveWaitsForSpace()
            return
        }
        do { try storage.replace(ClipNaming.latestPicture, with: jpeg) } catch {
            if error.isOutOfSpace { liveWaitsForSpace() } else { liveFailed(error.description) }
            return
        }
        if liveFailing || liveWaiting == true { log.info("latest.jpg written again") }
        liveFailing = false
        liveWaiting = nil
    }

    /// `latest.jpg` could not be made or written: said once until it is written again.
    private func liveFailed(_ problem: String) {
        if !liveFailing {
            log.warning(
                "cannot write latest.jpg; trying again at the next interval",
                [("path", .string(settings.storage.path(ClipNaming.latestPicture))), ("error", .string(problem))])
        }
        liveFailing = true
    }

    /// `latest.jpg` is not written for want of space: said when this begins (at most hourly).
    private func liveWaitsForSpace() {
        guard liveWaiting == nil else { return }
        let now = monotonicNow()
        let say = liveWaitingSaid.map { now - $0 >= DiskFullPolicy.lowSpaceRepeat } ?? true
        liveWaiting = say
        guard say else { return }
        liveWaitingSaid = now
        log.warning(
            "latest.jpg is not replaced while the disk is short of space; clips come first",
            [
                ("path", .string(settings.storage.path(ClipNaming.latestPicture))),
                ("min_free_mb", .int(settings.policy.minFree >> 20)),
            ])
    }

    /// A clip given up after a write error becomes a normal movie of what reached the disk,
    /// and gets its journal line like any other.
    private func repairAbandoned(_ clip: OpenClip, peakScore: Double) {
        let storage = clip.storage, relative = clip.relativePath
        let report: MovieRepairReport
        do {
            guard
                let repaired = try MovieRepair.repair(
                    path: storage.path(relative), opening: { _ throws(FileError) in try storage.openMovie(relative) })
            else { return }
            report = repaired
        } catch  where error.kind == .nothingRecorded {
            // Given up before its first fragment reached the disk: a file no player opens. It
            // is ours (the writer made it), so it goes.
            do {
                try storage.delete(relative)
                log.info("removed a clip given up with no video in it", [("file", .string(relative))])
            } catch {
                log.warning(
                    "cannot remove a clip given up with no video in it",
                    [("file", .string(relative)), ("error", .string(error.description))])
            }
            return
        } catch  where error.kind == .notRepairable {
            moveAside(relative, in: storage, bytes: nil, problem: error.problem)
            return
        } catch {
            log.warning(
                "a clip given up cannot be repaired; it is left as it is",
                [("file", .string(relative)), ("error", .string(error.problem))])
            return
        }
        guard
            let record = record(
                of: clip, start: clip.info.start, duration: report.videoDuration, frames: report.videoFrames,
                audioFrames: report.audioFrames, bytes: report.bytes, peakScore: peakScore)
        else { return }
        log.info("clip repaired", [("file", .string(relative)), ("frames", .int(report.videoFrames))])
        events.handle(
            .clipSaved(ClipSaved(record: record, path: storage.path(relative), origin: .abandoned, storage: storage)))
    }

    /// The clip's line for the events journal.
    private func record(
        of clip: OpenClip, start first: Timestamp, duration: Timestamp.Duration, frames: Int, audioFrames: Int,
        bytes: UInt64, peakScore: Double
    ) -> ClipRecord? {
        guard let stream else { return nil }
        let info = clip.info
        let start = stream.wallClock(first)
        return ClipRecord(
            file: clip.relativePath, camera: settings.camera,
            start: ClipRecord.timestamp(start), end: ClipRecord.timestamp(start.addingTimeInterval(duration.seconds)),
            cause: info.cause, triggerTime: ClipRecord.timestamp(stream.wallClock(info.trigger)),
            triggerSourceSeconds: (info.trigger - stream.firstFrame).seconds.rounded(toPlaces: 3),
            preRollSeconds: info.part == 1 ? (info.trigger - info.start).seconds.rounded(toPlaces: 3) : 0,
            durationSeconds: duration.seconds.rounded(toPlaces: 3),
            frames: frames, audioFrames: audioFrames, bytes: bytes,
            peakScore: peakScore.rounded(toPlaces: 4), part: info.part)
    }

    /// Finishes the clips an earlier run left open (killed, or cut off by a power failure):
    /// each becomes a normal movie with a journal line marked repaired; one killed before its
    /// first fragment holds no video and is removed.
    private func repairInterrupted() {
        let storage = settings.storage
        let store = ClipStore(storage: storage, naming: settings.naming)
        guard let clips = try? store.clips() else { return }
        // A clip moved aside as damaged is never tried again.
        for clip in clips where !ClipNaming.isDamaged(clip.relativePath) {
            let relative = clip.relativePath
            do {
                // Nil for a complete clip: repair looks before it touches anything.
                guard
                    let report = try MovieRepair.repair(
                        path: storage.path(relative),
                        opening: { _ throws(FileError) in
                            try storage.openMovie(relative)
                        })
                else { continue }
                log.info(
                    "repaired an interrupted clip",
                    [
                        ("file", .string(relative)), ("fragments", .int(report.fragments)),
                        ("frames", .int(report.videoFrames)), ("cut_bytes", .int(report.discardedBytes)),
                    ]
                        + (report.dropReason.map {
                            [("dropped_fragments", .int(report.droppedFragments)), ("why", .string($0))]
                        } ?? []))
                // Its journal line was never written: what the file says goes in, marked as
                // repaired (the trigger and score died with the process that knew them).
                let record = ClipRecord(
                    file: relative, camera: settings.camera,
                    start: ClipRecord.timestamp(report.created),
                    end: ClipRecord.timestamp(report.created.addingTimeInterval(report.videoDuration.seconds)),
                    cause: nil, triggerTime: nil, triggerSourceSeconds: nil, preRollSeconds: nil,
                    durationSeconds: report.videoDuration.seconds.rounded(toPlaces: 3), frames: report.videoFrames,
                    audioFrames: report.audioFrames, bytes: report.bytes, peakScore: nil, part: nil, repaired: true)
                events.handle(
                    .clipSaved(
                        ClipSaved(
                            record: record, path: storage.path(relative), origin: .repairedAtStart, storage: storage)))
            } catch  where error.kind == .nothingRecorded {
                // Killed between creating the file and its first fragment: no video, nothing
                // a player could open. It is ours (its name is), so it goes.
                do {
                    try store.delete(clip)
                    log.info(
                        "removed an interrupted clip with no video in it",
                        [("file", .string(relative)), ("bytes", .int(clip.size))])
                } catch {
                    log.warning(
                        "cannot remove an interrupted clip with no video in it",
                        [("file", .string(relative)), ("error", .string(error.description))])
                }
            } catch  where error.kind == .inUse {
                log.warning(
                    "a clip is being written by another process; it is left as it is", [("file", .string(relative))])
            } catch  where error.kind == .notRepairable {
                moveAside(relative, in: storage, bytes: clip.size, problem: error.problem)
            } catch {
                log.warning(
                    "cannot repair a clip; it is left as it is",
                    [("file", .string(relative)), ("error", .string(error.problem))])
            }
        }
    }

    /// A clip repair cannot read (no player opens it: a power cut and the fsck after it cut
    /// its start away) is moved aside as `NAME.mov.damaged` in its directory: its bytes kept,
    /// out of players' way, said once — the start that moves it — and never repaired again.
    /// Retention counts it and deletes it like a clip; the journal's rebuild makes its line
    /// follow it (or writes one marked damaged).
    private func moveAside(_ relative: String, in storage: any ClipStorage, bytes: Int64?, problem: String) {
        let damaged = ClipNaming.damagedPath(of: relative)
        do {
            try storage.rename(relative, to: damaged)
            log.warning(
                "a clip no player can open was moved aside; its bytes are kept",
                [("file", .string(relative)), ("moved_to", .string(damaged))]
                    + (bytes.map { [("bytes", .int($0))] } ?? []) + [("error", .string(problem))])
        } catch {
            log.warning(
                "cannot repair a clip; it is left as it is",
                [("file", .string(relative)), ("error", .string(problem)), ("move_error", .string(error.description))])
        }
    }

    /// Removes what writes a kill interrupted left (`ClipStore.leftovers`: the new contents of
    /// a picture, `latest.jpg` or the journal, never renamed over it), each said once.
    private func removeLeftovers() {
        let storage = settings.storage
        guard let leftovers = try? ClipStore(storage: storage, naming: settings.naming).leftovers() else { return }
        for file in leftovers {
            do {
                try storage.delete(file.relativePath)
                log.info(
                    "removed a file an interrupted write left",
                    [("file", .string(file.relativePath)), ("bytes", .int(file.size))])
            } catch {
                log.warning(
                    "cannot remove a file an interrupted write left",
                    [("file", .string(file.relativePath)), ("error", .string(error.description))])
            }
        }
    }

    /// Retention: deletes what the policy says (never the open clip), logs each deletion.
    /// Room asked of retention when the disk is full, beyond the video waiting to be written.
    static let fullDiskHeadroom: Int64 = 1 << 20

    /// Retention: deletes what the policy says (never the open clip, never the newest saved),
    /// logs each deletion. `fullDisk` is the room a write that found the disk full needs.
    func sweep(fullDisk need: Int64? = nil, protecting: String? = nil) {
        let storage = settings.storage
        let store = ClipStore(storage: storage, naming: settings.naming)
        let protected = Set([open?.relativePath, protecting].compactMap { $0 })
        let now = wallNow()
        if let step = clockWatch.look(wall: now, monotonic: monotonicNow()) {
            retentionClock.stepped(step)
            log.info(
                "the wall clock stepped forward; the clips before the step keep the age they had",
                [("seconds", .seconds(step.seconds))])
        }
        let result = store.sweep(
            settings.policy, now: now, protected: protected, fullDisk: need, clock: retentionClock)
        retentionClock = result.clock
        if result.stamped > 0 {
            log.info(
                "clips dated by a wrong clock are aged from when it was right", [("clips", .int(result.stamped))])
        }
        for d in result.deleted {
            log.info(
                "clip deleted",
                [
                    ("file", .string(d.clip.relativePath)), ("bytes", .int(d.clip.totalSize)),
                    ("reason", .string(d.reason.description)),
                ])
        }
        for e in result.errors { log.warning("retention problem", [("error", .string(e.description))]) }
        if !result.deleted.isEmpty {
            events.handle(.clipsDeleted(ClipsDeleted(deletions: result.deleted, storage: storage)))
        }
        guard let free = result.freeBytes else { return }
        stats.update { $0.diskFreeBytes = free }
        switch disk.measured(
            free: free, minFree: settings.policy.minFree, shortfall: result.shortfall, at: monotonicNow())
        {
        case .low(let shortfall)?:
            log.warning(
                "disk space low and deleting clips would not make it up; the clips are kept — free space on this file system or lower storage.min_free_mb",
                [
                    ("path", .string(storage.root)), ("free_mb", .int(free >> 20)),
                    ("min_free_mb", .int(settings.policy.minFree >> 20)),
                    ("short_mb", .int((shortfall + (1 << 20) - 1) >> 20)),
                ])
        case .recovered?:
            log.info("disk space above min_free_mb again", [("free_mb", .int(free >> 20))])
        case nil:
            break
        }
    }
}
