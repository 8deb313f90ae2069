import Configuration
import Foundation
import Media
import TestSupport
import Testing

/// The web server's password file: htdigest's lines, read as the agent reads them.
@Suite struct WebPasswordsTests {
    @Test func md5IsRFC1321s() {
        // The test suite of RFC 1321, appendix A.5.
        let cases = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
            (
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f"
            ),
            (String(repeating: "1234567890", count: 8), "57edf4a22be3c955ac49da2e2107b67a"),
        ]
        for (text, digest) in cases { #expect(MD5.hex(text) == digest, "MD5(\"\(text)\")") }
        // Fed in pieces, across the 64-byte blocks, the same.
        var md5 = MD5()
        for piece in ["1234567890123456789012345678901234567890", "1234567890123456789012345678901234567890"] {
            md5.update(Array(piece.utf8))
        }
        #expect(md5.finish().map { String(format: "%02x", $0) }.joined() == "57edf4a22be3c955ac49da2e2107b67a")
    }

    @Test func aFileIsReadBackAsWrittenAndItsHashIsDigests() throws {
        var passwords = WebPasswords(realm: WebPasswords.newRealm(random: [0x3f, 0x9a, 0x21, 0xc0]))
        #expect(passwords.realm == "Vigil 3f9a21c0")
        passwords.set(user: "admin", password: "correct horse")
        passwords.set(user: "bob", password: "b")
        // HA1 = MD5(user:realm:password), as RFC 7616 and htdigest have it.
        #expect(
            passwords.text.hasPrefix("admin:Vigil 3f9a21c0:" + MD5.hex("admin:Vigil 3f9a21c0:correct horse") + "\n"))
        #expect(try WebPasswords.parse(passwords.text) == passwords)
        // What htdigest writes (apache2-utils), read the same.
        let htdigest = "alice:Vigil 3f9a21c0:" + MD5.hex("alice:Vigil 3f9a21c0:secret") + "\r\n"
        #expect(
            try WebPasswords.parse(htdigest).users["alice"] == MD5.digest(Array("alice:Vigil 3f9a21c0:secret".utf8)))
    }

    /// Two lines of two realms; a line without a user (Swift 6.0 cannot type-check these
    /// sums inside `@Test`'s arguments).
    static let twoRealms = "admin:Vigil:" + MD5.hex("x") + "\nbob:Other:" + MD5.hex("y") + "\n"
    static let noUser = ":Vigil:" + MD5.hex("x") + "\n"

    @Test(
        arguments: [
            ("", "holds no user"),
            ("\n\n", "holds no user"),
            ("admin:secret\n", "line 1 is not USER:REALM:HASH"),
            ("admin:Vigil:not-hex-not-hex-not-hex-not-hex-1\n", "line 1 is not USER:REALM:HASH"),
            (twoRealms, "line 2 has the realm \"Other\""),
            (noUser, "line 1 is not USER:REALM:HASH"),
        ])
    func whatIsNotAPasswordFileIsSaid(text: String, message: String) {
        #expect(throws: WebPasswordsError.self) { try WebPasswords.parse(text) }
        do {
            _ = try WebPasswords.parse(text)
        } catch {
            #expect(error.description.contains(message), "\(error)")
        }
    }

    @Test func userNamesThatCannotBeSentAreRefused() {
        #expect(WebPasswords.nameProblem("admin") == nil)
        #expect(WebPasswords.nameProblem("anne-marie.o_neil") == nil)
        for bad in ["", "a:b", "with space", "quo\"te", String(repeating: "x", count: 65), "élise"] {
            #expect(WebPasswords.nameProblem(bad) != nil, "\(bad)")
        }
    }

    /// A password file with the user admin (password pw), written at `path`, mode 0600 (as
    /// `vigil passwd` makes it: others may not read it).
    @discardableResult
    static func writePasswords(_ path: String) throws -> WebPasswords {
        var passwords = WebPasswords(realm: "Vigil 00000001")
        passwords.set(user: "admin", password: "pw")
        try passwords.text.write(toFile: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        return passwords
    }

    /// The file is read with the settings when the server is on: another machine may listen
    /// then; a file that cannot be used is the server's problem, not the configuration's.
    @Test func thePasswordFileIsReadWithTheSettings() throws {
        let dir = try TemporaryDirectory("vigil-web-passwords")
        defer { dir.remove() }
        let passwords = try Self.writePasswords(dir.file("web-passwords"))
        let on = try load(
            "web = { enabled = true; listen = \"0.0.0.0\"; password_file = \"web-passwords\"; };",
            directory: dir.path)
        #expect(on.web.listen == "0.0.0.0" && on.web.passwordFile == dir.file("web-passwords"))
        #expect(on.web.passwords == passwords && on.web.problem == nil)

        let missing = try load(
            "web = { enabled = true; listen = \"::\"; password_file = \"nowhere\"; };", directory: dir.path)
        #expect(missing.web.passwords == nil)
        #expect(
            missing.web.problem?.description.contains("nowhere cannot be read") == true,
            "\(String(describing: missing.web.problem))")

        try "admin:pw\n".write(toFile: dir.file("plain"), atomically: true, encoding: .utf8)
        let plain = try load("web = { enabled = true; password_file = \"plain\"; };", directory: dir.path)
        #expect(plain.web.problem?.description.contains("line 1 is not USER:REALM:HASH") == true)

        // Off, the file is not read.
        let off = try load("web = { password_file = \"nowhere\"; };", directory: dir.path)
        #expect(off.web.problem == nil && off.web.passwords == nil)
    }

    /// The certificate and key are read with the settings when the server is on; one without
    /// the other is a mistake in the file; what is not a PEM certificate (one GnuTLS reads) or
    /// an unencrypted key is the server's problem (it stays off), named with what to do.
    @Test func theCertificateAndKeyAreReadWithTheSettings() throws {
        let dir = try TemporaryDirectory("vigil-web-tls")
        defer { dir.remove() }
        let made = try TestCertificates(in: dir)
        let certificate = try String(contentsOfFile: made.certificate, encoding: .utf8)
        let key = try String(contentsOfFile: made.key, encoding: .utf8)
        try FileManager.default.copyItem(atPath: made.certificate, toPath: dir.file("web.crt"))
        try FileManager.default.copyItem(atPath: made.key, toPath: dir.file("web.key"))
        let on = try load(
            "web = { enabled = true; tls_cert_file = \"web.crt\"; tls_key_file = \"web.key\"; };",
            directory: dir.path)
        #expect(on.web.tls == Settings.Web.TLS(certificate: certificate, key: key) && on.web.problem == nil)
        #expect(on.web.tlsCertFile == dir.file("web.crt") && on.web.scheme == "https")

        for half in ["tls_cert_file = \"web.crt\";", "tls_key_file = \"web.key\";"] {
            let error = failure("web = { \(half) };")?.description ?? ""
            #expect(error.contains("web.tls_cert_file and web.tls_key_file go together"), "\(error)")
        }

        func problem(_ certificateFile: String, _ keyFile: String) throws -> String {
            let settings = try load(
                "web = { enabled = true; tls_cert_file = \"\(certificateFile)\"; tls_key_file = \"\(keyFile)\"; };",
                directory: dir.path)
            #expect(settings.web.tls == nil)
            return settings.web.problem?.description ?? ""
        }
        #expect(try problem("nowhere.crt", "web.key").contains("nowhere.crt cannot be read"))
        #expect(try problem("web.crt", "/dev/null").contains("/dev/null is not a regular file"))
        try Data([0x30, 0x82, 0x01, 0x0A]).write(to: URL(fileURLWithPath: dir.file("web.der")))
        #expect(try problem("web.der", "web.key").contains("is not a certificate in PEM form"))
        // The key and the certificate the wrong way round.
        #expect(
            try problem("web.key", "web.crt").contains("web.tls_cert_file: \(dir.file("web.key")) is not a certificate")
        )
        try "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIF\n-----END ENCRYPTED PRIVATE KEY-----\n".write(
            toFile: dir.file("locked.key"), atomically: true, encoding: .utf8)
        #expect(try problem("web.crt", "locked.key").contains("is encrypted with a passphrase"))
        try "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".write(
            toFile: dir.file("broken.crt"), atomically: true, encoding: .utf8)
        #expect(try problem("broken.crt", "web.key").contains("holds no certificate GnuTLS can read"))

        // Off, the files are not read.
        let off = try load(
            "web = { tls_cert_file = \"nowhere.crt\"; tls_key_file = \"nowhere.key\"; };", directory: dir.path)
        #expect(off.web.problem == nil && off.web.tls == nil && off.web.scheme == "http")
    }

    /// `web.url`, and where links point without it: the machine's name and port when other
    /// machines can reach the server, nothing on loopback.
    @Test func linksPointAtWebURLOrThisMachineWhenOthersReachIt() throws {
        let dir = try TemporaryDirectory("vigil-web-url")
        defer { dir.remove() }
        try Self.writePasswords(dir.file("pw"))
        func web(_ text: String) throws -> Settings.Web { try load("web = { \(text) };", directory: dir.path).web }
        let given = try web("enabled = true; url = \"http://garage.local:8080/\";")
        #expect(given.url == "http://garage.local:8080" && given.linkBase(host: "pi") == "http://garage.local:8080")
        #expect(try web("enabled = true;").linkBase(host: "pi") == nil, "loopback: no link")
        #expect(try web("url = \"http://garage.local:8080\";").linkBase(host: "pi") == nil, "off: no link")
        let open = try web("enabled = true; listen = \"0.0.0.0\"; port = 8443; password_file = \"pw\";")
        #expect(open.linkBase(host: "garage") == "http://garage:8443")
        #expect(open.linkBase(host: "") == nil)
        for bad in ["garage.local:8080", "ftp://garage", "http://", "http://a b", "http://garage/?x=1"] {
            let error = failure("web = { url = \"\(bad)\"; };")?.description ?? ""
            #expect(error.contains("is not the address of the server"), "\(bad): \(error)")
        }
    }
}
