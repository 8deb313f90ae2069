import Foundation
import Recorder
import TestSupport
import Testing

/// The agent stopped (SIGSTOP, as a debugger, a paused VM or a frozen cgroup does) in the
/// middle of an event and continued 7 s later: the time it did not run is no stall of the
/// camera, and nothing it records afterwards is impossible — no clip starts after its
/// trigger, no two clips claim one event, every clip plays.
@Suite(.serialized) struct StopTests {
    @Test func stoppedAndContinuedTheAgentRecordsNoImpossibleClip() throws {
        let dir = try TemporaryDirectory("vigil-faults-stop")
        defer { dir.remove() }
        // Two events: something crosses from 2 s to 9 s and from 20 s to 24 s. The frames come
        // through a pipe the test feeds: none is waiting when the agent is continued (as when
        // a camera's next frame is a moment away), so the pipeline wakes first and finds its
        // wait for a frame long over.
        let storage = dir.file("clips")
        let (feeder, agent) = try fedAgent(
            scene(seconds: 28, objects: [crossing(2, 9), crossing(20, 24)]), in: dir, storage: storage)
        try feeder.feed(until: 5)
        try #require(agent.waitUntil(timeout: 120) { !movieFiles(in: storage).isEmpty }, "\(agent.output)")
        usleep(500_000)
        agent.kill(SIGSTOP)
        usleep(7_000_000)
        agent.kill(SIGCONT)
        usleep(1_000_000)
        try feeder.feed(until: 28)
        feeder.close()
        let status = agent.waitForExit(timeout: 300)
        let output = agent.output
        #expect(status == 0, "\(output)")

        // Stopped is not stalled: the source was as stopped as the pipeline waiting for it.
        #expect(logLines(output, "the source delivered nothing").isEmpty, "\(output)")
        let records = try EventsJournal(directory: storage).records().records
        try #require(!records.isEmpty, "\(output)")
        for record in records {
            #expect((record.preRollSeconds ?? 0) >= 0, "a clip that starts after its trigger: \(record)")
        }
        let started = logLines(output, "clip started")
        let events = started.compactMap { logValue($0, "event").flatMap(Int.init) }
        #expect(events.count == started.count && events == Array(Set(events)).sorted(), "\(started)")
        #expect(started.allSatisfy { (logValue($0, "preroll").flatMap(Double.init) ?? -1) >= 0 }, "\(started)")
        #expect(Set(records.map(\.file)) == Set(movieFiles(in: storage)))
        for file in movieFiles(in: storage) { try expectPlayable(storage + "/" + file) }
        print(
            "stopped for 7 s: \(records.count) clips, events \(events), pre-rolls \(records.map { $0.preRollSeconds ?? 0 }), dropped at capture: \(logLines(output, "vigil stopped").first.flatMap { logValue($0, "dropped_at_capture_total") } ?? "?")"
        )
    }
}
