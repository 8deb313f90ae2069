import Foundation
import Media
import TestSupport
import Testing

/// Who may reach the agent's web server, as the commands and the running agent show it:
/// `vigil check` and the start read its secret files and certificate as the server would,
/// `vigil passwd` refuses what it would cut, and the agent answers a rebinding page, a
/// password guesser and Prometheus as docs/guide/web.md's "Security" says.
@Suite struct WebSecurityCommandTests {
    static func chmod(_ path: String, _ mode: Int) throws {
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    /// A password file others may read, a certificate that has expired: `vigil check` says
    /// both, each with its fix (the configuration itself is fine: it exits 0); the agent keeps
    /// the server off, says why, warns of the certificate, and records.
    @Test func checkAndTheStartSayWhatIsWrongWithTheSecretFilesAndTheCertificate() throws {
        let dir = try TemporaryDirectory("vigil-web-files")
        defer { dir.remove() }
        let certificates = try TestCertificates(in: dir, validity: ("20200101000000Z", "20200102000000Z"))
        let footage = try AgentTests.footage(
            AgentTests.scene(seconds: 8, objects: [AgentTests.object(2, 4)]), in: dir)
        let config = try AgentTests.config(
            dir, footage: footage,
            extra: """
                web = { enabled = true; port = 0; password_file = "web-passwords";
                  tls_cert_file = "\(certificates.certificate)"; tls_key_file = "\(certificates.key)"; };
                """)
        let set = try runTool(builtExecutable("vigil"), ["passwd", "--config", config], input: Data("pw\n".utf8))
        #expect(set.status == 0, "\(set.stderr)")
        let passwords = dir.file("web-passwords")
        let clean = try vigil("check", "--config", config)
        #expect(clean.status == 0)
        #expect(!clean.stderr.contains("web-passwords"), "what vigil passwd makes passes: \(clean.stderr)")
        #expect(
            clean.stderr.contains("warning: web.tls_cert_file: \(certificates.certificate) expired on 2020-01-02"),
            "\(clean.stderr)")

        try Self.chmod(passwords, 0o644)
        let check = try vigil("check", "--config", config)
        #expect(check.status == 0)
        #expect(
            check.stderr.contains("web.password_file: \(passwords) is mode 0644")
                && check.stderr.contains("chmod 600 \(passwords)"), "\(check.stderr)")

        let agent = try AgentProcess(config: config)
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let off = try #require(agent.outputLines.first { $0.contains("msg=\"web server off") }, "\(agent.output)")
        #expect(off.contains("level=error") && off.contains("is mode 0644"), "\(off)")
        let expired = try #require(
            agent.outputLines.first { $0.contains("level=warning") && $0.contains("certificate") }, "\(agent.output)")
        #expect(logValue(expired, "not_after") == "2020-01-02 00:00:00 UTC", "\(expired)")
        #expect(!agent.output.contains("web server listening"))
        #expect(agent.output.contains("msg=\"clip saved\""))
    }

    /// A password longer than `vigil passwd` takes is refused whole, never cut; one of the
    /// longest it takes is kept whole.
    @Test func vigilPasswdRefusesAPasswordItWouldCut() throws {
        let dir = try TemporaryDirectory("vigil-passwd-long")
        defer { dir.remove() }
        let config = dir.file("vigil.conf")
        try "web = { password_file = \"web-passwords\"; };\n".write(toFile: config, atomically: true, encoding: .utf8)
        let long = try runTool(
            builtExecutable("vigil"), ["passwd", "--config", config],
            input: Data((String(repeating: "x", count: 5000) + "\n").utf8))
        #expect(long.status == 65, "\(long)")
        #expect(long.stderr.contains("longer than 1024 bytes"), "\(long.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("web-passwords")))

        let password = String(repeating: "y", count: 1024)
        let longest = try runTool(
            builtExecutable("vigil"), ["passwd", "--config", config], input: Data((password + "\n").utf8))
        #expect(longest.status == 0, "\(longest.stderr)")
        let line = try String(contentsOfFile: dir.file("web-passwords"), encoding: .utf8)
        let fields = line.split(separator: ":")
        try #require(fields.count == 3)
        #expect(fields[2].trimmingCharacters(in: .newlines) == MD5.hex("admin:\(fields[1]):\(password)"))
    }

    /// The running agent: a rebinding page gets 421, Prometheus reads /metrics with its token,
    /// a password guesser is slowed and said once.
    @Test func theAgentsServerAnswersRebindingGuessingAndPrometheus() throws {
        let dir = try TemporaryDirectory("vigil-web-access")
        defer { dir.remove() }
        let token = dir.file("metrics-token")
        try "5f0c2e7a9b1d4c3e8f6a0b2c4d6e8f10\n".write(toFile: token, atomically: true, encoding: .utf8)
        try Self.chmod(token, 0o600)
        let footage = try AgentTests.footage(
            AgentTests.scene(seconds: 30, objects: [AgentTests.object(2, 4)]), in: dir)
        let config = try AgentTests.config(
            dir, footage: footage,
            extra: """
                web = { enabled = true; port = 0; password_file = "web-passwords"; metrics_token_file = "metrics-token";
                  url = "http://garage.example:8080"; };
                """, realtime: true)
        let set = try runTool(builtExecutable("vigil"), ["passwd", "--config", config], input: Data("pw\n".utf8))
        #expect(set.status == 0, "\(set.stderr)")
        let agent = try AgentProcess(config: config)
        defer { agent.kill(SIGKILL) }
        let base = try WebCommandTests.webAddress(of: agent)

        let rebound = try WebCommandTests.get(base + "/api/clips", ["-H", "Host: evil.example:8080"])
        #expect(rebound.status == 421)
        #expect(String(decoding: rebound.body, as: UTF8.self).contains("garage.example"))
        let named = try WebCommandTests.get(
            base + "/api/clips", ["-H", "Host: garage.example:8080", "--digest", "-u", "admin:pw"])
        #expect(named.status == 200)

        // What Prometheus sends with `authorization: { credentials_file: … }`.
        let scrape = try WebCommandTests.get(
            base + "/metrics", ["-H", "Authorization: Bearer 5f0c2e7a9b1d4c3e8f6a0b2c4d6e8f10"])
        #expect(scrape.status == 200 && String(decoding: scrape.body, as: UTF8.self).contains("vigil_frames_total"))

        // Guesses until the agent slows this address (the first wait is a second: a slow
        // machine may see a few more 401s first).
        var statuses: [Int] = []
        for _ in 0..<20 where statuses.last != 429 {
            statuses.append(try WebCommandTests.get(base + "/", ["--digest", "-u", "admin:guess"]).status)
        }
        #expect(Array(statuses.prefix(5)) == [401, 401, 401, 401, 401] && statuses.last == 429, "\(statuses)")
        let warned = logLines(
            agent.output,
            "failed sign-ins from one address: it waits before it may try again — if that is not you, someone is guessing passwords"
        )
        #expect(warned.count == 1, "\(agent.output)")
        #expect(warned.first.flatMap { logValue($0, "user") } == "admin")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0)
    }
}
