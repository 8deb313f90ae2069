import Foundation
import Media
import Storage
import TestSupport
import Testing

@testable import Recorder

@Suite struct ClipNamingTests {
    let utc = TimeZone(identifier: "UTC")!

    @Test func namesComeFromThePatternInLocalTime() {
        let naming = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: utc)
        let date = Date(timeIntervalSince1970: 1_796_036_645)  // 2026-11-30 11:04:05 UTC
        #expect(naming.relativePath(for: date) == "2026-11-30/shed-20261130-110405.mov")
        #expect(naming.relativePath(for: date, suffix: 2) == "2026-11-30/shed-20261130-110405-2.mov")
        let berlin = ClipNaming(
            pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed",
            timeZone: TimeZone(identifier: "Europe/Berlin")!)
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

    func clip(_ name: String, ageDays: Double, mb: Int64) -> StoredFile {
        StoredFile(relativePath: name, size: mb << 20, modified: now.addingTimeInterval(-ageDays * 86_400))
    }

    @Test func deletesOldestFirstForEachReason() {
        let clips = [
            clip("d", ageDays: 1, mb: 10), clip("a", ageDays: 40, mb: 10), clip("c", ageDays: 5, mb: 10),
            clip("b", ageDays: 31, mb: 10),
        ]
        let byAge = RetentionPolicy(maxAgeDays: 30, maxSize: nil, minFree: 0).deletions(
            clips: clips, now: now, freeBytes: 1 << 40, protected: [])
        #expect(byAge.map(\.clip.relativePath) == ["a", "b"])
        #expect(byAge.allSatisfy { $0.reason == .olderThan(days: 30) })

        let bySize = RetentionPolicy(maxAgeDays: nil, maxSize: 25 << 20, minFree: 0).deletions(
            clips: clips, now: now, freeBytes: 1 << 40, protected: [])
        #expect(bySize.map(\.clip.relativePath) == ["a", "b"])

        let byFree = RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: 100 << 20).deletions(
            clips: clips, now: now, freeBytes: 75 << 20, protected: [])
        #expect(byFree.map(\.clip.relativePath) == ["a", "b", "c"])
        #expect(byFree.last?.reason == .freeSpaceBelow(bytes: 100 << 20))
    }

    @Test func neverTheClipBeingWrittenNorTheNewestSaved() {
        let clips = [
            clip("older", ageDays: 95, mb: 10), clip("old", ageDays: 90, mb: 10), clip("open", ageDays: 100, mb: 500),
        ]
        let d = RetentionPolicy(maxAgeDays: 30, maxSize: 1, minFree: 1 << 40).deletions(
            clips: clips, now: now, freeBytes: 1 << 40, protected: ["open"])
        #expect(d.map(\.clip.relativePath) == ["older"])
        // The only clip saved is the newest: kept, however old.
        #expect(
            RetentionPolicy(maxAgeDays: 30, maxSize: 1, minFree: 0).deletions(
                clips: [clip("old", ageDays: 90, mb: 10)], now: now, freeBytes: 0, protected: []
            ).isEmpty)
    }

    /// Other data took the space: deleting every clip would not bring free space to min_free,
    /// so they are kept and the shortfall said — unless the disk is full, when the oldest go.
    @Test func clipsThatCannotMakeUpMinFreeAreKept() {
        let clips = [clip("a", ageDays: 3, mb: 2), clip("b", ageDays: 2, mb: 2), clip("c", ageDays: 1, mb: 2)]
        let policy = RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: 8 << 20)
        let kept = policy.decide(clips: clips, now: now, freeBytes: 1 << 20, protected: [])
        #expect(kept.deletions.isEmpty)
        #expect(kept.shortfall == 7 << 20)
        // Enough to make it up: oldest first, the newest kept.
        let enough = policy.decide(clips: clips, now: now, freeBytes: 5 << 20, protected: [])
        #expect(enough.deletions.map(\.clip.relativePath) == ["a", "b"] && enough.shortfall == nil)
        // The disk is full and 3 MB are needed: the oldest go, whatever min_free says (0 too).
        for minFree in [Int64(8 << 20), 0] {
            let full = RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: minFree).decide(
                clips: clips, now: now, freeBytes: 0, protected: ["c"], fullDisk: 3 << 20)
            #expect(full.deletions.map(\.clip.relativePath) == ["a"], "min_free \(minFree)")
            #expect(full.deletions.allSatisfy { $0.reason == .diskFull })
        }
    }

    /// A clip moved aside as damaged is kept no longer than a clip: it is counted and goes
    /// oldest first, but it is never the newest clip that stays whatever the rules say (a
    /// power cut damages the newest clip; the event before it is the one to keep).
    @Test func aDamagedClipIsCountedButNeverTheNewestKept() {
        let clips = [
            clip("a.mov", ageDays: 3, mb: 10), clip("b.mov", ageDays: 2, mb: 10),
            clip("c.mov.damaged", ageDays: 1, mb: 10),
        ]
        let d = RetentionPolicy(maxAgeDays: nil, maxSize: 5 << 20, minFree: 0).deletions(
            clips: clips, now: now, freeBytes: 1 << 40, protected: [])
        #expect(d.map(\.clip.relativePath) == ["a.mov", "c.mov.damaged"])
    }

    @Test func nothingToDoWhenWithinLimits() {
        let clips = [clip("a", ageDays: 2, mb: 10)]
        #expect(
            RetentionPolicy(maxAgeDays: 30, maxSize: 100 << 20, minFree: 10 << 20).deletions(
                clips: clips, now: now, freeBytes: 1 << 30, protected: []
            ).isEmpty)
    }
}

@Suite struct ClipStoreTests {
    let naming = ClipNaming(
        pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: TimeZone(identifier: "UTC")!)
    let base = Date(timeIntervalSince1970: 1_796_000_000)

    /// Six 5 MB clips an hour apart, and things that are not clips: a file outside the
    /// pattern, and links with clip names.
    func store() -> (MemoryStorage, ClipStore, [String]) {
        let storage = MemoryStorage(capacity: 40 << 20)
        var names: [String] = []
        for i in 0..<6 {
            let date = base.addingTimeInterval(Double(i) * 3600)
            names.append(naming.relativePath(for: date))
            storage.put(names[i], [UInt8](repeating: 0, count: 5 << 20), modified: date)
        }
        storage.put(
            "2026-11-29/holiday.mov", [UInt8](repeating: 0, count: 1 << 20),
            modified: base.addingTimeInterval(-86_400 * 400))
        storage.link("2026-11-27/shed-20261127-000000.mov")
        return (storage, ClipStore(storage: storage, naming: naming), names)
    }

    @Test func sweepsOldestFirstDeletingOnlyItsOwnClips() throws {
        let (storage, store, names) = store()
        #expect(try store.clips().map(\.relativePath) == names.sorted())
        let free = try storage.freeBytes()
        #expect(free == 9 << 20)

        // Keep 17 MB free: 8 MB must go, so the two oldest clips but the open one.
        let swept = store.sweep(
            RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: 17 << 20), now: base, protected: [names[0]])
        let (deleted, errors) = (swept.deleted, swept.errors)
        #expect(errors.isEmpty)
        #expect(deleted.map(\.clip.relativePath) == [names[1], names[2]])
        #expect(deleted.allSatisfy { $0.reason == .freeSpaceBelow(bytes: 17 << 20) })
        #expect(try storage.freeBytes() == 19 << 20)
        #expect(
            storage.exists(names[0]) && storage.exists("2026-11-29/holiday.mov")
                && storage.exists("2026-11-27/shed-20261127-000000.mov"))

        // By age and size: everything of ours but the clip being written and the newest clip
        // saved can go; nothing else.
        let all = store.sweep(
            RetentionPolicy(maxAgeDays: 1, maxSize: 1, minFree: 0), now: base.addingTimeInterval(86_400 * 10),
            protected: [names[0]])
        #expect(all.deleted.count == 2)
        #expect(try store.clips().map(\.relativePath) == [names[0], names[5]])
        #expect(storage.fileNames == [names[0], names[5], "2026-11-29/holiday.mov"].sorted())
    }

    /// A clip's snapshot (`<clip>.jpg`) goes with it; other pictures stay.
    @Test func aClipsSnapshotIsDeletedWithIt() throws {
        let (storage, store, names) = store()
        let picture = ClipNaming.snapshotPath(of: names[1])
        #expect(picture == String(names[1].dropLast(4)) + ".jpg")
        storage.put(picture, [0xFF, 0xD8, 0xFF])
        storage.put(ClipNaming.snapshotPath(of: names[2]) + ".kept", [1])
        storage.put(ClipNaming.latestPicture, [0xFF, 0xD8, 0xFF])
        #expect(!(try store.clips().map(\.relativePath).contains(picture)), "a picture is no clip")
        let swept = store.sweep(
            RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: 12 << 20), now: base, protected: [names[0]])
        #expect(swept.deleted.map(\.clip.relativePath) == [names[1]])
        #expect(!storage.exists(picture))
        #expect(storage.exists(ClipNaming.snapshotPath(of: names[2]) + ".kept") && storage.exists("latest.jpg"))
    }

    /// A clip's picture counts in `max_size_mb` with it: six 5 MB clips with 1 MB pictures
    /// take 36 MB, over a 32 MB cap, so the oldest goes, and its picture with it; `latest.jpg`
    /// is no clip's.
    @Test func aClipsPictureCountsInTheStoreSize() throws {
        let (storage, store, names) = store()
        storage.capacity = 1 << 30
        for name in names { storage.put(ClipNaming.snapshotPath(of: name), [UInt8](repeating: 0xFF, count: 1 << 20)) }
        storage.put(ClipNaming.latestPicture, [UInt8](repeating: 0xFF, count: 4 << 20))
        let swept = store.sweep(
            RetentionPolicy(maxAgeDays: nil, maxSize: 32 << 20, minFree: 0), now: base, protected: [names[5]])
        #expect(swept.errors.isEmpty)
        #expect(swept.deleted.map(\.clip.relativePath) == [names[0]])
        #expect(!storage.exists(ClipNaming.snapshotPath(of: names[0])))
        #expect(names.dropFirst().allSatisfy { storage.exists($0) && storage.exists(ClipNaming.snapshotPath(of: $0)) })
        #expect(storage.exists(ClipNaming.latestPicture))
    }

    /// A clip moved aside as damaged (`NAME.mov.damaged`) is one of the agent's: listed,
    /// counted, deleted oldest first with its picture. One whose name is not of the pattern
    /// (nor named by the journal) is not.
    @Test func aDamagedClipIsTheAgentsToCountAndDelete() throws {
        let (storage, store, names) = store()
        let damaged = naming.relativePath(for: base.addingTimeInterval(-7200)) + ".damaged"
        storage.put(damaged, [UInt8](repeating: 0, count: 5 << 20), modified: base.addingTimeInterval(-7200))
        storage.put(ClipNaming.snapshotPath(of: damaged), [0xFF, 0xD8])
        storage.put("2026-11-29/holiday.mov.damaged", [0], modified: base.addingTimeInterval(-86_400 * 400))
        #expect(ClipNaming.snapshotPath(of: damaged) == String(damaged.dropLast(12)) + ".jpg")
        #expect(try store.clips().map(\.relativePath) == ([damaged] + names).sorted())
        let swept = store.sweep(
            RetentionPolicy(maxAgeDays: nil, maxSize: 26 << 20, minFree: 0), now: base, protected: [names[5]])
        #expect(swept.deleted.map(\.clip.relativePath) == [damaged, names[0]])
        #expect(!storage.exists(ClipNaming.snapshotPath(of: damaged)))
        #expect(storage.exists("2026-11-29/holiday.mov.damaged"))
    }

    @Test func refusesToDeleteWhatIsNotAClip() throws {
        let (storage, store, _) = store()
        #expect(throws: FileError.self) {
            try store.delete(StoredFile(relativePath: "2026-11-27/shed-20261127-000000.mov", size: 0, modified: Date()))
        }
        #expect(throws: FileError.self) {
            try store.delete(StoredFile(relativePath: "2026-11-29/holiday.mov", size: 0, modified: Date()))
        }
        #expect(throws: FileError.self) {
            try store.delete(
                StoredFile(relativePath: "../2026-11-30/shed-20261130-000000.mov", size: 0, modified: Date()))
        }
        #expect(storage.exists("2026-11-29/holiday.mov") && storage.exists("2026-11-27/shed-20261127-000000.mov"))
    }
}

@Suite struct EventsJournalTests {
    @Test func appendsOneLinePerClipAndReadsThemBack() throws {
        let storage = MemoryStorage()
        let journal = EventsJournal(storage: storage)
        let record = ClipRecord(
            file: "2026-11-30/shed-20261130-110405.mov", camera: "shed",
            start: "2026-11-30T11:04:05.000Z", end: "2026-11-30T11:04:17.500Z", cause: .motion,
            triggerTime: "2026-11-30T11:04:10.000Z",
            triggerSourceSeconds: 125.25, preRollSeconds: 5, durationSeconds: 12.5, frames: 375, audioFrames: 0,
            bytes: 1_234_567, peakScore: 0.061, part: 1)
        try journal.append(record)
        var second = record
        second.part = 2
        try journal.append(second)
        let text = String(decoding: storage.contents(EventsJournal.name) ?? [], as: UTF8.self)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(
            lines[0].hasPrefix(
                "{\"audio_frames\":0,\"bytes\":1234567,\"camera\":\"shed\",\"duration_s\":12.5,\"end\":\"2026-11-30T11:04:17.500Z\",\"file\":\"2026-11-30/shed-20261130-110405.mov\""
            ))
        for key in [
            "\"trigger\":\"motion\"", "\"trigger_time\":\"2026-11-30T11:04:10.000Z\"", "\"trigger_source_s\":125.25",
            "\"preroll_s\":5", "\"frames\":375", "\"peak_score\":0.061",
            "\"start\":",
        ] {
            #expect(lines[0].contains(key), "\(key) missing")
        }
        // A damaged line is reported, not fatal.
        storage.put(EventsJournal.name, Array((text + "{not json\n").utf8))
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
        let storage = MemoryStorage()
        let journal = EventsJournal(storage: storage)
        try journal.append(
            ClipRecord(
                file: "a.mov", camera: "shed", start: "2026-11-30T11:04:05.000Z", end: "2026-11-30T11:04:07.000Z",
                cause: nil, triggerTime: nil, triggerSourceSeconds: nil, preRollSeconds: nil, durationSeconds: 2,
                frames: 60,
                audioFrames: 0, bytes: 1000, peakScore: nil, part: nil, repaired: true))
        let line = String(decoding: storage.contents(EventsJournal.name) ?? [], as: UTF8.self)
        #expect(line.contains("\"repaired\":true"))
        #expect(!line.contains("trigger") && !line.contains("peak_score"))
        #expect(try journal.records().records.first?.repaired == true)
    }

    @Test func aFullDiskKeepsTheJournalAsItWasAndSaysSo() throws {
        let storage = MemoryStorage(capacity: 1000)
        let journal = EventsJournal(storage: storage)
        let record = ClipRecord(
            file: "a.mov", camera: "shed", start: "", end: "", cause: nil, triggerTime: nil, triggerSourceSeconds: nil,
            preRollSeconds: nil, durationSeconds: 1, frames: 30, audioFrames: 0, bytes: 1, peakScore: nil, part: 1)
        try journal.append(record)
        let before = storage.contents(EventsJournal.name)
        storage.fill()
        #expect(
            throws: EventsJournal.JournalError(
                description: "cannot append to \(journal.path): no space left on the device")
        ) {
            try journal.append(record)
        }
        #expect(storage.contents(EventsJournal.name) == before)
        #expect(try journal.records().records == [record])
    }
}
