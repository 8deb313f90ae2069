import Foundation
import TestSupport
import Testing

@testable import Recorder

/// Retention and the upload queue: a clip not uploaded yet is kept by every rule but the full
/// disk's (a write failed for want of room, or less than `min_free_mb` free).
extension RetentionPolicyTests {
    @Test func agesAndSizesKeepAClipThatWaits() {
        let clips = [
            clip("a", ageDays: 90, mb: 10), clip("b", ageDays: 60, mb: 10), clip("c", ageDays: 40, mb: 10),
            clip("d", ageDays: 1, mb: 10),
        ]
        let waiting: UploadHold = ["a", "c"]
        for policy in [
            RetentionPolicy(maxAgeDays: 30, maxSize: nil, minFree: 0),
            RetentionPolicy(maxAgeDays: nil, maxSize: 5 << 20, minFree: 0),
        ] {
            let decision = policy.decide(clips: clips, now: now, freeBytes: 20 << 20, protected: [], waiting: waiting)
            #expect(decision.deletions.map(\.clip.relativePath) == ["b"], "\(policy)")
            #expect(decision.deletions.allSatisfy { !$0.notUploaded })
            // Without uploads, the same rules delete them.
            let without = policy.decide(clips: clips, now: now, freeBytes: 20 << 20, protected: [])
            #expect(without.deletions.map(\.clip.relativePath).contains("a"), "\(policy)")
        }
    }

    /// Less than `min_free_mb` free is a full disk before a write fails: the oldest clips go,
    /// waiting or not, each said as not uploaded.
    @Test func tooLittleFreeSpaceDeletesTheOldestEvenIfItWaits() {
        let clips = [
            clip("a", ageDays: 90, mb: 10), clip("b", ageDays: 60, mb: 10), clip("c", ageDays: 40, mb: 10),
            clip("d", ageDays: 1, mb: 10),
        ]
        let policy = RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: 30 << 20)
        let decision = policy.decide(clips: clips, now: now, freeBytes: 15 << 20, protected: [], waiting: ["a", "c"])
        #expect(decision.deletions.map(\.clip.relativePath) == ["a", "b"])
        #expect(decision.deletions.map(\.notUploaded) == [true, false])
        #expect(decision.deletions.allSatisfy { $0.reason == .freeSpaceBelow(bytes: 30 << 20) })
        #expect(decision.shortfall == nil)
        // Enough free: nothing goes.
        #expect(
            policy.decide(clips: clips, now: now, freeBytes: 40 << 20, protected: [], waiting: ["a"]).deletions.isEmpty)
    }

    @Test func aFullDiskDeletesTheOldestEvenIfItWaits() {
        let clips = [clip("a", ageDays: 3, mb: 2), clip("b", ageDays: 2, mb: 2), clip("c", ageDays: 1, mb: 2)]
        let decision = RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: 0).decide(
            clips: clips, now: now, freeBytes: 0, protected: [], fullDisk: 3 << 20, waiting: ["a", "b"])
        #expect(decision.deletions.map(\.clip.relativePath) == ["a", "b"])
        #expect(decision.deletions.allSatisfy { $0.notUploaded && $0.reason == .diskFull })
        // Only as much as is needed: one clip's room, the oldest.
        let one = RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: 0).decide(
            clips: clips, now: now, freeBytes: 0, protected: [], fullDisk: 1 << 20, waiting: ["b"])
        #expect(one.deletions.map(\.clip.relativePath) == ["a"] && one.deletions.allSatisfy { !$0.notUploaded })
    }

    @Test func theSweepReadsWhatWaits() throws {
        let storage = MemoryStorage()
        for name in [
            "2026-01-01/shed-20260101-000000.mov", "2026-01-02/shed-20260102-000000.mov",
            "2026-01-03/shed-20260103-000000.mov",
        ] {
            let movie = try storage.createMovie(name)
            try movie.append([UInt8](repeating: 1, count: 100))
            try movie.close()
        }
        let store = ClipStore(
            storage: storage,
            naming: ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: TimeZone.gmt))
        let sweep = store.sweep(
            RetentionPolicy(maxAgeDays: nil, maxSize: 0, minFree: 0), now: now, protected: [],
            waiting: ["2026-01-01/shed-20260101-000000.mov"])
        #expect(sweep.deleted.map(\.clip.relativePath) == ["2026-01-02/shed-20260102-000000.mov"])
    }
}

@Suite struct UploadJournalTests {
    func text(_ records: [UploadRecord]) -> [UInt8] { records.flatMap(UploadJournal.line) }

    @Test func whatWaitsIsWhatWasQueuedAndNeitherUploadedNorDeleted() {
        let journal = UploadJournal(
            text([
                UploadRecord(queued: "a.mov", at: "t1"), UploadRecord(queued: "b.mov", at: "t2"),
                UploadRecord(queued: "c.mov", at: "t3"),
                UploadRecord(uploaded: "b.mov", at: "t4", url: "s3://x/b.mov", bytes: 10, seconds: 0.5),
                UploadRecord(deleted: "c.mov", at: "t5", reason: "the disk was full, before its upload"),
                UploadRecord(queued: "d.mov", at: "t6"), UploadRecord(queued: "a.mov", at: "t7"),
            ]))
        #expect(journal.backlog == ["a.mov", "d.mov"])
        #expect(journal.waits("a.mov") && !journal.waits("b.mov") && !journal.waits("c.mov"))
        #expect(journal.uploads["b.mov"]?.url == "s3://x/b.mov" && journal.uploads["b.mov"]?.bytes == 10)
        #expect(journal.backlogCount == 2)
    }

    /// A line a power cut left half written is skipped; the lines after it count.
    @Test func aCutLineIsSkipped() {
        var bytes = text([UploadRecord(queued: "a.mov", at: "t1")])
        bytes += Array(#"{"at":"t2","uploa"#.utf8) + [10]
        bytes += text([UploadRecord(queued: "b.mov", at: "t3")])
        let journal = UploadJournal(bytes)
        #expect(journal.backlog == ["a.mov", "b.mov"] && journal.unreadableLines == 1)
    }

    /// Written anew, the queue says the same in fewer lines.
    @Test func compactedKeepsWhatWaitsAndWhatWasUploaded() {
        var records: [UploadRecord] = []
        for index in 0..<1000 {
            records.append(UploadRecord(queued: "\(index).mov", at: "q\(index)"))
            if index % 10 == 0 {
                records.append(UploadRecord(uploaded: "\(index).mov", at: "u\(index)", url: "u", bytes: 1))
            } else if index % 10 != 9 {
                records.append(UploadRecord(deleted: "\(index).mov", at: "d\(index)"))
            }
        }
        let journal = UploadJournal(text(records))
        #expect(journal.wantsCompacting)
        let compacted = UploadJournal(text(journal.compacted))
        #expect(compacted.backlog == journal.backlog)
        #expect(compacted.uploads == journal.uploads)
        #expect(compacted.lines == 200 && !compacted.wantsCompacting)
    }

    /// An upload the catalogue holds is forgotten: the queue keeps what waits and what was set
    /// aside, and written anew it holds no line of it; a clip that waits is not forgotten so.
    @Test func anUploadForgottenLeavesTheQueueAndItsFile() {
        var journal = UploadJournal()
        for index in 0..<300 {
            journal.apply(UploadRecord(queued: "\(index).mov", at: "q"))
            if index < 299 { journal.apply(UploadRecord(uploaded: "\(index).mov", at: "u", url: "s3://x", bytes: 1)) }
        }
        journal.apply(UploadRecord(setAside: "0.mov", at: "s", reason: "403"))
        for index in 0..<300 { journal.forgetUpload("\(index).mov") }
        #expect(journal.uploads.isEmpty)
        #expect(journal.backlog == ["299.mov"] && journal.setAside.keys.sorted() == ["0.mov"])
        #expect(journal.compacted.compactMap(\.file) == ["299.mov", "0.mov"])
    }
}
