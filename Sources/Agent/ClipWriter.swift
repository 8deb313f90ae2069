import FoundationEssentials
import Logging
import Media
import QuickTime
import Recorder

/// What the clip writer needs to know about the stream, sent once the encoder exists.
struct StreamInfo: Sendable {
    var video: VideoTrackFormat
    var audio: AudioTrackFormat?
    /// Capture time of the source's first frame, and the wall clock then.
    var firstFrame: Timestamp
    var wallAtFirstFrame: Date

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
    }
    private var open: OpenClip?
    /// Set when a clip could not be opened or failed: its commands are skipped until the next open.
    private var skipping = false
    private var disk = DiskFullPolicy()

    init(
        settings: WriterSettings, log: Logger, stats: Stats, events: any EventSink,
        monotonicNow: @escaping @Sendable () -> Timestamp, wallNow: @escaping @Sendable () -> Date
    ) {
        self.settings = settings
        self.log = log.with(("component", "writer"))
        self.stats = stats
        self.events = events
        self.monotonicNow = monotonicNow
        self.wallNow = wallNow
    }

    /// Before recording: finishes the clips an earlier run left open, then applies retention.
    func prepare() {
        repairInterrupted()
        sweep()
    }

    func run(_ queue: WorkQueue<WriterItem>) {
        while let item = queue.pop() { handle(item) }
        if open != nil {
            log.warning("writer stopped with a clip open; finishing it")
            closeClip(ClipClosing(reason: .finished, peakScore: 0))
        }
    }

    func handle(_ item: WriterItem) {
        switch item {
        case .stream(let info): stream = info
        case .reload(let new): settings = new
        case .housekeeping: sweep()
        case .clip(let command): handle(command)
        }
    }

    private func handle(_ command: ClipCommand) {
        switch command {
        case .open(let info): openClip(info)
        case .video(let gop):
            guard let clip = open, !skipping else { return }
            do { try clip.writer.append(gop) } catch { recover(from: error, during: "writing video") }
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

    private func openClip(_ info: ClipInfo) {
        if open != nil {
            log.warning("a clip opened while another was open; finishing the first")
            closeClip(ClipClosing(reason: .finished, peakScore: 0))
        }
        skipping = false
        guard let stream else {
            log.error("clip not started: the stream is not described yet")
            skipping = true
            return
        }
        let started = stream.wallClock(info.start)
        let trigger = stream.wallClock(info.trigger)
        let storage = settings.storage
        let description = MovieDescription(creationTime: started, video: stream.video, audio: stream.audio)
        var attempt = 0
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
                    ])
                events.handle(
                    .clipStarted(
                        ClipStarted(
                            file: relative, path: storage.path(relative), camera: settings.camera, event: info.event,
                            part: info.part, trigger: trigger, preRoll: preRoll, score: info.score)))
                return
            } catch let error as FileError {
                problem = (error.description, error.isOutOfSpace)
            } catch {
                problem = ("\(error)", false)
            }
            if disk.createFailed(outOfSpace: problem.outOfSpace, attempt: attempt) {
                log.warning("no space for a new clip; running retention", [("file", .string(relative))])
                sweep()
                continue
            }
            log.error(
                "cannot start a clip; this event is not recorded",
                [("file", .string(relative)), ("error", .string(problem.reason))])
            stats.update { $0.clipErrors += 1 }
            skipping = true
            return
        }
    }

    /// A name from the pattern that no file has yet (clips started in the same second get -1, -2, ...).
    private func freeName(for date: Date) -> String {
        var suffix = 0
        while true {
            let relative = settings.naming.relativePath(for: date, suffix: suffix)
            if !settings.storage.exists(relative) || suffix > 1000 { return relative }
            suffix += 1
        }
    }

    /// A write failed: what the disk-full policy says — retention and another try, the video
    /// kept in memory meanwhile, or the clip given up as far as it got (its complete
    /// fragments stay playable, and are repaired at once).
    private func recover(from error: MovieWriterError, during what: String) {
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
            sweep()
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
    }

    private func closeClip(_ closing: ClipClosing) {
        guard let clip = open else {
            skipping = false
            return
        }
        open = nil
        stats.update { $0.recording = false }
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
            let record = record(
                of: clip, start: summary.start, duration: summary.duration, frames: summary.videoFrames,
                audioFrames: summary.audioFrames, bytes: summary.bytes, peakScore: closing.peakScore)
        else { return }
        stats.update { $0.clipsWritten += 1 }
        // The journal's line (a sink) goes in before the clip is said saved: a clip logged as
        // saved is in the journal even if the agent is killed the next moment.
        events.handle(
            .clipSaved(
                ClipSaved(
                    record: record, path: clip.storage.path(clip.relativePath), origin: .closed, storage: clip.storage))
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

    /// A clip given up after a write error becomes a normal movie of what reached the disk,
    /// and gets its journal line like any other.
    private func repairAbandoned(_ clip: OpenClip, peakScore: Double) {
        let storage = clip.storage, relative = clip.relativePath
        guard
            let report = try? MovieRepair.repair(
                path: storage.path(relative), opening: { _ throws(FileError) in try storage.openMovie(relative) }),
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
            trigger: ClipRecord.timestamp(stream.wallClock(info.trigger)),
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
        for clip in clips {
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
                    ])
                // Its journal line was never written: what the file says goes in, marked as
                // repaired (the trigger and score died with the process that knew them).
                let record = ClipRecord(
                    file: relative, camera: settings.camera,
                    start: ClipRecord.timestamp(report.created),
                    end: ClipRecord.timestamp(report.created.addingTimeInterval(report.videoDuration.seconds)),
                    trigger: nil, triggerSourceSeconds: nil, preRollSeconds: nil,
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
            } catch {
                log.warning(
                    "cannot repair a clip; it is left as it is",
                    [("file", .string(relative)), ("error", .string(error.problem))])
            }
        }
    }

    /// Retention: deletes what the policy says (never the open clip), logs each deletion.
    func sweep() {
        let storage = settings.storage
        let store = ClipStore(storage: storage, naming: settings.naming)
        let protected: Set<String> = open.map { [$0.relativePath] } ?? []
        let (deleted, errors) = store.sweep(settings.policy, now: wallNow(), protected: protected)
        for d in deleted {
            log.info(
                "clip deleted",
                [
                    ("file", .string(d.clip.relativePath)), ("bytes", .int(d.clip.size)),
                    ("reason", .string(d.reason.description)),
                ])
        }
        for e in errors { log.warning("retention problem", [("error", .string(e.description))]) }
        if !deleted.isEmpty { events.handle(.clipsDeleted(ClipsDeleted(deletions: deleted, storage: storage))) }
        guard let free = try? storage.freeBytes() else { return }
        stats.update { $0.diskFreeBytes = free }
        switch disk.measured(
            free: free, minFree: settings.policy.minFree, deletedOrFailed: !deleted.isEmpty || !errors.isEmpty)
        {
        case .low?:
            log.warning(
                "disk space low and no clip left to delete",
                [("free_mb", .int(free >> 20)), ("min_free_mb", .int(settings.policy.minFree >> 20))])
        case .recovered?:
            log.info("disk space above min_free_mb again", [("free_mb", .int(free >> 20))])
        case nil:
            break
        }
    }
}
