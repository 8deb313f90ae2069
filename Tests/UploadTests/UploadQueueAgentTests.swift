import Agent
import AgentTestSupport
import Capture
import Configuration
import Foundation
import Logging
import Media
import Recorder
import Synchronization
import TestSupport
import Testing
import Upload

/// The upload queue in the agent (in process, its clips in memory): what a kill leaves of it,
/// and a queue grown large.
@Suite(.enabled(if: TestServers.required, "the test servers are not installed: run scripts/test-servers.sh"))
struct UploadQueueAgentTests {
    /// What a SIGKILL leaves when it comes right after a clip's line reached the events journal,
    /// before the sinks after the journal's heard of the clip: the storage as it is at that
    /// moment, copied by a sink that runs just after the journal's (and before the upload sink).
    final class KillAfterTheJournalLine: EventSink, Sendable {
        let storage: MemoryStorage
        private let copy = Mutex<(file: String, storage: MemoryStorage)?>(nil)

        init(_ storage: MemoryStorage) { self.storage = storage }

        var left: (file: String, storage: MemoryStorage)? { copy.withLock { $0 } }

        func handle(_ event: AgentEvent) {
            guard case .clipSaved(let saved) = event else { return }
            copy.withLock { $0 = $0 ?? (saved.record.file, storage.copy()) }
        }
    }

    /// The `upload` group for `endpoint`, with the key files (`S3Server`'s keys) in `directory`.
    static func upload(_ endpoint: String, in directory: TemporaryDirectory) throws -> String {
        try "AKVIGILTEST\n".write(toFile: directory.file("access-key"), atomically: true, encoding: .utf8)
        try "vigil-test-secret\n".write(toFile: directory.file("secret-key"), atomically: true, encoding: .utf8)
        return """
            upload = {
              url = "s3://clips/fleet"; endpoint = "\(endpoint)"; region = "us-east-1";
              access_key_file = "\(directory.file("access-key"))"; secret_key_file = "\(directory.file("secret-key"))";
            };
            """
    }

    /// The agent in process on `storage` with an upload sink (and `before` it, after the
    /// journal's), the synthetic camera in real time.
    static func agent(
        _ storage: MemoryStorage, upload: String, before: [any EventSink] = []
    ) throws -> AgentHarness {
        try AgentHarness(
            config: testConfig(extra: upload), storage: storage,
            openSource: { camera throws(CaptureError) in
                try SourceOpener.open(
                    camera.device, width: camera.width, height: camera.height, fps: camera.fps,
                    purpose: .recording(realtime: true))
            },
            sinks: { settings, _, log in
                before + [
                    try UploadSink(
                        settings: settings.upload, camera: settings.camera.name, log: log, timeZone: TimeZone.gmt)
                ]
            })
    }

    /// The agent killed the moment its first clip's journal line is written (what it leaves is
    /// copied then), and started again on what it left: the clip is uploaded.
    @Test func aClipSavedRightBeforeAKillIsUploadedAfterTheRestart() throws {
        let directory = try TemporaryDirectory("vigil-upload-kill-saved")
        defer { directory.remove() }
        let server = try S3Server(directory)
        // The first run's server does not answer (nothing is sent before the kill).
        let (unanswered, nobody) = try #require(loopbackSocket(listening: false))
        defer { close(unanswered) }
        let storage = MemoryStorage()
        let kill = KillAfterTheJournalLine(storage)
        let first = try Self.agent(
            storage, upload: try Self.upload("http://127.0.0.1:\(nobody)", in: directory), before: [kill])
        first.start()
        #expect(waitUntil(timeout: AgentHarness.patience) { kill.left != nil }, "\(first.output)")
        _ = first.stopAndWait()
        let (file, left) = try #require(kill.left)
        #expect(
            try EventsJournal(storage: left).records().records.map(\.file).contains(file),
            "the clip's line is in the journal it left")

        let second = try Self.agent(left, upload: try Self.upload(server.endpoint, in: directory))
        second.start()
        let arrived = waitUntil(timeout: 120) { (try? server.object("fleet/yard/" + file)) != nil }
        _ = second.stopAndWait()
        #expect(arrived, "the clip saved before the kill was not uploaded after it:\n\(second.output)")
        #expect(try server.object("fleet/yard/" + file) == Data(left.contents(file) ?? []))
    }

    /// A queue of 60 MB (a board that uploaded for years, never restarted): recording starts and
    /// goes on as without it — the file is read once, on the upload thread, never by retention
    /// — and it is written anew, small.
    @Test func aQueueOf60MBIsReadOnceOffTheRecordingPath() throws {
        let directory = try TemporaryDirectory("vigil-upload-large-queue")
        defer { directory.remove() }
        let (unanswered, nobody) = try #require(loopbackSocket(listening: false))
        defer { close(unanswered) }
        let storage = MemoryStorage()
        storage.put(UploadJournal.name, UploadQueues.large(bytes: 60 << 20, camera: "yard"))
        let agent = try Self.agent(storage, upload: try Self.upload("http://127.0.0.1:\(nobody)", in: directory))
        agent.start()
        // Two clips, and the queue read and written anew by the upload thread (on a busy machine
        // it may take longer to read than the clips to record: the stop must not come first).
        let saved = waitUntil(timeout: AgentHarness.patience) {
            agent.events.clipsSaved.count >= 2 && (storage.contents(UploadJournal.name)?.count ?? 0) < 1 << 20
        }
        _ = agent.stopAndWait()
        #expect(saved, "\(agent.output)")
        #expect(
            storage.reads(of: UploadJournal.name) == 1,
            "read \(storage.reads(of: UploadJournal.name)) times: once, by the upload thread")
        // Each clip starts its pre-roll before its trigger: nothing waited for the queue.
        let records = try EventsJournal(storage: storage).records().records
        #expect(records.count >= 2)
        for record in records {
            let start = try #require(ClipRecord.date(fromTimestamp: record.start))
            let trigger = try #require(record.triggerTime.flatMap(ClipRecord.date(fromTimestamp:)))
            #expect(trigger.timeIntervalSince(start) > 0.5, "\(record.file) starts at its trigger: \(record)")
        }
        // Written anew: what it must hold, not every line it ever had.
        #expect((storage.contents(UploadJournal.name)?.count ?? 0) < 1 << 20)
    }
}
