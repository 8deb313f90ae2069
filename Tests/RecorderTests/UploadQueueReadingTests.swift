import Foundation
import Media
import TestSupport
import Testing

@testable import Recorder

/// The upload queue read a piece at a time, the states it keeps of each file, and retention
/// while the queue has not been read yet.
@Suite struct UploadQueueReadingTests {
    func text(_ records: [UploadRecord]) -> [UInt8] { records.flatMap(UploadJournal.line) }

    /// A queue with every kind of line, and a line a power cut tore.
    var sample: [UInt8] {
        text([
            UploadRecord(queued: "a.mov", at: "t1"), UploadRecord(queued: "b.mov", at: "t2"),
            UploadRecord(queued: "c.mov", at: "t3"),
        ]) + Array(#"{"at":"t4","uploa"#.utf8) + [10]
            + text([
                UploadRecord(uploaded: "a.mov", at: "t5", url: "s3://x/a.mov", bytes: 10, seconds: 0.5, readBack: true),
                UploadRecord(setAside: "b.mov", at: "t6", reason: "PUT: 403 AccessDenied", tries: 5),
                UploadRecord(queued: "d.mov", at: "t7"),
            ])
    }

    func same(_ a: UploadJournal, _ b: UploadJournal) -> Bool {
        a.backlog == b.backlog && a.uploads == b.uploads && a.setAside == b.setAside && a.lines == b.lines
            && a.unreadableLines == b.unreadableLines
    }

    @Test func eachFileHasOneState() {
        let journal = UploadJournal(sample)
        #expect(journal.backlog == ["c.mov", "d.mov"])
        #expect(journal.state(of: "a.mov") == .uploaded(journal.uploads["a.mov"]!))
        #expect(journal.uploads["a.mov"]?.readBack == true)
        #expect(journal.setAside["b.mov"]?.reason == "PUT: 403 AccessDenied" && !journal.waits("b.mov"))
        #expect(journal.waitingFiles == ["c.mov", "d.mov"] && journal.backlogCount == 2)
        #expect(journal.lines == 7 && journal.unreadableLines == 1)
    }

    /// Read in pieces of any size, cut anywhere, the queue is the same as read whole.
    @Test func readingPieceByPieceIsReadingWhole() {
        let bytes = sample
        let whole = UploadJournal(bytes)
        for cut in 0...bytes.count {
            var reader = UploadJournal.Reader()
            reader.take(Array(bytes[..<cut]))
            reader.take(Array(bytes[cut...]))
            #expect(same(reader.finish(), whole), "cut at \(cut)")
        }
        for size in 1...9 {
            var reader = UploadJournal.Reader()
            for start in stride(from: 0, to: bytes.count, by: size) {
                reader.take(Array(bytes[start..<min(bytes.count, start + size)]))
            }
            #expect(same(reader.finish(), whole), "pieces of \(size)")
        }
    }

    /// A line longer than any line of ours (garbage without a newline) is counted once and
    /// never kept whole; the lines after it are read.
    @Test func anOverlongLineIsCountedNotKept() {
        var bytes = text([UploadRecord(queued: "a.mov", at: "t1")])
        bytes += [UInt8](repeating: UInt8(ascii: "x"), count: UploadJournal.Reader.longestLine * 3) + [10]
        bytes += text([UploadRecord(queued: "b.mov", at: "t2")])
        var reader = UploadJournal.Reader()
        for start in stride(from: 0, to: bytes.count, by: 4096) {
            reader.take(Array(bytes[start..<min(bytes.count, start + 4096)]))
        }
        let journal = reader.finish()
        #expect(journal.backlog == ["a.mov", "b.mov"] && journal.unreadableLines == 1 && journal.lines == 3)
    }

    /// Set aside, a clip leaves the queue; queued again (a restart), it waits in its new place.
    @Test func aClipSetAsideLeavesTheQueueUntilItIsQueuedAgain() {
        var journal = UploadJournal(sample)
        journal.apply(UploadRecord(queued: "b.mov", at: "t8"))
        #expect(journal.backlog == ["c.mov", "d.mov", "b.mov"] && journal.setAside.isEmpty)
        journal.apply(UploadRecord(deleted: "c.mov", at: "t9"))
        #expect(journal.state(of: "c.mov") == nil && journal.backlog == ["d.mov", "b.mov"])
    }

    /// Written anew, the queue says the same in as many lines as it names files.
    @Test func compactedKeepsEveryStateInOrder() {
        var journal = UploadJournal(sample)
        let compacted = UploadJournal(text(journal.compacted))
        #expect(same(compacted, UploadJournal(text(journal.compacted))))
        #expect(compacted.backlog == journal.backlog && compacted.uploads == journal.uploads)
        #expect(compacted.setAside == journal.setAside && compacted.lines == 4 && compacted.unreadableLines == 0)
        journal.rewritten()
        #expect(journal.lines == 4 && !journal.wantsCompacting)
    }

    /// Read from the storage a piece at a time, never whole.
    @Test func readFromTheStorageAPieceAtATime() throws {
        let storage = MemoryStorage()
        #expect(try UploadJournal.read(from: storage) == nil)
        storage.put(UploadJournal.name, sample)
        let journal = try #require(try UploadJournal.read(from: storage))
        #expect(same(journal, UploadJournal(sample)))
        storage.link(UploadJournal.name)
        #expect {
            try UploadJournal.read(from: storage)
        } throws: { ($0 as? FileError)?.isNotRegularFile == true }
    }
}

extension RetentionPolicyTests {
    /// Until the upload queue is read, every clip is held as if it waited: only a full disk
    /// deletes one.
    @Test func whileTheQueueIsReadOnlyAFullDiskDeletes() {
        let clips = [clip("a", ageDays: 90, mb: 10), clip("b", ageDays: 60, mb: 10), clip("c", ageDays: 1, mb: 10)]
        let policy = RetentionPolicy(maxAgeDays: 30, maxSize: 5 << 20, minFree: 0)
        #expect(
            policy.decide(clips: clips, now: now, freeBytes: 20 << 20, protected: [], waiting: .all).deletions.isEmpty)
        let full = policy.decide(clips: clips, now: now, freeBytes: 0, protected: [], fullDisk: 1 << 20, waiting: .all)
        #expect(full.deletions.map(\.clip.relativePath) == ["a"] && full.deletions.allSatisfy(\.notUploaded))
    }
}
