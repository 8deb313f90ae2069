import Foundation
import Media
import TestSupport
import Testing

@testable import Recorder

/// Four lines as the agent writes them, with names that put braces, quotes, a backslash and
/// non-ASCII letters inside strings.
enum JournalFixture {
    static let records: [ClipRecord] = [
        ClipRecord(
            file: "2026-11-30/shed-20261130-110405.mov", camera: "shed", start: "2026-11-30T11:04:05.000Z",
            end: "2026-11-30T11:04:17.500Z", cause: .motion, triggerTime: "2026-11-30T11:04:10.000Z",
            triggerSourceSeconds: 125.25,
            preRollSeconds: 5, durationSeconds: 12.5, frames: 375, audioFrames: 600_000, bytes: 1_234_567,
            peakScore: 0.061, part: 1),
        ClipRecord(
            file: "odd/{brace} \"quote\" back\\slash}.mov", camera: "shed", start: "2026-11-30T12:00:00.000Z",
            end: "2026-11-30T12:00:02.000Z", cause: .motion, triggerTime: "2026-11-30T12:00:01.000Z",
            triggerSourceSeconds: 3,
            preRollSeconds: 1, durationSeconds: 2, frames: 60, audioFrames: 0, bytes: 1000, peakScore: 0.5, part: 2),
        ClipRecord(
            file: "2026-12-01/shed-20261201-000000.mov", camera: "shed", start: "2026-12-01T00:00:00.000Z",
            end: "2026-12-01T00:00:02.000Z", cause: nil, triggerTime: nil, triggerSourceSeconds: nil,
            preRollSeconds: nil,
            durationSeconds: 2, frames: 60, audioFrames: 0, bytes: 1000, peakScore: nil, part: nil, repaired: true),
        ClipRecord(
            file: "ünïcode/ñ-20261202.mov", camera: "garten", start: "2026-12-02T00:00:00.000+01:00",
            end: "2026-12-02T00:00:01.000+01:00", cause: nil, triggerTime: nil, triggerSourceSeconds: nil,
            preRollSeconds: nil,
            durationSeconds: 1, frames: 30, audioFrames: 8000, bytes: 999, peakScore: nil, part: nil, rebuilt: true),
    ]

    /// Each record's line, as `EventsJournal.append` writes it.
    static func lines(_ records: [ClipRecord] = records) throws -> [[UInt8]] {
        try records.map { record in
            let storage = MemoryStorage()
            try EventsJournal(storage: storage).append(record)
            return try #require(storage.contents(EventsJournal.name))
        }
    }

    /// Where, in `line`, the value of its `file` field ends (after its closing quote).
    static func fileFieldEnd(_ line: [UInt8], _ file: String) throws -> Int {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let key = Array("\"file\":".utf8) + [UInt8](try encoder.encode(file))
        let start = try #require(line.indices.first { line[$0...].starts(with: key) })
        return start + key.count
    }
}

@Suite struct JournalReadingTests {
    /// The journal cut at every byte — a line torn there, as a full disk or a crash leaves
    /// it — with the rest of the journal glued after it, no newline between: every line but
    /// the torn one is read, the torn one is said (unless it lost only its newline, or
    /// nothing), and pruning keeps every line of a clip still on disk.
    /// Lines written before `trigger` said what started the event held its time there: they
    /// read as motion events triggered then; lines written now keep both apart.
    @Test func linesOfEarlierVersionsReadWithTheirTriggerTime() throws {
        let old = Array(
            #"{"audio_frames":0,"bytes":1000,"camera":"shed","duration_s":2,"end":"2026-11-30T12:00:02.000Z","file":"a.mov","frames":60,"start":"2026-11-30T12:00:00.000Z","trigger":"2026-11-30T12:00:01.000Z"}"#
                .utf8)
        let record = try JSONDecoder().decode(ClipRecord.self, from: Data(old))
        #expect(record.cause == .motion && record.triggerTime == "2026-11-30T12:00:01.000Z")
        var external = record
        external.cause = .external
        external.snapshot = "a.mov.jpg"
        let written = try JSONEncoder().encode(external)
        let text = String(decoding: written, as: UTF8.self)
        #expect(text.contains(#""trigger":"external""#) && text.contains(#""trigger_time":"2026-11-30T12:00:01.000Z""#))
        #expect(try JSONDecoder().decode(ClipRecord.self, from: written) == external)
    }

    @Test func aTornLineNeverHidesTheLinesAfterIt() throws {
        let records = JournalFixture.records
        let lines = try JournalFixture.lines()
        let storage = MemoryStorage()
        let journal = EventsJournal(storage: storage)
        var cuts = 0
        for (i, line) in lines.enumerated() {
            let fileEnd = try JournalFixture.fileFieldEnd(line, records[i].file)
            for cut in 0..<line.count {
                let torn = Array(lines[..<i].joined()) + line[..<cut] + Array(lines[(i + 1)...].joined())
                let whole = cut == line.count - 1  // all but the newline
                let expected = records.enumerated().filter { $0.offset != i || whole }.map(\.element)
                let where_ = "line \(i + 1) cut after \(cut) bytes"

                storage.put(EventsJournal.name, torn)
                let (read, damaged) = try journal.records()
                // Retention's quick look for the files finds what the reader finds.
                #expect(
                    JournalText.files(in: torn) == Set(JournalText(torn).pieces.flatMap(\.piece.files)), "\(where_)")
                #expect(read == expected, "\(where_)")
                #expect(damaged == (cut == 0 || whole ? [] : [i + 1]), "\(where_)")

                // Every clip is still there: nothing dropped, nothing written.
                #expect(try journal.prune { _ in true } == 0, "\(where_)")
                #expect(storage.contents(EventsJournal.name) == torn, "\(where_)")

                // The clip of the line after the torn one is gone: its line alone goes, and
                // what is left is one record or one damaged piece per line.
                let next = records[(i + 1) % records.count].file
                #expect(try journal.prune { $0 != next } == 1, "\(where_)")
                let afterPrune = try journal.records()
                #expect(afterPrune.records == expected.filter { $0.file != next }, "\(where_)")
                #expect(afterPrune.unreadableLines.count == damaged.count, "\(where_)")

                // The torn line's own clip is gone: its damaged piece goes too when it still
                // names it.
                storage.put(EventsJournal.name, torn)
                let dropped = try journal.prune { $0 != records[i].file }
                let namesIt = cut >= fileEnd
                #expect(dropped == (whole || namesIt ? 1 : 0), "\(where_)")
                let left = try journal.records()
                #expect(left.records == expected.filter { $0.file != records[i].file }, "\(where_)")
                #expect(left.unreadableLines.isEmpty == (cut == 0 || whole || namesIt), "\(where_)")
                cuts += 1
            }
        }
        #expect(cuts == lines.joined().count)
    }

    /// Several torn lines in a row, zeros where a power cut left a block unwritten, garbage,
    /// a line that lost only its newline, carriage returns: every whole record is read.
    @Test func whateverSurroundsThemEveryWholeRecordIsRead() throws {
        let lines = try JournalFixture.lines()
        let records = JournalFixture.records
        let storage = MemoryStorage()
        let journal = EventsJournal(storage: storage)
        var bytes: [UInt8] = []
        bytes += lines[0].prefix(40)
        bytes += lines[1].prefix(90)
        bytes += lines[2].dropLast()
        bytes += lines[3].dropLast()
        bytes += [13, 10]
        bytes += [UInt8](repeating: 0, count: 512)
        bytes += lines[0]
        bytes += Array("}{\"{not json\"}\n\n{\"a\":1}\n".utf8)
        bytes += lines[1].prefix(lines[1].count - 2)
        bytes += [0xFF, 0xFE]
        bytes += lines[3]
        storage.put(EventsJournal.name, bytes)
        let (read, damaged) = try journal.records()
        #expect(read == [records[2], records[3], records[0], records[3]])
        #expect(damaged == [1, 2, 3, 5, 6])

        // Pruning splits them onto lines of their own, keeps every damaged piece that names no
        // gone clip, and drops the lines of the clip that is gone.
        #expect(try journal.prune { $0 != records[3].file } == 2)
        let text = String(decoding: try #require(storage.contents(EventsJournal.name)), as: UTF8.self)
        #expect(text.split(separator: "\n", omittingEmptySubsequences: false).count == 7 + 1, "\(text)")
        let after = try journal.records()
        #expect(after.records == [records[2], records[0]])
        #expect(after.unreadableLines.count == 5)
    }

    /// Two lines torn after their `file` fields, glued together and to the next line: the
    /// damaged piece names both clips (each with the camera before it), and pruning keeps
    /// it while either clip is there.
    @Test func aDamagedPieceNamesEveryClipItStillHolds() throws {
        let records = JournalFixture.records
        let lines = try JournalFixture.lines()
        let first = Array(lines[0].prefix(try JournalFixture.fileFieldEnd(lines[0], records[0].file)))
        let second = Array(lines[3].prefix(try JournalFixture.fileFieldEnd(lines[3], records[3].file) + 1))
        let bytes = first + second + lines[2]
        let text = JournalText(bytes)
        #expect(text.records == [records[2]])
        guard case .damaged(_, let naming) = try #require(text.pieces.first?.piece) else {
            Issue.record("the first piece is not a damaged one")
            return
        }
        #expect(
            naming == [
                .init(file: records[0].file, camera: "shed"), .init(file: records[3].file, camera: "garten"),
            ])
        #expect(JournalText.files(in: bytes) == [records[0].file, records[3].file, records[2].file])

        let storage = MemoryStorage()
        let journal = EventsJournal(storage: storage)
        storage.put(EventsJournal.name, bytes)
        #expect(try journal.prune { $0 != records[0].file } == 0)
        #expect(try journal.prune { $0 == records[2].file } == 1)
        let (read, damaged) = try journal.records()
        #expect(read == [records[2]] && damaged.isEmpty)
    }
}
