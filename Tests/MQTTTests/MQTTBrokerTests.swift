import Capture
import Foundation
import Media
import TestSupport
import Testing

/// The agent's events on a real broker (`vigil run` as a child process).
@Suite(.serialized) struct MQTTBrokerTests {
    /// An agent's configuration: `footage` read in real time (or not), or the synthetic
    /// scene with `footage` nil; the broker at `host`:`port`, with `mqtt` added to the section.
    func config(
        _ dir: TemporaryDirectory, footage: String?, port: Int, realtime: Bool = true, mqtt: String = "",
        host: String = "127.0.0.1", camera: String = "yard", clips: String = "clips", extra: String = ""
    ) throws -> String {
        let path = dir.file("vigil-\(UUID().uuidString).conf")
        let device =
            footage.map { "device = \"file:\($0)\"; realtime = \(realtime);" }
            ?? "device = \"synthetic\"; width = 320; height = 240; fps = 10.0;"
        try """
        camera = { \(device) name = "\(camera)"; };
        recording = { pre_roll = 1.0; post_roll = 1.0; };
        storage = { path = "\(dir.file(clips))"; min_free_mb = 1; };
        log = { stats_interval = 1; };
        mqtt = { enabled = true; host = "\(host)"; port = \(port); keepalive = 5; \(mqtt) };
        \(extra)
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }

    /// Two events in a file read in real time: every topic with its payload, in order, the
    /// retained ones retained, and `offline` after the clean stop.
    @Test func everyTopicWithItsPayloadAcrossTwoEvents() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let footage = try writeFootage(
            scene(seconds: 12, objects: [crossing(1, 3), crossing(7, 9)]), to: dir.file("two.y4m"))
        let live = try Subscriber(port: broker.port, topic: "vigil/#", in: dir)
        let agent = try AgentProcess(config: config(dir, footage: footage, port: broker.port))
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        #expect(live.waitFor(timeout: 10) { $0.last?.payload == "offline" }, "\(live.messages)")
        live.stop()
        let messages = live.messages
        #expect(!logLines(agent.output, "MQTT connected").isEmpty, "\(agent.output)")

        func on(_ topic: String) -> [Subscriber.Message] { messages.filter { $0.topic == "vigil/yard/" + topic } }
        #expect(on("availability").map(\.payload) == ["online", "offline"])
        // The state at the connection, then each event's.
        #expect(on("motion").map(\.payload) == ["OFF", "ON", "OFF", "ON", "OFF"])

        // The event topic: start, end and saved for each event, in that order, naming its clip.
        let events = on("event").map { json($0.payload) }
        let phases = events.map { "\($0["type"] ?? "?")\($0["event"] ?? "?")" }
        #expect(phases == ["start1", "end1", "saved1", "start2", "end2", "saved2"], "\(phases)")
        let clips = movieFiles(in: dir.file("clips"))
        #expect(clips.count == 2)
        let saved = events.filter { $0["type"] as? String == "saved" }
        #expect(Set(saved.compactMap { $0["clip"] as? String }) == Set(clips), "\(saved)")
        for event in saved {
            #expect(event["camera"] as? String == "yard")
            #expect((event["duration_s"] as? Double ?? 0) > 2, "\(event)")
            #expect((event["preroll_s"] as? Double ?? 0) > 0.5, "\(event)")
            #expect((event["start"] as? String)?.hasSuffix("Z") == true, "\(event)")
            #expect(event["trigger"] as? String == "motion")
        }
        let starts = events.filter { $0["type"] as? String == "start" }
        #expect(starts.map { $0["clip"] as? String } == saved.map { $0["clip"] as? String })

        // Each saved clip's picture: its JPEG on `snapshot`, the very bytes beside the clip that
        // `saved` names, and `last_clip` after it.
        let pictures = on("snapshot")
        #expect(pictures.count == 2 && pictures.allSatisfy { $0.bytes.starts(with: [0xFF, 0xD8]) })
        for (event, picture) in zip(saved, pictures) {
            let file = try #require(event["snapshot"] as? String, "\(event)")
            let onDisk = try Data(contentsOf: URL(fileURLWithPath: dir.file("clips") + "/" + file))
            #expect([UInt8](onDisk) == picture.bytes, "\(file)")
        }
        #expect(on("last_clip").map(\.payload) == saved.compactMap { $0["clip"] as? String })

        // Stats, once a second of wall clock: the figures as numbers.
        let stats = on("stats").map { json($0.payload) }
        #expect(stats.count >= 5, "\(stats.count) stats messages")
        #expect(stats.allSatisfy { ($0["frames_total"] as? Int ?? -1) >= 0 && $0["camera"] as? String == "yard" })

        // What a newcomer gets: the retained state, the newest clip, the detection switch's
        // state and the last stats among it.
        let later = try Subscriber(port: broker.port, topic: "vigil/#", in: dir)
        #expect(later.waitFor(timeout: 5) { $0.count >= 6 })
        later.stop()
        #expect(later.messages.first { $0.topic == "vigil/yard/snapshot" }?.bytes == pictures.last?.bytes)
        let lastStats = later.messages.first { $0.topic == "vigil/yard/stats" }
        #expect(lastStats?.retained == true && lastStats?.payload == on("stats").last?.payload, "\(later.messages)")
        // Who connected last with this client id: this agent.
        let presence = later.messages.first { $0.topic.hasPrefix("vigil/client.id/") }
        #expect(presence?.retained == true && json(presence?.payload ?? "")["camera"] as? String == "yard")
        #expect(
            Set(
                later.messages.filter {
                    $0.topic != "vigil/yard/snapshot" && $0.topic != "vigil/yard/stats" && $0.topic != presence?.topic
                }.map {
                    "\($0.topic)=\($0.payload) \($0.retained)"
                })
                == [
                    "vigil/yard/availability=offline true", "vigil/yard/motion=OFF true", "vigil/yard/detect=ON true",
                    "vigil/yard/last_clip=\(clips.last ?? "?") true",
                ], "\(later.messages.filter { $0.topic != "vigil/yard/snapshot" })")
    }

    /// SIGTERM mid-event with MQTT on: the agent, not libmosquitto's thread, takes it — the
    /// clip is finished, `offline` said, and the exit is 0.
    @Test func sigtermMidEventStopsCleanly() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let footage = try writeFootage(scene(seconds: 30, objects: [crossing(1, 20)]), to: dir.file("long.y4m"))
        let watcher = try Subscriber(port: broker.port, topic: "vigil/yard/availability", in: dir)
        let agent = try AgentProcess(config: config(dir, footage: footage, port: broker.port))
        #expect(watcher.waitFor(timeout: 30) { $0.last?.payload == "online" }, "\(agent.output)")
        #expect(agent.waitUntil(timeout: 30) { !movieFiles(in: dir.file("clips")).isEmpty }, "\(agent.output)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
        #expect(!logLines(agent.output, "clip saved").isEmpty, "\(agent.output)")
        #expect(watcher.waitFor(timeout: 5) { $0.last?.payload == "offline" }, "\(watcher.messages)")
        let clips = movieFiles(in: dir.file("clips"))
        #expect(clips.count == 1)
        for clip in clips { _ = try expectPlayable(dir.file("clips") + "/" + clip, "the clip cut short:") }
    }

    /// A killed agent cannot say goodbye: the broker publishes its last will.
    @Test func theLastWillArrivesAfterSIGKILL() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let footage = try writeFootage(scene(seconds: 30, objects: [crossing(1, 3)]), to: dir.file("long.y4m"))
        let agent = try AgentProcess(config: config(dir, footage: footage, port: broker.port))
        let watcher = try Subscriber(port: broker.port, topic: "vigil/yard/availability", in: dir)
        #expect(watcher.waitFor(timeout: 30) { $0.last?.payload == "online" }, "\(watcher.messages)\n\(agent.output)")
        agent.kill(SIGKILL)
        _ = agent.waitForExit(timeout: 10)
        #expect(watcher.waitFor(timeout: 15) { $0.last?.payload == "offline" }, "\(watcher.messages)")
    }

    /// The agent on `footage`, with the broker on `port` and `mqtt` added to its `mqtt` group,
    /// run to the footage's end: it exits 0, whatever the broker did.
    func runToItsEnd(
        _ dir: TemporaryDirectory, footage: String, port: Int, mqtt: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> AgentProcess {
        let agent = try AgentProcess(config: config(dir, footage: footage, port: port, realtime: false, mqtt: mqtt))
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)", sourceLocation: sourceLocation)
        return agent
    }

    /// A broker that wants a login: the password comes from a file, and a wrong one is said
    /// once in the log while recording goes on.
    @Test func usernameAndPasswordFromAFile() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let passwords = dir.file("passwords")
        let made = try runTool(
            which("mosquitto_passwd") ?? "/usr/bin/mosquitto_passwd", ["-c", "-b", passwords, "cam", "s3cret"])
        try #require(made.status == 0, "\(made)")
        let broker = try Broker(dir, settings: "allow_anonymous false\npassword_file \(passwords)")
        let footage = try writeFootage(scene(seconds: 5, objects: [crossing(1, 3)]), to: dir.file("short.y4m"))
        try "s3cret\n".write(toFile: dir.file("good"), atomically: true, encoding: .utf8)
        try "wrong\n".write(toFile: dir.file("bad"), atomically: true, encoding: .utf8)

        let watcher = try Subscriber(
            port: broker.port, topic: "vigil/#", in: dir, arguments: ["-u", "cam", "-P", "s3cret"])
        let good = try runToItsEnd(
            dir, footage: footage, port: broker.port, mqtt: "username = \"cam\"; password_file = \"good\";")
        #expect(!logLines(good.output, "MQTT connected").isEmpty, "\(good.output)")
        #expect(watcher.waitFor(timeout: 5) { $0.contains { $0.payload == "offline" } }, "\(watcher.messages)")

        let bad = try runToItsEnd(
            dir, footage: footage, port: broker.port, mqtt: "username = \"cam\"; password_file = \"bad\";")
        let refused = logLines(bad.output, "MQTT broker refused the connection; trying again")
        #expect(refused.count == 1, "\(bad.output)")
        #expect(refused.first.flatMap { logValue($0, "error") }?.contains("not authorised") == true, "\(refused)")
        #expect(logLines(bad.output, "clip saved").count == 1, "recording went on")
        #expect(
            logLines(bad.output, "MQTT messages not delivered: the broker was unreachable when the agent stopped")
                .count == 1)
    }

    /// With the web server at an address others reach (`web.url`) and a live picture: the
    /// saved event and `last_clip` link the clip, the live JPEG comes on `live` (not retained),
    /// and Home Assistant hears of the event and camera entities.
    @Test func linksToTheClipAndTheLivePictureWithTheWebServerOn() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let watcher = try Subscriber(port: broker.port, topic: "#", in: dir)
        let footage = try writeFootage(scene(seconds: 6, objects: [crossing(1, 3)]), to: dir.file("short.y4m"))
        let agent = try AgentProcess(
            config: config(
                dir, footage: footage, port: broker.port,
                extra: """
                    web = { enabled = true; port = 0; url = "http://garage.local:8080/"; };
                    snapshot = { live_interval = 1.0; };
                    """))
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(
            watcher.waitFor(timeout: 10) { m in m.contains { $0.topic == "vigil/yard/last_clip" } },
            "\(watcher.messages.map(\.topic))")
        let messages = watcher.messages
        let saved = try #require(
            messages.map { json($0.payload) }.first { $0["type"] as? String == "saved" }, "\(messages.map(\.topic))")
        let file = try #require(saved["file"] as? String)
        let picture = try #require(saved["snapshot"] as? String)
        #expect(saved["event_type"] as? String == "saved")
        #expect(saved["url"] as? String == "http://garage.local:8080/clips/" + file, "\(saved)")
        #expect(saved["snapshot_url"] as? String == "http://garage.local:8080/clips/" + picture, "\(saved)")
        #expect(
            messages.last { $0.topic == "vigil/yard/last_clip" }?.payload == "http://garage.local:8080/clips/" + file)
        // The live picture, a JPEG each second, none retained.
        let live = messages.filter { $0.topic == "vigil/yard/live" }
        #expect(live.count >= 3, "\(live.count) live pictures")
        #expect(live.allSatisfy { !$0.retained && $0.bytes.starts(with: [0xFF, 0xD8, 0xFF]) })
        // The entities.
        let configs = Set(messages.map(\.topic).filter { $0.hasPrefix("homeassistant/") })
        #expect(configs.contains("homeassistant/camera/vigil_yard/live/config"), "\(configs)")
        #expect(configs.contains("homeassistant/event/vigil_yard/event/config"), "\(configs)")
    }

    /// TLS with a CA the test makes: the agent trusts the broker's certificate through
    /// `mqtt.tls_ca_file`; with another CA it does not connect, says so, and records on.
    @Test func tlsWithATestCA() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let certificates = try TestCertificates(in: dir, name: "ca")
        let other = try TestCertificates(in: dir, name: "other")
        let broker = try Broker(
            dir,
            settings: """
                cafile \(certificates.caCertificate)
                certfile \(certificates.certificate)
                keyfile \(certificates.key)
                allow_anonymous true
                """)
        let footage = try writeFootage(scene(seconds: 5, objects: [crossing(1, 3)]), to: dir.file("short.y4m"))
        let watcher = try Subscriber(
            port: broker.port, topic: "vigil/#", in: dir, arguments: ["--cafile", certificates.caCertificate])

        let trusted = try runToItsEnd(
            dir, footage: footage, port: broker.port, mqtt: "tls_ca_file = \"\(certificates.caCertificate)\";")
        #expect(!logLines(trusted.output, "MQTT connected").isEmpty, "\(trusted.output)")
        #expect(
            watcher.waitFor(timeout: 5) { m in m.contains { $0.payload.contains("\"type\":\"saved\"") } },
            "\(watcher.messages)")

        let untrusted = try runToItsEnd(
            dir, footage: footage, port: broker.port, mqtt: "tls_ca_file = \"\(other.caCertificate)\";")
        #expect(logLines(untrusted.output, "MQTT connected").isEmpty, "\(untrusted.output)")
        #expect(logLines(untrusted.output, "clip saved").count == 1, "recording went on")
        #expect(
            logLines(untrusted.output, "MQTT messages not delivered: the broker was unreachable when the agent stopped")
                .count == 1, "\(untrusted.output)")
    }

    /// The broker dies in the middle of an event with messages in flight (frozen first, so
    /// that it acknowledges nothing of the event's start, then killed) and comes back: the
    /// agent sends again what was in flight, then what happened meanwhile, in order — a
    /// subscriber with a lasting session misses nothing and sees nothing out of order.
    @Test func aBrokerRestartedMidEventLosesNothingAndKeepsTheOrder() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir, persistence: true)
        let footage = try writeFootage(
            scene(seconds: 14, objects: [crossing(1, 4), crossing(9, 11)]), to: dir.file("two.y4m"))
        let live = try Subscriber(
            port: broker.port, topic: "vigil/#", in: dir, arguments: ["-c", "-i", "vigil-test-subscriber"])
        usleep(1_500_000)  // the subscriber's session saved by the broker
        let agent = try AgentProcess(config: config(dir, footage: footage, port: broker.port))
        #expect(
            live.waitFor(timeout: 60) {
                $0.contains { $0.topic == "vigil/yard/availability" && $0.payload == "online" }
            },
            "\(agent.output)")
        broker.pause()
        // The clip's file is made as the event starts (its motion said just before).
        #expect(agent.waitUntil(timeout: 60) { !movieFiles(in: dir.file("clips")).isEmpty }, "\(agent.output)")
        usleep(500_000)  // `ON` and the event's start sent into the frozen connection
        broker.stop()
        #expect(agent.waitFor("MQTT connection lost", timeout: 20) != nil, "\(agent.output)")
        sleep(2)
        try broker.restart()
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        #expect(!logLines(agent.output, "MQTT connected again").isEmpty, "\(agent.output)")
        #expect(live.waitFor(timeout: 15) { $0.last?.payload == "offline" }, "\(live.messages)")
        live.stop()

        // QoS 1 is at least once: a message in flight at the loss may come twice, one after
        // the other; nothing may be missing or out of order.
        func once(_ items: [String]) -> [String] {
            items.enumerated().filter { $0.offset == 0 || items[$0.offset - 1] != $0.element }.map(\.element)
        }
        let events = once(live.messages.filter { $0.topic == "vigil/yard/event" }.map(\.payload)).map(json)
        let phases = events.map { "\($0["type"] ?? "?")\($0["event"] ?? "?")" }
        #expect(phases == ["start1", "end1", "saved1", "start2", "end2", "saved2"], "\(phases)")
        // `motion` is a retained state: the broker hands its value again to a subscriber each
        // time it subscribes (mosquitto_sub does after the broker's restart), so a state may be
        // said more than once. It is never contradicted: ON and OFF alternate, both events
        // turned it on, and it ends OFF. (A run here saw the two events as ON OFF ON OFF ON OFF.)
        let motion = once(live.messages.filter { $0.topic == "vigil/yard/motion" }.map(\.payload))
        #expect(motion.allSatisfy { $0 == "ON" || $0 == "OFF" } && motion.last == "OFF", "\(motion)")
        #expect(motion.filter { $0 == "ON" }.count >= 2, "\(motion)")
    }
}
