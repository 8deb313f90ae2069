import Capture
import Foundation
import Media
import Recorder
import TestSupport
import Testing

@testable import Agent

/// Outside requests (`AgentControl`: `vigil trigger`, MQTT's command topics) reaching a
/// running agent: an outside event recorded with its pre- and post-roll, and detection
/// turned off and on again.
@Suite(.serialized) struct AgentControlTests {
    /// A source that does something when it hands out the frame at `at` seconds.
    final class Cue: FrameSource {
        let inner: SyntheticSource
        var cues: [(at: Double, action: @Sendable () -> Void)]
        private var index = 0

        init(_ inner: SyntheticSource, cues: [(Double, @Sendable () -> Void)]) {
            self.inner = inner
            self.cues = cues.map { (at: $0.0, action: $0.1) }
        }

        var format: VideoFormat { inner.format }
        var name: String { inner.name }

        func nextFrame() throws(CaptureError) -> VideoFrame? {
            let frame = try inner.nextFrame()
            if let frame, let next = cues.first, frame.timestamp.seconds >= next.at {
                cues.removeFirst()
                next.action()
            }
            return frame
        }
    }

    /// An agent on the test configuration reading `scene` through a `Cue` whose cues `cues`
    /// makes for the agent's `AgentControl`.
    static func cued(
        _ scene: SyntheticScene, _ cues: @escaping @Sendable (AgentControl) -> [(Double, @Sendable () -> Void)]
    ) throws -> AgentHarness {
        let control = AgentControl()
        return try AgentHarness(
            config: testConfig(),
            openSource: { _ throws(CaptureError) in
                opened(Cue(try SyntheticSource(scene: scene), cues: cues(control)))
            }, control: control)
    }

    /// A quiet scene and `vigil trigger --seconds 2` at 4 s: one clip, marked external, from
    /// the pre-roll before the request to the post-roll after its two seconds.
    @Test func anOutsideTriggerRecordsAnEventMarkedExternal() throws {
        let harness = try Self.cued(scene(seconds: 10, objects: [])) { control in
            [(4, { control.record(seconds: 2, by: "test") })]
        }
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")

        let clips = harness.clipFiles
        try #require(clips.count == 1, "\(clips)\n\(harness.output)")
        _ = try harness.expectCompletePlayableClips()
        let record = try #require(try harness.journal().first)
        #expect(record.cause == .external && record.triggerTime != nil, "\(record)")
        // The pipeline takes the request at its next frame: one of the few (at most 8) queued
        // between capture, which asked at 4 s, and the pipeline.
        let trigger = try #require(record.triggerSourceSeconds)
        #expect(trigger > 3.4 && trigger <= 4.01, "\(record)")
        #expect((record.preRollSeconds ?? 0) >= 1, "\(record)")
        // pre_roll 1 + 2 s asked + post_roll 1 (plus up to a GOP of pre-roll).
        #expect(record.durationSeconds >= 3.9 && record.durationSeconds <= 5.1, "\(record)")
        #expect(harness.events.clipsStarted.map(\.cause) == [.external])
        #expect(harness.lines("recording on an outside trigger").count == 1, "\(harness.output)")
        #expect(harness.lines("event started on an outside trigger").count == 1, "\(harness.output)")
        #expect(harness.errors.isEmpty, "\(harness.errors)")
    }

    /// An object crosses from 2 s to 5 s; `vigil trigger --seconds 6` at 3 s, during the
    /// motion, lengthens the event to 9 s and its post-roll — and the clip is recorded on it:
    /// the journal, the `on_clip_saved` facts and the event's end say `external` (the README's
    /// promise), while the event's start, before the request, said `motion`.
    @Test func anOutsideTriggerDuringMotionMarksTheClipExternal() throws {
        let harness = try Self.cued(scene(seconds: 14, objects: [crossing(2, 5)])) { control in
            [(3, { control.record(seconds: 6, by: "test") })]
        }
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")

        let journal = try harness.journal()
        try #require(journal.count == 1, "\(journal)\n\(harness.output)")
        #expect(journal[0].cause == .external, "\(journal[0])")
        let trigger = try #require(journal[0].triggerSourceSeconds)
        #expect(trigger > 1.5 && trigger < 3, "the event began with the motion: \(journal[0])")
        // From the pre-roll before the motion (about 1 s) to the end of the 6 s asked at about
        // 3 s and the 1 s post-roll: about 9 s; motion alone would have ended near 6 s.
        #expect(journal[0].durationSeconds > 8, "\(journal[0])")
        #expect(harness.events.clipsStarted.map(\.cause) == [.motion])
        #expect(harness.events.clipsSaved.map { $0.record.cause } == [.external])
        let ends = harness.events.all.compactMap { if case .motionEnded(let e) = $0 { e.cause } else { nil } }
        #expect(ends == [.external])
        #expect(harness.lines("recording on an outside trigger").count == 1)
        try harness.expectCompletePlayableClips()
    }

    /// Detection off before an object crosses, on again before a second one: only the second
    /// is recorded, marked motion; both switches reach the sinks.
    @Test func detectionTurnedOffRecordsNoMotionUntilTurnedOn() throws {
        let control = AgentControl()
        let harness = try AgentHarness(
            config: testConfig(),
            openSource: { _ throws(CaptureError) in
                opened(
                    Cue(
                        try SyntheticSource(scene: scene(seconds: 11, objects: [crossing(2, 4), crossing(7, 9)])),
                        cues: [
                            (0, { control.setDetection(false, by: "test") }),
                            (5.5, { control.setDetection(true, by: "test") }),
                        ]))
            }, control: control)
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")

        let journal = try harness.journal()
        try #require(journal.count == 1, "\(journal)\n\(harness.output)")
        #expect(journal[0].cause == .motion)
        let trigger = try #require(journal[0].triggerSourceSeconds)
        #expect(trigger > 6.5 && trigger < 8, "only the second crossing: \(journal[0])")
        let switches = harness.events.all.compactMap { if case .detection(let on) = $0 { on } else { nil } }
        #expect(switches == [false, true])
        #expect(control.detectionEnabled)
        #expect(harness.lines("motion detection off").count == 1 && harness.lines("motion detection on").count == 1)
    }
}
