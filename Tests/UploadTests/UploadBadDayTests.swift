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

/// The upload queue's bad days (issue 41): a server that lies about what it stored, a clip the
/// server refuses for ever.
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

    /// An agent's control whose writer keeps what it is asked to delete (and deletes nothing).
    final class Deleter: Sendable {
        let control = AgentControl()
        private let asked = Mutex<[String]>([])
        var files: [String] { asked.withLock { $0 } }

        init() {
            control.attachDeleter { [weak self] file, _ in
                self?.asked.withLock { $0.append(file) }
                return true
            }
        }
    }

    /// A server that ignores Content-MD5 and keeps a corrupt copy, or keeps nothing, and answers
    /// HEAD with the size and MD5 of what was sent: with `delete_local_after`, the copy is read
    /// back and its digest compared, so the clip is never deleted on the board — an error line
    /// names it, and it stays queued.
    @Test(arguments: [LyingS3Server.Lie.corruptCopy, .nothingStored])
    func aServerThatLiesAboutItsCopyNeverGetsAClipDeleted(lie: LyingS3Server.Lie) throws {
        let directory = try TemporaryDirectory("vigil-upload-lie")
        defer { directory.remove() }
        let server = try LyingS3Server(directory, lie: lie)
        let board = try Board(directory, clips: 1)
        let clip = board.clips[0]
        let deleter = Deleter()
        let log = MemoryLogSink()
        let sink = try board.sink(
            try Self.settings(server, in: directory, extra: "delete_local_after = 0; snapshots = false;"), log: log,
            context: SinkContext(requests: deleter.control), longestWait: 1)
        #expect(waitUntil(timeout: 60) { sink.uploadCounts.failures >= 2 }, "\(log.written)")
        sink.finish()
        #expect(deleter.files.isEmpty, "a clip the server lied about was handed over to be deleted")
        #expect(FileManager.default.fileExists(atPath: board.storage.path(clip)))
        #expect(!log.written.contains { $0.contains("clip uploaded") }, "\(log.written)")
        #expect(board.queue.backlog == [clip], "it stays queued")
        let errors = log.written(at: .error)
        #expect(!errors.isEmpty && errors.allSatisfy { $0.contains(clip) && $0.contains("upload failed") }, "\(errors)")
        #expect(errors.contains { $0.contains("read back") }, "the error says the copy was read back: \(errors)")
        // The copy was asked for: read back (GET) after each PUT.
        #expect(server.requests.contains { $0.hasPrefix("GET clips/fleet/shed/\(clip)") }, "\(server.requests)")
    }

    /// The same server telling the truth: the copy read back matches, and only then is the clip
    /// handed over to be deleted.
    @Test func aCopyReadBackWholeGetsTheClipDeleted() throws {
        let directory = try TemporaryDirectory("vigil-upload-readback")
        defer { directory.remove() }
        let server = try LyingS3Server(directory)
        let board = try Board(directory, clips: 2)
        let deleter = Deleter()
        let log = MemoryLogSink()
        let sink = try board.sink(
            try Self.settings(server, in: directory, extra: "delete_local_after = 0;"), log: log,
            context: SinkContext(requests: deleter.control))
        #expect(waitUntil(timeout: 60) { deleter.files.count == 2 }, "\(log.written)")
        sink.finish()
        #expect(deleter.files == board.clips)
        for clip in board.clips {
            #expect(try server.object("fleet/shed/" + clip) == board.bytes(clip))
            let requests = server.requests.filter { $0.contains(" clips/fleet/shed/\(clip) ") }
            #expect(requests.map { $0.split(separator: " ")[0] } == ["PUT", "HEAD", "GET"], "\(requests)")
        }
        #expect(log.written(at: .error).isEmpty, "\(log.written(at: .error))")
    }

    /// Read back over SFTP (a download) and WebDAV (a GET), the copies match and the clips
    /// are handed over to be deleted.
    @Test func copiesReadBackOverSFTPAndWebDAVGetTheClipsDeleted() throws {
        let directory = try TemporaryDirectory("vigil-upload-readback-files")
        defer { directory.remove() }
        let dav = try WebDAVServer(directory)
        try (dav.password + "\n").write(toFile: directory.file("password"), atomically: true, encoding: .utf8)
        var destinations = [
            "url = \"http://\(dav.user)@127.0.0.1:\(dav.port)/dav/fleet\"; password_file = \"password\";"
        ]
        let sftp = getuid() == 0 ? try SFTPServer(directory) : nil
        if let sftp {
            destinations.append(
                "url = \"sftp://\(sftp.user)@127.0.0.1:\(sftp.port)\(sftp.root)/fleet\"; ssh_key_file = \"\(sftp.keyFile)\"; known_hosts_file = \"\(sftp.knownHosts)\";"
            )
        }
        for destination in destinations {
            let boardDirectory = try TemporaryDirectory("vigil-upload-readback-board")
            defer { boardDirectory.remove() }
            let board = try Board(boardDirectory, clips: 2)
            let deleter = Deleter()
            let log = MemoryLogSink()
            let sink = try board.sink(
                try UploadTests.settings(destination + " delete_local_after = 0;", in: directory), log: log,
                context: SinkContext(requests: deleter.control))
            #expect(waitUntil(timeout: 60) { deleter.files.count == 2 }, "\(destination): \(log.written)")
            sink.finish()
            #expect(deleter.files == board.clips, "\(destination)")
            #expect(board.lines.filter { $0.uploaded != nil }.map(\.readBack) == [true, true], "\(destination)")
            #expect(log.written(at: .error).isEmpty, "\(log.written(at: .error))")
        }
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
        #expect(waitUntil(timeout: 60) { sink.uploadCounts.failures >= 1 }, "\(log.written)")
        sink.finish()
        #expect(!log.written.contains { $0.contains("clip uploaded") }, "\(log.written)")
        let error = try #require(log.written(at: .error).first)
        #expect(error.contains("upload failed") && error.contains(clip) && error.contains("MD5"), "\(error)")
        #expect(board.queue.backlog == [clip])
        // No GET: without delete_local_after nothing is read back.
        #expect(!server.requests.contains { $0.hasPrefix("GET") }, "\(server.requests)")
    }

    /// One clip the server refuses for ever (403 or 500 for its key, every other key taken):
    /// the others are sent meanwhile, in order; the refused one is set aside after five tries
    /// that each failed right after another upload worked — one error line naming it and the
    /// server's answer — and leaves the queue (a `set_aside` line).
    @Test(arguments: [403, 500])
    func aClipTheServerRefusesForEverIsSetAsideAndTheOthersGoOn(status: Int) throws {
        let directory = try TemporaryDirectory("vigil-upload-refused")
        defer { directory.remove() }
        let board = try Board(directory, clips: 15)
        let bad = board.clips[2]
        let server = try LyingS3Server(directory, refusing: (key: bad, status: status))
        for clip in board.clips { try board.storage.enter(board.record(clip)) }
        let log = MemoryLogSink()
        let sink = try board.sink(try Self.settings(server, in: directory), log: log, longestWait: 2)
        let others = board.clips.filter { $0 != bad }
        #expect(
            waitUntil(timeout: 90) { sink.uploadCounts.uploaded == others.count && sink.backlog.isEmpty },
            "\(sink.uploadCounts) \(log.written)")
        sink.finish()
        let lines = board.lines
        #expect(lines.compactMap(\.uploaded) == others, "in order, each once")
        for clip in others {
            #expect(try server.object("fleet/shed/" + clip) == board.bytes(clip), "\(clip)")
        }
        #expect(server.object("fleet/shed/" + bad) == nil)
        // Its picture is not refused: it waits with its clip, and is set aside with it.
        #expect(server.object("fleet/shed/" + ClipNaming.snapshotPath(of: bad)) == nil)
        let setAside = lines.filter { $0.setAside != nil }
        #expect(setAside.count == 1 && setAside.first?.setAside == bad && setAside.first?.tries == 5, "\(setAside)")
        #expect(setAside.first?.reason?.contains("\(status)") == true, "\(setAside)")
        #expect(board.queue.backlog.isEmpty)
        let refusals = server.requests.filter { $0.hasPrefix("PUT clips/fleet/shed/\(bad) ") }
        #expect(refusals.count == 5, "tried five times: \(refusals)")
        let errors = log.written(at: .error)
        let aside = errors.filter { $0.contains("set aside") }
        #expect(aside.count == 1 && aside.first?.contains(bad) == true, "\(errors)")
        #expect(aside.first?.contains("\(status)") == true, "the server's answer: \(aside)")
        #expect(aside.first?.contains("restart") == true, "what to do: \(aside)")
        // The catalogue says it failed, with the server's answer (what the page and the API show).
        let catalogue = try board.storage.openCatalogue()
        guard case .failed(let reason)? = try catalogue.entry(bad)?.upload else {
            Issue.record("not failed in the catalogue: \(String(describing: try catalogue.entry(bad)))")
            return
        }
        #expect(reason.contains("\(status)"), "\(reason)")

        // The server put right, the agent restarted: the clip set aside is queued again and sent.
        let fixed = try LyingS3Server(directory)
        let again = try board.sink(try Self.settings(fixed, in: directory), log: log, queue: false)
        #expect(waitUntil(timeout: 60) { again.uploadCounts.uploaded == 1 }, "\(log.written)")
        again.finish()
        #expect(try fixed.object("fleet/shed/" + bad) == board.bytes(bad))
        #expect(log.written.contains { $0.contains("clips set aside in an earlier run are tried again") })
        #expect(try catalogue.entry(bad)?.upload == .uploaded(url: "s3://clips/fleet/shed/" + bad))
        #expect(board.queue.backlog.isEmpty && board.queue.setAside.isEmpty)
    }

    /// A queue that is not a file — a named pipe, a symbolic link, a directory with its name —
    /// is moved aside as the events journal is, with a warning, and a new queue started: what
    /// the events journal has on the board is queued again, and uploads go on. (One server for
    /// the three, each board under a prefix of its own.)
    @Test func aQueueThatIsNotAFileIsMovedAsideAndUploadsGoOn() throws {
        let directory = try TemporaryDirectory("vigil-upload-not-a-file")
        defer { directory.remove() }
        let server = try S3Server(directory)
        _ = try UploadTests.s3Settings(server, in: directory)
        let elsewhere = directory.file("elsewhere.jsonl")
        try "someone else's\n".write(toFile: elsewhere, atomically: true, encoding: .utf8)
        for (prefix, kind, format) in [
            ("pipe", "a named pipe", S_IFIFO), ("link", "a symbolic link", S_IFLNK),
            ("directory", "a directory", S_IFDIR),
        ] {
            let boardDirectory = try TemporaryDirectory("vigil-upload-not-a-file-board")
            defer { boardDirectory.remove() }
            let board = try Board(boardDirectory, clips: 2)
            // The first clip was saved by an earlier run, the queue that named it lost.
            guard case .clipSaved(let earlier) = board.saved(board.clips[0]) else { return }
            try EventsJournal(storage: board.storage).append(earlier.record)
            let queue = board.storage.path("uploads.jsonl")
            switch format {
            case S_IFIFO: #expect(mkfifo(queue, 0o644) == 0)
            case S_IFLNK: try FileManager.default.createSymbolicLink(atPath: queue, withDestinationPath: elsewhere)
            default: try FileManager.default.createDirectory(atPath: queue, withIntermediateDirectories: false)
            }
            let log = MemoryLogSink()
            let settings = try UploadTests.settings(
                """
                url = "s3://\(server.bucket)/\(prefix)"; endpoint = "\(server.endpoint)"; region = "\(server.region)";
                access_key_file = "access"; secret_key_file = "secret";
                """, in: directory)
            let sink = try board.sink(settings, log: log, queue: false)
            sink.handle(board.saved(board.clips[1]))
            #expect(waitUntil(timeout: 60) { sink.uploadCounts.uploaded == 2 }, "\(kind): \(log.written)")
            sink.finish()
            for clip in board.clips {
                #expect(try server.object("\(prefix)/shed/" + clip) == board.bytes(clip), "\(kind): \(clip)")
            }
            let warning = log.written(at: .warning).filter { $0.contains("moved aside") }
            #expect(warning.count == 1 && warning.first?.contains(queue) == true, "\(kind): \(log.written)")
            // What was there is kept as it was, under another name.
            var aside = stat()
            #expect(lstat(queue + ".not-a-file", &aside) == 0)
            #expect(aside.st_mode & S_IFMT == format, "\(kind): \(aside.st_mode)")
            #expect(
                try FileManager.default.attributesOfItem(atPath: queue)[.type] as? FileAttributeType == .typeRegular)
            // Oldest first: the clip queued again before the one saved since.
            #expect(board.lines.compactMap(\.uploaded) == board.clips, "\(kind)")
        }
        #expect(try String(contentsOfFile: elsewhere, encoding: .utf8) == "someone else's\n")
    }

    /// A queue that grows while the agent runs (clips queued and deleted on the board, the
    /// server out of reach) is written anew once it holds four times what it must (and a
    /// thousand lines), not only when the agent starts.
    @Test func theQueueIsWrittenAnewWhileTheAgentRuns() throws {
        let directory = try TemporaryDirectory("vigil-upload-compact")
        defer { directory.remove() }
        let (unanswered, nobody) = try #require(loopbackSocket(listening: false))
        defer { close(unanswered) }
        let board = try Board(directory, clips: 1)
        try "AK\n".write(toFile: directory.file("access"), atomically: true, encoding: .utf8)
        try "SK\n".write(toFile: directory.file("secret"), atomically: true, encoding: .utf8)
        let settings = try UploadTests.settings(
            """
            url = "s3://clips/fleet"; endpoint = "http://127.0.0.1:\(nobody)"; access_key_file = "access";
            secret_key_file = "secret";
            """, in: directory)
        let log = MemoryLogSink()
        let sink = try board.sink(settings, log: log, longestWait: 600)
        for index in 0..<700 {
            let file = "2026-12-05/shed-\(index).mov"
            sink.handle(board.saved(file))
            sink.handle(
                .clipsDeleted(
                    ClipsDeleted(
                        deletions: [
                            Deletion(
                                clip: StoredFile(relativePath: file, size: 1, modified: Date()), reason: .diskFull,
                                notUploaded: true)
                        ], storage: board.storage)))
        }
        // 1401 lines were written: it was written anew at least once past a thousand.
        #expect(waitUntil(timeout: 60) { board.lines.count <= 1001 }, "\(board.lines.count) lines")
        sink.finish()
        // What it must hold: the clip that waits.
        #expect(board.queue.backlog == board.clips)
    }
}

extension UploadTests {
    /// The lines of the queue in `storage`, as written.
    static func queueLines(in storage: any ClipStorage) -> [UploadRecord] {
        UploadJournal.records(in: ((try? storage.read(UploadJournal.name)) ?? nil) ?? [])
    }
}

extension UploadTests.Board {
    /// The queue's lines, as written.
    var lines: [UploadRecord] { UploadTests.queueLines(in: storage) }
}
