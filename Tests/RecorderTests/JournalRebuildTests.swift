import Foundation
import Media
import QuickTime
import TestSupport
import Testing

@testable import Recorder

/// The journal rebuilt from the clips on disk: when it is missing, behind, or damaged.
@Suite struct JournalRebuildTests {
    let utc = TimeZone(identifier: "UTC")!
    let base = Date(timeIntervalSince1970: 1_796_036_645)  // 2026-11-30 11:04:05 UTC
    var naming: ClipNaming { ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: utc) }

    /// Three clips an hour apart (the middle one without sound) and a file that is not one;
    /// the lines the agent wrote for them (trigger, score and all), and their names.
    func clips(_ storage: MemoryStorage) throws -> (records: [ClipRecord], names: [String]) {
        var records: [ClipRecord] = []
        for i in 0..<3 {
            let created = base.addingTimeInterval(Double(i) * 3600)
            let name = naming.relativePath(for: created)
            let summary = try TestClips.write(name, into: storage, created: created, gops: i + 1, audio: i != 1)
            records.append(
                ClipRecord(
                    file: name, camera: "shed", start: ClipRecord.timestamp(created, timeZone: utc),
                    end: ClipRecord.timestamp(created.addingTimeInterval(summary.duration.seconds), timeZone: utc),
                    cause: .motion, triggerTime: ClipRecord.timestamp(created.addingTimeInterval(1), timeZone: utc),
                    triggerSourceSeconds: 1, preRollSeconds: 1,
                    durationSeconds: summary.duration.seconds.rounded(toPlaces: 3),
                    frames: summary.videoFrames, audioFrames: summary.audioFrames, bytes: summary.bytes,
                    peakScore: 0.25, part: 1))
        }
        storage.put("2026-11-29/holiday.mov", [UInt8](repeating: 0, count: 100))
        return (records, records.map(\.file))
    }

    /// The line a rebuild writes for the agent's line `record`: what the movie says.
    func rebuilt(_ record: ClipRecord) -> ClipRecord {
        ClipRecord(
            file: record.file, camera: record.camera, start: record.start, end: record.end, cause: nil,
            triggerTime: nil,
            triggerSourceSeconds: nil, preRollSeconds: nil, durationSeconds: record.durationSeconds,
            frames: record.frames, audioFrames: record.audioFrames, bytes: record.bytes, peakScore: nil, part: nil,
            rebuilt: true)
    }

    func lines(_ records: [ClipRecord]) throws -> [[UInt8]] { try JournalFixture.lines(records) }

    @Test func aMissingJournalIsRebuiltFromTheClips() throws {
        let storage = MemoryStorage()
        let (records, _) = try clips(storage)
        let journal = EventsJournal(storage: storage)
        let store = ClipStore(storage: storage, naming: naming)

        let rebuild = try journal.rebuild(from: store)
        #expect(rebuild.written)
        #expect(rebuild.added == records.map(rebuilt))
        #expect(rebuild.kept.isEmpty && rebuild.unreadable.isEmpty && rebuild.damagedLines.isEmpty)
        #expect(try journal.records().records == records.map(rebuilt))
        #expect(records[1].audioFrames == 0 && records[0].audioFrames > 0 && records[2].frames == 30)
        let text = String(decoding: try #require(storage.contents(EventsJournal.name)), as: UTF8.self)
        #expect(text.contains("\"rebuilt\":true") && !text.contains("trigger") && !text.contains("peak_score"))
        #expect(!text.contains("preroll_s") && !text.contains("\"part\""))

        // Nothing more to do.
        let again = try journal.rebuild(from: store)
        #expect(!again.written && again.added.isEmpty && again.kept == records.map(rebuilt))
        #expect(storage.contents(EventsJournal.name) == Array(text.utf8))
    }

    /// What a full disk did: the second line torn, the third glued to it. Whether the torn
    /// piece still names its clip or not, the clip gets a line again and the piece goes;
    /// the other lines stay byte for byte.
    @Test func aTornLineIsReplacedByARebuiltOne() throws {
        let storage = MemoryStorage()
        let (records, _) = try clips(storage)
        let lines = try lines(records)
        let journal = EventsJournal(storage: storage)
        let store = ClipStore(storage: storage, naming: naming)
        let fileEnd = try JournalFixture.fileFieldEnd(lines[1], records[1].file)
        for cut in [1, fileEnd - 3, fileEnd + 1, lines[1].count - 2] {
            storage.put(EventsJournal.name, lines[0] + Array(lines[1].prefix(cut)) + lines[2])
            #expect(try journal.records().records == [records[0], records[2]], "cut at \(cut)")
            // What `vigil clips` lists before a rescan: every clip.
            let preview = try journal.rebuild(from: store, write: false)
            #expect(!preview.written && preview.records.map(\.file).sorted() == records.map(\.file).sorted())
            #expect(storage.contents(EventsJournal.name) == lines[0] + Array(lines[1].prefix(cut)) + lines[2])

            let rebuild = try journal.rebuild(from: store)
            #expect(rebuild.written && rebuild.added == [rebuilt(records[1])], "cut at \(cut)")
            #expect(rebuild.damagedLines == [2] && rebuild.droppedDamaged == 1, "cut at \(cut)")
            #expect(
                try storage.contents(EventsJournal.name) == lines[0] + lines[2] + self.lines([rebuilt(records[1])])[0])
            let (read, damaged) = try journal.records()
            #expect(damaged.isEmpty && Set(read.map(\.file)) == Set(records.map(\.file)), "cut at \(cut)")
        }
    }

    /// Killed between a clip's close and its line: the line is added, the others stay.
    @Test func aJournalBehindGetsTheMissingLines() throws {
        let storage = MemoryStorage()
        let (records, _) = try clips(storage)
        let lines = try lines(records)
        storage.put(EventsJournal.name, lines[0] + lines[1])
        let rebuild = try EventsJournal(storage: storage).rebuild(from: ClipStore(storage: storage, naming: naming))
        #expect(rebuild.added == [rebuilt(records[2])] && rebuild.kept == [records[0], records[1]])
        #expect(
            try storage.contents(EventsJournal.name) == lines[0] + lines[1] + self.lines([rebuilt(records[2])])[0])
    }

    /// A damaged piece that names no clip stays while a clip on disk has no line and cannot
    /// be read (it may be that clip's line); once the clip is repaired and gets its line, it goes.
    @Test func aDamagedLineStaysWhileAClipCannotBeRead() throws {
        let storage = MemoryStorage()
        let (records, _) = try clips(storage)
        let lines = try lines(records)
        let interrupted = naming.relativePath(for: base.addingTimeInterval(4 * 3600))
        try TestClips.writeInterrupted(interrupted, into: storage, created: base.addingTimeInterval(4 * 3600))
        let damaged = Array(lines[2].prefix(20))
        storage.put(EventsJournal.name, lines[0] + lines[1] + damaged + lines[2])
        let journal = EventsJournal(storage: storage)
        let store = ClipStore(storage: storage, naming: naming)

        // The damaged piece stays, on a line of its own.
        let rebuild = try journal.rebuild(from: store)
        #expect(rebuild.unreadable.map(\.file) == [interrupted] && rebuild.added.isEmpty)
        #expect(rebuild.droppedDamaged == 0 && rebuild.written)
        #expect(storage.contents(EventsJournal.name) == Array([lines[0], lines[1], damaged, [10], lines[2]].joined()))

        let report = try #require(
            try MovieRepair.repair(
                path: storage.path(interrupted), opening: { _ throws(FileError) in try storage.openMovie(interrupted) })
        )
        let repaired = try journal.rebuild(from: store)
        #expect(repaired.written && repaired.unreadable.isEmpty && repaired.droppedDamaged == 1)
        #expect(repaired.added.map(\.file) == [interrupted] && repaired.added.first?.frames == report.videoFrames)
        #expect(try journal.records().unreadableLines.isEmpty)
    }

    /// A rebuilt line written while the agent was closing the clip (`vigil clips --rescan`
    /// beside it) gives way to the agent's line.
    @Test func aRebuiltLineGivesWayToTheAgentsOwn() throws {
        let storage = MemoryStorage()
        let (records, _) = try clips(storage)
        let lines = try lines(records)
        let rebuiltLine = try self.lines([rebuilt(records[2])])[0]
        storage.put(EventsJournal.name, lines[0] + lines[1] + rebuiltLine + lines[2])
        let rebuild = try EventsJournal(storage: storage).rebuild(from: ClipStore(storage: storage, naming: naming))
        #expect(rebuild.written && rebuild.droppedDuplicates == 1 && rebuild.kept == records)
        #expect(storage.contents(EventsJournal.name) == lines[0] + lines[1] + lines[2])
    }

    /// Lines of clips no longer on disk are history: the rebuild keeps them (pruning drops
    /// them when retention deletes a clip). A clip on disk never loses its line.
    @Test func noLineIsDroppedButDamagedPiecesAndDuplicates() throws {
        let storage = MemoryStorage()
        let (records, names) = try clips(storage)
        try storage.delete(names[0])
        let lines = try lines(records)
        storage.put(EventsJournal.name, lines[0] + lines[1] + lines[2])
        let rebuild = try EventsJournal(storage: storage).rebuild(from: ClipStore(storage: storage, naming: naming))
        #expect(!rebuild.written && rebuild.kept == records)
    }

    /// A clip written under an earlier pattern and camera name, whose line was torn after its
    /// file: the damaged piece still names it, so it gets its line back (with the camera the
    /// piece names) and stays the agent's.
    @Test func aClipKnownOnlyToADamagedLineGetsItsLineBack() throws {
        let storage = MemoryStorage()
        let (records, _) = try clips(storage)
        let old = "old/barn-110405.mov"
        let summary = try TestClips.write(old, into: storage, created: base.addingTimeInterval(-86_400), gops: 1)
        var oldRecord = records[0]
        oldRecord.file = old
        oldRecord.camera = "barn"
        let lines = try lines(records + [oldRecord])
        let torn = Array(lines[3].prefix(try JournalFixture.fileFieldEnd(lines[3], old) + 5))
        storage.put(EventsJournal.name, lines[0] + lines[1] + torn + lines[2])
        let store = ClipStore(storage: storage, naming: naming)
        #expect(try store.clips().map(\.relativePath).contains(old))

        let rebuild = try EventsJournal(storage: storage).rebuild(from: store)
        let added = try #require(rebuild.added.first)
        #expect(rebuild.added.count == 1 && rebuild.droppedDamaged == 1)
        #expect(added.file == old && added.camera == "barn" && added.frames == summary.videoFrames)
        #expect(added.start == "2026-11-29T11:04:05.000Z" && added.rebuilt == true)
        #expect(try store.clips().map(\.relativePath).contains(old))
    }

    /// `vigil clips --rescan` beside the agent: a line the agent appends while the clips are
    /// read is kept (the rebuild starts again on the journal as it is now).
    @Test func aLineAppendedMeanwhileIsKept() throws {
        let memory = MemoryStorage()
        let (records, _) = try clips(memory)
        let lines = try lines(records)
        memory.put(EventsJournal.name, lines[0])
        let line = lines[1]
        let storage = JournalReadHook(memory) { n throws(FileError) in
            if n == 2 { try memory.append(line, to: EventsJournal.name) }
        }
        let rebuild = try EventsJournal(storage: storage).rebuild(from: ClipStore(storage: storage, naming: naming))
        #expect(rebuild.written && rebuild.kept == [records[0], records[1]] && rebuild.added == [rebuilt(records[2])])
        #expect(try memory.contents(EventsJournal.name) == lines[0] + lines[1] + self.lines([rebuilt(records[2])])[0])
    }
}
