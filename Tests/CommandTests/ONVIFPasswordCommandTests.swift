import Foundation
import TestSupport
import Testing

/// Home Assistant's ONVIF client with a password: `vigil passwd --onvif` sets the user in the
/// web's password file (its Digest hash: the picture, the RTSP stream) and in
/// `onvif.password_file` (the password: WS-Security's PasswordDigest), and onvif-zeep-async,
/// signing as Home Assistant does, adds the camera and ffprobe plays the stream it was given.
@Suite(.enabled(if: ONVIFClient.required, "scripts/test-servers.sh's clients are not installed (make test does it)"))
struct ONVIFPasswordCommandTests {
    static let onvif = "onvif = { enabled = true; discovery = false; password_file = \"onvif-passwords\"; };"

    /// The mode, owner and group of `path`.
    static func status(_ path: String) throws -> (mode: Int, owner: Int, group: Int) {
        let a = try FileManager.default.attributesOfItem(atPath: path)
        return (
            (a[.posixPermissions] as? Int) ?? -1, (a[.ownerAccountID] as? Int) ?? -1,
            (a[.groupOwnerAccountID] as? Int) ?? -1
        )
    }

    @Test func passwdWithONVIFWritesBothFilesWithoutItOnlyTheWebs() throws {
        let dir = try TemporaryDirectory("vigil-passwd-onvif")
        defer { dir.remove() }
        let config = try AgentTests.syntheticConfig(
            dir,
            extra: """
                web = { enabled = true; port = 0; password_file = "web-passwords"; };
                rtsp = { enabled = true; port = 0; };
                \(Self.onvif)
                """)
        let vigil = builtExecutable("vigil")
        let set = try runTool(vigil, ["passwd", "--onvif", "viewer", "--config", config], input: Data("a:b c\n".utf8))
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout.contains("and in \(dir.file("onvif-passwords")) (ONVIF)"), "\(set.stdout)")
        #expect(try String(contentsOfFile: dir.file("onvif-passwords"), encoding: .utf8) == "viewer:a:b c\n")
        let web = try String(contentsOfFile: dir.file("web-passwords"), encoding: .utf8)
        #expect(web.hasPrefix("viewer:Vigil "), "\(web)")
        let file = try Self.status(dir.file("onvif-passwords"))
        let vigilGroup = getpwnam("vigil").map { Int($0.pointee.pw_gid) }
        if getuid() == 0, let vigilGroup {
            #expect(file.mode == 0o640 && file.owner == 0 && file.group == vigilGroup, "root:vigil 0640: \(file)")
        } else {
            #expect(file.mode == 0o600 && file.owner == Int(getuid()), "\(file)")
        }

        // Another user is added beside it; without --onvif only the web's file changes.
        #expect(
            try runTool(vigil, ["passwd", "--onvif", "--user", "admin", "--config", config], input: Data("pw\n".utf8))
                .status == 0)
        #expect(
            try runTool(vigil, ["passwd", "--user", "third", "--config", config], input: Data("x\n".utf8)).status == 0)
        #expect(
            try String(contentsOfFile: dir.file("onvif-passwords"), encoding: .utf8) == "admin:pw\nviewer:a:b c\n")
        #expect(try String(contentsOfFile: dir.file("web-passwords"), encoding: .utf8).contains("third:"))
        let twice = try runTool(
            vigil, ["passwd", "--onvif", "a", "--user", "b", "--config", config], input: Data("x\n".utf8))
        #expect(twice.status == 64, "\(twice.stderr)")

        let checked = try runTool(vigil, ["check", "--config", config])
        #expect(checked.status == 0 && !checked.stderr.contains("onvif"), "\(checked.stderr)")

        // Others may read it: vigil check and run exit 78, naming the fix.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: dir.file("onvif-passwords"))
        let open = try runTool(vigil, ["check", "--config", config])
        #expect(open.status == 78, "\(open.stderr)")
        #expect(
            open.stderr.contains("onvif.password_file: \(dir.file("onvif-passwords")) is mode 0644")
                && open.stderr.contains("chmod 640"), "\(open.stderr)")
        let run = try runTool("timeout", ["-s", "KILL", "60", vigil, "run", "--config", config])
        #expect(run.status == 78, "\(run.stderr)")
        // passwd makes it anew, kept right.
        #expect(try runTool(vigil, ["passwd", "--onvif", "--config", config], input: Data("pw\n".utf8)).status == 0)
        #expect(try Self.status(dir.file("onvif-passwords")).mode & 0o077 & ~0o040 == 0)
        #expect(try runTool(vigil, ["check", "--config", config]).status == 0)

        // A user of the ONVIF file the web's lacks: a warning naming the user and the fix.
        try "admin:pw\nghost:pw\n".write(toFile: dir.file("onvif-passwords"), atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: dir.file("onvif-passwords"))
        let ghost = try runTool(vigil, ["check", "--config", config])
        #expect(ghost.status == 0, "\(ghost.stderr)")
        #expect(
            ghost.stderr.contains("ghost is not in web.password_file")
                && ghost.stderr.contains("sudo vigil passwd --onvif ghost"), "\(ghost.stderr)")
    }

    /// As root with a vigil account (one of its own, in a mount namespace whose /etc/passwd and
    /// /etc/group have it), the ONVIF file is made 0640 root:vigil — the agent, as vigil, reads
    /// it; only root changes it — and the web's 0600 vigil's; vigil check takes both.
    @Test(.enabled(if: getuid() == 0 && which("unshare") != nil, "needs root and unshare"))
    func asRootTheONVIFFileIsRootsReadByTheVigilGroup() throws {
        let dir = try TemporaryDirectory("vigil-passwd-onvif-root")
        defer { dir.remove() }
        let config = try AgentTests.syntheticConfig(
            dir,
            extra: """
                web = { enabled = true; port = 0; password_file = "web-passwords"; };
                rtsp = { enabled = true; port = 0; };
                \(Self.onvif)
                """)
        let id = 64_123
        try
            (String(contentsOfFile: "/etc/passwd", encoding: .utf8)
            + "vigil:x:\(id):\(id):Vigil:/nonexistent:/usr/sbin/nologin\n").write(
                toFile: dir.file("passwd"), atomically: true, encoding: .utf8)
        try (String(contentsOfFile: "/etc/group", encoding: .utf8) + "vigil:x:\(id):\n").write(
            toFile: dir.file("group"), atomically: true, encoding: .utf8)
        let script = """
            mount --bind "$1/passwd" /etc/passwd && mount --bind "$1/group" /etc/group \\
                && echo pw | "$2" passwd --onvif viewer --config "$3" && "$2" check --config "$3" >/dev/null
            """
        let r = try runTool(
            "unshare", ["--mount", "--", "sh", "-c", script, "sh", dir.path, builtExecutable("vigil"), config])
        #expect(r.status == 0, "\(r.stderr)")
        let onvif = try Self.status(dir.file("onvif-passwords"))
        #expect(onvif.mode == 0o640 && onvif.owner == 0 && onvif.group == id, "\(onvif)")
        let web = try Self.status(dir.file("web-passwords"))
        #expect(web.mode == 0o600 && web.owner == id, "\(web)")
    }

    @Test func passwdWithONVIFWithoutItsFileSaysHowAndCheckWarns() throws {
        let dir = try TemporaryDirectory("vigil-passwd-onvif-none")
        defer { dir.remove() }
        let config = try AgentTests.syntheticConfig(
            dir,
            extra: """
                web = { enabled = true; port = 0; password_file = "web-passwords"; };
                rtsp = { enabled = true; port = 0; };
                onvif = { enabled = true; discovery = false; };
                """)
        let vigil = builtExecutable("vigil")
        let refused = try runTool(vigil, ["passwd", "--onvif", "--config", config], input: Data("pw\n".utf8))
        #expect(refused.status == 78 && refused.stderr.contains("onvif.password_file is not set"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("web-passwords")), "nothing written")
        #expect(try runTool(vigil, ["passwd", "--config", config], input: Data("pw\n".utf8)).status == 0)
        let checked = try runTool(vigil, ["check", "--config", config])
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(
            checked.stderr.contains("no onvif.password_file")
                && checked.stderr.contains("sudo vigil passwd --onvif USER"),
            "\(checked.stderr)")
    }

    /// onvif-zeep-async as Home Assistant builds it (PasswordDigest on every call, the picture
    /// by HTTP Digest), the user made by `vigil passwd --onvif`: the camera's setup calls all
    /// answered, ffprobe plays the stream URI with the same user and password; a wrong password
    /// refused.
    @Test func homeAssistantsClientSignsInWithAPasswordDigest() throws {
        let dir = try TemporaryDirectory("vigil-onvif-digest")
        defer { dir.remove() }
        let (agent, web, rtsp) = try ONVIFCommandTests.agent(
            dir, web: "listen = \"0.0.0.0\";", extra: Self.onvif, password: "ha-pw", passwd: ["--onvif"])
        defer { agent.kill(SIGKILL) }
        let seen = try #require(
            try ONVIFClient.run(["camera", "127.0.0.1", "\(web)", "admin", "ha-pw", "digest"]).first)
        #expect(seen["error"] == nil && seen["fault"] == nil, "\(seen)")
        #expect((seen["info"] as? [String: String])?["Manufacturer"] == "Vigil", "\(seen)")
        let profiles = seen["profiles"] as? [[String: Any]]
        #expect(profiles?.first?["encoding"] as? String == "H264", "\(seen)")
        let stream = try #require(seen["stream"] as? String)
        #expect(stream == "rtsp://127.0.0.1:\(rtsp)/yard")
        #expect(seen["picture"] as? String == "ffd8ff", "the picture, by HTTP Digest: \(seen)")
        let probe = try RTSPCommandTests.probe("rtsp://admin:ha-pw@127.0.0.1:\(rtsp)/yard", transport: "tcp")
        #expect(probe.status == 0 && probe.stdout.contains("codec_name=h264"), "\(probe.stderr)")
        #expect(probe.stdout.contains("width=320") && probe.stdout.contains("height=240"), "\(probe.stdout)")

        let wrong = try #require(
            try ONVIFClient.run(["camera", "127.0.0.1", "\(web)", "admin", "nope", "digest"]).first)
        #expect((wrong["fault"] as? String)?.contains("The user name or password is wrong") == true, "\(wrong)")
        #expect(wrong["info"] == nil)
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(!agent.output.contains("level=error"), "\(agent.output)")
    }
}
