import H264
import Media
import Overlay

/// Every setting Vigil reads from its configuration file: name, type, range, default, unit
/// and meaning. The loader rejects anything not listed here, and `vigil check` prints the
/// effective value of each, in this order.

/// A setting's value as the file gives it.
public enum ConfigValue: Equatable, Sendable, CustomStringConvertible {
    case integer(Int)
    case number(Double)
    case boolean(Bool)
    case text(String)

    /// The value in libconfig syntax.
    public var description: String {
        switch self {
        case .integer(let v): String(v)
        case .number(let v): formatNumber(v)
        case .boolean(let v): v ? "true" : "false"
        case .text(let v): "\"" + v.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
        }
    }
}

/// A number as libconfig writes a float: always with a decimal point.
func formatNumber(_ v: Double) -> String {
    if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) + ".0" }
    return String(v)
}

public struct ConfigKey: Sendable {
    public enum Kind: Sendable {
        case integer(ClosedRange<Int>)
        case number(ClosedRange<Double>)
        case boolean
        case text
        case choice([String])
    }

    /// The full name, `section.setting`.
    public let name: String
    public let kind: Kind
    public let defaultValue: ConfigValue
    /// The unit of a number ("seconds", "MB"), or nil.
    public let unit: String?
    public let summary: String

    init(_ name: String, _ kind: Kind, _ defaultValue: ConfigValue, unit: String? = nil, _ summary: String) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.unit = unit
        self.summary = summary
    }

    public var section: Substring { name.split(separator: ".")[0] }

    /// What the key accepts, for messages and documentation ("16 to 4096", "true or false").
    public var accepted: String {
        switch kind {
        case .integer(let r): "a whole number from \(r.lowerBound) to \(r.upperBound)"
        case .number(let r): "a number from \(formatNumber(r.lowerBound)) to \(formatNumber(r.upperBound))"
        case .boolean: "true or false"
        case .text: "a string"
        case .choice(let options): "one of " + options.map { "\"\($0)\"" }.joined(separator: ", ")
        }
    }
}

public enum ConfigSchema {
    public static let keys: [ConfigKey] = [
        // camera
        ConfigKey(
            "camera.device", .text, .text("synthetic"),
            "the camera: a V4L2 device (/dev/video0, or /dev/v4l/by-id/... to survive replugging), \"libcamera\" for the first camera libcamera finds (a Raspberry Pi camera module; needs the vigil-libcamera package) or \"libcamera:ID\" for the one `vigil probe` names ID, \"synthetic\" for the built-in test scene, or \"file:PATH.y4m\" to replay recorded footage"
        ),
        ConfigKey(
            "camera.name", .text, .text("camera"),
            "a short name for this camera, used in clip file names and the events journal (letters, digits, - and _)"),
        ConfigKey(
            "camera.width", .integer(16...4096), .integer(1280), unit: "pixels",
            "the picture width to ask the camera for (even)"),
        ConfigKey(
            "camera.height", .integer(16...4096), .integer(720), unit: "pixels",
            "the picture height to ask the camera for (even)"),
        ConfigKey(
            "camera.fps", .number(1...120), .number(30), unit: "frames per second",
            "the frame rate to ask the camera for"),
        ConfigKey(
            "camera.rotation", .integer(0...270), .integer(0), unit: "degrees clockwise",
            "how the picture is turned when played (" + Rotation.accepted
                + "); written into the clip, the pixels are not touched"
        ),
        ConfigKey(
            "camera.realtime", .boolean, .boolean(false),
            "pace a file: source at its own frame rate instead of as fast as possible"),

        // audio
        ConfigKey("audio.enabled", .boolean, .boolean(false), "record sound from a microphone into the clips"),
        ConfigKey(
            "audio.device", .text, .text("default"),
            "the ALSA capture device (see `vigil probe`), e.g. \"hw:1,0\", or \"synthetic\" for a test tone"),
        ConfigKey("audio.rate", .integer(8000...48000), .integer(48000), unit: "Hz", "the sample rate"),
        ConfigKey("audio.channels", .integer(1...2), .integer(1), "1 for mono, 2 for stereo"),

        // encoder
        ConfigKey(
            "encoder.backend", .choice(EncoderBackend.allCases.map(\.rawValue)), .text("auto"),
            "which H.264 encoder: \"v4l2\" the board's hardware encoder (a V4L2 memory-to-memory device), \"x264\" software, \"auto\" the hardware one when there is one that works, else x264"
        ),
        ConfigKey(
            "encoder.device", .text, .text(""),
            "the hardware encoder's device, e.g. \"/dev/video11\", or \"\" for the first memory-to-memory device that encodes H.264 (see `vigil probe`)"
        ),
        ConfigKey(
            "encoder.bitrate", .integer(100...100_000), .integer(4000), unit: "kbit/s",
            "the hardware encoder's average bit rate (x264 keeps encoder.crf)"),
        ConfigKey(
            "encoder.preset", .choice(EncoderSettings.Preset.allCases.map(\.rawValue)),
            .text("ultrafast"), "x264 speed preset; slower presets give smaller files for much more CPU"),
        ConfigKey(
            "encoder.tune", .text, .text("zerolatency"),
            "x264 tunings joined by commas (zerolatency, fastdecode, and at most one of film, animation, grain, stillimage, psnr, ssim), or \"none\"; zerolatency keeps the encoder from holding frames back"
        ),
        ConfigKey(
            "encoder.profile", .choice(EncoderSettings.Profile.allCases.map(\.rawValue)), .text("high"),
            "the H.264 profile limit"),
        ConfigKey(
            "encoder.crf", .number(1...51), .number(23),
            "quality: lower is better and larger (18 is visually lossless, 28 is small)"),
        ConfigKey(
            "encoder.max_bitrate", .integer(0...200_000), .integer(0), unit: "kbit/s",
            "cap on the bitrate (VBV), or 0 for no cap"),
        ConfigKey("encoder.threads", .integer(0...16), .integer(0), "encoder threads, or 0 to let x264 choose"),
        ConfigKey(
            "encoder.keyframe_interval", .number(0.25...1), .number(1), unit: "seconds",
            "longest time between keyframes; a clip starts at a keyframe, so this bounds how much earlier than pre_roll it may start"
        ),

        // motion
        ConfigKey(
            "motion.detect_width", .integer(16...1024), .integer(160), unit: "pixels",
            "width of the reduced picture motion is detected on (the height follows the aspect); larger sees smaller things and costs more"
        ),
        ConfigKey(
            "motion.threshold", .number(0.0001...0.5), .number(0.005),
            "the score that counts as motion: the fraction of the watched picture that must change (0.005 is 0.5 %); `vigil analyze --plot` shows the score to choose it by"
        ),
        ConfigKey(
            "motion.pixel_threshold", .number(0...255), .number(0), unit: "grey levels",
            "how much a pixel must differ from the background to count as changed, or 0 to derive it from the measured noise"
        ),
        ConfigKey(
            "motion.noise_multiplier", .number(1...20), .number(4),
            "with pixel_threshold 0, the per-pixel threshold is this many times the measured noise"),
        ConfigKey(
            "motion.background_rate", .number(0.001...10), .number(0.2), unit: "per second",
            "how fast the background learns the picture (0.2 learns 63 % of a change in 5 s); a change that lasts 30 s, like a parked car, is then learned within a few seconds"
        ),
        ConfigKey(
            "motion.min_frames", .integer(1...100), .integer(2), unit: "frames",
            "motion is declared after this many frames in a row over the threshold"),
        ConfigKey(
            "motion.light_switch_fraction", .number(0.05...1), .number(0.5),
            "when at least this fraction of the picture changes at once it is taken for a change of light: the background is re-learned and nothing triggers"
        ),
        ConfigKey(
            "motion.despeckle", .integer(0...8), .integer(2), unit: "neighbours",
            "a changed pixel counts only if this many of its 8 neighbours changed too, so isolated noise does not count"
        ),
        ConfigKey(
            "motion.mask", .text, .text(""),
            "a PGM image (any size) of where to watch: black is ignored, white is watched; a relative path is taken from the directory of this file; \"\" watches everything"
        ),

        ConfigKey(
            "motion.dynamic_background", .boolean, .boolean(true),
            "learn where the picture moves by itself (foliage, water, a flag, flicker) and stop counting that motion: each part's threshold rises to what it usually does there, and a part that moves all the time counts only when a fifth of it changes at once, as an object does; only what comes and goes is learned, and not while it counts as motion, so an object that stops counts until the background takes it in after 30 s and a path crossed every few seconds is not learned; for its first 5 s it learns whatever moves; `vigil analyze --mask-image` shows where it masks, `--plot` how much"
        ),
        ConfigKey(
            "motion.dynamic_learn", .number(0.1...60), .number(1), unit: "seconds",
            "how fast the dynamic background learns a part that moves by itself (its threshold grows by a factor e in this time while the picture keeps moving further)"
        ),
        ConfigKey(
            "motion.dynamic_forget", .number(1...3600), .number(60), unit: "seconds",
            "how fast it forgets: a part that calmed down has its threshold shrink by a factor e in this time"
        ),

        // recording
        ConfigKey(
            "recording.pre_roll", .number(0...30), .number(5), unit: "seconds",
            "how much video before the motion each clip starts with"),
        ConfigKey(
            "recording.post_roll", .number(0...300), .number(5), unit: "seconds",
            "how long recording goes on after the motion stops"),
        ConfigKey(
            "recording.max_clip", .number(10...3600), .number(300), unit: "seconds",
            "longest clip; a longer event continues in a new clip with nothing lost between them"),
        ConfigKey(
            "recording.pre_roll_max_mb", .integer(1...1024), .integer(64), unit: "MB",
            "memory the pre-roll buffer may use at most, whatever pre_roll says"),

        // storage
        ConfigKey(
            "storage.path", .text, .text("/var/lib/vigil/clips"),
            "the directory clips and the events journal are written to"),
        ConfigKey(
            "storage.file_pattern", .text, .text("%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov"),
            "clip file names under storage.path: strftime fields (%Y %m %d %H %M %S) in the local time of the clip's first frame, and {camera} for camera.name; must end in .mov"
        ),
        ConfigKey(
            "storage.max_age_days", .integer(0...3650), .integer(30), unit: "days",
            "delete clips older than this, or 0 to keep them however old"),
        ConfigKey(
            "storage.max_size_mb", .integer(0...100_000_000), .integer(0), unit: "MB",
            "delete the oldest clips while all clips together are larger than this, or 0 for no limit"),
        ConfigKey(
            "storage.min_free_mb", .integer(0...100_000_000), .integer(500), unit: "MB",
            "delete the oldest clips while the file system has less free space than this"),

        // log
        ConfigKey(
            "log.level", .choice(["error", "warning", "info", "debug", "trace"]), .text("info"),
            "the least important messages to log"),
        ConfigKey(
            "log.stats_interval", .integer(0...86400), .integer(60), unit: "seconds",
            "how often to log a stats line, or 0 for never"),

        // overlay
        ConfigKey(
            "overlay.text", .text, .text(""),
            "text drawn into the recorded picture, e.g. \"%Y-%m-%d %H:%M:%S {camera}\": strftime fields in local time of the frame's capture, and {camera} for camera.name; \"\" for none"
        ),
        ConfigKey(
            "overlay.position", .choice(OverlayPosition.allCases.map(\.rawValue)), .text("top-left"),
            "the corner the text goes in"),
        ConfigKey(
            "overlay.scale", .integer(0...8), .integer(0),
            "how many picture pixels each pixel of the 8×16 font takes, or 0 for one per 360 lines of picture (2 at 720p)"
        ),

        // snapshot
        ConfigKey(
            "snapshot.enabled", .boolean, .boolean(true),
            "write a JPEG of each clip's peak-motion frame beside it (<clip>.jpg), named in the journal, passed to the hooks and published on MQTT"
        ),
        ConfigKey("snapshot.quality", .integer(1...100), .integer(85), "the JPEG quality of snapshots"),
        ConfigKey(
            "snapshot.width", .integer(0...4096), .integer(640), unit: "pixels",
            "the width snapshots are scaled down to (as shown upright), or 0 for the camera's own"),
        ConfigKey(
            "snapshot.live_interval", .number(0...3600), .number(0), unit: "seconds",
            "replace storage.path/latest.jpg with the current picture this often (to aim the camera): 1.0 to 3600.0, or 0 for never"
        ),

        // hooks
        ConfigKey(
            "hooks.on_event_start", .text, .text(""),
            "a program to run when motion starts a clip (absolute path, or \"\" for none); gets the event's facts as arguments and VIGIL_* environment variables"
        ),
        ConfigKey(
            "hooks.on_clip_saved", .text, .text(""),
            "a program to run when a clip is finished (absolute path, or \"\" for none); gets the clip's facts as arguments and VIGIL_* environment variables"
        ),
        ConfigKey(
            "hooks.on_upload", .text, .text(""),
            "a program to run when a clip is uploaded and verified (upload.url; absolute path, or \"\" for none); gets the upload's facts as arguments and VIGIL_* environment variables"
        ),
        ConfigKey(
            "hooks.timeout", .number(1...600), .number(30), unit: "seconds",
            "how long a hook may run before it is killed"),

        // mqtt
        ConfigKey("mqtt.enabled", .boolean, .boolean(false), "publish events to an MQTT broker (and Home Assistant)"),
        ConfigKey("mqtt.host", .text, .text("localhost"), "the broker's host name or address"),
        ConfigKey(
            "mqtt.port", .integer(1...65535), .integer(1883), "the broker's port (8883 is the usual one for TLS)"),
        ConfigKey("mqtt.username", .text, .text(""), "the user name to log in with, or \"\" for none"),
        ConfigKey(
            "mqtt.password_file", .text, .text(""),
            "a file holding the password (its first line), so that the secret is not in this file; \"\" for none (one that cannot be read leaves MQTT off, not the agent)"
        ),
        ConfigKey(
            "mqtt.tls_ca_file", .text, .text(""),
            "TLS: the certificate authority that signed the broker's certificate (PEM); \"\" for no TLS"),
        ConfigKey("mqtt.tls_cert_file", .text, .text(""), "TLS: this client's certificate (PEM), or \"\" for none"),
        ConfigKey("mqtt.tls_key_file", .text, .text(""), "TLS: this client's private key (PEM), or \"\" for none"),
        ConfigKey(
            "mqtt.tls_insecure", .boolean, .boolean(false),
            "TLS: accept a broker certificate whose name does not match mqtt.host (testing only)"),
        ConfigKey(
            "mqtt.client_id", .text, .text(""), "the MQTT client id, or \"\" for vigil-<host name>-<camera.name>"),
        ConfigKey(
            "mqtt.topic_prefix", .text, .text("vigil"),
            "the first level of every topic: <topic_prefix>/<camera.name>/motion and so on"),
        ConfigKey("mqtt.qos", .integer(0...2), .integer(1), "the MQTT quality of service of what Vigil publishes"),
        ConfigKey(
            "mqtt.keepalive", .integer(5...3600), .integer(60), unit: "seconds",
            "how often the connection is checked when nothing is sent"),
        ConfigKey(
            "mqtt.discovery", .boolean, .boolean(true),
            "announce the camera to Home Assistant (MQTT discovery): a device with motion, snapshot, last clip, disk free, a detection switch, a record button, an event entity and (with snapshot.live_interval) a live camera"
        ),
        ConfigKey(
            "mqtt.discovery_prefix", .text, .text("homeassistant"),
            "where Home Assistant listens for discovery (its own setting of the same name)"),
        // web
        ConfigKey(
            "web.enabled", .boolean, .boolean(false),
            "serve the clips, their pictures and the agent's figures over HTTP (a page, /api/clips, /metrics)"),
        ConfigKey(
            "web.listen", .text, .text("127.0.0.1"),
            "the address to listen on: 127.0.0.1 or ::1 (this machine only), or, with a password file, 0.0.0.0 or :: (every address) or one of this machine's"
        ),
        ConfigKey(
            "web.port", .integer(0...65535), .integer(8080),
            "the port to listen on, or 0 for any free one (the log says which)"
        ),
        ConfigKey(
            "web.password_file", .text, .text(""),
            "who may sign in (HTTP Digest), as `vigil passwd` writes it (mode 0600: others may not read it); every page then asks for a user and password, and web.listen may be another machine's way in. \"\": no password, this machine only"
        ),
        ConfigKey(
            "web.url", .text, .text(""),
            "the address other machines reach the server at (http://camera.local:8080): links in MQTT's last_clip and saved events point there, and the server answers to its name besides this machine's own. \"\": this machine's name and web.port when web.listen is not loopback, else no links"
        ),
        ConfigKey(
            "web.tls_cert_file", .text, .text(""),
            "the server's certificate (its chain may follow), PEM: with web.tls_key_file, the server speaks HTTPS only. \"\": plain HTTP"
        ),
        ConfigKey(
            "web.tls_key_file", .text, .text(""),
            "the certificate's private key, PEM, not encrypted (readable by the vigil user only)"
        ),
        ConfigKey(
            "web.metrics_token_file", .text, .text(""),
            "a file whose first line is a token (openssl rand -hex 32, at least 16 characters) with which Prometheus reads /metrics, and nothing else, without a user and password: it sends Authorization: Bearer TOKEN (its credentials_file); kept like the password file (mode 0600 or 0640). \"\": /metrics asks for a user and password like every page"
        ),
        // rtsp
        ConfigKey(
            "rtsp.enabled", .boolean, .boolean(false),
            "serve the camera's H.264 over RTSP at rtsp://HOST:PORT/<camera.name> (the GOPs encoded for the clips, nothing encoded again), for NVRs, VLC and Home Assistant"
        ),
        ConfigKey(
            "rtsp.listen", .text, .text("127.0.0.1"),
            "the address to listen on: 127.0.0.1 or ::1 (this machine only), or, with web.password_file (the same users, Digest), 0.0.0.0 or :: (every address) or one of this machine's"
        ),
        ConfigKey(
            "rtsp.port", .integer(0...65535), .integer(8554),
            "the port to listen on, or 0 for any free one (the log says which)"
        ),
        // onvif
        ConfigKey(
            "onvif.enabled", .boolean, .boolean(false),
            "answer ONVIF's device, media and events services on the web server (/onvif/device_service, /onvif/media_service, /onvif/events_service: the stream is the RTSP server's, the picture latest.jpg, motion a pull point's events), so NVRs and Home Assistant add the camera by themselves; needs web.enabled and rtsp.enabled"
        ),
        ConfigKey(
            "onvif.discovery", .boolean, .boolean(true),
            "with onvif.enabled, answer WS-Discovery's probes (UDP port onvif.discovery_port, multicast 239.255.255.250) and say Hello at start and Bye at stop: on every interface when web.listen serves other machines, else from this machine only"
        ),
        ConfigKey(
            "onvif.discovery_port", .integer(1...65535), .integer(3702),
            "WS-Discovery's UDP port: 3702, where every client probes (another is for tests)"),
        ConfigKey(
            "onvif.password_file", .text, .text(""),
            "a file of USER:PASSWORD lines, the passwords in the clear, written by sudo vigil passwd --onvif USER (which sets the same password in web.password_file): what checks a WS-Security PasswordDigest, which Home Assistant and NVRs sign ONVIF's calls with; kept like a key (0640 root:vigil or 0600; one readable by others is refused); use a password used nowhere else. \"\": a PasswordDigest is refused, a PasswordText and HTTP Digest checked against web.password_file"
        ),
        // upload
        ConfigKey(
            "upload.url", .text, .text(""),
            "where finished clips are copied to: s3://BUCKET/PREFIX (S3 or a compatible server), sftp://USER@HOST[:PORT]/DIRECTORY, or https://HOST/PATH (WebDAV); each clip goes under PREFIX/<camera.name>/<its path under storage.path>. \"\": no uploads"
        ),
        ConfigKey(
            "upload.endpoint", .text, .text(""),
            "S3: the server's address (https://HOST[:PORT]) when it is not AWS; \"\": AWS (https://s3.<upload.region>.amazonaws.com)"
        ),
        ConfigKey("upload.region", .text, .text("us-east-1"), "S3: the bucket's region, which requests are signed for"),
        ConfigKey(
            "upload.access_key_file", .text, .text(""), "S3: a file holding the access key id on its first line"),
        ConfigKey(
            "upload.secret_key_file", .text, .text(""),
            "S3: a file holding the secret access key on its first line (readable by the vigil user only)"),
        ConfigKey(
            "upload.ssh_key_file", .text, .text(""),
            "SFTP: the private key to sign in with (OpenSSH format, no passphrase; readable by the vigil user only)"),
        ConfigKey(
            "upload.known_hosts_file", .text, .text(""),
            "SFTP: the server's host key, as a known_hosts file (ssh-keyscan HOST > FILE): a server that shows another is refused"
        ),
        ConfigKey(
            "upload.password_file", .text, .text(""),
            "WebDAV: a file holding the password of the URL's user (https://USER@HOST/PATH) on its first line"),
        ConfigKey(
            "upload.tls_ca_file", .text, .text(""),
            "HTTPS (S3, WebDAV): a file of CA certificates (PEM) the server's certificate must be signed by, for a server with a private CA; \"\": the machine's CAs"
        ),
        ConfigKey(
            "upload.delete_local_after", .number(-1...87600), .number(-1), unit: "hours",
            "delete a clip on the board this long after its upload was verified by reading the copy back (one download of each clip), or -1 for never"
        ),
        ConfigKey(
            "upload.bandwidth_kbit", .integer(0...10_000_000), .integer(0), unit: "kbit/s",
            "the most uploads may send, or 0 for no limit"),
        ConfigKey("upload.snapshots", .boolean, .boolean(true), "upload each clip's picture with it"),
    ]

    public static let sections: [String] = {
        var seen: [String] = []
        for key in keys where !seen.contains(String(key.section)) { seen.append(String(key.section)) }
        return seen
    }()

    public static func key(_ name: String) -> ConfigKey? { keys.first { $0.name == name } }

    /// The known key closest in spelling to `name`, for "did you mean" hints.
    static func suggestion(for name: String) -> String? {
        let best = keys.map { ($0.name, editDistance($0.name, name)) }.min { $0.1 < $1.1 }
        guard let best, best.1 <= max(2, name.count / 4) else { return nil }
        return best.0
    }
}

/// Levenshtein distance between two short strings.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
