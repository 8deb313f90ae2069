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
    /// first fragment holds no video and is removed. Every clip is looked at.
    func repairInterrupted() {
        let storage = settings.storage
        let store = ClipStore(storage: storage, naming: settings.naming)
        guard let clips = try? store.clips() else { return }
        // A clip moved aside as damaged is never tried again.
        for clip in clips where !ClipNaming.isDamaged(clip.relativePath) {
            // The journal's rebuild that follows enters what is moved aside.
            repairClip(clip.relativePath, size: clip.size, enterDamaged: false)
        }
    }

    /// What became of a clip start-up repair looked at.
    enum RepairOutcome {
        /// It was a complete movie: nothing done.
        case complete
        /// Finished, entered, told.
        case repaired
        /// No video in it: removed.
        case removed
        /// No player opens it: moved aside as damaged.
        case movedAside
        /// Left as it is (another process writes it, or repair failed: said).
        case left
    }

    /// Finishes one clip an earlier run left open (see `repairInterrupted`).
    @discardableResult
    func repairClip(_ relative: String, size: Int64?, enterDamaged enter: Bool = true) -> RepairOutcome {
        let storage = settings.storage
        do {
            // Nil for a complete clip: repair looks before it touches anything.
            guard
                let report = try MovieRepair.repair(
                    path: storage.path(relative),
                    opening: { _ throws(FileError) in
                        try storage.openMovie(relative)
                    })
            else { return .complete }
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
            return .repaired
        } catch  where error.kind == .nothingRecorded {
            // Killed between creating the file and its first fragment: no video, nothing
            // a player could open. It is ours (its name is), so it goes.
            do {
                try ClipStore(storage: storage, naming: settings.naming).delete(
                    StoredFile(relativePath: relative, size: size ?? 0, modified: wallNow()), named: [relative])
                log.info(
                    "removed an interrupted clip with no video in it",
                    [("file", .string(relative))] + (size.map { [("bytes", .int($0))] } ?? []))
                return .removed
            } catch {
                log.warning(
                    "cannot remove an interrupted clip with no video in it",
                    [("file", .string(relative)), ("error", .string(error.description))])
            }
        } catch  where error.kind == .inUse {
            log.warning(
                "a clip is being written by another process; it is left as it is", [("file", .string(relative))])
        } catch  where error.kind == .notRepairable {
            moveAside(relative, in: storage, bytes: size, problem: error.problem, enter: enter)
            return .movedAside
        } catch {
            notify(.clipNotRepaired(file: relative, error: error.problem, moveError: nil))
        }
        return .left
    }

    /// A clip repair cannot read (no player opens it: a power cut and the fsck after it cut
    /// its start away) is moved aside as `NAME.mov.damaged` in its directory: its bytes kept,
    /// out of players' way, said once — the start that moves it — and never repaired again.
    /// Retention counts it and deletes it like a clip; the journal's rebuild makes its line
    /// follow it (or writes one marked damaged).
    func moveAside(_ relative: String, in storage: any ClipStorage, bytes: Int64?, problem: String, enter: Bool = true)
    {
        let damaged = ClipNaming.damagedPath(of: relative)
        do {
            try storage.rename(relative, to: damaged)
            notify(.clipMovedAside(file: relative, movedTo: damaged, bytes: bytes, error: problem))
            if enter { enterDamaged(damaged, bytes: bytes ?? 0, in: storage) }
        } catch {
            notify(.clipNotRepaired(file: relative, error: problem, moveError: error.description))
        }
    }

    /// Removes what writes a kill interrupted left (`ClipStore.leftovers`: the new contents of
    /// a picture, `latest.jpg` or the journal, never renamed over it), each said once.
    func removeLeftovers() {
        let storage = settings.storage
        guard let leftovers = try? ClipStore(storage: storage, naming: settings.naming).leftovers() else { return }
        for file in leftovers { removeLeftover(file) }
    }

    /// Removes one file an interrupted write left, said.
    func removeLeftover(_ file: StoredFile) {
        do {
            try settings.storage.delete(file.relativePath)
            notify(.leftoverRemoved(file: file.relativePath, bytes: file.size))
        } catch {
            log.warning(
                "cannot remove a file an interrupted write left",
                [("file", .string(file.relativePath)), ("error", .string(error.description))])
        }
    }

    /// Room asked of retention when the disk is full, beyond the video waiting to be written.
    static let fullDiskHeadroom: Int64 = 1 << 20
    /// The clips a sweep deletes at most before the writer goes on (unless the disk is full).
    static let sweepBatch = 100

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
        let listed: StoredFile?
        if let catalogue {
            listed = (try? catalogue.entry(file))?.map(ClipStore.storedFile)
        } else {
            listed = (try? store.clips())?.first(where: { $0.relativePath == file })
        }
        guard let clip = listed else {
            log.warning(
                "clip not deleted: it is not one of this agent's saved clips (already deleted?)",
                [("file", .string(file)), ("asked_by", .string(by))])
            return
        }
        do {
            if catalogue != nil { try store.delete(clip, named: [file]) } else { try store.delete(clip) }
        } catch  where error.isMissing && catalogue != nil {
            // Someone else deleted it: its entry goes all the same.
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
            do {
                try catalogue?.shiftAges(
                    from: Int64((step.from.timeIntervalSince1970 * 1000).rounded()),
                    to: Int64((step.to.timeIntervalSince1970 * 1000).rounded()))
            } catch {
                log.warning("retention problem", [("error", .string(error.description))])
            }
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
        let result: ClipStore.Sweep
        if let catalogue {
            // Unless the disk is full, a sweep deletes a batch at a time: the writer goes on
            // between batches (the next is asked at once).
            result = store.sweep(
                settings.policy, catalogue: catalogue, now: now, protected: protected, fullDisk: need,
                waiting: waiting, limit: need == nil ? ClipWriter.sweepBatch : .max)
        } else {
            result = store.sweep(
                settings.policy, now: now, protected: protected, fullDisk: need, clock: retentionClock,
                waiting: waiting)
            retentionClock = result.clock
        }
        sweepAgain = result.more
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
        if !result.gone.isEmpty {
            log.warning(
                "clips listed in the catalogue were deleted by someone else; taken out of it",
                [("files", .string(result.gone.joined(separator: " ")))])
            do { try catalogue?.remove(result.gone) } catch {
                log.warning("retention problem", [("error", .string(error.description))])
            }
        }
        enterUnentered()
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
