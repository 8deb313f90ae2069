import Capture
import Foundation
import Media
import TestSupport
import Testing

/// The live view of the real agent over HTTP on a loopback port: `/live.mp4` read by ffprobe,
/// ffmpeg and GStreamer as they read a clip, `/live.m3u8` by ffmpeg and GStreamer's HLS player,
/// and many viewers — one of them stalled — beside the recording.
@Suite struct LiveCommandTests {
    /// Waits until the agent's web server has a live picture (a whole GOP since it started),
    /// asked with `arguments` (a sign-in); false if it had none within 40 s.
    static func waitForLive(_ base: String, _ arguments: [String] = []) throws -> Bool {
        try waitUntil(timeout: 40) { try WebCommandTests.get(base + "/live.m3u8", arguments).status == 200 }
    }

    /// `curl` on `url` in the background, its body into `output`.
    static func startCurl(_ url: String, output: String, _ arguments: [String] = []) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-sS", "-o", output] + arguments + [url]
        process.standardInput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    static func waitForExit(_ process: Process, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        return !process.isRunning
    }

    /// The value of `metric` (for the camera "yard") in `/metrics`.
    static func metric(_ base: String, _ metric: String) throws -> Int? {
        let text = String(decoding: try WebCommandTests.get(base + "/metrics").body, as: UTF8.self)
        let line = text.split(separator: "\n").first { $0.hasPrefix("vigil_\(metric){camera=\"yard\"} ") }
        return line?.split(separator: " ").last.flatMap { Int($0) }
    }

    @Test func theLiveStreamAndItsPlaylistPlayInEveryReaderAndEndCleanlyWithTheAgent() throws {
        let dir = try TemporaryDirectory("vigil-live")
        defer { dir.remove() }
        let (agent, base) = try WebCommandTests.agentWithWeb(dir, seconds: 60)
        defer { agent.kill(SIGKILL) }
        try #require(try Self.waitForLive(base), "\(agent.output)")

        // Three GOPs of 15 frames (a keyframe a second at 15 fps), in every reader.
        let probe = try #require(try expectPlayable(base + "/live.mp4?gops=3"))
        #expect(probe.video?["nb_read_packets"] == "45", "\(probe.streams)")
        #expect(probe.video?["width"] == "320" && probe.video?["height"] == "240")
        let head = try WebCommandTests.get(base + "/live.mp4?gops=1")
        #expect(head.headers["content-type"] == "video/mp4" && head.headers["cache-control"] == "no-store")
        #expect(head.body.count > 1000)

        // HLS: the playlist, its initialization segment and its segments, as ffmpeg plays them…
        let playlist = String(decoding: try WebCommandTests.get(base + "/live.m3u8").body, as: UTF8.self)
        // Streams are numbered on from the wall clock's quarter-seconds since 2024 at the start (a
        // restart never numbers back), within the 32 bits GStreamer's HLS client reads.
        #expect(playlist.hasPrefix("#EXTM3U\n") && playlist.contains("#EXT-X-MAP:URI=\"live/init-"))
        for tag in ["#EXT-X-MEDIA-SEQUENCE:", "#EXT-X-DISCONTINUITY-SEQUENCE:"] {
            let value = playlist.split(separator: "\n").first { $0.hasPrefix(tag) }.flatMap {
                Int($0.dropFirst(tag.count))
            }
            #expect(value.map { $0 > 0 && $0 < Int(Int32.max) } == true, "\(tag) \(playlist)")
        }
        let hls = try runTool(
            "ffmpeg", ["-nostdin", "-v", "error", "-i", base + "/live.m3u8", "-t", "3", "-f", "null", "-"])
        #expect(hls.status == 0 && hls.stderr.isEmpty, "\(hls.stderr)")
        let hlsProbe = try FFprobe.probe(base + "/live.m3u8", countPackets: false)
        #expect(hlsProbe.video?["codec_name"] == "h264" && hlsProbe.video?["width"] == "320")
        // …and as GStreamer's player does, in real time (its HLS demuxer, qtdemux, the decoder).
        let gst = try runTool(
            "timeout",
            [
                "-s", "KILL", "60", GStreamer.tool, "-v", "playbin3", "uri=\(base)/live.m3u8",
                "video-sink=fakesink silent=false sync=true num-buffers=30", "audio-sink=fakesink",
            ])
        let played = gst.stdout.split(separator: "\n").filter { $0.contains("last-message = chain") }.count
        #expect(gst.status == 0 && played == 30, "GStreamer played \(played) frames of the HLS stream: \(gst.stderr)")
        #expect(!gst.stdout.contains("ERROR:") && !gst.stdout.contains("WARNING:"), "\(gst.stdout)")

        // What is not there, or not asked right.
        #expect(try WebCommandTests.get(base + "/live/999999.m4s").status == 404)
        #expect(try WebCommandTests.get(base + "/live/init-7.mp4").status == 404)
        #expect(try WebCommandTests.get(base + "/live.mp4?gops=0").status == 400)

        // Recording asked for from the web, as `vigil trigger` asks: a clip of the outside event.
        #expect(try WebCommandTests.waitForClips(at: base, of: agent), "the footage's own event")
        let asked = try WebCommandTests.get(
            base + "/api/trigger", ["-X", "POST", "-H", "Content-Type: application/json", "-d", "{\"seconds\": 2}"])
        #expect(asked.status == 202, "\(String(decoding: asked.body, as: UTF8.self))")
        #expect(try WebCommandTests.waitForClips(2, at: base, of: agent), "\(agent.output)")
        let clips = try JSONSerialization.jsonObject(with: try WebCommandTests.get(base + "/api/clips").body)
        let newest = (clips as? [[String: Any]])?.first
        #expect(newest?["trigger"] as? String == "external", "\(String(describing: newest))")

        // A viewer watching when the agent stops gets the end of the stream, a playable movie.
        let watched = dir.file("watched.mp4")
        let viewer = try Self.startCurl(base + "/live.mp4", output: watched)
        Thread.sleep(forTimeInterval: 3)
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(Self.waitForExit(viewer, timeout: 20), "the viewer's stream did not end with the agent")
        #expect(viewer.terminationStatus == 0)
        try expectPlayable(watched)
        #expect(!agent.output.contains("level=error"), "\(agent.output)")
    }

    @Test func theLiveStreamCarriesTheMicrophone() throws {
        let dir = try TemporaryDirectory("vigil-live-sound")
        defer { dir.remove() }
        // The synthetic camera and microphone (a 440 Hz tone), on one clock as a camera and a
        // sound card are.
        let config = try AgentTests.syntheticConfig(
            dir,
            extra: """
                audio = { enabled = true; device = "synthetic"; rate = 48000; channels = 1; };
                web = { enabled = true; port = 0; };
                """)
        let agent = try AgentProcess(config: config)
        defer { agent.kill(SIGKILL) }
        let base = try WebCommandTests.webAddress(of: agent)
        try #require(try Self.waitForLive(base), "\(agent.output)")

        // Three GOPs with their sound, read over HTTP by every reader.
        let live = dir.file("live.mp4")
        let got = try runTool("curl", ["-sS", "-o", live, base + "/live.mp4?gops=3"])
        #expect(got.status == 0, "\(got.stderr)")
        let probe = try #require(try expectPlayable(live))
        #expect(probe.video?["nb_read_packets"] == "45", "\(probe.streams)")
        #expect(probe.audio?["codec_name"] == "opus" && probe.audio?["sample_rate"] == "48000", "\(probe.streams)")
        // About three seconds of it (less the capture's lag), in 20 ms packets.
        let packets = Int(probe.audio?["nb_read_packets"] ?? "") ?? 0
        #expect((120...150).contains(packets), "\(packets) sound packets for 3 s of picture")
        let gst = try GStreamer.decode(live, track: .opusSound)
        #expect(gst.problems.isEmpty && gst.frames.count == packets, "\(gst.problems) \(gst.frames.count)")
        // What plays is the microphone's tone.
        let samples = try decodedSound(live)
        let hertz = soundLevel(samples[samples.count / 4..<samples.count * 3 / 4]).hertz
        #expect(abs(hertz - 440) < 5, "the sound is not the microphone's 440 Hz tone: \(hertz) Hz")

        // The HLS stream stays picture only (players that take no Opus play it all the same).
        let hlsProbe = try FFprobe.probe(base + "/live.m3u8", countPackets: false)
        #expect(hlsProbe.video != nil && hlsProbe.audio == nil, "\(hlsProbe.streams)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(!agent.output.contains("level=warning"), "\(agent.output)")
    }

    /// As many viewers as the server sends to (32: 30 players, one that reads a byte a second,
    /// one that never reads).
    @Test func thirtyTwoViewersAndStalledOnesDoNotCostTheRecordingAFrame() throws {
        let dir = try TemporaryDirectory("vigil-live-many")
        defer { dir.remove() }
        // 5 frames a second: the capture queue holds 3, so a frame is lost only when the
        // pipeline is held up for more than half a second — by a viewer, or by nothing.
        let scene = SyntheticScene(
            width: 320, height: 240, frameRate: Rational(5, 1), pixelFormat: .i420, seed: 7, noiseSigma: 3,
            schedule: SceneSchedule(objects: [AgentTests.object(14, 17)]), duration: .init(seconds: 26))
        let footage = try AgentTests.footage(scene, in: dir)
        let config = try AgentTests.config(
            dir, footage: footage, extra: "web = { enabled = true; port = 0; };", realtime: true)
        let agent = try AgentProcess(config: config)
        defer { agent.kill(SIGKILL) }
        let base = try WebCommandTests.webAddress(of: agent)
        let address = base.dropFirst("http://".count)
        // Waited for with a stream that ends, not the playlist: an HLS player is counted for three
        // target durations after it asked, and would be among the viewers counted below.
        try #require(
            try waitUntil(timeout: 40) { try WebCommandTests.get(base + "/live.mp4?gops=1").status == 200 },
            "\(agent.output)")

        var viewers: [Process] = []
        // SIGKILL: the test's threads block SIGTERM, and what they start inherits the mask.
        defer { for v in viewers where v.isRunning { kill(v.processIdentifier, SIGKILL) } }
        for i in 0..<30 {
            viewers.append(try Self.startCurl(base + "/live.mp4", output: dir.file("viewer-\(i).mp4")))
        }
        // One that reads a byte a second, and one that asks and never reads.
        viewers.append(try Self.startCurl(base + "/live.mp4", output: dir.file("slow.mp4"), ["--limit-rate", "1"]))
        let stalled = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(stalled) }
        var peer = sockaddr_in()
        peer.sin_family = sa_family_t(AF_INET)
        peer.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        peer.sin_port = UInt16(Int(address.split(separator: ":").last ?? "") ?? 0).bigEndian
        let connected = withUnsafePointer(to: &peer) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(stalled, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        #expect(connected)
        let request = Array("GET /live.mp4 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        #expect(send(stalled, request, request.count, 0) == request.count)

        var most = 0
        for _ in 0..<50 {
            most = max(most, try Self.metric(base, "live_viewers") ?? 0)
            if most >= 32 { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        #expect(most == 32, "live viewers at most \(most)")

        // The footage ends; the agent records the event and stops as it always does.
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let stopped = try #require(agent.outputLines.last { $0.contains("msg=\"vigil stopped\"") }, "\(agent.output)")
        #expect(stopped.contains(" dropped_at_capture_total=0 "), "\(stopped)")
        #expect(stopped.contains(" dropped_at_writer_total=0 "), "\(stopped)")
        #expect(stopped.contains(" clips_total=1 "), "\(stopped)")
        #expect(!agent.output.contains("level=error"), "\(agent.output)")
        let clips = movieFiles(in: dir.file("clips"))
        #expect(clips.count == 1)
        for clip in clips { try expectPlayable(dir.file("clips/" + clip)) }
        // Every viewer's stream ended with the agent, each a playable movie of what it saw (but
        // the slow one's, which has the kernel's buffers to read yet, a byte a second).
        for (i, viewer) in viewers.dropLast().enumerated() {
            #expect(Self.waitForExit(viewer, timeout: 30), "viewer \(i) still running")
        }
        for i in [0, 17, 29] { try expectPlayable(dir.file("viewer-\(i).mp4")) }
    }
}
