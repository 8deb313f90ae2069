import Foundation
import TestSupport
import Testing

/// ONVIF from the real agent (`onvif.enabled`, the synthetic camera), read by the real clients
/// Home Assistant is built on (Tests/Fixtures/ONVIFClient/onvif_client.py, in
/// scripts/test-servers.sh's clients environment): onvif-zeep-async does what HA's integration
/// does at setup, ffprobe plays the stream it was given, and wsdiscovery's probe is answered.
@Suite(.enabled(if: ONVIFClient.required, "scripts/test-servers.sh's clients are not installed (make test does it)"))
struct ONVIFCommandTests {
    /// An agent with the web server, the RTSP server and ONVIF on free loopback ports, and
    /// the web server's and RTSP server's ports (its log says them).
    static func agent(
        _ dir: TemporaryDirectory, web: String = "", extra: String = "", password: String? = nil,
        passwd: [String] = [], launcher: [String] = []
    ) throws -> (agent: AgentProcess, web: Int, rtsp: Int) {
        let config = try AgentTests.syntheticConfig(
            dir,
            extra: """
                snapshot = { live_interval = 1.0; };
                web = { enabled = true; port = 0; \(web) \(password == nil ? "" : "password_file = \"web-passwords\";") };
                rtsp = { enabled = true; port = 0; };
                \(extra)
                """)
        if let password {
            let set = try runTool(
                builtExecutable("vigil"), ["passwd", "--config", config] + passwd, input: Data("\(password)\n".utf8))
            #expect(set.status == 0, "\(set.stderr)")
        }
        let agent = try AgentProcess(config: config, launcher: launcher)
        func port(_ message: String) -> Int? {
            agent.waitFor("msg=\"\(message)\"", timeout: 60).flatMap { logValue($0, "address") }
                .flatMap { $0.split(separator: ":").last }.flatMap { Int($0) }
        }
        guard let web = port("web server listening"), let rtsp = port("rtsp server listening") else {
            agent.kill(SIGKILL)
            throw ONVIFClient.Failure(description: "the servers did not say their ports: \(agent.output)")
        }
        // The picture GetSnapshotUri points at: latest.jpg, once the first is written.
        _ = waitUntil(timeout: 60) { FileManager.default.fileExists(atPath: dir.file("clips/latest.jpg")) }
        return (agent, web, rtsp)
    }

    @Test func homeAssistantsClientAddsTheCameraAndPlaysItsStreamWithoutAPasswordOnLoopback() throws {
        let dir = try TemporaryDirectory("vigil-onvif")
        defer { dir.remove() }
        let (agent, web, rtsp) = try Self.agent(dir, extra: "onvif = { enabled = true; discovery = false; };")
        defer { agent.kill(SIGKILL) }
        let seen = try #require(try ONVIFClient.run(["camera", "127.0.0.1", "\(web)", "", ""]).first)
        #expect(seen["error"] == nil && seen["fault"] == nil, "\(seen)")
        let info = seen["info"] as? [String: String]
        #expect(info?["Manufacturer"] == "Vigil", "\(seen)")
        let version = agent.waitFor("msg=\"vigil starting\"", timeout: 10).flatMap { logValue($0, "version") }
        #expect(info?["FirmwareVersion"] == version && info?["SerialNumber"]?.hasPrefix("VGL-") == true, "\(seen)")
        #expect(seen["interfaces"] as? String == "not implemented")
        #expect(seen["capabilities"] as? [String] == ["Device", "Events", "Media"], "no imaging or PTZ: \(seen)")
        #expect(seen["snapshot_capable"] as? Bool == true)
        let profiles = seen["profiles"] as? [[String: Any]]
        #expect(profiles?.count == 1 && profiles?.first?["encoding"] as? String == "H264", "\(seen)")
        #expect(profiles?.first?["width"] as? Int == 320 && profiles?.first?["height"] as? Int == 240)
        let stream = try #require(seen["stream"] as? String)
        #expect(stream == "rtsp://127.0.0.1:\(rtsp)/yard")
        #expect(seen["snapshot"] as? String == "http://127.0.0.1:\(web)/latest.jpg")
        #expect(seen["picture"] as? String == "ffd8ff", "a JPEG: \(seen)")

        let probe = try RTSPCommandTests.probe(stream, transport: "tcp")
        #expect(probe.status == 0 && probe.stdout.contains("codec_name=h264"), "\(probe.stdout) \(probe.stderr)")
        #expect(probe.stdout.contains("width=320") && probe.stdout.contains("height=240"), "\(probe.stdout)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(!agent.output.contains("level=error"), "\(agent.output)")
    }

    /// Motion as ONVIF events, as Home Assistant subscribes to them: a pull point, the state
    /// at once (a synchronization point too), then the recording asked through the web's
    /// /api/trigger starts and ends an event: IsMotion true, then false.
    @Test func motionComesAsEventsThroughAPullPoint() throws {
        let dir = try TemporaryDirectory("vigil-onvif-events")
        defer { dir.remove() }
        let (agent, web, _) = try Self.agent(dir, extra: "onvif = { enabled = true; discovery = false; };")
        defer { agent.kill(SIGKILL) }
        let seen = try #require(
            try ONVIFClient.run(["events", "127.0.0.1", "\(web)", "", "", "http://127.0.0.1:\(web)/api/trigger"]).first)
        #expect(seen["error"] == nil && seen["pullpoint"] as? Bool == true, "\(seen)")
        let messages = seen["messages"] as? [[String]] ?? []
        #expect(messages.allSatisfy { $0.prefix(2) == ["tns1:RuleEngine/CellMotionDetector/Motion", "IsMotion"] })
        #expect(
            Array(messages.prefix(2)) == [
                ["tns1:RuleEngine/CellMotionDetector/Motion", "IsMotion", "false", "Initialized"],
                ["tns1:RuleEngine/CellMotionDetector/Motion", "IsMotion", "false", "Initialized"],
            ], "the state at the subscription and at the synchronization point: \(messages)")
        let changes = messages.filter { $0.last == "Changed" }.map { $0[2] }
        #expect(changes.first == "true" && changes.last == "false", "\(messages)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
    }

    /// With a password file: a user's PasswordText signs in (and plays, and gets the picture
    /// with Digest); Home Assistant's PasswordDigest cannot be checked against the file's
    /// hashes and is refused saying so; a wrong password and none are refused as
    /// ter:NotAuthorized, the clock and the services answered all the same; another name 421.
    @Test func withAPasswordFileOnlyItsUsersSignIn() throws {
        let dir = try TemporaryDirectory("vigil-onvif-password")
        defer { dir.remove() }
        let (agent, web, rtsp) = try Self.agent(
            dir, extra: "onvif = { enabled = true; discovery = false; };", password: "pw")
        defer { agent.kill(SIGKILL) }
        let signedIn = try #require(
            try ONVIFClient.run(["camera", "127.0.0.1", "\(web)", "admin", "pw", "text"]).first)
        #expect(signedIn["error"] == nil && signedIn["fault"] == nil, "\(signedIn)")
        #expect(signedIn["stream"] as? String == "rtsp://127.0.0.1:\(rtsp)/yard")
        #expect(signedIn["picture"] as? String == "ffd8ff", "the picture, with HTTP Digest: \(signedIn)")
        let probe = try RTSPCommandTests.probe("rtsp://admin:pw@127.0.0.1:\(rtsp)/yard", transport: "tcp")
        #expect(probe.status == 0 && probe.stdout.contains("codec_name=h264"), "\(probe.stderr)")

        for (user, password, mode, said) in [
            ("admin", "pw", "digest", "cannot check a WS-Security PasswordDigest"),
            ("admin", "wrong", "text", "The user name or password is wrong"),
            ("", "", "digest", "Sign in"),
        ] {
            let refused = try #require(
                try ONVIFClient.run(["camera", "127.0.0.1", "\(web)", user, password, mode]).first)
            #expect((refused["fault"] as? String)?.contains(said) == true, "\(mode) \(user): \(refused)")
            #expect(
                (refused["subcodes"] as? [String])?.contains { $0.hasSuffix("NotAuthorized") } == true, "\(refused)")
            #expect(refused["utc"] != nil && refused["xaddrs"] != nil, "the clock and the services: \(refused)")
            #expect(refused["info"] == nil)
        }
        let misdirected = try runTool(
            "curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Host: camera.attacker.example",
                "--data-binary", "<x/>", "http://127.0.0.1:\(web)/onvif/device_service",
            ])
        #expect(misdirected.stdout == "421")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
    }
}

/// The Python of scripts/test-servers.sh's clients environment, running onvif_client.py.
enum ONVIFClient {
    struct Failure: Error, CustomStringConvertible { var description: String }

    static var python: String {
        let variables = ProcessInfo.processInfo.environment
        if let directory = variables["VIGIL_TEST_SERVERS"] { return directory + "/clients/bin/python" }
        let cache = variables["XDG_CACHE_HOME"] ?? ((variables["HOME"] ?? NSTemporaryDirectory()) + "/.cache")
        return cache + "/vigil-test-servers/clients/bin/python"
    }

    /// Installed, or CI (which must fail rather than skip).
    static var required: Bool {
        FileManager.default.isExecutableFile(atPath: python) || ProcessInfo.processInfo.environment["CI"] != nil
    }

    static let script = CheckCommandTests.root + "/Tests/Fixtures/ONVIFClient/onvif_client.py"

    /// The JSON objects `onvif_client.py ARGUMENTS` printed, one a line.
    static func run(_ arguments: [String]) throws -> [[String: Any]] {
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw Failure(description: "\(python) is missing — run scripts/test-servers.sh (make test does)")
        }
        let r = try runTool("timeout", ["-s", "KILL", "120", python, script] + arguments)
        guard r.status == 0 else { throw Failure(description: "onvif_client.py \(arguments): \(r.stderr)") }
        return parse(r.stdout)
    }

    static func parse(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }
}
