import Agent
import AgentTestSupport
import Capture
import Configuration
import Foundation
import Logging
import MQTT
import Media
import POSIX
import TestSupport
import Testing

/// MQTT at each connection, against a real broker: what a newcomer (Home Assistant) gets
/// before the camera says `online`, a link that drops connections a few seconds after they
/// open (no take-over, each loss and reconnection said, nothing lost), and a stop while the
/// broker has stopped answering.
@Suite(.serialized) struct MQTTReconnectTests {
    let agents = MQTTBrokerTests()

    /// An `MQTTSink` for the camera `yard` on the broker (or a relay) at `port`, its lines in
    /// `logs`; `mqtt`: more of the `mqtt` section.
    func sink(
        port: Int, logs: MemoryLogSink, in dir: TemporaryDirectory, mqtt: String = ""
    ) throws -> MQTTSink {
        let path = dir.file("vigil-\(UUID().uuidString).conf")
        try testConfig(
            extra: "mqtt = { enabled = true; host = \"127.0.0.1\"; port = \(port); keepalive = 5; \(mqtt) };"
        ).write(toFile: path, atomically: true, encoding: .utf8)
        let settings = try Settings.load(path: path)
        return try MQTTSink(
            settings: settings.mqtt, camera: "yard", log: Logger(level: .debug, sink: logs), timeZone: SystemTimeZone(),
            version: "test")
    }

    /// The `n`th of a run of events the test makes: each its own `event` message (QoS 1, not
    /// retained), `clip-n.mov` in it.
    func uploaded(_ n: Int) -> AgentEvent {
        .clipUploaded(
            ClipUploaded(
                file: "clip-\(n).mov", path: "/srv/clip-\(n).mov", camera: "yard", url: "s3://b/clip-\(n).mov",
                bytes: 1000, seconds: 0.5, at: "2026-12-03T10:15:00.000+01:00", waiting: 0))
    }

    /// The clips the `event` messages name, in the order they came.
    func clips(_ messages: [Subscriber.Message]) -> [String] {
        messages.filter { $0.topic == "vigil/yard/event" }.compactMap {
            agents.json($0.payload)["clip"] as? String
        }
    }

    func lines(_ logs: MemoryLogSink, _ message: String) -> [String] {
        logLines(logs.written.joined(separator: "\n"), message)
    }

    /// How many times the camera said `online` (once at each connection, last).
    func onlines(_ messages: [Subscriber.Message]) -> Int {
        messages.filter { $0.topic == "vigil/yard/availability" && $0.payload == "online" }.count
    }

    // MARK: A flaky link

    /// The link to the broker drops each connection 2 to 5 s after it opens, three times, then
    /// holds (a bad Wi-Fi, a router restarting): no take-over is concluded from that — each
    /// loss is said as a loss and each reconnection as one, the sink is connected again within
    /// a few seconds of the link holding, the retained states go before `online` at every
    /// connection, and none of the events handed to it meanwhile is lost (QoS 1: some perhaps
    /// twice), in order.
    @Test func aFlakyLinkIsNoTakeOverAndLosesNothing() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let relay = try NetworkRelay(to: broker.port)
        defer { relay.stop() }
        relay.dropConnections(3, after: 2...5)
        // A subscriber with a lasting session, straight on the broker.
        let live = try Subscriber(
            port: broker.port, topic: "vigil/#", in: dir, arguments: ["-c", "-i", "vigil-test-flaky"])
        let logs = MemoryLogSink()
        let sink = try sink(port: relay.port, logs: logs, in: dir)
        var sent = 0
        /// Hands the sink the next event for `seconds`, one every 100 ms, or until `until` holds.
        func send(for seconds: Double, until: () -> Bool = { false }) {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline && !until() {
                sink.handle(uploaded(sent))
                sent += 1
                usleep(100_000)
            }
        }
        send(for: 120) { relay.connectionsDropped == 3 }
        #expect(relay.connectionsDropped == 3, "\(logs.written)")
        // The link holds from here: connected again within a few seconds (30: gave up waiting),
        // the fourth connection's `online` on the broker.
        send(for: 30) { onlines(live.messages) == 4 }
        #expect(onlines(live.messages) == 4, "\(live.messages.map(\.topic))")
        #expect(lines(logs, "MQTT connected again").count == 3, "\(logs.written)")
        send(for: 2)
        #expect(
            live.waitFor(timeout: 30) { clips($0).contains("clip-\(sent - 1).mov") },
            "\(clips(live.messages).suffix(5))")
        sink.finish()
        live.stop()

        // No take-over: nothing said at error level.
        #expect(logs.written(at: .error).isEmpty, "\(logs.written(at: .error))")
        let lost = lines(logs, "MQTT connection lost; reconnecting, and queueing what happens meanwhile")
        #expect(lost.count == 3, "\(logs.written)")
        #expect(lines(logs, "MQTT connected").count == 1, "\(logs.written)")
        // Every event, in order; one sent again after a loss may come twice.
        let received = clips(live.messages)
        var firsts: [String] = []
        for clip in received where !firsts.contains(clip) { firsts.append(clip) }
        #expect(firsts == (0..<sent).map { "clip-\($0).mov" }, "\(sent) sent, \(received)")
        // At every connection, the first and each after a loss (the broker said the will,
        // `offline`): the motion state before `online`.
        let states = live.messages.filter {
            $0.topic == "vigil/yard/availability" || $0.topic == "vigil/yard/motion"
        }.map { "\($0.topic.split(separator: "/").last ?? "")=\($0.payload)" }
        let connections = states.split(separator: "availability=offline", omittingEmptySubsequences: false)
        #expect(connections.count == 5, "\(states)")  // three losses, the stop
        for connection in connections.dropLast() {
            #expect(
                connection.firstIndex(of: "motion=OFF").map {
                    $0 < (connection.lastIndex(of: "availability=online") ?? -1)
                }
                    == true, "\(states)")
        }
    }

    // MARK: An agent killed mid-event

    /// An agent killed in the middle of an event leaves `motion` ON retained and its will
    /// says `offline`. Home Assistant, subscribed before the next agent connects, must see
    /// motion `OFF` (and every config and state) before that agent's `online`: else it shows
    /// the dead event's motion ON for a moment, and an automation on motion turning on fires.
    @Test func afterAnAgentKilledMidEventMotionIsOffBeforeOnline() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let long = try writeFootage(scene(seconds: 60, objects: [crossing(1, 55)]), to: dir.file("long.y4m"))
        let killed = try AgentProcess(config: agents.config(dir, footage: long, port: broker.port, clips: "first"))
        #expect(
            try MQTTBadDayTests().retained(broker, "vigil/yard/motion", is: "ON", in: dir, timeout: 60),
            "\(killed.output)")
        killed.kill(SIGKILL)
        _ = killed.waitForExit(timeout: 10)

        let watcher = try Subscriber(port: broker.port, topic: "#", in: dir)
        #expect(
            watcher.waitFor(timeout: 15) { $0.last { $0.topic == "vigil/yard/availability" }?.payload == "offline" },
            "\(watcher.messages)")
        let still = try writeFootage(scene(seconds: 60, objects: []), to: dir.file("still.y4m"))
        let next = try AgentProcess(config: agents.config(dir, footage: still, port: broker.port, clips: "second"))
        defer { _ = next.waitForExit(timeout: 1) }
        #expect(
            watcher.waitFor(timeout: 45) {
                $0.contains { $0.topic == "vigil/yard/availability" && $0.payload == "online" }
            },
            "\(watcher.messages)\n\(next.output)")
        next.kill(SIGTERM)
        #expect(next.waitForExit(timeout: 30) == 0, "\(next.output)")
        watcher.stop()

        // What came from the next agent up to its `online`, in the order it came.
        let sent = watcher.messages.filter { !$0.retained }
        let online = try #require(
            sent.firstIndex { $0.topic == "vigil/yard/availability" && $0.payload == "online" })
        let before = sent[..<online]
        #expect(
            before.contains { $0.topic == "vigil/yard/motion" && $0.payload == "OFF" },
            "\(sent.map { "\($0.topic)=\($0.payload.prefix(12))" })")
        #expect(before.contains { $0.topic == "vigil/yard/detect" && $0.payload == "ON" })
        #expect(before.filter { $0.topic.hasPrefix("homeassistant/") }.count == 7, "\(before.map(\.topic))")
    }

    // MARK: A stop while the broker does not answer

    /// The broker stops answering (frozen: the connection stays open, nothing is read or
    /// acknowledged) with messages in flight, and the agent stops: the sink lets go in time
    /// for the agent, which gives its sinks 2 s side by side (3 s here: gave up waiting), says
    /// what was not acknowledged, and the broker says the agent `offline` once it answers
    /// again — no clean goodbye that would keep its `online`.
    @Test func finishLetsGoOfABrokerThatStoppedAnswering() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let logs = MemoryLogSink()
        let online = try Subscriber(port: broker.port, topic: "vigil/yard/availability", in: dir)
        let sink = try sink(port: broker.port, logs: logs, in: dir)
        #expect(online.waitFor(timeout: 30) { $0.last?.payload == "online" }, "\(logs.written)")
        online.stop()
        usleep(500_000)  // the connection's messages acknowledged
        broker.pause()
        defer { broker.resume() }
        for n in 0..<50 { sink.handle(uploaded(n)) }
        usleep(300_000)

        let returned = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            sink.finish()
            returned.signal()
        }
        #expect(returned.wait(timeout: .now() + 3) == .success, "finish() still waits: \(logs.written)")
        let unacknowledged = lines(
            logs, "MQTT messages not acknowledged: the broker stopped answering before the agent stopped")
        #expect(unacknowledged.count == 1, "\(logs.written)")
        #expect(unacknowledged.first.flatMap { logValue($0, "unacknowledged") }.flatMap { Int($0) } ?? 0 > 0)

        broker.resume()
        let watcher = try Subscriber(port: broker.port, topic: "vigil/yard/availability", in: dir)
        #expect(watcher.waitFor(timeout: 30) { $0.last?.payload == "offline" }, "\(watcher.messages)")
    }
}
