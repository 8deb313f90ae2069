import Foundation
import TestSupport
import Testing

/// The camera over RTSP from the real agent (`rtsp.enabled`, the synthetic camera) on a loopback
/// port, read by real clients: ffprobe, a full ffmpeg decode over TCP and over UDP, GStreamer's
/// `rtspsrc`, and a client that connects and never reads while the agent records.
@Suite struct RTSPCommandTests {
    /// An agent recording the synthetic camera (320×240, 15 fps, a keyframe a second) with its
    /// RTSP server on a free loopback port, and its stream's URL (its log says the port).
    static func agentWithRTSP(
        _ dir: TemporaryDirectory, extra: String = "", before: (String) throws -> Void = { _ in }
    ) throws -> (AgentProcess, String) {
        let config = try AgentTests.syntheticConfig(dir, extra: "rtsp = { enabled = true; port = 0; };\n" + extra)
        try before(config)
        let agent = try AgentProcess(config: config)
        let line = agent.waitFor("msg=\"rtsp server listening\"", timeout: 60)
        guard let url = line?.split(separator: " ").first(where: { $0.hasPrefix("url=") })?.dropFirst(4) else {
            agent.kill(SIGKILL)
            throw RTSPTestError(description: "no \"rtsp server listening\" line: \(agent.output)")
        }
        return (agent, String(url))
    }

    /// The same, with `web.password_file` holding the user `admin`, password `pw`.
    static func agentWithRTSPAndAPassword(_ dir: TemporaryDirectory) throws -> (AgentProcess, String) {
        try agentWithRTSP(
            dir, extra: "web = { password_file = \"web-passwords\"; };",
            before: { config in
                let set = try runTool(
                    builtExecutable("vigil"), ["passwd", "--config", config], input: Data("pw\n".utf8))
                guard set.status == 0 else { throw RTSPTestError(description: "vigil passwd: \(set.stderr)") }
            })
    }

    /// Stops `agent` and expects it to end well, without an error or a warning in its log.
    static func stopCleanly(_ agent: AgentProcess) {
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(!agent.output.contains("level=error") && !agent.output.contains("level=warning"), "\(agent.output)")
    }

    /// ffmpeg decodes three seconds of the stream over TCP, from a keyframe, without an error.
    static func expectPlays(_ url: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let decoded = try decode(url, transport: "tcp")
        #expect(
            decoded.status == 0 && framesDecoded(decoded) >= 40, "\(decoded.stderr)", sourceLocation: sourceLocation)
    }

    /// Stops `agent`, expects it to exit 0, and gives its last line ("vigil stopped", the totals).
    static func stoppedLine(_ agent: AgentProcess) throws -> String {
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        return String(try #require(agent.output.split(separator: "\n").last { $0.contains("msg=\"vigil stopped\"") }))
    }

    struct RTSPTestError: Error, CustomStringConvertible { var description: String }

    /// ffprobe's view of the stream over `transport`: codec, width and height.
    static func probe(_ url: String, transport: String) throws -> ToolResult {
        try runTool(
            "timeout",
            [
                "-s", "KILL", "60", "ffprobe", "-v", "error", "-rtsp_transport", transport, "-show_entries",
                "stream=codec_name,width,height", "-of", "default=noprint_wrappers=1", url,
            ])
    }

    /// ffmpeg decoding three seconds of the stream over `transport`, every frame counted.
    static func decode(_ url: String, transport: String) throws -> ToolResult {
        try runTool(
            "timeout",
            [
                "-s", "KILL", "60", "ffmpeg", "-nostdin", "-v", "error", "-stats", "-rtsp_transport", transport,
                "-i", url, "-t", "3", "-f", "null", "-",
            ])
    }

    /// The frame count of ffmpeg's last progress report.
    static func framesDecoded(_ result: ToolResult) -> Int {
        let last = result.stderr.components(separatedBy: "frame=").last ?? ""
        return Int(last.trimmingCharacters(in: .whitespaces).prefix { $0.isNumber }) ?? 0
    }

    /// What ffmpeg said besides its progress: errors, warnings.
    static func problems(_ result: ToolResult) -> [String] {
        result.stderr.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).map(String.init).filter {
            !$0.hasPrefix("frame=") && !$0.trimmingCharacters(in: .whitespaces).isEmpty
        }
    }

    @Test func realClientsPlayTheCamerasStreamOverTCPAndUDP() throws {
        let dir = try TemporaryDirectory("vigil-rtsp")
        defer { dir.remove() }
        let (agent, url) = try Self.agentWithRTSP(dir)
        defer { agent.kill(SIGKILL) }
        #expect(url.hasPrefix("rtsp://127.0.0.1:") && url.hasSuffix("/yard"), "\(url)")

        for transport in ["tcp", "udp"] {
            let probe = try Self.probe(url, transport: transport)
            #expect(probe.status == 0, "\(transport): \(probe.stderr)")
            #expect(
                probe.stdout.contains("codec_name=h264") && probe.stdout.contains("width=320")
                    && probe.stdout.contains("height=240"), "\(transport): \(probe.stdout) \(probe.stderr)")

            // A client starts at the newest keyframe: its first picture shows at once.
            let first = try runTool(
                "timeout",
                [
                    "-s", "KILL", "60", "ffprobe", "-v", "error", "-rtsp_transport", transport, "-show_entries",
                    "packet=flags", "-of", "csv", "-read_intervals", "%+#3", url,
                ])
            #expect(first.stdout.hasPrefix("packet,K"), "\(transport): \(first.stdout) \(first.stderr)")

            let decoded = try Self.decode(url, transport: transport)
            #expect(decoded.status == 0 && Self.problems(decoded).isEmpty, "\(transport): \(decoded.stderr)")
            // Three seconds at 15 fps, from a keyframe (a decoder that started elsewhere says so).
            #expect(Self.framesDecoded(decoded) >= 40, "\(transport): \(decoded.stderr)")
        }

        // GStreamer's RTSP client, its depayloader, parser and decoder.
        let gst = try runTool(
            "timeout",
            [
                "-s", "KILL", "60", GStreamer.tool, "-v", "rtspsrc", "location=\(url)", "protocols=tcp", "!",
                "rtph264depay", "!", "h264parse", "!", "avdec_h264", "!", "fakesink", "silent=false",
                "num-buffers=30",
            ])
        let frames = gst.stdout.split(separator: "\n").filter { $0.contains("last-message = chain") }.count
        #expect(gst.status == 0 && frames == 30, "GStreamer decoded \(frames) frames: \(gst.stderr) \(gst.stdout)")
        #expect(!gst.stdout.contains("ERROR:") && !gst.stdout.contains("WARNING:"), "\(gst.stdout)")

        Self.stopCleanly(agent)
    }

    @Test func theMicrophoneIsASecondStreamInOpusThatPlaysWithThePicture() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-sound")
        defer { dir.remove() }
        let (agent, url) = try Self.agentWithRTSP(
            dir, extra: "audio = { enabled = true; device = \"synthetic\"; rate = 48000; channels = 1; };")
        defer { agent.kill(SIGKILL) }
        #expect(agent.waitFor("msg=\"vigil running\"", timeout: 60) != nil, "\(agent.output)")

        for transport in ["tcp", "udp"] {
            let probe = try runTool(
                "timeout",
                [
                    "-s", "KILL", "60", "ffprobe", "-v", "error", "-rtsp_transport", transport, "-show_entries",
                    "stream=codec_name,sample_rate,channels", "-of", "csv=p=0", url,
                ])
            let streams = probe.stdout.split(separator: "\n").map(String.init)
            #expect(probe.status == 0 && streams.count == 2, "\(transport): \(probe.stdout) \(probe.stderr)")
            #expect(streams.first?.hasPrefix("h264") == true, "\(transport): \(streams)")
            #expect(streams.last?.hasPrefix("opus,48000") == true, "\(transport): \(streams)")
            // Picture and sound decoded together, three seconds of each, without a word from ffmpeg.
            let decoded = try runTool(
                "timeout",
                [
                    "-s", "KILL", "60", "ffmpeg", "-nostdin", "-v", "error", "-rtsp_transport", transport, "-i", url,
                    "-t", "3", "-map", "0:v", "-f", "null", "-", "-map", "0:a", "-t", "3", "-f", "null", "-",
                ])
            #expect(decoded.status == 0 && decoded.stderr.isEmpty, "\(transport): \(decoded.stderr)")
        }
        Self.stopCleanly(agent)
    }

    @Test func withAPasswordFileOnlyItsUsersPlayWithDigestAndAWrongPasswordIsRefused() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-digest")
        defer { dir.remove() }
        let (agent, url) = try Self.agentWithRTSPAndAPassword(dir)
        defer { agent.kill(SIGKILL) }
        #expect(agent.output.contains("sign_in=\"web.password_file (Digest)\""), "\(agent.output)")
        let signedIn = url.replacingOccurrences(of: "rtsp://", with: "rtsp://admin:pw@")
        let wrong = url.replacingOccurrences(of: "rtsp://", with: "rtsp://admin:wrong@")

        let probe = try Self.probe(signedIn, transport: "tcp")
        #expect(probe.status == 0 && probe.stdout.contains("codec_name=h264"), "\(probe.stdout) \(probe.stderr)")
        for refused in [url, wrong] {
            let answer = try Self.probe(refused, transport: "tcp")
            #expect(answer.status != 0 && answer.stderr.contains("401"), "\(refused): \(answer.stderr)")
        }
        // What the server asks for: Digest only, in the file's realm (never Basic, which would
        // send the password).
        let client = try StalledRTSPClient(url: url, port: try #require(URLComponents(string: url)?.port))
        let challenge = client.request("DESCRIBE", url) ?? ""
        #expect(challenge.hasPrefix("RTSP/1.0 401"), "\(challenge)")
        #expect(challenge.contains("WWW-Authenticate: Digest realm=\"Vigil "), "\(challenge)")
        #expect(!challenge.contains("Basic"), "\(challenge)")

        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
    }

    @Test func clientsBeyondTheLimitAreClosedAsTheyConnectAndTheRecordingGoesOn() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-limit")
        defer { dir.remove() }
        let (agent, url) = try Self.agentWithRTSP(dir)
        defer { agent.kill(SIGKILL) }
        let port = try #require(URLComponents(string: url)?.port)

        // 32 clients (the limit) play (each with a session; they read nothing)…
        var clients = try (0..<32).map { _ in try StalledRTSPClient(url: url, port: port) }
        for client in clients {
            #expect(client.play(), "a client within the limit was not served")
        }
        // …one more is hung up on as it comes (its first request may be answered before): no
        // client without a session is there to make room…
        let oneMore = try StalledRTSPClient(url: url, port: port)
        _ = oneMore.request("OPTIONS", url)
        _ = LoopbackClient.wait(for: [oneMore.client], timeout: 20) { $0.ended }
        #expect(oneMore.client.ended, "the 33rd client's connection is still open")
        #expect(clients.allSatisfy { !$0.client.ended }, "a client that plays was pushed out")
        // …and once one leaves, a newcomer gets in and plays.
        clients.removeLast()
        #expect(
            try TestSupport.waitUntil(timeout: 20, every: 0.1) {
                try StalledRTSPClient(url: url, port: port).request("OPTIONS", url)?.hasPrefix("RTSP/1.0 200") == true
            }, "no newcomer got in once a client left")
        clients = []
        try Self.expectPlays(url)

        let stopped = try Self.stoppedLine(agent)
        #expect(stopped.contains(" dropped_at_writer_total=0 "), "\(stopped)")
    }

    @Test func aClientThatNeverReadsCostsTheRecordingNothing() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-stall")
        defer { dir.remove() }
        let (agent, url) = try Self.agentWithRTSP(dir)
        defer { agent.kill(SIGKILL) }
        let port = try #require(URLComponents(string: url)?.port)

        // A client that asks for the stream over TCP, then reads nothing more: what the server
        // sends piles up in its socket until the kernel's buffers are full.
        let stalled = try StalledRTSPClient(url: url, port: port)
        #expect(stalled.play(), "the server did not answer DESCRIBE, SETUP and PLAY")

        // Meanwhile the agent records clips asked from outside, as `vigil trigger` asks.
        let environment = ["VIGIL_RUNTIME_DIR": agent.runtimeDirectory]
        for count in 1...2 {
            let trigger = try runTool(
                builtExecutable("vigil"), ["trigger", "--config", dir.file("vigil.conf"), "--seconds", "2"],
                environment: environment)
            #expect(trigger.status == 0, "\(trigger.stderr)")
            #expect(
                agent.waitUntil(timeout: 60) {
                    agent.outputLines.filter { $0.contains("msg=\"clip saved\"") }.count >= count
                }, "\(agent.output)")
        }
        // Another client plays meanwhile.
        try Self.expectPlays(url)

        let stopped = try Self.stoppedLine(agent)
        // Nothing lost on the way to the disk; at the capture, at most what a busy machine takes
        // from any run (a pipeline that waited for the client would lose a frame in two).
        #expect(stopped.contains(" dropped_at_writer_total=0 "), "\(stopped)")
        let frames = logValue(stopped, "frames_total").flatMap { Int($0) } ?? 0
        let dropped = logValue(stopped, "dropped_at_capture_total").flatMap { Int($0) } ?? 0
        #expect(frames > 0 && dropped * 50 <= frames, "\(stopped)")
        #expect(!stopped.contains(" clips_total=0 ") && !stopped.contains(" clips_total=1 "), "\(stopped)")
    }
}

/// An RTSP client on a raw socket with a small receive buffer: it asks for the stream over TCP
/// (DESCRIBE, SETUP interleaved, PLAY), then reads nothing, as a stalled or vanished viewer.
final class StalledRTSPClient {
    let client: LoopbackClient
    let url: String
    private var sequence = 0

    init(url: String, port: Int) throws {
        self.url = url
        client = try LoopbackClient(port: port, receiveBuffer: 4096)
    }

    /// Sends a request and waits for its whole answer (headers and body): its text, or nil
    /// if the server closed the connection first, or none came within 20 s.
    func request(_ method: String, _ target: String, _ headers: [String] = []) -> String? {
        sequence += 1
        let start = client.received.count
        client.send(
            "\(method) \(target) RTSP/1.0\r\nCSeq: \(sequence)\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n")
        var answer: String?
        _ = LoopbackClient.wait(for: [client], timeout: 20) { client in
            let text = String(decoding: client.received[start...], as: UTF8.self)
            guard let end = text.range(of: "\r\n\r\n") else { return client.ended }
            let head = text[..<end.lowerBound]
            let length =
                head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            guard text[end.upperBound...].utf8.count >= length else { return false }
            answer = text
            return true
        }
        return answer
    }

    /// DESCRIBE, SETUP (TCP, interleaved) and PLAY, each answered 200; then it reads no more.
    func play() -> Bool {
        guard let described = request("DESCRIBE", url, ["Accept: application/sdp"]),
            described.hasPrefix("RTSP/1.0 200"),
            let control = described.split(separator: "\r\n").first(where: { $0.hasPrefix("a=control:stream") })?
                .dropFirst("a=control:".count),
            let setUp = request("SETUP", url + "/" + control, ["Transport: RTP/AVP/TCP;unicast;interleaved=0-1"]),
            setUp.hasPrefix("RTSP/1.0 200"),
            let session = setUp.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("session:") })?
                .dropFirst("session:".count).split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
        else { return false }
        return request("PLAY", url, ["Session: \(session)", "Range: npt=0-"])?.hasPrefix("RTSP/1.0 200") == true
    }
}
