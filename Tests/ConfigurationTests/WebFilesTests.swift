import Foundation
import TestSupport
import Testing

@testable import Configuration

/// The web server's secret files (the password file, the certificate's key, the metrics token)
/// are checked as they are read, as `vigil check` and the agent's start read them: one that
/// others may read or change keeps the server off, named with its mode, its owner and the fix;
/// the certificate's dates are a warning when it has expired, is not valid yet, or soon ends.
@Suite struct WebFilesTests {
    static func chmod(_ path: String, _ mode: Int) throws {
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    static func web(_ text: String, _ dir: TemporaryDirectory) throws -> Settings.Web {
        try load("web = { enabled = true; \(text) };", directory: dir.path).web
    }

    @Test(arguments: [
        (0o644, "anyone on this machine can read it"), (0o604, "anyone on this machine can read it"),
        (0o620, "others than its owner can change it"), (0o602, "others than its owner can change it"),
        (0o666, "others than its owner can change it"),
    ])
    func aPasswordFileOthersMayReadOrChangeKeepsTheServerOff(mode: Int, said: String) throws {
        let dir = try TemporaryDirectory("vigil-web-mode")
        defer { dir.remove() }
        let path = dir.file("web-passwords")
        try WebPasswordsTests.writePasswords(path)
        try Self.chmod(path, mode)
        let web = try Self.web("listen = \"::\"; password_file = \"web-passwords\";", dir)
        let problem = web.problem?.description ?? ""
        #expect(web.passwords == nil)
        #expect(problem.contains("web.password_file: \(path) is mode 0\(String(mode, radix: 8))"), "\(problem)")
        #expect(problem.contains(said) && problem.contains("owner "), "\(problem)")
        #expect(problem.contains("chmod 600 \(path)"), "\(problem)")
        #expect(web.checkWarning?.contains("the web server stays off until then") == true)
    }

    @Test(arguments: [0o600, 0o640, 0o400])
    func aPasswordFileOnlyItsOwnerAndGroupReadIsTaken(mode: Int) throws {
        let dir = try TemporaryDirectory("vigil-web-mode")
        defer { dir.remove() }
        let passwords = try WebPasswordsTests.writePasswords(dir.file("web-passwords"))
        try Self.chmod(dir.file("web-passwords"), mode)
        let web = try Self.web("listen = \"::\"; password_file = \"web-passwords\";", dir)
        #expect(web.problem == nil && web.passwords == passwords, "\(String(describing: web.problem))")
    }

    /// Who owns a secret file: root, the user the agent runs as, or the vigil account; another
    /// owner could change it.
    @Test func aSecretFileOwnedByAnotherUserIsSaid() {
        let trusted: Set<UInt32> = [0, 1000, 998]
        func problem(_ mode: UInt32, _ owner: UInt32) -> String? {
            SecretFile.problem(
                key: "web.password_file", path: "/etc/vigil/web-passwords", permissions: mode, owner: owner, group: 998,
                trusted: trusted, holding: "hashes that sign in as well as the passwords")
        }
        #expect(problem(0o600, 0) == nil)
        #expect(problem(0o640, 998) == nil)
        #expect(problem(0o600, 1000) == nil)
        let other = problem(0o600, 54321) ?? ""
        #expect(other.contains("owner 54321") && other.contains("chown root"), "\(other)")
        let readable = problem(0o644, 0) ?? ""
        #expect(
            readable.contains("is mode 0644") && readable.contains("owner root")
                && readable.contains("hashes that sign in as well as the passwords"), "\(readable)")
    }

    @Test func aKeyOthersMayReadKeepsTheServerOffNotACertificate() throws {
        let dir = try TemporaryDirectory("vigil-web-key-mode")
        defer { dir.remove() }
        let certificates = try TestCertificates(in: dir)
        let files = "tls_cert_file = \"\(certificates.certificate)\"; tls_key_file = \"\(certificates.key)\";"
        try Self.chmod(certificates.certificate, 0o644)
        #expect(try Self.web(files, dir).tls != nil, "a certificate is public")
        try Self.chmod(certificates.key, 0o644)
        let web = try Self.web(files, dir)
        let problem = web.problem?.description ?? ""
        #expect(web.tls == nil)
        #expect(
            problem.contains("web.tls_key_file: \(certificates.key) is mode 0644")
                && problem.contains("chmod 600 \(certificates.key)"), "\(problem)")
        try Self.chmod(certificates.key, 0o640)
        #expect(try Self.web(files, dir).problem == nil)
    }

    @Test func theMetricsTokenIsReadAndKeptLikeThePasswordFile() throws {
        let dir = try TemporaryDirectory("vigil-web-token")
        defer { dir.remove() }
        try WebPasswordsTests.writePasswords(dir.file("pw"))
        try Self.chmod(dir.file("pw"), 0o600)
        let token = dir.file("metrics-token")
        try "  0123456789abcdef0123456789abcdef \n".write(toFile: token, atomically: true, encoding: .utf8)
        try Self.chmod(token, 0o600)
        let settings = "password_file = \"pw\"; metrics_token_file = \"metrics-token\";"
        let web = try Self.web(settings, dir)
        #expect(web.problem == nil && web.metricsToken == "0123456789abcdef0123456789abcdef")
        #expect(web.metricsTokenFile == token)

        try Self.chmod(token, 0o644)
        let readable = try Self.web(settings, dir)
        #expect(readable.metricsToken == nil)
        #expect(
            readable.problem?.description.contains("web.metrics_token_file: \(token) is mode 0644") == true,
            "\(String(describing: readable.problem))")

        try "guessable\n".write(toFile: token, atomically: true, encoding: .utf8)
        try Self.chmod(token, 0o600)
        let short = try Self.web(settings, dir).problem?.description ?? ""
        #expect(short.contains("at least 16") && short.contains("openssl rand -hex 32"), "\(short)")
        let missing = try Self.web("password_file = \"pw\"; metrics_token_file = \"nowhere\";", dir)
        #expect(missing.problem?.description.contains("nowhere cannot be read") == true)
        // Off, the file is not read.
        let off = try load("web = { metrics_token_file = \"nowhere\"; };", directory: dir.path).web
        #expect(off.problem == nil && off.metricsToken == nil)
    }

    /// `web.url`'s host is a name the server answers to.
    @Test func theHostOfWebURLIsReadForTheServer() throws {
        let dir = try TemporaryDirectory("vigil-web-url-host")
        defer { dir.remove() }
        func host(_ url: String) throws -> String? { try Self.web("url = \"\(url)\";", dir).urlHost }
        #expect(try host("http://Garage.Example:8080/") == "garage.example")
        #expect(try host("https://camera.lan") == "camera.lan")
        #expect(try host("https://[2001:DB8::7]:8443/vigil") == "[2001:db8::7]")
        #expect(try host("http://192.168.1.20:8080") == "192.168.1.20")
        #expect(try Self.web("", dir).urlHost == nil)
    }

    /// An expired certificate still encrypts, and refusing it would lock the owner out: it is
    /// served, with a warning that names its date and what to do; so is one not valid yet (a
    /// clock that is wrong, often) and one that ends within 14 days.
    @Test func aCertificateOutOfItsDatesIsAWarningNamingThem() throws {
        let dir = try TemporaryDirectory("vigil-web-dates")
        defer { dir.remove() }
        func web(_ certificates: TestCertificates) throws -> Settings.Web {
            try Self.web(
                "tls_cert_file = \"\(certificates.certificate)\"; tls_key_file = \"\(certificates.key)\";", dir)
        }
        let expired = try web(
            TestCertificates(in: dir, name: "old", validity: ("20200101000000Z", "20200102000000Z")))
        #expect(expired.problem == nil && expired.tls != nil)
        let said = expired.certificateWarning?.description ?? ""
        #expect(said.contains("expired on 2020-01-02 00:00:00 UTC") && said.contains("renew it"), "\(said)")
        #expect(expired.certificateNotAfter == 1_577_923_200)

        let early = try web(TestCertificates(in: dir, name: "early", validity: ("20990101000000Z", "21000101000000Z")))
        let notYet = early.certificateWarning?.description ?? ""
        #expect(notYet.contains("not valid before 2099-01-01 00:00:00 UTC") && notYet.contains("clock"), "\(notYet)")

        let soon = Settings.Web.certificateTiming(notBefore: 0, notAfter: 10 * 86400 + 3600, now: 0)
        #expect(soon == .endsSoon(days: 10))
        #expect(Settings.Web.certificateTiming(notBefore: 0, notAfter: 15 * 86400, now: 0) == .valid)
        #expect(Settings.Web.certificateTiming(notBefore: 0, notAfter: 100, now: 101) == .expired)
        #expect(Settings.Web.certificateTiming(notBefore: 100, notAfter: 200, now: 99) == .notYetValid)

        #expect(try web(TestCertificates(in: dir, name: "fine")).certificateWarning == nil, "30 days left")
    }
}
