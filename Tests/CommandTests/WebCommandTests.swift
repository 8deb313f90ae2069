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
        _ dir: TemporaryDirectory, seconds: Double, extra: String = "", launcher: [String] = []
    ) throws -> (agent: AgentProcess, base: String) {
        let footage = try AgentTests.footage(
            AgentTests.scene(seconds: seconds, objects: [AgentTests.object(2, 4)]), in: dir)
        let config = try AgentTests.config(
            dir, footage: footage,
            extra: "web = { enabled = true; port = 0; };\nsnapshot = { live_interval = 1.0; };\n" + extra,
            realtime: true)
        let agent = try AgentProcess(config: config, launcher: launcher)
        do { return (agent, try webAddress(of: agent)) } catch {
            agent.kill(SIGKILL)
            throw error
        }
    }

    /// The configuration of an agent on `seconds` of footage whose web server speaks HTTPS with
    /// `certificates` and asks for a password — `pw` for admin, set by `vigil passwd`.
    static func httpsConfig(
        _ dir: TemporaryDirectory, certificates: TestCertificates, seconds: Double, realtime: Bool = false
    ) throws -> String {
        let footage = try AgentTests.footage(
            AgentTests.scene(seconds: seconds, objects: [AgentTests.object(2, 4)]), in: dir)
        let config = try AgentTests.config(
            dir, footage: footage,
            extra: """
                web = { enabled = true; port = 0; password_file = "web-passwords";
                  tls_cert_file = "\(certificates.certificate)"; tls_key_file = "\(certificates.key)"; };
                """, realtime: realtime)
        let set = try runTool(builtExecutable("vigil"), ["passwd", "--config", config], input: Data("pw\n".utf8))
        #expect(set.status == 0, "\(set.stderr)")
        return config
    }

    /// The base URL of `agent`'s web server, from its "web server listening" line.
    static func webAddress(of agent: AgentProcess) throws -> String {
        let listening = try #require(agent.webServerListening(), "\(agent.output)")
        let address = try #require(
            listening.split(separator: " ").first { $0.hasPrefix("address=") }?.dropFirst("address=".count))
        return "http://\(address)"
    }

    /// What `/api/clips` at `base` lists now (newest first); nil when it answers no list.
    static func listedClips(_ base: String, _ arguments: [String] = []) throws -> [[String: Any]]? {
        let body = try get(base + "/api/clips", arguments).body
        return (try? JSONSerialization.jsonObject(with: body)) as? [[String: Any]]
    }

    /// Waits until `/api/clips` at `base` lists `count` clips, saved (their journal lines in);
    /// false if it did not within `timeout` seconds, or `agent` ended first.
    static func waitForClips(
        _ count: Int = 1, at base: String, _ arguments: [String] = [], of agent: AgentProcess, timeout: Double = 60
    ) throws -> Bool {
        try agent.waitUntil(timeout: timeout) { try (listedClips(base, arguments)?.count ?? 0) >= count }
    }

    @Test func servesTheClipsTheirPicturesTheJournalAndTheFigures() throws {
        let dir = try TemporaryDirectory("vigil-web")
        defer { dir.remove() }
        let (agent, base) = try Self.agentWithWeb(dir, seconds: 30)
        #expect(try Self.waitForClips(at: base, of: agent), "\(agent.output)")

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
        #expect(html.contains("<h1><a href=\"/\">yard</a></h1>"))
        #expect(html.contains("href=\"/clips/\(file)\" download"), "\(html)")
        #expect(html.contains("src=\"/thumbs/\(snapshot)?v="))
        #expect(page.headers["content-security-policy"]?.contains("default-src 'none'") == true)
        // Its picture, small and cached for good: asked again, 304 and no bytes.
        let thumbnail =
            "/thumbs/"
            + (html.components(separatedBy: "src=\"/thumbs/").dropFirst().first?
                .split(separator: "\"").first.map(String.init) ?? "")
        let small = try Self.get(base + thumbnail)
        #expect(small.status == 200 && small.body.prefix(2) == Data([0xFF, 0xD8]), "\(thumbnail)")
        #expect(small.headers["cache-control"] == "public, max-age=31536000, immutable")
        let tag = try #require(small.headers["etag"])
        let again = try Self.get(base + thumbnail, ["-H", "If-None-Match: \(tag)"])
        #expect(again.status == 304 && again.body.isEmpty)

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

    /// An agent that may open too few files for the web server's connections (a tight
    /// LimitNOFILE): the server takes fewer, says so once with what to do, and serves.
    @Test func tooFewFilesLowerTheConnectionsOnceSaid() throws {
        let dir = try TemporaryDirectory("vigil-web-nofile")
        defer { dir.remove() }
        let (agent, base) = try Self.agentWithWeb(dir, seconds: 30, launcher: ["/usr/bin/prlimit", "--nofile=200"])
        let said = agent.outputLines.filter { $0.contains("msg=\"web server takes fewer connections") }
        #expect(said.count == 1, "\(agent.output)")
        let line = try #require(said.first)
        #expect(line.contains("level=warning") && line.contains("LimitNOFILE"), "\(line)")
        #expect(logValue(line, "open_files") == "200" && logValue(line, "needs") == "352", "\(line)")
        #expect(logValue(line, "connections") == "\((200 - 64) / 2 - 16)", "\(line)")
        #expect(try Self.get(base + "/api/clips").status == 200)
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)
        #expect(agent.outputLines.filter { $0.contains("web server takes fewer connections") }.count == 1)
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

    /// `vigil passwd`, then the agent on every address: nothing without signing in, everything
    /// with; the live stream too.
    @Test func aPasswordMadeByVigilPasswdOpensTheServerToOtherMachines() throws {
        let dir = try TemporaryDirectory("vigil-web-passwd")
        defer { dir.remove() }
        let footage = try AgentTests.footage(
            AgentTests.scene(seconds: 40, objects: [AgentTests.object(2, 4)]), in: dir)
        let config = try AgentTests.config(
            dir, footage: footage,
            extra: "web = { enabled = true; listen = \"0.0.0.0\"; port = 0; password_file = \"web-passwords\"; };",
            realtime: true)

        // Without the file the server stays off, said; recording is not affected (`vigil check`
        // accepts the configuration, and warns: the file is the server's business).
        let check = try vigil("check", "--config", config)
        #expect(check.status == 0)
        #expect(
            check.stderr.contains("warning: web.password_file:")
                && check.stderr.contains("the web server stays off until then"), "\(check.stderr)")

        // The password from standard input; a second user keeps the first.
        let set = try runTool(
            builtExecutable("vigil"), ["passwd", "--config", config], input: Data("correct horse\n".utf8))
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout.contains("admin's password is set in \(dir.file("web-passwords"))"), "\(set.stdout)")
        let bob = try runTool(
            builtExecutable("vigil"), ["passwd", "--config", config, "--user", "bob"], input: Data("b\n".utf8))
        #expect(bob.status == 0)
        var status = stat()
        #expect(stat(dir.file("web-passwords"), &status) == 0)
        #expect(status.st_mode & 0o777 == 0o600, "mode \(String(status.st_mode & 0o777, radix: 8))")
        let text = try String(contentsOfFile: dir.file("web-passwords"), encoding: .utf8)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 2 && lines[0].hasPrefix("admin:Vigil ") && lines[1].hasPrefix("bob:Vigil "), "\(text)")
        #expect(!text.contains("correct horse"))

        // What cannot be used is said, and changes nothing.
        let empty = try runTool(builtExecutable("vigil"), ["passwd", "--config", config], input: Data("\n".utf8))
        #expect(empty.status == 65 && empty.stderr.contains("no password given"), "\(empty.stderr)")
        let badName = try runTool(
            builtExecutable("vigil"), ["passwd", "--config", config, "--user", "a:b"], input: Data("x\n".utf8))
        #expect(badName.status == 65)
        let noFile = try AgentTests.config(dir, footage: footage, extra: "")
        let unset = try runTool(builtExecutable("vigil"), ["passwd", "--config", noFile], input: Data("x\n".utf8))
        #expect(unset.status == 78 && unset.stderr.contains("web.password_file is not set"), "\(unset.stderr)")
        #expect(try String(contentsOfFile: dir.file("web-passwords"), encoding: .utf8) == text)

        let agent = try AgentProcess(
            config: try AgentTests.config(
                dir, footage: footage,
                extra: "web = { enabled = true; listen = \"0.0.0.0\"; port = 0; password_file = \"web-passwords\"; };",
                realtime: true))
        let listening = try #require(agent.webServerListening(), "\(agent.output)")
        #expect(listening.contains("address=0.0.0.0:") && listening.contains("sign_in=\"2 user(s)\""), "\(listening)")
        // Outside #require: Swift 6.0's expansion of a property access on an optional chain
        // does not compile.
        let address = listening.split(separator: " ").first { $0.hasPrefix("address=") }
        let portText = address?.split(separator: ":").last
        let port = try #require(portText)
        let base = "http://127.0.0.1:\(port)"
        for path in ["/", "/api/clips", "/metrics", "/live.m3u8", "/live.mp4"] {
            #expect(try Self.get(base + path).status == 401, "\(path)")
        }
        // Four wrong passwords: a fifth would make this address wait (WebSecurityCommandTests).
        for path in ["/", "/api/clips", "/metrics", "/live.mp4"] {
            #expect(try Self.get(base + path, ["--digest", "-u", "admin:wrong"]).status == 401, "\(path)")
        }
        let page = try Self.get(base + "/", ["--digest", "-u", "admin:correct horse"])
        #expect(
            page.status == 200 && String(decoding: page.body, as: UTF8.self).contains("<h1><a href=\"/\">yard</a></h1>")
        )
        _ = try LiveCommandTests.waitForLive(base, ["--digest", "-u", "bob:b"])
        let live = try Self.get(base + "/live.mp4?gops=2", ["--digest", "-u", "bob:b"])
        #expect(live.status == 200 && live.body.count > 1000)

        // Signed in, a saved clip can be deleted: the agent deletes it and its picture, says who
        // asked, and the journal drops its line.
        let admin = ["--digest", "-u", "admin:correct horse"]
        #expect(try Self.waitForClips(at: base, admin, of: agent), "\(agent.output)")
        let listed = try JSONSerialization.jsonObject(with: try Self.get(base + "/api/clips", admin).body)
        let clips = try #require(listed as? [[String: Any]])
        let clip = try #require(clips.first)
        let file = try #require(clip["file"] as? String)
        let picture = try #require(clip["snapshot"] as? String)
        #expect(FileManager.default.fileExists(atPath: dir.file("clips/" + picture)))
        let deleting = try Self.get(
            base + "/api/clips/delete",
            admin + ["-X", "POST", "-H", "Content-Type: application/json", "-d", "{\"file\": \"\(file)\"}"])
        #expect(deleting.status == 202, "\(String(decoding: deleting.body, as: UTF8.self))")
        // Its journal line is dropped once it is deleted and said so.
        #expect(
            try agent.waitUntil(timeout: 30) {
                try Self.listedClips(base, admin).map { !$0.contains { $0["file"] as? String == file } } == true
            },
            "\(agent.output)")
        let deleted = try #require(logLines(agent.output, "clip deleted").first, "\(agent.output)")
        #expect(
            deleted.contains("file=\(file)") && deleted.contains("reason=\"deleted by web user admin\""), "\(deleted)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("clips/" + file)))
        #expect(!FileManager.default.fileExists(atPath: dir.file("clips/" + picture)))
        let after = String(decoding: try Self.get(base + "/api/clips", admin).body, as: UTF8.self)
        #expect(!after.contains(file), "\(after)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)
    }

    @Test func aPasswordFileThatCannotBeUsedKeepsTheServerOffAndRecordingOn() throws {
        let dir = try TemporaryDirectory("vigil-web-badpasswd")
        defer { dir.remove() }
        try "admin:secret\n".write(toFile: dir.file("web-passwords"), atomically: true, encoding: .utf8)
        let footage = try AgentTests.footage(
            AgentTests.scene(seconds: 8, objects: [AgentTests.object(2, 4)]), in: dir)
        let config = try AgentTests.config(
            dir, footage: footage,
            extra: "web = { enabled = true; listen = \"::\"; port = 0; password_file = \"web-passwords\"; };")
        let agent = try AgentProcess(config: config)
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let said = try #require(agent.outputLines.first { $0.contains("msg=\"web server off") }, "\(agent.output)")
        #expect(said.contains("level=error") && said.contains("line 1 is not USER:REALM:HASH"), "\(said)")
        #expect(!agent.output.contains("web server listening"))
        #expect(agent.output.contains("msg=\"clip saved\""))
    }

    /// With a certificate and key the agent's server speaks HTTPS: the clip comes whole, the
    /// live stream plays in ffmpeg checking the certificate, signed in by Digest; a certificate
    /// GnuTLS refuses (another's key) keeps the server off, said, and recording on.
    @Test func aCertificateMakesTheServerHTTPSAndABadOneKeepsItOffNotTheRecording() throws {
        let dir = try TemporaryDirectory("vigil-web-tls")
        defer { dir.remove() }
        let certificates = try TestCertificates(in: dir)
        let other = try TestCertificates(in: dir, name: "other")
        let config = try Self.httpsConfig(dir, certificates: certificates, seconds: 40, realtime: true)
        let agent = try AgentProcess(config: config)
        let listening = try #require(agent.webServerListening())
        let url = try #require(logValue(listening, "url"), "\(listening)")
        #expect(url.hasPrefix("https://127.0.0.1:"), "\(listening)")
        let base = String(url.dropLast())
        let trust = ["--cacert", certificates.caCertificate, "--digest", "-u", "admin:pw"]
        #expect(try Self.waitForClips(at: base, trust, of: agent), "\(agent.output)")
        let api = try Self.get(base + "/api/clips", trust)
        let list = try #require(try JSONSerialization.jsonObject(with: api.body) as? [[String: Any]])
        let file = try #require(list.first?["file"] as? String)
        let clip = try Self.get(base + "/clips/" + file, trust)
        let onDisk = try Data(contentsOf: URL(fileURLWithPath: dir.file("clips/" + file)))
        #expect(clip.status == 200 && clip.body == onDisk)
        // Plain HTTP gets nothing.
        let plain = try runTool(
            "curl", ["-sS", "--max-time", "10", "http://" + base.dropFirst("https://".count) + "/"])
        #expect(plain.status != 0 && !plain.stdout.contains("<h1>"), "\(plain)")
        // The live stream over TLS: fetched, then read by every reader; and by ffmpeg itself,
        // checking the certificate against the CA.
        _ = try LiveCommandTests.waitForLive(base, trust)
        let live = try Self.get(base + "/live.mp4?gops=3", trust)
        #expect(live.status == 200)
        try live.body.write(to: URL(fileURLWithPath: dir.file("live.mp4")))
        try expectPlayable(dir.file("live.mp4"))
        let direct = try runTool(
            "timeout",
            [
                "-s", "KILL", "60", "ffmpeg", "-nostdin", "-v", "error", "-tls_verify", "1", "-ca_file",
                certificates.caCertificate, "-i",
                "https://admin:pw@" + base.dropFirst("https://".count)
                    + "/live.mp4?gops=2", "-f", "null", "-",
            ])
        #expect(direct.status == 0 && direct.stderr.isEmpty, "\(direct)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)

        let short = try AgentTests.footage(
            AgentTests.scene(seconds: 8, objects: [AgentTests.object(2, 4)]), in: dir, name: "short.y4m")
        let bad = try AgentProcess(
            config: try AgentTests.config(
                dir, footage: short,
                extra:
                    "web = { enabled = true; port = 0; tls_cert_file = \"\(certificates.certificate)\"; tls_key_file = \"\(other.key)\"; };"
            ))
        #expect(bad.waitForExit(timeout: 120) == 0, "\(bad.output)")
        let said = try #require(bad.outputLines.first { $0.contains("msg=\"web server off") }, "\(bad.output)")
        #expect(said.contains("level=error") && said.contains("GnuTLS refused its certificate and key"), "\(said)")
        #expect(!bad.output.contains("web server listening"))
        #expect(bad.output.contains("msg=\"clip saved\""))
    }
}
