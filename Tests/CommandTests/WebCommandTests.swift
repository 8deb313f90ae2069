import Foundation
import Recorder
import TestSupport
import Testing

/// `vigil run` with its web server on, read as a browser and a script would: curl, ffprobe and
/// ffmpeg over HTTP, against the real agent on a loopback port.
@Suite struct WebCommandTests {
    /// `curl` on `url`: the status, the headers (names in lower case) and the body.
    static func get(
        _ url: String, _ arguments: [String] = []
    ) throws -> (status: Int, headers: [String: String], body: Data) {
        let dir = try TemporaryDirectory("vigil-web-get")
        defer { dir.remove() }
        let r = try runTool(
            "curl",
            [
                "-sS", "--path-as-is", "--max-time", "30", "-D", dir.file("headers"), "-o", dir.file("body"), "-w",
                "%{http_code}",
            ]
                + arguments + [url])
        #expect(r.status == 0, "curl \(url): \(r.stderr)")
        var headers: [String: String] = [:]
        for line in ((try? String(contentsOfFile: dir.file("headers"), encoding: .utf8)) ?? "").split(separator: "\r\n")
        {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        return (Int(r.stdout) ?? 0, headers, (try? Data(contentsOf: URL(fileURLWithPath: dir.file("body")))) ?? Data())
    }

    /// The agent on footage read in real time (so that it is still running when asked), its
    /// web server on a port the kernel chose; the server's base URL.
    static func agentWithWeb(
        _ dir: TemporaryDirectory, seconds: Double, extra: String = ""
    ) throws -> (agent: AgentProcess, base: String) {
        let footage = try AgentTests.footage(
            AgentTests.scene(seconds: seconds, objects: [AgentTests.object(2, 4)]), in: dir)
        let config = try AgentTests.config(
            dir, footage: footage,
            extra: "web = { enabled = true; port = 0; };\nsnapshot = { live_interval = 1.0; };\n" + extra,
            realtime: true)
        let agent = try AgentProcess(config: config)
        let line = agent.waitFor("msg=\"web server listening\"", timeout: 60)
        if line == nil { agent.kill(SIGKILL) }
        let listening = try #require(line, "\(agent.output)")
        let address = try #require(
            listening.split(separator: " ").first { $0.hasPrefix("address=") }?.dropFirst("address=".count))
        return (agent, "http://\(address)")
    }

    @Test func servesTheClipsTheirPicturesTheJournalAndTheFigures() throws {
        let dir = try TemporaryDirectory("vigil-web")
        defer { dir.remove() }
        let (agent, base) = try Self.agentWithWeb(dir, seconds: 30)
        defer { agent.kill(SIGKILL) }
        #expect(agent.waitFor("msg=\"clip saved\"", timeout: 60) != nil, "\(agent.output)")

        // The journal, newest first, with the clip and its picture.
        let api = try Self.get(base + "/api/clips")
        #expect(api.status == 200)
        #expect(api.headers["content-type"] == "application/json")
        let list = try #require(try JSONSerialization.jsonObject(with: api.body) as? [[String: Any]])
        #expect(list.count == 1, "\(String(decoding: api.body, as: UTF8.self))")
        let file = try #require(list.first?["file"] as? String)
        let snapshot = try #require(list.first?["snapshot"] as? String)
        #expect(list.first?["trigger"] as? String == "motion")

        // The clip, whole and byte for byte, and in a range; players read it over HTTP.
        let onDisk = try Data(contentsOf: URL(fileURLWithPath: dir.file("clips/" + file)))
        let clip = try Self.get(base + "/clips/" + file)
        #expect(clip.status == 200)
        #expect(clip.body == onDisk)
        #expect(clip.headers["accept-ranges"] == "bytes")
        let part = try Self.get(base + "/clips/" + file, ["-H", "Range: bytes=100-199"])
        #expect(part.status == 206)
        #expect(part.body == onDisk.subdata(in: 100..<200))
        let probe = try FFprobe.probe(base + "/clips/" + file)
        #expect(probe.video?["codec_name"] == "h264")
        let decode = try runTool(
            "ffmpeg", ["-v", "error", "-nostdin", "-i", base + "/clips/" + file, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
        try expectPlayable(dir.file("clips/" + file))

        // Its picture, and the live one.
        let picture = try Self.get(base + "/clips/" + snapshot)
        #expect(picture.status == 200)
        #expect(picture.headers["content-type"] == "image/jpeg")
        #expect(picture.body.prefix(2) == Data([0xFF, 0xD8]))
        let latest = try Self.get(base + "/latest.jpg")
        #expect(latest.status == 200)
        #expect(latest.body.prefix(2) == Data([0xFF, 0xD8]))

        // The page names the camera and links the clip and its picture.
        let page = try Self.get(base + "/")
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(page.status == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(html.contains("<h1>yard</h1>"))
        #expect(html.contains("href=\"/clips/\(file)\""), "\(html)")
        #expect(html.contains("src=\"/clips/\(snapshot)\""))
        #expect(page.headers["content-security-policy"]?.contains("default-src 'none'") == true)

        // The figures, live.
        let metrics = String(decoding: try Self.get(base + "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("vigil_clips_total{camera=\"yard\"} 1"), "\(metrics)")
        let frames = metrics.split(separator: "\n").first { $0.hasPrefix("vigil_frames_total{camera=\"yard\"} ") }
        #expect((frames?.split(separator: " ").last).flatMap { Int($0) } ?? 0 > 30, "\(metrics)")
        #expect(metrics.contains("# TYPE vigil_disk_free_bytes gauge"))

        // Nothing outside the clips and their pictures, whatever the path says.
        try "secret".write(toFile: dir.file("secret.mov"), atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(
            atPath: dir.file("clips/link.mov"), withDestinationPath: dir.file("secret.mov"))
        for path in [
            "/clips/../secret.mov", "/clips/%2e%2e/secret.mov", "/clips/..%2fsecret.mov", "/clips/link.mov",
            "/clips/events.jsonl", "/clips/.lock", "/clips//etc/passwd", "/clips/" + dir.file("secret.mov"),
            "/clips/2026/../../secret.mov", "/../vigil.conf", "/vigil.conf",
        ] {
            let refused = try Self.get(base + path)
            #expect(refused.status == 404, "\(path): \(refused.status)")
            #expect(!String(decoding: refused.body, as: UTF8.self).contains("secret"), "\(path)")
        }
        #expect(try Self.get(base + "/", ["-X", "POST"]).status == 405)

        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)
        #expect(!agent.output.contains("level=error"), "\(agent.output)")
    }

    @Test func aPortAlreadyTakenIsSaidAndRecordingGoesOn() throws {
        let dir = try TemporaryDirectory("vigil-web-taken")
        defer { dir.remove() }
        // A port held by another listener.
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(holder, $0, length) == 0 && listen(holder, 1) == 0 && getsockname(holder, $0, &length) == 0
            }
        }
        try #require(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        let footage = try AgentTests.footage(
            AgentTests.scene(seconds: 8, objects: [AgentTests.object(2, 4)]), in: dir)
        let config = try AgentTests.config(dir, footage: footage, extra: "web = { enabled = true; port = \(port); };")
        let agent = try AgentProcess(config: config)
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let said = try #require(agent.outputLines.first { $0.contains("msg=\"web server off") }, "\(agent.output)")
        #expect(said.contains("level=error"))
        #expect(said.contains("127.0.0.1:\(port)") && said.contains("Address already in use"), "\(said)")
        #expect(agent.output.contains("msg=\"clip saved\""))
    }
}
