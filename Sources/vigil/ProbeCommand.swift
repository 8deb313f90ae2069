import Capture
import H264

/// `vigil probe [DEVICE]`: the cameras and microphones there are, ready to paste into the config.
enum ProbeCommand: Command {
    static let name = "probe"
    static let abstract = "List cameras (formats, sizes, rates) and microphones."
    static let synopsis = "[--size WxH] [--fps RATE] [DEVICE]"
    static let discussion = """
        Without DEVICE: every V4L2 camera (/dev/video*) with the formats Vigil records from,
        their sizes and frame rates, every ALSA capture device with its rates and channels, and
        every hardware encoder (V4L2 memory-to-memory device): what it takes and writes, its
        size limits, the controls Vigil sets, and whether encoder.backend = "auto" would use it
        for --size.
        Cameras libcamera finds (a Raspberry Pi camera module) are listed too, with the formats
        and sizes of their video stream, when the vigil-libcamera package is installed.
        DEVICE is a camera node (/dev/video0, /dev/v4l/by-id/...), "libcamera" (the first
        libcamera camera) or "libcamera:ID", or an ALSA device name
        (hw:1,0, plughw:CARD=Device,DEV=0): only that one is shown. "synthetic" and
        "file:PATH.y4m" are opened as vigil run would open them, and their format is shown.

        Each device ends with a camera = { ... } or audio = { ... } block to paste into the
        configuration: for a camera, the mode Vigil would pick for --size and --fps (default
        1280x720 at 30, the configuration's defaults).

        Exit status: 0; 66 when DEVICE cannot be opened or is not a camera or microphone; 69
        when DEVICE is a libcamera camera and the vigil-libcamera package is not installed.
        """
    static let options = [
        OptionSpec(name: "size", valueName: "WxH", help: "the picture size to suggest a mode for (default 1280x720)"),
        OptionSpec(name: "fps", valueName: "RATE", help: "the frame rate to suggest a mode for (default 30)"),
    ]
    static let positionalLimit = 1

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        var width = 1280, height = 720
        if let size = arguments.value("size") {
            let parts = size.split(separator: "x")
            guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), (16...16384).contains(w),
                (16...16384).contains(h)
            else {
                throw UsageError(message: "--size \(size) is not a size such as 1280x720")
            }
            (width, height) = (w, h)
        }
        var fps = 30.0
        if let text = arguments.value("fps") {
            guard let value = Double(text), value >= 1, value <= 240 else {
                throw UsageError(message: "--fps \(text) is not a rate from 1 to 240")
            }
            fps = value
        }
        let request = CameraRequest(width: width, height: height, fps: fps)

        guard let device = arguments.positionals.first else {
            let paths = DeviceProbe.cameraPaths()
            let cameras = paths.map(DeviceProbe.camera(at:))
            emit(
                DeviceReport.render(cameras: cameras, microphones: nil, request: request) + "\n"
                    + DeviceReport.render(libcamera: LibcameraProbe.cameras(), request: request) + "\n"
                    + DeviceReport.render(cameras: nil, microphones: DeviceProbe.microphones(), request: request) + "\n"
                    + renderEncoders(M2MSession.devices(among: paths), width: width, height: height))
            return .success
        }
        if device == "libcamera" || device.hasPrefix("libcamera:") {
            return probeLibcamera(device, request: request)
        }
        if device == "synthetic" || device.hasPrefix("file:") {
            do {
                let source = try SourceOpener.open(
                    try SourceSpecifier(parsing: device), width: width, height: height, fps: fps,
                    purpose: .recording(realtime: false)
                ).source
                printOut("\(source.name): \(source.format)")
                return .success
            } catch {
                printError("vigil probe: \(error.description)")
                return .noInput
            }
        }
        if device.hasPrefix("/") {
            if let encoder = try? M2MSession.listing(path: device) {
                emit(renderEncoders([encoder], width: width, height: height))
                return .success
            }
            let camera = DeviceProbe.camera(at: device)
            emit(DeviceReport.render(cameras: [camera], microphones: nil, request: request))
            return camera.problem == nil ? .success : .noInput
        }
        let microphone = DeviceProbe.microphone(named: device)
        emit(DeviceReport.render(cameras: nil, microphones: [microphone], request: request))
        return microphone.problem == nil ? .success : .noInput
    }
}

/// `vigil probe libcamera[:ID]`: that camera (the first for `libcamera`), or why it cannot be
/// listed (exit 66; 69 when the plugin is missing).
private func probeLibcamera(_ device: String, request: CameraRequest) -> ExitCode {
    let wanted: String?
    do {
        guard case .libcamera(let id) = try SourceSpecifier(parsing: device) else { return .usage }
        wanted = id
    } catch {
        printError("vigil probe: \(error.description)")
        return .usage
    }
    switch LibcameraProbe.cameras() {
    case .failure(let failure):
        printError("vigil probe: \(failure)")
        if case .plugin = failure { return .unavailable }
        return .noInput
    case .success(let cameras):
        guard let camera = wanted.map({ id in cameras.first { $0.id == id } }) ?? cameras.first else {
            let known = cameras.map(\.id).joined(separator: ", ")
            printError(
                "vigil probe: libcamera has no camera \(wanted.map { "'\($0)'" } ?? "at all")\(known.isEmpty ? "" : " (it has \(known))")"
            )
            return .noInput
        }
        emit(DeviceReport.render(camera, first: camera.id == cameras.first?.id, request: request))
        return .success
    }
}

/// Prints a report that ends in a newline already.
private func emit(_ report: String) {
    printOut(report.hasSuffix("\n") ? String(report.dropLast()) : report)
}

/// The hardware encoders section of `vigil probe`: each memory-to-memory device, what it takes
/// and writes, its size limits and the controls Vigil sets, and whether it would record
/// `width`×`height`.
func renderEncoders(_ devices: [M2MListing], width: Int, height: Int) -> String {
    var out = "Hardware encoders (V4L2 memory-to-memory)\n"
    if devices.isEmpty {
        out += "\n  none found — x264 records (encoder.backend = \"auto\" uses a hardware encoder when there is one)\n"
    }
    for device in devices {
        out += "\n\(device.path) — \(device.name), \(device.multiplanar ? "multi-planar" : "single-planar") API\n"
        out += "  takes:  \(device.rawFormats.map(\.description).joined(separator: " "))\n"
        out += "  writes: \(device.codedFormats.map(\.description).joined(separator: " "))\n"
        if let sizes = device.sizes {
            out +=
                "  sizes:  \(sizes.minimum.width)×\(sizes.minimum.height) to \(sizes.maximum.width)×\(sizes.maximum.height)\n"
        }
        let present = device.controls.filter(\.present).map(\.name)
        let missing = device.controls.filter { !$0.present }.map(\.name)
        out += "  controls: " + (present.isEmpty ? "none of Vigil's" : present.joined(separator: " "))
        out += missing.isEmpty ? "\n" : "; missing: \(missing.joined(separator: " "))\n"
        switch EncoderSelection.choose(
            backend: .v4l2, device: device.path, devices: [device], width: width, height: height)
        {
        case .hardware:
            out +=
                device.canPlaceKeyframes
                ? "  records \(width)×\(height): yes — encoder = { backend = \"v4l2\"; device = \"\(device.path)\"; };\n"
                : "  records \(width)×\(height): no — it cannot be told where keyframes go (FORCE_KEY_FRAME)\n"
        case .configurationError(let problem):
            out += "  records \(width)×\(height): no — \(problem.split(separator: ";").first ?? "")\n"
        case .x264: break
        }
    }
    return out
}
