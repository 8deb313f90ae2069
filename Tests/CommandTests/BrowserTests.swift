import Foundation
import TestSupport
import Testing

/// The agent's pages in a real browser: Debian's Chromium, headless, against the agent on a
/// loopback port. What a person sees: the page with the scene on it, the live video playing
/// (its time advancing, its picture changing), a clip playing to its end.
@Suite struct BrowserTests {
    /// Chromium's command, headless, in a profile of its own under `dir`, with `arguments`.
    static func chromium(_ dir: TemporaryDirectory, _ arguments: [String]) throws -> ToolResult {
        try runTool(
            "timeout",
            [
                "-s", "KILL", "120", "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--mute-audio", "--autoplay-policy=no-user-gesture-required", "--user-data-dir=\(dir.file("profile"))",
            ] + arguments)
    }

    /// The range of luma (brightest less darkest) in a region of a screenshot, by ffmpeg's
    /// `signalstats`: near 0 for a blank area, wide for a camera's picture.
    static func lumaRange(_ png: String, crop: String) throws -> Int? {
        let r = try runTool(
            "ffmpeg",
            [
                "-nostdin", "-v", "error", "-i", png, "-vf", "crop=\(crop),signalstats,metadata=print:file=-", "-f",
                "null", "-",
            ])
        func value(_ key: String) -> Int? {
            r.stdout.split(separator: "\n").first { $0.hasPrefix("lavfi.signalstats.\(key)=") }
                .flatMap { Double($0.split(separator: "=").last ?? "") }.map { Int($0) }
        }
        guard let low = value("YMIN"), let high = value("YMAX") else { return nil }
        return high - low
    }

    /// How many seconds of the live video the browser is to show.
    static let livePlayed = 2.0

    /// Opens `page` in headless Chromium in real time and returns its title once the page has
    /// made it a JSON object (read from Chromium's DevTools list of pages on a loopback port),
    /// or "waiting" after `timeout` seconds.
    static func reportedTitle(_ dir: TemporaryDirectory, page: String, timeout: Double) throws -> String {
        let profile = dir.file("profile-real-time")
        let process = Process()
        // Foundation starts it in a process group of its own: its renderers go with it.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/chromium")
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio",
            "--autoplay-policy=no-user-gesture-required", "--user-data-dir=\(profile)", "--remote-debugging-port=0",
            page,
        ]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            kill(-process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline && process.isRunning {
            Thread.sleep(forTimeInterval: 0.5)
            // DevToolsActivePort: the port on its first line.
            guard
                let port = (try? String(contentsOfFile: profile + "/DevToolsActivePort", encoding: .utf8))?
                    .split(separator: "\n").first.flatMap({ Int($0) }),
                let list = try? runTool("curl", ["-sS", "--max-time", "5", "http://127.0.0.1:\(port)/json/list"]),
                let pages = try? JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]],
                let title = pages.first(where: { $0["url"] as? String == page })?["title"] as? String
            else { continue }
            // Before the page is parsed its title is empty (or its address): only the report,
            // a JSON object, ends the wait.
            if title.hasPrefix("{") { return title }
        }
        return "waiting"
    }

    @Test func thePageShowsTheSceneTheLiveVideoPlaysAndAClipPlaysToItsEnd() throws {
        let dir = try TemporaryDirectory("vigil-browser")
        defer { dir.remove() }
        // The synthetic camera, which runs until the agent is stopped (footage would end, and a
        // busy machine can make the browser slow).
        let config = try AgentTests.syntheticConfig(
            dir,
            extra: """
                audio = { enabled = true; device = "synthetic"; };
                recording = { pre_roll = 2.0; post_roll = 2.0; max_clip = 10.0; };
                snapshot = { live_interval = 1.0; };
                web = { enabled = true; port = 0; };
                """)
        let agent = try AgentProcess(config: config)
        defer { agent.kill(SIGKILL) }
        let base = try WebCommandTests.webAddress(of: agent)
        #expect(try WebCommandTests.waitForClips(at: base, of: agent, timeout: 120), "\(agent.output)")
        try #require(try LiveCommandTests.waitForLive(base), "\(agent.output)")
        let api = try WebCommandTests.get(base + "/api/clips")
        let list = try #require(try JSONSerialization.jsonObject(with: api.body) as? [[String: Any]])
        let file = try #require(list.first?["file"] as? String)
        let seconds = try #require(list.first?["duration_s"] as? Double)

        // The page, as a phone-sized window shows it: the live video (or its poster, the
        // latest picture) at the top is the scene, not an empty box.
        let shot = dir.file("page.png")
        let page = try Self.chromium(
            dir, ["--window-size=480,800", "--virtual-time-budget=5000", "--screenshot=\(shot)", base + "/"])
        #expect(FileManager.default.fileExists(atPath: shot), "\(page.stderr)")
        let range = try Self.lumaRange(shot, crop: "380:200:50:120")
        #expect((range ?? 0) > 60, "the top of the page is not the camera's picture (luma range \(range ?? -1))")

        // The live video and the clip in <video> elements: a page of the test's own (the
        // agent's allows no script) reads what the browser's player says. In real time, not
        // headless Chromium's virtual time (whose clock runs ahead of the camera's whenever the
        // page waits for the network, and stalls the live video at its first frame).
        let probe = dir.file("probe.html")
        try """
        <!doctype html><html><head><title>waiting</title></head><body>
        <video id="live" muted autoplay playsinline src="\(base)/live.mp4"></video>
        <video id="clip" muted autoplay playsinline src="\(base)/clips/\(file)"></video>
        <script>
        const live = document.getElementById("live"), clip = document.getElementById("clip");
        const seen = {};
        const report = () => { if (!seen.done) { seen.done = true; document.title = JSON.stringify(seen); } };
        const check = () => { if (seen.played !== undefined && seen.clipEnded !== undefined) report(); };
        live.onerror = () => { seen.liveError = live.error.code; report(); };
        clip.onerror = () => { seen.clipError = clip.error.code; report(); };
        live.ontimeupdate = () => {
          if (seen.played === undefined && live.currentTime >= \(Self.livePlayed)) {
            seen.played = live.currentTime;
            seen.width = live.videoWidth;
            seen.height = live.videoHeight;
            seen.sound = live.webkitAudioDecodedByteCount;
            check();
          }
        };
        clip.onended = () => { seen.clipEnded = clip.currentTime; check(); };
        setTimeout(() => { seen.live = live.currentTime; report(); }, 90000);
        </script></body></html>
        """.write(toFile: probe, atomically: true, encoding: .utf8)
        let title = try Self.reportedTitle(dir, page: "file://" + probe, timeout: 120)
        let seen = try #require(
            try JSONSerialization.jsonObject(with: Data(title.replacing("&quot;", with: "\"").utf8))
                as? [String: Any], "\(title)")
        #expect(seen["liveError"] == nil && seen["clipError"] == nil, "\(seen)")
        // The live video plays: two seconds of it were shown.
        #expect(seen["played"] as? Double ?? 0 >= Self.livePlayed, "the live video did not play: \(seen)")
        #expect(seen["width"] as? Int == 320 && seen["height"] as? Int == 240, "\(seen)")
        // With its sound: the browser decoded the microphone's (Opus) track as it played.
        #expect(seen["sound"] as? Int ?? 0 > 0, "the live video's sound was not decoded: \(seen)")
        let ended = try #require(seen["clipEnded"] as? Double, "the clip did not play to its end: \(seen)")
        #expect(abs(ended - seconds) < 0.2, "the clip ended at \(ended) s of \(seconds) s")

        // Later, the live picture is another one: the scene moved on (its clock, at least).
        let later = dir.file("later.png")
        _ = try Self.chromium(
            dir, ["--window-size=480,800", "--virtual-time-budget=5000", "--screenshot=\(later)", base + "/"])
        let hashes = try [shot, later].map { png in
            try runTool(
                "ffmpeg", ["-nostdin", "-v", "error", "-i", png, "-vf", "crop=380:200:50:120", "-f", "md5", "-"]
            ).stdout
        }
        #expect(hashes[0] != hashes[1] && !hashes[0].isEmpty, "the live picture did not change")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)
    }
}
