import AgentTestSupport
import Capture
import Configuration
import Foundation
import Media
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent

/// A disk that fills up while the agent records — what once needed root and a small tmpfs —
/// on a `MemoryStorage` that another program fills on cue; stepped (`EmbeddedAgent`).
@Suite(.serialized) struct AgentDiskFullTests {
    /// Six events, one every 10 s (an object crossing from 2 to 5 s of each), at 640×480: each
    /// clip (about 5 s, 2 MB) is larger than the 1 MB retention keeps free, so the disk runs
    /// full inside clips.
    static let events = 6
    static let footage = scene(
        seconds: Double(events) * 10, width: 640, height: 480, objects: [crossing(2, 5)], period: 10)

    /// The agent on `footage` with `config`, on a 12 MB disk whose every free byte another
    /// program takes when the fourth clip starts.
    static func fillingUp(config: String) throws -> (MemoryStorage, EmbeddedAgent) {
        let storage = MemoryStorage(capacity: 12 << 20)
        let agent = try EmbeddedAgent(
            config: config, storage: storage,
            openSource: { _ throws(CaptureError) in
                try synthetic(Self.footage)
            },
            onEvent: { event in
                if case .clipStarted(let clip) = event, clip.event == 4 { storage.fill() }
            })
        return (storage, agent)
    }

    /// When the fourth clip starts, another program takes every free byte: from then on
    /// clips get only the space retention frees by deleting older ones (never the newest
    /// saved one, so the older two pay for the next) — whatever `min_free_mb` says, 0 included.
    @Test(arguments: [1, 0])
    func aDiskThatFillsWhileRecordingIsClearedByRetentionAndRecordingGoesOn(minFreeMB: Int) throws {
        let (storage, agent) = try Self.fillingUp(
            config: testConfig().replacingOccurrences(of: "min_free_mb = 1;", with: "min_free_mb = \(minFreeMB);"))
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        let output = agent.output

        // The disk ran full while a clip was being written: said once per outage, and its
        // end once — never once per GOP.
        let said = agent.events.notices.filter { [.diskFull, .diskSpaceAgain].contains($0.kind) }
        #expect(said.first?.kind == .diskFull, "the disk never ran full:\n\(output)")
        #expect(
            said.map(\.kind) == Array(repeating: [.diskFull, .diskSpaceAgain], count: said.count / 2).flatMap { $0 },
            "\(said)")
        let full = said.filter { $0.kind == .diskFull }
        #expect(full.allSatisfy { $0.level == .warning && $0.line.message.hasPrefix("disk full while writing video;") })

        // Retention made room by deleting older clips, sent each to the sinks (and the log),
        // and took their lines out of the journal.
        let deletions = agent.events.deletions
        #expect(!deletions.isEmpty, "\(output)")
        #expect(deletions.allSatisfy { $0.reason == .diskFull || $0.reason == .freeSpaceBelow(bytes: 1 << 20) })
        // The newest clip saved was never among them: each deletion is older than a clip kept.
        #expect(deletions.contains { $0.reason == .diskFull }, "a full disk frees space by deleting the oldest clips")
        let left = agent.clipFiles
        #expect(
            Set(try agent.journal().map(\.file)) == Set(left),
            "the journal keeps the lines of the clips that are left")
        #expect(try EventsJournal(storage: storage).records().unreadableLines.isEmpty)
        #expect(deletions.allSatisfy { !left.contains($0.clip.relativePath) })

        // Recording went on: clips were saved after space was freed, one per event, each as
        // a whole (every frame of its event), and nothing was lost or given up.
        let kinds = agent.events.kinds
        let firstDeletion = try #require(kinds.firstIndex(of: .clipsDeleted))
        #expect(kinds[firstDeletion...].contains(.clipSaved), "no clip was saved after space was freed:\n\(output)")
        let saved = agent.events.clipsSaved.map(\.record)
        #expect(saved.count == Self.events, "\(saved.count) clips saved for \(Self.events) events:\n\(output)")
        #expect(Set(saved.map(\.frames)).count == 1, "every event's clip has the same frames: \(saved)")
        #expect(agent.events.clipsSaved.allSatisfy { $0.origin == .closed })
        #expect(agent.errors.isEmpty, "\(agent.errors)")

        // What is left is complete and plays.
        #expect(!left.isEmpty)
        try agent.expectCompletePlayableClips()
    }

    /// The same disk filling up, with the live picture on: a clip's picture gets the space
    /// its clip gets (retention frees the oldest clips for it too), so every clip is saved
    /// with its picture; `latest.jpg`, replaceable, never takes space a clip needs — while
    /// the disk is short it is not written, and that is said once, not once a picture.
    @Test func everyClipKeepsItsPictureAndLatestJpgWaitsWhileTheDiskIsShort() throws {
        let (storage, agent) = try Self.fillingUp(config: testConfig(extra: "snapshot = { live_interval = 1.0; };"))
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        let output = agent.output
        #expect(!agent.events.deletions.isEmpty, "the disk never ran full:\n\(output)")

        let saved = agent.events.clipsSaved
        #expect(saved.count == Self.events, "\(output)")
        #expect(saved.allSatisfy { $0.record.snapshot != nil }, "\(saved.map(\.record))")
        #expect(agent.events.notices(.snapshotNotSaved).isEmpty, "\(output)")
        for record in try agent.journal() {
            let picture = try #require(record.snapshot, "\(record)")
            #expect(storage.contents(picture)?.starts(with: [0xFF, 0xD8]) == true, "\(picture)")
        }
        // latest.jpg never failed for want of space: it waited, and said so once.
        #expect(agent.events.notices(.latestPictureFailed).isEmpty, "\(output)")
        #expect(agent.events.notices(.latestPictureWaitsForSpace).count == 1, "\(output)")
        #expect(agent.errors.isEmpty, "\(agent.errors)")
        try agent.expectCompletePlayableClips()
    }

    /// The disk has room for half a clip and nothing to delete: the first clip keeps what
    /// fitted (given up, and repaired into a complete movie), the full disk and the low space
    /// are said once each, and once the space comes back the next clips are whole.
    @Test func aFullDiskWithNothingToDeleteLosesOnlyWhatDidNotFit() throws {
        let storage = MemoryStorage(capacity: 1 << 20)
        let agent = try EmbeddedAgent(
            config: testConfig(), storage: storage,
            openSource: { _ throws(CaptureError) in
                try synthetic(scene(seconds: 30, width: 640, height: 480, objects: [crossing(2, 5)], period: 10))
            },
            onEvent: { event in
                // The other program frees its space once the first clip is done with.
                if case .clipSaved = event { storage.capacity = 1 << 30 }
            })
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")

        #expect(
            agent.events.notices(.diskFull).map { $0.line.message.hasPrefix("disk full while writing video;") } == [
                true
            ], "\(agent.output)")
        #expect(agent.events.notices(.diskLow).count == 1, "\(agent.output)")
        #expect(agent.events.deletions.isEmpty)
        // The first clip kept what fitted; the two after it are whole.
        let saved = agent.events.clipsSaved
        try #require(saved.count == 3, "\(agent.output)")
        #expect(saved.map(\.origin) == [.abandoned, .closed, .closed])
        #expect(agent.events.notices(.clipRepaired).map { $0.field("file") } == [saved[0].record.file])
        #expect(saved[0].record.frames > 0 && saved[0].record.frames < saved[1].record.frames, "\(saved.map(\.record))")
        #expect(saved[1].record.frames == saved[2].record.frames)
        // Every clip is in the journal, the first with what it kept, and each is complete.
        #expect(try agent.journal().map(\.file) == saved.map(\.record.file))
        let frames = try agent.expectCompletePlayableClips()
        #expect(saved.allSatisfy { frames[$0.record.file] == $0.record.frames })
        // Giving a clip up needs a person; nothing else does.
        #expect(
            agent.errors.count == 1
                && agent.events.notices.filter { $0.level == .error }.map(\.kind) == [.clipUnfinished],
            "\(agent.errors)")
    }

    /// Another program takes every free byte just as the third clip is being finished (its
    /// index written): the close makes room as a video write does — retention deletes the
    /// oldest clip — and finishes the clip whole, instead of giving it up to repair.
    @Test func aDiskThatFillsAsAClipClosesMakesRoomAndFinishesIt() throws {
        let storage = MemoryStorage(capacity: 12 << 20)
        let agent = try EmbeddedAgent(
            config: testConfig(), storage: storage,
            openSource: { _ throws(CaptureError) in
                try synthetic(Self.footage)
            },
            onEvent: { event in
                guard case .clipStarted(let clip) = event, clip.event == 3 else { return }
                storage.fillBefore = { file, bytes in
                    file == clip.file && bytes.count >= 8 && Array(bytes[4..<8]) == Array("moov".utf8)
                }
            })
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        let output = agent.output
        #expect(storage.fillBefore == nil, "the third clip's index was never written:\n\(output)")
        #expect(output.contains("no space to finish the clip; running retention"), "\(output)")
        #expect(agent.events.notices(.clipUnfinished).isEmpty, "\(output)")
        let saved = agent.events.clipsSaved
        #expect(saved.count == Self.events, "\(output)")
        #expect(saved.allSatisfy { $0.origin == .closed }, "\(saved.map(\.origin))")
        #expect(Set(saved.map(\.record.frames)).count == 1, "every event's clip has the same frames: \(saved)")
        // Room was made by deleting the oldest clip (the disk stays full: later clips delete
        // older ones in turn, the third among them once it is no longer the newest).
        let deletions = agent.events.deletions
        #expect(deletions.first?.clip.relativePath == saved.first?.record.file, "\(deletions)")
        #expect(agent.errors.isEmpty, "\(agent.errors)")
        try agent.expectCompletePlayableClips()
    }
}
