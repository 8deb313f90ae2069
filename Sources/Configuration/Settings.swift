import Capture
import FoundationEssentials
import Logging
import Media
import MotionDetection

/// `path` made absolute against `directory` (unchanged when already absolute).
func resolve(_ path: String, against directory: String) -> String {
    if path.hasPrefix("/") { return path }
    return URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: directory, isDirectory: true))
        .standardizedFileURL.path
}

/// The whole configuration, typed and checked.
public struct Settings: Equatable, Sendable {
    public struct Camera: Equatable, Sendable {
        /// A relative `file:` path is already made absolute.
        public var device: SourceSpecifier
        public var name: String
        public var width: Int
        public var height: Int
        public var fps: Double
        /// How a player turns the picture (`camera.rotation`, parsed once here).
        public var rotation: Rotation
        public var realtime: Bool
    }

    public struct Audio: Equatable, Sendable {
        public var enabled: Bool
        public var device: String
        public var rate: Int
        public var channels: Int
    }

    public struct Recording: Equatable, Sendable {
        public var preRoll: Double
        public var postRoll: Double
        public var maxClip: Double
        public var preRollMaxBytes: Int
    }

    public struct Storage: Equatable, Sendable {
        /// Absolute.
        public var path: String
        public var filePattern: String
        /// nil keeps clips however old.
        public var maxAgeDays: Int?
        /// Bytes, nil for no limit.
        public var maxSize: Int64?
        /// Bytes.
        public var minFree: Int64
    }

    public struct Log: Equatable, Sendable {
        public var level: LogLevel
        /// Seconds; nil for no stats line.
        public var statsInterval: Int?
    }

    /// The `snapshot` section: each clip's picture, and the live `latest.jpg`.
    public struct Snapshot: Equatable, Sendable {
        public var enabled: Bool
        public var quality: Int
        /// The upright picture's width; 0 for the camera's own.
        public var width: Int
        /// Seconds between `latest.jpg` updates; 0 for none.
        public var liveInterval: Double
    }

    public struct Hooks: Equatable, Sendable {
        public var onEventStart: String?
        public var onClipSaved: String?
        /// `hooks.on_upload`: after a clip's verified upload.
        public var onUpload: String?
        public var timeout: Double
    }

    public var camera: Camera
    public var audio: Audio
    public var encoder: Encoder
    public var motion: MotionSettings
    /// The mask `motion.mask` names, loaded; nil when the whole picture is watched.
    public var motionMask: MotionMask?
    public var recording: Recording
    public var storage: Storage
    public var log: Log
    public var hooks: Hooks
    public var snapshot: Snapshot
    public var overlay: Overlay
    public var mqtt: MQTT
    public var web: Web
    public var rtsp: RTSP
    public var onvif: ONVIF
    public var upload: Upload
    /// The values they were made from, for `vigil check` and for messages.
    public var values: ConfigValues

    /// Every setting at its default: the settings of an empty configuration file.
    public static func defaults() throws(ConfigurationError) -> Settings {
        try Settings(values: ConfigValues(defaultsFor: "(defaults)"), directory: "/")
    }

    /// Loads, checks and types the configuration file at `path`.
    public static func load(path: String) throws(ConfigurationError) -> Settings {
        try Settings(
            values: ConfigValues.load(path: path),
            directory: resolve(path, against: FileManager.default.currentDirectoryPath).withoutLastPathComponent)
    }

    /// Types `values`, checking what ranges alone cannot; relative paths are taken relative
    /// to `directory` (the configuration file's).
    public init(values v: ConfigValues, directory: String) throws(ConfigurationError) {
        values = v
        let deviceText = v.text("camera.device")
        var device: SourceSpecifier
        do { device = try SourceSpecifier(parsing: deviceText) } catch {
            throw v.error(
                "camera.device",
                "camera.device = \"\(deviceText)\" is not a device — use a device path such as \"/dev/video0\", \"libcamera\" (a Raspberry Pi camera module; \"libcamera:ID\" for another, as `vigil probe` names it), \"synthetic\", or \"file:PATH.y4m\""
            )
        }
        if case .file(let path) = device { device = .file(path: resolve(path, against: directory)) }
        let name = v.text("camera.name")
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
        guard (1...32).contains(name.count), name.allSatisfy({ allowed.contains($0) }) else {
            throw v.error(
                "camera.name",
                "camera.name = \"\(name)\" cannot go into file names — use 1 to 32 letters, digits, - or _")
        }
        for key in ["camera.width", "camera.height"] where v.integer(key) % 2 != 0 {
            throw v.error(key, "\(key) = \(v.integer(key)) is odd — H.264 in 4:2:0 needs an even size")
        }
        let degrees = v.integer("camera.rotation")
        guard let rotation = Rotation(degrees: degrees) else {
            throw v.error("camera.rotation", Rotation.problem(degrees: degrees, setting: "camera.rotation"))
        }
        camera = Camera(
            device: device, name: name, width: v.integer("camera.width"), height: v.integer("camera.height"),
            fps: v.number("camera.fps"), rotation: rotation, realtime: v.boolean("camera.realtime"))

        let audioDevice = v.text("audio.device")
        guard !audioDevice.isEmpty else {
            throw v.error(
                "audio.device", "audio.device is empty — use an ALSA device such as \"default\" or \"hw:1,0\"")
        }
        audio = Audio(
            enabled: v.boolean("audio.enabled"), device: audioDevice, rate: v.integer("audio.rate"),
            channels: v.integer("audio.channels"))

        encoder = try Settings.encoder(v)

        let maskPath = v.text("motion.mask")
        let motion = MotionSettings(
            detectWidth: v.integer("motion.detect_width"), threshold: v.number("motion.threshold"),
            pixelThreshold: v.number("motion.pixel_threshold"), noiseMultiplier: v.number("motion.noise_multiplier"),
            backgroundRate: v.number("motion.background_rate"), minFrames: v.integer("motion.min_frames"),
            lightSwitchFraction: v.number("motion.light_switch_fraction"), despeckle: v.integer("motion.despeckle"),
            mask: maskPath.isEmpty ? "" : resolve(maskPath, against: directory),
            dynamicBackground: v.boolean("motion.dynamic_background"), dynamicLearn: v.number("motion.dynamic_learn"),
            dynamicForget: v.number("motion.dynamic_forget"))
        if motion.pixelThreshold > 0 && motion.pixelThreshold < 1 {
            throw v.error(
                "motion.pixel_threshold",
                "motion.pixel_threshold: \(motion.pixelThreshold) is out of range — use 0 to derive it from the measured noise, or grey levels from 1 to 255"
            )
        }
        if motion.threshold >= motion.lightSwitchFraction {
            throw v.error(
                "motion.threshold",
                "motion.threshold: \(motion.threshold) is not below motion.light_switch_fraction (\(motion.lightSwitchFraction)), so nothing could ever trigger — lower motion.threshold or raise motion.light_switch_fraction"
            )
        }
        self.motion = motion
        if motion.mask.isEmpty {
            motionMask = nil
        } else {
            guard let bytes = FileManager.default.contents(atPath: motion.mask) else {
                throw v.error(
                    "motion.mask",
                    "motion.mask: cannot read \(motion.mask) — check the path (relative paths start at the directory of the configuration file)"
                )
            }
            do { motionMask = try MotionMask(pgm: [UInt8](bytes), source: motion.mask) } catch {
                throw v.error("motion.mask", "motion.mask: \(error.description)")
            }
        }

        recording = Recording(
            preRoll: v.number("recording.pre_roll"), postRoll: v.number("recording.post_roll"),
            maxClip: v.number("recording.max_clip"), preRollMaxBytes: v.integer("recording.pre_roll_max_mb") << 20)
        if recording.preRoll >= recording.maxClip {
            throw v.error(
                "recording.pre_roll",
                "recording.pre_roll (\(formatNumber(recording.preRoll)) s) must be shorter than recording.max_clip (\(formatNumber(recording.maxClip)) s)"
            )
        }

        let storagePath = v.text("storage.path")
        guard !storagePath.isEmpty else {
            throw v.error("storage.path", "storage.path is empty — name the directory clips go to")
        }
        let pattern = v.text("storage.file_pattern")
        if let problem = Settings.patternProblem(pattern, camera: name) {
            throw v.error("storage.file_pattern", "storage.file_pattern \(problem)")
        }
        let maxAge = v.integer("storage.max_age_days"), maxSize = v.integer("storage.max_size_mb")
        storage = Storage(
            path: resolve(storagePath, against: directory), filePattern: pattern,
            maxAgeDays: maxAge == 0 ? nil : maxAge, maxSize: maxSize == 0 ? nil : Int64(maxSize) << 20,
            minFree: Int64(v.integer("storage.min_free_mb")) << 20)

        let interval = v.integer("log.stats_interval")
        log = Log(level: LogLevel(name: v.text("log.level")) ?? .info, statsInterval: interval == 0 ? nil : interval)

        var programs: [String: String?] = [:]
        for key in ["hooks.on_event_start", "hooks.on_clip_saved", "hooks.on_upload"] {
            let path = v.text(key)
            guard !path.isEmpty else {
                programs[key] = .some(nil)
                continue
            }
            guard path.hasPrefix("/") else {
                throw v.error(
                    key,
                    "\(key) = \"\(path)\" is not an absolute path — hooks run without a shell or PATH; give the program's full path"
                )
            }
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw v.error(
                    key, "\(key): \(path) does not exist or is not executable — check the path and `chmod +x` it")
            }
            programs[key] = .some(path)
        }
        hooks = Hooks(
            onEventStart: programs["hooks.on_event_start"] ?? nil, onClipSaved: programs["hooks.on_clip_saved"] ?? nil,
            onUpload: programs["hooks.on_upload"] ?? nil, timeout: v.number("hooks.timeout"))
        overlay = try Settings.overlay(v)
        let snapshotWidth = v.integer("snapshot.width")
        if snapshotWidth > 0 && snapshotWidth < 16 {
            throw v.error(
                "snapshot.width",
                "snapshot.width = \(snapshotWidth) is too small — use 16 pixels or more, or 0 for the camera's width")
        }
        let liveInterval = v.number("snapshot.live_interval")
        if liveInterval > 0 && liveInterval < Settings.shortestLiveInterval {
            throw v.error(
                "snapshot.live_interval",
                "snapshot.live_interval = \(formatNumber(liveInterval)) is out of range — use 0 for no latest.jpg, or \(formatNumber(Settings.shortestLiveInterval)) to 3600.0 seconds (each update rewrites and syncs the file)"
            )
        }
        snapshot = Snapshot(
            enabled: v.boolean("snapshot.enabled"), quality: v.integer("snapshot.quality"), width: snapshotWidth,
            liveInterval: v.number("snapshot.live_interval"))
        mqtt = try Settings.mqtt(v, camera: camera.name, directory: directory)
        web = try Settings.web(v, directory: directory)
        rtsp = try Settings.rtsp(v, web: web)
        onvif = try Settings.onvif(v, web: web, rtsp: rtsp, directory: directory)
        upload = try Settings.upload(v, directory: directory)
    }

    /// The shortest `snapshot.live_interval` but 0: each update rewrites and syncs `latest.jpg`.
    public static let shortestLiveInterval = 1.0

    /// Why a clip file name pattern cannot be used, or nil when it can. `camera` is what
    /// `{camera}` becomes.
    static func patternProblem(_ pattern: String, camera: String) -> String? {
        guard pattern.hasSuffix(".mov") else { return "must end in .mov" }
        guard !pattern.hasPrefix("/") else { return "must be relative to storage.path (no leading /)" }
        let parts = pattern.split(separator: "/", omittingEmptySubsequences: false)
        guard !parts.contains(where: { $0 == ".." || $0 == "." || $0.isEmpty }) else {
            return "must not contain empty, . or .. path parts"
        }
        guard let fields = patternFields(pattern) else {
            return "uses a % field other than %Y %m %d %H %M %S %%"
        }
        let withoutCamera = pattern.replacing("{camera}", with: "")
        guard !withoutCamera.contains("{"), !withoutCamera.contains("}") else {
            return "uses a {field} other than {camera}"
        }
        guard fields.contains("S") else {
            let literal = pattern.contains("%S") ? " — %%S is a percent sign followed by S, not the seconds" : ""
            return "must contain %S, so that clips started in the same minute get different names" + literal
        }
        guard parts.count <= ClipPathLimits.maximumComponents else {
            return
                "has \(parts.count) levels (directories and the file name) — use at most \(ClipPathLimits.maximumComponents), the depth at which retention looks for clips"
        }
        let suffix = "-\(ClipPathLimits.maximumCollisionSuffix)"
        for (index, part) in parts.enumerated() {
            let isFile = index == parts.count - 1
            let longest = longestExpansion(of: part, camera: camera) + (isFile ? suffix.utf8.count : 0)
            guard longest <= ClipPathLimits.maximumComponentBytes else {
                let shown = part.count > 40 ? part.prefix(40) + "…" : part
                var counted: [String] = []
                if part.contains("%") { counted.append("%Y as 4 digits, the other fields as 2") }
                if part.contains("{camera}") { counted.append("{camera} as \"\(camera)\"") }
                if isFile { counted.append("the \(suffix) put before .mov when a name is taken") }
                let how = counted.isEmpty ? "" : " (counting \(counted.joined(separator: ", ")))"
                return
                    "can make \(isFile ? "file" : "directory") names of \(longest) bytes from \"\(shown)\"\(how), over the \(ClipPathLimits.maximumComponentBytes) bytes a name may have — shorten that part"
            }
        }
        return nil
    }

    /// The `%` fields of `pattern`, in order (`%` for `%%`, a literal percent sign), or nil
    /// when one is not a field clip names know.
    static func patternFields(_ pattern: String) -> [Character]? {
        var fields: [Character] = []
        var chars = Array(pattern)[...]
        while let c = chars.popFirst() {
            guard c == "%" else { continue }
            guard let field = chars.popFirst(), "YmdHMS%".contains(field) else { return nil }
            fields.append(field)
        }
        return fields
    }

    /// The most bytes `part` of a pattern can expand to: `%Y` is 4 digits, the other fields
    /// 2, `%%` one byte, `{camera}` the camera's name.
    static func longestExpansion(of part: Substring, camera: String) -> Int {
        var bytes = 0
        var rest = part
        while let c = rest.first {
            if rest.hasPrefix("{camera}") {
                bytes += camera.utf8.count
                rest = rest.dropFirst("{camera}".count)
            } else if c == "%", let field = rest.dropFirst().first {
                bytes += field == "Y" ? 4 : field == "%" ? 1 : 2
                rest = rest.dropFirst(2)
            } else {
                bytes += c.utf8.count
                rest = rest.dropFirst()
            }
        }
        return bytes
    }
}
