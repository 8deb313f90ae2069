import AgentTestSupport
import Capture
import Foundation
import Media
import TestSupport
import Testing

/// MQTT on a bad day, against a real broker: a broker that comes up after the agent, a name
/// that does not resolve yet, a name server that never answers, a signal in the middle of
/// the start, two agents with one client id, Home Assistant saying `online` in a loop, a
/// flood of commands that say nothing, an agent killed in the middle of an event, a password
/// file that is not there (or is a device), a broker that takes connections and never answers.
@Suite(.serialized) struct MQTTBadDayTests {
    let agents = MQTTBrokerTests()
    let unreachable = "MQTT broker not reachable yet; trying again in the background"

    // MARK: The broker comes later

    /// The broker is down when the agent starts (after a power cut the board that runs it
    /// often boots later): the agent records meanwhile, connects within a few seconds of the
    /// broker coming up, and what happened meanwhile arrives — a subscriber with a lasting
    /// session gets the whole event.
    @Test func anAgentStartedBeforeItsBrokerConnectsWhenTheBrokerComesUp() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir, persistence: true)
        let live = try Subscriber(
            port: broker.port, topic: "vigil/#", in: dir, arguments: ["-c", "-i", "vigil-test-subscriber"])
        usleep(1_500_000)  // the subscriber's session saved by the broker
        broker.stop()
        let footage = try writeFootage(scene(seconds: 60, objects: [crossing(1, 3)]), to: dir.file("late.y4m"))
        let agent = try AgentProcess(config: agents.config(dir, footage: footage, port: broker.port))
        defer { _ = agent.waitForExit(timeout: 1) }
        let refused = agent.waitFor("MQTT broker not reachable yet", timeout: 30)
        #expect(refused.flatMap { logValue($0, "error") } == "Connection refused", "\(agent.output)")
        #expect(agent.waitUntil(timeout: 60) { !journalRecords(in: dir.file("clips")).isEmpty }, "\(agent.output)")

        try broker.restart()
        #expect(try online(broker, in: dir), "\(agent.output)")
        #expect(
            live.waitFor(timeout: 30) { messages in
                messages.contains { $0.topic == "vigil/yard/event" && $0.payload.contains("\"type\":\"saved\"") }
            }, "\(live.messages)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
        #expect(!logLines(agent.output, "vigil running").isEmpty, "recording did not wait for MQTT")
        #expect(live.waitFor(timeout: 10) { $0.last?.payload == "offline" }, "\(live.messages)")
        live.stop()
        let phases = live.messages.filter { $0.topic == "vigil/yard/event" }.map {
            agents.json($0.payload)["type"] as? String ?? "?"
        }
        #expect(phases == ["start", "end", "saved"], "\(phases)")
        let motion = live.messages.filter { $0.topic == "vigil/yard/motion" }.map(\.payload)
        #expect(motion.last == "OFF" && motion.contains("ON"), "\(motion)")
    }

    /// The broker's name does not resolve at first (the name server, or the router that
    /// serves it, is not up yet): said once, and the agent connects once it does.
    @Test(.enabled(if: NameService.isAvailable, NameService.unavailable))
    func aBrokerNameThatDoesNotResolveYet() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let names = try NameService(dir, stalled: false)
        let broker = try Broker(dir)
        let footage = try writeFootage(scene(seconds: 60, objects: []), to: dir.file("still.y4m"))
        let agent = try AgentProcess(
            config: agents.config(dir, footage: footage, port: broker.port, host: NameService.brokerName),
            launcher: names.launcher)
        defer { _ = agent.waitForExit(timeout: 1) }
        let failed = agent.waitFor("MQTT broker not reachable yet", timeout: 30)
        #expect(
            failed.flatMap { logValue($0, "error") }?.hasPrefix("\(NameService.brokerName) does not resolve") == true,
            "\(agent.output)")
        try names.add(NameService.brokerName, "127.0.0.1")
        #expect(try online(broker, in: dir), "\(agent.output)")
        #expect(logLines(agent.output, unreachable).count == 1, "\(agent.output)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
    }

    // MARK: Nothing about MQTT delays recording, or a signal

    /// A name server that takes the query and never answers (each lookup waits 150 s here):
    /// the agent starts recording at once, saves its clip, and stops when asked — the lookup
    /// goes on in MQTT's own thread.
    @Test(.enabled(if: NameService.isAvailable, NameService.unavailable))
    func aNameServerThatNeverAnswersDelaysNothing() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let (names, agent) = try agentLookingUpItsBroker(in: dir, objects: [crossing(1, 3)])
        defer { _ = (names, agent.waitForExit(timeout: 1)) }
        #expect(agent.waitUntil(timeout: 90) { !journalRecords(in: dir.file("clips")).isEmpty }, "\(agent.output)")
        #expect(logLines(agent.output, unreachable).isEmpty, "the lookup has not ended")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
        #expect(!logLines(agent.output, "vigil running").isEmpty, "\(agent.output)")
        #expect(!logLines(agent.output, "vigil stopped").isEmpty, "\(agent.output)")
    }

    /// A SIGHUP while MQTT is being set up (its name lookup under way) reloads the
    /// configuration, as it does later; it does not end the agent.
    @Test(.enabled(if: NameService.isAvailable, NameService.unavailable))
    func aSIGHUPWhileMQTTIsSetUpReloads() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let (names, agent) = try agentLookingUpItsBroker(in: dir, objects: [])
        defer { _ = (names, agent.waitForExit(timeout: 1)) }
        agent.kill(SIGHUP)
        #expect(
            agent.waitFor("msg=\"configuration reloaded; it applies from the next clip\"", timeout: 30) != nil,
            "\(agent.output)")
        #expect(agent.isRunning, "\(agent.output)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
    }

    /// An agent on a minute of footage with `objects`, whose broker's name it looks up from a
    /// name server that never answers: returned once its query has come.
    func agentLookingUpItsBroker(
        in dir: TemporaryDirectory, objects: [SceneObject]
    ) throws -> (NameService, AgentProcess) {
        let names = try NameService(dir, stalled: true)
        let footage = try writeFootage(scene(seconds: 60, objects: objects), to: dir.file("yard.y4m"))
        let agent = try AgentProcess(
            config: agents.config(dir, footage: footage, port: 1883, host: NameService.brokerName),
            launcher: names.launcher)
        #expect(names.waitForQuery(timeout: 30), "no lookup of the broker's name: \(agent.output)")
        return (names, agent)
    }

    // MARK: Two agents, one client id

    /// Two agents with one camera name on two machines: each has a client id of its own (the
    /// machine's name in it), so neither throws the other off the broker.
    @Test(.enabled(if: NameService.isAvailable, NameService.unavailable))
    func twoMachinesWithOneCameraNameHaveTwoClientIDs() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let unshare = try #require(which("unshare"))
        func machine(_ name: String) -> [String] {
            [unshare, "--uts", "/bin/sh", "-c", "hostname \(name) && exec \"$0\" \"$@\""]
        }
        let one = try AgentProcess(
            config: agents.config(dir, footage: nil, port: broker.port, clips: "one"), launcher: machine("pi-one"))
        let two = try AgentProcess(
            config: agents.config(dir, footage: nil, port: broker.port, clips: "two"), launcher: machine("pi-two"))
        defer { for agent in [one, two] { _ = agent.waitForExit(timeout: 1) } }
        // Each says who it is on its client id's topic (`ClientPresence`) once connected.
        let presences = try Subscriber(port: broker.port, topic: "vigil/client.id/#", in: dir)
        let ids = ["vigil/client.id/vigil-pi-one-yard", "vigil/client.id/vigil-pi-two-yard"]
        #expect(
            presences.waitFor(timeout: 30) { messages in ids.allSatisfy { id in messages.contains { $0.topic == id } }
            },
            "\(presences.messages.map(\.topic))\n\(one.output)\n\(two.output)")
        #expect(Set(presences.messages.map(\.topic)) == Set(ids), "\(presences.messages.map(\.topic))")
        // Long enough for either to have been thrown off, had they shared an id.
        sleep(6)
        for agent in [one, two] {
            #expect(!agent.output.contains("MQTT connection lost"), "\(agent.output)")
            agent.kill(SIGTERM)
            #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
        }
    }

    /// Two agents that still share a client id (set so, on purpose or by a copied
    /// configuration) take the connection from each other: each sees the other's presence on
    /// the client id's topic when it connects again, says so once with the fix and the other
    /// agent's camera, and tries less often once thrown off again — no storm.
    @Test func twoAgentsWithOneClientIDBackOffAndSaySo() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let mqtt = "client_id = \"clash\";"
        let one = try AgentProcess(
            config: agents.config(dir, footage: nil, port: broker.port, mqtt: mqtt, camera: "yard", clips: "one"))
        let two = try AgentProcess(
            config: agents.config(dir, footage: nil, port: broker.port, mqtt: mqtt, camera: "gate", clips: "two"))
        defer { for agent in [one, two] { _ = agent.waitForExit(timeout: 1) } }
        let message =
            "MQTT client id in use by another agent: the broker lets one connect at a time and each throws the other off — set mqtt.client_id or camera.name so that each has its own; trying again less often meanwhile"
        func said() -> [String] { logLines(one.output + "\n" + two.output, message) }
        // The error is the behaviour under test: nothing but the log says it.
        waitUntil(timeout: 90) { !said().isEmpty }
        #expect(said().first.flatMap { logValue($0, "client_id") } == "clash", "\(one.output)\n\(two.output)")
        #expect(said().first.flatMap { logValue($0, "level") } == "error")
        // Each names the other.
        #expect(logLines(one.output, message).allSatisfy { logValue($0, "other_camera") == "gate" })
        #expect(logLines(two.output, message).allSatisfy { logValue($0, "other_camera") == "yard" })
        // From then on, no storm: one holds the connection, the other waits a minute.
        let before = connections(broker, "clash")
        sleep(10)
        #expect(connections(broker, "clash") - before <= 2, "\(broker.log)")
        for agent in [one, two] {
            #expect(logLines(agent.output, message).count <= 1, "said once: \(agent.output)")
            agent.kill(SIGTERM)
            #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
        }
    }

    /// Connections the broker accepted from `clientID`.
    func connections(_ broker: Broker, _ clientID: String) -> Int {
        broker.log.split(separator: "\n").filter {
            $0.contains("New client connected") && $0.contains(" as \(clientID) ")
        }
        .count
    }

    // MARK: Home Assistant and commands in a loop

    /// Home Assistant saying `online` a thousand times: the configs go out again once or
    /// twice (at most every 5 s), not a thousand times.
    @Test func aBurstOfOnlinesBringsTheConfigsAFewTimesNotAThousand() throws {
        let dir = try TemporaryDirectory("vigil-ha")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let live = try Subscriber(port: broker.port, topic: "homeassistant/+/+/+/config", in: dir)
        let agent = try AgentHarness.mqtt(port: broker.port, scene: scene(seconds: 120, objects: []))
        agent.start()
        defer { _ = agent.stop() }
        // Seven entities (no camera: this agent makes no live picture).
        #expect(live.waitFor(timeout: 30) { $0.count == 7 }, "\(agent.output)")
        try publish(broker, "homeassistant/status", lines: Array(repeating: "online", count: 1000))
        #expect(live.waitFor(timeout: 30) { $0.count >= 14 }, "\(live.messages.count)")
        // The one held back is due 5 s after the last: then nothing more. (A burst is taken in
        // well under 5 s: one more, at most, at once and one after. On a machine so busy that
        // it took over 5 s, one more during it: 28.)
        sleep(8)
        #expect(live.messages.count <= 28, "\(live.messages.count) configs")
        #expect(agent.stop() == .stopped)
    }

    /// Five thousand commands that say nothing: one warning, then the count — not five
    /// thousand lines.
    @Test func aFloodOfBadCommandsIsLoggedOnceThenCounted() throws {
        let dir = try TemporaryDirectory("vigil-ha")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let agent = try AgentHarness.mqtt(port: broker.port, scene: scene(seconds: 120, objects: []))
        agent.start()
        defer { _ = agent.stop() }
        // `online` goes out after the subscriptions to the commands.
        #expect(try online(broker, in: dir), "subscribed to the commands by now: \(agent.output)")
        // A good command after them, from the same client on the same topic: it comes last.
        try publish(broker, "vigil/yard/record/set", lines: (0..<5000).map { "junk \($0)" } + ["5"])
        #expect(agent.waitUntil { agent.events.clipsStarted.contains { $0.cause == .external } }, "\(agent.output)")
        #expect(agent.stop() == .stopped)
        #expect(agent.lines("recording on an outside trigger").count == 1, "\(agent.output)")
        let said = agent.lines("MQTT command ignored")
        let counted = agent.lines("MQTT commands ignored, not logged one by one")
        #expect(said.count + counted.count <= 3, "\(said.count) + \(counted.count) lines")
        let total =
            said.count + said.compactMap { logValue($0, "not_logged").flatMap { Int($0) } }.reduce(0, +)
            + counted.compactMap { logValue($0, "count").flatMap { Int($0) } }.reduce(0, +)
        #expect(total == 5000, "\(said)\n\(counted)")
        #expect(said.first.flatMap { logValue($0, "error") }?.contains("\"junk 0\" is no command") == true)
        #expect(said.allSatisfy { logValue($0, "level") == "warning" })
    }

    /// Publishes each of `lines` as a message on `topic` (`mosquitto_pub -l`, QoS 0).
    func publish(_ broker: Broker, _ topic: String, lines: [String]) throws {
        let result = try runTool(
            which("mosquitto_pub") ?? "/usr/bin/mosquitto_pub",
            ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t", topic, "-l"],
            input: Data((lines.joined(separator: "\n") + "\n").utf8))
        try #require(result.status == 0, "mosquitto_pub -l \(topic): \(result)")
    }

    // MARK: What Home Assistant shows after a restart

    /// An agent killed in the middle of an event leaves `motion` ON retained; the next one
    /// says OFF as soon as it connects. Stats are retained (disk free is known to Home
    /// Assistant after it restarts).
    @Test func motionIsOffAndStatsAreKnownAfterAnAgentKilledMidEvent() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let long = try writeFootage(scene(seconds: 60, objects: [crossing(1, 55)]), to: dir.file("long.y4m"))
        let killed = try AgentProcess(
            config: agents.config(dir, footage: long, port: broker.port, clips: "first"))
        #expect(try retained(broker, "vigil/yard/motion", is: "ON", in: dir, timeout: 60), "\(killed.output)")
        killed.kill(SIGKILL)
        _ = killed.waitForExit(timeout: 10)

        let still = try writeFootage(scene(seconds: 60, objects: []), to: dir.file("still.y4m"))
        // The next agent's stats as they go out (what the killed one left comes retained).
        let sent = try Subscriber(port: broker.port, topic: "vigil/yard/stats", in: dir)
        let next = try AgentProcess(config: agents.config(dir, footage: still, port: broker.port, clips: "second"))
        defer { _ = next.waitForExit(timeout: 1) }
        #expect(try retained(broker, "vigil/yard/motion", is: "OFF", in: dir, timeout: 30), "\(next.output)")
        #expect(sent.waitFor(timeout: 30) { $0.contains { !$0.retained } }, "\(next.output)")
        sent.stop()
        let stats = try retained(broker, "vigil/yard/stats", in: dir)
        #expect(stats?.contains("\"disk_free_mb\":") == true, "\(String(describing: stats))")
        next.kill(SIGTERM)
        #expect(next.waitForExit(timeout: 30) == 0, "\(next.output)")
    }

    /// What a newcomer gets on `topic` at once: the retained payload, or nil when none is.
    func retained(_ broker: Broker, _ topic: String, in dir: TemporaryDirectory) throws -> String? {
        let newcomer = try Subscriber(port: broker.port, topic: topic, in: dir)
        _ = newcomer.waitFor(timeout: 3) { $0.contains(where: \.retained) }
        newcomer.stop()
        return newcomer.messages.first(where: \.retained)?.payload
    }

    /// Whether what a newcomer gets retained on `topic` is `payload` within `timeout` seconds.
    func retained(
        _ broker: Broker, _ topic: String, is payload: String, in dir: TemporaryDirectory, timeout: Double = 10
    ) throws -> Bool {
        try waitUntil(timeout: timeout) { try retained(broker, topic, in: dir) == payload }
    }

    /// Whether the camera `yard` is `online` on the broker within `timeout` seconds: an agent
    /// connected, its subscriptions made, its configs and states sent (`online` goes last).
    func online(_ broker: Broker, in dir: TemporaryDirectory, timeout: Double = 30) throws -> Bool {
        try retained(broker, "vigil/yard/availability", is: "online", in: dir, timeout: timeout)
    }

    // MARK: Files and brokers that are not what they should be

    /// A password file that is not there: the agent records without MQTT, saying so with the
    /// file and the fix; `vigil check` warns and passes; a reload with it missing applies.
    @Test func aMissingPasswordFileLeavesMQTTOffAndNothingElse() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let footage = try writeFootage(scene(seconds: 5, objects: [crossing(1, 3)]), to: dir.file("short.y4m"))
        let missing = dir.file("mqtt-password")
        let config = try agents.config(
            dir, footage: footage, port: 1883, realtime: false,
            mqtt: "username = \"cam\"; password_file = \"\(missing)\";")

        let check = try runTool(builtExecutable("vigil"), ["check", "--config", config])
        #expect(check.status == 0, "\(check)")
        #expect(
            check.stderr.contains(": warning: mqtt.password_file: \(missing) does not exist or cannot be read"),
            "\(check.stderr)")

        let agent = try AgentProcess(config: config)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(logLines(agent.output, "clip saved").count == 1, "\(agent.output)")
        let off = logLines(
            agent.output,
            "MQTT off: a file it needs cannot be read; recording goes on without it — fix it, then restart")
        #expect(off.count == 1 && off.first.flatMap { logValue($0, "level") } == "error", "\(agent.output)")
        #expect(off.first.flatMap { logValue($0, "problem") }?.contains(missing) == true, "\(off)")
    }

    @Test func aReloadWithAMissingPasswordFileAppliesTheRest() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        let footage = try writeFootage(scene(seconds: 60, objects: []), to: dir.file("still.y4m"))
        let config = try agents.config(dir, footage: footage, port: broker.port)
        let agent = try AgentProcess(config: config)
        defer { _ = agent.waitForExit(timeout: 1) }
        #expect(try online(broker, in: dir), "\(agent.output)")
        let changed = try agents.config(
            dir, footage: footage, port: broker.port, mqtt: "password_file = \"\(dir.file("absent"))\";")
        try FileManager.default.removeItem(atPath: config)
        try FileManager.default.copyItem(atPath: changed, toPath: config)
        agent.kill(SIGHUP)
        #expect(
            agent.waitFor("msg=\"configuration reloaded; it applies from the next clip\"", timeout: 30) != nil,
            "\(agent.output)")
        #expect(logLines(agent.output, "configuration not reloaded; the settings in use are kept").isEmpty)
        // Said before the reload is.
        let later = agent.outputLines.first { $0.contains("these settings take effect after a restart") }
        #expect(later.flatMap { logValue($0, "changed") } == "mqtt", "\(agent.output)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
    }

    /// A password file that is a device (`/dev/urandom`) is not read: `vigil check` says what
    /// it is.
    @Test func aPasswordFileThatIsADeviceIsSaidSo() throws {
        try expectNotARegularFile("/dev/urandom")
    }

    /// A password file that is a pipe is not waited for (nothing writes to it).
    @Test func aPasswordFileThatIsAPipeIsNotWaitedFor() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        try #require(mkfifo(dir.file("fifo"), 0o600) == 0)
        try expectNotARegularFile(dir.file("fifo"))
    }

    func expectNotARegularFile(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let config = try agents.config(dir, footage: nil, port: 1883, mqtt: "password_file = \"\(path)\";")
        let check = try runTool(builtExecutable("vigil"), ["check", "--config", config])
        #expect(check.status == 0, "\(check)", sourceLocation: sourceLocation)
        #expect(
            check.stderr.contains(
                "warning: mqtt.password_file: \(path) is not a regular file (a device, a pipe or a directory)"),
            "\(check.stderr)", sourceLocation: sourceLocation)
    }

    /// A broker that takes the connection and never answers (frozen; a firewall that drops
    /// what follows the handshake does the same): the log says so, with the broker's address;
    /// the agent connects once it answers.
    @Test func aBrokerThatNeverAnswersIsSaidSo() throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let broker = try Broker(dir)
        broker.pause()
        let footage = try writeFootage(scene(seconds: 60, objects: []), to: dir.file("still.y4m"))
        let agent = try AgentProcess(config: agents.config(dir, footage: footage, port: broker.port))
        defer { _ = agent.waitForExit(timeout: 1) }
        let line = agent.waitFor("MQTT broker not reachable yet", timeout: 30)
        #expect(line.flatMap { logValue($0, "broker") } == "127.0.0.1:\(broker.port)", "\(agent.output)")
        #expect(line.flatMap { logValue($0, "error") }?.hasPrefix("no answer within 5 s") == true, "\(agent.output)")
        broker.resume()
        #expect(try online(broker, in: dir), "\(agent.output)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
    }
}

/// The service's unit (and so `vigil@.service`, made from it) starts after the network is
/// up when it comes up during the boot, so that the broker's name resolves at the first
/// try — but only orders itself after it: recording never waits for the network.
@Test func theServiceStartsAfterTheNetworkButNeverWaitsForIt() throws {
    let unit = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("packaging/vigil.service")
    let lines = try String(contentsOf: unit, encoding: .utf8).split(separator: "\n").map(String.init)
    func targets(_ key: String) -> [String] {
        lines.filter { $0.hasPrefix(key + "=") }.flatMap {
            $0.dropFirst(key.count + 1).split(separator: " ").map(String.init)
        }
    }
    #expect(targets("After").contains("network-online.target"), "\(targets("After"))")
    for key in ["Wants", "Requires", "BindsTo", "Requisite"] {
        #expect(!targets(key).contains("network-online.target"), "\(key)= pulls the network in")
    }
}

/// The name service as one child process sees it (root only): its own `/etc/hosts` and
/// `/etc/resolv.conf`, bind-mounted over the system's in a mount namespace of its own
/// (`unshare --mount`). Its name server is on a loopback address of the test's: `stalled`,
/// a UDP socket there takes each query and never answers (every lookup then waits 150 s);
/// else nothing listens there, and a lookup fails at once.
final class NameService {
    static let brokerName = "broker.vigil-test"
    static let unavailable: Comment =
        "needs root and unshare(1): a mount namespace with its own /etc/hosts and resolv.conf"
    static let isAvailable: Bool = {
        guard getuid() == 0, let unshare = which("unshare") else { return false }
        return (try? runTool(unshare, ["--mount", "--uts", "true"]))?.status == 0
    }()

    let hosts: String
    let resolver: String
    private let socket: Int32

    init(_ dir: TemporaryDirectory, stalled: Bool) throws {
        hosts = dir.file("hosts")
        resolver = dir.file("resolv.conf")
        try "127.0.0.1 localhost\n".write(toFile: hosts, atomically: true, encoding: .utf8)
        let address = "127.53.\(Int.random(in: 1...250)).\(Int.random(in: 1...250))"
        try "nameserver \(address)\noptions timeout:\(stalled ? 30 : 1) attempts:\(stalled ? 5 : 1)\n".write(
            toFile: resolver, atomically: true, encoding: .utf8)
        socket = stalled ? Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0) : -1
        guard stalled else { return }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_port = in_port_t(UInt16(53).bigEndian)
        local.sin_addr.s_addr = inet_addr(address)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard socket >= 0, bound else { throw BrokerError(description: "cannot bind a name server at \(address):53") }
    }

    deinit { if socket >= 0 { close(socket) } }

    /// Runs the command after it with the name service above.
    var launcher: [String] {
        [
            which("unshare") ?? "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
            "mount --bind \(hosts) /etc/hosts && mount --bind \(resolver) /etc/resolv.conf && exec \"$0\" \"$@\"",
        ]
    }

    /// Whether a query reached the stalled name server within `timeout` seconds (it is
    /// taken, and not answered).
    func waitForQuery(timeout: Double) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 512)
        return waitUntil(timeout: timeout) { recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 }
    }

    /// Makes `name` resolve to `address` from now on (the file is changed in place: the
    /// mount shows it).
    func add(_ name: String, _ address: String) throws {
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: hosts))
        defer { try? file.close() }
        try file.seekToEnd()
        try file.write(contentsOf: Data("\(address) \(name)\n".utf8))
    }
}
