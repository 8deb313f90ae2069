import Configuration
import Foundation
import Media
import TestSupport
import Testing

@testable import Agent
@testable import MQTT
@testable import Recorder

/// What each agent event becomes on the broker, as a table: one event of motion from its start
/// to its clip's deletion, then a stats interval and the detection switch, each event with
/// the messages `MQTTMessages.messages(for:)` must return — topic, retained or not, payload
/// (the `start`, `end` and `deleted` JSON decoded by its Swift names, so a renamed key changes
/// `EventPayload` only; `saved`, the journal's line, as its keys and values).
/// No broker: the broker tests (MQTTBrokerTests, MQTTBadDayTests) are for the transport.
@Suite struct MQTTMessagesTableTests {
    /// A message as the table writes it: its topic under `vigil/yard`, whether it is
    /// retained, and its payload — text, the `event` topic's JSON (decoded, so the order of
    /// its keys does not matter), the stats' JSON as text, or bytes.
    enum Payload: Equatable {
        case text(String)
        case event(MQTTMessages.EventPayload)
        /// A `saved` event: its JSON object with sorted keys.
        case saved(String)
        case bytes([UInt8])
        /// A JSON object whose `camera` is this.
        case jsonObject(camera: String)
    }

    struct Row: CustomStringConvertible {
        var topic: String
        var retain: Bool
        var payload: Payload
        var description: String { "\(topic) retain=\(retain) \(payload)" }

        init(_ topic: String, retain: Bool, _ payload: Payload) {
            self.topic = topic
            self.retain = retain
            self.payload = payload
        }

        /// What `message` says, in the table's terms.
        init(_ message: MQTTMessage) {
            let topic = String(message.topic.dropFirst("vigil/yard/".count))
            let payload: Payload =
                if topic == "event",
                    let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
                    object["type"] as? String == "saved"
                {
                    MQTTMessagesTableTests.saved(object)
                } else if topic == "event",
                    let event = try? JSONDecoder().decode(MQTTMessages.EventPayload.self, from: Data(message.payload))
                {
                    .event(event)
                } else if topic == "snapshot" {
                    .bytes(message.payload)
                } else if topic == "stats",
                    let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
                    let camera = object["camera"] as? String
                {
                    .jsonObject(camera: camera)
                } else {
                    .text(message.text)
                }
            self.init(topic, retain: message.retain, payload)
        }
    }

    static let utc = TimeZone(identifier: "UTC")!
    /// 2026-12-01T10:00:00Z, and what the journal writes for it and for seconds after it.
    static let t0 = Date(timeIntervalSince1970: 1_796_119_200)
    static func time(_ seconds: Double) -> String {
        ClipRecord.timestamp(t0.addingTimeInterval(seconds), timeZone: utc)
    }

    static func event(
        _ type: String, event: Int? = nil, clip: String? = nil, start: String? = nil, end: String? = nil,
        preRoll: Double? = nil, peak: Double? = nil, parts: Int? = nil, trigger: String? = nil
    ) -> Payload {
        .event(
            MQTTMessages.EventPayload(
                type: type, eventType: type, event: event, camera: "yard", clip: clip, start: start, end: end,
                prerollSeconds: preRoll, peakScore: peak, parts: parts, trigger: trigger))
    }

    /// A `saved` event's JSON object, as the table compares it: sorted keys, so their order
    /// does not matter.
    static func saved(_ object: [String: Any]) -> Payload {
        let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return .saved(data.map { String(decoding: $0, as: UTF8.self) } ?? "not JSON")
    }

    /// The events, in the order an agent sends them, each with what it must become.
    static func table(storage: MemoryStorage) -> [(AgentEvent, [Row])] {
        let clip = "2026-12-01/yard-20261201-100001.mov"
        let record = ClipRecord(
            file: clip, camera: "yard", start: time(1), end: time(13.5), cause: .motion, triggerTime: time(3),
            triggerSourceSeconds: 3, preRollSeconds: 2, durationSeconds: 12.5, frames: 188, audioFrames: 0,
            bytes: 512_000, peakScore: 0.123_456_7, part: 1, snapshot: "2026-12-01/yard-20261201-100001.jpg")
        return [
            (
                .motionStarted(MotionStarted(trigger: t0.addingTimeInterval(3), score: 0.05, cause: .motion)),
                [Row("motion", retain: true, .text("ON"))]
            ),
            (
                .clipStarted(
                    ClipStarted(
                        file: clip, path: storage.path(clip), camera: "yard", event: 7, part: 1,
                        trigger: t0.addingTimeInterval(3), preRoll: 2, score: 0.05, cause: .motion)),
                [
                    Row(
                        "event", retain: false,
                        event("start", event: 7, clip: clip, start: time(1), preRoll: 2, peak: 0.05, trigger: "motion"))
                ]
            ),
            (
                .motionEnded(MotionEnded(end: t0.addingTimeInterval(13.5), peakScore: 0.123_456_7, parts: 1)),
                [
                    Row("motion", retain: true, .text("OFF")),
                    Row(
                        "event", retain: false,
                        event("end", event: 7, end: time(13.5), peak: 0.123, parts: 1, trigger: "motion")),
                ]
            ),
            (
                .clipSaved(
                    ClipSaved(
                        record: record, path: storage.path(clip), origin: .closed, storage: storage,
                        snapshotJPEG: [0xFF, 0xD8, 0xFF, 0xD9])),
                [
                    Row(
                        "event", retain: false,
                        saved([
                            "type": "saved", "event_type": "saved", "event": 7, "clip": clip, "file": clip,
                            "camera": "yard",
                            "start": time(1), "end": time(13.5), "trigger": "motion", "trigger_time": time(3),
                            "trigger_source_s": 3, "preroll_s": 2, "duration_s": 12.5, "frames": 188,
                            "audio_frames": 0, "bytes": 512_000, "peak_score": 0.123_456_7, "part": 1,
                            "snapshot": "2026-12-01/yard-20261201-100001.jpg",
                        ])),
                    Row("snapshot", retain: true, .bytes([0xFF, 0xD8, 0xFF, 0xD9])),
                    Row("last_clip", retain: true, .text(clip)),
                ]
            ),
            (
                .clipsDeleted(
                    ClipsDeleted(
                        deletions: [
                            Deletion(
                                clip: StoredFile(relativePath: clip, size: 512_000, modified: t0), reason: .diskFull)
                        ], storage: storage)),
                [Row("event", retain: false, event("deleted", clip: clip))]
            ),
            (
                .stats(StatsReport(now: Counters(), previous: Counters(), seconds: 60)),
                [
                    // Its figures' names are stats naming's (the log line's and MQTT's, one
                    // vocabulary); here: one retained JSON object for the camera.
                    Row("stats", retain: true, .jsonObject(camera: "yard"))
                ]
            ),
            (.detection(false), [Row("detect", retain: true, .text("OFF"))]),
            (.detection(true), [Row("detect", retain: true, .text("ON"))]),
        ]
    }

    @Test func eachEventBecomesItsMessages() {
        let storage = MemoryStorage()
        var messages = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: Self.utc)
        for (event, expected) in Self.table(storage: storage) {
            let got = messages.messages(for: event).map(Row.init)
            #expect(got.map(\.description) == expected.map(\.description), "\(event)")
        }
    }

    /// A second part of an event says no `start` (the event's first clip did), and a clip
    /// repaired at start, whose event this run never saw, is `saved` with no event number.
    @Test func laterPartsAndRepairedClips() throws {
        let storage = MemoryStorage()
        var messages = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: Self.utc)
        let part2 = ClipStarted(
            file: "b.mov", path: storage.path("b.mov"), camera: "yard", event: 3, part: 2, trigger: Self.t0, preRoll: 0,
            score: 0.1, cause: .external)
        #expect(messages.messages(for: .clipStarted(part2)).isEmpty)
        let repaired = ClipRecord(
            file: "a.mov", camera: "yard", start: Self.time(0), end: Self.time(4), cause: nil, triggerTime: nil,
            triggerSourceSeconds: nil, preRollSeconds: nil, durationSeconds: 4, frames: 60, audioFrames: 0, bytes: 1,
            peakScore: nil, part: nil, repaired: true)
        let saved = messages.messages(
            for: .clipSaved(
                ClipSaved(record: repaired, path: storage.path("a.mov"), origin: .repairedAtStart, storage: storage)))
        #expect(
            saved.map(Row.init).map(\.description)
                == [
                    Row(
                        "event", retain: false,
                        Self.saved([
                            "type": "saved", "event_type": "saved", "clip": "a.mov", "file": "a.mov", "camera": "yard",
                            "start": Self.time(0),
                            "end": Self.time(4), "duration_s": 4, "frames": 60, "audio_frames": 0, "bytes": 1,
                            "repaired": true,
                        ])),
                    Row("last_clip", retain: true, .text("a.mov")),
                ].map(\.description))
        #expect(messages.messages(for: .reloaded(try Settings.defaults())).isEmpty)
    }
}
