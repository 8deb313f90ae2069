import FoundationEssentials
import Logging
import Media
import QuickTime
import Recorder
import Snapshot

/// Names, errors while writing, the close of a clip (its index, picture, journal line and
/// events), and `latest.jpg`.
extension ClipWriter {
    /// A name from the pattern that no file has yet (clips started in the same second get -1, -2, ...),
    /// nor a damaged clip moved aside under it.
    func freeName(for date: Date) -> String {
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
    func recover(from error: MovieWriterError, during what: String, gop: GOP? = nil) {
        guard let clip = open else { return }
        let outOfSpace: Bool = if case .file(let f) = error { f.isOutOfSpace } else { false }
        var decision = disk.writeFailed(outOfSpace: outOfSpace, buffered: clip.writer.bufferedBytes, at: clock.now())
        switch decision {
        case .sweepAndRetry(let sayFull), .keepWaiting(let sayFull):
            if sayFull {
                notify(.diskFull(file: clip.relativePath, during: what))
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

    func closeClip(_ closing: ClipClosing) {
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
            summary = try closeMakingRoom(clip)
        } catch {
            notify(.clipUnfinished(file: clip.relativePath, error: error.description))
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
        tell(
            .clipSaved(
                ClipSaved(
                    record: record, path: clip.storage.path(clip.relativePath), origin: .closed,
                    reason: closing.reason, storage: clip.storage, snapshotJPEG: picture?.jpeg))
        )
        log.info(
            "clip saved",
            [
                ("file", .string(clip.relativePath)), ("duration_s", .seconds(summary.duration.seconds)),
                ("frames", .int(summary.videoFrames)),
                ("bytes", .int(summary.bytes)), ("peak_score", .fixed(closing.peakScore, 4)),
                ("part", .int(clip.info.part)),
                ("reason", .string(closing.reason.said)),
            ])
        sweep()
    }

    /// Finishes the clip's movie (its last fragment and its index). When that finds the disk
    /// full, retention frees the oldest clips (never this one) and the close is tried once
    /// more, as a clip's creation and its picture are: the clip is finished whole rather than
    /// cut back to its last fragment by repair.
    func closeMakingRoom(_ clip: OpenClip) throws(MovieWriterError) -> MovieSummary {
        do {
            return try clip.writer.close()
        } catch {
            guard case .file(let failure) = error, failure.isOutOfSpace else {
                throw error
            }
            log.warning("no space to finish the clip; running retention", [("file", .string(clip.relativePath))])
            sweep(
                fullDisk: Int64(clip.writer.bufferedBytes) + ClipWriter.fullDiskHeadroom, protecting: clip.relativePath)
            return try clip.writer.close()
        }
    }

    /// Writes `<clip>.jpg` beside the clip (whole or not at all); nil, with a warning, when it
    /// cannot be made or written — the clip is saved either way.
    func writeSnapshot(
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
    func withoutSnapshot(_ file: String, _ problem: String) -> (file: String, jpeg: [UInt8])? {
        notify(.snapshotNotSaved(file: file, error: problem))
        return nil
    }

    /// Replaces `latest.jpg` with the current picture (`snapshot.live_interval`), unless the
    /// disk is short of space: a live picture never takes space a clip needs
    /// (`DiskFullPolicy.livePictureFits`).
    func writeLatest(_ picture: SnapshotPicture, quality: Int) {
        guard storageIsReady() else { return }
        let storage = settings.storage
        let jpeg: [UInt8]
        do { jpeg = try JPEGEncoder.encode(picture, quality: quality) } catch {
            liveFailed("\(error)")
            return
        }
        events.handle(.livePicture(jpeg))
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
    func liveFailed(_ problem: String) {
        if !liveFailing {
            notify(.latestPictureFailed(path: settings.storage.path(ClipNaming.latestPicture), error: problem))
        }
        liveFailing = true
    }

    /// `latest.jpg` is not written for want of space: said when this begins (at most hourly).
    func liveWaitsForSpace() {
        guard liveWaiting == nil else { return }
        let now = clock.now()
        let say = liveWaitingSaid.map { now - $0 >= DiskFullPolicy.lowSpaceRepeat } ?? true
        liveWaiting = say
        guard say else { return }
        liveWaitingSaid = now
        notify(
            .latestPictureWaitsForSpace(
                path: settings.storage.path(ClipNaming.latestPicture), minFreeMB: Int(settings.policy.minFree >> 20)))
    }
}
