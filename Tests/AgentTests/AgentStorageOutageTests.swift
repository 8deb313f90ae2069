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

/// The storage directory on a bad day: read-only at start, gone while the agent records, back
/// again — tried again as `Retry` says on the clock the stepped agent (`EmbeddedAgent`) moves.
@Suite(.serialized) struct AgentStorageOutageTests {
    /// A read-only storage directory at start (a card the kernel remounted after an error):
    /// its lock file cannot be made, which is not another agent. The agent runs, waits for
    /// the storage as for a disk not mounted yet (said once, with the file system's words),
    /// and does not exit 75.
    @Test func aReadOnlyStorageDirectoryAtStartIsWaitedForNotTakenForAnotherAgent() throws {
        let storage = MemoryStorage()
        storage.writable = false
        let agent = try EmbeddedAgent(
            config: testConfig(), storage: storage,
            openSource: { _ throws(CaptureError) in
                try synthetic(scene(seconds: 4, objects: []))
            })
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        let waiting = agent.events.notices(.storageUnavailable)
        #expect(
            waiting.count == 1 && waiting.allSatisfy { $0.field("error")?.contains("Read-only file system") == true },
            "\(agent.output)")
        // Not taken for another agent's directory: that would be an error, and stop the agent.
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// Three events, something crossing from 2 to 5 s, 12 to 15 s and 22 to 25 s.
    static let threeEvents = scene(seconds: 30, objects: [crossing(2, 5), crossing(12, 15), crossing(22, 25)])

    /// The three events recorded into a storage directory unavailable at start, writable again
    /// when the `n`th event ends, with `memory` bytes of video allowed to wait for it.
    static func unavailableUntil(
        event n: Int, memory: Int = DiskFullPolicy.memoryLimit
    ) throws -> EmbeddedAgent {
        let storage = MemoryStorage()
        storage.writable = false
        return try EmbeddedAgent(
            config: testConfig(), storage: storage,
            openSource: { _ throws(CaptureError) in try synthetic(Self.threeEvents) },
            onEvent: Self.writable(storage, afterEvent: n), memoryForWaitingVideo: memory)
    }

    /// What makes `storage` writable when the `n`th event ends.
    static func writable(_ storage: MemoryStorage, afterEvent n: Int) -> @Sendable (AgentEvent) -> Void {
        let ended = Mutex(0)
        return { event in
            guard case .motionEnded = event else { return }
            let count = ended.withLock {
                $0 += 1
                return $0
            }
            if count == n { storage.writable = true }
        }
    }

    /// Every clip saved is a complete movie that plays, each event has one, and the journal
    /// has a line for each clip on disk.
    func expectEveryEventRecorded(_ agent: EmbeddedAgent, events: Int) throws {
        let saved = agent.events.clipsSaved
        let started = agent.events.clipsStarted
        #expect(Set(started.map(\.event)) == Set(1...events), "\(agent.output)")
        #expect(Set(saved.map(\.record.file)) == Set(agent.clipFiles), "\(agent.output)")
        #expect(Set(try agent.journal().map(\.file)) == Set(agent.clipFiles))
        let frames = try agent.expectCompletePlayableClips()
        #expect(frames.values.allSatisfy { $0 > 0 }, "\(frames)")
        let lost = agent.events.notices.filter { [.clipNotRecorded, .clipLostWithTheStorage].contains($0.kind) }
        #expect(lost.isEmpty, "\(lost)")
    }

    /// The storage directory is read-only when the agent starts (a card remounted after an
    /// error, a USB disk that is not back yet) and becomes writable after the second event:
    /// the events meanwhile are recorded in memory and written as clips once it is back —
    /// none is lost.
    @Test func eventsWhileTheStorageIsUnavailableAreKeptInMemoryAndWrittenWhenItIsBack() throws {
        let agent = try Self.unavailableUntil(event: 2)
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        try expectEveryEventRecorded(agent, events: 3)
        #expect(agent.events.clipsSaved.count == 3, "\(agent.output)")
        let held = agent.events.notices(.clipHeld)
        #expect(!held.isEmpty && held.allSatisfy { $0.level == .warning }, "\(agent.output)")
        #expect(agent.events.notices(.clipWrittenFromMemory).count == held.count)
        #expect(agent.events.notices(.storageUnavailable).count == 1, "\(agent.output)")
        #expect(agent.events.notices(.storageBack).count == 1, "\(agent.output)")
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// The storage directory goes away while the first event's clip is written (a USB disk
    /// pulled, re-mounted a moment later): that clip keeps what reached the disk, the event
    /// goes on in memory as a second part, and the later events too; once the directory is
    /// back every event has its clips.
    @Test func aDiskThatGoesAwayMidClipLosesNoEvent() throws {
        let storage = MemoryStorage()
        let started = Mutex(0)
        let agent = try EmbeddedAgent(
            config: testConfig(), storage: storage,
            openSource: { _ throws(CaptureError) in try synthetic(Self.threeEvents) },
            onEvent: { event in
                // Gone once the first clip's file is made; back when the third event starts.
                if case .clipStarted(let clip) = event, clip.event == 1, clip.part == 1 { storage.writable = false }
                if case .motionStarted = event,
                    started.withLock({
                        $0 += 1
                        return $0
                    }) == 3
                {
                    storage.writable = true
                }
            })
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        try expectEveryEventRecorded(agent, events: 3)
        let first = agent.events.clipsStarted.filter { $0.event == 1 }
        #expect(first.map(\.part) == [1, 2], "\(agent.output)")
        #expect(!agent.events.notices(.clipWrittenFromMemory).isEmpty, "\(agent.output)")
    }

    /// The video waiting for the storage directory is bounded (here 300 kB, half an event;
    /// 64 MB by default): when it is reached the event's clip ends there, which is said once
    /// with what is dropped, and the events after it are not recorded (each an error) until
    /// the directory is back. What was kept is written then, a complete movie.
    @Test func theVideoWaitingForTheStorageIsBoundedAndWhatIsDroppedIsSaid() throws {
        let agent = try Self.unavailableUntil(event: 3, memory: 300_000)
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        let full = agent.events.notices(.heldVideoFull)
        guard full.count == 1, case .heldVideoFull(let event, _, let keptSeconds, _, _) = full[0] else {
            Issue.record("\(agent.events.notices)")
            return
        }
        #expect(full[0].level == .warning && event == 1 && keptSeconds > 0, "\(full)")
        let refused = agent.events.notices(.clipNotRecorded)
        #expect(refused.compactMap { $0.field("event") } == ["2", "3"], "\(agent.output)")
        #expect(refused.allSatisfy { $0.level == .error } && agent.errors.count == 2, "\(agent.errors)")
        let saved = agent.events.clipsSaved
        try #require(saved.count == 1, "\(agent.output)")
        #expect(saved[0].record.frames > 0 && saved[0].record.frames < 75, "\(saved[0].record)")
        #expect(agent.clipFiles == [saved[0].record.file])
        let frames = try agent.expectCompletePlayableClips()
        #expect(frames[saved[0].record.file] == saved[0].record.frames)
    }
}
