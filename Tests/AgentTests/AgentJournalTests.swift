import AgentTestSupport
import Capture
import Foundation
import Media
import Recorder
import TestSupport
import Testing

@testable import Agent

/// What the agent does at start with what an earlier run left in the journal.
@Suite(.serialized) struct AgentJournalTests {
    /// The test configuration's names, in the agent's time zone.
    static let naming = ClipNaming(
        pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "yard", timeZone: SystemTimeZone())

    /// `count` times an hour apart, the last an hour before `now`, and the clip names `naming`
    /// gives them.
    static func hourly(_ count: Int, before now: Date) -> (dates: [Date], names: [String]) {
        let dates = (1...count).map { now.addingTimeInterval(-Double(count + 1 - $0) * 3600) }
        return (dates, dates.map { naming.relativePath(for: $0) })
    }

    /// An earlier run left: a clip whose line a full disk tore (the next line glued to it), a
    /// clip whose line it never wrote (killed between the close and the line), and a clip
    /// written under an earlier file pattern and camera name, 40 days old, that the journal
    /// names; beside them, a file with a name of that earlier pattern that the journal does
    /// not name. At start the journal gets every clip's line back, and retention deletes the
    /// old clip (and its line) but not the file that is not the agent's.
    @Test func theJournalIsRebuiltAtStartAndRetentionSeesEveryClipTheAgentWrote() throws {
        let storage = MemoryStorage()
        let now = Date()
        let naming = Self.naming
        let (dates, names) = Self.hourly(4, before: now)
        let old = "cam/barn_20200101000000.mov"
        let stranger = "cam/barn_20200101010000.mov"
        storage.now = now.addingTimeInterval(-40 * 86_400)
        var summaries = [try TestClips.write(old, into: storage, created: storage.now, gops: 1)]
        try TestClips.write(stranger, into: storage, created: storage.now, gops: 1)
        storage.now = now
        for (name, date) in zip(names, dates) {
            summaries.append(try TestClips.write(name, into: storage, created: date, gops: 1))
        }
        var lines: [[UInt8]] = []
        for (name, summary) in zip([old] + names, summaries) {
            let scratch = MemoryStorage()
            try EventsJournal(storage: scratch).append(
                ClipRecord(
                    file: name, camera: name == old ? "barn" : "yard", start: "", end: "", cause: .motion,
                    triggerTime: "",
                    triggerSourceSeconds: 1, preRollSeconds: 1, durationSeconds: summary.duration.seconds,
                    frames: summary.videoFrames, audioFrames: summary.audioFrames, bytes: summary.bytes,
                    peakScore: 0.5, part: 1))
            lines.append(try #require(scratch.contents(EventsJournal.name)))
        }
        // The old clip's line, the first clip's, the second's torn with the third's glued to
        // it; none for the fourth.
        storage.put(EventsJournal.name, lines[0] + lines[1] + Array(lines[2].prefix(30)) + lines[3])
        #expect(try EventsJournal(storage: storage).records().records.map(\.file) == [old, names[0], names[2]])

        let agent = try runAtStart(on: storage, config: testConfig(storage: "max_age_days = 30;"))

        let rebuilt = agent.events.notices(.journalRebuilt)
        #expect(rebuilt.count == 1 && rebuilt.first?.field("added") == "2", "\(agent.output)")
        #expect(rebuilt.first?.field("damaged_dropped") == "1")
        #expect(agent.events.deletions.map(\.clip.relativePath) == [old], "\(agent.output)")
        #expect(!storage.exists(old) && storage.exists(stranger))

        let journal = try EventsJournal(storage: storage).records()
        #expect(journal.unreadableLines.isEmpty)
        #expect(journal.records.map(\.file) == [names[0], names[2], names[1], names[3]])
        #expect(journal.records.map { $0.rebuilt == true } == [false, false, true, true])
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// The journal's line for `record`, as the agent writes it.
    static func line(_ record: ClipRecord) throws -> [UInt8] {
        let scratch = MemoryStorage()
        try EventsJournal(storage: scratch).append(record)
        return try #require(scratch.contents(EventsJournal.name))
    }

    /// A power cut (and the fsck after it) left two clips no player opens: their first 4 kB
    /// are zeros, so they no longer start with `ftyp`. One was saved (its journal line is
    /// there), the other was being recorded. At start each is moved aside as
    /// `NAME.mov.damaged` with its bytes as they were, and said once; the saved one's line
    /// follows it, the other gets a rebuilt line, both marked damaged. The next start neither
    /// repairs them again nor says anything about them.
    @Test func aClipRepairCannotReadIsMovedAsideOnceAndItsLineFollowsIt() throws {
        let storage = MemoryStorage()
        let now = Date()
        let naming = Self.naming
        let (dates, names) = Self.hourly(3, before: now)
        let saved = try TestClips.write(names[0], into: storage, created: dates[0])
        try TestClips.writeInterrupted(names[1], into: storage, created: dates[1])
        let good = try TestClips.write(names[2], into: storage, created: dates[2])
        var damaged: [[UInt8]] = []
        for name in names.prefix(2) {
            let bytes = try #require(storage.contents(name))
            damaged.append([UInt8](repeating: 0, count: 4096) + bytes.dropFirst(4096))
            storage.put(name, damaged.last!, modified: now.addingTimeInterval(-600))
        }
        var journal: [UInt8] = []
        for (name, summary) in [(names[0], saved), (names[2], good)] {
            journal += try Self.line(
                ClipRecord(
                    file: name, camera: "yard", start: "", end: "", cause: .motion, triggerTime: "",
                    triggerSourceSeconds: 1, preRollSeconds: 1, durationSeconds: summary.duration.seconds,
                    frames: summary.videoFrames, audioFrames: summary.audioFrames, bytes: summary.bytes,
                    peakScore: 0.5, part: 1))
        }
        storage.put(EventsJournal.name, journal)

        let first = try runAtStart(on: storage)
        let moved = first.events.notices(.clipMovedAside)
        #expect(
            moved.map { $0.field("file") } == names.prefix(2).map { Optional($0) }
                && moved.map { $0.field("moved_to") } == names.prefix(2).map { Optional($0 + ".damaged") }
                && moved.allSatisfy { $0.level == .warning && $0.field("error") != nil },
            "\(first.output)")
        #expect(first.events.notices(.clipNotRepaired).isEmpty, "\(first.output)")
        for (name, bytes) in zip(names.prefix(2), damaged) {
            #expect(!storage.exists(name), "\(name) is still there for players to choke on")
            #expect(storage.contents(name + ".damaged") == bytes, "\(name).damaged does not keep its bytes")
        }
        #expect(storage.exists(names[2]))
        let after = try #require(storage.contents(EventsJournal.name))
        let records = try EventsJournal(storage: storage).records()
        #expect(records.unreadableLines.isEmpty)
        // The saved clip's line follows it (trigger and score kept); the other's is rebuilt.
        #expect(
            Set(records.records.map(\.file)) == [names[0] + ".damaged", names[1] + ".damaged", names[2]],
            "\(String(decoding: after, as: UTF8.self))")
        let lines = String(decoding: after, as: UTF8.self).split(separator: "\n")
        let followed = try #require(lines.first { $0.contains("\"file\":\"\(names[0]).damaged\"") })
        #expect(followed.contains("\"damaged\":true") && followed.contains("\"peak_score\":0.5"), "\(followed)")
        let rebuilt = try #require(lines.first { $0.contains("\"file\":\"\(names[1]).damaged\"") })
        #expect(
            rebuilt.contains("\"damaged\":true") && rebuilt.contains("\"rebuilt\":true")
                && rebuilt.contains("\"bytes\":\(damaged[1].count)"), "\(rebuilt)")
        #expect(first.errors.isEmpty, "\(first.errors)")

        let second = try runAtStart(on: storage)
        #expect(second.events.changes.map(\.kind) == [.endOfSource], "\(second.output)")
        #expect(second.warnings.isEmpty && second.errors.isEmpty, "\(second.output)")
        #expect(storage.contents(EventsJournal.name) == after)
    }

    /// A kill left the temporary files of writes it interrupted: a clip's picture and
    /// `latest.jpg` written beside them (`.jpg.new`), the journal's rewrite
    /// (`events.jsonl.new`), and a journal a power cut filled with garbage. At start each
    /// leftover is removed and said once, the journal rebuilt from the clips; files that are
    /// not the agent's stay.
    @Test func whatAnInterruptedWriteLeftIsRemovedAtStart() throws {
        let storage = MemoryStorage()
        let now = Date()
        let naming = Self.naming
        let clip = naming.relativePath(for: now.addingTimeInterval(-3600))
        try TestClips.write(clip, into: storage, created: now.addingTimeInterval(-3600))
        let gone = naming.relativePath(for: now.addingTimeInterval(-86_400))
        let leftovers = [
            ClipNaming.snapshotPath(of: clip) + ".new", ClipNaming.snapshotPath(of: gone) + ".new",
            "latest.jpg.new", "events.jsonl.new",
        ]
        for name in leftovers { storage.put(name, [0xFF, 0xD8, 0xFF, 0xE0]) }
        let strangers = [gone.withoutLastPathComponent + "/notes.jpg.new", "holiday.jpg.new", "latest.jpg.bak"]
        for name in strangers { storage.put(name, [1, 2, 3]) }
        storage.put(EventsJournal.name, [UInt8](repeating: 0, count: 4096) + (0..<512).map { UInt8($0 % 251) })

        let agent = try runAtStart(on: storage)
        let removed = agent.events.notices(.leftoverRemoved)
        #expect(
            Set(removed.compactMap { $0.field("file") }) == Set(leftovers) && removed.count == leftovers.count,
            "\(agent.output)")
        for name in leftovers { #expect(!storage.exists(name), "\(name) is left") }
        for name in strangers { #expect(storage.exists(name), "\(name) is not the agent's") }
        let rebuilt = agent.events.notices(.journalRebuilt)
        #expect(rebuilt.count == 1 && rebuilt.first?.field("damaged_dropped") != "0", "\(agent.output)")
        let journal = try EventsJournal(storage: storage).records()
        #expect(journal.unreadableLines.isEmpty && journal.records.map(\.file) == [clip])
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }
}
