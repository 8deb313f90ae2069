import FoundationEssentials

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
        /// `mqtt.client_id`; nil for `vigil-<camera.name>` (`clientID(camera:)`).
        public var configuredClientID: String?
        public var topicPrefix: String
        public var qos: Int
        public var keepalive: Int
        /// Home Assistant's MQTT discovery: on, and under which prefix.
        public var discovery: Bool
        public var discoveryPrefix: String

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
    /// The client id: `mqtt.client_id`, or `vigil-<camera>`.
    public func clientID(camera: String) -> String { configuredClientID ?? "vigil-\(camera)" }
    /// `<topic_prefix>/<camera>`: where every topic of this camera starts.
    public func base(camera: String) -> String { topicPrefix + "/" + camera }
}

extension Settings {
    /// The `mqtt.*` values, checked: a topic prefix that makes valid topics, files that can be
    /// read (relative paths are from the configuration file's directory).
    static func mqtt(_ v: ConfigValues, camera: String, directory: String) throws(ConfigurationError) -> MQTT {
        func file(_ key: String) throws(ConfigurationError) -> String? {
            let text = v.text(key)
            guard !text.isEmpty else { return nil }
            let path = resolve(text, against: directory)
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw v.error(
                    key, "\(key): \(path) does not exist or cannot be read — check the path and its permissions")
            }
            return path
        }
        let enabled = v.boolean("mqtt.enabled")
        let host = v.text("mqtt.host")
        if enabled && host.isEmpty {
            throw v.error("mqtt.host", "mqtt.host is empty — give the broker's host name or address")
        }
        let prefix = v.text("mqtt.topic_prefix")
        if !isTopicPrefix(prefix) {
            throw v.error(
                "mqtt.topic_prefix",
                "mqtt.topic_prefix = \"\(prefix)\" cannot begin a topic — use letters, digits, - and _, levels joined by / (no leading or trailing /, no + or #)"
            )
        }
        let discoveryPrefix = v.text("mqtt.discovery_prefix")
        if !isTopicPrefix(discoveryPrefix) {
            throw v.error(
                "mqtt.discovery_prefix",
                "mqtt.discovery_prefix = \"\(discoveryPrefix)\" cannot begin a topic — use Home Assistant's (\"homeassistant\" unless you changed it there): letters, digits, - and _, no leading or trailing /, no + or #"
            )
        }
        // Only a file when MQTT is on: a config that turns it off need not have the secrets.
        var password: String?
        if enabled, let path = try file("mqtt.password_file") {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8),
                let line = text.split(separator: "\n", omittingEmptySubsequences: false).first, !line.isEmpty
            else {
                throw v.error(
                    "mqtt.password_file", "mqtt.password_file: \(path) is empty — put the password on its first line")
            }
            password = String(line)
        }
        var tls: MQTT.TLS?
        if enabled, let ca = try file("mqtt.tls_ca_file") {
            let cert = try file("mqtt.tls_cert_file"), key = try file("mqtt.tls_key_file")
            if (cert == nil) != (key == nil) {
                throw v.error(
                    cert == nil ? "mqtt.tls_key_file" : "mqtt.tls_cert_file",
                    "mqtt.tls_cert_file and mqtt.tls_key_file go together — give both, or neither")
            }
            tls = MQTT.TLS(caFile: ca, certFile: cert, keyFile: key, insecure: v.boolean("mqtt.tls_insecure"))
        } else if enabled, !v.text("mqtt.tls_cert_file").isEmpty || !v.text("mqtt.tls_key_file").isEmpty {
            let given = v.text("mqtt.tls_cert_file").isEmpty ? "mqtt.tls_key_file" : "mqtt.tls_cert_file"
            throw v.error(given, "\(given) needs mqtt.tls_ca_file too — TLS begins with the broker's CA")
        }
        let username = v.text("mqtt.username")
        let clientID = v.text("mqtt.client_id")
        return MQTT(
            enabled: enabled, host: host, port: v.integer("mqtt.port"), username: username.isEmpty ? nil : username,
            password: password, tls: tls, configuredClientID: clientID.isEmpty ? nil : clientID,
            topicPrefix: prefix, qos: v.integer("mqtt.qos"),
            keepalive: v.integer("mqtt.keepalive"), discovery: v.boolean("mqtt.discovery"),
            discoveryPrefix: discoveryPrefix)
    }

    /// Whether `prefix` can begin topics: not empty, no leading, trailing or double `/`, no wildcard.
    private static func isTopicPrefix(_ prefix: String) -> Bool {
        !(prefix.isEmpty || prefix.hasPrefix("/") || prefix.hasSuffix("/") || prefix.contains("+")
            || prefix.contains("#") || prefix.contains("//"))
    }
}
