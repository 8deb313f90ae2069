import Foundation
import TestSupport
import Testing

/// `vigil run` stopped (SIGTERM) in the middle of an event with every way out stuck at once: a
/// hook that ignores SIGTERM, a broker frozen with messages in flight, an upload server that
/// takes the connection and never answers, 1,000 slow web clients from 40 addresses and 32
/// viewers that never read. The clip being recorded is saved, and the agent exits 0 — each
/// sink finishing side by side, so the stop is about as long as the slowest one, not their sum
/// (the time is printed, not asserted: this machine is shared).
@Suite struct StuckStopTests {
    @Test func aStopWithEverySinkStuckSavesTheClipAndExits() throws {
        let dir = try TemporaryDirectory("vigil-faults-stuck-stop")
        defer { dir.remove() }
        let hook = try writeScript(
            "trap '' TERM\necho $$ >> \(dir.file("pids"))\nsleep 60\n", named: "hook.sh", in: dir)
        defer {
            for group in processIDs(inFile: dir.file("pids")) where !livingProcesses(inGroup: group).isEmpty {
                kill(-group, SIGKILL)
            }
        }
        let broker = try Broker(dir)
        defer { broker.stop() }
        // An upload server that takes connections (the kernel's backlog) and never reads or answers.
        let (upload, server) = try unansweredUpload(in: dir, listening: true)
        defer { close(server) }
        let config = dir.file("vigil.conf")
        try """
        camera = { device = "synthetic"; name = "yard"; width = 640; height = 480; fps = 15.0; };
        recording = { pre_roll = 1.0; post_roll = 1.0; };
        storage = { path = "\(dir.file("clips"))"; min_free_mb = 1; };
        log = { level = "info"; stats_interval = 0; };
        hooks = { on_event_start = "\(hook)"; on_clip_saved = "\(hook)"; timeout = 600; };
        mqtt = { enabled = true; host = "127.0.0.1"; port = \(broker.port); };
        \(upload)
        web = { enabled = true; port = 0; };
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let online = try Subscriber(port: broker.port, topic: "vigil/yard/availability", in: dir)
        let agent = try AgentProcess(config: config)
        defer { if agent.isRunning { agent.kill(SIGKILL) } }
        let listening = try #require(agent.webServerListening(timeout: 120), "\(agent.output)")
        let port = try #require(logValue(listening, "address")?.split(separator: ":").last.flatMap { Int($0) })
        try #require(online.waitFor(timeout: 60) { $0.last?.payload == "online" }, "\(agent.output)")
        online.stop()
        // A short event whose clip's upload then hangs, and a long one under way at the stop.
        let trigger = { (seconds: Int) throws -> String in
            try runTool(
                "curl",
                [
                    "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H",
                    "Content-Type: application/json", "-d", "{\"seconds\": \(seconds)}",
                    "http://127.0.0.1:\(port)/api/trigger",
                ]
            ).stdout
        }
        let clips = dir.file("clips")
        #expect(try trigger(2) == "202")
        try #require(agent.waitUntil(timeout: 120) { !journalRecords(in: clips).isEmpty }, "\(agent.output)")
        #expect(try trigger(60) == "202")
        // The second clip's file, not in the journal while it is recorded.
        try #require(agent.waitUntil(timeout: 120) { !unsavedClips(in: clips).isEmpty }, "\(agent.output)")
        let file = try #require(unsavedClips(in: clips).first, "\(agent.output)")
        let addresses = (2...41).map { "127.0.0.\($0)" }
        let slow = try SlowClients(port: port, count: 1000, from: addresses)
        defer { slow.close() }
        var viewers: [LoopbackClient] = []
        for i in 0..<32 {
            let viewer = try LoopbackClient(port: port, from: addresses[i % addresses.count], receiveBuffer: 4096)
            viewer.send("GET /live.mp4 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            viewers.append(viewer)
        }
        broker.pause()
        defer { broker.resume() }
        sleep(3)
        let asked = Date()
        agent.kill(SIGTERM)
        let status = agent.waitForExit(timeout: 120)
        let took = Date().timeIntervalSince(asked)
        let output = agent.output
        #expect(status == 0, "\(output)")
        #expect(
            logLines(output, "clip saved").contains { logValue($0, "file") == file },
            "the open clip was not saved:\n\(output)")
        #expect(!logLines(output, "hook killed: the agent stopped").isEmpty, "\(output)")
        #expect(output.split(separator: "\n").last.map { logValue(String($0), "msg") } == "vigil stopped", "\(output)")
        print(
            "stuck stop: SIGTERM to exit \(String(format: "%.2f", took)) s with a hook ignoring SIGTERM, a frozen broker, an upload server that never answers, \(slow.started) slow clients and \(viewers.count) viewers that never read"
        )
    }
}
