import FoundationEssentials

/// Home Assistant's MQTT discovery: one device per camera, its entities announced with
/// retained configs under `<discovery_prefix>/<component>/vigil_<camera>/<object>/config`.
///
/// | component | object | what |
/// |---|---|---|
/// | `binary_sensor` | `motion` | `motion` (device class motion) |
/// | `image` | `snapshot` | the newest clip's picture (`snapshot`) |
/// | `sensor` | `last_clip` | the newest clip's file (`last_clip`) |
/// | `sensor` | `disk_free` | free space on `storage.path`, MiB (from `stats`) |
/// | `switch` | `detection` | motion detection on or off (`detect`, `detect/set`) |
/// | `button` | `record` | records 30 seconds now (`record/set`) |
/// | `camera` | `live` | the live picture (`live`), when `snapshot.live_interval` makes one |
/// | `sensor` | `upload_waiting` | clips waiting to be uploaded (from `stats`), when `upload.url` is set |
/// | `event` | `event` | each event's phases (`event`): `start`, `end`, `saved` (with the clip's URL), `deleted`, `uploaded` |
///
/// Every entity follows `availability`. Home Assistant drops entities whose config it did not
/// get since it started: the configs go out at each connection and again whenever it says
/// `online` on `<discovery_prefix>/status`.
public struct HomeAssistantDiscovery: Sendable {
    public let prefix: String
    public let camera: String
    public let version: String
    let topics: MQTTMessages
    /// Whether the agent makes a live picture (`snapshot.live_interval`): the camera entity.
    public let livePictures: Bool

    /// `node`: the device's id in topics and unique ids.
    public var node: String { "vigil_" + camera }
    /// Where Home Assistant says `online` when it (re)starts.
    public var statusTopic: String { prefix + "/status" }
    /// What the record button sends to `record/set`: seconds to record.
    public static let buttonSeconds = "30"

    /// Whether the agent uploads its clips (`upload.url`): the upload backlog sensor.
    public let uploads: Bool

    public init(
        prefix: String, camera: String, version: String, topics: MQTTMessages, livePictures: Bool = false,
        uploads: Bool = false
    ) {
        self.prefix = prefix
        self.camera = camera
        self.version = version
        self.topics = topics
        self.livePictures = livePictures
        self.uploads = uploads
    }

    /// The event entity's types: the `event` topic's phases.
    public static let eventTypes = ["start", "end", "saved", "deleted", "uploaded"]

    /// One entity's config: the keys Home Assistant reads (nil ones are left out).
    public struct Config: Codable, Equatable, Sendable {
        public var name: String
        public var deviceClass: String?
        public var stateTopic: String?
        public var commandTopic: String?
        public var imageTopic: String?
        /// A camera entity's: where its JPEG comes.
        public var topic: String?
        /// An event entity's: the `event_type`s its payloads carry.
        public var eventTypes: [String]?
        public var contentType: String?
        public var payloadOn: String?
        public var payloadOff: String?
        public var payloadPress: String?
        public var valueTemplate: String?
        public var unitOfMeasurement: String?
        public var stateClass: String?
        public var entityCategory: String?
        public var icon: String?
        public var uniqueID = ""
        /// `<component>.<node>_<object>`: the entity id Home Assistant gives it (its 2025.10
        /// replaced `object_id` with this; 2026.4 no longer takes `object_id`).
        public var defaultEntityID = ""
        public var availabilityTopic = ""
        public var payloadAvailable = "online"
        public var payloadNotAvailable = "offline"
        public var qos = 1
        public var device = Device()
        public var origin = Origin()

        public struct Device: Codable, Equatable, Sendable {
            public var identifiers: [String] = []
            public var name = ""
            public var manufacturer = "Vigil"
            public var model = "Vigil motion recorder"
            public var swVersion = ""

            enum CodingKeys: String, CodingKey {
                case identifiers, name, manufacturer, model
                case swVersion = "sw_version"
            }
        }

        public struct Origin: Codable, Equatable, Sendable {
            public var name = "Vigil"
            public var swVersion = ""

            enum CodingKeys: String, CodingKey {
                case name
                case swVersion = "sw_version"
            }
        }

        enum CodingKeys: String, CodingKey {
            case name, icon, qos, device, origin, topic
            case eventTypes = "event_types"
            case deviceClass = "device_class"
            case stateTopic = "state_topic"
            case commandTopic = "command_topic"
            case imageTopic = "image_topic"
            case contentType = "content_type"
            case payloadOn = "payload_on"
            case payloadOff = "payload_off"
            case payloadPress = "payload_press"
            case valueTemplate = "value_template"
            case unitOfMeasurement = "unit_of_measurement"
            case stateClass = "state_class"
            case entityCategory = "entity_category"
            case uniqueID = "unique_id"
            case defaultEntityID = "default_entity_id"
            case availabilityTopic = "availability_topic"
            case payloadAvailable = "payload_available"
            case payloadNotAvailable = "payload_not_available"
        }

        // Made with its memberwise initializer: the name and the keys the entity sets, in order.
    }

    /// One entity: where its config goes and what it says.
    public struct Entity: Sendable {
        public var component: String
        public var object: String
        public var config: Config
    }

    public var entities: [Entity] {
        let motion = Config(
            name: "Motion", deviceClass: "motion", stateTopic: topics.motion, payloadOn: "ON", payloadOff: "OFF")
        let snapshot = Config(name: "Snapshot", imageTopic: topics.snapshot, contentType: "image/jpeg")
        let lastClip = Config(name: "Last clip", stateTopic: topics.lastClip, icon: "mdi:filmstrip")
        // `disk_free_mb` counts MiB (2^20 bytes), a unit Home Assistant's data_size takes.
        var diskFree = statsSensor("Disk free", figure: "disk_free_mb", unit: "MiB")
        diskFree.deviceClass = "data_size"
        let detection = Config(
            name: "Motion detection", stateTopic: topics.detect, commandTopic: topics.detectCommand, payloadOn: "ON",
            payloadOff: "OFF", icon: "mdi:motion-sensor")
        let record = Config(
            name: "Record", commandTopic: topics.recordCommand, payloadPress: Self.buttonSeconds, icon: "mdi:record-rec"
        )
        var backlog = statsSensor("Upload backlog", figure: "upload_waiting", unit: "clips")
        backlog.icon = "mdi:cloud-upload"
        let live = Config(name: "Live", topic: topics.live)
        let events = Config(name: "Event", stateTopic: topics.eventTopic, eventTypes: Self.eventTypes, icon: "mdi:cctv")
        return [
            Entity(component: "binary_sensor", object: "motion", config: motion),
            Entity(component: "image", object: "snapshot", config: snapshot),
            Entity(component: "sensor", object: "last_clip", config: lastClip),
            Entity(component: "sensor", object: "disk_free", config: diskFree),
            Entity(component: "switch", object: "detection", config: detection),
            Entity(component: "button", object: "record", config: record),
            Entity(component: "event", object: "event", config: events),
        ] + (livePictures ? [Entity(component: "camera", object: "live", config: live)] : [])
            + (uploads ? [Entity(component: "sensor", object: "upload_waiting", config: backlog)] : [])
    }

    /// A diagnostic sensor of one figure of the `stats` topic.
    private func statsSensor(_ name: String, figure: String, unit: String) -> Config {
        Config(
            name: name, stateTopic: topics.stats, valueTemplate: "{{ value_json.\(figure) }}", unitOfMeasurement: unit,
            stateClass: "measurement", entityCategory: "diagnostic")
    }

    /// The retained config messages, with the device, availability and unique ids filled in.
    public var messages: [MQTTMessage] {
        entities.map { entity in
            var config = entity.config
            config.uniqueID = "\(node)_\(entity.object)"
            config.defaultEntityID = "\(entity.component).\(node)_\(entity.object)"
            config.availabilityTopic = topics.availability
            config.device.identifiers = [node]
            config.device.name = camera
            config.device.swVersion = version
            config.origin.swVersion = version
            return MQTTMessage(
                topic: "\(prefix)/\(entity.component)/\(node)/\(entity.object)/config",
                payload: MQTTMessages.encode(config), retain: true)
        }
    }
}
