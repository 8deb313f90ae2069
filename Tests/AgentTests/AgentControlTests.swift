import AgentTestSupport
import Capture
import Foundation
import Media
import Recorder
import TestSupport
import Testing

@testable import Agent

/// Outside requests (`AgentControl`: `vigil trigger`, MQTT's command topics) as the pipeline
/// takes them: with the frame after they were asked. Stepped frame by frame (`EmbeddedAgent`),
/// so each request is taken at exactly the frame the test gives it to, and its effects are
/// asserted on that frame's time: an outside event recorded with its pre- and post-roll, one
/// that lengthens an event of motion, and detection turned off and on again.
@Suite struct AgentControlTests {
    /// The frame at `seconds` of a 15 fps scene (frame `seconds × 15`) gets `requests`; every
    /// other frame none.
    static func at(_ seconds: Double, _ requests: AgentControl.Requests) -> (VideoFrame) -> AgentControl.Requests {
        { frame in frame.sequence == UInt64(seconds * 15) ? requests : AgentControl.Requests() }
    }

    /// A quiet scene and `vigil trigger --seconds 2` taken with the frame at 4 s: one clip,
    /// marked external, triggered at exactly 4 s, from the pre-roll before it to the post-roll
    /// after its two seconds.
    @Test func anOutsideTriggerRecordsAnEventMarkedExternal() throws {
        let agent = try EmbeddedAgent()
        agent.run(try SyntheticSource(scene: scene(seconds: 10, objects: [])), asked: Self.at(4, .record(2)))

        let journal = try agent.journal()
        try #require(journal.count == 1 && agent.clipFiles.count == 1, "\(journal) \(agent.clipFiles)")
        let record = journal[0]
        #expect(record.cause == .external && record.triggerTime != nil, "\(record)")
        #expect(record.triggerSourceSeconds == 4, "taken at its frame: \(record)")
        #expect((record.preRollSeconds ?? 0) >= 1, "\(record)")
        // pre_roll 1 + 2 s asked + post_roll 1 (plus up to a GOP of pre-roll).
        #expect(record.durationSeconds >= 4 && record.durationSeconds <= 5.1, "\(record)")
        let started = agent.events.all.compactMap { if case .motionStarted(let m) = $0 { m } else { nil } }
        #expect(started.map(\.cause) == [.external])
        #expect(started.map(\.trigger) == [EmbeddedAgent.wallOrigin.addingTimeInterval(4)], "at its frame's time")
        #expect(agent.events.clipsStarted.map(\.cause) == [.external])
        #expect(agent.events.clipsSaved.map(\.record) == journal)
        #expect(agent.errors.isEmpty, "\(agent.errors)")
        try TemporaryDirectory.with("vigil-control") { try expectCompletePlayableClips(in: agent.storage, scratch: $0) }
    }

    /// An object crosses from 2 s to 5 s; `vigil trigger --seconds 6` at 3 s, during the
    /// motion, lengthens the event to 9 s and its post-roll — and the clip is recorded on it:
    /// the journal, the `on_clip_saved` facts and the event's end say `external` (the promise of
    /// docs/guide/home-assistant.md's outside triggers), while the event's start, before the
    /// request, said `motion`.
    @Test func anOutsideTriggerDuringMotionMarksTheClipExternal() throws {
        let agent = try EmbeddedAgent()
        agent.run(
            try SyntheticSource(scene: scene(seconds: 14, objects: [crossing(2, 5)])), asked: Self.at(3, .record(6)))

        let journal = try agent.journal()
        try #require(journal.count == 1, "\(journal)")
        #expect(journal[0].cause == .external, "\(journal[0])")
        let trigger = try #require(journal[0].triggerSourceSeconds)
        #expect(trigger > 1.5 && trigger < 3, "the event began with the motion: \(journal[0])")
        // The 6 s asked at 3 s end at 9 s; then the 1 s post-roll: the event ends at 10 s.
        let ends = agent.events.all.compactMap { if case .motionEnded(let e) = $0 { e } else { nil } }
        #expect(ends.map(\.cause) == [.external])
        #expect(ends.map(\.end) == [EmbeddedAgent.wallOrigin.addingTimeInterval(10)], "\(ends)")
        #expect(agent.events.clipsStarted.map(\.cause) == [.motion])
        #expect(agent.events.clipsSaved.map { $0.record.cause } == [.external])
        try TemporaryDirectory.with("vigil-control") { try expectCompletePlayableClips(in: agent.storage, scratch: $0) }
    }

    /// Detection off at the first frame, before an object crosses, on again at 5.6 s before a
    /// second one: only the second is recorded, marked motion; both switches reach the sinks
    /// at their frames.
    @Test func detectionTurnedOffRecordsNoMotionUntilTurnedOn() throws {
        let agent = try EmbeddedAgent()
        agent.run(try SyntheticSource(scene: scene(seconds: 11, objects: [crossing(2, 4), crossing(7, 9)]))) {
            frame in
            switch frame.sequence {
            case 0: .detection(false)
            case 84: .detection(true)  // 5.6 s
            default: AgentControl.Requests()
            }
        }

        let journal = try agent.journal()
        try #require(journal.count == 1, "\(journal)")
        #expect(journal[0].cause == .motion)
        let trigger = try #require(journal[0].triggerSourceSeconds)
        #expect(trigger > 6.5 && trigger < 8, "only the second crossing: \(journal[0])")
        let switches = agent.events.all.compactMap { if case .detection(let on) = $0 { on } else { nil } }
        #expect(switches == [false, true])
    }
}
