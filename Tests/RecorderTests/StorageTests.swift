import Foundation
import Storage
import Testing
import TestSupport
@testable import Recorder

@Suite struct ClipNamingTests {
    let utc = TimeZone(identifier: "UTC")!

    @Test func namesComeFromThePatternInLocalTime() {
        let naming = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: utc)
        let date = Date(timeIntervalSince1970: 1_796_036_645) // 2026-11-30 11:04:05 UTC
        #expect(naming.relativePath(for: date) == "2026-11-30/shed-20261130-110405.mov")
        #expect(naming.relativePath(for: date, suffix: 2) == "2026-11-30/shed-20261130-110405-2.mov")
        let berlin = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: TimeZone(identifier: "Europe/Berlin")!)
        #expect(berlin.relativePath(for: date) == "2026-11-30/shed-20261130-120405.mov")
    }

    @Test(arguments: [
        ("2026-11-30/shed-20261130-110405.mov", true),
        ("2026-11-30/shed-20261130-110405-2.mov", true),
        ("2026-11-30/shed-20261130-110405-.mov", false),
        ("2026-11-30/barn-20261130-110405.mov", false),
        ("2026-11-30/shed-20261130-1104.mov", false),
        ("2026-11-30/shed-20261130-110405.mp4", false),
        ("2026-11-30/shed-20261130-110405.mov.bak", false),
        ("shed-20261130-110405.mov", false),
        ("2026-11-30/notes.txt", false),
        ("../2026-11-30/shed-20261130-110405.mov", false),
        ("2026-1x-30/shed-20261130-110405.mov", false),
    ])
    func recognisesOnlyItsOwnNames(path: String, matches: Bool) {
        let naming = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: utc)
        #expect(naming.matches(path) == matches)
    }
}

@Suite struct RetentionPolicyTests {
    let now = Date(timeIntervalSince1970: 2_000_000_000)

    func clip(_ name: String, ageDays: Double, mb: Int64) -> StoredClip {
        StoredClip(relativePath: name, size: mb << 20, modified: now.addingTimeInterval(-ageDays * 86_400))
    }

    @Test func deletesOldestFirstForEachReason() {
        let clips = [clip("d", ageDays: 1, mb: 10), clip("a", ageDays: 40, mb: 10), clip("c", ageDays: 5, mb: 10), clip("b", ageDays: 31, mb: 10)]
        let byAge = RetentionPolicy(maxAgeDays: 30, maxSize: nil, minFree: 0).deletions(clips: clips, now: now, freeBytes: 1 << 40, protected: [])
        #expect(byAge.map(\.clip.relativePath) == ["a", "b"])
        #expect(byAge.allSatisfy { $0.reason == .olderThan(days: 30) })

        let bySize = RetentionPolicy(maxAgeDays: nil, maxSize: 25 << 20, minFree: 0).deletions(clips: clips, now: now, freeBytes: 1 << 40, protected: [])
        #expect(bySize.map(\.clip.relativePath) == ["a", "b"])

        let byFree = RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: 100 << 20).deletions(clips: clips, now: now, freeBytes: 75 << 20, protected: [])
        #expect(byFree.map(\.clip.relativePath) == ["a", "b", "c"])
        #expect(byFree.last?.reason == .freeSpaceBelow(bytes: 100 << 20))
    }

    @Test func neverTheClipBeingWritten() {
        let clips = [clip("old", ageDays: 90, mb: 10), clip("open", ageDays: 100, mb: 500)]
        let d = RetentionPolicy(maxAgeDays: 30, maxSize: 1, minFree: 1 << 40).deletions(clips: clips, now: now, freeBytes: 0, protected: ["open"])
        #expect(d.map(\.clip.relativePath) == ["old"])
    }

    @Test func nothingToDoWhenWithinLimits() {
        let clips = [clip("a", ageDays: 2, mb: 10)]
        #expect(RetentionPolicy(maxAgeDays: 30, maxSize: 100 << 20, minFree: 10 << 20).deletions(clips: clips, now: now, freeBytes: 1 << 30, protected: []).isEmpty)
    }
}

@Suite struct ClipStoreTests {
    let naming = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: TimeZone(identifier: "UTC")!)

    func write(_ path: String, mb: Int, modified: Date) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(count: mb << 20)))
        try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: path)
    }

    /// Fills a 40 MB file system with clips and things that are not clips, then sweeps.
    @Test func sweepsARealSmallFileSystemDeletingOnlyItsOwnClips() throws {
        let fs = try SmallFileSystem(megabytes: 40)
        defer { fs.unmount() }
        let root = fs.path + "/clips"
        let outside = fs.path + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        let base = Date(timeIntervalSince1970: 1_796_000_000)
        var names: [String] = []
        for i in 0..<6 {
            let date = base.addingTimeInterval(Double(i) * 3600)
            let name = naming.relativePath(for: date)
            names.append(name)
            try write(root + "/" + name, mb: 5, modified: date)
        }
        // Not ours: a file outside the pattern, a symlink to a file outside, a symlinked
        // directory full of clip-named files, and a file outside the store.
        try write(root + "/2026-11-29/holiday.mov", mb: 1, modified: base.addingTimeInterval(-86_400 * 400))
        try write(outside + "/2026-11-29/shed-20261129-000000.mov", mb: 1, modified: base.addingTimeInterval(-86_400 * 400))
        try FileManager.default.createSymbolicLink(atPath: root + "/2026-11-28", withDestinationPath: outside + "/2026-11-29")
        try FileManager.default.createDirectory(atPath: root + "/2026-11-27", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/2026-11-27/shed-20261127-000000.mov", withDestinationPath: outside + "/2026-11-29/shed-20261129-000000.mov")

        let store = ClipStore(root: root, naming: naming)
        #expect(try store.clips().map(\.relativePath).sorted() == names.sorted())
        let free = try store.freeBytes()
        #expect(free > 0 && free < 40 << 20)

        // Keep 15 MB free: about 8 MB must go, so the two oldest clips; the open one (the
        // oldest of all, say) is never touched.
        let policy = RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: free + (8 << 20))
        let (deleted, errors) = store.sweep(policy, now: base, protected: [names[0]])
        #expect(errors.isEmpty)
        #expect(deleted.map(\.clip.relativePath) == [names[1], names[2]])
        #expect(try store.freeBytes() >= free + (8 << 20))
        let fm = FileManager.default
        #expect(fm.fileExists(atPath: root + "/" + names[0]))
        #expect(fm.fileExists(atPath: root + "/2026-11-29/holiday.mov"))
        #expect(fm.fileExists(atPath: outside + "/2026-11-29/shed-20261129-000000.mov"))
        #expect((try? fm.destinationOfSymbolicLink(atPath: root + "/2026-11-27/shed-20261127-000000.mov")) != nil)

        // By age and size: everything of ours but the protected clip can go; nothing else.
        let all = store.sweep(RetentionPolicy(maxAgeDays: 1, maxSize: 1, minFree: 0), now: base.addingTimeInterval(86_400 * 10), protected: [names[0]])
        #expect(all.deleted.count == 3)
        #expect(try store.clips().map(\.relativePath) == [names[0]])
        #expect(fm.fileExists(atPath: root + "/2026-11-29/holiday.mov"))
    }

    @Test func refusesToDeleteWhatIsNotAClip() throws {
        let dir = try TemporaryDirectory("vigil-store")
        defer { dir.remove() }
        try write(dir.file("target.mov"), mb: 0, modified: Date())
        try FileManager.default.createDirectory(atPath: dir.file("2026-11-30"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir.file("2026-11-30/shed-20261130-000000.mov"), withDestinationPath: dir.file("target.mov"))
        let store = ClipStore(root: dir.path, naming: naming)
        #expect(throws: ClipStore.StoreError.self) {
            try store.delete(StoredClip(relativePath: "2026-11-30/shed-20261130-000000.mov", size: 0, modified: Date()))
        }
        #expect(throws: ClipStore.StoreError.self) {
            try store.delete(StoredClip(relativePath: "target.mov", size: 0, modified: Date()))
        }
        #expect(FileManager.default.fileExists(atPath: dir.file("target.mov")))
    }
}

@Suite struct EventsJournalTests {
    @Test func appendsOneLinePerClipAndReadsThemBack() throws {
        let dir = try TemporaryDirectory("vigil-journal")
        defer { dir.remove() }
        let journal = EventsJournal(directory: dir.path)
        let record = ClipRecord(file: "2026-11-30/shed-20261130-110405.mov", camera: "shed",
                                start: "2026-11-30T11:04:05.000Z", end: "2026-11-30T11:04:17.500Z", trigger: "2026-11-30T11:04:10.000Z",
                                triggerSourceSeconds: 125.25, preRollSeconds: 5, durationSeconds: 12.5, frames: 375, audioFrames: 0,
                                bytes: 1_234_567, peakScore: 0.061, part: 1)
        try journal.append(record)
        var second = record
        second.part = 2
        try journal.append(second)
        let text = try String(contentsOfFile: journal.path, encoding: .utf8)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("{\"audio_frames\":0,\"bytes\":1234567,\"camera\":\"shed\",\"duration_s\":12.5,\"end\":\"2026-11-30T11:04:17.500Z\",\"file\":\"2026-11-30/shed-20261130-110405.mov\""))
        for key in ["\"trigger\":", "\"trigger_source_s\":125.25", "\"preroll_s\":5", "\"frames\":375", "\"peak_score\":0.061", "\"start\":"] {
            #expect(lines[0].contains(key), "\(key) missing")
        }
        // A damaged line is reported, not fatal.
        try (text + "{not json\n").write(toFile: journal.path, atomically: true, encoding: .utf8)
        let (records, bad) = try journal.records()
        #expect(records == [record, second])
        #expect(bad == [3])

        // Retention deleted the clip: its lines go, the unreadable line stays.
        #expect(try journal.prune { $0 != record.file } == 2)
        let (left, stillBad) = try journal.records()
        #expect(left.isEmpty)
        #expect(stillBad == [1])
        #expect(try journal.prune { _ in false } == 0)
    }

    @Test func aRepairedClipsLineLeavesOutWhatIsNotKnown() throws {
        let dir = try TemporaryDirectory("vigil-journal")
        defer { dir.remove() }
        let journal = EventsJournal(directory: dir.path)
        try journal.append(ClipRecord(file: "a.mov", camera: "shed", start: "2026-11-30T11:04:05.000Z", end: "2026-11-30T11:04:07.000Z",
                                      trigger: nil, triggerSourceSeconds: nil, preRollSeconds: nil, durationSeconds: 2, frames: 60,
                                      audioFrames: 0, bytes: 1000, peakScore: nil, part: nil, repaired: true))
        let line = try String(contentsOfFile: journal.path, encoding: .utf8)
        #expect(line.contains("\"repaired\":true"))
        #expect(!line.contains("trigger") && !line.contains("peak_score"))
        #expect(try journal.records().records.first?.repaired == true)
    }
}
