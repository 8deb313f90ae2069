import AgentTestSupport
import Capture
import Foundation
import Media
import Recorder
import TestSupport
import Testing

@testable import Agent

/// A reload that reads a file that cannot be what the owner meant — empty, cut short before
/// its `storage` group, broken — keeps the settings in use and says so; a retention change
/// that a reload does apply is logged with its old and new values. Stepped (`EmbeddedAgent`):
/// each reload is taken between the frames the test says.
@Suite(.serialized) struct AgentReloadTests {
    /// An agent that keeps clips however old (`max_age_days = 0`), with a 40-day-old clip in
    /// its storage. An empty file, then one cut before its `storage` group, are refused: the
    /// clips saved after each (each saved clip is followed by a sweep) leave the old clip alone.
    /// A whole file with `max_age_days = 30` is taken, its change logged as 0 → 30, and the
    /// sweep after the next clip deletes the old clip, as it was asked to.
    @Test func anEmptyOrCutFileIsRefusedAndARetentionChangeIsLogged() throws {
        let storage = MemoryStorage()
        let now = Date()
        let naming = ClipNaming(
            pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "yard", timeZone: SystemTimeZone())
        let oldDate = now.addingTimeInterval(-40 * 86_400)
        let old = naming.relativePath(for: oldDate)
        storage.now = oldDate
        try TestClips.write(old, into: storage, created: oldDate, gops: 1)
        storage.now = now

        let keepForever = testConfig(storage: "max_age_days = 0;")
        let agent = try EmbeddedAgent(
            config: keepForever, storage: storage,
            openSource: { _ throws(CaptureError) in try synthetic(AgentRunTests.endless(period: 5)) },
            wall: { now.addingTimeInterval($0.seconds) })
        defer { agent.stop() }
        try #require(agent.run { agent.events.clipsSaved.count >= 1 }, "\(agent.output)")
        #expect(storage.fileNames.contains(old), "kept at start: max_age_days = 0")

        // An empty file (a save cut short, an editor that truncated it first).
        try agent.rewriteConfig("")
        agent.reload()
        let refused = { agent.events.notices(.reloadRefused).compactMap { $0.field("error") } }
        #expect(refused().count == 1, "\(agent.output)")
        #expect(refused().first?.contains("sets nothing") == true, "\(refused())")
        let savedBefore = agent.events.clipsSaved.count
        try #require(agent.run { agent.events.clipsSaved.count >= savedBefore + 1 }, "\(agent.output)")
        #expect(storage.fileNames.contains(old), "an empty file must not bring max_age_days back to 30")

        // Half-written: the camera and recording groups are there, storage is not.
        let cut = String(keepForever[..<(keepForever.range(of: "storage = {")!.lowerBound)])
        try agent.rewriteConfig(cut)
        agent.reload()
        #expect(refused().count == 2, "\(agent.output)")
        #expect(refused().last?.contains("no storage group") == true, "\(refused())")
        let savedAfterCut = agent.events.clipsSaved.count
        try #require(agent.run { agent.events.clipsSaved.count >= savedAfterCut + 1 }, "\(agent.output)")
        #expect(storage.fileNames.contains(old))
        #expect(agent.events.count(.reloaded) == 0)

        // Asked for: applied, and said with the old and the new value.
        try agent.rewriteConfig(testConfig(storage: "max_age_days = 30;"))
        agent.reload()
        let changed = agent.events.notices(.retentionChanged)
        #expect(
            changed == [.retentionChanged(setting: "storage.max_age_days", old: "0", new: "30", deletesMore: true)],
            "\(agent.output)")
        #expect(changed.first?.level == .warning, "it deletes clips kept until now")
        #expect(
            agent.run { agent.events.deletions.contains { $0.clip.relativePath == old } },
            "\(agent.output)")
        #expect(!storage.fileNames.contains(old))
    }
}
