import FoundationEssentials
internal import POSIX

extension Settings {
    /// The `mqtt` section: the broker, how to log in, and the topics.
    public struct MQTT: Equatable, Sendable {
        public var enabled: Bool
        public var host: String
        public var port: Int
        public var username: String?
        /// The password, read from `mqtt.password_file` when the settings are loaded.
        public var password: String?
        public var tls: TLS?
        /// `mqtt.client_id`; nil for `vigil-<host name>-<camera.name>` (`clientID(camera:host:)`).
        public var configuredClientID: String?
        public var topicPrefix: String
        public var qos: Int
        public var keepalive: Int
        /// Home Assistant's MQTT discovery: on, and under which prefix.
        public var discovery: Bool
        public var discoveryPrefix: String
        /// Why MQTT cannot run with these settings although they are valid: a file the section
        /// names cannot be read (a password file not there yet). `vigil run` records without
        /// MQTT and says so; `vigil check` warns (`checkWarning`); a reload goes through.
        public var problem: ConfigurationError?

        public struct TLS: Equatable, Sendable {
            public var caFile: String
            public var certFile: String?
            public var keyFile: String?
            public var insecure: Bool
        }
    }

}

/// What follows from the camera's name (kept apart, so that a new `camera.name` is a camera
/// change, not an MQTT one).
extension Settings.MQTT {
    /// The client id: `mqtt.client_id`, or `vigil-<host>-<camera>` — one per machine and camera
    /// (a broker drops a client when another connects with its id), `host` being the machine's
    /// name with anything but letters, digits, `-`, `_` and `.` made `-`.
    public func clientID(camera: String, host: String) -> String {
        if let configuredClientID { return configuredClientID }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        let machine = String(host.prefix(64).map { allowed.contains($0) ? $0 : "-" })
        return machine.isEmpty ? "vigil-\(camera)" : "vigil-\(machine)-\(camera)"
    }

    /// What `vigil check` says of a valid configuration with which MQTT cannot run:
    /// `FILE:LINE: warning: …`.
    public var checkWarning: String? {
        guard enabled, let problem else { return nil }
        return problem.warning()
    }

    /// `<topic_prefix>/<camera>`: where every topic of this camera starts.
    public func base(camera: String) -> String { topicPrefix + "/" + camera }
}

extension Settings {
    /// The `mqtt.*` values, checked: a topic prefix that makes valid topics (what
    /// `topicPrefixRule` says). The files it names are read only when MQTT is on (relative
    /// paths are from the configuration file's directory): one that cannot be read is a
    /// `problem`, not an invalid configuration — recording does not depend on it.
    static func mqtt(_ v: ConfigValues, camera: String, directory: String) throws(ConfigurationError) -> MQTT {
        let enabled = v.boolean("mqtt.enabled")
        let host = v.text("mqtt.host")
        if enabled && host.isEmpty {
            throw v.error("mqtt.host", "mqtt.host is empty — give the broker's host name or address")
        }
        let prefix = v.text("mqtt.topic_prefix")
        if !isTopicPrefix(prefix) {
            throw v.error(
                "mqtt.topic_prefix", "mqtt.topic_prefix = \"\(prefix)\" cannot begin a topic — \(topicPrefixRule)")
        }
        let discoveryPrefix = v.text("mqtt.discovery_prefix")
        if !isTopicPrefix(discoveryPrefix) {
            throw v.error(
                "mqtt.discovery_prefix",
                "mqtt.discovery_prefix = \"\(discoveryPrefix)\" cannot begin a topic — use Home Assistant's (\"homeassistant\" unless you changed it there): \(topicPrefixRule)"
            )
        }
        if enabled, v.text("mqtt.tls_ca_file").isEmpty,
            !v.text("mqtt.tls_cert_file").isEmpty || !v.text("mqtt.tls_key_file").isEmpty
        {
            let given = v.text("mqtt.tls_cert_file").isEmpty ? "mqtt.tls_key_file" : "mqtt.tls_cert_file"
            throw v.error(given, "\(given) needs mqtt.tls_ca_file too — TLS begins with the broker's CA")
        }
        if enabled, v.text("mqtt.tls_cert_file").isEmpty != v.text("mqtt.tls_key_file").isEmpty {
            throw v.error(
                v.text("mqtt.tls_cert_file").isEmpty ? "mqtt.tls_key_file" : "mqtt.tls_cert_file",
                "mqtt.tls_cert_file and mqtt.tls_key_file go together — give both, or neither")
        }
        let username = v.text("mqtt.username")
        let clientID = v.text("mqtt.client_id")
        var mqtt = MQTT(
            enabled: enabled, host: host, port: v.integer("mqtt.port"), username: username.isEmpty ? nil : username,
            password: nil, tls: nil, configuredClientID: clientID.isEmpty ? nil : clientID,
            topicPrefix: prefix, qos: v.integer("mqtt.qos"),
            keepalive: v.integer("mqtt.keepalive"), discovery: v.boolean("mqtt.discovery"),
            discoveryPrefix: discoveryPrefix, problem: nil)
        // Only read when MQTT is on: a config that turns it off need not have the secrets.
        guard enabled else { return mqtt }
        do {
            mqtt.password = try passwordFile(v, directory: directory)
            if let ca = try readableFile(v, "mqtt.tls_ca_file", directory: directory) {
                mqtt.tls = MQTT.TLS(
                    caFile: ca, certFile: try readableFile(v, "mqtt.tls_cert_file", directory: directory),
                    keyFile: try readableFile(v, "mqtt.tls_key_file", directory: directory),
                    insecure: v.boolean("mqtt.tls_insecure"))
            }
        } catch {
            mqtt.problem = error
        }
        return mqtt
    }

    /// What a topic prefix may be, as the messages say it.
    static let topicPrefixRule =
        "use letters, digits, - and _, levels joined by / (no leading or trailing /, no + or #)"

    /// The largest password file read (mosquitto takes passwords up to 65535 bytes).
    static let passwordFileLimit = 65536

    /// `mqtt.password_file`'s first line, as it is (spaces are a password's own); nil when none
    /// is set.
    static func passwordFile(_ v: ConfigValues, directory: String) throws(ConfigurationError) -> String? {
        let key = "mqtt.password_file"
        guard let path = try readableFile(v, key, directory: directory) else { return nil }
        return try secretFileLine(
            v, key, path: path, limit: passwordFileLimit, holding: "the password",
            meanwhile: "MQTT stays off until then")
    }

    /// The file `key` names, made absolute; nil when none is set.
    static func readableFile(_ v: ConfigValues, _ key: String, directory: String) throws(ConfigurationError) -> String?
    {
        let text = v.text(key)
        guard !text.isEmpty else { return nil }
        let path = resolve(text, against: directory)
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw v.error(
                key,
                "\(key): \(path) does not exist or cannot be read by this user — check the path and its permissions; MQTT stays off until it can be read (recording is not affected)"
            )
        }
        return path
    }

    /// Whether `prefix` can begin topics: levels of letters, digits, `-` and `_` joined by `/`
    /// (so no empty level, no wildcard, no space).
    static func isTopicPrefix(_ prefix: String) -> Bool {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
        return prefix.split(separator: "/", omittingEmptySubsequences: false).allSatisfy {
            !$0.isEmpty && $0.allSatisfy(allowed.contains)
        }
    }
}
