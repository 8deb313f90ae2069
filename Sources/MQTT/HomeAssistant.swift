import Foundation

/// Home Assistant's MQTT discovery: one device per camera, its entities announced with
/// retained configs under `<discovery_prefix>/<component>/vigil_<camera>/<object>/config`.
///
/// | component | object | what |
/// |---|---|---|
/// | `binary_sensor` | `motion` | `motion` (device class motion) |
/// | `image` | `snapshot` | the newest clip's picture (`snapshot`) |
/// | `sensor` | `last_clip` | the newest clip's file (`last_clip`) |
/// | `sensor` | `disk_free` | free space on `storage.path`, MB (from `stats`) |
/// | `switch` | `detection` | motion detection on or off (`detect`, `detect/set`) |
/// | `button` | `record` | records 30 seconds now (`record/set`) |
///
/// Every entity follows `availability`. Home Assistant drops entities whose config it did not
/// get since it started: the configs go out at each connection and again whenever it says
/// `online` on `<discovery_prefix>/status`.
public struct HomeAssistantDiscovery: Sendable {
    public let prefix: String
    public let camera: String
    public let version: String
    let topics: MQTTMessages

    /// `node`: the device's id in topics and unique ids.
    public var node: String { "vigil_" + camera }
    /// Where Home Assistant says `online` when it (re)starts.
    public var statusTopic: String { prefix + "/status" }
    /// What the record button sends to `record/set`: seconds to record.
    public static let buttonSeconds = "30"

    public init(prefix: String, camera: String, version: String, topics: MQTTMessages) {
        self.prefix = prefix
        self.camera = camera
        self.version = version
        self.topics = topics
    }

    /// One entity: where its config goes and what it says.
    public struct Entity: Sendable {
        public var component: String
        public var object: String
        public var config: [String: any Sendable]
    }

    public var entities: [Entity] {
        [
            Entity(
                component: "binary_sensor", object: "motion",
                config: [
                    "name": "Motion", "device_class": "motion", "state_topic": topics.motion,
                    "payload_on": "ON", "payload_off": "OFF",
                ]),
            Entity(
                component: "image", object: "snapshot",
                config: ["name": "Snapshot", "image_topic": topics.snapshot, "content_type": "image/jpeg"]),
            Entity(
                component: "sensor", object: "last_clip",
                config: ["name": "Last clip", "state_topic": topics.lastClip, "icon": "mdi:filmstrip"]),
            Entity(
                component: "sensor", object: "disk_free",
                config: [
                    "name": "Disk free", "state_topic": topics.stats,
                    "value_template": "{{ value_json.disk_free_mb }}", "unit_of_measurement": "MB",
                    "device_class": "data_size", "state_class": "measurement", "entity_category": "diagnostic",
                ]),
            Entity(
                component: "switch", object: "detection",
                config: [
                    "name": "Motion detection", "command_topic": topics.detectCommand, "state_topic": topics.detect,
                    "payload_on": "ON", "payload_off": "OFF", "icon": "mdi:motion-sensor",
                ]),
            Entity(
                component: "button", object: "record",
                config: [
                    "name": "Record", "command_topic": topics.recordCommand, "payload_press": Self.buttonSeconds,
                    "icon": "mdi:record-rec",
                ]),
        ]
    }

    /// The retained config messages, with the device, availability, unique ids and default
    /// entity ids (`<component>.vigil_<camera>_<object>`) filled in.
    public var messages: [MQTTMessage] {
        entities.map { entity in
            var config = entity.config
            config["unique_id"] = "\(node)_\(entity.object)"
            // Home Assistant 2025.10 replaced `object_id` with this (2026.4 no longer takes it).
            config["default_entity_id"] = "\(entity.component).\(node)_\(entity.object)"
            config["availability_topic"] = topics.availability
            config["payload_available"] = "online"
            config["payload_not_available"] = "offline"
            config["qos"] = 1
            config["device"] =
                [
                    "identifiers": [node], "name": camera, "manufacturer": "Vigil", "model": "Vigil motion recorder",
                    "sw_version": version,
                ] as [String: any Sendable]
            config["origin"] = ["name": "Vigil", "sw_version": version] as [String: any Sendable]
            let data =
                (try? JSONSerialization.data(withJSONObject: config, options: [.sortedKeys, .withoutEscapingSlashes]))
                ?? Data()
            return MQTTMessage(
                topic: "\(prefix)/\(entity.component)/\(node)/\(entity.object)/config", payload: [UInt8](data),
                retain: true)
        }
    }
}
