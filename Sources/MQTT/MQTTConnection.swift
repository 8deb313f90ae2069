internal import CMosquitto
import FoundationEssentials
import Logging
import Media
import POSIX
import Recorder

/// The sink's connection thread (`mqtt`) and libmosquitto's callbacks, which run on it inside
/// `mosquitto_loop`.
extension MQTTSink {
    enum Step {
        case connect(first: Bool)
        case service
        case sleep(Double)
        /// `finish` asked: say goodbye by `by` (`DISCONNECT`), or leave without one.
        case stop(goodbye: Bool, by: Double)
        /// The storage directory came up: its newest clip on `last_clip`, unless a clip is
        /// saved meanwhile (`saved`: the clips saved when it was asked).
        case sayNewestClip(any ClipStorage, saved: Int)
    }

    /// The connection thread: tries, services and makes again the connection until `finish`.
    func run() {
        // Signals are the agent's: SIGTERM or SIGHUP taken here would end the process before
        // the clip is finished, and a SIGPIPE from a TLS write must not end it either.
        Signals.blockAllInThisThread()
        while true {
            defer { changed.ring() }
            let step = state.withLock { state in nextStep(&state, at: now()) }
            switch step {
            case .stop(let goodbye, let deadline):
                if goodbye { disconnect(by: deadline) } else { leave() }
                return
            case .sleep(let seconds):
                _ = stopAsked.wait(seconds: seconds)
            case .sayNewestClip(let storage, let saved):
                let newest = Self.newestClip(in: storage) { [log] error in
                    log.warning(
                        "the newest clip is not said on last_clip: the clip catalogue cannot be read; the next clip saved is",
                        [("error", .string(error.description))])
                }
                state.withLock { state in
                    guard let newest, !state.finished, state.clipsSaved == saved else { return }
                    enqueue(state.messages.lastClip(newest), &state)
                    drainIfInOrder(&state)
                }
            case .connect(let first):
                // The name lookup (and a TLS set-up) happen here: on this thread, never the
                // agent's. The TCP connection is made without waiting; `service` sees it through.
                SystemError.clearCurrent()
                let rc =
                    first
                    ? mosquitto_connect_async(client, settings.host, Int32(settings.port), Int32(settings.keepalive))
                    : mosquitto_reconnect_async(client)
                let code = SystemError.current.code
                state.withLock { state in
                    if rc == MOSQ_ERR_SUCCESS.rawValue {
                        state.link = .connecting(since: now())
                    } else {
                        failed(kind(rc), reason(rc, errno: code, connecting: true), &state)
                    }
                }
            case .service:
                let rc = mosquitto_loop(client, Int32(Self.tick * 1000), 1)
                let code = SystemError.current.code
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
    func nextStep(_ state: inout State, at now: Double) -> Step {
        if state.stopping { return .stop(goodbye: state.goodbye && state.link == .connected, by: state.stopBy) }
        if let storage = state.newestToSay {
            state.newestToSay = nil
            return .sayNewestClip(storage, saved: state.clipsSaved)
        }
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
            if let discovery, state.announced, !state.finished, state.announcements.due(at: now) {
                log.debug("announcing the camera to Home Assistant again")
                for message in discovery.messages { publish(message, &state) }
            }
            if state.resendingSince != nil || !state.announced { drainIfInOrder(&state) }
            return .service
        }
    }

    /// Says goodbye (`DISCONNECT`, so that the broker does not send the last will) and waits
    /// until `deadline` (seconds of the real monotonic clock: the stop's bound) at most for it
    /// to go out.
    func disconnect(by deadline: Double) {
        mosquitto_disconnect(client)
        func now() -> Double { Clock.monotonic.now().seconds }
        while mosquitto_socket(client) >= 0 && now() < deadline {
            let wait = Int32(max(10, min(100, (deadline - now()) * 1000)))
            guard mosquitto_loop(client, wait, 1) == MOSQ_ERR_SUCCESS.rawValue else { break }
        }
    }

    /// Leaves without a goodbye: the connection is shut (libmosquitto closes the socket when
    /// the sink goes), and the broker says the last will, `offline`, once it sees it closed.
    func leave() {
        let socket = mosquitto_socket(client)
        if socket >= 0 { try? FileDescriptor(unowned: socket).shutdownConnection() }
    }

    /// A try failed or the connection was lost: say so as `BrokerRetry` says, and wait.
    func failed(_ failure: BrokerRetry.Failure, _ reason: String, _ state: inout State) {
        let now = self.now()
        state.connected = false
        let decision = state.retry.failed(failure, at: now)
        state.link = .waiting(until: now + decision.retryIn)
        let fields: [(String, LogValue)] = [
            ("broker", .string(broker)), ("error", .string(reason)), ("retry_in", .seconds(decision.retryIn)),
        ]
        if decision.takenOver {
            log.debug(
                "MQTT connection taken by the other agent with this client id",
                [("client_id", .string(clientID))] + fields)
            return
        }
        switch decision.say {
        case .outage(.unreachable):
            log.warning("MQTT broker not reachable yet; trying again in the background", fields)
        case .outage(.lost):
            log.warning("MQTT connection lost; reconnecting, and queueing what happens meanwhile", fields)
        case .outage(.refused):
            log.error("MQTT broker refused the connection; trying again", fields)
        case .sharedClientID, nil:
            log.debug("MQTT broker still not reachable", fields)
        }
    }

    /// How a failed call is counted.
    func kind(_ rc: Int32) -> BrokerRetry.Failure {
        switch rc {
        case MOSQ_ERR_CONN_REFUSED.rawValue, MOSQ_ERR_TLS.rawValue, MOSQ_ERR_TLS_HANDSHAKE.rawValue,
            MOSQ_ERR_AUTH.rawValue, MOSQ_ERR_PROTOCOL.rawValue:
            .refused
        default: .unreachable
        }
    }

    /// What a libmosquitto result means, in words for the log (`errno`: the error number
    /// the call left; `connecting`: no CONNACK came yet).
    func reason(_ rc: Int32, errno code: Int32, connecting: Bool) -> String {
        switch rc {
        case MOSQ_ERR_ERRNO.rawValue:
            return code == 0 ? "the connection failed" : SystemError(code).text
        case MOSQ_ERR_EAI.rawValue:
            return "\(settings.host) does not resolve: \(HostName.lookupErrorText(code))"
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

    // MARK: Callbacks (on the connection thread, inside `mosquitto_loop`)

    func connected(_ rc: Int32) {
        state.withLock { state in
            guard rc == 0 else {
                failed(.refused, String(cString: mosquitto_connack_string(rc)), &state)
                return
            }
            let now = self.now()
            state.link = .connected
            state.connected = true
            state.connections += 1
            state.announced = false
            // What was in flight at the loss goes again first (libmosquitto's resend, once this
            // callback returns): the connection's messages and the queue wait for it.
            if !state.inflight.isEmpty { state.resendingSince = now }
            let recovery = state.retry.connected(at: now)
            var fields: [(String, LogValue)] = [
                ("broker", .string(broker)), ("client_id", .string(clientID)),
                ("queued", .int(state.queue.count)), ("dropped", .int(state.dropped)),
            ]
            if let down = recovery.down { fields += [("down", .seconds(down)), ("tries", .int(recovery.tries))] }
            log.info(recovery.first ? "MQTT connected" : "MQTT connected again", fields)
            state.dropped = 0
            guard !state.finished else { return }
            // Subscribed before the presence goes out: the broker hands the one retained first.
            subscribe()
            // What a newcomer (Home Assistant) needs, `online` last — then what happened
            // meanwhile, in order.
            drainIfInOrder(&state)
        }
    }

    /// The command topics (with somewhere to send them), Home Assistant's status, and the
    /// client id's presence.
    func subscribe() {
        var wanted = [presence.topic]
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

    /// A message on a topic subscribed to: a command, Home Assistant starting, or who
    /// connected last with this client id.
    func received(topic: String, payload: [UInt8], retained: Bool) {
        if topic == presence.topic {
            // Only what the broker kept (what it hands at the subscription) tells.
            if retained { sawPresence(payload) }
            return
        }
        if let discovery, topic == discovery.statusTopic {
            guard String(decoding: payload, as: UTF8.self) == "online" else { return }
            state.withLock { state in
                // Before the connection's own announcement, that one answers it.
                guard !state.finished, state.announced, state.announcements.requested(at: now()) else { return }
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
        case .success(.outside(let request)): control.ask(request, by: "mqtt")
        case .success(.detection(let on)): control.setDetection(on, by: "mqtt")
        case .failure(let error):
            state.withLock { state in
                state.lastBadCommand = error.description
                guard let notLogged = state.badCommands.occurred(at: now()) else { return }
                log.warning(
                    "MQTT command ignored",
                    [("error", .string(error.description))] + (notLogged > 0 ? [("not_logged", .int(notLogged))] : []))
            }
        }
    }

    /// The presence the broker kept for this client id, at a connection: another agent's means
    /// it connected with this client id since this agent's last connection. Only a connection
    /// after one on which the broker acknowledged this agent's presence tells: before, what it
    /// kept may be an earlier run's of this very agent.
    func sawPresence(_ payload: [UInt8]) {
        state.withLock { state in
            let whose = presence.whose(payload)
            guard let acknowledged = state.presenceAcknowledged, acknowledged < state.connections else { return }
            let other: ClientPresence.Agent?
            switch whose {
            case .unreadable: return
            case .ours: other = nil
            case .another(let agent): other = agent
            }
            guard state.retry.presence(another: other != nil) == .sharedClientID, let other else { return }
            log.error(
                "MQTT client id in use by another agent: the broker lets one connect at a time and each throws the other off — set mqtt.client_id or camera.name so that each has its own; trying again less often meanwhile",
                [
                    ("client_id", .string(clientID)), ("other_camera", .string(other.camera)),
                    ("other_host", .string(other.host)), ("broker", .string(broker)),
                ])
        }
    }

    /// The commands ignored and not said one by one, said as a count (`now` nil: at the stop,
    /// whatever is left). Never inlined: Swift 6.3's optimiser crashes (an ownership error in
    /// CopyPropagation) on the log call's closure borrowing the locked state's string.
    @inline(never)
    func sayBadCommands(_ state: inout State, at now: Double?) {
        guard let count = state.badCommands.flush(at: now) else { return }
        let last = String(state.lastBadCommand)
        log.warning("MQTT commands ignored, not logged one by one", [("count", .int(count)), ("last", .string(last))])
    }

    func disconnected(_ rc: Int32, errno code: Int32) {
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

    func published(_ mid: Int32) {
        state.withLock { state in
            state.inflight.remove(mid)
            if mid == state.presenceSent {
                state.presenceSent = nil
                state.presenceAcknowledged = state.connections
            }
            if (state.resendingSince != nil || !state.announced) && !state.finished { drainIfInOrder(&state) }
        }
    }
}
