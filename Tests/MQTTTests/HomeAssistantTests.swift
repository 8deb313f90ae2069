import Agent
import AgentTestSupport
import Configuration
import Foundation
import H264
import Logging
import MQTT
import Media
import POSIX
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Capture

/// Home Assistant's discovery configs and the command topics: what the configs say (no
/// broker), and an agent in process with its `MQTTSink` on a real broker — the configs at
/// each connection and when Home Assistant says `online`, detection switched off and on,
/// outside recordings, and commands that say nothing.
@Suite(.serialized) struct HomeAssistantTests {
    let topics = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: SystemTimeZone())

    // MARK: The configs (no broker)

    /// One retained config per entity, each with what Home Assistant requires of its
    /// component, and every topic it names one the sink uses.
    @Test func oneRetainedConfigPerEntityWithWhatHomeAssistantRequires() throws {
        let discovery = HomeAssistantDiscovery(
            prefix: "homeassistant", camera: "yard", version: "1.2.3", topics: topics, livePictures: true,
            uploads: true)
        let messages = discovery.messages
        #expect(
            messages.map(\.topic) == [
                "homeassistant/binary_sensor/vigil_yard/motion/config",
                "homeassistant/image/vigil_yard/snapshot/config",
                "homeassistant/sensor/vigil_yard/last_clip/config",
                "homeassistant/sensor/vigil_yard/disk_free/config",
                "homeassistant/switch/vigil_yard/detection/config",
                "homeassistant/button/vigil_yard/record/config",
                "homeassistant/event/vigil_yard/event/config",
                "homeassistant/camera/vigil_yard/live/config",
                "homeassistant/sensor/vigil_yard/upload_waiting/config",
            ])
        // Without live pictures (snapshot.live_interval = 0), no camera entity; without
        // uploads, no backlog sensor.
        let plain = HomeAssistantDiscovery(prefix: "homeassistant", camera: "yard", version: "1.2.3", topics: topics)
        #expect(!plain.messages.contains { $0.topic.contains("/camera/") || $0.topic.contains("upload") })
        #expect(messages.allSatisfy { $0.retain })
        #expect(discovery.statusTopic == "homeassistant/status")

        var configs: [String: [String: Any]] = [:]
        for message in messages {
            let config = try #require(
                try JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any], "\(message.text)")
            configs[message.topic.split(separator: "/").dropFirst().prefix(3).joined(separator: "/")] = config
        }
        func config(_ key: String) throws -> [String: Any] { try #require(configs[key], "\(configs.keys)") }

        // What each component requires, and the topic it is.
        let motion = try config("binary_sensor/vigil_yard/motion")
        #expect(motion["state_topic"] as? String == topics.motion)
        #expect(motion["payload_on"] as? String == "ON" && motion["payload_off"] as? String == "OFF")
        let snapshot = try config("image/vigil_yard/snapshot")
        #expect(snapshot["image_topic"] as? String == topics.snapshot)
        #expect(snapshot["content_type"] as? String == "image/jpeg")
        #expect(try config("sensor/vigil_yard/last_clip")["state_topic"] as? String == topics.lastClip)
        let disk = try config("sensor/vigil_yard/disk_free")
        #expect(disk["state_topic"] as? String == topics.stats)
        #expect(disk["value_template"] as? String == "{{ value_json.disk_free_mb }}")
        // The stats' disk_free_mb counts MiB (2^20 bytes): said so, not MB (10^6), which Home
        // Assistant would show 4.9 % low.
        #expect(disk["unit_of_measurement"] as? String == "MiB" && disk["device_class"] as? String == "data_size")
        let detection = try config("switch/vigil_yard/detection")
        #expect(detection["command_topic"] as? String == topics.detectCommand)
        #expect(detection["state_topic"] as? String == topics.detect)
        #expect(detection["payload_on"] as? String == "ON" && detection["payload_off"] as? String == "OFF")
        let button = try config("button/vigil_yard/record")
        #expect(button["command_topic"] as? String == topics.recordCommand)
        #expect(button["payload_press"] as? String == HomeAssistantDiscovery.buttonSeconds)
        #expect(
            MQTTCommand.parse(
                topic: topics.recordCommand, payload: Array(HomeAssistantDiscovery.buttonSeconds.utf8),
                messages: topics) == .success(.outside(.record(seconds: 30))), "the button's press is a command")
        // The camera: the live picture's topic; the event: the event topic and its phases.
        #expect(try config("camera/vigil_yard/live")["topic"] as? String == topics.live)
        let event = try config("event/vigil_yard/event")
        #expect(event["state_topic"] as? String == topics.eventTopic)
        #expect(event["event_types"] as? [String] == ["start", "end", "saved", "deleted", "uploaded"])
        let backlog = try config("sensor/vigil_yard/upload_waiting")
        #expect(backlog["state_topic"] as? String == topics.stats)
        #expect(backlog["value_template"] as? String == "{{ value_json.upload_waiting }}")

        // What every entity has.
        var uniqueIDs: [String] = []
        for (key, config) in configs {
            uniqueIDs.append(config["unique_id"] as? String ?? "")
            // `default_entity_id`, not the `object_id` Home Assistant 2026.4 no longer takes.
            let component = String(key.prefix { $0 != "/" }), object = String(key.split(separator: "/").last ?? "")
            #expect(config["default_entity_id"] as? String == "\(component).vigil_yard_\(object)", "\(key)")
            #expect(config["object_id"] == nil, "\(key)")
            #expect(config["availability_topic"] as? String == "vigil/yard/availability", "\(key)")
            #expect(config["payload_available"] as? String == "online", "\(key)")
            #expect(config["payload_not_available"] as? String == "offline", "\(key)")
            #expect((config["name"] as? String)?.isEmpty == false, "\(key)")
            let device = try #require(config["device"] as? [String: Any], "\(key)")
            #expect(device["identifiers"] as? [String] == ["vigil_yard"], "\(key)")
            #expect(device["name"] as? String == "yard" && device["sw_version"] as? String == "1.2.3", "\(key)")
            #expect((config["origin"] as? [String: Any])?["name"] as? String == "Vigil", "\(key)")
            // Every topic it names is one the sink publishes or takes commands on.
            let named = config.filter { $0.key.hasSuffix("_topic") || $0.key == "topic" }.map { $0.value as? String }
            let used: Set<String?> = [
                topics.motion, topics.snapshot, topics.lastClip, topics.stats, topics.detect, topics.detectCommand,
                topics.recordCommand, topics.availability, topics.live, topics.eventTopic,
            ]
            #expect(named.allSatisfy { used.contains($0) }, "\(key): \(named)")
        }
        #expect(Set(uniqueIDs).count == 9 && uniqueIDs.allSatisfy { $0.hasPrefix("vigil_yard_") }, "\(uniqueIDs)")
    }

    /// Another prefix and camera move every topic with them.
    @Test func thePrefixesAndTheCameraNameTheTopics() {
        let front = MQTTMessages(base: "home/cams/front", camera: "front", timeZone: SystemTimeZone())
        let discovery = HomeAssistantDiscovery(prefix: "ha", camera: "front", version: "x", topics: front)
        #expect(discovery.messages.allSatisfy { $0.topic.hasPrefix("ha/") && $0.topic.contains("/vigil_front/") })
        #expect(discovery.statusTopic == "ha/status")
        let texts = discovery.messages.map(\.text)
        #expect(texts.allSatisfy { $0.contains("\"availability_topic\":\"home/cams/front/availability\"") }, "\(texts)")
        #expect(texts.contains { $0.contains("\"command_topic\":\"home/cams/front/detect/set\"") })
        #expect(texts.contains { $0.contains("\"command_topic\":\"home/cams/front/record/set\"") })
    }

    /// What `record/set` and `detect/set` take, and what a refusal says.
    @Test func theCommandsEachTopicTakes() {
        func parse(_ topic: String, _ text: String) -> Result<MQTTCommand, MQTTCommandError> {
            MQTTCommand.parse(topic: topic, payload: Array(text.utf8), messages: topics)
        }
        let record = topics.recordCommand, detect = topics.detectCommand
        #expect(record == "vigil/yard/record/set" && detect == "vigil/yard/detect/set")
        #expect(parse(record, "ON") == .success(.outside(.recordUntilStopped)))
        #expect(parse(record, "on") == .success(.outside(.recordUntilStopped)))
        #expect(parse(record, "OFF") == .success(.outside(.stop)))
        #expect(parse(record, " 30 ") == .success(.outside(.record(seconds: 30))))
        #expect(parse(record, "30\n") == .success(.outside(.record(seconds: 30))))
        #expect(parse(record, "1") == .success(.outside(.record(seconds: 1))))
        #expect(parse(record, "3600") == .success(.outside(.record(seconds: 3600))))
        #expect(parse(record, "2.5") == .success(.outside(.record(seconds: 2.5))))
        for refused in ["0", "0.5", "3601", "-5", "garbage", "", "nan", "inf"] {
            guard case .failure(let error) = parse(record, refused) else {
                Issue.record("record/set took \"\(refused)\"")
                continue
            }
            #expect(
                error.description
                    == "vigil/yard/record/set: \"\(refused)\" is no command — send ON, OFF or plain decimal seconds from 1 to 3600 (such as 30 or 2.5)"
            )
        }

        #expect(parse(detect, "ON") == .success(.detection(true)))
        #expect(parse(detect, "OFF") == .success(.detection(false)))
        #expect(parse(detect, "off") == .success(.detection(false)))
        for refused in ["garbage", "30", "TRUE", ""] {
            guard case .failure(let error) = parse(detect, refused) else {
                Issue.record("detect/set took \"\(refused)\"")
                continue
            }
            #expect(error.topic == detect && error.payload == refused)
            #expect(error.description == "vigil/yard/detect/set: \"\(refused)\" is no command — send ON or OFF")
        }

        guard case .failure(let elsewhere) = parse("vigil/yard/motion", "ON") else {
            Issue.record("a command taken on the motion topic")
            return
        }
        #expect(elsewhere.description.contains("Vigil takes no command there"), "\(elsewhere)")
    }

    // MARK: On a broker

    /// Discovery on: the seven configs after the connection (no camera entity: the agent here
    /// makes no live picture), retained for a newcomer; Home
    /// Assistant's `online` brings them again; the switch's topics, as Home Assistant uses
    /// them, turn detection off.
    @Test func theConfigsAtConnectionAndAgainWhenHomeAssistantStarts() throws {
        let dir = try TemporaryDirectory("vigil-ha")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let live = try Subscriber(port: broker.port, topic: "#", in: dir)
        let agent = try AgentHarness.mqtt(port: broker.port, scene: scene(seconds: 60, objects: []))
        agent.start()
        defer { _ = agent.stop() }

        func configs(_ messages: [Subscriber.Message]) -> [Subscriber.Message] {
            messages.filter { $0.topic.hasPrefix("homeassistant/") && $0.topic.hasSuffix("/config") }
        }
        #expect(live.waitFor(timeout: 30) { configs($0).count == 7 }, "\(live.messages)\n\(agent.output)")
        #expect(
            live.waitFor(timeout: 10) { $0.contains { $0.topic == "vigil/yard/availability" } }, "\(live.messages)")
        // In the order the sink sends them: the configs, the switch's state, `online` last.
        let order = live.messages.map(\.topic).filter {
            $0 == "vigil/yard/availability" || $0 == "vigil/yard/detect" || $0.hasSuffix("/config")
        }
        #expect(order.count == 9 && order.suffix(2) == ["vigil/yard/detect", "vigil/yard/availability"], "\(order)")
        let first = configs(live.messages)
        #expect(Set(first.map(\.topic)).count == 7)

        let newcomer = try Subscriber(port: broker.port, topic: "homeassistant/#", in: dir)
        #expect(newcomer.waitFor(timeout: 10) { $0.count >= 7 }, "\(newcomer.messages)")
        newcomer.stop()
        #expect(newcomer.messages.count == 7 && newcomer.messages.allSatisfy { $0.retained }, "\(newcomer.messages)")
        #expect(Set(newcomer.messages.map(\.payload)) == Set(first.map(\.payload)))

        // Home Assistant starts again: every config once more, the same.
        try publish(broker, "homeassistant/status", "online")
        #expect(live.waitFor(timeout: 15) { configs($0).count == 14 }, "\(live.messages)")
        let again = Array(configs(live.messages).dropFirst(7))
        #expect(again.map(\.topic) == first.map(\.topic) && again.map(\.payload) == first.map(\.payload))
        // Anything else there is no start.
        try publish(broker, "homeassistant/status", "offline")

        // The switch as Home Assistant works it: its command topic turns detection off, and
        // its state topic says so — after the `offline` above, which brought nothing.
        let switchConfig = try #require(first.first { $0.topic == "homeassistant/switch/vigil_yard/detection/config" })
        let config = try #require(
            try JSONSerialization.jsonObject(with: Data(switchConfig.payload.utf8)) as? [String: Any])
        let command = try #require(config["command_topic"] as? String)
        let state = try #require(config["state_topic"] as? String)
        try publish(broker, command, try #require(config["payload_off"] as? String))
        #expect(live.waitFor(timeout: 30) { $0.last { $0.topic == state }?.payload == "OFF" }, "\(live.messages)")
        // Said before the state went out.
        #expect(agent.lines("motion detection off").count == 1, "\(agent.output)")
        #expect(configs(live.messages).count == 14, "\(live.messages.map(\.topic))")
        #expect(agent.stop() == .stopped)
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// `mqtt.discovery = false`: no config, and Home Assistant's status is not listened to.
    @Test func noConfigsWithDiscoveryOff() throws {
        let dir = try TemporaryDirectory("vigil-ha")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let live = try Subscriber(port: broker.port, topic: "#", in: dir)
        let agent = try AgentHarness.mqtt(
            port: broker.port, scene: scene(seconds: 60, objects: []), mqtt: "discovery = false;")
        agent.start()
        defer { _ = agent.stop() }

        // The switch's state goes after the configs there would be.
        #expect(
            live.waitFor(timeout: 30) { $0.contains { $0.topic == "vigil/yard/detect" } },
            "\(live.messages)\n\(agent.output)")
        try publish(broker, "homeassistant/status", "online")
        // A command after Home Assistant's `online`: its answer comes after the configs the
        // `online` would have brought.
        try publish(broker, "vigil/yard/detect/set", "OFF")
        #expect(
            live.waitFor(timeout: 30) { $0.last { $0.topic == "vigil/yard/detect" }?.payload == "OFF" },
            "\(live.messages)")
        #expect(agent.stop() == .stopped)
        live.stop()
        // And the client id's presence.
        let topics = Set(live.messages.map(\.topic).filter { !$0.hasPrefix("vigil/client.id/") })
        #expect(
            topics == [
                "vigil/yard/availability", "vigil/yard/detect", "vigil/yard/motion", "vigil/yard/detect/set",
                "homeassistant/status",
            ],
            "\(topics)")
        #expect(live.messages.filter { $0.topic.hasPrefix("vigil/client.id/") }.count == 1)
    }

    /// `detect/set`: OFF, and an object crossing afterwards starts no event; ON, and the next
    /// one does. The retained state follows, for a newcomer as for a watcher.
    @Test func detectionOffAndOnAgainFromTheBroker() throws {
        let dir = try TemporaryDirectory("vigil-ha")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let live = try Subscriber(port: broker.port, topic: "vigil/yard/#", in: dir)
        // Each crossing waits for the test: the scene stands still (a camera on a quiet yard)
        // at 1.5 s until detection is off, and at 5 s until it is on again.
        let gates = Gates()
        let agent = try AgentHarness.mqtt(
            port: broker.port,
            scene: scene(seconds: 30, objects: [crossing(2.5, 4), crossing(6, 7.5)]), gates: gates, at: [1.5, 5])
        agent.start()
        defer { _ = agent.stop() }
        func retainedDetect() throws -> String? {
            let newcomer = try Subscriber(port: broker.port, topic: "vigil/yard/detect", in: dir)
            _ = newcomer.waitFor(timeout: 10) { !$0.isEmpty }
            newcomer.stop()
            return newcomer.messages.first.map { "\($0.payload)\($0.retained ? "" : " (not retained)")" }
        }
        /// Publishes `detect/set` and waits for the agent to take it (its `detection` event, said
        /// in the log first), the watcher to see the new state and a newcomer to get it retained.
        func setDetect(_ payload: String, logged: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let taken = agent.events.detections.count
            try publish(broker, "vigil/yard/detect/set", payload)
            #expect(
                agent.waitUntil { Array(agent.events.detections.dropFirst(taken)) == [payload == "ON"] },
                "\(agent.output)",
                sourceLocation: sourceLocation)
            #expect(agent.lines(logged).count == 1, "\(agent.output)", sourceLocation: sourceLocation)
            // The state reaches the broker a moment after the event.
            #expect(
                live.waitFor(timeout: 10) { $0.last { $0.topic == "vigil/yard/detect" }?.payload == payload },
                "\(live.messages)", sourceLocation: sourceLocation)
            #expect(try retainedDetect() == payload, sourceLocation: sourceLocation)
        }

        #expect(live.waitFor(timeout: 30) { $0.contains { $0.topic == "vigil/yard/detect" } }, "\(agent.output)")
        #expect(try retainedDetect() == "ON")
        #expect(gates.waitUntilHeld(0), "\(agent.output)")
        try setDetect("OFF", logged: "motion detection off")

        // The first object crosses unseen.
        gates.open(0)
        #expect(gates.waitUntilHeld(1), "\(agent.output)")
        #expect(agent.lines("motion started").isEmpty && agent.clipFiles.isEmpty, "\(agent.output)")

        try setDetect("ON", logged: "motion detection on")

        // The second is recorded, as motion.
        gates.open(1)
        #expect(agent.waitForClips(), "\(agent.output)")
        #expect(agent.stop() == .stopped)
        #expect(agent.clipFiles.count == 1, "\(agent.clipFiles)")
        #expect(try agent.journal().map(\.cause) == [.motion])
        #expect(agent.lines("motion started").count == 1, "\(agent.output)")
        live.stop()
        let detect = live.messages.filter { $0.topic == "vigil/yard/detect" }.map(\.payload)
        #expect(detect == ["ON", "OFF", "ON"], "\(detect)")
        #expect(live.messages.filter { $0.topic == "vigil/yard/motion" }.map(\.payload) == ["OFF", "ON", "OFF"])
        let triggers = live.messages.filter { $0.topic == "vigil/yard/event" }.map {
            json($0.payload)["trigger"] as? String
        }
        #expect(triggers == ["motion", "motion", "motion"], "\(triggers)")
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// `record/set`: what says no command is logged and changes nothing; `5` on a quiet scene
    /// records one event marked external, in the journal and on the `event` topic.
    @Test func recordFromTheBrokerOnAQuietScene() throws {
        let dir = try TemporaryDirectory("vigil-ha")
        defer { dir.remove() }
        let broker = try Broker(dir)
        // Left retained before the agent connects: no request now, said and ignored.
        try publish(broker, "vigil/yard/record/set", "ON", retain: true)
        let live = try Subscriber(port: broker.port, topic: "vigil/yard/#", in: dir)
        let agent = try AgentHarness.mqtt(port: broker.port, scene: scene(seconds: 60, objects: []))
        agent.start()
        defer { _ = agent.stop() }
        #expect(live.waitFor(timeout: 30) { $0.contains { $0.topic == "vigil/yard/detect" } }, "\(agent.output)")
        // The warnings are the behaviour under test: nothing but the log says them.
        let retainedIgnored =
            "MQTT command ignored: a retained message on record/set is no request — publish it without retain"
        #expect(agent.waitFor(retainedIgnored), "\(agent.output)")

        // Nothing from what says no command — then a command that does, whose answer
        // comes after the warnings. The first is said; the next, within a minute, counted.
        try publish(broker, "vigil/yard/record/set", "soon")
        #expect(agent.waitFor("MQTT command ignored"), "\(agent.output)")
        try publish(broker, "vigil/yard/detect/set", "maybe")
        let ignored = agent.lines("MQTT command ignored").compactMap { logValue($0, "error") }
        #expect(
            ignored == [
                "vigil/yard/record/set: \"soon\" is no command — send ON, OFF or plain decimal seconds from 1 to 3600 (such as 30 or 2.5)"
            ], "\(agent.output)")
        #expect(agent.lines("MQTT command ignored").allSatisfy { logValue($0, "level") == "warning" })
        #expect(agent.lines("recording on an outside trigger").isEmpty, "\(agent.output)")
        #expect(agent.lines("motion detection off").isEmpty, "\(agent.output)")
        #expect(
            live.messages.filter { $0.topic == "vigil/yard/motion" }.map(\.payload) == ["OFF"], "\(live.messages)")
        #expect(live.messages.filter { $0.topic == "vigil/yard/detect" }.map(\.payload) == ["ON"])

        try publish(broker, "vigil/yard/record/set", "5")
        #expect(agent.waitForClips(), "\(agent.output)")
        #expect(
            live.waitFor(timeout: 10) { $0.contains { $0.payload.contains("\"type\":\"saved\"") } }, "\(live.messages)")
        #expect(agent.stop() == .stopped)
        live.stop()
        // The one counted is said at the stop.
        let counted = agent.lines("MQTT commands ignored, not logged one by one")
        #expect(counted.map { logValue($0, "count") } == ["1"], "\(agent.output)")
        #expect(
            counted.first.flatMap { logValue($0, "last") }
                == "vigil/yard/detect/set: \"maybe\" is no command — send ON or OFF", "\(counted)")

        #expect(agent.clipFiles.count == 1, "\(agent.clipFiles)")
        #expect(agent.lines("source open").count == 1, "\(agent.output)")
        let recording = agent.lines("recording on an outside trigger")
        #expect(recording.count == 1 && recording.first.flatMap { logValue($0, "asked_by") } == "mqtt", "\(recording)")
        let journal = try #require(agent.storage.contents(EventsJournal.name))
        let lines = String(decoding: journal, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 1 && lines.allSatisfy { $0.contains("\"trigger\":\"external\"") }, "\(lines)")

        let events = live.messages.filter { $0.topic == "vigil/yard/event" }.map { json($0.payload) }
        #expect(events.map { $0["type"] as? String } == ["start", "end", "saved"], "\(events)")
        #expect(events.allSatisfy { $0["trigger"] as? String == "external" }, "\(events)")
        #expect(events.last?["clip"] as? String == agent.clipFiles.first)
        #expect(live.messages.filter { $0.topic == "vigil/yard/motion" }.map(\.payload) == ["OFF", "ON", "OFF"])
        #expect(live.messages.filter { $0.topic == "vigil/yard/detect" }.map(\.payload) == ["ON"])
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    // MARK: Helpers

    func publish(_ broker: Broker, _ topic: String, _ payload: String, retain: Bool = false) throws {
        let result = try runTool(
            which("mosquitto_pub") ?? "/usr/bin/mosquitto_pub",
            ["-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-t", topic, "-m", payload] + (retain ? ["-r"] : []))
        try #require(result.status == 0, "mosquitto_pub \(topic) \(payload): \(result)")
    }

    func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }
}

/// Where a scene stands still until the test lets it go on: `waitUntilHeld(n)` once the
/// source has reached the `n`th gate, `open(n)` to let it pass.
final class Gates: Sendable {
    private let state = Mutex<(held: Int?, open: Set<Int>)>((nil, []))

    /// Whether gate `n` is open; the source says where it is held.
    func pass(_ n: Int) -> Bool {
        state.withLock { state in
            if state.open.contains(n) { return true }
            state.held = n
            return false
        }
    }

    func open(_ n: Int) { state.withLock { _ = $0.open.insert(n) } }

    /// Waits until the source is held at gate `n`; false if it was not within `timeout` seconds.
    func waitUntilHeld(_ n: Int, timeout: Double = 60) -> Bool {
        waitUntil(timeout: timeout) { state.withLock { $0.held == n } }
    }
}

/// `scene` as a camera gives it: one frame per frame interval, stamped on the monotonic
/// clock. At each of `at` (seconds into the scene) it waits for its gate, showing the same
/// picture meanwhile — frames keep coming, so the agent takes requests while it waits.
final class GatedScene: FrameSource {
    private let scene: SyntheticSource
    private let gates: Gates
    private var stops: [(gate: Int, at: Double)]
    private var index: Int64 = 0
    private var delivered: Int64 = 0
    private var origin: Timestamp?
    /// A gate no test opens lets the scene go on after this many seconds.
    private let patience = 120.0
    private var heldSince: Date?

    init(_ scene: SyntheticScene, gates: Gates, at: [Double]) throws(CaptureError) {
        self.scene = try SyntheticSource(scene: scene)
        self.gates = gates
        stops = at.enumerated().map { (gate: $0.offset, at: $0.element) }
    }

    var format: VideoFormat { scene.format }
    var name: String { "synthetic" }

    func nextFrame() throws(CaptureError) -> VideoFrame? {
        if let count = scene.scene.frameCount, index >= count { return nil }
        let rate = scene.scene.frameRate
        let frame = scene.frame(index)
        var held = false
        if let stop = stops.first, frame.timestamp.seconds >= stop.at, !gates.pass(stop.gate) {
            heldSince = heldSince ?? Date()
            held = Date().timeIntervalSince(heldSince ?? Date()) < patience
        }
        if !held {
            if let stop = stops.first, frame.timestamp.seconds >= stop.at {
                stops.removeFirst()
                heldSince = nil
            }
            index += 1
        }
        let start = origin ?? Clock.monotonic.now()
        origin = start
        let due = start + (Timestamp(frameIndex: delivered, rate: rate) - .zero)
        Clock.sleep(untilMonotonic: due)
        delivered += 1
        return VideoFrame(format: frame.format, buffer: frame.buffer, timestamp: due, sequence: UInt64(delivered - 1))
    }
}

extension AgentHarness {
    /// The agent in process as `vigil run` makes it with `mqtt.enabled`: an `MQTTSink` on the
    /// test's broker at `port` taking commands for the agent's `AgentControl`; the camera `yard`
    /// a synthetic scene in real time (`GatedScene`: it waits at `at` for `gates`), clips in
    /// memory, log lines kept. `mqtt`: more of the `mqtt` section.
    static func mqtt(
        port: Int, scene: SyntheticScene, mqtt: String = "", gates: Gates = Gates(), at: [Double] = []
    ) throws -> AgentHarness {
        try AgentHarness(
            config: testConfig(
                extra: "mqtt = { enabled = true; host = \"127.0.0.1\"; port = \(port); keepalive = 5; \(mqtt) };"),
            openSource: { _ throws(CaptureError) in
                OpenedSource(source: try GatedScene(scene, gates: gates, at: at), isLive: true)
            },
            sinks: { settings, control, log in
                [
                    try MQTTSink(
                        settings: settings.mqtt, camera: settings.camera.name, log: log, timeZone: SystemTimeZone(),
                        control: control, version: "test")
                ]
            })
    }

    /// Stops the agent if it runs and waits for it: what `run()` returned (again on later calls).
    @discardableResult
    func stop() -> Agent.Outcome? { stopAndWait() }
}
