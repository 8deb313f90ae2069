import Agent
import FoundationEssentials
import Media
import Recorder

/// One message for the broker.
public struct MQTTMessage: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    /// Of the moment (the live picture): sent at QoS 0 when the broker is connected and nothing
    /// waits before it, else dropped — never queued, never sent again.
    public var transient: Bool

    public init(topic: String, payload: [UInt8], retain: Bool, transient: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
        self.transient = transient
    }

    public init(topic: String, text: String, retain: Bool) {
        self.init(topic: topic, payload: Array(text.utf8), retain: retain)
    }

    public var text: String { String(decoding: payload, as: UTF8.self) }
}

/// What each agent event becomes on the broker, under `<topic_prefix>/<camera>` (`base`):
///
/// | topic | payload | retained |
/// |---|---|---|
/// | `availability` | `online`, `offline` (also the last will); `online` after the states at each connection | yes |
/// | `motion` | `ON` when an event starts, `OFF` when it ends, and the state at each connection | yes |
/// | `event` | one JSON object per phase: `start`, `end`, `saved`, `deleted` | no |
/// | `stats` | the stats line's figures as JSON | yes |
/// | `snapshot` | the JPEG of each saved clip's peak frame | yes |
/// | `last_clip` | the newest saved clip: its URL when there is a link base, else its path relative to `storage.path`; also when the storage directory comes up, from the catalogue's newest entry (`lastClip(_:)`) | yes |
/// | `live` | the live picture's JPEG, every `snapshot.live_interval` (QoS 0; dropped while the broker is away) | no |
/// | `detect` | `ON` or `OFF`: whether motion detection is on | yes |
/// | `record/set`, `detect/set` | commands Vigil takes (`MQTTCommand`) | — |
/// | `<topic_prefix>/client.id/<client id>` | who connected last with the client id (`ClientPresence`) | yes |
///
/// Everything a newcomer needs to show the camera's state is retained (Home Assistant, which
/// subscribes again when it restarts, would otherwise show `unknown` until the next change);
/// what happened once (`event`) is not.
///
/// A value with no I/O: the sink feeds it events and publishes what it returns. It keeps the
/// number of the event under way, so that `end` and `saved` name it, and whether motion is on.
public struct MQTTMessages: Sendable {
    public let base: String
    public let camera: String
    let timeZone: any LocalTimeZone
    /// Where clips are reached over HTTP (`Settings.Web.linkBase`), for `last_clip` and the
    /// `saved` event's `url`; nil: no links.
    public let linkBase: String?
    /// The event under way (from its first clip), and each open clip's event.
    private var event: Int?
    private var clipEvents: [String: Int] = [:]
    /// Between an event's `motionStarted` and its `motionEnded`.
    public private(set) var motionOn = false

    public init(base: String, camera: String, timeZone: any LocalTimeZone, linkBase: String? = nil) {
        self.base = base
        self.camera = camera
        self.timeZone = timeZone
        self.linkBase = linkBase
    }

    /// The URL of `file` (relative to `storage.path`) on the web server, when there is a link base.
    public func url(of file: String) -> String? { linkBase.map { $0 + "/clips/" + URLPath.encoded(file) } }

    public var availability: String { base + "/availability" }
    public var motion: String { base + "/motion" }
    public var eventTopic: String { base + "/event" }
    public var stats: String { base + "/stats" }
    public var snapshot: String { base + "/snapshot" }
    public var lastClip: String { base + "/last_clip" }
    public var live: String { base + "/live" }
    public var detect: String { base + "/detect" }
    public var recordCommand: String { base + "/record/set" }
    public var detectCommand: String { base + "/detect/set" }

    /// The JSON of the `event` topic's `start`, `end`, `deleted` and `uploaded` phases (`saved` is
    /// `SavedPayload`), under the journal's keys where they say the same. Keys left out when
    /// not known.
    public struct EventPayload: Codable, Equatable, Sendable {
        public var type: String
        /// The same as `type`, for Home Assistant's event entity.
        public var eventType: String?
        public var event: Int?
        public var camera: String
        public var clip: String?
        public var start: String?
        public var end: String?
        public var prerollSeconds: Double?
        public var peakScore: Double?
        public var parts: Int?
        public var trigger: String?
        /// `uploaded`: where the clip is now, its size, the seconds it took, when it was
        /// verified (`uploads.jsonl`'s keys), and the clips still waiting.
        public var url: String?
        public var bytes: Int64?
        public var seconds: Double?
        public var at: String?
        public var waiting: Int?

        enum CodingKeys: String, CodingKey {
            case type, event, camera, clip, start, end, parts, trigger, url, bytes, seconds, at, waiting
            case eventType = "event_type"
            case prerollSeconds = "preroll_s"
            case peakScore = "peak_score"
        }
    }

    /// The JSON of a `saved` event: the journal's line for the clip, every key as the journal
    /// writes it (`ClipRecord`), with `type`, the `event` number and `clip` (the same as `file`,
    /// as the other phases name it).
    public struct SavedPayload: Encodable, Sendable {
        public var event: Int?
        public var record: ClipRecord
        /// The clip's and its picture's URLs, when there is a link base.
        public var url: String?
        public var snapshotURL: String?

        enum CodingKeys: String, CodingKey {
            case type, event, clip, url
            case eventType = "event_type"
            case snapshotURL = "snapshot_url"
        }

        public func encode(to encoder: any Encoder) throws {
            try record.encode(to: encoder)
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode("saved", forKey: .type)
            try c.encode("saved", forKey: .eventType)
            try c.encodeIfPresent(event, forKey: .event)
            try c.encode(record.file, forKey: .clip)
            try c.encodeIfPresent(url, forKey: .url)
            try c.encodeIfPresent(snapshotURL, forKey: .snapshotURL)
        }
    }

    /// `last_clip` for the storage directory's newest clip (`MQTTSink.newestClip(in:)`), when it comes
    /// up: a broker that restarted meanwhile, or never heard of the camera, has it.
    public func lastClip(_ newest: CatalogueEntry) -> MQTTMessage {
        MQTTMessage(topic: lastClip, text: url(of: newest.file) ?? newest.file, retain: true)
    }

    /// The messages `event` makes (none for the events the broker does not hear of).
    public mutating func messages(for event: AgentEvent) -> [MQTTMessage] {
        switch event {
        case .motionStarted:
            motionOn = true
            return [motionState]
        case .clipStarted(let clip):
            clipEvents[clip.file] = clip.event
            guard clip.part == 1 else { return [] }
            self.event = clip.event
            let start = clip.trigger.addingTimeInterval(-clip.preRoll)
            return [
                json(
                    EventPayload(
                        type: "start", event: clip.event, camera: camera, clip: clip.file, start: time(start),
                        prerollSeconds: rounded(clip.preRoll), peakScore: rounded(clip.score),
                        trigger: clip.cause.rawValue))
            ]
        case .motionEnded(let ended):
            defer { self.event = nil }
            motionOn = false
            return [
                motionState,
                json(
                    EventPayload(
                        type: "end", event: self.event, camera: camera, end: time(ended.end),
                        peakScore: rounded(ended.peakScore), parts: ended.parts, trigger: ended.cause.rawValue)),
            ]
        case .clipSaved(let saved):
            let r = saved.record
            let payload = SavedPayload(
                event: clipEvents.removeValue(forKey: r.file), record: r, url: url(of: r.file),
                snapshotURL: r.snapshot.flatMap { url(of: $0) })
            return [MQTTMessage(topic: eventTopic, payload: Self.encode(payload), retain: false)]
                + (saved.snapshotJPEG.map { [MQTTMessage(topic: snapshot, payload: $0, retain: true)] } ?? [])
                + [MQTTMessage(topic: lastClip, text: url(of: r.file) ?? r.file, retain: true)]
        case .clipsDeleted(let deleted):
            return deleted.deletions.map {
                json(EventPayload(type: "deleted", camera: camera, clip: $0.clip.relativePath))
            }
        case .clipUploaded(let uploaded):
            return [
                json(
                    EventPayload(
                        type: "uploaded", camera: camera, clip: uploaded.file, url: uploaded.url, bytes: uploaded.bytes,
                        seconds: uploaded.seconds, at: uploaded.at, waiting: uploaded.waiting))
            ]
        case .stats(let report):
            return [statsMessage(report)]
        case .detection(let on):
            return [state(detecting: on)]
        case .livePicture(let jpeg):
            return [MQTTMessage(topic: live, payload: jpeg, retain: false, transient: true)]
        case .reloaded, .notice, .storageReady:
            return []
        }
    }

    /// The retained state of the detection switch.
    public func state(detecting: Bool) -> MQTTMessage {
        MQTTMessage(topic: detect, text: detecting ? "ON" : "OFF", retain: true)
    }

    /// The retained state of `motion`: `ON` while an event is open, else `OFF`. Said at each
    /// connection too, so that what an agent killed in the middle of an event left retained
    /// does not stay, and a new broker knows it before the first event.
    public var motionState: MQTTMessage {
        MQTTMessage(topic: motion, text: motionOn ? "ON" : "OFF", retain: true)
    }

    /// `online` or `offline` on `availability`, retained (`offline` is the last will too).
    public func availabilityMessage(online: Bool) -> MQTTMessage {
        MQTTMessage(topic: availability, text: online ? "online" : "offline", retain: true)
    }

    /// What goes out at each connection, before anything queued, in this order: Home
    /// Assistant's configs (`discovery`), the retained states as they are now (the detection
    /// switch when there is one, `motion`), then what follows them (`then`: the agent's
    /// presence), and `online` last. One connection delivers in the order published, so a
    /// newcomer has every state before the camera is available to it: Home Assistant never
    /// shows, as the camera comes back, the motion `ON` an agent killed mid-event left
    /// retained (an automation on motion turning on would fire).
    public func connection(
        discovery: [MQTTMessage], detecting: Bool?, then: [MQTTMessage] = []
    ) -> [MQTTMessage] {
        let states = (detecting.map { [state(detecting: $0)] } ?? []) + [motionState]
        return Array([discovery, states, then, [availabilityMessage(online: true)]].joined())
    }

    /// The JSON of the `stats` topic: the camera, and the stats line's figures under its keys
    /// (`StatsReport.figures`: `_total` since start, the others over the interval or now).
    struct StatsPayload: Encodable {
        var camera: String
        var figures: [StatsFigure]

        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Key.self)
            try c.encode(camera, forKey: Key(stringValue: "camera"))
            for figure in figures {
                let key = Key(stringValue: figure.key)
                switch figure.value {
                case .int(let value): try c.encode(value, forKey: key)
                case .number(let value, let places): try c.encode(value.rounded(toPlaces: places), forKey: key)
                case .bool(let value): try c.encode(value, forKey: key)
                }
            }
        }
    }

    private func statsMessage(_ report: StatsReport) -> MQTTMessage {
        MQTTMessage(
            topic: stats, payload: Self.encode(StatsPayload(camera: camera, figures: report.figures)), retain: true)
    }

    /// Sorted keys, slashes as they are (topics and paths read as written).
    static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { [UInt8]($0) } ?? []
    }

    private func json(_ payload: EventPayload) -> MQTTMessage {
        var payload = payload
        payload.eventType = payload.type
        return MQTTMessage(topic: eventTopic, payload: Self.encode(payload), retain: false)
    }

    private func time(_ date: Date) -> String { ClipRecord.timestamp(date, timeZone: timeZone) }

    /// Three decimals: what a reader needs, without binary noise (0.30000000000000004).
    private func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
}

/// A command Vigil takes from the broker.
public enum MQTTCommand: Sendable, Equatable {
    /// `record/set`: `ON` records until `OFF` (at most `recording.max_clip`), a number records
    /// that many seconds (1 to 3600); the post-roll follows either.
    case outside(OutsideRequest)
    /// `detect/set`: `ON` or `OFF`.
    case detection(Bool)

    /// The command `payload` on `topic` says, or why it says none.
    public static func parse(
        topic: String, payload: [UInt8], messages: MQTTMessages
    ) -> Result<MQTTCommand, MQTTCommandError> {
        let text = String(
            String(decoding: payload.prefix(64), as: UTF8.self).drop(while: \.isWhitespace).reversed().drop(
                while: \.isWhitespace
            ).reversed())
        switch topic {
        case messages.recordCommand:
            switch text.uppercased() {
            case "ON": return .success(.outside(.recordUntilStopped))
            case "OFF": return .success(.outside(.stop))
            default:
                guard case .success(let seconds) = OutsideRequest.seconds(Substring(text)) else {
                    return .failure(
                        MQTTCommandError(
                            topic: topic, payload: text, expected: "ON, OFF or " + OutsideRequest.accepted))
                }
                return .success(.outside(.record(seconds: seconds)))
            }
        case messages.detectCommand:
            switch text.uppercased() {
            case "ON": return .success(.detection(true))
            case "OFF": return .success(.detection(false))
            default: return .failure(MQTTCommandError(topic: topic, payload: text, expected: "ON or OFF"))
            }
        default:
            return .failure(
                MQTTCommandError(topic: topic, payload: text, expected: "nothing: Vigil takes no command there"))
        }
    }
}

/// A message on a command topic that says no command.
public struct MQTTCommandError: Error, Equatable, Sendable, CustomStringConvertible {
    public var topic: String
    public var payload: String
    public var expected: String

    public var description: String { "\(topic): \"\(payload)\" is no command — send \(expected)" }
}
