internal import CV4L2
internal import Glibc
import Media
internal import POSIX

/// Why a memory-to-memory codec session failed: the call, the device, `errno`, and what to do.
public struct M2MError: Error, Equatable, Sendable, CustomStringConvertible {
    public var device: String
    public var call: String
    public var code: Int32
    public var problem: String

    public var description: String { "\(device): \(call): \(problem)" }

    init(_ device: String, _ call: String, code: Int32, problem: String? = nil) {
        self.device = device
        self.call = call
        self.code = code
        if let problem {
            self.problem = problem
        } else {
            switch code {
            case ENODEV, ENXIO:
                self.problem = "the device is gone (\(SystemError(code).description)); was its driver unloaded?"
            case ENOMEM:
                self.problem =
                    "out of memory for its buffers (\(SystemError(code).description)); give the board more contiguous memory: a larger cma= on the kernel command line, or a larger cma- setting of dtoverlay=vc4-kms-v3d in config.txt, then reboot (other programs holding camera or encoder buffers use the same pool)"
            case EBUSY: self.problem = "the device is busy (\(SystemError(code).description)); another program uses it"
            case EACCES, EPERM:
                self.problem =
                    "permission denied (\(SystemError(code).description)); run as a member of the video group"
            default: self.problem = SystemError(code).description
            }
        }
    }
}

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
/// the OUTPUT queue, coded data comes out on the CAPTURE queue, both with MMAP buffers.
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
/// session belongs to the encoder's thread.
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
    private let fd: FileDescriptor
    private let outputType: UInt32
    private let captureType: UInt32
    private var output: [Mapping] = []
    private var capture: [Mapping] = []
    private var freeOutput: [Int] = []
    /// Timestamps queued and not yet seen on a coded buffer, by their microseconds.
    private var pending: [Int64: Timestamp] = [:]
    private var streaming = false
    /// How long a call waits for the device before it counts as hung.
    public let timeoutMilliseconds: Int32

    private struct Mapping {
        var address: UnsafeMutableRawPointer
        var length: Int
    }

    /// Opens `path`, checks it is a memory-to-memory device whose CAPTURE queue offers `coded`,
    /// sets both formats for `format`'s frames, and maps `buffers` buffers on each queue.
    public init(
        path: String, format: VideoFormat, coded: FourCC, buffers: Int = 4, timeoutMilliseconds: Int32 = 2000
    ) throws(M2MError) {
        self.path = path
        self.codedFourCC = coded
        self.timeoutMilliseconds = timeoutMilliseconds
        let descriptor = try Self.openNode(path)
        let node = try Self.queryNode(descriptor, path)
        identity = node.identity
        guard let multiplanar = node.multiplanar else {
            throw M2MError(
                path, "VIDIOC_QUERYCAP", code: 0,
                problem: "\(identity.card) (\(identity.driver)) is not a memory-to-memory device, so not an encoder")
        }
        self.multiplanar = multiplanar
        (outputType, captureType) = Self.queueTypes(multiplanar: multiplanar)

        let codedFormats = try Self.formats(descriptor, path, type: captureType)
        guard codedFormats.contains(coded) else {
            throw M2MError(
                path, "VIDIOC_ENUM_FMT", code: 0,
                problem:
                    "\(identity.card) (\(identity.driver)) does not encode \(coded); it encodes \(codedFormats.map(\.description).joined(separator: ", "))"
            )
        }
        // The coded side first (stateful encoders take the CAPTURE format first), then the raw side.
        try Self.setFormat(
            descriptor, path, type: captureType, multiplanar: multiplanar, fourcc: coded, width: format.width,
            height: format.height)
        let rawFourCC = format.pixelFormat == .nv12 ? CV4L2_PIX_FMT_NV12 : CV4L2_PIX_FMT_YUV420
        guard format.pixelFormat.isEncoderNative else {
            throw M2MError(
                path, "VIDIOC_S_FMT", code: 0, problem: "\(format.pixelFormat) frames; convert to NV12 or I420 first")
        }
        let set = try Self.setFormat(
            descriptor, path, type: outputType, multiplanar: multiplanar, fourcc: FourCC(littleEndian: rawFourCC),
            width: format.width, height: format.height)
        // Encoders code whole macroblocks: the driver may round the buffer's size up (vicodec
        // to 8×16, the Pi's to 16 rows, 1080 → 1088), and the visible picture is then set as
        // the OUTPUT queue's crop; the chroma planes start after the rounded rows.
        guard set.fourcc == FourCC(littleEndian: rawFourCC), set.width >= format.width, set.height >= format.height,
            set.width <= format.width + 64, set.height <= format.height + 64
        else {
            throw M2MError(
                path, "VIDIOC_S_FMT", code: 0,
                problem:
                    "it takes \(set.fourcc) \(set.width)×\(set.height) for \(format.pixelFormat) \(format.width)×\(format.height) frames"
            )
        }
        do {
            rawLayout = try VideoFormat(
                width: set.width, height: set.height, pixelFormat: format.pixelFormat,
                bytesPerLine: set.bytesPerLine, frameRate: format.frameRate)
        } catch {
            throw M2MError(path, "VIDIOC_S_FMT", code: 0, problem: "its raw layout: \(error)")
        }
        visible = (format.width, format.height)
        if set.width != format.width || set.height != format.height {
            var selection = v4l2_selection()
            selection.type = V4L2_BUF_TYPE_VIDEO_OUTPUT.rawValue  // the ioctl layer maps _MPLANE to this
            selection.target = CV4L2_SEL_TGT_CROP
            selection.r = v4l2_rect(left: 0, top: 0, width: UInt32(format.width), height: UInt32(format.height))
            if CV4L2_rawIoctl(descriptor.rawValue, CV4L2_VIDIOC_S_SELECTION, &selection) != 0,
                errno != ENOTTY, errno != EINVAL
            {
                throw M2MError(path, "VIDIOC_S_SELECTION", code: errno)
            }
        }
        fd = descriptor
        output = try map(type: outputType, count: buffers)
        freeOutput = Array(output.indices)
        capture = try map(type: captureType, count: buffers)
        try start()
    }

    deinit {
        stop()
        for m in output + capture { munmap(m.address, m.length) }
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
    public func setControl(_ id: UInt32, _ value: Int32, _ name: String) throws(M2MError) -> Bool {
        var control = v4l2_control(id: id, value: value)
        if CV4L2_rawIoctl(fd.rawValue, CV4L2_VIDIOC_S_CTRL, &control) == 0 { return true }
        let code = errno
        if code == EINVAL || code == ENOTTY || code == EACCES { return false }
        throw M2MError(path, "VIDIOC_S_CTRL \(name)", code: code)
    }

    // MARK: Frames

    /// Queues `frame` (copied into a free OUTPUT buffer at the device's strides) and returns
    /// the coded buffers ready so far. Waits for a free buffer at most the timeout.
    public func encode(_ frame: VideoFrame) throws(M2MError) -> [M2MCodedBuffer] {
        var coded = try collect(wait: false).buffers
        while freeOutput.isEmpty {
            coded += try collect(wait: true).buffers
        }
        let index = freeOutput.removeLast()
        let mapping = output[index]
        let base = mapping.address.assumingMemoryBound(to: UInt8.self)
        for (p, plane) in rawLayout.planes.enumerated() {
            let source = frame.plane(p)
            for y in 0..<plane.rows {
                let row = source.row(min(y, source.height - 1))
                (base + plane.offset + y * plane.stride).update(from: row.baseAddress!, count: row.count)
            }
        }
        let micros = frame.timestamp.nanoseconds / 1000
        pending[micros] = frame.timestamp
        try queue(type: outputType, index: index, bytesUsed: rawLayout.bufferSize, microseconds: micros)
        return coded
    }

    /// Ends the stream: `V4L2_ENC_CMD_STOP`, then every coded buffer until the one flagged
    /// `LAST` (or `EPIPE`, the driver's other way to say it).
    public func drain() throws(M2MError) -> [M2MCodedBuffer] {
        var command = v4l2_encoder_cmd()
        command.cmd = CV4L2_ENC_CMD_STOP
        try Self.call(fd, path, CV4L2_VIDIOC_ENCODER_CMD, &command, "VIDIOC_ENCODER_CMD STOP")
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
    public func restart() throws(M2MError) {
        stop()
        try start()
    }

    // MARK: Buffers

    private func start() throws(M2MError) {
        for index in capture.indices {
            try queue(type: captureType, index: index, bytesUsed: 0, microseconds: 0)
        }
        var type = Int32(outputType)
        try Self.call(fd, path, CV4L2_VIDIOC_STREAMON, &type, "VIDIOC_STREAMON (raw)")
        type = Int32(captureType)
        try Self.call(fd, path, CV4L2_VIDIOC_STREAMON, &type, "VIDIOC_STREAMON (coded)")
        freeOutput = Array(output.indices)
        pending = [:]
        streaming = true
    }

    private func stop() {
        guard streaming else { return }
        streaming = false
        for t in [outputType, captureType] {
            var type = Int32(t)
            _ = CV4L2_rawIoctl(fd.rawValue, CV4L2_VIDIOC_STREAMOFF, &type)
        }
    }

    private func map(type: UInt32, count: Int) throws(M2MError) -> [Mapping] {
        var request = v4l2_requestbuffers()
        request.count = UInt32(count)
        request.type = type
        request.memory = V4L2_MEMORY_MMAP.rawValue
        try Self.call(fd, path, CV4L2_VIDIOC_REQBUFS, &request, "VIDIOC_REQBUFS")
        guard request.count >= 1 else {
            throw M2MError(path, "VIDIOC_REQBUFS", code: 0, problem: "the driver granted no buffers")
        }
        var mapped: [Mapping] = []
        for index in 0..<request.count {
            var planes = v4l2_plane()
            var buffer = v4l2_buffer()
            buffer.index = index
            buffer.type = type
            buffer.memory = V4L2_MEMORY_MMAP.rawValue
            let result: (length: Int, offset: Int64)? = withUnsafeMutablePointer(to: &planes) { plane in
                if multiplanar {
                    buffer.m.planes = plane
                    buffer.length = 1
                }
                guard CV4L2_rawIoctl(fd.rawValue, CV4L2_VIDIOC_QUERYBUF, &buffer) == 0 else { return nil }
                return multiplanar
                    ? (Int(plane.pointee.length), Int64(plane.pointee.m.mem_offset))
                    : (Int(buffer.length), Int64(buffer.m.offset))
            }
            guard let result else {
                let code = errno
                for m in mapped { munmap(m.address, m.length) }
                throw M2MError(path, "VIDIOC_QUERYBUF", code: code)
            }
            guard let address = CV4L2_rawMmap(result.length, fd.rawValue, result.offset) else {
                let code = errno
                for m in mapped { munmap(m.address, m.length) }
                throw M2MError(path, "mmap", code: code)
            }
            mapped.append(Mapping(address: address, length: result.length))
        }
        return mapped
    }

    private func queue(type: UInt32, index: Int, bytesUsed: Int, microseconds: Int64) throws(M2MError) {
        var planes = v4l2_plane()
        var buffer = v4l2_buffer()
        buffer.index = UInt32(index)
        buffer.type = type
        buffer.memory = V4L2_MEMORY_MMAP.rawValue
        buffer.timestamp = timeval(
            tv_sec: .init(microseconds / 1_000_000), tv_usec: .init(microseconds % 1_000_000))
        let status: Int32 = withUnsafeMutablePointer(to: &planes) { plane in
            if multiplanar {
                plane.pointee.bytesused = UInt32(bytesUsed)
                plane.pointee.length = UInt32(type == outputType ? output[index].length : capture[index].length)
                buffer.m.planes = plane
                buffer.length = 1
            } else {
                buffer.bytesused = UInt32(bytesUsed)
                buffer.length = UInt32(type == outputType ? output[index].length : capture[index].length)
            }
            return CV4L2_rawIoctl(fd.rawValue, CV4L2_VIDIOC_QBUF, &buffer)
        }
        if status != 0 { throw M2MError(path, "VIDIOC_QBUF", code: errno) }
    }

    /// Dequeues one buffer of `type`; nil when none is ready (EAGAIN). `last` is true for a
    /// coded buffer flagged LAST, or when the driver answers EPIPE (no more after a drain).
    private func dequeue(type: UInt32) throws(M2MError) -> (index: Int, bytes: Int, flags: UInt32, micros: Int64)?? {
        var planes = v4l2_plane()
        var buffer = v4l2_buffer()
        buffer.type = type
        buffer.memory = V4L2_MEMORY_MMAP.rawValue
        let status: Int32 = withUnsafeMutablePointer(to: &planes) { plane in
            if multiplanar {
                buffer.m.planes = plane
                buffer.length = 1
            }
            return CV4L2_rawIoctl(fd.rawValue, CV4L2_VIDIOC_DQBUF, &buffer)
        }
        if status != 0 {
            let code = errno
            if code == EAGAIN { return .some(nil) }
            if code == EPIPE { return nil }
            throw M2MError(path, "VIDIOC_DQBUF", code: code)
        }
        let used = multiplanar ? Int(planes.bytesused) - Int(planes.data_offset) : Int(buffer.bytesused)
        let micros = Int64(buffer.timestamp.tv_sec) * 1_000_000 + Int64(buffer.timestamp.tv_usec)
        return .some((Int(buffer.index), max(0, used), buffer.flags, micros))
    }

    /// Takes back finished raw buffers and every coded buffer ready; with `wait`, first waits
    /// (at most the timeout) until the device has something. `last` is true once the buffer
    /// flagged LAST came (or EPIPE: nothing more after a drain).
    private func collect(wait: Bool) throws(M2MError) -> (buffers: [M2MCodedBuffer], last: Bool) {
        if wait { try poll() }
        while case .some(.some(let done)) = try dequeue(type: outputType) { freeOutput.append(done.index) }
        var coded: [M2MCodedBuffer] = []
        while true {
            guard let result = try dequeue(type: captureType) else { return (coded, true) }  // EPIPE
            guard let buffer = result else { return (coded, false) }
            if let taken = take(buffer) { coded.append(taken) }
            if buffer.flags & CV4L2_BUF_FLAG_LAST != 0 { return (coded, true) }
            try queue(type: captureType, index: buffer.index, bytesUsed: 0, microseconds: 0)
        }
    }

    private func take(_ buffer: (index: Int, bytes: Int, flags: UInt32, micros: Int64)) -> M2MCodedBuffer? {
        guard buffer.bytes > 0, buffer.flags & CV4L2_BUF_FLAG_ERROR == 0 else { return nil }
        let mapping = capture[buffer.index]
        let count = min(buffer.bytes, mapping.length)
        let bytes = Array(UnsafeRawBufferPointer(start: mapping.address, count: count))
        let time = pending.removeValue(forKey: buffer.micros) ?? Timestamp(nanoseconds: buffer.micros * 1000)
        return M2MCodedBuffer(
            bytes: bytes, timestamp: time, isKeyframe: buffer.flags & CV4L2_BUF_FLAG_KEYFRAME != 0)
    }

    private func poll() throws(M2MError) {
        var entry = pollfd(fd: fd.rawValue, events: Int16(POLLIN | POLLOUT | POLLPRI), revents: 0)
        let status = Glibc.poll(&entry, 1, timeoutMilliseconds)
        if status < 0 {
            if errno == EINTR { return }
            throw M2MError(path, "poll", code: errno)
        }
        if status == 0 {
            throw M2MError(
                path, "poll", code: ETIMEDOUT,
                problem: "the encoder returned nothing for \(timeoutMilliseconds) ms; it is hung")
        }
        if entry.revents & Int16(POLLERR) != 0, entry.revents & Int16(POLLIN | POLLOUT) == 0 {
            throw M2MError(path, "poll", code: EIO, problem: "the device reports an error (POLLERR)")
        }
    }

    // MARK: Helpers

    /// The node at `path`, opened for reading and writing, without blocking.
    private static func openNode(_ path: String) throws(M2MError) -> FileDescriptor {
        do {
            return FileDescriptor(adopting: try retryOnInterrupt { open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) })
        } catch {
            throw M2MError(path, "open", code: error.code)
        }
    }

    /// Who the node is, and whether it is a memory-to-memory device on the multi-planar API
    /// (true), the single-planar one (false), or not one at all (nil).
    private static func queryNode(
        _ fd: borrowing FileDescriptor, _ path: String
    ) throws(M2MError) -> (identity: (driver: String, card: String), multiplanar: Bool?) {
        var caps = v4l2_capability()
        try call(fd, path, CV4L2_VIDIOC_QUERYCAP, &caps, "VIDIOC_QUERYCAP")
        // The node's own capabilities when the driver gives them (V4L2_CAP_DEVICE_CAPS).
        let node = caps.capabilities & 0x8000_0000 != 0 ? caps.device_caps : caps.capabilities
        // V4L2_CAP_VIDEO_M2M_MPLANE, V4L2_CAP_VIDEO_M2M.
        let multiplanar: Bool? = node & 0x4000 != 0 ? true : node & 0x8000 != 0 ? false : nil
        return ((text(caps.driver), text(caps.card)), multiplanar)
    }

    /// The raw frames' queue (OUTPUT) and the coded data's (CAPTURE) on either API.
    private static func queueTypes(multiplanar: Bool) -> (output: UInt32, capture: UInt32) {
        multiplanar
            ? (V4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE.rawValue, V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE.rawValue)
            : (V4L2_BUF_TYPE_VIDEO_OUTPUT.rawValue, V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue)
    }

    private static func call<Argument>(
        _ fd: borrowing FileDescriptor, _ path: String, _ request: UInt, _ argument: inout Argument, _ name: String
    ) throws(M2MError) {
        let status = withUnsafeMutableBytes(of: &argument) { CV4L2_rawIoctl(fd.rawValue, request, $0.baseAddress) }
        if status != 0 { throw M2MError(path, name, code: errno) }
    }

    private static func text<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// The pixel formats a queue offers.
    private static func formats(
        _ fd: borrowing FileDescriptor, _ path: String, type: UInt32
    ) throws(M2MError) -> [FourCC] {
        var found: [FourCC] = []
        for index in UInt32(0)..<64 {
            var description = v4l2_fmtdesc()
            description.index = index
            description.type = type
            if CV4L2_rawIoctl(fd.rawValue, CV4L2_VIDIOC_ENUM_FMT, &description) != 0 {
                if errno == EINVAL { break }
                throw M2MError(path, "VIDIOC_ENUM_FMT", code: errno)
            }
            found.append(FourCC(littleEndian: description.pixelformat))
        }
        return found
    }

    @discardableResult
    private static func setFormat(
        _ fd: borrowing FileDescriptor, _ path: String, type: UInt32, multiplanar: Bool, fourcc: FourCC, width: Int,
        height: Int
    ) throws(M2MError) -> (fourcc: FourCC, width: Int, height: Int, bytesPerLine: Int) {
        var format = v4l2_format()
        format.type = type
        if multiplanar {
            format.fmt.pix_mp.width = UInt32(width)
            format.fmt.pix_mp.height = UInt32(height)
            format.fmt.pix_mp.pixelformat = fourcc.littleEndianValue
            format.fmt.pix_mp.num_planes = 1
        } else {
            format.fmt.pix.width = UInt32(width)
            format.fmt.pix.height = UInt32(height)
            format.fmt.pix.pixelformat = fourcc.littleEndianValue
        }
        try call(fd, path, CV4L2_VIDIOC_S_FMT, &format, "VIDIOC_S_FMT")
        if multiplanar {
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
    public static func listing(path: String) throws(M2MError) -> M2MListing? {
        let fd = try openNode(path)
        let node = try queryNode(fd, path)
        guard let multiplanar = node.multiplanar else { return nil }
        let (output, capture) = queueTypes(multiplanar: multiplanar)
        var listing = M2MListing(
            path: path, driver: node.identity.driver, card: node.identity.card, multiplanar: multiplanar,
            rawFormats: try formats(fd, path, type: output), codedFormats: try formats(fd, path, type: capture),
            sizes: nil, controls: [])
        if let coded = listing.codedFormats.first(where: { $0 == "H264" }) ?? listing.codedFormats.first {
            var size = v4l2_frmsizeenum()
            size.index = 0
            size.pixel_format = coded.littleEndianValue
            if CV4L2_rawIoctl(fd.rawValue, CV4L2_VIDIOC_ENUM_FRAMESIZES, &size) == 0 {
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
                CV4L2_rawIoctl(fd.rawValue, CV4L2_VIDIOC_QUERYCTRL, &query) == 0
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
