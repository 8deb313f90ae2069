import FoundationEssentials
import Logging
import Media
import QuickTime
import Recorder
import Snapshot

/// What an earlier run left (repair, leftovers, damaged clips moved aside) and retention.
extension ClipWriter {
    /// A clip given up after a write error becomes a normal movie of what reached the disk,
    /// and gets its journal line like any other.
    func repairAbandoned(_ clip: OpenClip, peakScore: Double) {
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
        notify(.clipRepaired(file: relative, frames: report.videoFrames))
        tell(
            .clipSaved(ClipSaved(record: record, path: storage.path(relative), origin: .abandoned, storage: storage)))
    }

    /// The clip's line for the events journal.
    func record(
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
    func repairInterrupted() {
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
                tell(
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
                notify(.clipNotRepaired(file: relative, error: error.problem, moveError: nil))
            }
        }
    }

    /// A clip repair cannot read (no player opens it: a power cut and the fsck after it cut
    /// its start away) is moved aside as `NAME.mov.damaged` in its directory: its bytes kept,
    /// out of players' way, said once — the start that moves it — and never repaired again.
    /// Retention counts it and deletes it like a clip; the journal's rebuild makes its line
    /// follow it (or writes one marked damaged).
    func moveAside(_ relative: String, in storage: any ClipStorage, bytes: Int64?, problem: String) {
        let damaged = ClipNaming.damagedPath(of: relative)
        do {
            try storage.rename(relative, to: damaged)
            notify(.clipMovedAside(file: relative, movedTo: damaged, bytes: bytes, error: problem))
        } catch {
            notify(.clipNotRepaired(file: relative, error: problem, moveError: error.description))
        }
    }

    /// Removes what writes a kill interrupted left (`ClipStore.leftovers`: the new contents of
    /// a picture, `latest.jpg` or the journal, never renamed over it), each said once.
    func removeLeftovers() {
        let storage = settings.storage
        guard let leftovers = try? ClipStore(storage: storage, naming: settings.naming).leftovers() else { return }
        for file in leftovers {
            do {
                try storage.delete(file.relativePath)
                notify(.leftoverRemoved(file: file.relativePath, bytes: file.size))
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

    /// Deletes the saved clip `file` (and its picture) as `by` asked: not the clip being
    /// written, only one of the agent's clips (`ClipStore` refuses the rest); logged, and told
    /// to the sinks like retention's deletions.
    func delete(_ file: String, by: String) {
        let storage = settings.storage
        guard file != open?.relativePath else {
            log.warning(
                "clip not deleted: it is being recorded",
                [("file", .string(file)), ("asked_by", .string(by))])
            return
        }
        let store = ClipStore(storage: storage, naming: settings.naming)
        guard let clip = (try? store.clips())?.first(where: { $0.relativePath == file }) else {
            log.warning(
                "clip not deleted: it is not one of this agent's saved clips (already deleted?)",
                [("file", .string(file)), ("asked_by", .string(by))])
            return
        }
        do {
            try store.delete(clip)
        } catch {
            log.warning("clip not deleted", [("file", .string(file)), ("error", .string(error.description))])
            return
        }
        let deletion = Deletion(clip: clip, reason: .asked(by: by))
        log.info(
            "clip deleted",
            [
                ("file", .string(file)), ("bytes", .int(clip.totalSize)),
                ("reason", .string(deletion.reason.description)),
            ])
        tell(.clipsDeleted(ClipsDeleted(deletions: [deletion], storage: storage)))
        if let free = try? storage.freeBytes() { stats.update { $0.diskFreeBytes = free } }
    }

    /// Retention: deletes what the policy says (never the open clip, never the newest saved),
    /// logs each deletion. `fullDisk` is the room a write that found the disk full needs.
    func sweep(fullDisk need: Int64? = nil, protecting: String? = nil) {
        let storage = settings.storage
        let store = ClipStore(storage: storage, naming: settings.naming)
        let protected = Set([open?.relativePath, protecting].compactMap { $0 })
        let now = wallNow()
        if let step = clockWatch.look(wall: now, monotonic: clock.now()) {
            retentionClock.stepped(step)
            log.info(
                "the wall clock stepped forward; the clips before the step keep the age they had",
                [("seconds", .seconds(step.seconds))])
        }
        // Clips not uploaded yet: what the upload queue says waits, as the upload sink holds it
        // (never read from the file here); every clip while the sink still reads the file.
        var waiting: UploadHold = []
        if settings.holdsUploads {
            switch uploads?.uploadQueue {
            case .read(let queue)?: waiting = .files(queue.waitingFiles)
            case .reading?: waiting = .all
            case nil: break  // no upload sink runs (it could not be set up): nothing is sent
            }
        }
        let result = store.sweep(
            settings.policy, now: now, protected: protected, fullDisk: need, clock: retentionClock, waiting: waiting)
        retentionClock = result.clock
        if result.stamped > 0 {
            log.info(
                "clips dated by a wrong clock are aged from when it was right", [("clips", .int(result.stamped))])
        }
        for d in result.deleted where d.notUploaded {
            log.error(
                "clip deleted before it was uploaded: the disk is full and recording needs the room — the upload server has been out of reach for long; see the upload lines before",
                [
                    ("file", .string(d.clip.relativePath)), ("bytes", .int(d.clip.totalSize)),
                    ("reason", .string(d.reason.description)),
                ])
        }
        for d in result.deleted where !d.notUploaded {
            log.info(
                "clip deleted",
                [
                    ("file", .string(d.clip.relativePath)), ("bytes", .int(d.clip.totalSize)),
                    ("reason", .string(d.reason.description)),
                ])
        }
        for e in result.errors { log.warning("retention problem", [("error", .string(e.description))]) }
        if !result.deleted.isEmpty {
            tell(.clipsDeleted(ClipsDeleted(deletions: result.deleted, storage: storage)))
        }
        guard let free = result.freeBytes else { return }
        stats.update { $0.diskFreeBytes = free }
        switch disk.measured(
            free: free, minFree: settings.policy.minFree, shortfall: result.shortfall, at: clock.now())
        {
        case .low(let shortfall)?:
            notify(
                .diskLow(
                    path: storage.root, freeMB: Int(free >> 20), minFreeMB: Int(settings.policy.minFree >> 20),
                    shortMB: Int((shortfall + (1 << 20) - 1) >> 20)))
        case .recovered?:
            log.info("disk space above min_free_mb again", [("free_mb", .int(free >> 20))])
        case nil:
            break
        }
    }
}
