import FoundationEssentials
import Logging
import Media
import QuickTime
import Recorder
import Storage

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

/// Storage-side settings; a reload replaces them from the next clip on.
struct StorageSettings: Sendable {
    var root: String
    var naming: ClipNaming
    var policy: RetentionPolicy
    var onEventStart: String?
    var onClipSaved: String?
}

enum WriterItem: Sendable {
    case stream(StreamInfo)
    case clip(ClipCommand)
    /// Run retention and measure free space.
    case housekeeping
    case storage(StorageSettings)
}

/// The writer thread: turns clip commands into movie files, syncs each fragment to disk,
/// writes the events journal, runs hooks and retention. Everything that can block on the
/// disk happens here, never on the capture or encoding path.
///
/// `@unchecked Sendable`: start-up calls `sweep()` before the writer thread starts; from then on
/// only the writer thread uses it.
final class ClipWriter: @unchecked Sendable {
    private var storage: StorageSettings
    private let camera: String
    private let log: Logger
    private let stats: Stats
    private let hooks: HookRunner
    private var stream: StreamInfo?

    private struct OpenClip {
        var writer: MovieWriter
        var info: ClipInfo
        var relativePath: String
        var fragmentsSynced: Int
        /// False when the clip was opened before sound was known: it has no sound track.
        var hasAudio: Bool
    }
    private var open: OpenClip?
    /// Set when a clip could not be opened or failed: its commands are skipped until the next open.
    private var skipping = false
    /// The disk is full: said once, retention is run at most every `fullDiskSweepInterval`
    /// while it lasts, and its end is said once.
    private var diskFull = false
    private var lastFullDiskSweep: Date?
    static let fullDiskSweepInterval = 1.0
    /// Free space is below `min_free_mb` with no clip left to delete (said once until it is not).
    private var lowSpaceWarned = false

    init(storage: StorageSettings, camera: String, log: Logger, stats: Stats, hooks: HookRunner) {
        self.storage = storage
        self.camera = camera
        self.log = log.with(("component", "writer"))
        self.stats = stats
        self.hooks = hooks
    }

    func run(_ queue: WorkQueue<WriterItem>) {
        while let item = queue.pop() {
            switch item {
            case .stream(let info): stream = info
            case .storage(let settings): storage = settings
            case .housekeeping: sweep()
            case .clip(let command): handle(command)
            }
        }
        if open != nil {
            log.warning("writer stopped with a clip open; finishing it")
            handle(.close(ClipClosing(reason: .finished, peakScore: 0)))
        }
    }

    private func handle(_ command: ClipCommand) {
        switch command {
        case .open(let info): openClip(info)
        case .video(let gop):
            guard let clip = open, !skipping else { return }
            do {
                try clip.writer.append(gop)
            } catch {
                recover(from: error, during: "writing video") { () throws(MovieWriterError) in try clip.writer.flush() }
            }
            syncNewFragments()
        case .audio(let chunk):
            guard let clip = open, !skipping, clip.hasAudio else { return }
            do { try clip.writer.appendAudio(chunk.data, time: chunk.time) } catch {
                log.warning("audio not written", [("file", .string(clip.relativePath)), ("error", .string(error.description))])
            }
        case .close(let closing):
            closeClip(closing)
        }
    }

    /// After each new fragment, sync: a power cut then loses at most the GOP being recorded.
    private func syncNewFragments() {
        guard let clip = open, clip.writer.fragmentsWritten > clip.fragmentsSynced else { return }
        do { try clip.writer.synchronize() } catch {
            log.warning("cannot sync clip", [("file", .string(clip.relativePath)), ("error", .string(error.description))])
            open?.fragmentsSynced = clip.writer.fragmentsWritten
            return
        }
        open?.fragmentsSynced = clip.writer.fragmentsWritten
        if diskFull {
            diskFull = false
            log.info("disk space again; the clip goes on", [("file", .string(clip.relativePath))])
        }
        // What is durable now, and how long after the motion began (the benchmark's latency).
        log.debug("fragment on disk", [
            ("file", .string(clip.relativePath)), ("part", .int(clip.info.part)), ("fragments", .int(clip.writer.fragmentsWritten)),
            ("frames", .int(clip.writer.framesWritten)),
            ("through", .seconds((clip.info.start + clip.writer.durationWritten - clip.info.trigger).seconds)),
            ("since_trigger", .seconds(stream.map { Date().timeIntervalSince($0.wallClock(clip.info.trigger)) } ?? 0)),
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
        var description = MovieDescription(creationTime: started, video: stream.video, audio: stream.audio)
        description.creationTime = started
        var attempt = 0
        while true {
            let (relative, absolute) = freeName(for: started)
            do {
                try FileManager.default.createDirectory(atPath: absolute.withoutLastPathComponent, withIntermediateDirectories: true)
                let writer = try MovieWriter(path: absolute, description: description)
                open = OpenClip(writer: writer, info: info, relativePath: relative, fragmentsSynced: 0, hasAudio: stream.audio != nil)
                stats.update { $0.recording = true }
                log.info(info.part == 1 ? "clip started" : "clip continues in a new part", [
                    ("file", .string(relative)), ("event", .int(info.event)), ("part", .int(info.part)),
                    ("trigger", .string(ClipRecord.timestamp(stream.wallClock(info.trigger)))),
                    ("preroll", .seconds(info.part == 1 ? (info.trigger - info.start).seconds : 0)),
                ])
                if info.part == 1, let program = storage.onEventStart {
                    hooks.run(program, event: "event_start", arguments: [absolute, camera, ClipRecord.timestamp(stream.wallClock(info.trigger))],
                              facts: [("file", absolute), ("camera", camera), ("trigger", ClipRecord.timestamp(stream.wallClock(info.trigger))),
                                      ("score", String(info.score)), ("part", String(info.part))])
                }
                return
            } catch {
                attempt += 1
                let outOfSpace = (error as? MovieWriterError).map { if case .file(let f) = $0 { f.isOutOfSpace } else { false } } ?? false
                if attempt == 1 && outOfSpace {
                    log.warning("no space for a new clip; running retention", [("file", .string(relative))])
                    sweep()
                    continue
                }
                let reason = (error as? MovieWriterError)?.description ?? describeFileError(error)
                log.error("cannot start a clip; this event is not recorded", [("file", .string(relative)), ("error", .string(reason))])
                stats.update { $0.clipErrors += 1 }
                skipping = true
                return
            }
        }
    }

    /// A name from the pattern that no file has yet (clips started in the same second get -1, -2, ...).
    private func freeName(for date: Date) -> (relative: String, absolute: String) {
        var suffix = 0
        while true {
            let relative = storage.naming.relativePath(for: date, suffix: suffix)
            let absolute = storage.root + "/" + relative
            if !FileManager.default.fileExists(atPath: absolute) || suffix > 1000 { return (relative, absolute) }
            suffix += 1
        }
    }

    /// On a full disk: runs retention (at most every `fullDiskSweepInterval`), then `retry`;
    /// the video waits in memory meanwhile, up to 32 MB. Any other write error, or a disk full
    /// for longer than that, abandons the clip as far as it got (its complete fragments stay
    /// playable, and are repaired at once or at the next start).
    private func recover(from error: MovieWriterError, during what: String, retry: () throws(MovieWriterError) -> Void) {
        guard let clip = open else { return }
        let outOfSpace: Bool = if case .file(let f) = error { f.isOutOfSpace } else { false }
        if outOfSpace {
            if !diskFull {
                log.warning("disk full while \(what); running retention, keeping the video in memory until there is room",
                            [("file", .string(clip.relativePath))])
                diskFull = true
            }
            let now = Date()
            if lastFullDiskSweep.map({ now.timeIntervalSince($0) >= ClipWriter.fullDiskSweepInterval || now < $0 }) ?? true {
                lastFullDiskSweep = now
                sweep()
                do {
                    try retry()
                    return
                } catch {}
            }
        }
        // Keep what is buffered unless it grows past what a full disk can justify.
        if clip.writer.bufferedBytes < 32 << 20 && outOfSpace { return }
        log.error("clip abandoned after a write error; what is on disk is kept", [("file", .string(clip.relativePath)), ("error", .string(error.description))])
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
            log.error("clip could not be finished; repairing what is on disk", [("file", .string(clip.relativePath)), ("error", .string(error.description))])
            clip.writer.abandon()
            stats.update { $0.clipErrors += 1 }
            repairAbandoned(clip, peakScore: closing.peakScore)
            return
        }
        let info = clip.info
        guard let record = journal(clip, start: summary.start, duration: summary.duration, frames: summary.videoFrames,
                                   audioFrames: summary.audioFrames, bytes: summary.bytes, peakScore: closing.peakScore) else { return }
        stats.update { $0.clipsWritten += 1 }
        log.info("clip saved", [
            ("file", .string(clip.relativePath)), ("duration", .seconds(summary.duration.seconds)), ("frames", .int(summary.videoFrames)),
            ("bytes", .int(summary.bytes)), ("peak_score", .fixed(closing.peakScore, 4)), ("part", .int(info.part)),
            ("reason", .string(closing.reason == .split ? "max_clip" : (closing.reason == .eventEnded ? "post_roll over" : "stopped"))),
        ])
        if let program = storage.onClipSaved {
            let absolute = storage.root + "/" + clip.relativePath
            hooks.run(program, event: "clip_saved",
                      arguments: [absolute, camera, record.start, record.end, String(record.durationSeconds), String(record.frames), String(record.bytes)],
                      facts: [("file", absolute), ("camera", camera), ("start", record.start), ("end", record.end), ("trigger", record.trigger ?? ""),
                              ("duration", String(record.durationSeconds)), ("frames", String(record.frames)), ("bytes", String(record.bytes)),
                              ("peak_score", String(record.peakScore ?? 0)), ("part", String(info.part))])
        }
        sweep()
    }

    /// A clip given up after a write error becomes a normal movie of what reached the disk,
    /// and gets its journal line like any other.
    private func repairAbandoned(_ clip: OpenClip, peakScore: Double) {
        guard let report = try? MovieRepair.repair(path: storage.root + "/" + clip.relativePath) else { return }
        log.info("clip repaired", [("file", .string(clip.relativePath)), ("frames", .int(report.videoFrames))])
        journal(clip, start: clip.info.start, duration: report.videoDuration, frames: report.videoFrames,
                audioFrames: report.audioFrames, bytes: report.bytes, peakScore: peakScore)
    }

    /// Appends the clip's line to the events journal.
    @discardableResult
    private func journal(_ clip: OpenClip, start first: Timestamp, duration: Timestamp.Duration, frames: Int, audioFrames: Int,
                         bytes: UInt64, peakScore: Double) -> ClipRecord? {
        guard let stream else { return nil }
        let info = clip.info
        let start = stream.wallClock(first)
        let end = start.addingTimeInterval(duration.seconds)
        let record = ClipRecord(
            file: clip.relativePath, camera: camera,
            start: ClipRecord.timestamp(start), end: ClipRecord.timestamp(end),
            trigger: ClipRecord.timestamp(stream.wallClock(info.trigger)),
            triggerSourceSeconds: (info.trigger - stream.firstFrame).seconds.rounded(toPlaces: 3),
            preRollSeconds: info.part == 1 ? (info.trigger - info.start).seconds.rounded(toPlaces: 3) : 0,
            durationSeconds: duration.seconds.rounded(toPlaces: 3),
            frames: frames, audioFrames: audioFrames, bytes: bytes,
            peakScore: peakScore.rounded(toPlaces: 4), part: info.part)
        do { try EventsJournal(directory: storage.root).append(record) } catch {
            log.error("events journal not written", [("error", .string(error.description))])
        }
        return record
    }

    /// Retention: deletes what the policy says (never the open clip), logs each deletion.
    func sweep() {
        let store = ClipStore(root: storage.root, naming: storage.naming)
        let protected: Set<String> = open.map { [$0.relativePath] } ?? []
        let (deleted, errors) = store.sweep(storage.policy, protected: protected)
        for d in deleted {
            log.info("clip deleted", [("file", .string(d.clip.relativePath)), ("bytes", .int(d.clip.size)), ("reason", .string(d.reason.description))])
        }
        for e in errors { log.warning("retention problem", [("error", .string(e.description))]) }
        if !deleted.isEmpty {
            // The journal keeps lines for the clips that are still there.
            do {
                try EventsJournal(directory: storage.root).prune { FileManager.default.fileExists(atPath: store.absolutePath($0)) }
            } catch {
                log.warning("events journal not shortened", [("error", .string(error.description))])
            }
        }
        if let free = try? store.freeBytes() {
            stats.update { $0.diskFreeBytes = free }
            if free < storage.policy.minFree && deleted.isEmpty && errors.isEmpty {
                if !lowSpaceWarned {
                    log.warning("disk space low and no clip left to delete", [("free_mb", .int(free >> 20)), ("min_free_mb", .int(storage.policy.minFree >> 20))])
                    lowSpaceWarned = true
                }
            } else if free >= storage.policy.minFree && lowSpaceWarned {
                log.info("disk space above min_free_mb again", [("free_mb", .int(free >> 20))])
                lowSpaceWarned = false
            }
        }
    }
}
