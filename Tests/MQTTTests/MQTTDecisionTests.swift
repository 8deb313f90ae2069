import Configuration
import Foundation
import Media
import POSIX
import Recorder
import TestSupport
import Testing

@testable import Agent
@testable import MQTT

/// The MQTT client's decisions as values, without a broker: when to try the broker again and
/// what to say, how often Home Assistant gets the configs again, how a repeated warning is
/// said, the client id, what is retained, and which topic prefixes are taken.
struct MQTTDecisionTests {
    // MARK: BrokerRetry

    /// `count` tries failing as `failure`, each when the one before said to try again, from
    /// `now` on (which ends at the last one's next try): what each said.
    func fail(
        _ retry: inout BrokerRetry, _ failure: BrokerRetry.Failure, _ count: Int, from now: inout Double
    ) -> (waits: [Double], said: [BrokerRetry.Say?]) {
        var waits: [Double] = []
        var said: [BrokerRetry.Say?] = []
        for _ in 0..<count {
            let decision = retry.failed(failure, at: now)
            waits.append(decision.retryIn)
            said.append(decision.say)
            now += decision.retryIn
        }
        return (waits, said)
    }

    /// A broker that is not there: tried after 1, 2, 4, then every 5 s however long it
    /// stays away, said once; the connection says how long it was down and how many tries.
    @Test func anUnreachableBrokerIsTriedEveryFewSecondsAndSaidOnce() {
        var retry = BrokerRetry()
        var now = 0.0
        let (waits, said) = fail(&retry, .unreachable, 8, from: &now)
        #expect(waits == [1, 2, 4, 5, 5, 5, 5, 5])
        #expect(said == [.outage(.unreachable)] + Array(repeating: nil, count: 7))
        let first = retry.connected(at: now)
        #expect(first == BrokerRetry.Recovery(first: true, down: 32, tries: 9))
        // Lost after a long session: said, and tried again after 1 s.
        now += 3600
        let lost = retry.failed(.lost, at: now)
        #expect(lost == .init(retryIn: 1, say: .outage(.lost)))
        // Still away: not said again, however the tries fail.
        let again = retry.failed(.unreachable, at: now + 1)
        #expect(again == .init(retryIn: 2, say: nil))
        let back = retry.connected(at: now + 3)
        #expect(back == BrokerRetry.Recovery(first: false, down: 3, tries: 3))
    }

    /// A login refused: said (as the error it is, even in an outage already said), and
    /// tried less and less often, up to once a minute.
    @Test func aRefusedLoginIsTriedUpToOnceAMinute() {
        var retry = BrokerRetry()
        let unreachable = retry.failed(.unreachable, at: 0)
        #expect(unreachable == .init(retryIn: 1, say: .outage(.unreachable)))
        var now = 1.0
        let (waits, said) = fail(&retry, .refused, 9, from: &now)
        #expect(waits == [2, 4, 8, 16, 32, 60, 60, 60, 60])
        #expect(said == [.outage(.refused)] + Array(repeating: nil, count: 8))
    }

    /// Thrown off a few seconds after connecting, again and again (a link that drops
    /// connections, a broker restarting): no take-over is concluded from the timing alone —
    /// each loss is said, tried again after 1, 2, 4, then 5 s, and each reconnection said.
    @Test func connectionsLostRightAfterTheyAreMadeAreNoTakeOver() {
        var retry = BrokerRetry()
        var now = 0.0
        var decisions: [BrokerRetry.Decision] = []
        var recoveries: [BrokerRetry.Recovery?] = []
        for _ in 0..<7 {
            recoveries.append(retry.connected(at: now))
            now += 3  // thrown off after 3 s
            let decision = retry.failed(.lost, at: now)
            decisions.append(decision)
            now += decision.retryIn
        }
        #expect(decisions.map(\.retryIn) == [1, 2, 4, 5, 5, 5, 5])
        #expect(decisions.map(\.say) == Array(repeating: .outage(.lost), count: 7))
        #expect(recoveries.allSatisfy { $0 != nil }, "every reconnection said")
        #expect(recoveries.dropFirst().allSatisfy { $0?.first == false })
        // A connection that holds: the next loss is tried again after 1 s.
        _ = retry.connected(at: now)
        now += 60
        #expect(retry.failed(.lost, at: now) == .init(retryIn: 1, say: .outage(.lost)))
    }

    /// Another agent's presence on the client id's topic at a reconnection: said once, and
    /// from then on each loss is its taking the connection over — tried again after a minute,
    /// two, four … ten minutes, said no more. A connection that finds its own presence ends
    /// it, as does one held longer than the longest of those waits.
    @Test func anotherAgentWithTheClientIDIsATakeOver() {
        var retry = BrokerRetry()
        _ = retry.connected(at: 0)
        #expect(retry.failed(.lost, at: 2) == .init(retryIn: 1, say: .outage(.lost)))
        _ = retry.connected(at: 3)
        #expect(retry.presence(another: true) == .sharedClientID)
        var now = 4.0
        var decisions: [BrokerRetry.Decision] = []
        for _ in 0..<6 {
            let decision = retry.failed(.lost, at: now)
            decisions.append(decision)
            now += decision.retryIn
            _ = retry.connected(at: now)
            #expect(retry.presence(another: true) == nil, "said once")
            now += 30
        }
        #expect(decisions.map(\.retryIn) == [60, 120, 240, 480, 600, 600])
        #expect(decisions.allSatisfy { $0.takenOver && $0.say == nil })
        // Its own presence: nobody else connected since; a loss is a loss again.
        #expect(retry.presence(another: false) == nil)
        #expect(!retry.sharedClientID)
        #expect(retry.failed(.lost, at: now) == .init(retryIn: 1, say: .outage(.lost)))
        // Seen again: said again. Then a connection held for 11 minutes: the other is gone.
        _ = retry.connected(at: now + 1)
        #expect(retry.presence(another: true) == .sharedClientID)
        #expect(retry.failed(.lost, at: now + 2).takenOver)
        _ = retry.connected(at: now + 62)
        #expect(retry.failed(.lost, at: now + 62 + 660) == .init(retryIn: 1, say: .outage(.lost)))
    }

    /// The presence on the client id's topic: this agent's, another's (another run of the same
    /// configuration is another agent), or nothing an agent wrote.
    @Test func thePresenceTellsThisAgentFromAnother() {
        let me = ClientPresence(topicPrefix: "vigil", clientID: "vigil-pi-yard", camera: "yard", host: "pi", run: "1")
        #expect(me.topic == "vigil/client.id/vigil-pi-yard")
        #expect(me.message.retain && me.message.topic == me.topic)
        #expect(me.whose(me.message.payload) == .ours)
        let copy = ClientPresence(topicPrefix: "vigil", clientID: "vigil-pi-yard", camera: "yard", host: "pi", run: "2")
        #expect(me.whose(copy.message.payload) == .another(copy.agent))
        #expect(me.whose(Array("online".utf8)) == .unreadable)
        #expect(
            ClientPresence(topicPrefix: "v", clientID: "a/b+c#", camera: "x", host: "h").topic == "v/client.id/a_b_c_")
    }

    /// At each connection: the configs, the states as they are now, the presence, `online`
    /// last — all retained.
    @Test func theStatesGoBeforeOnlineAtEachConnection() {
        var messages = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: SystemTimeZone())
        let configs = HomeAssistantDiscovery(prefix: "homeassistant", camera: "yard", version: "1", topics: messages)
            .messages
        let presence = ClientPresence(topicPrefix: "vigil", clientID: "id", camera: "yard", host: "pi").message
        let sent = messages.connection(discovery: configs, detecting: false, then: [presence])
        #expect(
            sent.map(\.topic)
                == configs.map(\.topic) + [
                    "vigil/yard/detect", "vigil/yard/motion", "vigil/client.id/id", "vigil/yard/availability",
                ])
        #expect(sent.first { $0.topic == "vigil/yard/motion" }?.text == "OFF")
        #expect(sent.last?.text == "online" && sent.allSatisfy(\.retain))
        _ = messages.messages(for: .motionStarted(MotionStarted(trigger: Date(), score: 0.2, cause: .motion)))
        #expect(messages.connection(discovery: [], detecting: nil).map(\.text) == ["ON", "online"])
    }

    // MARK: Pacing and repeated warnings

    /// Home Assistant's `online`: at once when the last announcement is 5 s old; a burst
    /// makes one more announcement, 5 s after the last one.
    @Test func announcementsAreAtMostEveryFiveSeconds() {
        var pacing = AnnouncementPacing()
        func asked(_ t: Double) -> Bool { pacing.requested(at: t) }
        func due(_ t: Double) -> Bool { pacing.due(at: t) }
        pacing.announced(at: 100)  // the connection
        #expect(!asked(101))
        #expect(!due(104.9))
        #expect(due(105))
        #expect(!due(111))
        #expect(asked(111))  // 6 s after the last: at once
        let burst = stride(from: 111.0, to: 114, by: 0.001).map(asked)
        #expect(!burst.contains(true))
        #expect(!due(115.9))
        #expect(due(116))
        // A connection answers what was asked before it.
        #expect(!asked(117))
        pacing.announced(at: 118)
        #expect(!due(200))
    }

    /// Said the first time, then counted; the count goes with the next one said (a minute
    /// later at the soonest), or alone once the minute is over, or at a stop.
    @Test func aRepeatedWarningIsSaidThenCounted() {
        var warning = RepeatedWarning(interval: 60)
        func occurred(_ t: Double) -> Int? { warning.occurred(at: t) }
        func flush(_ t: Double?) -> Int? { warning.flush(at: t) }
        #expect(occurred(0) == 0)
        let burst = (1...999).map { occurred(Double($0) / 100) }
        #expect(burst.allSatisfy { $0 == nil })
        #expect(flush(30) == nil)
        #expect(occurred(61) == 999)
        #expect(occurred(62) == nil)
        #expect(flush(100) == nil)
        #expect(flush(121) == 1)
        #expect(flush(200) == nil)
        #expect(occurred(150) == nil)
        #expect(flush(nil) == 1)
        #expect(flush(nil) == nil)
    }

    // MARK: Settings and payloads

    /// The client id names the machine and the camera, so that two agents with one camera
    /// name on two machines do not throw each other off the broker; `mqtt.client_id` wins.
    @Test(
        arguments: [
            ("pi", "yard", nil, "vigil-pi-yard"), ("garage.lan", "front", nil, "vigil-garage.lan-front"),
            ("", "yard", nil, "vigil-yard"), ("my pi!", "yard", nil, "vigil-my-pi--yard"),
            ("pi", "yard", "mine", "mine"),
        ] as [(String, String, String?, String)])
    func theClientIDNamesTheMachineAndTheCamera(host: String, camera: String, configured: String?, id: String) throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        let path = dir.file("vigil.conf")
        try "mqtt = { client_id = \"\(configured ?? "")\"; };".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try Settings.load(path: path).mqtt.clientID(camera: camera, host: host) == id)
    }

    /// What `vigil check` takes as a topic prefix is what its message says: letters, digits,
    /// `-` and `_`, levels joined by `/`.
    @Test(arguments: [
        ("vigil", true), ("home/cams", true), ("a-b_c/D9", true), ("a b", false), ("a.b", false), ("é", false),
        ("home/#", false), ("+", false), ("/vigil", false), ("vigil/", false), ("a//b", false), ("", false),
    ])
    func topicPrefixesAreWhatTheMessageSays(prefix: String, taken: Bool) throws {
        let dir = try TemporaryDirectory("vigil-mqtt")
        defer { dir.remove() }
        for key in ["topic_prefix", "discovery_prefix"] {
            let path = dir.file("\(key).conf")
            try "mqtt = { \(key) = \"\(prefix)\"; };".write(toFile: path, atomically: true, encoding: .utf8)
            do {
                _ = try Settings.load(path: path)
                #expect(taken, "\(key) = \"\(prefix)\" taken")
            } catch {
                #expect(!taken, "\(key) = \"\(prefix)\": \(error)")
                #expect(error.message.contains("use letters, digits, - and _, levels joined by /"), "\(error)")
            }
        }
    }

    /// What a newcomer needs is retained (Home Assistant subscribes again when it restarts):
    /// the stats too, for the disk free sensor; an event's phases are not.
    @Test func theStatsAreRetainedAndEventsAreNot() throws {
        var messages = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: SystemTimeZone())
        let stats = messages.messages(for: .stats(StatsReport(now: Counters(), previous: Counters(), seconds: 60)))
        #expect(stats.map(\.topic) == ["vigil/yard/stats"] && stats.allSatisfy(\.retain))
        let started = messages.messages(
            for: .motionStarted(MotionStarted(trigger: Date(), score: 0.2, cause: .motion)))
        #expect(started == [MQTTMessage(topic: "vigil/yard/motion", text: "ON", retain: true)])
        let ended = messages.messages(for: .motionEnded(MotionEnded(end: Date(), peakScore: 0.2, parts: 1)))
        #expect(ended.map(\.retain) == [true, false], "\(ended.map(\.topic))")
    }

    /// The motion state said at each connection: OFF, ON while an event is open, OFF after.
    @Test func theMotionStateFollowsTheEvents() {
        var messages = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: SystemTimeZone())
        #expect(messages.motionState == MQTTMessage(topic: "vigil/yard/motion", text: "OFF", retain: true))
        _ = messages.messages(for: .motionStarted(MotionStarted(trigger: Date(), score: 0.2, cause: .motion)))
        #expect(messages.motionState.text == "ON")
        _ = messages.messages(for: .motionEnded(MotionEnded(end: Date(), peakScore: 0.2, parts: 1)))
        #expect(messages.motionState.text == "OFF")
    }
}
