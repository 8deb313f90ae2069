import AgentTestSupport
import Capture
import Foundation
import Media
import Recorder
import TestSupport
import Testing

@testable import Agent

/// Time passing with no frame, on the stepped agent's clock (`EmbeddedAgent.advance`): what the
/// agent's threads do when their waits end happens when the clock says — the tries to open a
/// missing camera, the stats line, retention every minute, the writer's next try of a storage
/// directory that was not there. Nothing waits.
@Suite struct AgentTimeTests {
    /// No camera, and 35 s pass: it is tried 1, 3, 7, 15 and 31 s after the start (each
    /// unanswered try doubling the wait), said once; a stats line and event every 10 s
    /// (`log.stats_interval`), each over its 10 s.
    @Test func triesOfAMissingCameraAndTheStatsFallDueWithNoFrame() throws {
        let clock = ManualClock()
        let tries = DeviceScript<OpenedSource> { _ throws(CaptureError) in
            throw .cannotOpen(source: "/dev/video-test", reason: "No such file or directory")
        }
        let agent = try EmbeddedAgent(
            config: testConfig(device: "/dev/video-test")
                .replacingOccurrences(of: "stats_interval = 0", with: "stats_interval = 10"),
            clock: clock, openSource: { _ throws(CaptureError) in try tries.next() })
        agent.start()
        #expect(tries.calls == 1)
        agent.advance(seconds: 35)
        #expect(clock.now == .s(35))
        #expect(tries.calls == 6, "tried at start, then 1, 3, 7, 15 and 31 s after it")
        #expect(agent.events.changes.map(\.kind) == [.cameraUnavailable], "\(agent.events.notices)")
        let stats = agent.events.all.compactMap { if case .stats(let report) = $0 { report } else { nil } }
        #expect(stats.map(\.seconds) == [10, 10, 10], "\(agent.output)")
        #expect(agent.outcome == nil, "still waiting for the camera")
    }

    /// Two clips on the board, one that turns a day old 30 s after the start (`max_age_days =
    /// 1`): kept at start, deleted by the sweep a minute later, with no frame and no clip
    /// saved meanwhile; the other stays.
    @Test func retentionEveryMinuteDeletesAClipThatAgedMeanwhile() throws {
        let storage = MemoryStorage()
        let origin = EmbeddedAgent.wallOrigin
        let naming = ClipNaming(
            pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "yard", timeZone: SystemTimeZone())
        let ageing = origin.addingTimeInterval(-86_400 + 30), recent = origin.addingTimeInterval(-3600)
        for date in [ageing, recent] {
            storage.now = date
            try TestClips.write(naming.relativePath(for: date), into: storage, created: date, gops: 1)
        }
        let agent = try EmbeddedAgent(config: testConfig(storage: "max_age_days = 1;"), storage: storage)
        #expect(agent.events.deletions.isEmpty, "\(agent.output)")
        agent.advance(seconds: 59)
        #expect(agent.events.deletions.isEmpty, "\(agent.output)")
        agent.advance(seconds: 1)
        #expect(
            agent.events.deletions.map(\.clip.relativePath) == [naming.relativePath(for: ageing)], "\(agent.output)")
        #expect(agent.clipFiles == [naming.relativePath(for: recent)])
        #expect(agent.events.clipsSaved.isEmpty)
    }

    /// The storage directory is not there while an event is recorded (in memory), and is back
    /// once the frames have stopped: the writer's next try (15 s after the start, the tries
    /// doubling from 1 s) finds it with no frame or item to wake it, and the clip is written
    /// and saved then — not at the end of the run.
    @Test func theWritersNextTryFindsTheStorageBackWithNoFrame() throws {
        let storage = MemoryStorage()
        storage.writable = false
        let agent = try EmbeddedAgent(storage: storage)
        let source = try SyntheticSource(scene: scene(seconds: 8, objects: [crossing(1, 4)]))
        while let frame = try source.nextFrame() { agent.feed(frame) }
        #expect(agent.events.notices(.clipHeld).count == 1, "\(agent.output)")
        #expect(agent.events.clipsSaved.isEmpty)
        storage.writable = true
        agent.advance(seconds: 6)  // to 13.9 s
        #expect(agent.events.notices(.storageBack).isEmpty, "tried again only at 15 s")
        agent.advance(seconds: 2)
        #expect(agent.events.notices(.storageBack).count == 1, "\(agent.output)")
        #expect(agent.events.notices(.clipWrittenFromMemory).count == 1, "\(agent.output)")
        #expect(agent.events.clipsSaved.count == 1 && agent.outcome == nil, "saved while the run goes on")
        try agent.expectCompletePlayableClips()
    }
}
