import Agent
import Configuration
import Foundation
import Logging
import Media
import Recorder
import Storage
import Synchronization
import TestSupport
import Testing
import Upload

/// The upload queue's bad days (issue 41): a server that lies about what it stored.
@Suite(.enabled(if: TestServers.required, "the test servers are not installed: run scripts/test-servers.sh"))
struct UploadBadDayTests {
    typealias Board = UploadTests.Board

    /// The upload settings for `server` (it takes any key).
    static func settings(
        _ server: LyingS3Server, in directory: TemporaryDirectory, extra: String = ""
    ) throws
        -> Settings.Upload
    {
        try "AKLYING\n".write(toFile: directory.file("access"), atomically: true, encoding: .utf8)
        try "lying-secret\n".write(toFile: directory.file("secret"), atomically: true, encoding: .utf8)
        return try UploadTests.settings(
            """
            url = "s3://\(server.bucket)/fleet"; endpoint = "\(server.endpoint)"; region = "\(server.region)";
            access_key_file = "access"; secret_key_file = "secret"; \(extra)
            """, in: directory)
    }

    /// A server that ignores Content-MD5, keeps a corrupt copy and says so in its ETag (on
    /// header lines that end in CRLF, as every HTTP server's do): without `delete_local_after`
    /// the ETag is compared, and the upload fails.
    @Test func anETagThatDiffersFailsTheUpload() throws {
        let directory = try TemporaryDirectory("vigil-upload-etag")
        defer { directory.remove() }
        let server = try LyingS3Server(directory, lie: .corruptCopyTrueETag)
        let board = try Board(directory, clips: 1)
        let clip = board.clips[0]
        let log = MemoryLogSink()
        let sink = try board.sink(
            try Self.settings(server, in: directory, extra: "snapshots = false;"), log: log, longestWait: 1)
        #expect(UploadTests.wait(60) { sink.uploadCounts.failures >= 1 }, "\(log.written)")
        sink.finish()
        #expect(!log.written.contains { $0.contains("clip uploaded") }, "\(log.written)")
        let error = try #require(log.written(at: .error).first)
        #expect(error.contains("upload failed") && error.contains(clip) && error.contains("MD5"), "\(error)")
        #expect(board.queue.backlog == [clip])
        // No GET: without delete_local_after nothing is read back.
        #expect(!server.requests.contains { $0.hasPrefix("GET") }, "\(server.requests)")
    }
}
