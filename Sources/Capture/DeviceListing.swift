internal import CALSA
internal import Glibc
import Media
import V4L2

/// One V4L2 device node as `vigil probe` shows it.
public struct CameraListing: Hashable, Sendable {
    public var path: String
    /// `/dev/v4l/by-id/...` and `/dev/v4l/by-path/...` links to the node (stable across replugs).
    public var links: [String]
    public var identity: VideoDeviceIdentity?
    /// Every format, with sizes and rates for those Vigil can record from.
    public var formats: [CameraFormatDescription]
    /// Why the node could not be read, or is not a camera.
    public var problem: String?

    public init(
        path: String, links: [String] = [], identity: VideoDeviceIdentity?, formats: [CameraFormatDescription],
        problem: String? = nil
    ) {
        self.path = path
        self.links = links
        self.identity = identity
        self.formats = formats
        self.problem = problem
    }

    /// The name to put in the configuration: the by-id link when there is one.
    public var configurationName: String { links.first(where: { $0.hasPrefix("/dev/v4l/by-id/") }) ?? path }
}

/// One ALSA capture device as `vigil probe` shows it.
public struct MicrophoneListing: Hashable, Sendable {
    /// The name to open it by: `hw:CARD=<id>,DEV=<n>` (survives renumbering of cards).
    public var device: String
    public var card: Int
    public var deviceNumber: Int
    public var cardName: String
    public var pcmName: String
    public var rates: ClosedRange<Int>?
    public var channels: ClosedRange<Int>?
    /// Whether the device itself delivers 16-bit little-endian samples.
    public var takesS16LE: Bool
    /// Why its parameters could not be read (busy, gone).
    public var problem: String?

    public init(
        device: String, card: Int, deviceNumber: Int, cardName: String, pcmName: String, rates: ClosedRange<Int>?,
        channels: ClosedRange<Int>?, takesS16LE: Bool, problem: String? = nil
    ) {
        self.device = device
        self.card = card
        self.deviceNumber = deviceNumber
        self.cardName = cardName
        self.pcmName = pcmName
        self.rates = rates
        self.channels = channels
        self.takesS16LE = takesS16LE
        self.problem = problem
    }

    /// What to put in `audio.device` for `rate` and `channels`: the hw: name when the device
    /// takes them as they are, else the plughw: name (ALSA converts).
    public func configurationDevice(rate: Int, channels wanted: Int) -> String {
        let native = takesS16LE && (rates?.contains(rate) ?? false) && (channels?.contains(wanted) ?? false)
        return native ? device : "plug" + device
    }
}

/// Finds cameras and microphones for `vigil probe`.
public enum DeviceProbe {
    /// The /dev/video* nodes, in numeric order.
    public static func cameraPaths(directory: String = "/dev") -> [String] {
        entries(of: directory)
            .filter { $0.hasPrefix("video") && $0.dropFirst(5).allSatisfy(\.isNumber) && $0.count > 5 }
            .sorted { (Int($0.dropFirst(5)) ?? 0) < (Int($1.dropFirst(5)) ?? 0) }
            .map { directory + "/" + $0 }
    }

    /// Reads one node: who it is, and its formats.
    public static func camera(at path: String) -> CameraListing {
        var listing = CameraListing(path: path, links: links(to: path), identity: nil, formats: [])
        let device: V4L2Device
        do { device = try V4L2Device(path: path) } catch {
            listing.problem = error.problem
            return listing
        }
        do {
            let identity = try device.identity()
            listing.identity = identity
            guard identity.capabilities.isCamera else {
                listing.problem = "this is \(identity.capabilities.kind), not a camera"
                return listing
            }
            listing.formats = try device.formats()
        } catch {
            listing.problem = "\(error.call.action) failed: \(error.problem)"
        }
        return listing
    }

    /// Every ALSA capture device of every sound card.
    public static func microphones() -> [MicrophoneListing] {
        CALSA_silenceLibraryMessages()
        var result: [MicrophoneListing] = []
        var card: Int32 = -1
        while snd_card_next(&card) == 0 && card >= 0 {
            var control: OpaquePointer?
            guard snd_ctl_open(&control, "hw:\(card)", 0) >= 0, let control else { continue }
            defer { if snd_ctl_close(control) < 0 { /* the handle is freed anyway */  } }
            var cardInfo: OpaquePointer?
            guard snd_ctl_card_info_malloc(&cardInfo) >= 0, let cardInfo else { continue }
            defer { snd_ctl_card_info_free(cardInfo) }
            guard snd_ctl_card_info(control, cardInfo) >= 0 else { continue }
            let cardID = text(snd_ctl_card_info_get_id(cardInfo))
            let cardName = text(snd_ctl_card_info_get_name(cardInfo))
            var pcmInfo: OpaquePointer?
            guard snd_pcm_info_malloc(&pcmInfo) >= 0, let pcmInfo else { continue }
            defer { snd_pcm_info_free(pcmInfo) }
            var device: Int32 = -1
            while snd_ctl_pcm_next_device(control, &device) == 0 && device >= 0 {
                snd_pcm_info_set_device(pcmInfo, UInt32(device))
                snd_pcm_info_set_subdevice(pcmInfo, 0)
                snd_pcm_info_set_stream(pcmInfo, SND_PCM_STREAM_CAPTURE)
                // -ENOENT: this device only plays.
                guard snd_ctl_pcm_info(control, pcmInfo) >= 0 else { continue }
                var listing = microphone(named: "hw:CARD=\(cardID),DEV=\(device)")
                listing.card = Int(card)
                listing.deviceNumber = Int(device)
                listing.cardName = cardName
                listing.pcmName = text(snd_pcm_info_get_name(pcmInfo))
                result.append(listing)
            }
        }
        return result
    }

    /// Opens one capture device by name and reads the rates, channels and sample format it takes.
    public static func microphone(named name: String) -> MicrophoneListing {
        var listing = MicrophoneListing(
            device: name, card: -1, deviceNumber: -1, cardName: "", pcmName: "", rates: nil, channels: nil,
            takesS16LE: false)
        let handle: PCMHandle
        do { handle = try PCMHandle(device: name, stream: SND_PCM_STREAM_CAPTURE) } catch {
            listing.problem = error.call.meaning(of: error.code, device: name)
            return listing
        }
        var params: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&params) >= 0, let params else {
            listing.problem = "out of memory"
            return listing
        }
        defer { snd_pcm_hw_params_free(params) }
        let any = snd_pcm_hw_params_any(handle.pcm, params)
        guard any >= 0 else {
            listing.problem = ALSACall.hardwareParameters.meaning(of: -any, device: name)
            return listing
        }
        var low: UInt32 = 0, high: UInt32 = 0, direction: Int32 = 0
        if snd_pcm_hw_params_get_rate_min(params, &low, &direction) >= 0,
            snd_pcm_hw_params_get_rate_max(params, &high, &direction) >= 0, low <= high
        {
            listing.rates = Int(low)...Int(high)
        }
        if snd_pcm_hw_params_get_channels_min(params, &low) >= 0,
            snd_pcm_hw_params_get_channels_max(params, &high) >= 0, low <= high
        {
            listing.channels = Int(low)...Int(min(high, 64))
        }
        listing.takesS16LE = snd_pcm_hw_params_test_format(handle.pcm, params, SND_PCM_FORMAT_S16_LE) == 0
        return listing
    }

    static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    /// Names in a directory (without . and ..); empty when it cannot be read.
    static func entries(of directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { if closedir(dir) != 0 { /* nothing to undo */  } }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = string(fromCharacters: entry.pointee.d_name)
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The /dev/v4l/by-id and by-path links that resolve to `path`.
    static func links(to path: String) -> [String] {
        guard let target = resolve(path) else { return [] }
        var found: [String] = []
        for directory in ["/dev/v4l/by-id", "/dev/v4l/by-path"] {
            for name in entries(of: directory).sorted() where resolve(directory + "/" + name) == target {
                found.append(directory + "/" + name)
            }
        }
        return found
    }

    static func resolve(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// The text `vigil probe` prints: every camera with its formats, sizes and rates, every
/// microphone with its rates and channels, each followed by a block to paste into the
/// configuration.
public enum DeviceReport {
    /// A nil list is left out (only a camera, or only a microphone, was asked for).
    public static func render(
        cameras: [CameraListing]?, microphones: [MicrophoneListing]?, request: CameraRequest,
        audioRate: Int = 48000, audioChannels: Int = 1
    ) -> String {
        var out = ""
        if let cameras {
            out += "Cameras (V4L2)\n"
            if cameras.isEmpty {
                out +=
                    "\n  none found (no /dev/video* node) — is the camera plugged in? A Raspberry Pi camera module is listed\n"
                out += "  under libcamera.\n"
            }
            for camera in cameras { out += "\n" + render(camera, request: request) }
        }
        if let microphones {
            out += (out.isEmpty ? "" : "\n") + "Microphones (ALSA capture devices)\n"
            if microphones.isEmpty {
                out += "\n  none found — is the microphone plugged in? (`arecord -l` lists the same)\n"
            }
            for microphone in microphones { out += "\n" + render(microphone, rate: audioRate, channels: audioChannels) }
        }
        return out
    }

    public static func render(_ camera: CameraListing, request: CameraRequest) -> String {
        var out = camera.path
        if let id = camera.identity { out += " — \(id.card) (driver \(id.driver), \(id.busInfo))" }
        out += "\n"
        for link in camera.links { out += "  also \(link)\n" }
        if let problem = camera.problem {
            return out + "  \(problem)\n"
        }
        let usable = camera.formats.filter(\.isUsable)
        out += formatsHeading(
            anyUsable: !usable.isEmpty, usable: "NV12, YU12, YUYV, 422P, or MJPEG through libv4l2",
            order: preferenceNote)
        for format in usable {
            out +=
                "    \(format.fourcc.description.padded(to: 5)) \(format.name)\(format.isEmulated ? " (converted by libv4l2)" : "")\n"
            if format.sizes.isEmpty { out += "          sizes and rates not listed by the driver\n" }
            for size in format.sizes { out += "          " + describe(size) + "\n" }
        }
        out += otherFormats(camera.formats.filter { !$0.isUsable }.map(\.fourcc.description))
        if let choice = CameraFormatChooser.choose(from: camera.formats, for: request) {
            out +=
                "  paste into the configuration (the closest to \(request.width)x\(request.height) at \(DecimalText.rate(request.frameRate)) fps: \(choice)):\n"
            out += pasteBlock(
                "camera",
                [
                    ("device", "\"\(camera.configurationName)\""), ("width", "\(choice.width)"),
                    ("height", "\(choice.height)"), ("fps", configurationRate(choice.frameRate ?? request.frameRate)),
                ])
        }
        return out
    }

    public static func render(_ microphone: MicrophoneListing, rate: Int, channels: Int) -> String {
        var out = microphone.device
        if microphone.card >= 0 {
            out +=
                " — \(microphone.cardName): \(microphone.pcmName) (card \(microphone.card), device \(microphone.deviceNumber))"
        }
        out += "\n"
        if let problem = microphone.problem { return out + "  \(problem)\n" }
        var facts: [String] = []
        if let r = microphone.rates {
            facts.append(r.lowerBound == r.upperBound ? "\(r.lowerBound) Hz" : "\(r.lowerBound) to \(r.upperBound) Hz")
        }
        if let c = microphone.channels {
            facts.append(
                c.lowerBound == c.upperBound
                    ? "\(c.lowerBound) channel(s)" : "\(c.lowerBound) to \(c.upperBound) channels")
        }
        facts.append(microphone.takesS16LE ? "16-bit samples" : "no 16-bit samples (plughw: converts)")
        out += "  " + facts.joined(separator: ", ") + "\n"
        let useRate =
            microphone.rates.map { $0.contains(rate) ? rate : min(max(rate, $0.lowerBound), $0.upperBound) } ?? rate
        let useChannels = microphone.channels.map { $0.contains(channels) ? channels : $0.lowerBound } ?? channels
        out += "  paste into the configuration:\n"
        out += pasteBlock(
            "audio",
            [
                ("enabled", "true"),
                ("device", "\"\(microphone.configurationDevice(rate: useRate, channels: useChannels))\""),
                ("rate", "\(useRate)"), ("channels", "\(min(useChannels, 2))"),
            ])
        return out
    }

    /// The line over a camera's usable formats: which formats Vigil records from (`usable`) and
    /// how it picks among them (`order`), or that the camera has none of them.
    static func formatsHeading(anyUsable: Bool, usable: String, order: String) -> String {
        anyUsable ? "  formats Vigil records from (\(order)):\n" : "  no format Vigil can record from (\(usable))\n"
    }

    /// The line naming a camera's formats Vigil does not record from, if it has any.
    static func otherFormats(_ names: [String]) -> String {
        names.isEmpty ? "" : "  other formats (not used): \(names.joined(separator: ", "))\n"
    }

    /// A section of settings to paste into the configuration, indented under its device:
    /// `    camera = {` / `      width = 640;` / `    };`.
    static func pasteBlock(_ section: String, _ settings: [(name: String, value: String)]) -> String {
        "    \(section) = {\n" + settings.map { "      \($0.name) = \($0.value);\n" }.joined() + "    };\n"
    }

    static let preferenceNote = "at one size and rate Vigil prefers NV12, YU12, YUYV, 422P, then converted ones"

    /// One size line: `640x480     25, 12.5, 10 fps`.
    static func describe(_ size: FrameSizeDescription) -> String {
        let rates = describe(size.intervals)
        switch size.size {
        case .discrete(let w, let h):
            return "\(w)x\(h)".padded(to: 11) + " " + rates
        case .stepwise(let minW, let maxW, let stepW, let minH, let maxH, let stepH):
            return "\(minW)x\(minH) to \(maxW)x\(maxH) in steps of \(stepW)x\(stepH); at \(maxW)x\(maxH): " + rates
        }
    }

    static func describe(_ intervals: FrameIntervals) -> String {
        switch intervals {
        case .unknown:
            return "rates not listed"
        case .discrete(let list):
            var rates: [Rational] = []
            for interval in list {
                let rate = Rational(interval.denominator, interval.numerator)
                if !rates.contains(rate) { rates.append(rate) }
            }
            rates.sort { $0.doubleValue > $1.doubleValue }
            return rates.map(DecimalText.rate).joined(separator: ", ") + " fps"
        case .stepwise(let shortest, let longest, _):
            return
                "\(DecimalText.rate(Rational(longest.denominator, longest.numerator))) to \(DecimalText.rate(Rational(shortest.denominator, shortest.numerator))) fps"
        }
    }

    /// A rate as a libconfig float: `25.0`, `12.5`, `29.97`.
    static func configurationRate(_ rate: Rational) -> String {
        let text = DecimalText.rate(rate)
        return text.contains(".") ? text : text + ".0"
    }
}

extension String {
    func padded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
