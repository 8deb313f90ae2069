import Foundation
import TestSupport
import Testing

@testable import Configuration

@Suite struct UploadSettingsTests {
    @Test func eachKindOfURLBecomesItsDestinationWithItsSecrets() throws {
        let dir = try TemporaryDirectory("vigil-upload-config")
        defer { dir.remove() }
        for (name, text) in [("access", "AKID\n"), ("secret", "  s3cret  \nignored\n"), ("password", "davpw\n")] {
            try text.write(toFile: dir.file(name), atomically: true, encoding: .utf8)
        }
        let s3 = try load(
            """
            upload = { url = "s3://camera-clips/home/yard/"; access_key_file = "access"; secret_key_file = "secret";
              region = "eu-central-1"; bandwidth_kbit = 2000; delete_local_after = 24.0; };
            """, directory: dir.path
        ).upload
        #expect(
            s3.destination
                == .s3(
                    bucket: "camera-clips", prefix: "home/yard", endpoint: "https://s3.eu-central-1.amazonaws.com",
                    region: "eu-central-1"))
        #expect(s3.credentials.accessKey == "AKID" && s3.credentials.secretKey == "s3cret" && s3.problem == nil)
        #expect(s3.bandwidthKbit == 2000 && s3.deleteLocalAfter == 86_400 && s3.snapshots)

        let sftp = try load(
            """
            upload = { url = "sftp://clips@nas.lan:2222/srv/clips"; ssh_key_file = "access"; known_hosts_file = "secret"; };
            """, directory: dir.path
        ).upload
        #expect(sftp.destination == .sftp(user: "clips", host: "nas.lan", port: 2222, directory: "srv/clips"))
        #expect(sftp.credentials.sshKeyFile == dir.file("access"))

        let dav = try load(
            "upload = { url = \"https://vigil@cloud.lan/dav/clips\"; password_file = \"password\"; };",
            directory: dir.path
        ).upload
        #expect(dav.destination == .webdav(base: "https://cloud.lan/dav/clips", user: "vigil"))
        #expect(dav.credentials.password == "davpw")

        let off = try load("upload = { access_key_file = \"/nonexistent\"; };").upload
        #expect(!off.enabled && off.problem == nil && off.deleteLocalAfter == nil && off.bandwidthKbit == nil)
    }

    @Test func aBadURLOrAMissingKeySaysWhatToGive() {
        for (text, key, says) in [
            ("upload = { url = \"s3://X/clips\"; };", "upload.url", "does not name a bucket"),
            ("upload = { url = \"ftp://host/clips\"; };", "upload.url", "scheme Vigil does not upload to"),
            ("upload = { url = \"s3://clips/a/../b\"; };", "upload.url", "empty, . or .."),
            ("upload = { url = \"sftp://nas.lan/clips\"; };", "upload.url", "names no user"),
            ("upload = { url = \"https://me:pw@cloud.lan/dav\"; };", "upload.url", "password in it"),
            ("upload = { url = \"s3://clips/x\"; access_key_file = \"a\"; };", "upload.secret_key_file", "needs"),
            ("upload = { url = \"sftp://me@nas.lan/x\"; ssh_key_file = \"k\"; };", "upload.known_hosts_file", "needs"),
            (
                "upload = { url = \"sftp://me@nas.lan/x\"; ssh_key_file = \"k\"; known_hosts_file = \"h\"; tls_ca_file = \"ca.crt\"; };",
                "upload.tls_ca_file", "known_hosts_file"
            ),
            (
                "upload = { url = \"s3://clips/x\"; endpoint = \"minio.lan:9000\"; access_key_file = \"a\"; secret_key_file = \"b\"; };",
                "upload.endpoint", "https://HOST[:PORT]"
            ),
        ] {
            let error = failure(text)
            #expect(error?.message.contains(key) == true, "\(text): \(String(describing: error))")
            #expect(error?.description.contains(says) == true, "\(text): \(String(describing: error))")
        }
    }

    /// A key file that cannot be read is no invalid configuration: recording goes on, clips are
    /// queued, and `vigil check` warns.
    @Test func anUnreadableKeyFileIsAProblemNotAnError() throws {
        let upload = try load(
            "upload = { url = \"s3://clips/x\"; access_key_file = \"/nonexistent/a\"; secret_key_file = \"/nonexistent/b\"; };"
        ).upload
        #expect(upload.enabled)
        let warning = try #require(upload.checkWarning)
        #expect(warning.contains("upload.access_key_file") && warning.contains("queued"), "\(warning)")
    }
}
