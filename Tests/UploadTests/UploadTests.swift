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

/// Clips copied off the board to real servers on loopback — SeaweedFS (S3), OpenSSH (SFTP),
/// wsgidav (WebDAV) — by the agent's upload sink, fed the events the agent sends it.
@Suite(.enabled(if: TestServers.required, "the test servers are not installed: run scripts/test-servers.sh"))
struct UploadTests {
    /// The storage directory of a board with `count` saved clips (each with its picture), and
    /// the sink's events for them.
    struct Board {
        let directory: TemporaryDirectory
        let storage: DiskStorage
        var clips: [String] = []

        init(_ directory: TemporaryDirectory, clips count: Int, gops: Int = 2) throws {
            self.directory = directory
            storage = DiskStorage(root: directory.file("clips"))
            try storage.createRoot()
            for index in 0..<count {
                let file = String(format: "2026-12-04/shed-20261204-12%04d.mov", index)
                try TestClips.write(
                    file, into: storage, created: Date(timeIntervalSince1970: 1_796_000_000), gops: gops)
                // A picture beside it (bytes that differ from clip to clip).
                try Data((0..<2000).map { UInt8(truncatingIfNeeded: $0 * 7 + index) }).write(
                    to: URL(fileURLWithPath: storage.path(ClipNaming.snapshotPath(of: file))))
                clips.append(file)
            }
        }

        func saved(_ file: String) -> AgentEvent {
            .clipSaved(ClipSaved(record: record(file), path: storage.path(file), origin: .closed, storage: storage))
        }

        /// The journal record of a clip of this board, as the agent writes it when it is saved.
        func record(_ file: String) -> ClipRecord {
            let size = (try? FileManager.default.attributesOfItem(atPath: storage.path(file))[.size] as? Int) ?? 0
            return ClipRecord(
                file: file, camera: "shed", start: "2026-12-04T12:00:00.000+00:00",
                end: "2026-12-04T12:00:01.000+00:00",
                cause: .motion, triggerTime: nil, triggerSourceSeconds: nil, preRollSeconds: nil, durationSeconds: 0.8,
                frames: 20, audioFrames: 0, bytes: UInt64(size), peakScore: nil, part: 1)
        }

        /// An upload sink as `vigil run` makes it, started (with `context`, as an agent's run
        /// hands it) on this board's storage, its clips saved one after the other (`queue`).
        func sink(
            _ settings: Settings.Upload, log: MemoryLogSink, level: LogLevel = .info,
            context: SinkContext = SinkContext(),
            stallTimeout: Int = 60, longestWait: Double = 4, queue: Bool = true
        ) throws -> UploadSink {
            let sink = try UploadSink(
                settings: settings, camera: "shed", log: Logger(level: level, sink: log), timeZone: TimeZone.gmt,
                connectTimeout: min(20, stallTimeout), stallTimeout: stallTimeout, longestWait: longestWait)
            sink.start(context)
            sink.handle(.storageReady(storage))
            if queue { for clip in clips { sink.handle(saved(clip)) } }
            return sink
        }

        func bytes(_ file: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: storage.path(file))) }

        var queue: UploadJournal {
            (try? UploadJournal.read(from: storage)) ?? UploadJournal()
        }
    }

    /// The upload settings of `lines` (the `upload` group's), loaded as `vigil run` loads them.
    static func settings(_ lines: String, in directory: TemporaryDirectory) throws -> Settings.Upload {
        let path = directory.file("vigil.conf")
        try "camera = { name = \"shed\"; };\nupload = {\n\(lines)\n};\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        return try Settings.load(path: path).upload
    }

    static func s3Settings(
        _ server: S3Server, in directory: TemporaryDirectory, secret: String? = nil, endpoint: String? = nil,
        extra: String = ""
    )
        throws -> Settings.Upload
    {
        try (server.accessKey + "\n").write(toFile: directory.file("access"), atomically: true, encoding: .utf8)
        try ((secret ?? server.secretKey) + "\n").write(
            toFile: directory.file("secret"), atomically: true, encoding: .utf8)
        return try settings(
            """
            url = "s3://\(server.bucket)/fleet"; endpoint = "\(endpoint ?? server.endpoint)"; region = "\(server.region)";
            access_key_file = "access"; secret_key_file = "secret"; \(extra)
            """, in: directory)
    }

    /// The nice value of each of this process's threads called `name` (/proc/self/task).
    static func niceOfThreads(named name: String) -> [Int] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task in
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
            guard comm.trimmingCharacters(in: .whitespacesAndNewlines) == name,
                let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            // After "pid (comm)": state is field 3, nice field 19.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 16 ? Int(fields[16]) : nil
        }
    }

    /// Every `queued` file got exactly one `uploaded` line, in the order they were queued.
    static func expectUploadedOnceInOrder(
        _ board: Board, _ clips: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let queued = board.lines.compactMap(\.queued)
        let uploaded = board.lines.compactMap(\.uploaded)
        #expect(queued == clips, sourceLocation: sourceLocation)
        #expect(uploaded == clips, "uploaded once each, in order: \(uploaded)", sourceLocation: sourceLocation)
        #expect(board.queue.backlog.isEmpty, sourceLocation: sourceLocation)
    }

    @Test func clipsArriveInAnS3BucketWithTheirBytesAndPictures() throws {
        let directory = try TemporaryDirectory("vigil-upload-s3")
        defer { directory.remove() }
        let server = try S3Server(directory)
        let board = try Board(directory, clips: 3)
        let log = MemoryLogSink()
        // What the agent's sinks are told (MQTT's `uploaded` event, `hooks.on_upload`).
        let told = Mutex<[ClipUploaded]>([])
        let context = SinkContext(announce: { event in
            if case .clipUploaded(let uploaded) = event { told.withLock { $0.append(uploaded) } }
        })
        let sink = try board.sink(try Self.s3Settings(server, in: directory), log: log, context: context)
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.uploaded == 3 }, "\(log.written)")
        // The upload thread yields its CPU to recording (nice 10; its I/O priority too).
        let nice = Self.niceOfThreads(named: "upload")
        #expect(!nice.isEmpty && nice.allSatisfy { $0 == 10 }, "\(nice)")
        sink.finish()

        for clip in board.clips {
            let key = "fleet/shed/" + clip
            let object = try #require(try server.object(key), "\(key) is not in the bucket")
            #expect(try object == board.bytes(clip), "\(key) differs from the clip")
            let picture = ClipNaming.snapshotPath(of: clip)
            #expect(try server.object("fleet/shed/" + picture) == (try board.bytes(picture)))
            // The object is the movie: the independent readers play it.
            let copy = directory.file("downloaded-\(clip.split(separator: "/").last!)")
            try object.write(to: URL(fileURLWithPath: copy))
            try expectPlayable(copy, "the uploaded \(key)")
        }
        // Nothing else: no temporary or partial object.
        #expect(
            try server.keys().sorted()
                == board.clips.flatMap { ["fleet/shed/" + $0, "fleet/shed/" + ClipNaming.snapshotPath(of: $0)] }
                .sorted())
        Self.expectUploadedOnceInOrder(board, board.clips)
        let uploads = board.lines.compactMap { $0.uploaded == nil ? nil : $0 }
        #expect(uploads.map(\.url) == board.clips.map { "s3://clips/fleet/shed/" + $0 })
        #expect(uploads.map(\.bytes) == board.clips.map { UInt64(try! board.bytes($0).count) })
        #expect(logLines(log.written.joined(separator: "\n"), "clip uploaded").count == 3)
        #expect(log.written(at: .error).isEmpty, "\(log.written(at: .error))")
        // What /metrics serves.
        let bytes = try board.clips.reduce(Int64(0)) {
            try $0 + Int64(board.bytes($1).count + board.bytes(ClipNaming.snapshotPath(of: $1)).count)
        }
        #expect(SinkContext(uploads: sink).uploads == UploadFigures(waiting: 0, uploaded: 3, bytes: bytes, failures: 0))
        let events = told.withLock { $0 }
        #expect(events.map(\.file) == board.clips)
        #expect(events.map(\.url) == uploads.map(\.url) && events.last?.waiting == 0)
        #expect(events.map(\.path) == board.clips.map { board.storage.path($0) })
        #expect(events.allSatisfy { $0.camera == "shed" && $0.bytes > 0 && !$0.at.isEmpty })
    }

    @Test func aWrongSecretIsAClearErrorAndTheClipWaits() throws {
        let directory = try TemporaryDirectory("vigil-upload-s3-secret")
        defer { directory.remove() }
        let server = try S3Server(directory)
        let board = try Board(directory, clips: 1)
        let log = MemoryLogSink()
        let sink = try board.sink(
            try Self.s3Settings(server, in: directory, secret: "not-the-secret"), log: log, queue: false)
        sink.handle(board.saved(board.clips[0]))
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.failures >= 2 }, "\(log.written)")
        sink.finish()
        let errors = log.written(at: .error)
        let first = try #require(errors.first, "\(log.written)")
        #expect(first.contains("upload failed") && first.contains("SignatureDoesNotMatch"), "\(first)")
        #expect(first.contains("upload.secret_key_file"), "the error names the setting to check: \(first)")
        // Nothing lost: the clip is on the board and still queued; nothing in the bucket.
        #expect(FileManager.default.fileExists(atPath: board.storage.path(board.clips[0])))
        #expect(board.queue.backlog == board.clips)
        #expect(try server.keys().isEmpty)

        // Put right (the agent restarted with the right secret), it goes up from the queue.
        let fixed = try board.sink(try Self.s3Settings(server, in: directory), log: log, queue: false)
        #expect(waitUntil(timeout: 120) { fixed.uploadCounts.uploaded == 1 }, "\(log.written)")
        fixed.finish()
        #expect(try server.object("fleet/shed/" + board.clips[0]) == (try board.bytes(board.clips[0])))
    }

    /// The server killed while a clip is being sent (slowly: 32 kbit/s), then started again:
    /// the clip is sent again from its start and arrives once, whole.
    @Test func aServerKilledMidUploadGetsTheClipWholeWhenItIsBack() throws {
        let directory = try TemporaryDirectory("vigil-upload-s3-kill")
        defer { directory.remove() }
        let server = try S3Server(directory)
        let board = try Board(directory, clips: 2, gops: 4)
        let log = MemoryLogSink()
        let sink = try board.sink(try Self.s3Settings(server, in: directory, extra: "bandwidth_kbit = 32;"), log: log)
        usleep(1_000_000)
        #expect(sink.uploadCounts.uploaded == 0, "the first clip is still being sent")
        server.stop()
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.failures >= 1 }, "\(log.written)")
        try server.restart()
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.uploaded == 2 }, "\(log.written)")
        sink.finish()
        for clip in board.clips {
            #expect(try server.object("fleet/shed/" + clip) == (try board.bytes(clip)), "\(clip)")
        }
        #expect(try server.keys().count == 4)
        Self.expectUploadedOnceInOrder(board, board.clips)
        #expect(log.written.contains { $0.contains("uploads work again") })
    }

    /// The network cut mid-upload (a relay between the board and the server drops every
    /// connection and refuses new ones), then mended: each clip arrives once, whole, in order,
    /// and nothing but whole clips is ever under their names.
    @Test func aNetworkCutMidUploadGetsEachClipOnceWhenItIsBack() throws {
        let directory = try TemporaryDirectory("vigil-upload-s3-cut")
        defer { directory.remove() }
        let server = try S3Server(directory)
        let relay = try NetworkRelay(to: server.port)
        defer { relay.stop() }
        relay.cut(afterBytesToServer: 3000)
        let board = try Board(directory, clips: 2, gops: 4)
        let size = try board.bytes(board.clips[0]).count
        let log = MemoryLogSink()
        let sink = try board.sink(
            try Self.s3Settings(
                server, in: directory, endpoint: "http://127.0.0.1:\(relay.port)"),
            log: log)
        // The relay cuts itself 3000 bytes in: inside the first clip's body (its PUT's headers
        // are well under that, and the clip is larger).
        #expect(size > 10_000)
        #expect(waitUntil(timeout: 120) { relay.isCutNow }, "\(log.written)")
        #expect(relay.bytesToServer == 3000)
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.failures >= 2 }, "tried again while cut: \(log.written)")
        #expect(sink.uploadCounts.uploaded == 0)
        let whileCut = try server.keys()
        #expect(whileCut.isEmpty, "nothing on the server while the network is cut: \(whileCut)")
        relay.mend()
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.uploaded == 2 }, "\(log.written)")
        sink.finish()
        for clip in board.clips {
            #expect(try server.object("fleet/shed/" + clip) == (try board.bytes(clip)), "\(clip)")
        }
        #expect(try server.keys().count == 4, "the clips and their pictures, nothing else")
        Self.expectUploadedOnceInOrder(board, board.clips)
        let failed = log.written(at: .error).filter { $0.contains("upload failed") }
        // The first clip, being sent when the network went, and tried again while it was cut.
        #expect(!failed.isEmpty && failed.allSatisfy { $0.contains(board.clips[0]) }, "\(failed)")
        #expect(log.written.contains { $0.contains("uploads work again") })
    }

    /// Retention deletes the clip being sent (a full disk): the upload is given up at once and
    /// the file closed — an open file keeps its room — with no failure counted; the next clip
    /// goes on, and nothing of the deleted one is on the server.
    @Test func aClipDeletedWhileItIsSentIsGivenUpAndItsRoomFreed() throws {
        let directory = try TemporaryDirectory("vigil-upload-s3-deleted")
        defer { directory.remove() }
        let server = try S3Server(directory)
        let board = try Board(directory, clips: 2, gops: 4)
        let log = MemoryLogSink()
        let sink = try board.sink(
            try Self.s3Settings(server, in: directory, extra: "bandwidth_kbit = 64;"), log: log, level: .debug)
        let first = board.clips[0]
        // This board's file (other tests' boards, run meanwhile, have clips of the same names).
        let path = board.storage.path(first)
        // The first clip is being sent (8 KB a second: 40 KB take five).
        #expect(waitUntil(timeout: 30) { Self.openFiles().contains(path) }, "\(log.written)")
        let size = try board.bytes(first).count
        try FileManager.default.removeItem(atPath: board.storage.path(first))
        sink.handle(
            .clipsDeleted(
                ClipsDeleted(
                    deletions: [
                        Deletion(
                            clip: StoredFile(relativePath: first, size: Int64(size), modified: Date()),
                            reason: .diskFull, notUploaded: true)
                    ], storage: board.storage)))
        #expect(
            waitUntil(timeout: 10) { !Self.openFiles().contains(path) },
            "the deleted clip is still open: \(Self.openFiles())")
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.uploaded == 1 }, "\(log.written)")
        sink.finish()
        #expect(sink.uploadCounts.failures == 0, "\(log.written(at: .error))")
        #expect(try server.object("fleet/shed/" + first) == nil)
        #expect(try server.object("fleet/shed/" + board.clips[1]) == (try board.bytes(board.clips[1])))
        #expect(board.queue.backlog.isEmpty && board.queue.uploads.keys.sorted() == [board.clips[1]])
        #expect(log.written.contains { $0.contains("upload given up: the clip was deleted on the board") })
    }

    /// What this process has open (/proc/self/fd's links; a deleted file ends in " (deleted)").
    static func openFiles() -> [String] {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
            .map { $0.hasSuffix(" (deleted)") ? String($0.dropLast(10)) : $0 }
    }

    /// A server that stops answering (frozen) is given up after the stall timeout, and the
    /// clip is sent again once it answers.
    @Test func aServerThatHangsTimesOut() throws {
        let directory = try TemporaryDirectory("vigil-upload-s3-hang")
        defer { directory.remove() }
        let server = try S3Server(directory)
        let board = try Board(directory, clips: 1, gops: 4)
        let log = MemoryLogSink()
        let sink = try board.sink(
            try Self.s3Settings(server, in: directory, extra: "bandwidth_kbit = 64;"), log: log, stallTimeout: 3,
            queue: false)
        sink.handle(board.saved(board.clips[0]))
        usleep(1_000_000)
        server.pause()
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.failures >= 1 }, "\(log.written)")
        // SeaweedFS does not come back from being frozen (its parts lost one another): started anew.
        server.resume()
        try server.restart()
        #expect(waitUntil(timeout: 120) { sink.uploadCounts.uploaded == 1 }, "\(log.written)")
        sink.finish()
        let failure = try #require(log.written(at: .error).first)
        #expect(failure.contains("upload failed"), "\(failure)")
        #expect(try server.object("fleet/shed/" + board.clips[0]) == (try board.bytes(board.clips[0])))
        Self.expectUploadedOnceInOrder(board, board.clips)
    }

    /// 500 clips queued while the server is down drain in the order they were recorded once it
    /// is up, each once.
    @Test func aBacklogOf500ClipsDrainsInOrder() throws {
        let directory = try TemporaryDirectory("vigil-upload-s3-backlog")
        defer { directory.remove() }
        let server = try S3Server(directory)
        server.stop()
        var board = try Board(directory, clips: 1)
        // The same movie under 500 names (as a day of events would be), queued in that order.
        let movie = try board.bytes(board.clips[0])
        let original = board.clips[0]
        board.clips = (0..<500).map { String(format: "2026-12-%02d/shed-%04d.mov", 1 + $0 / 100, $0) }
        for clip in board.clips {
            try FileManager.default.createDirectory(
                atPath: (board.storage.path(clip) as NSString).deletingLastPathComponent,
                withIntermediateDirectories: true)
            try movie.write(to: URL(fileURLWithPath: board.storage.path(clip)))
        }
        try board.storage.delete(original)
        let log = MemoryLogSink()
        let sink = try board.sink(
            try Self.s3Settings(server, in: directory, extra: "snapshots = false;"), log: log, level: .warning)
        #expect(sink.backlog == board.clips)
        try server.restart()
        #expect(waitUntil(timeout: 300) { sink.uploadCounts.uploaded == 500 }, "\(sink.uploadCounts)")
        sink.finish()
        Self.expectUploadedOnceInOrder(board, board.clips)
        #expect(Set(try server.keys()) == Set(board.clips.map { "fleet/shed/" + $0 }))
    }

    /// The queue outlives the agent: what a stopped agent left queued is sent by the next.
    @Test func theQueueOutlivesTheAgent() throws {
        let directory = try TemporaryDirectory("vigil-upload-s3-restart")
        defer { directory.remove() }
        let server = try S3Server(directory)
        server.stop()
        let board = try Board(directory, clips: 2)
        let settings = try Self.s3Settings(server, in: directory)
        let log = MemoryLogSink()
        let first = try board.sink(settings, log: log)
        first.finish()
        #expect(board.queue.backlog == board.clips)
        try server.restart()
        let second = try board.sink(settings, log: log, queue: false)
        #expect(waitUntil(timeout: 120) { second.uploadCounts.uploaded == 2 }, "\(log.written)")
        second.finish()
        Self.expectUploadedOnceInOrder(board, board.clips)
        #expect(log.written.contains { $0.contains("uploading clips") && $0.contains("waiting=2") }, "\(log.written)")
    }

    /// `vigil run` itself: the synthetic camera's first event is recorded and sent to the
    /// bucket (slowly, 800 kbit/s); the agent is killed (SIGKILL) while it sends it, and run
    /// again: the clip arrives once, whole, and plays; `hooks.on_upload` runs for it, and a
    /// real broker (mosquitto) gets the `uploaded` event, the backlog in `stats` and Home
    /// Assistant's sensor for it.
    @Test func theAgentKilledMidUploadSendsTheClipOnceWhenItRunsAgain() throws {
        let directory = try TemporaryDirectory("vigil-upload-agent")
        defer { directory.remove() }
        let server = try S3Server(directory)
        _ = try Self.s3Settings(server, in: directory)
        let config = directory.file("agent.conf")
        let broker = try Broker(directory)
        // The hook writes its arguments and its VIGIL_* facts, then renames the file whole.
        let hook = directory.file("on-upload.sh")
        let facts = directory.file("upload-facts")
        try """
        #!/bin/sh
        { printf 'arg=%s\\n' "$@"; env | grep '^VIGIL_' | sort; } > "\(facts).part"
        mv "\(facts).part" "\(facts)"
        """.write(toFile: hook, atomically: true, encoding: .utf8)
        chmod(hook, 0o755)
        try """
        camera = { device = "synthetic"; width = 320; height = 240; fps = 10.0; name = "shed"; };
        recording = { pre_roll = 1.0; post_roll = 1.0; };
        storage = { path = "\(directory.file("clips"))"; };
        log = { stats_interval = 1; };
        hooks = { on_upload = "\(hook)"; };
        mqtt = { enabled = true; host = "127.0.0.1"; port = \(broker.port); };
        upload = {
          url = "s3://\(server.bucket)/fleet"; endpoint = "\(server.endpoint)"; region = "\(server.region)";
          access_key_file = "access"; secret_key_file = "secret"; bandwidth_kbit = 800;
        };
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let storage = DiskStorage(root: directory.file("clips"))
        let first = try AgentProcess(config: config)
        #expect(first.waitUntil(timeout: 120) { !journalRecords(in: storage.root).isEmpty }, "\(first.output)")
        let file = try #require(journalRecords(in: storage.root).first?.file, "\(first.output)")
        usleep(1_000_000)
        #expect(Self.queueLines(in: storage).allSatisfy { $0.uploaded == nil }, "the upload is still under way")
        first.kill(SIGKILL)
        _ = first.waitForExit(timeout: 30)
        let queue = (try? UploadJournal.read(from: storage)) ?? UploadJournal()
        #expect(queue.backlog.first == file, "the clip is queued: \(queue.compacted)")
        #expect(try server.object("fleet/shed/" + file) == nil, "no object under the clip's name before it is whole")

        let subscriber = try Subscriber(port: broker.port, topic: "#", in: directory)
        defer { subscriber.stop() }
        let second = try AgentProcess(config: config)
        let uploaded = second.waitUntil(timeout: 120) {
            Self.queueLines(in: storage).contains { $0.uploaded == file }
        }
        #expect(
            waitUntil(timeout: 60) { FileManager.default.fileExists(atPath: facts) }, "on_upload ran: \(second.output)")
        second.kill(SIGKILL)
        _ = second.waitForExit(timeout: 30)
        #expect(uploaded, "\(second.output)")
        #expect(
            logLines(second.output, "clip uploaded").contains { logValue($0, "file") == file }, "\(second.output)")
        let object = try #require(try server.object("fleet/shed/" + file))
        #expect(try object == Data(contentsOf: URL(fileURLWithPath: storage.path(file))))
        let copy = directory.file("downloaded.mov")
        try object.write(to: URL(fileURLWithPath: copy))
        try expectPlayable(copy, "the clip uploaded after the agent was killed")
        let after = Self.queueLines(in: storage)
        #expect(after.compactMap(\.uploaded).filter { $0 == file }.count == 1, "\(after)")
        #expect(second.output.contains("waiting=1"), "the second agent found the clip queued: \(second.output)")
        // `vigil clips` says it is off the board (a clip the second kill cut short waits).
        let clips = try runTool(builtExecutable("vigil"), ["clips", "--config", config])
        let row = clips.stdout.split(separator: "\n").first { $0.contains(file) }
        #expect(row?.contains("uploaded") == true, "\(clips.stdout)")
        #expect(clips.stdout.contains("1 uploaded to s3://clips/fleet, "), "\(clips.stdout)")
        // MQTT: the `uploaded` event, the backlog among the stats, Home Assistant's sensor.
        func json(_ message: Subscriber.Message) -> [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(message.bytes))) as? [String: Any] ?? [:]
        }
        #expect(
            subscriber.waitFor(timeout: 30) { $0.contains { json($0)["type"] as? String == "uploaded" } },
            "\(subscriber.messages.map(\.payload))")
        let event = try #require(subscriber.messages.map(json).first { $0["type"] as? String == "uploaded" })
        #expect(event["clip"] as? String == file && event["camera"] as? String == "shed")
        #expect(event["url"] as? String == "s3://\(server.bucket)/fleet/shed/" + file)
        #expect(event["bytes"] as? Int == object.count && event["waiting"] as? Int == 0, "\(event)")
        let stats = subscriber.messages.filter { $0.topic == "vigil/shed/stats" }.map(json)
        #expect(!stats.isEmpty && stats.allSatisfy { $0["upload_waiting"] is Int }, "\(stats)")
        let sensor = try #require(
            subscriber.messages.first { $0.topic == "homeassistant/sensor/vigil_shed/upload_waiting/config" })
        #expect(sensor.retained && json(sensor)["value_template"] as? String == "{{ value_json.upload_waiting }}")

        // The hook ran for it (told by the upload thread, through the agent's sinks).
        let hookOutput = try String(contentsOfFile: facts, encoding: .utf8)
        let url = "s3://\(server.bucket)/fleet/shed/" + file
        for line in [
            "arg=upload", "arg=" + storage.path(file), "arg=shed", "arg=" + url, "VIGIL_EVENT=upload",
            "VIGIL_FILE=" + storage.path(file), "VIGIL_URL=" + url, "VIGIL_BYTES=\(object.count)", "VIGIL_WAITING=0",
        ] {
            #expect(hookOutput.split(separator: "\n").contains { $0 == line }, "\(line) in \(hookOutput)")
        }
    }

    /// With `delete_local_after`, a clip is handed to the writer to delete only once its upload
    /// is verified, and the queue forgets it when the writer says it is gone.
    @Test func aClipIsDeletedOnTheBoardOnlyAfterItsUpload() throws {
        let directory = try TemporaryDirectory("vigil-upload-delete")
        defer { directory.remove() }
        let server = try S3Server(directory)
        server.stop()
        let board = try Board(directory, clips: 2)
        let control = AgentControl()
        let asked = Mutex<[String]>([])
        control.attachDeleter { file, by in
            #expect(by.contains("upload.delete_local_after"))
            // Deleted only once it is in the bucket.
            #expect((try? server.object("fleet/shed/" + file)) != nil, "\(file) deleted before its upload")
            asked.withLock { $0.append(file) }
            return true
        }
        let log = MemoryLogSink()
        let sink = try board.sink(
            try Self.s3Settings(server, in: directory, extra: "delete_local_after = 0;"), log: log,
            context: SinkContext(requests: control), longestWait: 2)
        usleep(1_500_000)
        #expect(asked.withLock { $0 }.isEmpty, "nothing is deleted while the server is down")
        try server.restart()
        #expect(waitUntil(timeout: 120) { asked.withLock { $0 }.count == 2 }, "\(log.written)")
        #expect(asked.withLock { $0 } == board.clips)
        // The writer deleted them and told the sinks: the queue forgets them.
        sink.handle(
            .clipsDeleted(
                ClipsDeleted(
                    deletions: board.clips.map {
                        Deletion(
                            clip: StoredFile(relativePath: $0, size: 0, modified: Date()),
                            reason: .asked(by: "upload.delete_local_after, after its upload"))
                    }, storage: board.storage)))
        sink.finish()
        #expect(board.queue.uploads.isEmpty && board.queue.backlog.isEmpty)
        #expect(board.lines.compactMap(\.deleted) == board.clips)
    }
}
