import Agent
internal import CMosquitto
import Configuration
import FoundationEssentials
internal import Glibc
import Logging
import Media
internal import POSIX
import Recorder
import Synchronization

/// Why the MQTT client could not be made.
public struct MQTTError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// The agent's events on an MQTT broker (libmosquitto): `MQTTMessages` says what goes where.
///
/// The broker never slows recording: `handle` only queues, and libmosquitto's own thread
/// (`mosquitto_loop_start`) does the network — publishing hands a message to its out queue,
/// it does not write to the socket. The connection is made in the background and made again
/// after a loss (1 s, doubling to 60 s). While there is none, messages wait in a queue of
/// `queueLimit` in order (the oldest dropped when it is full, said once per outage), and go out
/// when the connection is back, after `online` and after what libmosquitto sends again (the
/// messages in flight at the loss): the broker gets them in the order they happened, some
/// perhaps twice (QoS 1 is at least once). The last will is `offline` on `availability`,
/// retained; a clean stop (`finish`) delivers what is queued within a few seconds, then says
/// `offline` itself and disconnects.
public final class MQTTSink: EventSink, @unchecked Sendable {
    public static let queueLimit = 1000
    /// How long `finish` waits for the queue to go out.
    public static let finishSeconds = 4.0

    private let settings: Settings.MQTT
    /// The availability topic (`MQTTMessages.availability`: the will, `online`, `offline`),
    /// and the client id.
    private let availability: String
    private let clientID: String
    private let log: Logger
    /// Where commands go (`record/set`, `detect/set`); nil: none are taken.
    private let control: AgentControl?
    /// The topics, for the commands (the state's copy changes with the events).
    private let topics: MQTTMessages
    private let discovery: HomeAssistantDiscovery?
    /// `struct mosquitto *`: touched by libmosquitto's thread and, through its thread-safe
    /// calls, by the agent's threads.
    private let client: OpaquePointer
    private let state: Mutex<State>

    private struct State {
        var messages: MQTTMessages
        var connected = false
        var queue: [MQTTMessage] = []
        /// Published, not yet acknowledged (message ids).
        var inflight: Set<Int32> = []
        /// Messages dropped from a full queue during the current outage.
        var dropped = 0
        var everConnected = false
        /// Since a reconnection, libmosquitto sends again what was published and not
        /// acknowledged before the loss; the queue waits until those are acknowledged, so that
        /// the broker gets everything in order (a stale `ON` after an `OFF` would leave the
        /// retained motion state wrong).
        var resendingSince: Date?
        /// A loss or a refusal was logged and the recovery not yet.
        var outageLogged = false
        var finished = false
    }

    /// `control`: where the command topics' requests go; `version`: for Home Assistant's device.
    public init(
        settings: Settings.MQTT, camera: String, log: Logger, timeZone: any LocalTimeZone,
        control: AgentControl? = nil, version: String = "unknown"
    ) throws(MQTTError) {
        self.settings = settings
        let messages = MQTTMessages(base: settings.base(camera: camera), camera: camera, timeZone: timeZone)
        topics = messages
        self.control = control
        discovery =
            settings.discovery
            ? HomeAssistantDiscovery(
                prefix: settings.discoveryPrefix, camera: camera, version: version, topics: messages) : nil
        availability = messages.availability
        clientID = settings.clientID(camera: camera, host: HostName.current)
        self.log = log.with(("component", "mqtt"))
        mosquitto_lib_init()
        guard let client = mosquitto_new(clientID, true, nil) else {
            throw MQTTError(description: "cannot make an MQTT client: \(String(cString: strerror(errno)))")
        }
        self.client = client
        state = Mutex(State(messages: messages))
        func check(_ rc: Int32, _ what: String) throws(MQTTError) {
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                mosquitto_destroy(client)
                throw MQTTError(description: "\(what): \(String(cString: mosquitto_strerror(rc)))")
            }
        }
        try check(
            mosquitto_int_option(client, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V311)), "MQTT protocol 3.1.1")
        let offline = Array("offline".utf8)
        try check(
            mosquitto_will_set(
                client, availability, Int32(offline.count), offline, Int32(settings.qos), true),
            "mqtt: the last will")
        if let username = settings.username {
            try check(mosquitto_username_pw_set(client, username, settings.password), "mqtt.username")
        }
        if let tls = settings.tls {
            try check(
                mosquitto_tls_set(client, tls.caFile, nil, tls.certFile, tls.keyFile, nil),
                "mqtt.tls_ca_file \(tls.caFile)")
            try check(mosquitto_tls_insecure_set(client, tls.insecure), "mqtt.tls_insecure")
        }
        try check(mosquitto_reconnect_delay_set(client, 1, 60, true), "mqtt: the reconnect delay")
        mosquitto_connect_callback_set(client) { _, object, rc in
            guard let object else { return }
            Unmanaged<MQTTSink>.fromOpaque(object).takeUnretainedValue().connected(rc)
        }
        mosquitto_disconnect_callback_set(client) { _, object, rc in
            guard let object else { return }
            Unmanaged<MQTTSink>.fromOpaque(object).takeUnretainedValue().disconnected(rc)
        }
        mosquitto_publish_callback_set(client) { _, object, mid in
            guard let object else { return }
            Unmanaged<MQTTSink>.fromOpaque(object).takeUnretainedValue().published(mid)
        }
        mosquitto_message_callback_set(client) { _, object, message in
            guard let object, let message, let topic = message.pointee.topic else { return }
            let length = Int(max(0, message.pointee.payloadlen))
            let payload =
                message.pointee.payload.map {
                    [UInt8](UnsafeRawBufferPointer(start: $0, count: min(length, 4096)))
                } ?? []
            Unmanaged<MQTTSink>.fromOpaque(object).takeUnretainedValue().received(
                topic: String(cString: topic), payload: payload, retained: message.pointee.retain)
        }
        // The callbacks find this sink through the client's user data; `finish` (or deinit)
        // stops the thread before the sink goes.
        mosquitto_user_data_set(client, Unmanaged.passUnretained(self).toOpaque())
        // Not connected yet is fine: the thread keeps trying, and the messages wait.
        let rc = mosquitto_connect_async(client, settings.host, Int32(settings.port), Int32(settings.keepalive))
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            self.log.warning(
                "MQTT broker not reachable yet; trying again in the background",
                [("broker", .string("\(settings.host):\(settings.port)")), ("error", .string(Self.reason(rc)))])
            state.withLock { $0.outageLogged = true }
        }
        // The thread is made with every signal blocked, so that it never takes SIGTERM or
        // SIGHUP (the sink is made before the agent blocks them for its own threads): a
        // signal's default action there would end the process before the clip is finished.
        var all = sigset_t()
        var previous = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_SETMASK, &all, &previous)
        let started = mosquitto_loop_start(client)
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        guard started == MOSQ_ERR_SUCCESS.rawValue else {
            mosquitto_destroy(client)
            throw MQTTError(description: "cannot start the MQTT client's thread: \(Self.reason(started))")
        }
    }

    deinit {
        mosquitto_loop_stop(client, true)
        mosquitto_destroy(client)
    }

    // MARK: EventSink

    public func handle(_ event: AgentEvent) {
        // This logger is not the agent's (the sink is made before the agent): a reload's level
        // reaches it here.
        if case .reloaded(let settings) = event { log.level = settings.log.level }
        state.withLock { state in
            guard !state.finished else { return }
            for message in state.messages.messages(for: event) { enqueue(message, &state) }
            drainIfInOrder(&state)
        }
    }

    /// How long the queue waits for the messages libmosquitto sends again after a reconnection.
    static let resendPatience = 10.0

    public func finish() {
        let deadline = Date().addingTimeInterval(Self.finishSeconds)
        func settled() -> Bool { state.withLock { $0.connected && $0.queue.isEmpty && $0.inflight.isEmpty } }
        while !settled() && Date() < deadline { usleep(20_000) }
        let left = state.withLock { state -> Int in
            state.finished = true
            if state.connected {
                publish(MQTTMessage(topic: availability, text: "offline", retain: true), &state)
            }
            return state.queue.count
        }
        let offlineDeadline = Date().addingTimeInterval(1)
        while !state.withLock({ $0.inflight.isEmpty || !$0.connected }) && Date() < offlineDeadline {
            usleep(20_000)
        }
        if left > 0 {
            log.warning(
                "MQTT messages not delivered: the broker was unreachable when the agent stopped",
                [("messages", .int(left))])
        }
        // Without a connection the thread would go on trying to make one: stop it outright.
        let connected = state.withLock { $0.connected }
        mosquitto_disconnect(client)
        mosquitto_loop_stop(client, !connected)
    }

    // MARK: The queue (called with the state locked)

    private func enqueue(_ message: MQTTMessage, _ state: inout State) {
        if state.queue.count >= Self.queueLimit {
            state.queue.removeFirst()
            state.dropped += 1
            if state.dropped == 1 {
                log.warning(
                    "MQTT queue full while the broker is unreachable; dropping the oldest messages",
                    [("limit", .int(Self.queueLimit))])
            }
        }
        state.queue.append(message)
    }

    /// Drains the queue when connected and nothing sent before a loss is still unacknowledged
    /// (or has waited longer than `resendPatience`).
    private func drainIfInOrder(_ state: inout State) {
        guard state.connected else { return }
        if let since = state.resendingSince {
            guard state.inflight.isEmpty || Date().timeIntervalSince(since) > Self.resendPatience else { return }
            state.resendingSince = nil
            state.inflight.removeAll()
        }
        drain(&state)
    }

    private func drain(_ state: inout State) {
        while let message = state.queue.first {
            guard publish(message, &state) else { return }
            state.queue.removeFirst()
        }
    }

    /// Hands `message` to libmosquitto's out queue; false when there is no connection (it stays queued).
    @discardableResult
    private func publish(_ message: MQTTMessage, _ state: inout State) -> Bool {
        var mid: Int32 = 0
        let rc = message.payload.withUnsafeBytes { bytes in
            mosquitto_publish(
                client, &mid, message.topic, Int32(bytes.count), bytes.baseAddress, Int32(settings.qos),
                message.retain)
        }
        switch rc {
        case MOSQ_ERR_SUCCESS.rawValue:
            if settings.qos > 0 { state.inflight.insert(mid) }
            return true
        case MOSQ_ERR_NO_CONN.rawValue, MOSQ_ERR_CONN_LOST.rawValue:
            state.connected = false
            return false
        default:
            log.error(
                "MQTT message not published", [("topic", .string(message.topic)), ("error", .string(Self.reason(rc)))])
            return true  // not one the broker will ever take: go on with the others
        }
    }

    // MARK: libmosquitto's thread

    private func connected(_ rc: Int32) {
        state.withLock { state in
            guard rc == 0 else {
                if !state.outageLogged {
                    state.outageLogged = true
                    log.error(
                        "MQTT broker refused the connection; trying again",
                        [
                            ("broker", .string("\(settings.host):\(settings.port)")),
                            ("reason", .string(String(cString: mosquitto_connack_string(rc)))),
                        ])
                }
                return
            }
            let first = !state.everConnected
            state.everConnected = true
            state.connected = true
            // What was in flight at the loss goes again first (libmosquitto's resend): the queue
            // waits for it.
            if !state.inflight.isEmpty { state.resendingSince = Date() }
            if first || state.outageLogged {
                log.info(
                    first ? "MQTT connected" : "MQTT connected again",
                    [
                        ("broker", .string("\(settings.host):\(settings.port)")),
                        ("client_id", .string(clientID)),
                        ("queued", .int(state.queue.count)), ("dropped", .int(state.dropped)),
                    ])
            }
            state.outageLogged = false
            state.dropped = 0
            guard !state.finished else { return }
            subscribe()
            publish(MQTTMessage(topic: availability, text: "online", retain: true), &state)
            for message in discovery?.messages ?? [] { publish(message, &state) }
            if let control { publish(topics.state(detecting: control.detectionEnabled), &state) }
            drainIfInOrder(&state)
        }
    }

    /// The command topics (with somewhere to send them), and Home Assistant's status.
    private func subscribe() {
        var wanted: [String] = []
        if control != nil { wanted += [topics.recordCommand, topics.detectCommand] }
        if let discovery { wanted.append(discovery.statusTopic) }
        for topic in wanted {
            let rc = mosquitto_subscribe(client, nil, topic, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                log.error("MQTT: cannot subscribe", [("topic", .string(topic)), ("error", .string(Self.reason(rc)))])
            }
        }
    }

    /// A message on a topic subscribed to: a command, or Home Assistant starting.
    private func received(topic: String, payload: [UInt8], retained: Bool) {
        if let discovery, topic == discovery.statusTopic {
            guard String(decoding: payload, as: UTF8.self) == "online" else { return }
            log.debug("Home Assistant is online; announcing the camera again")
            state.withLock { state in
                guard !state.finished else { return }
                for message in discovery.messages { publish(message, &state) }
            }
            return
        }
        guard let control else { return }
        // A retained `record/set` is a moment someone left behind, not a request now: it would
        // start a recording at every connection.
        if retained && topic == topics.recordCommand {
            log.warning(
                "MQTT command ignored: a retained message on record/set is no request — publish it without retain",
                [("topic", .string(topic))])
            return
        }
        switch MQTTCommand.parse(topic: topic, payload: payload, messages: topics) {
        case .success(.record(let seconds)): control.record(seconds: seconds, by: "mqtt")
        case .success(.stopRecording): control.stopRecording(by: "mqtt")
        case .success(.detection(let on)): control.setDetection(on, by: "mqtt")
        case .failure(let error): log.warning("MQTT command ignored", [("error", .string(error.description))])
        }
    }

    private func disconnected(_ rc: Int32) {
        state.withLock { state in
            state.connected = false
            guard rc != 0, !state.finished, !state.outageLogged else { return }
            state.outageLogged = true
            log.warning(
                state.everConnected
                    ? "MQTT connection lost; reconnecting, and queueing what happens meanwhile"
                    : "MQTT broker not reachable yet; trying again in the background",
                [("broker", .string("\(settings.host):\(settings.port)")), ("error", .string(Self.reason(rc)))])
        }
    }

    private func published(_ mid: Int32) {
        state.withLock { state in
            state.inflight.remove(mid)
            if state.resendingSince != nil, !state.finished { drainIfInOrder(&state) }
        }
    }

    private static func reason(_ rc: Int32) -> String {
        if rc == MOSQ_ERR_ERRNO.rawValue { return String(cString: strerror(errno)) }
        return String(cString: mosquitto_strerror(rc))
    }
}
