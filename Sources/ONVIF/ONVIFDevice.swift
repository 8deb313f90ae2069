import Media

/// The camera as ONVIF describes it: who it is (stable per camera: derived from the machine and
/// the camera's name, never random per start), what it streams and where. A value: the web
/// server makes one per request from what the agent runs (the stream's size and rate as the
/// live feed has them, else the settings').
public struct ONVIFDevice: Sendable, Equatable {
    public struct Video: Sendable, Equatable {
        public var width: Int
        public var height: Int
        public var framesPerSecond: Double
        /// Frames between keyframes.
        public var keyframeInterval: Int
        /// Baseline, Main, Extended or High (the stream's SPS), as ONVIF names them.
        public var profile: String

        public init(width: Int, height: Int, framesPerSecond: Double, keyframeInterval: Int, profile: String) {
            self.width = width
            self.height = height
            self.framesPerSecond = framesPerSecond
            self.keyframeInterval = keyframeInterval
            self.profile = profile
        }
    }

    /// `camera.name`: the RTSP path, the name scope.
    public var camera: String
    /// The agent's version (FirmwareVersion).
    public var version: String
    public var serialNumber: String
    /// The machine's kind (`x86_64`, `aarch64`): HardwareId and the hardware scope.
    public var hardware: String
    /// `urn:uuid:…`, WS-Discovery's endpoint reference.
    public var endpoint: String
    public var video: Video
    /// The RTSP server's port (`rtsp.port`, the one it listens on).
    public var rtspPort: Int
    /// `http` or `https`, as the web server speaks.
    public var webScheme: String

    public init(
        camera: String, version: String, machine: String, hardware: String, video: Video, rtspPort: Int,
        webScheme: String
    ) {
        self.camera = camera
        self.version = version
        self.hardware = hardware
        let identity = Self.identity(camera: camera, machine: machine)
        serialNumber = identity.serial
        endpoint = identity.endpoint
        self.video = video
        self.rtspPort = rtspPort
        self.webScheme = webScheme
    }

    /// The serial number and endpoint of camera `camera` on machine `machine` (its machine id,
    /// or host name): MD5 of both, the same at every start, different for two cameras of one
    /// machine (which share its network interfaces, so its MAC address names neither).
    static func identity(camera: String, machine: String) -> (serial: String, endpoint: String) {
        var hash = MD5.digest(Array("vigil onvif\u{0}\(machine)\u{0}\(camera)".utf8))
        let serial = "VGL-" + hash.prefix(8).lowercaseHex.uppercased()
        // A name-based UUID (RFC 9562 version 3: MD5), its version and variant bits set.
        hash[6] = (hash[6] & 0x0F) | 0x30
        hash[8] = (hash[8] & 0x3F) | 0x80
        let hex = hash.lowercaseHex
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(hex.dropFirst(range.lowerBound).prefix(range.count))
        }
        return (serial, "urn:uuid:" + parts.joined(separator: "-"))
    }

    /// What WS-Discovery and GetScopes say of it.
    public var scopes: [String] {
        [
            "onvif://www.onvif.org/type/video_encoder", "onvif://www.onvif.org/Profile/Streaming",
            "onvif://www.onvif.org/name/" + Self.scopeText(camera),
            "onvif://www.onvif.org/hardware/" + Self.scopeText(hardware),
            "onvif://www.onvif.org/location/",
        ]
    }

    /// `text` percent-encoded for a scope's last segment (RFC 3986's unreserved kept).
    static func scopeText(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            let c = Character(Unicode.Scalar(byte))
            if c.isASCII && (c.isLetter || c.isNumber || "-._~".contains(c)) {
                out.append(c)
            } else {
                out += "%" + [byte].lowercaseHex.uppercased()
            }
        }
        return out
    }

    /// The device service's address through `authority` (the host and port the client reached
    /// the web server at, as its `Host` header says).
    public func deviceService(_ authority: String) -> String { "\(webScheme)://\(authority)/onvif/device_service" }
    public func mediaService(_ authority: String) -> String { "\(webScheme)://\(authority)/onvif/media_service" }
    public func eventsService(_ authority: String) -> String { "\(webScheme)://\(authority)/onvif/events_service" }
    /// Pull point subscription `id`'s address.
    public func pullPoint(_ authority: String, id: Int) -> String {
        "\(webScheme)://\(authority)/onvif/pullpoint?subscription=\(id)"
    }
    /// The stream at `host` (the name or address the client reached the agent by).
    public func streamURI(host: String) -> String { "rtsp://\(host):\(rtspPort)/\(camera)" }
    /// The latest picture, as the web server serves it.
    public func snapshotURI(_ authority: String) -> String { "\(webScheme)://\(authority)/latest.jpg" }
}

/// Which of the two services a request was sent to.
public enum ONVIFService: String, Sendable {
    case device
    case media
    case events
    /// A pull point subscription's (`?subscription=N` names which).
    case pullpoint

    /// The service at `path` (`/onvif/device_service`, `/onvif/media_service`,
    /// `/onvif/events_service`, `/onvif/pullpoint`); nil for another.
    public init?(path: String) {
        switch path {
        case "/onvif/device_service": self = .device
        case "/onvif/media_service": self = .media
        case "/onvif/events_service": self = .events
        case "/onvif/pullpoint": self = .pullpoint
        default: return nil
        }
    }

    /// The paths of the services.
    public static let paths: Set<String> = [
        "/onvif/device_service", "/onvif/media_service", "/onvif/events_service", "/onvif/pullpoint",
    ]

    var namespace: String {
        switch self {
        case .device: Namespace.device
        case .media: Namespace.media
        case .events, .pullpoint: ONVIFEvents.namespace
        }
    }
}

/// An answer: an HTTP status and a SOAP envelope.
public struct SOAPReply: Sendable, Equatable {
    public var status: Int
    public var body: String
    /// It refuses for want of a user (a fault ter:NotAuthorized).
    public var notAuthorized = false

    /// Its media type, as SOAP 1.2 over HTTP has it.
    public static let contentType = "application/soap+xml; charset=utf-8"

    /// `body` inside a SOAP 1.2 envelope with ONVIF's prefixes declared.
    public static func envelope(_ body: String, status: Int = 200) -> SOAPReply {
        SOAPReply(
            status: status,
            body:
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<env:Envelope xmlns:env=\"\(Namespace.soap12)\" xmlns:tds=\"\(Namespace.device)\" xmlns:trt=\"\(Namespace.media)\" xmlns:tt=\"\(Namespace.schema)\" xmlns:ter=\"\(Namespace.error)\"><env:Body>\(body)</env:Body></env:Envelope>\n"
        )
    }

    /// A SOAP fault: `code` (env:Sender: the request is at fault; env:Receiver: the device),
    /// ONVIF's subcodes (`ter:NotAuthorized`, most general first), and `reason` for a person.
    /// Sent with 400 whatever its code (a client reads the fault; a 500 says a server broke).
    public static func fault(_ code: String, _ subcodes: [String], _ reason: String) -> SOAPReply {
        var nested = ""
        for subcode in subcodes.reversed() {
            nested = "<env:Subcode><env:Value>\(subcode)</env:Value>\(nested)</env:Subcode>"
        }
        return envelope(
            "<env:Fault><env:Code><env:Value>\(code)</env:Value>\(nested)</env:Code><env:Reason><env:Text xml:lang=\"en\">\(MarkupText.escaped(reason))</env:Text></env:Reason></env:Fault>",
            status: 400)
    }

    /// The refusal of a request that did not sign in (or signed in wrong).
    public static func notAuthorized(_ reason: String) -> SOAPReply {
        var reply = fault("env:Sender", ["ter:NotAuthorized"], reason)
        reply.notAuthorized = true
        return reply
    }

    /// An operation this device does not implement.
    public static func actionNotSupported(_ operation: String) -> SOAPReply {
        fault(
            "env:Receiver", ["ter:ActionNotSupported"],
            "Optional Action Not Implemented: \(operation.prefix(64)) is not implemented by this camera (Vigil answers the device and media services' calls that NVRs and Home Assistant make to add a camera)."
        )
    }

    /// A request that is not SOAP.
    public static func badRequest(_ problem: SOAPProblem) -> SOAPReply {
        fault("env:Sender", ["ter:WellFormed"], "The request is not a SOAP envelope: \(problem).")
    }
}
