import FoundationEssentials
import Logging
import Media
import QuickTime
import Recorder
import Snapshot

/// Clips recorded in memory while the storage directory is not there, and written when it is
/// back (`docs/ARCHITECTURE.md`, "The storage directory").
extension ClipWriter {
    /// Opens a clip while the storage directory is not there: recorded in memory (the movie
    /// writer keeps the GOPs its held file cannot take, as on a full disk) and written when
    /// the directory is back — unless the video already waiting has reached the limit.
    func openHeld(_ info: ClipInfo, stream: StreamInfo) {
        let trigger = ClipRecord.timestamp(stream.wallClock(info.trigger))
        guard case .keep = disk.hold(0, beside: heldBytes) else {
            notify(
                .clipNotRecorded(
                    event: info.event, part: info.part, trigger: trigger, path: settings.storage.root,
                    memoryMB: disk.limit >> 20))
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
        notify(
            .clipHeld(
                event: info.event, part: info.part, trigger: trigger, path: settings.storage.root,
                memoryBytes: heldBytes))
    }

    /// The video waiting in memory for the storage directory: the open clip's and the clips
    /// that ended meanwhile.
    var heldBytes: Int {
        waiting.reduce(0) { $0 + $1.clip.writer.bufferedBytes }
            + (open.flatMap { $0.held == nil ? nil : $0.writer.bufferedBytes } ?? 0)
    }

    /// A GOP of a clip recorded in memory: kept while the memory allows; past the limit the
    /// clip ends there (said once: what is dropped), and its event's other GOPs are dropped.
    func hold(_ gop: GOP, in clip: OpenClip) {
        if case .full(let say) = disk.hold(gop.byteCount, beside: heldBytes) {
            if say {
                notify(
                    .heldVideoFull(
                        event: clip.info.event, part: clip.info.part,
                        keptSeconds: ((clip.end ?? clip.info.start) - clip.info.start).seconds,
                        memoryMB: disk.limit >> 20, waiting: waiting.count))
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
    func writeHeldClips() {
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
    enum Materialized {
        /// Its file is on the disk with what waited (or as much as the disk took).
        case written(OpenClip)
        /// Given up as far as it reached the disk (a write error): said, and repaired.
        case gaveUp
        /// Its file cannot be made yet: it goes on waiting.
        case notYet
    }

    /// Makes a clip held in memory a file on the disk: a free name, the file created (retention
    /// first when the disk is full), what waited written into it as the disk-full policy says.
    func materialize(_ clip: OpenClip) -> Materialized {
        guard let held = clip.held, let stream else { return .notYet }
        let storage = settings.storage
        let started = stream.wallClock(clip.info.start)
        var attempt = 0
        while true {
            attempt += 1
            let relative = freeName(for: started)
            do {
                held.attach(try createMovie(relative))
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
            notify(
                .clipWrittenFromMemory(
                    file: relative, event: clip.info.event, part: clip.info.part, bytes: clip.writer.bufferedBytes))
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
    func lastTryForHeldClips() {
        guard !waiting.isEmpty else { return }
        _ = bringUpOrWait()
        for (clip, _, _) in waiting {
            let start = stream.map { ClipRecord.timestamp($0.wallClock(clip.info.start)) } ?? ""
            let end = stream.map { ClipRecord.timestamp($0.wallClock(clip.end ?? clip.info.start)) } ?? ""
            notify(
                .clipLostWithTheStorage(
                    event: clip.info.event, part: clip.info.part, start: start, end: end, path: settings.storage.root))
            stats.update { $0.clipErrors += 1 }
        }
        waiting = []
    }
}
