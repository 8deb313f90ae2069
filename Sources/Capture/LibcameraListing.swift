internal import CLibcameraPlugin
import Media

/// One libcamera camera as `vigil probe` shows it.
public struct LibcameraCameraListing: Hashable, Sendable {
    /// The id `cam -l` shows; `camera.device = "libcamera:ID"` names it.
    public var id: String
    public var model: String
    /// "front", "back", "external", or nil when the camera does not say.
    public var location: String?
    public var hasAutofocus: Bool
    public var hasFrameRateControl: Bool
    public var formats: [Format]

    public struct Format: Hashable, Sendable {
        /// libcamera's name ("NV12", "YUV420", "RGB888").
        public var name: String
        public var minimum: (width: Int, height: Int)
        public var maximum: (width: Int, height: Int)
        /// The sizes the camera lists (it may take others between minimum and maximum).
        public var sizes: [(width: Int, height: Int)]

        public init(
            name: String, minimum: (width: Int, height: Int), maximum: (width: Int, height: Int),
            sizes: [(width: Int, height: Int)]
        ) {
            self.name = name
            self.minimum = minimum
            self.maximum = maximum
            self.sizes = sizes
        }

        /// Whether Vigil records from it: as it is (NV12, YUV420) or converted (RGB).
        public var isUsable: Bool { LibcameraLayout.Source(libcameraName: name) != nil }
        public var isConverted: Bool {
            if case .rgb = LibcameraLayout.Source(libcameraName: name) { return true }
            return false
        }

        public static func == (a: Format, b: Format) -> Bool {
            a.name == b.name && a.minimum == b.minimum && a.maximum == b.maximum
                && a.sizes.map(\.width) == b.sizes.map(\.width) && a.sizes.map(\.height) == b.sizes.map(\.height)
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(name)
            for size in sizes {
                hasher.combine(size.width)
                hasher.combine(size.height)
            }
        }
    }

    public init(
        id: String, model: String, location: String?, hasAutofocus: Bool, hasFrameRateControl: Bool, formats: [Format]
    ) {
        self.id = id
        self.model = model
        self.location = location
        self.hasAutofocus = hasAutofocus
        self.hasFrameRateControl = hasFrameRateControl
        self.formats = formats
    }
}

/// libcamera's cameras, or why they cannot be listed.
public enum LibcameraProbe {
    public enum Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// The plugin is not installed or unusable.
        case plugin(LibcameraPluginError)
        /// libcamera itself failed (its camera manager did not start).
        case libcamera(String)

        public var description: String {
            switch self {
            case .plugin(let error): error.description
            case .libcamera(let message): "libcamera failed: \(message)"
            }
        }
    }

    /// Every camera libcamera finds (at most 16), with the formats and sizes of its video stream.
    public static func cameras() -> Result<[LibcameraCameraListing], Failure> {
        let plugin: LibcameraPlugin
        switch LibcameraPlugin.shared {
        case .success(let loaded): plugin = loaded
        case .failure(let error): return .failure(.plugin(error))
        }
        let capacity = 16
        var infos = [vigil_lc_camera_info](repeating: vigil_lc_camera_info(), count: capacity)
        var count: UInt32 = 0
        var error = vigil_lc_error()
        let status = infos.withUnsafeMutableBufferPointer {
            plugin.list($0.baseAddress, UInt32(capacity), &count, &error)
        }
        guard status == 0 else { return .failure(.libcamera(LibcameraCallError(error).message)) }
        return .success(infos.prefix(min(Int(count), capacity)).map(listing))
    }

    static func listing(_ info: vigil_lc_camera_info) -> LibcameraCameraListing {
        let formats = elements(of: info.formats, as: vigil_lc_format.self, count: Int(info.format_count)).map {
            format in
            LibcameraCameraListing.Format(
                name: text(of: format.name),
                minimum: (Int(format.minimum.width), Int(format.minimum.height)),
                maximum: (Int(format.maximum.width), Int(format.maximum.height)),
                sizes: elements(of: format.sizes, as: vigil_lc_size.self, count: Int(format.size_count)).map {
                    (Int($0.width), Int($0.height))
                })
        }
        let location: String? =
            switch info.location {
            case 0: "front"
            case 1: "back"
            case 2: "external"
            default: nil
            }
        return LibcameraCameraListing(
            id: text(of: info.id), model: text(of: info.model), location: location,
            hasAutofocus: info.has_autofocus != 0, hasFrameRateControl: info.has_frame_rate != 0, formats: formats)
    }
}

extension DeviceReport {
    /// The libcamera section of `vigil probe`.
    public static func render(
        libcamera: Result<[LibcameraCameraListing], LibcameraProbe.Failure>, request: CameraRequest
    ) -> String {
        var out = "Cameras (libcamera)\n"
        switch libcamera {
        case .failure(.plugin(.missing)):
            return out
                + "\n  not looked for: the vigil-libcamera package is not installed (apt install vigil-libcamera\n  for a Raspberry Pi camera module)\n"
        case .failure(let failure):
            return out + "\n  \(failure)\n"
        case .success(let cameras):
            if cameras.isEmpty { out += "\n  none found (`cam -l` lists the same)\n" }
            for (index, camera) in cameras.enumerated() {
                out += "\n" + render(camera, first: index == 0, request: request)
            }
            return out
        }
    }

    public static func render(_ camera: LibcameraCameraListing, first: Bool, request: CameraRequest) -> String {
        var out = "libcamera:\(camera.id)"
        var facts: [String] = []
        if !camera.model.isEmpty { facts.append(camera.model) }
        if let location = camera.location { facts.append(location) }
        if camera.hasAutofocus { facts.append("autofocus") }
        out += facts.isEmpty ? "\n" : " — \(facts.joined(separator: ", "))\n"
        let usable = camera.formats.filter(\.isUsable)
        out += formatsHeading(
            anyUsable: !usable.isEmpty, usable: "NV12, YUV420, or RGB converted",
            order: "NV12 and YUV420 as they are, RGB converted")
        for format in usable {
            out +=
                "    \(format.name.padded(to: 9)) \(format.minimum.width)x\(format.minimum.height) to \(format.maximum.width)x\(format.maximum.height)\(format.isConverted ? " (converted)" : "")\n"
            if !format.sizes.isEmpty {
                out +=
                    "              sizes: " + format.sizes.map { "\($0.width)x\($0.height)" }.joined(separator: " ")
                    + "\n"
            }
        }
        out += otherFormats(camera.formats.filter { !$0.isUsable }.map(\.name))
        out +=
            camera.hasFrameRateControl ? "" : "  frame rate: the camera's own (it has no FrameDurationLimits control)\n"
        out += "  paste into the configuration:\n"
        out += pasteBlock(
            "camera",
            [
                ("device", "\"\(first ? "libcamera" : "libcamera:" + camera.id)\""), ("width", "\(request.width)"),
                ("height", "\(request.height)"), ("fps", configurationRate(request.frameRate)),
            ])
        return out
    }
}
