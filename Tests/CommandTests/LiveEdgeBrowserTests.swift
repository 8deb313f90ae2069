import Foundation
import TestSupport
import Testing

/// Issue 44, 4, as an owner meets it: the page's live view in Debian's Chromium (headless,
/// driven over DevTools) on the real agent with the synthetic camera at 15 fps. What a user
/// notices is asserted — a picture, playing, held at the newest frame (counted in frames), back
/// at it after a 20 s pause and after the agent restarts, without a reload — and the glass to
/// glass lag is measured (the frame's capture time, from `X-Capture-Clock` and its media time,
/// against the wall clock when the page shows it) and printed, never asserted.
@Suite(.serialized) struct LiveEdgeBrowserTests {
    static let fps = 15.0

    /// What the page's live view is doing, as JSON: its media time, where its buffer ends, whether
    /// it plays, how far behind the capture its frame is (seconds), the navigations so far.
    static let look = """
        JSON.stringify((() => {
          const v = document.getElementById("live");
          const end = v.buffered.length ? v.buffered.end(v.buffered.length - 1) : 0;
          const clock = Number(v.dataset.clock || "NaN");
          return { time: v.currentTime, end, paused: v.paused, ready: v.readyState, src: v.currentSrc.slice(0, 5),
                   lag: Date.now() / 1000 - (clock + v.currentTime), marker: window.vigilTestMarker === 1 };
        })())
        """

    static func look(_ browser: DevToolsBrowser) -> [String: Any]? {
        guard let text = try? browser.evaluate(Self.look) else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
    }

    /// Frames between what the page shows and the newest frame it has.
    static func framesBehindItsNewest(_ seen: [String: Any]) -> Double {
        ((seen["end"] as? Double ?? 0) - (seen["time"] as? Double ?? 0)) * fps
    }

    /// Waits until the page plays at its newest frame (within 8 frames of it, its media time
    /// moving); the last look, or nil.
    static func waitForTheEdge(_ browser: DevToolsBrowser, timeout: Double = 60) throws -> [String: Any]? {
        var last: [String: Any]?
        var before: Double?
        let reached = try waitUntil(timeout: timeout, every: 0.3) {
            guard let seen = look(browser) else { return false }
            last = seen
            let time = seen["time"] as? Double ?? 0
            defer { before = time }
            return seen["paused"] as? Bool == false && (seen["ready"] as? Int ?? 0) >= 2 && time > (before ?? .infinity)
                && framesBehindItsNewest(seen) <= 8
        }
        return reached ? last : nil
    }

    /// The media sequence and discontinuity sequence of the playlist at `base` now.
    static func sequences(_ base: String) throws -> (media: Int, discontinuity: Int) {
        let text = String(decoding: try WebCommandTests.get(base + "/live.m3u8").body, as: UTF8.self)
        func value(_ tag: String) -> Int {
            text.split(separator: "\n").first { $0.hasPrefix(tag) }.flatMap { Int($0.dropFirst(tag.count)) } ?? -1
        }
        return (value("#EXT-X-MEDIA-SEQUENCE:"), value("#EXT-X-DISCONTINUITY-SEQUENCE:"))
    }

    /// A TCP port nothing listens on now, for an agent that restarts on the same one.
    static func freePort() throws -> Int {
        let r = try runTool(
            "python3", ["-c", "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"])
        return try #require(Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    static func config(_ dir: TemporaryDirectory, port: Int) throws -> String {
        try AgentTests.syntheticConfig(
            dir,
            extra: """
                recording = { pre_roll = 1.0; post_roll = 1.0; max_clip = 10.0; };
                web = { enabled = true; listen = "127.0.0.1"; port = \(port); };
                """)
    }

    @Test func thePagesLiveViewPlaysAtTheNewestFrameAndComesBackAfterAPauseAndARestart() throws {
        let dir = try TemporaryDirectory("vigil-live-edge")
        defer { dir.remove() }
        let port = try Self.freePort()
        let base = "http://127.0.0.1:\(port)"
        var agent = try AgentProcess(config: try Self.config(dir, port: port))
        defer { agent.kill(SIGKILL) }
        _ = try WebCommandTests.webAddress(of: agent)
        // A viewer that asks before the first GOP waits for it: a picture, never a 503 for want
        // of one (only the moment before the agent's run starts answers "starting").
        let early = try WebCommandTests.get(base + "/live.mp4?gops=1")
        let earlyText = String(decoding: early.body.prefix(300), as: UTF8.self)
        #expect(
            early.status == 200 || earlyText.contains("starting"), "before the first GOP: \(early.status) \(earlyText)")
        try #require(try LiveCommandTests.waitForLive(base), "\(agent.output)")

        // ffmpeg reads both streams without a decode error.
        for path in ["/live/edge.mp4?gops=2", "/live.mp4?gops=2"] {
            let r = try runTool("ffmpeg", ["-nostdin", "-v", "error", "-i", base + path, "-f", "null", "-"])
            #expect(r.status == 0 && r.stderr.isEmpty, "ffmpeg \(path): \(r.stderr)")
        }

        let browser = try DevToolsBrowser(dir, width: 1280, height: 800, page: base + "/")
        defer { browser.close() }
        let playing = try Self.waitForTheEdge(browser)
        #expect(playing != nil, "the live view does not play at its newest frame: \(Self.look(browser) ?? [:])")
        #expect(playing?["src"] as? String == "blob:", "the live view plays through MSE: \(playing ?? [:])")
        // A mark in the page's window, which a reload would lose.
        #expect(
            try waitUntil(timeout: 30, every: 1) {
                try browser.evaluate("String(window.vigilTestMarker)") == "1"
                    || browser.evaluate("String(window.vigilTestMarker = 1)") == "0"
            }, "the page kept loading again")
        // Counted: the page's stream, and an HLS player that asked for the playlist (the same
        // curl as the waits above: one player).
        _ = try WebCommandTests.get(base + "/live.m3u8")
        let viewers = try LiveCommandTests.metric(base, "live_viewers")
        #expect(viewers == 2, "the page's view and an HLS player: \(viewers ?? -1)")

        // Glass to glass, 10 samples a second apart: printed; held at the edge: asserted.
        var lags: [Double] = []
        for _ in 0..<10 {
            Thread.sleep(forTimeInterval: 1)
            guard let seen = Self.look(browser) else { continue }
            if let lag = seen["lag"] as? Double, lag.isFinite { lags.append(lag) }
            #expect(Self.framesBehindItsNewest(seen) <= 8, "the view fell behind its newest frame: \(seen)")
        }
        let sorted = lags.sorted()
        let median = sorted.isEmpty ? .nan : (sorted[(sorted.count - 1) / 2] + sorted[sorted.count / 2]) / 2
        print(
            "live view glass to glass (headless Chromium, MSE, one-frame fragments): median \(String(format: "%.3f", median)) s of \(lags.count) samples: \(lags.map { String(format: "%.3f", $0) })"
        )
        #expect(lags.count == 10, "each sample measured")

        // Paused 20 s, played again: at the newest frame, not 20 s of backlog behind.
        let paused = try #require(
            Double(try browser.evaluate("(v => (v.pause(), String(v.currentTime)))(document.getElementById('live'))")))
        Thread.sleep(forTimeInterval: 20)
        _ = try browser.evaluate("document.getElementById('live').play(), 'played'")
        let resumed = try Self.waitForTheEdge(browser)
        #expect(resumed != nil, "after a pause the view is not back at its newest frame: \(Self.look(browser) ?? [:])")
        #expect((resumed?["time"] as? Double ?? 0) > paused + 15, "it jumped what it missed: \(resumed ?? [:])")

        // The agent restarts on the same port: the view plays again, the page never reloaded;
        // HLS's media sequence and discontinuity sequence go on upward (RFC 8216 §6.2.1: after
        // a restart they went from 62 back to 55, and HLS froze).
        let hlsBefore = try Self.sequences(base)
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)
        let before = try #require(Self.look(browser))
        agent = try AgentProcess(config: try Self.config(dir, port: port))
        _ = try WebCommandTests.webAddress(of: agent)
        var after: [String: Any]?
        _ = try waitUntil(timeout: 60, every: 0.5) {
            after = try Self.waitForTheEdge(browser, timeout: 2)
            return after.map { ($0["end"] as? Double ?? 0) > (before["end"] as? Double ?? 0) } ?? false
        }
        #expect(after != nil, "after the restart the view does not play again: \(Self.look(browser) ?? [:])")
        #expect(after?["marker"] as? Bool == true, "the page was loaded again")
        #expect(try LiveCommandTests.waitForLive(base))
        let hlsAfter = try Self.sequences(base)
        #expect(
            hlsAfter.media > hlsBefore.media && hlsAfter.discontinuity > hlsBefore.discontinuity,
            "the playlist's sequences before the restart \(hlsBefore), after \(hlsAfter)")

        // The first picture after the page opens, 5 loads: the page's clock (from the start of
        // its navigation) when its video first has a frame to show, looked at every 50 ms (so
        // up to that much late; printed, not asserted).
        var firsts: [Double] = []
        for _ in 0..<5 {
            _ = try browser.call("Page.reload", ["ignoreCache": true])
            var first: Double?
            _ = try waitUntil(timeout: 30, every: 0.05) {
                let text = try? browser.evaluate(
                    "(v => v && v.readyState >= 2 && v.currentSrc.startsWith('blob:') ? String(performance.now()) : '')(document.getElementById('live'))"
                )
                first = Double(text ?? "")
                return first != nil
            }
            if let first { firsts.append(first / 1000) }
        }
        let firstSorted = firsts.sorted()
        print(
            "live view first picture after the page opens: median \(firstSorted.isEmpty ? "none" : String(format: "%.3f", firstSorted[firstSorted.count / 2])) s of \(firsts.count) loads: \(firsts.map { String(format: "%.3f", $0) })"
        )
        #expect(firsts.count == 5, "each load showed a picture")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)
    }

    /// Issue 44, 5: a viewer that stopped reading for 20 s (a player paused) was fed what it
    /// missed afterwards — 285 frames, 19 s, held in the sockets' buffers (the kernel grows a
    /// stream's send buffer to megabytes) and played through first. Now the server's side holds
    /// 128 KB at most and the stream goes on from the newest keyframe: what comes late is
    /// bounded in bytes, and the 20 s are skipped.
    @Test func aViewerThatStopsReadingForTwentySecondsGetsLittleOfWhatItMissed() throws {
        let dir = try TemporaryDirectory("vigil-live-stall")
        defer { dir.remove() }
        let port = try Self.freePort()
        let agent = try AgentProcess(config: try Self.config(dir, port: port))
        defer { agent.kill(SIGKILL) }
        _ = try WebCommandTests.webAddress(of: agent)
        try #require(try LiveCommandTests.waitForLive("http://127.0.0.1:\(port)"), "\(agent.output)")
        // A player's socket of its own size (the kernel's receive autotuning left out).
        let viewer = try LoopbackClient(port: port, receiveBuffer: 32 * 1024)
        viewer.send("GET /live/edge.mp4 HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        _ = LoopbackClient.wait(for: [viewer], timeout: 3) { _ in false }
        let clock = try #require(viewer.header("x-capture-clock").flatMap(Double.init), "\(viewer.statusLine ?? "")")
        let before = viewer.received.count
        Thread.sleep(forTimeInterval: 20)
        let resumed = Date().timeIntervalSince1970
        _ = LoopbackClient.wait(for: [viewer], timeout: 5) { _ in false }

        // Each fragment: where it starts, how long it is with its mdat, its capture time.
        let head = try #require(viewer.received.firstRange(of: Array("\r\n\r\n".utf8))).upperBound
        let boxes = topLevelBoxes(Array(viewer.received[head...]))
        var fragments: [(at: Int, bytes: Int, time: Double)] = []
        for (i, box) in boxes.enumerated() where box.type == "moof" {
            let moof = Array(viewer.received[(head + box.offset)..<(head + box.offset + box.size)])
            guard let tfdt = moof.firstRange(of: Array("tfdt".utf8))?.lowerBound, moof[tfdt + 4] == 1 else { continue }
            let ticks = moof[(tfdt + 8)..<(tfdt + 16)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let mdat = i + 1 < boxes.count ? boxes[i + 1].size : 0
            fragments.append((head + box.offset, box.size + mdat, clock + Double(ticks) / 90000))
        }
        let late = fragments.filter { $0.at >= before && $0.time < resumed - 1 }
        print(
            "after 20 s without reading: \(late.count) frames (\(late.reduce(0) { $0 + $1.bytes }) bytes) captured before it read again came first"
        )
        #expect(late.reduce(0) { $0 + $1.bytes } <= 512 * 1024, "what came late: \(late.count) frames")
        let skipped = zip(fragments, fragments.dropFirst()).contains { $1.time - $0.time > 10 }
        #expect(skipped, "the stream skipped what the viewer missed")
        #expect(fragments.last.map { $0.time > resumed + 3 } == true, "it went on at the newest frames")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)
    }
}
