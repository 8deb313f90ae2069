import Foundation
import TestSupport
import Testing

@testable import Configuration

/// The `rtsp` section: off by default on 127.0.0.1:8554; the web server's rule for other
/// machines (a password file first); its users and realm from `web.password_file`, read when
/// the RTSP server is on, the web server on or not.
@Suite struct RTSPSettingsTests {
    @Test func theDefaultsAreOffOnThisMachinesLoopbackAtPort8554() throws {
        let rtsp = try load("").rtsp
        #expect(rtsp == Settings.RTSP(enabled: false, listen: "127.0.0.1", port: 8554))
        #expect(try load("rtsp = { enabled = true; };").rtsp.realm == nil)
    }

    @Test func anotherMachinesAddressWithoutAPasswordIsRefusedNamingTheKeyAndTheFix() {
        #expect {
            try load("rtsp = { enabled = true; listen = \"0.0.0.0\"; };")
        } throws: { error in
            let text = "\(error)"
            return text.contains("rtsp.listen = \"0.0.0.0\" serves other machines, and there is no password")
                && text.contains("set web.password_file and make a password with `vigil passwd`")
        }
    }

    @Test func theWebPasswordFileSignsClientsInWithItsRealmTheWebServerOffOrOn() throws {
        let dir = try TemporaryDirectory("vigil-rtsp-passwords")
        defer { dir.remove() }
        let passwords = try WebPasswordsTests.writePasswords(dir.file("web-passwords"))
        for web in ["false", "true"] {
            let rtsp = try load(
                """
                web = { enabled = \(web); listen = "::"; password_file = "web-passwords"; };
                rtsp = { enabled = true; listen = "0.0.0.0"; port = 554; };
                """, directory: dir.path
            ).rtsp
            #expect(rtsp.problem == nil && rtsp.realm == passwords.realm, "web.enabled = \(web)")
            #expect(rtsp.passwordFile == dir.file("web-passwords") && rtsp.listen == "0.0.0.0" && rtsp.port == 554)
        }

        // One others may read keeps the RTSP server off, as it does the web server, and says so.
        try WebFilesTests.chmod(dir.file("web-passwords"), 0o644)
        let rtsp = try load(
            "web = { password_file = \"web-passwords\"; };\nrtsp = { enabled = true; listen = \"::\"; };",
            directory: dir.path
        ).rtsp
        #expect(rtsp.realm == nil && rtsp.problem?.description.contains("is mode 0644") == true, "\(rtsp)")
        #expect(rtsp.checkWarning?.contains("the RTSP server stays off until then") == true)
    }
}
