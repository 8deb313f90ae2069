import FoundationEssentials

/// How an agent sees another one connected with its client id, where the broker does not say
/// so: a broker drops a client when another connects with its id, and over MQTT 3.1.1 (and
/// from mosquitto before 2.0.15 over MQTT 5 too) the client dropped hears nothing but a closed
/// connection — the same as a cut link. So at each connection the agent subscribes to a topic
/// of its client id's own, `<topic_prefix>/client.id/<client id>`, and then publishes there,
/// retained, who it is (its camera, its machine, and a number drawn at start: this run). The
/// broker hands it the retained value first: at a reconnection, another agent's means that
/// one connected with this client id since this agent's last connection — the agent it took
/// the connection from. Its own means nobody did. (A camera name cannot hold a `.`: the topic
/// is no camera's.)
///
/// A value without I/O: the sink publishes `message` and asks `whose` of what comes back.
public struct ClientPresence: Sendable, Equatable {
    /// Who connected with the client id: the retained payload.
    public struct Agent: Codable, Sendable, Equatable {
        public var camera: String
        public var host: String
        /// Drawn at the agent's start: another run is another agent (a copied configuration on
        /// a copied card has the same camera and host).
        public var run: String
    }

    /// What the retained payload says.
    public enum Whose: Sendable, Equatable {
        /// This agent's: nobody else connected since its last connection.
        case ours
        /// Another agent's.
        case another(Agent)
        /// Nothing an agent writes: no evidence either way.
        case unreadable
    }

    public let topic: String
    public let agent: Agent

    /// `run`: this run's number (a random one by default).
    public init(
        topicPrefix: String, clientID: String, camera: String, host: String,
        run: String = String(UInt64.random(in: .min ... .max), radix: 16)
    ) {
        // A topic level holds no wildcard and no level separator.
        let level = String(clientID.map { "/+#".contains($0) ? "_" : $0 })
        topic = topicPrefix + "/client.id/" + level
        agent = Agent(camera: camera, host: host, run: run)
    }

    /// What the agent publishes at each connection, retained.
    public var message: MQTTMessage { MQTTMessage(topic: topic, payload: MQTTMessages.encode(agent), retain: true) }

    /// Whose presence `payload` (a retained message on `topic`) is.
    public func whose(_ payload: [UInt8]) -> Whose {
        guard let other = try? JSONDecoder().decode(Agent.self, from: Data(payload)) else { return .unreadable }
        return other == agent ? .ours : .another(other)
    }
}
