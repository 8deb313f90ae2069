internal import CV4L2
internal import Glibc
import Media
internal import POSIX

/// What a V4L2 device node can do (VIDIOC_QUERYCAP `device_caps`).
public struct VideoDeviceCapabilities: OptionSet, Hashable, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let videoCapture = VideoDeviceCapabilities(rawValue: 0x0000_0001)
    public static let videoOutput = VideoDeviceCapabilities(rawValue: 0x0000_0002)
    public static let videoCaptureMultiplanar = VideoDeviceCapabilities(rawValue: 0x0000_1000)
    public static let videoOutputMultiplanar = VideoDeviceCapabilities(rawValue: 0x0000_2000)
    public static let memoryToMemory = VideoDeviceCapabilities(rawValue: 0x0000_8000)
    public static let metadataCapture = VideoDeviceCapabilities(rawValue: 0x0080_0000)
    public static let readWrite = VideoDeviceCapabilities(rawValue: 0x0100_0000)
    public static let streaming = VideoDeviceCapabilities(rawValue: 0x0400_0000)
    /// The device reports per-node capabilities in `device_caps`.
    static let deviceCaps = VideoDeviceCapabilities(rawValue: 0x8000_0000)

    /// A node Vigil can record from: single-planar capture with streaming I/O.
    public var isCamera: Bool { contains(.videoCapture) && contains(.streaming) && !contains(.memoryToMemory) }

    /// What the node is, for messages about nodes that are not cameras.
    public var kind: String {
        if contains(.memoryToMemory) { return "a memory-to-memory device (a codec or converter)" }
        if contains(.videoCapture) { return contains(.streaming) ? "a camera" : "a camera without streaming I/O" }
        if contains(.videoCaptureMultiplanar) {
            return "a multi-planar capture device (not supported; try libcamerify)"
        }
        if contains(.metadataCapture) { return "a metadata node (a camera's second node, not its picture)" }
        if contains(.videoOutput) || contains(.videoOutputMultiplanar) { return "a video output device" }
        return "another kind of node (VBI, radio, SDR or touch)"
    }
}

/// Who a V4L2 device is (VIDIOC_QUERYCAP).
public struct VideoDeviceIdentity: Hashable, Sendable {
    public var driver: String
    public var card: String
    public var busInfo: String
    public var capabilities: VideoDeviceCapabilities

    public init(driver: String, card: String, busInfo: String, capabilities: VideoDeviceCapabilities) {
        self.driver = driver
        self.card = card
        self.busInfo = busInfo
        self.capabilities = capabilities
    }
}

/// An open V4L2 device node, through libv4l2. Owns the file descriptor, which goes with it
/// (closed with `v4l2_close`, as libv4l2 requires for what `v4l2_open` opened).
///
/// Sendable: the descriptor never changes after `init`, and the kernel (and libv4l2's own
/// per-device lock) serialise ioctls from several threads — a frame's release re-queues its
/// buffer from whichever thread drops it.
final class V4L2Device: Sendable {
    let path: String
    let fd: FileDescriptor

    init(path: String) throws(V4L2Failure) {
        self.path = path
        CV4L2_silenceLibraryMessages()
        do {
            let raw = try retryOnInterrupt { CV4L2_open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) }
            fd = FileDescriptor(adopting: raw, closingWith: { CV4L2_close($0) })
        } catch {
            throw V4L2Failure(call: .open, code: error.code)
        }
    }

    /// One ioctl through libv4l2, retried when a signal interrupts it.
    func control<Argument>(_ request: UInt, _ argument: inout Argument, _ call: V4L2Call) throws(V4L2Failure) {
        do {
            try retryOnInterrupt {
                withUnsafeMutableBytes(of: &argument) { CV4L2_ioctl(fd.rawValue, request, $0.baseAddress) }
            }
        } catch {
            throw V4L2Failure(call: call, code: error.code)
        }
    }

    func identity() throws(V4L2Failure) -> VideoDeviceIdentity {
        var caps = v4l2_capability()
        try control(CV4L2_VIDIOC_QUERYCAP, &caps, .queryCapabilities)
        let all = VideoDeviceCapabilities(rawValue: caps.capabilities)
        let node = all.contains(.deviceCaps) ? VideoDeviceCapabilities(rawValue: caps.device_caps) : all
        return VideoDeviceIdentity(
            driver: string(fromCharacters: caps.driver), card: string(fromCharacters: caps.card),
            busInfo: string(fromCharacters: caps.bus_info), capabilities: node)
    }

    static let captureType = V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
    /// Enumerations stop here even if a driver never ends its list.
    static let enumerationLimit: UInt32 = 1000

    /// The pixel formats of single-planar capture, with sizes and rates for those Vigil can
    /// use (`detailsFor` decides which), in the driver's order.
    func formats(
        detailsFor wanted: (CameraFormatDescription) -> Bool = { $0.isUsable }
    ) throws(V4L2Failure) -> [CameraFormatDescription] {
        var result: [CameraFormatDescription] = []
        for index in 0..<V4L2Device.enumerationLimit {
            var desc = v4l2_fmtdesc()
            desc.index = index
            desc.type = V4L2Device.captureType
            do { try control(CV4L2_VIDIOC_ENUM_FMT, &desc, .enumerateFormats) } catch {
                if error.code == EINVAL { break }  // the end of the list
                throw error
            }
            var format = CameraFormatDescription(
                fourcc: FourCC(littleEndian: desc.pixelformat), name: string(fromCharacters: desc.description),
                isEmulated: desc.flags & UInt32(V4L2_FMT_FLAG_EMULATED) != 0,
                isCompressed: desc.flags & UInt32(V4L2_FMT_FLAG_COMPRESSED) != 0, sizes: [])
            if wanted(format) { format.sizes = try sizes(of: format.fourcc) }
            result.append(format)
        }
        return result
    }

    /// The sizes of one format, each with its rates; empty when the driver does not list them.
    func sizes(of fourcc: FourCC) throws(V4L2Failure) -> [FrameSizeDescription] {
        var result: [FrameSizeDescription] = []
        for index in 0..<V4L2Device.enumerationLimit {
            var size = v4l2_frmsizeenum()
            size.index = index
            size.pixel_format = fourcc.littleEndianValue
            do { try control(CV4L2_VIDIOC_ENUM_FRAMESIZES, &size, .enumerateSizes) } catch {
                // EINVAL ends the list; ENOTTY: the driver does not list sizes.
                if error.code == EINVAL || error.code == ENOTTY { break }
                throw error
            }
            switch size.type {
            case V4L2_FRMSIZE_TYPE_DISCRETE.rawValue:
                let w = Int(size.discrete.width), h = Int(size.discrete.height)
                result.append(
                    FrameSizeDescription(
                        size: .discrete(width: w, height: h), intervals: try intervals(of: fourcc, width: w, height: h))
                )
            default:
                // Stepwise or continuous: one entry, the whole range (continuous has step 1).
                let s = size.stepwise
                let range = FrameSizeDescription.Size.stepwise(
                    minWidth: Int(s.min_width), maxWidth: Int(s.max_width), widthStep: max(1, Int(s.step_width)),
                    minHeight: Int(s.min_height), maxHeight: Int(s.max_height), heightStep: max(1, Int(s.step_height)))
                result.append(
                    FrameSizeDescription(
                        size: range,
                        intervals: try intervals(of: fourcc, width: Int(s.max_width), height: Int(s.max_height))))
                return result
            }
        }
        return result
    }

    /// The frame intervals of one format at one size.
    func intervals(of fourcc: FourCC, width: Int, height: Int) throws(V4L2Failure) -> FrameIntervals {
        var list: [Rational] = []
        for index in 0..<V4L2Device.enumerationLimit {
            var interval = v4l2_frmivalenum()
            interval.index = index
            interval.pixel_format = fourcc.littleEndianValue
            interval.width = UInt32(clamping: width)
            interval.height = UInt32(clamping: height)
            do { try control(CV4L2_VIDIOC_ENUM_FRAMEINTERVALS, &interval, .enumerateIntervals) } catch {
                if error.code == EINVAL || error.code == ENOTTY { break }
                throw error
            }
            switch interval.type {
            case V4L2_FRMIVAL_TYPE_DISCRETE.rawValue:
                let d = interval.discrete
                if d.numerator > 0 && d.denominator > 0 {
                    list.append(Rational(Int64(d.numerator), Int64(d.denominator)))
                }
            default:
                let s = interval.stepwise
                guard s.min.numerator > 0, s.min.denominator > 0, s.max.numerator > 0, s.max.denominator > 0 else {
                    return .unknown
                }
                let step =
                    s.step.numerator > 0 && s.step.denominator > 0
                    ? Rational(Int64(s.step.numerator), Int64(s.step.denominator)) : Rational(0, 1)
                return .stepwise(
                    shortest: Rational(Int64(s.min.numerator), Int64(s.min.denominator)),
                    longest: Rational(Int64(s.max.numerator), Int64(s.max.denominator)),
                    step: interval.type == V4L2_FRMIVAL_TYPE_CONTINUOUS.rawValue ? Rational(0, 1) : step)
            }
        }
        return list.isEmpty ? .unknown : .discrete(list)
    }
}
