import Capture
import Foundation
import Media
import QuickTime
import Recorder
import Storage
import TestSupport
import Testing

/// A small real file system (tmpfs, which needs root) as the clip store, filled up while the
/// agent records: it must not crash, retention must free space, recording must go on, and no
/// clip may be left corrupt.
@Suite(.serialized) struct DiskFullTests {
    /// An event every 14 s, each long enough that a clip (about 11 s, 2 MB at 640×480) is
    /// larger than the 1 MB retention keeps free: the disk runs full inside clips.
    static func eventScene(events: Int) -> SyntheticScene {
        let objects = [
            SceneObject(
                enter: .init(seconds: 1), leave: .init(seconds: 10), path: .leftToRight(y: 0.5), width: 0.2,
                height: 0.3, brightness: 210)
        ]
        return scene(
            seconds: Double(events) * 14, rate: Rational(30, 1), width: 640, height: 480, objects: objects, period: 14)
    }

    /// `eventScene` as a Y4M file.
    static func footage(in dir: TemporaryDirectory, events: Int) throws -> String {
        try writeFootage(eventScene(events: events), to: dir.file("scene.y4m"))
    }

    /// Every clip left must be a complete movie that plays; returns them.
    static func checkClips(in storage: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        let files = movieFiles(in: storage)
        for file in files {
            let path = storage + "/" + file
            #expect(
                (try? MovieRepair.inspect(path: path)) == .complete, "\(file) is not a complete movie",
                sourceLocation: sourceLocation)
            try expectPlayable(path, sourceLocation: sourceLocation)
        }
        return files
    }

    /// A small file system (tmpfs, 24 MB unless told) for the clips, and a directory elsewhere
    /// for the rest.
    struct SmallDisk {
        let fs: SmallFileSystem
        let dir: TemporaryDirectory
        init(megabytes: Int = 24) throws {
            fs = try SmallFileSystem(megabytes: megabytes)
            do { dir = try TemporaryDirectory("vigil-faults-disk") } catch {
                fs.unmount()
                throw error
            }
        }
        /// The storage directory, and another program's file, on the small file system.
        var storage: String { fs.path + "/clips" }
        var filler: String { fs.path + "/other-data" }
        func remove() {
            fs.unmount()
            dir.remove()
        }
    }

    /// Fills what space is left on the file system, 256 kB at a time, until it is full.
    static func fillUp(_ path: String) -> Int64 {
        guard
            let handle = FileHandle(forWritingAtPath: path)
                ?? (FileManager.default.createFile(atPath: path, contents: nil)
                    ? FileHandle(forWritingAtPath: path) : nil)
        else { return 0 }
        defer { try? handle.close() }
        let chunk = Data(count: 256 << 10)
        var written: Int64 = 0
        while (try? handle.write(contentsOf: chunk)) != nil { written += Int64(chunk.count) }
        return written
    }

    /// Another program takes every free byte while the agent records its third clip: from
    /// then on clips get only the space retention frees by deleting older ones.
    @Test func aDiskThatRunsFullMidClipIsClearedByRetentionAndRecordingGoesOn() throws {
        let disk = try SmallDisk()
        defer { disk.remove() }
        let (dir, storage, filler) = (disk.dir, disk.storage, disk.filler)
        let footage = try Self.footage(in: dir, events: 8)
        let agent = try AgentProcess(
            config: writeConfig(
                dir.file("vigil.conf"), footage: footage, storage: storage,
                storageExtra: "min_free_mb = 1; max_size_mb = 0;"))
        // The third clip's file made (nothing is deleted before the disk fills).
        try #require(agent.waitUntil(timeout: 300) { movieFiles(in: storage).count >= 3 }, "\(agent.output)")
        let filled = Self.fillUp(filler)
        let status = agent.waitForExit(timeout: 600)
        let output = agent.output
        #expect(status == 0, "\(output)")

        // The disk did run full while a clip was being written, and retention made room.
        let full = output.split(separator: "\n").filter {
            $0.contains("level=warning") && $0.contains("running retention")
        }
        #expect(!full.isEmpty, "the disk never ran full:\n\(output)")
        let deleted = logLines(output, "clip deleted")
        #expect(
            !deleted.isEmpty
                && deleted.allSatisfy { ["less than 1 MB free", "the disk was full"].contains(logValue($0, "reason")) },
            "\(deleted)")
        // Recording went on: clips were saved after the first deletion, one per event.
        let lines = output.split(separator: "\n").map(String.init)
        let firstDeletion = try #require(lines.firstIndex { logValue($0, "msg") == "clip deleted" })
        let saved = logLines(output, "clip saved")
        #expect(
            lines[firstDeletion...].contains { logValue($0, "msg") == "clip saved" },
            "no clip was saved after space was freed:\n\(output)")
        #expect(saved.count == 8, "\(saved.count) clips saved for 8 events:\n\(output)")
        #expect(!output.contains("level=error"), "\(output)")

        // What is left: complete, playable, in the journal; the file that is not ours untouched.
        let files = try Self.checkClips(in: storage)
        #expect(!files.isEmpty)
        let journal = try EventsJournal(directory: storage).records()
        #expect(journal.unreadableLines.isEmpty)
        // Lines of the clips retention deleted went with them.
        #expect(
            Set(journal.records.map(\.file)) == Set(files), "journal: \(journal.records.map(\.file)), left: \(files)")
        #expect(
            (try FileManager.default.attributesOfItem(atPath: filler)[.size] as? NSNumber)?.int64Value ?? 0 >= filled)
        print(
            "disk full: \(filled >> 10) kB taken by another file; the agent found the disk full \(full.count) times, deleted \(deleted.count) clips, saved \(saved.count), \(files.count) left"
        )
    }

    /// Uploads on, the server out of reach (nothing listens where `upload.endpoint` points),
    /// and the disk runs full: retention still makes room — recording wins — but each clip it
    /// deletes before its upload is an error line naming it, and the queue forgets it; the
    /// clips left are all still queued.
    @Test func aDiskThatRunsFullWhileTheServerIsDownDeletesWaitingClipsWithAnError() throws {
        let disk = try SmallDisk()
        defer { disk.remove() }
        let (dir, storage, filler) = (disk.dir, disk.storage, disk.filler)
        let footage = try Self.footage(in: dir, events: 6)
        let (upload, unanswered) = try unansweredUpload(in: dir)
        defer { close(unanswered) }
        let agent = try AgentProcess(
            config: writeConfig(
                dir.file("vigil.conf"), footage: footage, storage: storage,
                storageExtra: "min_free_mb = 1; max_size_mb = 0;", extra: upload))
        // The third clip's file made (nothing is deleted before the disk fills).
        try #require(agent.waitUntil(timeout: 300) { movieFiles(in: storage).count >= 3 }, "\(agent.output)")
        _ = Self.fillUp(filler)
        let status = agent.waitForExit(timeout: 600)
        let output = agent.output
        #expect(status == 0, "\(output)")

        // The server never answered: nothing was uploaded (each try failed, or was given up
        // when retention deleted its clip).
        #expect(!output.contains("msg=\"clip uploaded\""), "\(output)")
        // Retention deleted clips that waited, each said as an error naming it.
        let lost = output.split(separator: "\n").map(String.init).filter {
            $0.contains("level=error") && $0.contains("msg=\"clip deleted before it was uploaded")
        }
        #expect(!lost.isEmpty, "no waiting clip was deleted:\n\(output)")
        let lostFiles = lost.compactMap { logValue($0, "file") }
        #expect(lostFiles.count == lost.count && Set(lostFiles).count == lostFiles.count, "\(lost)")
        #expect(lostFiles.allSatisfy { !FileManager.default.fileExists(atPath: storage + "/" + $0) })
        // No other error than these two kinds.
        let errors = output.split(separator: "\n").filter { $0.contains("level=error") }
        #expect(
            errors.allSatisfy { $0.contains("upload failed") || $0.contains("clip deleted before it was uploaded") },
            "\(errors)")
        // Recording went on: a clip per event.
        #expect(logLines(output, "clip saved").count == 6, "\(output)")

        // The queue: the deleted clips left it with a reason; the clips on the disk all wait.
        let files = try Self.checkClips(in: storage)
        let queue = try #require(try UploadJournal.read(from: DiskStorage(root: storage)))
        let left = Set(files.filter { $0.hasSuffix(".mov") })
        #expect(Set(queue.backlog) == left, "waiting \(queue.backlog), on the disk \(left)")
        #expect(queue.uploads.isEmpty)
        let forgotten = UploadJournal.records(
            in: ((try? DiskStorage(root: storage).read(UploadJournal.name)) ?? nil) ?? []
        ).filter { $0.deleted != nil }
        #expect(Set(forgotten.compactMap(\.deleted)) == Set(lostFiles), "\(forgotten)")
        #expect(forgotten.allSatisfy { $0.reason?.contains("before its upload") == true }, "\(forgotten)")
        print(
            "disk full, server down: \(lost.count) waiting clips deleted with an error, \(left.count) left queued"
        )
    }

    /// The disk is full from the start and there is no clip to delete: the first clip keeps
    /// what fitted (a playable movie), nothing crashes, the full disk is said once, and once
    /// space comes back the next clips are recorded whole. The frames come through a pipe the
    /// test feeds, so the space comes back between two events.
    @Test func aFullDiskWithNothingToDeleteLosesOnlyWhatDidNotFit() throws {
        let disk = try SmallDisk()
        defer { disk.remove() }
        let (dir, storage, filler) = (disk.dir, disk.storage, disk.filler)
        let free = try #require(
            (try FileManager.default.attributesOfFileSystem(forPath: disk.fs.path)[.systemFreeSize] as? NSNumber)?
                .int64Value
        )
        // Room for about half a clip.
        #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: Int(free) - (1 << 20))))
        let (feeder, agent) = try fedAgent(
            Self.eventScene(events: 3), in: dir, storage: storage, storageExtra: "min_free_mb = 1; max_size_mb = 0;")
        try feeder.feed(until: 13)
        // Saved or repaired, the first clip has its journal line.
        #expect(
            agent.waitUntil(timeout: 120) { !journalRecords(in: storage).isEmpty },
            "the first clip was neither saved nor repaired:\n\(agent.output)")
        let firstFile = try #require(journalRecords(in: storage).first?.file, "\(agent.output)")
        // The other program frees its space; the next two events come.
        try FileManager.default.removeItem(atPath: filler)
        try feeder.feed(until: 42)
        feeder.close()
        let status = agent.waitForExit(timeout: 300)
        let output = agent.output
        #expect(status == 0, "\(output)")

        // Said once each, not once per frame.
        #expect(output.split(separator: "\n").filter { $0.contains("msg=\"disk full while") }.count == 1, "\(output)")
        #expect(
            logLines(
                output,
                "disk space low and deleting clips would not make it up; the clips are kept — free space on this file system or lower storage.min_free_mb"
            ).count == 1, "\(output)")
        // The first clip kept what fitted, as a complete movie that plays.
        let firstPath = storage + "/" + firstFile
        #expect((try? MovieRepair.inspect(path: firstPath)) == .complete)
        let probe = try expectPlayable(firstPath)
        let firstFrames = Int(probe?.video?["nb_frames"] ?? "") ?? 0
        #expect(firstFrames > 0 && firstFrames < 328, "the first clip has \(firstFrames) frames")
        // The two clips after it are whole.
        let saved = logLines(output, "clip saved").filter { logValue($0, "file") != firstFile }
        #expect(saved.count == 2 && saved.allSatisfy { logValue($0, "frames") == "328" }, "\(saved)")
        // All three are in the events journal, the first with what it kept.
        let records = try EventsJournal(directory: storage).records().records
        #expect(records.map(\.file) == [firstFile] + saved.compactMap { logValue($0, "file") })
        #expect(
            records.first?.frames == firstFrames
                && abs((records.first?.durationSeconds ?? 0) - Double(firstFrames) / 30) < 0.002,
            "\(records.first.map { "\($0)" } ?? "no record")")
        for line in saved {
            let path = storage + "/" + (logValue(line, "file") ?? "")
            #expect((try? MovieRepair.inspect(path: path)) == .complete)
            try expectPlayable(path)
        }
        print(
            "full disk, nothing to delete: the first clip kept \(firstFrames) of 328 frames; the next \(saved.count) were whole"
        )
    }

    /// A disk smaller than three clips, with no space kept free (`min_free_mb = 0`): every
    /// write of every clip may find it full — a fragment, the index at the close, the picture,
    /// the journal — and retention makes room each time. Whatever it had to give up, each clip
    /// left on it is a complete movie that decodes.
    @Test func aDiskAlwaysFullLeavesOnlyClipsThatDecode() throws {
        let disk = try SmallDisk(megabytes: 5)
        defer { disk.remove() }
        let (dir, storage) = (disk.dir, disk.storage)
        let footage = try Self.footage(in: dir, events: 6)
        let agent = try AgentProcess(
            config: writeConfig(
                dir.file("vigil.conf"), footage: footage, storage: storage,
                storageExtra: "min_free_mb = 0; max_size_mb = 0;", extra: "snapshot = { live_interval = 1.0; };"))
        let status = agent.waitForExit(timeout: 600)
        let output = agent.output
        #expect(status == 0, "\(output)")
        #expect(!logLines(output, "clip deleted").isEmpty, "the disk never ran full:\n\(output)")
        let files = try Self.checkClips(in: storage)
        #expect(!files.isEmpty, "\(output)")
        let journal = try EventsJournal(directory: storage).records()
        #expect(
            Set(journal.records.map(\.file)) == Set(files), "journal: \(journal.records.map(\.file)), left: \(files)")
        print(
            "always full: \(logLines(output, "clip saved").count) clips saved, \(logLines(output, "clip deleted").count) deleted, \(files.count) left, all decode"
        )
    }

    @Test func retentionKeepsTheStoreUnderItsCap() throws {
        let disk = try SmallDisk()
        defer { disk.remove() }
        let (dir, storage) = (disk.dir, disk.storage)
        let footage = try Self.footage(in: dir, events: 8)
        let agent = try AgentProcess(
            config: writeConfig(
                dir.file("vigil.conf"), footage: footage, storage: storage,
                storageExtra: "min_free_mb = 1; max_size_mb = 5;"))
        let status = agent.waitForExit(timeout: 600)
        let output = agent.output
        #expect(status == 0, "\(output)")
        let deleted = logLines(output, "clip deleted")
        #expect(
            !deleted.isEmpty && deleted.allSatisfy { logValue($0, "reason") == "clips take more than 5 MB" },
            "\(output)")
        #expect(logLines(output, "clip saved").count == 8)
        #expect(!output.contains("level=error") && !output.contains("level=warning"), "\(output)")
        let files = try Self.checkClips(in: storage)
        let total = files.reduce(Int64(0)) { total, file in
            total
                + ((try? FileManager.default.attributesOfItem(atPath: storage + "/" + file)[.size] as? NSNumber)?
                    .int64Value ?? 0)
        }
        #expect(total <= 5 << 20, "the clips take \(total) bytes")
        print("size cap: \(deleted.count) clips deleted, \(files.count) left, \(total) bytes")
    }
}
