import Agent
internal import CMosquitto
import Capture
import Configuration
import FoundationEssentials
import Logging
import Media
import POSIX
import Recorder
import Synchronization

/// Why the MQTT client could not be made.
public struct MQTTError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// The agent's events on an MQTT broker (libmosquitto): `MQTTMessages` says what goes where.
///
/// The broker never slows recording: `handle` only queues, and a thread of the sink's own
/// (`mqtt`, MQTTConnection.swift) does the network — publishing hands a message to
/// libmosquitto's out queue, it does not write to the socket. That thread makes the
/// connection, looks the broker's name up (the start of the agent never waits for a name
/// server), services it (`mosquitto_loop`), and makes it again after a failure as
/// `BrokerRetry` says: within a few seconds of the broker coming up however the first try
/// failed, and of a cut link holding again. A try that gets no answer within
/// `connectTimeout` is given up and made again.
///
/// At each connection, in this order: what libmosquitto sends again (what was in flight at
/// the loss); once the broker has acknowledged that, Home Assistant's configs, the retained
/// states as they are now, the agent's presence (`ClientPresence`) and `online` last
/// (`MQTTMessages.connection`); then what happened meanwhile, in order. While there is no
/// connection, messages wait in a queue of `queueLimit` (the oldest dropped when it is full,
/// said once per outage). So the broker gets what it is handed at QoS 1 or 2 in the order it
/// happened, some perhaps twice (QoS 1 is at least once), and a newcomer such as Home
/// Assistant has every state before the camera is `online` to it. The last will is `offline`
/// on `availability`, retained; `finish` delivers what it can within `deliverSeconds`, says
/// `offline` and disconnects — or, when the broker does not acknowledge, leaves without a
/// goodbye, so that the broker says the will — all within `finishSeconds`.
///
/// Home Assistant's `online` brings the discovery configs again, at most every
/// `AnnouncementPacing.interval` seconds; a command that says nothing is logged once, then
/// counted (`RepeatedWarning`).
public final class MQTTSink: EventSink, @unchecked Sendable {
    // `@unchecked Sendable`: the mutable state is in `state` (a Mutex) and `libraryError` (one);
    // libmosquitto's client is made for use from several threads (`mosquitto_threaded_set`).

    public static let queueLimit = 1000
    /// The longest `finish` takes, a broker that stopped answering included (the agent gives
    /// its sinks 2 s side by side).
    public static let finishSeconds = 1.5
    /// How long `finish` waits for the queue to go out before it says `offline`.
    public static let deliverSeconds = 1.0
    /// How long a try may wait for the broker's answer (TCP, TLS and its CONNACK).
    public static let connectTimeout = 10.0
    /// How often a bad command is said, at most (the others are counted).
    public static let badCommandInterval = 60.0
    /// How long the connection thread waits in `mosquitto_loop` before it looks at the clock.
    static let tick = 0.25
    /// How long the connection waits for the messages libmosquitto sends again after a
    /// reconnection before it goes on.
    static let resendPatience = 10.0

    let settings: Settings.MQTT
    /// `host:port`, for the log.
    let broker: String
    let clientID: String
    let log: Logger
    /// What the sink reads the time from (the agent's `Clock`): the broker's retries, the
    /// announcements' pacing, the waits of the stop.
    let clock: Clock
    /// Where commands go (`record/set`, `detect/set`); nil: none are taken.
    let control: AgentControl?
    /// The topics, for the commands (the state's copy changes with the events).
    let topics: MQTTMessages
    let discovery: HomeAssistantDiscovery?
    /// This agent on its client id's topic: how it sees another with the same client id.
    let presence: ClientPresence
    /// `struct mosquitto *`: touched by the connection thread and, through its thread-safe
    /// calls, by the agent's threads.
    let client: OpaquePointer
    let state: Mutex<State>
    /// libmosquitto's last error line (an OpenSSL error, say): its own lock, as libmosquitto
    /// logs from inside calls made with `state` locked.
    let libraryError = Mutex<String?>(nil)
    /// Set by `finish`: the connection thread ends.
    let stopAsked = Event()
    /// Rung when what `finish` waits for may have changed: by the connection thread after each
    /// step (a packet read or written, an acknowledgement, a connection made or lost), and by
    /// `handle` after it queued.
    let changed = StopToken()
    /// Set by the connection thread when it ends.
    let loopEnded = Event()

    struct State {
        var messages: MQTTMessages
        var connected = false
        /// Connections made so far.
        var connections = 0
        /// This connection's configs, states, presence and `online` went out.
        var announced = false
        var queue: [MQTTMessage] = []
        /// Published at QoS 1 or 2, not yet acknowledged (message ids).
        var inflight: Set<Int32> = []
        /// Messages dropped from a full queue during the current outage.
        var dropped = 0
        /// Since a reconnection, libmosquitto sends again what was published and not
        /// acknowledged before the loss; the connection's messages and the queue wait until
        /// those are acknowledged, so that the broker gets everything in order (a stale `ON`
        /// after the connection's `OFF` would leave the retained motion state wrong, and show
        /// Home Assistant an event that is over).
        var resendingSince: Double?
        /// The presence published last, not yet acknowledged: its message id.
        var presenceSent: Int32?
        /// The connection (`connections`) on which the broker last acknowledged the presence.
        var presenceAcknowledged: Int?
        var finished = false
        /// `finish` asked the connection thread to end: with a goodbye (`DISCONNECT`: the
        /// broker acknowledged everything) or without (the broker says the will), by `stopBy`.
        var stopping = false
        var goodbye = false
        var stopBy = 0.0
        /// Where the connection stands (the connection thread's, and its callbacks').
        var link = Link.waiting(until: 0)
        var tried = false
        var retry = BrokerRetry()
        var announcements = AnnouncementPacing()
        var badCommands = RepeatedWarning(interval: MQTTSink.badCommandInterval)
        var lastBadCommand = ""
        /// The storage directory that came up, whose newest clip the connection thread says on
        /// `last_clip` (opening the catalogue checks it: never on the writer's thread).
        var newestToSay: (any ClipStorage)?
        /// Clips saved so far: a clip saved while the newest is looked up says its own
        /// `last_clip`, and the one looked up is not said after it.
        var clipsSaved = 0
    }

    enum Link: Equatable {
        /// No connection: the next try at `until` (monotonic seconds).
        case waiting(until: Double)
        /// A try under way since then: no answer yet.
        case connecting(since: Double)
        case connected
    }

    /// `control`: where the command topics' requests go; `version`: for Home Assistant's
    /// device; `clock`: the agent's. Returns at once: the connection is made on the sink's own
    /// thread.
    public init(
        settings: Settings.MQTT, camera: String, log: Logger, timeZone: any LocalTimeZone,
        control: AgentControl? = nil, version: String = "unknown", linkBase: String? = nil, livePictures: Bool = false,
        uploads: Bool = false, clock: Clock = .monotonic
    ) throws(MQTTError) {
        self.settings = settings
        self.clock = clock
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
        clientID = settings.clientID(camera: camera, host: HostName.current)
        presence = ClientPresence(
            topicPrefix: settings.topicPrefix, clientID: clientID, camera: camera, host: HostName.current)
        self.log = log.with(("component", "mqtt"))
        mosquitto_lib_init()
        guard let client = mosquitto_new(clientID, true, nil) else {
            throw MQTTError(description: "cannot make an MQTT client: \(SystemError.current.text)")
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
                client, messages.availability, Int32(offline.count), offline, Int32(settings.qos), true),
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
            let code = SystemError.current.code
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
        // The callbacks find this sink through the client's user data; they run on the
        // connection thread, which holds the sink until `finish` ends it: the sink outlives
        // every callback.
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

    /// Seconds on the sink's clock: the unit of its decisions (`BrokerRetry`, `AnnouncementPacing`).
    func now() -> Double { clock.now().seconds }

    // MARK: EventSink

    /// The newest clip of `storage` as its catalogue lists it: one entry asked, however many
    /// there are (the journal is not read). Nil when there is none, or the catalogue cannot be
    /// read (`problem` says why).
    static func newestClip(
        in storage: any ClipStorage, problem: (CatalogueError) -> Void = { _ in }
    ) -> CatalogueEntry? {
        do { return try storage.openCatalogue().page(ClipQuery(limit: 1)).entries.first } catch {
            problem(error)
            return nil
        }
    }

    public func handle(_ event: AgentEvent) {
        // This logger is not the agent's (the sink is made before the agent): a reload's level
        // reaches it here.
        if case .reloaded(let settings) = event { log.level = settings.log.level }
        state.withLock { state in
            guard !state.finished else { return }
            switch event {
            case .storageReady(let storage): state.newestToSay = storage
            case .clipSaved: state.clipsSaved += 1
            default: break
            }
            for message in state.messages.messages(for: event) {
                guard message.transient else {
                    enqueue(message, &state)
                    continue
                }
                // Of the moment: now, behind nothing, or not at all.
                drainIfInOrder(&state)
                if state.connected && state.announced && state.queue.isEmpty && state.resendingSince == nil {
                    publish(message, &state)
                }
            }
            drainIfInOrder(&state)
        }
        changed.ring()
    }

    /// Delivers what it can within `deliverSeconds`, says `offline`, and lets go: within
    /// `finishSeconds` whatever the broker does (of the real monotonic clock: the stop is bounded
    /// in real time, whatever clock the sink reads).
    public func finish() {
        func now() -> Double { Clock.monotonic.now().seconds }
        let start = now()
        func settled() -> Bool {
            state.withLock { $0.connected && $0.announced && $0.queue.isEmpty && $0.inflight.isEmpty }
        }
        while !settled() && now() < start + Self.deliverSeconds {
            changed.wait(seconds: start + Self.deliverSeconds - now())
        }
        let left = state.withLock { state -> Int in
            state.finished = true
            if state.connected { publish(topics.availabilityMessage(online: false), &state) }
            return state.queue.count
        }
        // `offline` acknowledged, or no answer in time.
        let offlineBy = start + Self.finishSeconds - 0.3
        while !state.withLock({ $0.inflight.isEmpty || !$0.connected }) && now() < offlineBy {
            changed.wait(seconds: offlineBy - now())
        }
        let unacknowledged = state.withLock { state -> Int in
            sayBadCommands(&state, at: nil)
            state.stopping = true
            state.goodbye = state.connected && state.inflight.isEmpty
            state.stopBy = start + Self.finishSeconds - 0.1
            return state.inflight.count
        }
        stopAsked.signal()
        // A thread stuck in a name lookup, a connect or a goodbye the broker does not take is
        // not waited for: the process ends without it.
        _ = loopEnded.wait(seconds: max(0, start + Self.finishSeconds - 0.05 - now()))
        if left > 0 {
            log.warning(
                "MQTT messages not delivered: the broker was unreachable when the agent stopped",
                [("messages", .int(left))] + (unacknowledged > 0 ? [("unacknowledged", .int(unacknowledged))] : []))
        } else if unacknowledged > 0 {
            log.warning(
                "MQTT messages not acknowledged: the broker stopped answering before the agent stopped",
                [("broker", .string(broker)), ("unacknowledged", .int(unacknowledged))])
        }
    }

    // MARK: The queue (called with the state locked)

    func enqueue(_ message: MQTTMessage, _ state: inout State) {
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

    /// When connected and nothing sent before a loss is still unacknowledged (or it has waited
    /// longer than `resendPatience`): the connection's messages if they have not gone out,
    /// then the queue.
    func drainIfInOrder(_ state: inout State) {
        guard state.connected else { return }
        if let since = state.resendingSince {
            guard state.inflight.isEmpty || now() - since > Self.resendPatience else { return }
            state.resendingSince = nil
            state.inflight.removeAll()
        }
        if !state.announced {
            guard !state.finished else { return }
            let messages = state.messages.connection(
                discovery: discovery?.messages ?? [], detecting: control?.detectionEnabled, then: [presence.message])
            for message in messages {
                guard publish(message, &state) else { return }
            }
            state.announcements.announced(at: now())
            state.announced = true
        }
        while let message = state.queue.first {
            guard publish(message, &state) else { return }
            state.queue.removeFirst()
        }
    }

    /// Hands `message` to libmosquitto's out queue; false when it is not taken (it stays queued).
    @discardableResult
    func publish(_ message: MQTTMessage, _ state: inout State) -> Bool {
        var mid: Int32 = 0
        // The presence goes at least once: the broker's acknowledgement says it is retained.
        let qos = message.transient ? 0 : message.topic == presence.topic ? max(1, settings.qos) : settings.qos
        let rc = message.payload.withUnsafeBytes { bytes in
            mosquitto_publish(
                client, &mid, message.topic, Int32(bytes.count), bytes.baseAddress, Int32(qos), message.retain)
        }
        switch rc {
        case MOSQ_ERR_SUCCESS.rawValue:
            break
        case MOSQ_ERR_NO_CONN.rawValue, MOSQ_ERR_CONN_LOST.rawValue:
            state.connected = false
            // At QoS 1 or 2 libmosquitto keeps it all the same, and sends it first at the next
            // connection: it is in flight (kept here too, it would go twice).
            guard qos > 0 else { return false }
        default:
            log.error(
                "MQTT message not published",
                [("topic", .string(message.topic)), ("error", .string(String(cString: mosquitto_strerror(rc))))])
            return true  // not one the broker will ever take: go on with the others
        }
        if qos > 0 { state.inflight.insert(mid) }
        if message.topic == presence.topic { state.presenceSent = mid }
        return true
    }
}
