import Foundation
import QuickTime
import Recorder
import Storage
import TestSupport
import Testing

/// `vigil trigger` as a user runs it, against `vigil run` on footage without motion played in
/// real time: the agent records an outside event; with no agent, the command says so.
@Suite struct TriggerCommandTests {
    @Test func triggerRecordsAnExternalEventOnTheRunningAgent() throws {
        let dir = try TemporaryDirectory("vigil-trigger")
        defer { dir.remove() }
        let footage = try writeFootage(scene(seconds: 14, objects: []), to: dir.file("quiet.y4m"))
        let config = dir.file("vigil.conf")
        try """
        camera = { device = "file:\(footage)"; name = "porch"; realtime = true; };
        recording = { pre_roll = 1.0; post_roll = 1.0; };
        storage = { path = "\(dir.file("clips"))"; min_free_mb = 1; };
        encoder = { threads = 1; };
        """.write(toFile: config, atomically: true, encoding: .utf8)

        let agent = try AgentProcess(config: config)
        defer { agent.kill(SIGKILL) }
        let running = try #require(agent.waitFor("msg=\"vigil running\"", timeout: 60), "\(agent.output)")
        let socket = agent.runtimeDirectory + "/porch.sock"
        #expect(logValue(running, "trigger_socket") == socket)
        Thread.sleep(forTimeInterval: 3)  // some pre-roll in the ring
        let environment = ["VIGIL_RUNTIME_DIR": agent.runtimeDirectory]
        let trigger = try runTool(
            builtExecutable("vigil"), ["trigger", "--config", config, "--seconds", "2"], environment: environment)
        #expect(trigger.status == 0 && trigger.stdout.contains("ok: recording for 2.0 s"), "\(trigger)")
        let refused = try runTool(
            builtExecutable("vigil"), ["trigger", "--config", config, "--seconds", "0"], environment: environment)
        #expect(refused.status == 64 && refused.stderr.contains("from 1 to 3600"), "\(refused)")

        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        #expect(!FileManager.default.fileExists(atPath: socket), "the agent removes its socket when it stops")
        let records = try EventsJournal(directory: dir.file("clips")).records().records
        try #require(records.count == 1, "\(records)\n\(agent.output)")
        #expect(records[0].cause == .external && records[0].triggerTime != nil, "\(records[0])")
        #expect(records[0].durationSeconds >= 3.9 && records[0].durationSeconds <= 5.2, "\(records[0])")
        let clip = dir.file("clips") + "/" + records[0].file
        _ = try expectPlayable(clip, "the triggered clip:")
        #expect(try MovieRepair.inspect(path: clip) == .complete)

        // Nobody answers for this camera any more.
        let none = try runTool(builtExecutable("vigil"), ["trigger", "--config", config], environment: environment)
        #expect(none.status == 69 && none.stderr.contains("no agent is recording camera \"porch\""), "\(none)")
    }
}
