import Agent
internal import CMosquitto
import Capture
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
/// The broker never slows recording: `handle` only queues, and a thread of the sink's own
/// (`mqtt`) does the network — publishing hands a message to libmosquitto's out queue, it does
/// not write to the socket. That thread makes the connection, looks the broker's name up (the
/// start of the agent never waits for a name server), services it (`mosquitto_loop`), and
/// makes it again after a failure as `BrokerRetry` says: within a few seconds of the broker
/// coming up, however the first try failed. A try that gets no answer within
/// `connectTimeout` is given up and made again. While there is no connection, messages wait
/// in a queue of `queueLimit` in order (the oldest dropped when it is full, said once per
/// outage), and go out when the connection is back, after `online`, the discovery configs and
/// the retained states, and after what libmosquitto sends again (the messages in flight at the
/// loss): the broker gets them in the order they happened, some perhaps twice (QoS 1 is at
/// least once). The last will is `offline` on `availability`, retained; a clean stop
/// (`finish`) delivers what is queued within a few seconds, then says `offline` itself and
/// disconnects.
///
/// Home Assistant's `online` brings the discovery configs again, at most every
/// `AnnouncementPacing.interval` seconds; a command that says nothing is logged once, then
/// counted (`RepeatedWarning`).
public final class MQTTSink: EventSink, @unchecked Sendable {
    // `@unchecked Sendable`: the mutable state is in `state` (a Mutex) and `libraryError` (one);
    // libmosquitto's client is made for use from several threads (`mosquitto_threaded_set`).

    public static let queueLimit = 1000
    /// How long `finish` waits for the queue to go out.
    public static let finishSeconds = 4.0
    /// How long a try may wait for the broker's answer (TCP, TLS and its CONNACK).
    public static let connectTimeout = 10.0
    /// How often a bad command is said, at most (the others are counted).
    public static let badCommandInterval = 60.0
    /// How long the connection thread waits in `mosquitto_loop` before it looks at the clock.
    static let tick = 0.25

    private let settings: Settings.MQTT
    /// `host:port`, for the log.
    private let broker: String
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
    /// `struct mosquitto *`: touched by the connection thread and, through its thread-safe
    /// calls, by the agent's threads.
    private let client: OpaquePointer
    private let state: Mutex<State>
    /// libmosquitto's last error line (an OpenSSL error, say): its own lock, as libmosquitto
    /// logs from inside calls made with `state` locked.
    private let libraryError = Mutex<String?>(nil)
    /// Set by `finish`: the connection thread ends.
    private let stopAsked = Event()
    /// Set by the connection thread when it ends.
    private let loopEnded = Event()

    private struct State {
        var messages: MQTTMessages
        var connected = false
        var queue: [MQTTMessage] = []
        /// Published, not yet acknowledged (message ids).
        var inflight: Set<Int32> = []
        /// Messages dropped from a full queue during the current outage.
        var dropped = 0
        /// Since a reconnection, libmosquitto sends again what was published and not
        /// acknowledged before the loss; the queue waits until those are acknowledged, so that
        /// the broker gets everything in order (a stale `ON` after an `OFF` would leave the
        /// retained motion state wrong).
        var resendingSince: Double?
        var finished = false
        /// `finish` asked the connection thread to end.
        var stopping = false
        /// Where the connection stands (the connection thread's, and its callbacks').
        var link = Link.waiting(until: 0)
        var tried = false
        var retry = BrokerRetry()
        var announcements = AnnouncementPacing()
        var badCommands = RepeatedWarning(interval: MQTTSink.badCommandInterval)
        var lastBadCommand = ""
    }

    private enum Link: Equatable {
        /// No connection: the next try at `until` (monotonic seconds).
        case waiting(until: Double)
        /// A try under way since then: no answer yet.
        case connecting(since: Double)
        case connected
    }

    /// `control`: where the command topics' requests go; `version`: for Home Assistant's
    /// device. Returns at once: the connection is made on the sink's own thread.
    public init(
        settings: Settings.MQTT, camera: String, log: Logger, timeZone: any LocalTimeZone,
        control: AgentControl? = nil, version: String = "unknown", linkBase: String? = nil, livePictures: Bool = false,
        uploads: Bool = false
    ) throws(MQTTError) {
        self.settings = settings
        broker = "\(settings.host):\(settings.port)"
        let messages = MQTTMessages(
            base: settings.base(camera: camera), camera: camera, timeZone: timeZone, linkBase: linkBase)
        topics = messages
        self.control = control
        discovery =
            settings.discovery
            ? HomeAssistantDiscovery(
                prefix: settings.discoveryPrefix, camera: camera, version: version, topics: messages,
                livePictures: livePictures, uploads: uploads) : nil
        availability = messages.availability
        clientID = settings.clientID(camera: camera, host: HostName.current)
        self.log = log.with(("component", "mqtt"))
        mosquitto_lib_init()
        guard let client = mosquitto_new(clientID, true, nil) else {
            throw MQTTError(description: "cannot make an MQTT client: \(String(cString: strerror(errno)))")
        }
        self.client = client
        state = Mutex(State(messages: messages))
        // From here a throw ends in deinit, which destroys the client.
        func check(_ rc: Int32, _ what: String) throws(MQTTError) {
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                throw MQTTError(description: "\(what): \(String(cString: mosquitto_strerror(rc)))")
            }
        }
        // Publishing from the agent's threads only queues; the connection thread writes.
        try check(mosquitto_threaded_set(client, true), "mqtt: the client's threads")
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
        mosquitto_connect_callback_set(client) { _, object, rc in
            guard let object else { return }
            Unmanaged<MQTTSink>.fromOpaque(object).takeUnretainedValue().connected(rc)
        }
        mosquitto_disconnect_callback_set(client) { _, object, rc in
            let code = errno
            guard let object else { return }
            Unmanaged<MQTTSink>.fromOpaque(object).takeUnretainedValue().disconnected(rc, errno: code)
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
        mosquitto_log_callback_set(client) { _, object, level, text in
            guard level == MOSQ_LOG_ERR, let object, let text else { return }
            Unmanaged<MQTTSink>.fromOpaque(object).takeUnretainedValue().libraryError.withLock {
                $0 = String(cString: text)
            }
        }
        // The callbacks find this sink through the client's user data; the connection thread
        // holds the sink until `finish` ends it, so the sink outlives every callback.
        mosquitto_user_data_set(client, Unmanaged.passUnretained(self).toOpaque())
        do {
            try startDetachedThread("mqtt") { [self] in
                run()
                loopEnded.signal()
            }
        } catch {
            throw MQTTError(description: "cannot start the MQTT client's thread: \(error.description)")
        }
    }

    deinit {
        mosquitto_destroy(client)
    }

    static func now() -> Double { MonotonicClock.now().seconds }

    // MARK: EventSink

    public func handle(_ event: AgentEvent) {
        // This logger is not the agent's (the sink is made before the agent): a reload's level
        // reaches it here.
        if case .reloaded(let settings) = event { log.level = settings.log.level }
        state.withLock { state in
            guard !state.finished else { return }
            for message in state.messages.messages(for: event) {
                guard message.transient else {
                    enqueue(message, &state)
                    continue
                }
                // Of the moment: now, behind nothing, or not at all.
                drainIfInOrder(&state)
                if state.connected && state.queue.isEmpty && state.resendingSince == nil {
                    publish(message, &state)
                }
            }
            drainIfInOrder(&state)
        }
    }

    /// How long the queue waits for the messages libmosquitto sends again after a reconnection.
    static let resendPatience = 10.0

    public func finish() {
        let deadline = Self.now() + Self.finishSeconds
        func settled() -> Bool { state.withLock { $0.connected && $0.queue.isEmpty && $0.inflight.isEmpty } }
        while !settled() && Self.now() < deadline { usleep(20_000) }
        let left = state.withLock { state -> Int in
            state.finished = true
            if state.connected {
                publish(MQTTMessage(topic: availability, text: "offline", retain: true), &state)
            }
            return state.queue.count
        }
        let offlineDeadline = Self.now() + 1
        while !state.withLock({ $0.inflight.isEmpty || !$0.connected }) && Self.now() < offlineDeadline {
            usleep(20_000)
        }
        if left > 0 {
            log.warning(
                "MQTT messages not delivered: the broker was unreachable when the agent stopped",
                [("messages", .int(left))])
        }
        state.withLock { state in
            sayBadCommands(&state, at: nil)
            state.stopping = true
        }
        stopAsked.signal()
        // A thread stuck in a name lookup or a connect is not waited for: the process ends
        // without it.
        _ = loopEnded.wait(seconds: 2)
    }

    // MARK: The connection thread

    private enum Step {
        case connect(first: Bool)
        case service
        case sleep(Double)
        case stop(connected: Bool)
    }

    /// The connection thread: tries, services and makes again the connection until `finish`.
    private func run() {
        // Signals are the agent's: SIGTERM or SIGHUP taken here would end the process before
        // the clip is finished, and a SIGPIPE from a TLS write must not end it either.
        var all = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_SETMASK, &all, nil)
        while true {
            let step = state.withLock { state in nextStep(&state, at: Self.now()) }
            switch step {
            case .stop(let connected):
                if connected { disconnect() }
                return
            case .sleep(let seconds):
                _ = stopAsked.wait(seconds: seconds)
            case .connect(let first):
                // The name lookup (and a TLS set-up) happen here: on this thread, never the
                // agent's. The TCP connection is made without waiting; `service` sees it through.
                errno = 0
                let rc =
                    first
                    ? mosquitto_connect_async(client, settings.host, Int32(settings.port), Int32(settings.keepalive))
                    : mosquitto_reconnect_async(client)
                let code = errno
                state.withLock { state in
                    if rc == MOSQ_ERR_SUCCESS.rawValue {
                        state.link = .connecting(since: Self.now())
                    } else {
                        failed(kind(rc), reason(rc, errno: code, connecting: true), &state)
                    }
                }
            case .service:
                let rc = mosquitto_loop(client, Int32(Self.tick * 1000), 1)
                let code = errno
                if rc != MOSQ_ERR_SUCCESS.rawValue && mosquitto_socket(client) < 0 {
                    // A failure no callback reported (a TLS handshake refused, say).
                    state.withLock { state in
                        switch state.link {
                        case .waiting: break
                        case .connecting: failed(kind(rc), reason(rc, errno: code, connecting: true), &state)
                        case .connected: failed(.lost, reason(rc, errno: code, connecting: false), &state)
                        }
                    }
                }
            }
        }
    }

    /// What the connection thread does next (with the state locked): and what is due meanwhile.
    private func nextStep(_ state: inout State, at now: Double) -> Step {
        if state.stopping { return .stop(connected: state.link == .connected) }
        sayBadCommands(&state, at: now)
        switch state.link {
        case .waiting(let until):
            guard now >= until else { return .sleep(until - now) }
            defer { state.tried = true }
            return .connect(first: !state.tried)
        case .connecting(let since):
            guard now - since >= Self.connectTimeout else { return .service }
            failed(
                .unreachable,
                "no answer within \(DecimalText.fixed(Self.connectTimeout, 0)) s — is the broker up, and is it the right port?",
                &state)
            return .sleep(0)
        case .connected:
            if let discovery, !state.finished, state.announcements.due(at: now) {
                log.debug("announcing the camera to Home Assistant again")
                for message in discovery.messages { publish(message, &state) }
            }
            if state.resendingSince != nil { drainIfInOrder(&state) }
            return .service
        }
    }

    /// Says goodbye (`DISCONNECT`, so that the broker does not send the last will) and waits up
    /// to a second for it to go out.
    private func disconnect() {
        mosquitto_disconnect(client)
        let deadline = Self.now() + 1
        while mosquitto_socket(client) >= 0 && Self.now() < deadline {
            guard mosquitto_loop(client, 100, 1) == MOSQ_ERR_SUCCESS.rawValue else { break }
        }
    }

    /// A try failed or the connection was lost: say so as `BrokerRetry` says, and wait.
    private func failed(_ failure: BrokerRetry.Failure, _ reason: String, _ state: inout State) {
        let now = Self.now()
        state.connected = false
        let decision = state.retry.failed(failure, at: now)
        state.link = .waiting(until: now + decision.retryIn)
        let fields: [(String, LogValue)] = [
            ("broker", .string(broker)), ("error", .string(reason)), ("retry_in", .seconds(decision.retryIn)),
        ]
        switch decision.say {
        case .outage(.unreachable):
            log.warning("MQTT broker not reachable yet; trying again in the background", fields)
        case .outage(.lost):
            log.warning("MQTT connection lost; reconnecting, and queueing what happens meanwhile", fields)
        case .outage(.refused):
            log.error("MQTT broker refused the connection; trying again", fields)
        case .takeOver(let sessions):
            log.error(
                "MQTT connection taken over again and again: two agents use this client id — set mqtt.client_id or camera.name so that each has its own; trying again less often meanwhile",
                [("client_id", .string(clientID)), ("broker", .string(broker)), ("lost_in_a_row", .int(sessions))]
                    + [("retry_in", .seconds(decision.retryIn))])
        case nil:
            log.debug("MQTT broker still not reachable", fields)
        }
    }

    /// How a failed call is counted.
    private func kind(_ rc: Int32) -> BrokerRetry.Failure {
        switch rc {
        case MOSQ_ERR_CONN_REFUSED.rawValue, MOSQ_ERR_TLS.rawValue, MOSQ_ERR_TLS_HANDSHAKE.rawValue,
            MOSQ_ERR_AUTH.rawValue, MOSQ_ERR_PROTOCOL.rawValue:
            .refused
        default: .unreachable
        }
    }

    /// What a libmosquitto result means, in words for the log (`errno`: the error number
    /// the call left; `connecting`: no CONNACK came yet).
    private func reason(_ rc: Int32, errno code: Int32, connecting: Bool) -> String {
        switch rc {
        case MOSQ_ERR_ERRNO.rawValue:
            return code == 0 ? "the connection failed" : SystemError(code).text
        case MOSQ_ERR_EAI.rawValue:
            return "\(settings.host) does not resolve: \(String(cString: gai_strerror(code)))"
        case MOSQ_ERR_KEEPALIVE.rawValue:
            return connecting
                ? "no answer within \(settings.keepalive) s (mqtt.keepalive) — is the broker up, and is it the right port?"
                : "the broker stopped answering: nothing within \(settings.keepalive) s (mqtt.keepalive)"
        case MOSQ_ERR_CONN_LOST.rawValue:
            return "the broker closed the connection"
        case MOSQ_ERR_TLS.rawValue, MOSQ_ERR_TLS_HANDSHAKE.rawValue:
            let detail = libraryError.withLock { $0 }.map { ": \($0)" } ?? ""
            return
                "TLS failed\(detail) — check mqtt.tls_ca_file (the CA that signed the broker's certificate) and that mqtt.host is a name the certificate holds"
        case MOSQ_ERR_PROTOCOL.rawValue:
            return "the broker's answer is not MQTT 3.1.1 — is mqtt.port the broker's (8883 is usually TLS)?"
        default:
            return String(cString: mosquitto_strerror(rc))
        }
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
            guard state.inflight.isEmpty || Self.now() - since > Self.resendPatience else { return }
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
        let qos = message.transient ? 0 : settings.qos
        let rc = message.payload.withUnsafeBytes { bytes in
            mosquitto_publish(
                client, &mid, message.topic, Int32(bytes.count), bytes.baseAddress, Int32(qos), message.retain)
        }
        switch rc {
        case MOSQ_ERR_SUCCESS.rawValue:
            if qos > 0 { state.inflight.insert(mid) }
            return true
        case MOSQ_ERR_NO_CONN.rawValue, MOSQ_ERR_CONN_LOST.rawValue:
            state.connected = false
            return false
        default:
            log.error(
                "MQTT message not published",
                [("topic", .string(message.topic)), ("error", .string(String(cString: mosquitto_strerror(rc))))])
            return true  // not one the broker will ever take: go on with the others
        }
    }

    // MARK: Callbacks (on the connection thread, inside `mosquitto_loop`)

    private func connected(_ rc: Int32) {
        state.withLock { state in
            guard rc == 0 else {
                failed(.refused, String(cString: mosquitto_connack_string(rc)), &state)
                return
            }
            let now = Self.now()
            state.link = .connected
            state.connected = true
            // What was in flight at the loss goes again first (libmosquitto's resend): the queue
            // waits for it.
            if !state.inflight.isEmpty { state.resendingSince = now }
            if let recovery = state.retry.connected(at: now) {
                var fields: [(String, LogValue)] = [
                    ("broker", .string(broker)), ("client_id", .string(clientID)),
                    ("queued", .int(state.queue.count)), ("dropped", .int(state.dropped)),
                ]
                if let down = recovery.down { fields += [("down", .seconds(down)), ("tries", .int(recovery.tries))] }
                log.info(recovery.first ? "MQTT connected" : "MQTT connected again", fields)
            }
            state.dropped = 0
            guard !state.finished else { return }
            subscribe()
            // What a newcomer (Home Assistant) needs: online, the configs, the states now —
            // then what happened meanwhile, in order.
            publish(MQTTMessage(topic: availability, text: "online", retain: true), &state)
            for message in discovery?.messages ?? [] { publish(message, &state) }
            state.announcements.announced(at: now)
            if let control { publish(topics.state(detecting: control.detectionEnabled), &state) }
            // Motion as it is now, unless what waits in the queue changes it: then the history
            // that follows ends with it (and nothing older comes after it).
            if !state.queue.contains(where: { $0.topic == topics.motion }) {
                publish(state.messages.motionState, &state)
            }
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
                log.error(
                    "MQTT: cannot subscribe",
                    [("topic", .string(topic)), ("error", .string(String(cString: mosquitto_strerror(rc))))])
            }
        }
    }

    /// A message on a topic subscribed to: a command, or Home Assistant starting.
    private func received(topic: String, payload: [UInt8], retained: Bool) {
        if let discovery, topic == discovery.statusTopic {
            guard String(decoding: payload, as: UTF8.self) == "online" else { return }
            state.withLock { state in
                guard !state.finished, state.announcements.requested(at: Self.now()) else { return }
                log.debug("Home Assistant is online; announcing the camera again")
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
        case .failure(let error):
            state.withLock { state in
                state.lastBadCommand = error.description
                guard let notLogged = state.badCommands.occurred(at: Self.now()) else { return }
                log.warning(
                    "MQTT command ignored",
                    [("error", .string(error.description))] + (notLogged > 0 ? [("not_logged", .int(notLogged))] : []))
            }
        }
    }

    /// The commands ignored and not said one by one, said as a count (`now` nil: at the stop,
    /// whatever is left). Never inlined: Swift 6.3's optimiser crashes (an ownership error in
    /// CopyPropagation) on the log call's closure borrowing the locked state's string.
    @inline(never)
    private func sayBadCommands(_ state: inout State, at now: Double?) {
        guard let count = state.badCommands.flush(at: now) else { return }
        let last = String(state.lastBadCommand)
        log.warning("MQTT commands ignored, not logged one by one", [("count", .int(count)), ("last", .string(last))])
    }

    private func disconnected(_ rc: Int32, errno code: Int32) {
        state.withLock { state in
            state.connected = false
            guard !state.stopping, rc != 0 else { return }
            switch state.link {
            case .waiting: break  // already counted (a refusal, a try given up)
            case .connecting: failed(kind(rc), reason(rc, errno: code, connecting: true), &state)
            case .connected: failed(.lost, reason(rc, errno: code, connecting: false), &state)
            }
        }
    }

    private func published(_ mid: Int32) {
        state.withLock { state in
            state.inflight.remove(mid)
            if state.resendingSince != nil, !state.finished { drainIfInOrder(&state) }
        }
    }
}
