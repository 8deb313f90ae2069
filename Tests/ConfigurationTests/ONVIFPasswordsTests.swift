import Foundation
import TestSupport
import Testing

@testable import Configuration

/// `onvif.password_file`: USER:PASSWORD lines, the passwords in the clear (what checks a
/// WS-Security PasswordDigest), so kept like a key — one others may read or change is
/// refused naming the file, its mode and the fix; read with onvif.enabled and the web's
/// password file; a user the web's file lacks is said.
@Suite struct ONVIFPasswordsTests {
    static let base = """
        web = { enabled = true; listen = "::"; password_file = "web-passwords"; };
        rtsp = { enabled = true; };
        """

    static func onvif(
        _ dir: TemporaryDirectory, _ text: String? = "admin:s3cret:pw\n", mode: Int = 0o600
    )
        throws -> Settings.ONVIF
    {
        _ = try WebPasswordsTests.writePasswords(dir.file("web-passwords"))
        if let text {
            try text.write(toFile: dir.file("onvif-passwords"), atomically: true, encoding: .utf8)
            try WebFilesTests.chmod(dir.file("onvif-passwords"), mode)
        }
        return try load(
            base + "\nonvif = { enabled = true; password_file = \"onvif-passwords\"; };", directory: dir.path
        ).onvif
    }

    @Test func theFileIsReadItsPasswordsMayHoldColons() throws {
        let dir = try TemporaryDirectory("vigil-onvif-file")
        defer { dir.remove() }
        let onvif = try Self.onvif(dir, "admin:s3cret:pw\r\nviewer:x y\n\n")
        #expect(onvif.problem == nil, "\(String(describing: onvif.problem))")
        #expect(onvif.passwordFile == dir.file("onvif-passwords"))
        #expect(onvif.passwords?.users == ["admin": "s3cret:pw", "viewer": "x y"])
        #expect(onvif.usersMissingFromWeb == ["viewer"])
        #expect(ONVIFPasswords(users: ["b": "2", "a": "1:1"]).text == "a:1:1\nb:2\n")
    }

    @Test(arguments: [
        ("admin\n", "line 1 is not USER:PASSWORD"), ("admin:\n", "line 1 gives admin an empty password"),
        ("admin:a\nadmin:b\n", "line 2 gives admin a second password"), ("\n", "it holds no user"),
        ("a\"b:pw\n", "line 1's user is not one"), ("admin:p\u{0}w\n", "NUL"),
    ])
    func aFileThatIsNotUserPasswordLinesIsAConfigurationError(text: String, said: String) throws {
        let dir = try TemporaryDirectory("vigil-onvif-file")
        defer { dir.remove() }
        let problem = try Self.onvif(dir, text).problem?.description ?? ""
        #expect(
            problem.contains("onvif.password_file: \(dir.file("onvif-passwords"))") && problem.contains(said),
            "\(problem)")
        #expect(problem.contains("vigil passwd --onvif") || said == "NUL", "\(problem)")
    }

    @Test(arguments: [
        (0o644, "anyone on this machine can read it"), (0o604, "anyone on this machine can read it"),
        (0o620, "others than its owner can change it"),
    ])
    func aFileOthersMayReadOrChangeIsRefusedNamingTheFix(mode: Int, said: String) throws {
        let dir = try TemporaryDirectory("vigil-onvif-mode")
        defer { dir.remove() }
        let onvif = try Self.onvif(dir, mode: mode)
        let path = dir.file("onvif-passwords")
        let problem = onvif.problem?.description ?? ""
        #expect(onvif.passwords == nil)
        #expect(problem.contains("onvif.password_file: \(path) is mode 0\(String(mode, radix: 8))"), "\(problem)")
        #expect(problem.contains(said) && problem.contains("the ONVIF passwords in the clear"), "\(problem)")
        #expect(problem.contains("chmod 600 \(path)") && problem.contains("chmod 640 \(path)"), "\(problem)")
    }

    @Test func aMissingFileOrOneTooLargeIsAProblemAndOffONVIFItIsNotRead() throws {
        let dir = try TemporaryDirectory("vigil-onvif-missing")
        defer { dir.remove() }
        let missing = try Self.onvif(dir, nil).problem?.description ?? ""
        #expect(missing.contains("cannot be read") && missing.contains("sudo vigil passwd --onvif USER"), "\(missing)")
        let large = try Self.onvif(dir, String(repeating: "a:b\n", count: 20000)).problem?.description ?? ""
        #expect(large.contains("80000 bytes, more than a password file holds"), "\(large)")
        try FileManager.default.removeItem(atPath: dir.file("onvif-passwords"))
        let off = try load(
            Self.base + "\nonvif = { enabled = false; password_file = \"onvif-passwords\"; };", directory: dir.path
        ).onvif
        #expect(off.problem == nil && off.passwords == nil)
    }

    @Test func checkWarnsOfNoFileWithTheFixAndOfUsersTheWebLacks() throws {
        let dir = try TemporaryDirectory("vigil-onvif-warn")
        defer { dir.remove() }
        _ = try WebPasswordsTests.writePasswords(dir.file("web-passwords"))
        let settings = try load(Self.base + "\nonvif = { enabled = true; };", directory: dir.path)
        let none = settings.onvif.checkWarnings(web: settings.web)
        #expect(none.count == 1 && none[0].contains("no onvif.password_file"), "\(none)")
        #expect(none[0].contains("sudo vigil passwd --onvif USER"))
        let extra = try Self.onvif(dir, "admin:pw\nguest:pw2\n")
        let said = extra.checkWarnings(web: settings.web)
        #expect(said.count == 1 && said[0].contains("guest is not in web.password_file"), "\(said)")
        #expect(said[0].contains("sudo vigil passwd --onvif guest"))
    }
}
