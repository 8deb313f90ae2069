import AgentTestSupport
import Configuration
import Foundation
import Media
import TestSupport
import Testing

@testable import Agent
@testable import MQTT
@testable import Recorder

/// docs/reference/events.md against the code: every key each output sends is in the document, and
/// every key the document lists is sent. A saved clip's keys are the journal's in all three
/// outputs, with the same values.
@Suite struct EventsDocumentTests {
    static let document = "docs/reference/events.md"

    /// The rows of the first table after the heading `heading` in the document, each its cells.
    static func rows(_ heading: String) throws -> [[String]] {
        let table = try #require(
            markdownTable(in: repositoryText(document), under: heading), "\(document) has no heading \(heading)")
        #expect(!table.isEmpty, "no table under \(heading)")
        return table
    }

    /// The keys of the first table after the heading `heading` in the document: its first column.
    static func documented(_ heading: String) throws -> [String] {
        try rows(heading).map { ($0.first ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "`")) }
    }

    static let journalHeading = "## The journal: `events.jsonl`"

    /// A record with every field known.
    static let record = ClipRecord(
        file: "2026-12-03/yard-20261203-101500.mov", camera: "yard", start: "2026-12-03T10:15:00.000+01:00",
        end: "2026-12-03T10:15:12.500+01:00", cause: .motion, triggerTime: "2026-12-03T10:15:04.000+01:00",
        triggerSourceSeconds: 64.25, preRollSeconds: 4, durationSeconds: 12.5, frames: 375, audioFrames: 600_000,
        bytes: 1_234_567, peakScore: 0.0612, part: 1, repaired: true, rebuilt: true,
        snapshot: "2026-12-03/yard-20261203-101500.jpg", damaged: true, agedFrom: "2026-12-03T10:15:00.000+01:00")

    static func object(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test func theJournalLineHasTheDocumentedKeys() throws {
        let line = try JSONEncoder().encode(Self.record)
        let keys = Set(try Self.object(Array(line)).keys)
        #expect(try keys == Set(Self.documented(Self.journalHeading)))
        #expect(Set(ClipRecord.keys) == keys)
    }

    @Test func mqttSendsTheDocumentedKeysAndTheJournalsValues() throws {
        let storage = MemoryStorage()
        var messages = MQTTMessages(
            base: "vigil/yard", camera: "yard", timeZone: TimeZone.gmt, linkBase: "https://camera.lan:8080")
        func payload(_ event: AgentEvent) throws -> [String: Any] {
            let sent = messages.messages(for: event).filter { $0.topic == "vigil/yard/event" }
            try #require(sent.count == 1, "\(event)")
            return try Self.object(sent[0].payload)
        }
        let trigger = Date(timeIntervalSince1970: 1_796_000_000)
        let start = try payload(
            .clipStarted(
                ClipStarted(
                    file: Self.record.file, path: storage.path(Self.record.file), camera: "yard", event: 1, part: 1,
                    trigger: trigger, preRoll: 4, score: 0.05, cause: .motion)))
        #expect(try Set(start.keys) == Set(Self.documented("### `event`: `start`")))
        let end = try payload(
            .motionEnded(MotionEnded(end: trigger.addingTimeInterval(10), peakScore: 0.0612, parts: 1)))
        #expect(try Set(end.keys) == Set(Self.documented("### `event`: `end`")))
        let saved = try payload(
            .clipSaved(
                ClipSaved(
                    record: Self.record, path: storage.path(Self.record.file), origin: .closed, storage: storage)))
        let extra = try Self.documented("### `event`: `saved`")
        #expect(try Set(saved.keys) == Set(extra + Self.documented(Self.journalHeading)))
        // The journal's values, under the journal's keys.
        let line = try Self.object(Array(try JSONEncoder().encode(Self.record)))
        for (key, value) in line {
            #expect((saved[key] as? NSObject) == (value as? NSObject), "saved.\(key)")
        }
        #expect(saved["clip"] as? String == Self.record.file && saved["type"] as? String == "saved")
        #expect(saved["event_type"] as? String == "saved" && start["event_type"] as? String == "start")
        #expect(saved["url"] as? String == "https://camera.lan:8080/clips/2026-12-03/yard-20261203-101500.mov")
        #expect(
            saved["snapshot_url"] as? String == "https://camera.lan:8080/clips/2026-12-03/yard-20261203-101500.jpg")
        let deleted = try payload(
            .clipsDeleted(
                ClipsDeleted(
                    deletions: [
                        Deletion(
                            clip: StoredFile(relativePath: Self.record.file, size: 1, modified: trigger),
                            reason: .olderThan(days: 30))
                    ], storage: storage)))
        #expect(try Set(deleted.keys) == Set(Self.documented("### `event`: `deleted`")))
        let uploaded = try payload(.clipUploaded(Self.uploaded(storage)))
        #expect(try Set(uploaded.keys) == Set(Self.documented("### `event`: `uploaded`")))
        #expect(uploaded["type"] as? String == "uploaded" && uploaded["event_type"] as? String == "uploaded")
        #expect(uploaded["clip"] as? String == Self.record.file && uploaded["bytes"] as? Int == 1_234_567)
        #expect(uploaded["url"] as? String == "s3://clips/yard/" + Self.record.file)
    }

    /// Home Assistant's entities in docs/reference/events.md: each one the discovery announces (the
    /// camera and the upload backlog included), in its order, with its component and the unit
    /// its config gives (`—`: none).
    @Test func homeAssistantsEntitiesAreTheDocumentedOnesWithTheirUnits() throws {
        let discovery = HomeAssistantDiscovery(
            prefix: "homeassistant", camera: "yard", version: "x",
            topics: MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: TimeZone.gmt), livePictures: true,
            uploads: true)
        let heading = "## Home Assistant's entities"
        #expect(try Self.documented(heading) == discovery.entities.map(\.object))
        for (row, entity) in zip(try Self.rows(heading), discovery.entities) {
            #expect(row.count == 4, "\(row)")
            #expect(row.dropFirst().first?.hasPrefix("`\(entity.component)`") == true, "\(row)")
            #expect(row.last == (entity.config.unitOfMeasurement.map { "`\($0)`" } ?? "—"), "\(row)")
        }
    }

    /// An upload of `record`'s clip, every fact known.
    static func uploaded(_ storage: MemoryStorage) -> ClipUploaded {
        ClipUploaded(
            file: record.file, path: storage.path(record.file), camera: "yard", url: "s3://clips/yard/" + record.file,
            bytes: 1_234_567, seconds: 2.5, at: "2026-12-03T10:16:00.000+01:00", waiting: 3)
    }

    @Test func theUploadHookGetsTheDocumentedFacts() throws {
        let storage = MemoryStorage()
        let (arguments, facts) = HookSink.upload(Self.uploaded(storage))
        #expect(try Set(facts.map(\.0) + ["event"]) == Set(Self.documented("### `on_upload`")))
        #expect(arguments == [storage.path(Self.record.file), "yard", "s3://clips/yard/" + Self.record.file])
        let byKey = Dictionary(uniqueKeysWithValues: facts)
        #expect(byKey["file"] == storage.path(Self.record.file) && byKey["bytes"] == "1234567")
        #expect(byKey["seconds"] == "2.5" && byKey["waiting"] == "3")
    }

    @Test func theHooksGetTheDocumentedFactsUnderTheJournalsKeys() throws {
        let storage = MemoryStorage()
        let started = HookSink.eventStart(
            ClipStarted(
                file: Self.record.file, path: storage.path(Self.record.file), camera: "yard", event: 1, part: 1,
                trigger: Date(timeIntervalSince1970: 1_796_000_000), preRoll: 4, score: 0.05, cause: .motion))
        #expect(
            try Set(started.facts.map(\.0) + ["event"]) == Set(Self.documented("### `on_event_start`")))
        #expect(started.arguments.count == 3)

        let saved = HookSink.clipSaved(
            ClipSaved(record: Self.record, path: storage.path(Self.record.file), origin: .closed, storage: storage))
        let keys = saved.facts.map(\.0)
        #expect(Set(keys).count == keys.count, "a fact given twice: \(keys)")
        #expect(
            try Set(keys + ["event"])
                == Set(Self.documented(Self.journalHeading) + (Self.documented("### `on_clip_saved`"))))
        // The journal's values, but `file` and `snapshot` as full paths.
        let facts = Dictionary(uniqueKeysWithValues: saved.facts)
        for (key, value) in Self.record.facts {
            switch key {
            case "file": #expect(facts[key] == storage.path(Self.record.file))
            case "snapshot": #expect(facts[key] == storage.path(Self.record.snapshot ?? ""))
            default: #expect(facts[key] == value, "\(key)")
            }
        }
        #expect(facts["duration_s"] == "12.5" && facts["duration"] == "12.5" && facts["peak_score"] == "0.0612")
    }
}

/// The stats line and MQTT's `stats` against docs/reference/events.md: the same keys with the same
/// meaning, `_total` for what counts since the start.
@Suite struct StatsDocumentTests {
    /// Two reports' worth of counters: 40 frames lost before, 42 now.
    static func report() -> StatsReport {
        var previous = Counters()
        previous.framesIn = 1500
        previous.framesLostAtSource = 40
        previous.framesDroppedAtCapture = 7
        previous.clipsWritten = 3
        var now = previous
        now.framesIn = 3000
        now.framesEncoded = 1500
        now.framesLostAtSource = 42
        now.framesDroppedAtCapture = 10
        now.clipsWritten = 4
        now.clipErrors = 1
        now.peakScore = 0.25
        now.diskFreeBytes = 5 << 30
        return StatsReport(now: now, previous: previous, seconds: 60, uploadWaiting: 2)
    }

    static let heading = "## Stats: the log line and MQTT's `stats`"

    @Test func theLogLineAndMQTTHaveTheDocumentedKeys() throws {
        let report = Self.report()
        let documented = try EventsDocumentTests.documented(Self.heading)
        #expect(Stats.line(report).map(\.0) == documented)
        var messages = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: TimeZone.gmt)
        let sent = messages.messages(for: .stats(report))
        let payload = try EventsDocumentTests.object(try #require(sent.first).payload)
        #expect(try Set(payload.keys) == Set(documented + ["camera"]))
        for figure in report.figures {
            #expect((figure.kind == .total) == figure.key.hasSuffix("_total"), "\(figure.key)")
        }
        // Without uploads, no upload figure.
        var withoutUploads = report
        withoutUploads.uploadWaiting = nil
        #expect(Stats.line(withoutUploads).map(\.0) == documented.filter { $0 != "upload_waiting" })
    }

    /// A plain name is the interval's figure in both outputs, `_total` the count since start.
    @Test func theSameNameMeansTheSameInTheLogAndInMQTT() throws {
        let report = Self.report()
        let line = Dictionary(uniqueKeysWithValues: Stats.line(report).map { ($0.0, "\($0.1)") })
        var messages = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: TimeZone.gmt)
        let payload = try EventsDocumentTests.object(try #require(messages.messages(for: .stats(report)).first).payload)
        #expect(line["lost_at_source"] == "2" && payload["lost_at_source"] as? Int == 2)
        #expect(line["lost_at_source_total"] == "42" && payload["lost_at_source_total"] as? Int == 42)
        #expect(line["dropped_at_capture"] == "3" && payload["dropped_at_capture"] as? Int == 3)
        #expect(line["clips_total"] == "4" && payload["clips_total"] as? Int == 4)
        #expect(line["frames_total"] == "3000" && payload["frames_total"] as? Int == 3000)
        #expect(payload["fps_in"] as? Double == 25 && line["fps_in"] == "25.0")
    }

    /// `peak_score` is the interval's: the next line starts from nothing.
    @Test func thePeakScoreIsTheIntervals() {
        let stats = Stats()
        stats.update { $0.peakScore = max($0.peakScore, 0.3) }
        #expect(stats.closeInterval().peakScore == 0.3)
        stats.update { $0.peakScore = max($0.peakScore, 0.1) }
        #expect(stats.closeInterval().peakScore == 0.1)
    }

    /// One notice of each kind.
    static let notices: [Notice] = [
        .cameraOpen(source: "/dev/video0", format: "YUYV 640x480", attempts: 2),
        .cameraBack(source: "/dev/video0", format: "YUYV 640x480", down: 12, attempts: 4),
        .cameraUnavailable(source: "/dev/video0", error: "No such file or directory"),
        .cameraLost(source: "/dev/video0", error: "No such device", restart: false),
        .endOfSource(source: "scene"), .sourceStalled(seconds: 5, closingClip: true), .framesAgain,
        .frameTimesJumped(seconds: 20, closingClip: false), .wallClockMoved(seconds: 3600),
        .microphoneOpen(device: "hw:1", rate: 48000, channels: 1, back: false),
        .microphoneOpen(device: "hw:1", rate: 48000, channels: 1, back: true),
        .microphoneUnavailable(device: "hw:1", error: "No such device"),
        .microphoneFailed(device: "hw:1", error: "No such device"), .reloadRefused(error: "line 3: syntax error"),
        .retentionChanged(setting: "storage.max_age_days", old: "0", new: "30", deletesMore: true),
        .restartNeeded(changed: ["camera"]), .encoderChosen(backend: "x264", reason: "no hardware", unsuitable: false),
        .encoding(
            width: 640, height: 480, pixelFormat: "I420", encoder: [.init("encoder", "x264")], keyframeInterval: 1),
        .hardwareEncoderCannotOpen(error: "out of memory"),
        .hardwareEncoderFailed(error: "timeout", failuresIn10Minutes: 1), .hardwareEncoderGivenUp(failures: 3),
        .encoderFailed(error: "VIDIOC_REQBUFS"),
        .storageUnavailable(path: "/srv/clips", error: "Read-only file system"),
        .storageBack(path: "/srv/clips", down: 30, attempts: 3),
        .clipHeld(event: 1, part: 1, trigger: "t", path: "/srv/clips", memoryBytes: 0),
        .heldVideoFull(event: 1, part: 1, keptSeconds: 4, memoryMB: 64, waiting: 0),
        .clipNotRecorded(event: 2, part: 1, trigger: "t", path: "/srv/clips", memoryMB: 64),
        .clipWrittenFromMemory(file: "a.mov", event: 1, part: 1, bytes: 1000),
        .clipLostWithTheStorage(event: 1, part: 1, start: "s", end: "e", path: "/srv/clips"),
        .journalRebuilt(added: 1, damagedDropped: 0, duplicatesDropped: 0, markedDamaged: 0),
        .diskFull(file: "a.mov", during: "writing video"), .diskSpaceAgain(file: "a.mov"),
        .diskLow(path: "/srv/clips", freeMB: 10, minFreeMB: 100, shortMB: 90),
        .snapshotNotSaved(file: "a.jpg", error: "e"), .latestPictureFailed(path: "latest.jpg", error: "e"),
        .latestPictureWaitsForSpace(path: "latest.jpg", minFreeMB: 100), .clipUnfinished(file: "a.mov", error: "e"),
        .clipRepaired(file: "a.mov", frames: 10),
        .clipMovedAside(file: "a.mov", movedTo: "a.mov.damaged", bytes: 10, error: "e"),
        .clipNotRepaired(file: "a.mov", error: "e", moveError: nil),
        .leftoverRemoved(file: "latest.jpg.new", bytes: 10),
        .overlayShortened(pattern: "{camera} %F %T", charactersThatFit: 39, drawn: "yard"),
    ]

    /// docs/reference/events.md lists every notice, in `Notice`'s order, with its level and the start of
    /// its message.
    @Test func theNoticesAreTheDocumentedOnes() throws {
        #expect(Set(Self.notices.map(\.kind)) == Set(Notice.Kind.allCases), "a notice kind has no sample here")
        let heading = "## Notices: what the agent says as things change"
        #expect(try EventsDocumentTests.documented(heading) == Notice.Kind.allCases.map { "\($0)" })
        let rows = try EventsDocumentTests.rows(heading)
        for notice in Self.notices {
            let cells = try #require(rows.first { $0.first == "`\(notice.kind)`" }, "\(notice.kind)")
            let row = cells.joined(separator: " | ")
            #expect(cells.count == 3, "\(row)")
            #expect(cells.dropFirst().first?.hasPrefix(notice.level.description) == true, "\(notice.kind): \(row)")
            let start = notice.line.message.prefix(16)
            #expect(cells.last?.contains(start) == true, "\(notice.kind): \(row) does not say \"\(start)\"")
        }
    }
}
