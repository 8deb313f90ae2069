import Configuration
import Foundation
import Media
import TestSupport
import Testing

@testable import Agent
@testable import MQTT
@testable import Recorder

/// docs/events.md against the code: every key each output sends is in the document, and
/// every key the document lists is sent. A saved clip's keys are the journal's in all three
/// outputs, with the same values.
@Suite struct EventsDocumentTests {
    /// The keys of the first table after the heading `heading` in docs/events.md.
    static func documented(_ heading: String) throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/events.md"), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex(of: heading), "docs/events.md has no heading \(heading)")
        var keys: [String] = []
        for line in lines[(start + 1)...] {
            if line.hasPrefix("#") { break }
            guard line.hasPrefix("| `") else {
                if !keys.isEmpty { break }
                continue
            }
            let cell = line.dropFirst(3).prefix { $0 != "`" }
            keys.append(String(cell))
        }
        #expect(!keys.isEmpty, "no table under \(heading)")
        return keys
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
        var messages = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: TimeZone.gmt)
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
        let deleted = try payload(
            .clipsDeleted(
                ClipsDeleted(
                    deletions: [
                        Deletion(
                            clip: StoredFile(relativePath: Self.record.file, size: 1, modified: trigger),
                            reason: .olderThan(days: 30))
                    ], storage: storage)))
        #expect(try Set(deleted.keys) == Set(Self.documented("### `event`: `deleted`")))
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
