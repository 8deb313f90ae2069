import Capture
import Foundation
import Media
import Recorder
import TestSupport
import Testing

@testable import Agent

/// What the agent does at start with what an earlier run left in the journal.
@Suite(.serialized) struct AgentJournalTests {
    /// An earlier run left: a clip whose line a full disk tore (the next line glued to it), a
    /// clip whose line it never wrote (killed between the close and the line), and a clip
    /// written under an earlier file pattern and camera name, 40 days old, that the journal
    /// names; beside them, a file with a name of that earlier pattern that the journal does
    /// not name. At start the journal gets every clip's line back, and retention deletes the
    /// old clip (and its line) but not the file that is not the agent's.
    @Test func theJournalIsRebuiltAtStartAndRetentionSeesEveryClipTheAgentWrote() throws {
        let storage = MemoryStorage()
        let now = Date()
        let naming = ClipNaming(
            pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "yard", timeZone: SystemTimeZone())
        let dates = (1...4).map { now.addingTimeInterval(-Double(5 - $0) * 3600) }
        let names = dates.map { naming.relativePath(for: $0) }
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

        let harness = try AgentHarness(
            config: testConfig(storage: "max_age_days = 30;"), storage: storage,
            openSource: { _ throws(CaptureError) in try synthetic(scene(seconds: 2, objects: [])) })
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")

        let rebuilt = harness.lines("events journal rebuilt from the clips on disk")
        #expect(rebuilt.count == 1 && logValue(rebuilt[0], "added") == "2", "\(harness.output)")
        #expect(logValue(rebuilt.first ?? "", "damaged_dropped") == "1")
        let deleted = harness.lines("clip deleted")
        #expect(deleted.count == 1 && logValue(deleted[0], "file") == old, "\(harness.output)")
        #expect(!storage.exists(old) && storage.exists(stranger))

        let journal = try EventsJournal(storage: storage).records()
        #expect(journal.unreadableLines.isEmpty)
        #expect(journal.records.map(\.file) == [names[0], names[2], names[1], names[3]])
        #expect(journal.records.map { $0.rebuilt == true } == [false, false, true, true])
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }
}
