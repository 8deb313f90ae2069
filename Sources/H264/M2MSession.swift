internal import CV4L2
internal import Glibc
import Media
import V4L2

/// One coded buffer a memory-to-memory device returned.
public struct M2MCodedBuffer: Sendable {
    public var bytes: [UInt8]
    /// The timestamp of the raw frame it came from (what was queued with it).
    public var timestamp: Timestamp
    /// The driver flagged it a keyframe.
    public var isKeyframe: Bool
}

/// A stateful V4L2 memory-to-memory encoder session (the kernel's "stateful encoder"
/// interface, as `bcm2835-codec`, venus, coda and `vicodec` implement it): raw frames go in on
/// the OUTPUT queue, coded data comes out on the CAPTURE queue, both with MMAP buffers
/// (`V4L2Buffers`, the buffer layer the cameras use too).
///
/// - Single-planar and multi-planar devices alike (`V4L2_CAP_VIDEO_M2M` or `_M2M_MPLANE`);
///   the raw format is the frames' own (NV12 or I420), in one contiguous plane, copied into
///   the device's buffers at the device's `bytesperline`.
/// - Each frame's capture timestamp goes out in the buffer's timestamp and comes back on its
///   coded buffer; it is kept to the nanosecond here, since `timeval` holds microseconds.
/// - `drain` sends `V4L2_ENC_CMD_STOP` and takes coded buffers until one flagged `LAST` (or
///   `EPIPE`); `restart` starts the stream again for more frames.
///
/// Straight ioctls, not libv4l2 (whose conversions are for cameras). Not thread-safe: one
/// session belongs to the encoder's thread. Failures are `V4L2Error`s of the `.encoder` role.
public final class M2MSession {
    public let path: String
    public let identity: (driver: String, card: String)
    /// The device uses the multi-planar API.
    public let multiplanar: Bool
    /// Where the raw frames lie in the device's buffers: its strides, and its size, which may
    /// be rounded up from the picture's (the rows past the picture repeat its last row).
    public let rawLayout: VideoFormat
    /// The picture's own size (the crop of the device's buffer).
    public let visible: (width: Int, height: Int)
    public let codedFourCC: FourCC
    private let device: V4L2Device
    private let output: V4L2Buffers
    private let capture: V4L2Buffers
    private var freeOutput: [Int] = []
    /// Timestamps queued and not yet seen on a coded buffer, by their microseconds.
    private var pending: [Int64: Timestamp] = [:]
    private var streaming = false
    /// How long a call waits for the device before it counts as hung.
    public let timeoutMilliseconds: Int32

    /// Opens `path`, checks it is a memory-to-memory device whose CAPTURE queue offers `coded`,
    /// sets both formats for `format`'s frames, and maps `buffers` buffers on each queue.
    public init(
        path: String, format: VideoFormat, coded: FourCC, buffers: Int = 4, timeoutMilliseconds: Int32 = 2000
    ) throws(V4L2Error) {
        self.path = path
        self.codedFourCC = coded
        self.timeoutMilliseconds = timeoutMilliseconds
        let device = try V4L2Device(path: path, role: .encoder)
        let node = try device.identity()
        identity = (node.driver, node.card)
        guard let multiplanar = node.capabilities.memoryToMemoryIsMultiplanar else {
            throw V4L2Error(
                device: path, call: .queryCapabilities, role: .encoder,
                problem: "\(identity.card) (\(identity.driver)) is not a memory-to-memory device, so not an encoder")
        }
        self.multiplanar = multiplanar
        let outputQueue = V4L2Queue(.output, multiplanar: multiplanar)
        let captureQueue = V4L2Queue(.capture, multiplanar: multiplanar)

        let codedFormats = try device.formats(of: captureQueue).map(\.fourcc)
        guard codedFormats.contains(coded) else {
            throw V4L2Error(
                device: path, call: .enumerateFormats, role: .encoder,
                problem:
                    "\(identity.card) (\(identity.driver)) does not encode \(coded); it encodes \(codedFormats.map(\.description).joined(separator: ", "))"
            )
        }
        // The coded side first (stateful encoders take the CAPTURE format first), then the raw side.
        try Self.setFormat(device, captureQueue, fourcc: coded, width: format.width, height: format.height)
        let rawFourCC = format.pixelFormat == .nv12 ? CV4L2_PIX_FMT_NV12 : CV4L2_PIX_FMT_YUV420
        guard format.pixelFormat.isEncoderNative else {
            throw V4L2Error(
                device: path, call: .setFormat, role: .encoder,
                problem: "\(format.pixelFormat) frames; convert to NV12 or I420 first")
        }
        let set = try Self.setFormat(
            device, outputQueue, fourcc: FourCC(littleEndian: rawFourCC), width: format.width, height: format.height)
        // Encoders code whole macroblocks: the driver may round the buffer's size up (vicodec
        // to 8×16, the Pi's to 16 rows, 1080 → 1088), and the visible picture is then set as
        // the OUTPUT queue's crop; the chroma planes start after the rounded rows.
        guard set.fourcc == FourCC(littleEndian: rawFourCC), set.width >= format.width, set.height >= format.height,
            set.width <= format.width + 64, set.height <= format.height + 64
        else {
            throw V4L2Error(
                device: path, call: .setFormat, role: .encoder,
                problem:
                    "it takes \(set.fourcc) \(set.width)×\(set.height) for \(format.pixelFormat) \(format.width)×\(format.height) frames"
            )
        }
        do {
            rawLayout = try VideoFormat(
                width: set.width, height: set.height, pixelFormat: format.pixelFormat,
                bytesPerLine: set.bytesPerLine, frameRate: format.frameRate)
        } catch {
            throw V4L2Error(device: path, call: .setFormat, role: .encoder, problem: "its raw layout: \(error)")
        }
        visible = (format.width, format.height)
        if set.width != format.width || set.height != format.height {
            var selection = v4l2_selection()
            selection.type = V4L2_BUF_TYPE_VIDEO_OUTPUT.rawValue  // the ioctl layer maps _MPLANE to this
            selection.target = CV4L2_SEL_TGT_CROP
            selection.r = v4l2_rect(left: 0, top: 0, width: UInt32(format.width), height: UInt32(format.height))
            do { try device.control(CV4L2_VIDIOC_S_SELECTION, &selection, .setSelection) } catch {
                guard error.code == ENOTTY || error.code == EINVAL else { throw error }
            }
        }
        self.device = device
        output = try Self.buffers(device, outputQueue, count: buffers)
        freeOutput = Array(output.mappings.indices)
        capture = try Self.buffers(device, captureQueue, count: buffers)
        try start()
    }

    deinit {
        stop()
    }

    // MARK: Controls

    /// The encoder controls Vigil sets (V4L2 control ids), by name.
    public enum Control {
        public static let forceKeyFrame = CV4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME
        public static let h264IPeriod = CV4L2_CID_MPEG_VIDEO_H264_I_PERIOD
        public static let gopSize = CV4L2_CID_MPEG_VIDEO_GOP_SIZE
        public static let repeatSequenceHeader = CV4L2_CID_MPEG_VIDEO_REPEAT_SEQ_HEADER
        public static let bitrate = CV4L2_CID_MPEG_VIDEO_BITRATE
        public static let bitrateMode = CV4L2_CID_MPEG_VIDEO_BITRATE_MODE
        public static let h264Profile = CV4L2_CID_MPEG_VIDEO_H264_PROFILE
        public static let h264Level = CV4L2_CID_MPEG_VIDEO_H264_LEVEL
    }

    /// Sets a control; false when the device does not have it (EINVAL), which callers
    /// tolerate for the controls a codec may lack (vicodec has no H.264 ones).
    @discardableResult
    public func setControl(_ id: UInt32, _ value: Int32, _ name: String) throws(V4L2Error) -> Bool {
        var control = v4l2_control(id: id, value: value)
        do { try device.control(CV4L2_VIDIOC_S_CTRL, &control, .setControl) } catch {
            if error.code == EINVAL || error.code == ENOTTY || error.code == EACCES { return false }
            throw V4L2Error(
                device: path, call: .setControl, code: error.code, role: .encoder,
                problem: "\(name): \(error.problem)")
        }
        return true
    }

    // MARK: Frames

    /// Queues `frame` (copied into a free OUTPUT buffer at the device's strides) and returns
    /// the coded buffers ready so far. Waits for a free buffer at most the timeout.
    public func encode(_ frame: VideoFrame) throws(V4L2Error) -> [M2MCodedBuffer] {
        var coded = try collect(wait: false).buffers
        while freeOutput.isEmpty {
            coded += try collect(wait: true).buffers
        }
        let index = freeOutput.removeLast()
        guard let address = output.mappings[index].base else { return coded }
        let base = address.assumingMemoryBound(to: UInt8.self)
        for (p, plane) in rawLayout.planes.enumerated() {
            let source = frame.plane(p)
            for y in 0..<plane.rows {
                let row = source.row(min(y, source.height - 1))
                (base + plane.offset + y * plane.stride).update(from: row.baseAddress!, count: row.count)
            }
        }
        let micros = frame.timestamp.nanoseconds / 1000
        pending[micros] = frame.timestamp
        try output.queue(index, bytesUsed: rawLayout.bufferSize, microseconds: micros)
        return coded
    }

    /// Ends the stream: `V4L2_ENC_CMD_STOP`, then every coded buffer until the one flagged
    /// `LAST` (or `EPIPE`, the driver's other way to say it).
    public func drain() throws(V4L2Error) -> [M2MCodedBuffer] {
        var command = v4l2_encoder_cmd()
        command.cmd = CV4L2_ENC_CMD_STOP
        try device.control(CV4L2_VIDIOC_ENCODER_CMD, &command, .encoderCommand)
        var coded: [M2MCodedBuffer] = []
        while true {
            let (buffers, last) = try collect(wait: true)
            coded += buffers
            if last { break }
        }
        return coded
    }

    /// After `drain`: the stream goes on with new frames (STREAMOFF and STREAMON of both queues,
    /// which every stateful encoder accepts; `V4L2_ENC_CMD_START` is optional in the spec).
    public func restart() throws(V4L2Error) {
        stop()
        try start()
    }

    // MARK: Buffers

    private func start() throws(V4L2Error) {
        for index in capture.mappings.indices { try capture.queue(index) }
        try output.streamOn()
        try capture.streamOn()
        freeOutput = Array(output.mappings.indices)
        pending = [:]
        streaming = true
    }

    private func stop() {
        guard streaming else { return }
        streaming = false
        // Fails only for a device already gone, whose stream is over anyway.
        for queue in [output, capture] { _ = try? queue.streamOff() }
    }

    /// `count` buffers on `queue`; at least one.
    private static func buffers(_ device: V4L2Device, _ queue: V4L2Queue, count: Int) throws(V4L2Error) -> V4L2Buffers {
        let buffers = try V4L2Buffers(device: device, queue: queue, count: count)
        guard buffers.count >= 1 else {
            throw V4L2Error(
                device: device.path, call: .requestBuffers, role: .encoder, problem: "the driver granted no buffers")
        }
        return buffers
    }

    /// Takes back finished raw buffers and every coded buffer ready; with `wait`, first waits
    /// (at most the timeout) until the device has something. `last` is true once the buffer
    /// flagged LAST came (or EPIPE: nothing more after a drain).
    private func collect(wait: Bool) throws(V4L2Error) -> (buffers: [M2MCodedBuffer], last: Bool) {
        if wait { try poll() }
        while let done = try output.dequeue() { freeOutput.append(done.index) }
        var coded: [M2MCodedBuffer] = []
        while true {
            let dequeued: V4L2DequeuedBuffer?
            do { dequeued = try capture.dequeue() } catch {
                if error.code == EPIPE { return (coded, true) }
                throw error
            }
            guard let buffer = dequeued else { return (coded, false) }
            if let taken = take(buffer) { coded.append(taken) }
            if buffer.flags.contains(.last) { return (coded, true) }
            try capture.queue(buffer.index)
        }
    }

    private func take(_ buffer: V4L2DequeuedBuffer) -> M2MCodedBuffer? {
        guard buffer.bytesUsed > 0, !buffer.flags.contains(.error) else { return nil }
        let mapping = capture.mappings[buffer.index]
        let count = min(buffer.bytesUsed, mapping.length)
        let bytes = Array(UnsafeRawBufferPointer(start: mapping.base, count: count))
        let micros = buffer.seconds * 1_000_000 + buffer.microseconds
        let time = pending.removeValue(forKey: micros) ?? Timestamp(nanoseconds: micros * 1000)
        return M2MCodedBuffer(bytes: bytes, timestamp: time, isKeyframe: buffer.flags.contains(.keyframe))
    }

    private func poll() throws(V4L2Error) {
        let events = try device.poll([.readable, .writable, .priority], milliseconds: timeoutMilliseconds)
        if events.isEmpty {
            throw V4L2Error(
                device: path, call: .poll, code: ETIMEDOUT, role: .encoder,
                problem: "the encoder returned nothing for \(timeoutMilliseconds) ms; it is hung")
        }
        if events.contains(.error), events.isDisjoint(with: [.readable, .writable]) {
            throw V4L2Error(
                device: path, call: .poll, code: EIO, role: .encoder,
                problem: "the device reports an error (POLLERR)")
        }
    }

    // MARK: Helpers

    @discardableResult
    private static func setFormat(
        _ device: V4L2Device, _ queue: V4L2Queue, fourcc: FourCC, width: Int, height: Int
    ) throws(V4L2Error) -> (fourcc: FourCC, width: Int, height: Int, bytesPerLine: Int) {
        var format = v4l2_format()
        format.type = queue.bufferType
        if queue.multiplanar {
            format.fmt.pix_mp.width = UInt32(width)
            format.fmt.pix_mp.height = UInt32(height)
            format.fmt.pix_mp.pixelformat = fourcc.littleEndianValue
            format.fmt.pix_mp.num_planes = 1
        } else {
            format.fmt.pix.width = UInt32(width)
            format.fmt.pix.height = UInt32(height)
            format.fmt.pix.pixelformat = fourcc.littleEndianValue
        }
        try device.control(CV4L2_VIDIOC_S_FMT, &format, .setFormat)
        if queue.multiplanar {
            let m = format.fmt.pix_mp
            return (FourCC(littleEndian: m.pixelformat), Int(m.width), Int(m.height), Int(m.plane_fmt.0.bytesperline))
        }
        let p = format.fmt.pix
        return (FourCC(littleEndian: p.pixelformat), Int(p.width), Int(p.height), Int(p.bytesperline))
    }
}

/// What a memory-to-memory device is, for `vigil probe` and for finding the hardware encoder.
public struct M2MListing: Sendable {
    public var path: String
    public var driver: String
    public var card: String
    public var multiplanar: Bool
    /// What it takes (its OUTPUT queue) and what it writes (its CAPTURE queue).
    public var rawFormats: [FourCC]
    public var codedFormats: [FourCC]
    /// The coded picture's smallest and largest size when the driver lists them
    /// (`VIDIOC_ENUM_FRAMESIZES` on its first coded format; the Pi's encoder: up to 1920×1920).
    public var sizes: (minimum: (width: Int, height: Int), maximum: (width: Int, height: Int))?
    /// The controls Vigil sets, each with whether the device has it.
    public var controls: [(name: String, present: Bool)]

    /// The CAPTURE queue offers H.264.
    public var encodesH264: Bool { codedFormats.contains("H264") }

    /// It has `FORCE_KEY_FRAME`, which `V4L2Encoder` needs to put keyframes where clips start.
    public var canPlaceKeyframes: Bool { controls.contains { $0.name == "FORCE_KEY_FRAME" && $0.present } }

    /// Whether it takes `width`×`height` pictures; true when it does not say.
    public func takes(width: Int, height: Int) -> Bool {
        guard let sizes else { return true }
        return width >= sizes.minimum.width && height >= sizes.minimum.height && width <= sizes.maximum.width
            && height <= sizes.maximum.height
    }

    /// "vicodec (vicodec)": its card and driver.
    public var name: String { card == driver ? card : "\(card) (\(driver))" }
}

extension M2MSession {
    /// The memory-to-memory device at `path`; nil when it is some other V4L2 device (a camera).
    public static func listing(path: String) throws(V4L2Error) -> M2MListing? {
        let device = try V4L2Device(path: path, role: .encoder)
        let node = try device.identity()
        guard let multiplanar = node.capabilities.memoryToMemoryIsMultiplanar else { return nil }
        var listing = M2MListing(
            path: path, driver: node.driver, card: node.card, multiplanar: multiplanar,
            rawFormats: try device.formats(of: V4L2Queue(.output, multiplanar: multiplanar)).map(\.fourcc),
            codedFormats: try device.formats(of: V4L2Queue(.capture, multiplanar: multiplanar)).map(\.fourcc),
            sizes: nil, controls: [])
        if let coded = listing.codedFormats.first(where: { $0 == "H264" }) ?? listing.codedFormats.first {
            var size = v4l2_frmsizeenum()
            size.index = 0
            size.pixel_format = coded.littleEndianValue
            if (try? device.control(CV4L2_VIDIOC_ENUM_FRAMESIZES, &size, .enumerateSizes)) != nil {
                if size.type == V4L2_FRMSIZE_TYPE_DISCRETE.rawValue {
                    let d = (Int(size.discrete.width), Int(size.discrete.height))
                    listing.sizes = (d, d)
                } else {
                    let s = size.stepwise
                    listing.sizes = ((Int(s.min_width), Int(s.min_height)), (Int(s.max_width), Int(s.max_height)))
                }
            }
        }
        let wanted: [(String, UInt32)] = [
            ("FORCE_KEY_FRAME", Control.forceKeyFrame), ("H264_I_PERIOD", Control.h264IPeriod),
            ("REPEAT_SEQ_HEADER", Control.repeatSequenceHeader), ("BITRATE", Control.bitrate),
            ("BITRATE_MODE", Control.bitrateMode), ("H264_PROFILE", Control.h264Profile),
            ("H264_LEVEL", Control.h264Level),
        ]
        for (name, id) in wanted {
            var query = v4l2_queryctrl()
            query.id = id
            let present =
                (try? device.control(CV4L2_VIDIOC_QUERYCTRL, &query, .queryControl)) != nil
                && query.flags & UInt32(V4L2_CTRL_FLAG_DISABLED) == 0
            listing.controls.append((name, present))
        }
        return listing
    }

    /// Every memory-to-memory device among `paths` (V4L2 nodes; others are passed over, as are
    /// nodes that cannot be opened).
    public static func devices(among paths: [String]) -> [M2MListing] {
        paths.compactMap { path in (try? listing(path: path)) ?? nil }
    }
}
