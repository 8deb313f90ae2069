import Media

/// Which H.264 encoder records (`encoder.backend`).
public enum EncoderBackend: String, CaseIterable, Sendable {
    /// The hardware encoder when one is found that takes the stream, x264 otherwise.
    case auto
    case x264
    /// The hardware encoder, or an error.
    case v4l2
}

/// What `encoder.backend` and `encoder.device` make of the devices found: the decision, apart
/// from finding them, so that every case is tested.
public enum EncoderSelection: Equatable, Sendable {
    /// x264, and why (for the log); `warn` when a hardware encoder was there and could not
    /// take the stream (a warning, not news).
    case x264(reason: String, warn: Bool)
    /// The hardware encoder at `device`; `required` when it was asked for by name
    /// (`encoder.backend = "v4l2"`): failing to open it then stops the agent instead of falling
    /// back to x264.
    case hardware(device: String, name: String, required: Bool, reason: String)
    /// `encoder.backend = "v4l2"` and no device that can do it: what is wrong, and the fix.
    case configurationError(String)

    /// - `devices`: the memory-to-memory devices found (with the one `device` names, if any).
    /// - `width`, `height`: the picture size the camera is asked for.
    public static func choose(
        backend: EncoderBackend, device: String?, devices: [M2MListing], width: Int, height: Int
    ) -> EncoderSelection {
        if backend == .x264 { return .x264(reason: "encoder.backend = \"x264\"", warn: false) }
        let required = backend == .v4l2
        func refuse(_ problem: String, warn: Bool = false) -> EncoderSelection {
            required
                ? .configurationError(
                    problem
                        + "; set encoder.device to the hardware encoder's node, or encoder.backend = \"auto\" to record with x264 when there is none"
                )
                : .x264(reason: problem, warn: warn)
        }
        let candidates: [M2MListing]
        if let device {
            guard let named = devices.first(where: { $0.path == device }) else {
                return refuse("encoder.device = \"\(device)\" is not a memory-to-memory device (see `vigil probe`)")
            }
            candidates = [named]
        } else {
            candidates = devices
        }
        guard let chosen = candidates.first(where: \.encodesH264) else {
            // What each writes (a decoder's raw formats too: it is not an encoder either).
            let found = candidates.map {
                "\($0.path) (\($0.name)) writes \($0.codedFormats.prefix(3).map(\.description).joined(separator: ", "))"
                    + ($0.codedFormats.count > 3 ? ", …" : "")
            }
            return refuse(
                found.isEmpty
                    ? "no hardware H.264 encoder: no memory-to-memory device was found"
                    : "no hardware H.264 encoder: " + found.joined(separator: "; "))
        }
        guard chosen.takes(width: width, height: height) else {
            let limit = chosen.sizes.map { "\($0.maximum.width)×\($0.maximum.height)" } ?? "?"
            return refuse(
                "\(chosen.path) (\(chosen.name)) encodes at most \(limit), and camera.width × camera.height is \(width)×\(height)",
                warn: true)
        }
        let why = device != nil ? "encoder.device = \"\(chosen.path)\"" : "the first memory-to-memory H.264 encoder"
        return .hardware(
            device: chosen.path, name: chosen.name, required: required,
            reason: "encoder.backend = \"\(backend.rawValue)\", \(why)")
    }
}

extension EncoderSelection {
    /// The encoders this selection records with: the hardware encoder first (when one was
    /// chosen), x264 as the fallback, and what the agent says about it; nil for a
    /// configuration error.
    public func choice(x264: EncoderSettings, hardware: HardwareEncoderSettings) -> EncoderChoice? {
        let fallback = X264EncoderFactory(settings: x264)
        switch self {
        case .x264(let reason, let warn):
            return EncoderChoice(
                fallback: fallback, announcement: .init(backend: "x264", reason: reason, warn: warn))
        case .hardware(let device, let name, let required, let reason):
            return EncoderChoice(
                preferred: V4L2EncoderFactory(device: device, settings: hardware), fallback: fallback,
                required: required, announcement: .init(backend: "v4l2", reason: "\(reason): \(device) (\(name))"))
        case .configurationError:
            return nil
        }
    }
}

/// Makes `V4L2Encoder`s on one device with the same settings, for each stream's format.
public struct V4L2EncoderFactory: VideoEncoderFactory {
    public let device: String
    public let settings: HardwareEncoderSettings

    public init(device: String, settings: HardwareEncoderSettings) {
        self.device = device
        self.settings = settings
    }

    public func makeEncoder(for format: VideoFormat) throws(EncoderError) -> any VideoEncoder {
        try V4L2Encoder(device: device, format: format, settings: settings)
    }
}
