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

/// The agent's runtime in process (`Agent.run` on a test environment): what it records, how
/// it stops and how it takes a reloaded configuration. The runtime suites run their tests one
/// at a time: each agent encodes with x264 as fast as it can, and a shared host has two cores.
@Suite(.serialized) struct AgentRunTests {
    /// One object crossing from 2 to 5 s of an 8 s scene: one event, one clip, then the end
    /// of the source ends the run. A sink got what the run shares with its sinks when it
    /// started (`ContextSink`).
    @Test func anEventBecomesOneClip() throws {
        let sink = ContextSink()
        let control = AgentControl()
        let harness = try AgentHarness(
            config: testConfig(),
            openSource: { _ throws(CaptureError) in
                try synthetic(scene(seconds: 8, objects: [crossing(2, 5)]))
            }, control: control, sinks: { _, _, _ in [sink] })
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")
        try sink.expectTheRunsContext(harness, control: control, frames: 120, gops: 7)

        let clips = harness.clipFiles
        try #require(clips.count == 1, "\(clips)\n\(harness.output)")
        let frames = try harness.expectCompletePlayableClips()
        let journal = try harness.journal()
        #expect(journal.map(\.file) == clips)
        let record = try #require(journal.first)
        #expect(frames[clips[0]] == record.frames, "the journal's frame count is the movie's")
        #expect((record.preRollSeconds ?? 0) >= 1.0, "the clip starts at least pre_roll before the motion")
        #expect(record.durationSeconds > 3 && record.durationSeconds < 7, "\(record)")

        // One of each, in the orders the design promises: the pipeline's events in order,
        // the writer's in order, and a clip started only after the motion that opened it.
        let kinds = harness.events.kinds
        #expect(harness.events.count(.motionStarted) == 1 && harness.events.count(.motionEnded) == 1, "\(kinds)")
        #expect(harness.events.count(.clipStarted) == 1 && harness.events.count(.clipSaved) == 1, "\(kinds)")
        let order = { (kind: AgentEvent.Kind) in kinds.firstIndex(of: kind) ?? -1 }
        #expect(order(.motionStarted) < order(.motionEnded), "\(kinds)")
        #expect(order(.motionStarted) < order(.clipStarted), "\(kinds)")
        #expect(order(.clipStarted) < order(.clipSaved), "\(kinds)")
        let started = try #require(harness.events.clipsStarted.first)
        let saved = try #require(harness.events.clipsSaved.first)
        #expect(started.file == clips[0] && saved.record.file == clips[0] && saved.origin == .closed)
        #expect(started.event == 1 && started.part == 1)

        #expect(harness.events.clipsSaved.map(\.reason) == [.eventEnded])
        #expect(harness.events.changes.map(\.kind) == [.endOfSource])
        // The log's last line, with the totals (the one place this suite reads them as text).
        #expect(harness.logs.written.last.map { logValue($0, "msg") == "vigil stopped" } == true, "\(harness.output)")
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }

    /// A scene that never ends, with something crossing every `period` seconds (from 1 s to
    /// 1 s before the end of each period).
    static func endless(period: Double) -> SyntheticScene {
        var footage = scene(seconds: period, objects: [crossing(1, period - 1)], period: period)
        footage.duration = nil
        return footage
    }

    /// `stop` from another thread while a clip is open (motion never ends in this scene):
    /// the clip is finished and journaled, and `run` returns.
    @Test func stopFinishesTheOpenClip() throws {
        let clipOpen = DispatchSemaphore(value: 0)
        let harness = try AgentHarness(
            config: testConfig(recording: "pre_roll = 1.0; post_roll = 30.0; max_clip = 3600.0;"),
            openSource: { _ throws(CaptureError) in try synthetic(Self.endless(period: 5)) },
            onEvent: { if case .clipStarted = $0 { clipOpen.signal() } })
        harness.start()
        defer { _ = harness.stopAndWait() }
        try #require(
            clipOpen.wait(timeout: .now() + AgentHarness.patience) == .success, "no clip started:\n\(harness.output)")
        Thread.detachNewThread { harness.agent.stop(because: "test") }
        #expect(harness.waitForOutcome() == .stopped, "\(harness.output)")

        #expect(harness.lines("stopping").map { logValue($0, "signal") } == ["test"])
        #expect(harness.events.clipsSaved.map(\.reason) == [.finished], "\(harness.output)")
        #expect(harness.events.count(.clipStarted) == 1 && harness.events.count(.clipSaved) == 1)
        #expect(harness.events.count(.motionEnded) == 1, "the stop ends the event")
        #expect(harness.clipFiles.count == 1)
        #expect(try harness.journal().map(\.file) == harness.clipFiles)
        try harness.expectCompletePlayableClips()
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }

    /// `reload` while recording: storage settings apply from the next clip, a camera or
    /// storage directory change is said to wait for a restart, and an invalid file keeps the settings in use.
    @Test func reloadAppliesFromTheNextClipAndKeepsTheOldSettingsWhenInvalid() throws {
        let harness = try AgentHarness(
            config: testConfig(), openSource: { _ throws(CaptureError) in try synthetic(Self.endless(period: 6)) })
        harness.start()
        defer { _ = harness.stopAndWait() }
        let newPattern = testConfig(storage: #"file_pattern = "reloaded/{camera}-%Y%m%d-%H%M%S.mov";"#)
        try #require(harness.waitForClips(), "no clip saved:\n\(harness.output)")

        // A new file pattern: the clip being written keeps its name, the next is named by it.
        try harness.rewriteConfig(newPattern)
        harness.agent.reload()
        #expect(harness.events.count(.reloaded) == 1)
        let startedBefore = harness.events.clipsStarted.count
        let renamed = harness.waitUntil {
            harness.events.clipsStarted.dropFirst(startedBefore).contains { $0.file.hasPrefix("reloaded/yard-") }
        }
        #expect(renamed, "no clip was named by the new pattern:\n\(harness.output)")

        // A camera or storage directory change waits for a restart; the rest of the file applies.
        try harness.rewriteConfig(
            newPattern.replacingOccurrences(of: "width = 320", with: "width = 640")
                .replacingOccurrences(of: "/memory/clips", with: "/memory/elsewhere"))
        harness.agent.reload()
        #expect(harness.events.notices(.restartNeeded) == [.restartNeeded(changed: ["camera", "storage.path"])])
        #expect(harness.events.notices(.restartNeeded).allSatisfy { $0.level == .warning })
        #expect(harness.events.count(.reloaded) == 2)

        // An invalid file: said, and the settings in use are kept — the next clip is still
        // named by the pattern of the last good file.
        try harness.rewriteConfig("camera = { width = ; };\n")
        harness.agent.reload()
        #expect(harness.events.notices(.reloadRefused).count == 1)
        #expect(harness.events.count(.reloaded) == 2)
        let startedAfterInvalid = harness.events.clipsStarted.count
        #expect(harness.waitUntil { harness.events.clipsStarted.count > startedAfterInvalid + 1 }, "\(harness.output)")
        #expect(harness.stopAndWait() == .stopped)

        // Once a clip was named by the new pattern, every later one was.
        let names = harness.events.clipsStarted.map(\.file)
        let firstNew = try #require(names.firstIndex { $0.hasPrefix("reloaded/") })
        #expect(firstNew >= 1 && names[..<firstNew].allSatisfy { !$0.hasPrefix("reloaded/") }, "\(names)")
        #expect(names[firstNew...].allSatisfy { $0.hasPrefix("reloaded/yard-") }, "\(names)")
        #expect(harness.events.count(.reloaded) == 2)
        #expect(harness.events.notices(.restartNeeded).count == 1)
        // The only error is the invalid file, which needs a person.
        #expect(
            harness.errors.count == 1
                && harness.events.notices.filter { $0.level == .error }.map(\.kind) == [.reloadRefused])
        try harness.expectCompletePlayableClips()
    }
}
