import AgentTestSupport
import Capture
import Foundation
import Media
import POSIX
import Recorder
import TestSupport
import Testing

@testable import Agent

/// A reload that reads a file that cannot be what the owner meant — empty, cut short before
/// its `storage` group, broken — keeps the settings in use and says so; a retention change
/// that a reload does apply is logged with its old and new values.
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
        let harness = try AgentHarness(
            config: keepForever, storage: storage,
            openSource: { _ throws(CaptureError) in try synthetic(AgentRunTests.endless(period: 5)) })
        harness.start()
        defer { _ = harness.stopAndWait() }
        try #require(harness.waitForClips(), "\(harness.output)")
        #expect(storage.fileNames.contains(old), "kept at start: max_age_days = 0")

        // An empty file (a save cut short, an editor that truncated it first).
        try harness.rewriteConfig("")
        harness.agent.reload()
        let refused = { harness.events.notices(.reloadRefused).compactMap { $0.field("error") } }
        #expect(refused().count == 1, "\(harness.output)")
        #expect(refused().first?.contains("sets nothing") == true, "\(refused())")
        let savedBefore = harness.events.clipsSaved.count
        try #require(harness.waitForClips(savedBefore + 1), "\(harness.output)")
        #expect(storage.fileNames.contains(old), "an empty file must not bring max_age_days back to 30")

        // Half-written: the camera and recording groups are there, storage is not.
        let cut = String(keepForever[..<(keepForever.range(of: "storage = {")!.lowerBound)])
        try harness.rewriteConfig(cut)
        harness.agent.reload()
        #expect(refused().count == 2, "\(harness.output)")
        #expect(refused().last?.contains("no storage group") == true, "\(refused())")
        let savedAfterCut = harness.events.clipsSaved.count
        try #require(harness.waitForClips(savedAfterCut + 1), "\(harness.output)")
        #expect(storage.fileNames.contains(old))
        #expect(harness.events.count(.reloaded) == 0)

        // Asked for: applied, and said with the old and the new value.
        try harness.rewriteConfig(testConfig(storage: "max_age_days = 30;"))
        harness.agent.reload()
        let changed = harness.events.notices(.retentionChanged)
        #expect(
            changed == [.retentionChanged(setting: "storage.max_age_days", old: "0", new: "30", deletesMore: true)],
            "\(harness.output)")
        #expect(changed.first?.level == .warning, "it deletes clips kept until now")
        #expect(
            harness.waitUntil { harness.events.deletions.contains { $0.clip.relativePath == old } },
            "\(harness.output)")
        #expect(!storage.fileNames.contains(old))
    }
}
