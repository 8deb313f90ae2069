import Agent
import Configuration
import Foundation
import Logging
import Recorder
import TestSupport
import Testing
import Upload

/// Clips off the board over SFTP and WebDAV (on HTTPS with a private CA too): a refusal first
/// (a wrong host key, password or CA), said clearly with nothing sent, then every clip arriving.
extension UploadTests {
    /// A sink the server refuses: it fails at least once and sends nothing; its first error line.
    static func refusal(
        _ board: Board, _ settings: Settings.Upload, log: MemoryLogSink,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> String {
        let refused = try board.sink(settings, log: log)
        #expect(
            waitUntil(timeout: 120) { refused.uploadCounts.failures >= 1 }, "\(log.written)",
            sourceLocation: sourceLocation)
        refused.finish()
        return try #require(log.written(at: .error).first, sourceLocation: sourceLocation)
    }

    /// A sink with `settings` sends every clip of `board` (queued already): each arrives whole
    /// under `root` + `/fleet/shed/`, a movie that plays, with no partial file left beside it,
    /// and is said uploaded once, in order.
    static func expectArrival(
        _ board: Board, _ settings: Settings.Upload, log: MemoryLogSink, root: String, over: String
    ) throws {
        let sink = try board.sink(settings, log: log, queue: false)
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.uploaded == board.clips.count }, "\(log.written)")
        sink.finish()
        for clip in board.clips {
            let remote = root + "/fleet/shed/" + clip
            #expect(try FileManager.default.contents(atPath: remote) == board.bytes(clip), "\(remote)")
            try expectPlayable(remote, "the clip uploaded over \(over)")
        }
        let left = try FileManager.default.subpathsOfDirectory(atPath: root).filter { $0.hasSuffix(".part") }
        #expect(left.isEmpty, "no partial file is left: \(left)")
        Self.expectUploadedOnceInOrder(board, board.clips)
    }

    @Test(.enabled(if: getuid() == 0 || ProcessInfo.processInfo.environment["CI"] != nil))
    func clipsArriveOverSFTPAndAWrongHostKeyIsRefused() throws {
        let directory = try TemporaryDirectory("vigil-upload-sftp")
        defer { directory.remove() }
        let server = try SFTPServer(directory)
        let board = try Board(directory, clips: 2)
        // A known_hosts with another key for the server: refused, nothing sent.
        let stranger = directory.file("stranger")
        _ = try runTool("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", stranger])
        let strangerKey = try String(contentsOfFile: stranger + ".pub", encoding: .utf8).split(separator: " ").prefix(2)
            .joined(separator: " ")
        try "[127.0.0.1]:\(server.port) \(strangerKey)\n".write(
            toFile: directory.file("wrong_known_hosts"), atomically: true, encoding: .utf8)
        let url = "sftp://\(server.user)@127.0.0.1:\(server.port)\(server.root)/fleet"
        let log = MemoryLogSink()
        let key = "url = \"\(url)\"; ssh_key_file = \"\(server.keyFile)\";"
        let error = try Self.refusal(
            board, try Self.settings(key + " known_hosts_file = \"wrong_known_hosts\";", in: directory), log: log)
        #expect(error.contains("host key") && error.contains("upload.known_hosts_file"), "\(error)")
        #expect(!FileManager.default.fileExists(atPath: server.root + "/fleet/shed/" + board.clips[0]))

        try Self.expectArrival(
            board, try Self.settings(key + " known_hosts_file = \"\(server.knownHosts)\";", in: directory), log: log,
            root: server.root, over: "SFTP")
        for picture in board.clips.map(ClipNaming.snapshotPath(of:)) {
            #expect(
                try FileManager.default.contents(atPath: server.root + "/fleet/shed/" + picture)
                    == board.bytes(picture))
        }
    }

    @Test func clipsArriveOnAWebDAVShareAndAWrongPasswordIsRefused() throws {
        let directory = try TemporaryDirectory("vigil-upload-webdav")
        defer { directory.remove() }
        let server = try WebDAVServer(directory)
        let board = try Board(directory, clips: 2)
        let url = "http://\(server.user)@127.0.0.1:\(server.port)/dav/fleet"
        try "wrong\n".write(toFile: directory.file("wrong"), atomically: true, encoding: .utf8)
        try (server.password + "\n").write(toFile: directory.file("password"), atomically: true, encoding: .utf8)
        let log = MemoryLogSink()
        let error = try Self.refusal(
            board, try Self.settings("url = \"\(url)\"; password_file = \"wrong\";", in: directory), log: log)
        #expect(error.contains("401") && error.contains("upload.password_file"), "\(error)")

        try Self.expectArrival(
            board, try Self.settings("url = \"\(url)\"; password_file = \"password\";", in: directory), log: log,
            root: server.root, over: "WebDAV")
    }

    /// A WebDAV server on HTTPS with a certificate of a private CA: refused (a clear error, the
    /// clip queued) until `upload.tls_ca_file` names the CA, then the clip arrives.
    @Test func aServerOfAPrivateCAIsTrustedWithTheCAFileOnly() throws {
        let directory = try TemporaryDirectory("vigil-upload-tls")
        defer { directory.remove() }
        let certificates = try TestCertificates(in: directory, name: "dav")
        let server = try WebDAVServer(directory, certificates: certificates)
        let board = try Board(directory, clips: 1)
        let url = "https://\(server.user)@127.0.0.1:\(server.port)/dav/fleet"
        try (server.password + "\n").write(toFile: directory.file("password"), atomically: true, encoding: .utf8)
        let log = MemoryLogSink()
        let error = try Self.refusal(
            board, try Self.settings("url = \"\(url)\"; password_file = \"password\";", in: directory), log: log)
        #expect(error.contains("upload.tls_ca_file") && error.contains("not trusted"), "\(error)")
        #expect(board.queue.backlog == board.clips)

        let settings = try Self.settings(
            "url = \"\(url)\"; password_file = \"password\"; tls_ca_file = \"\(certificates.caCertificate)\";",
            in: directory)
        #expect(settings.credentials.caFile == certificates.caCertificate)
        try Self.expectArrival(board, settings, log: log, root: server.root, over: "WebDAV on HTTPS")
    }
}
