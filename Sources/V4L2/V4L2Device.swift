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
    /// A codec or converter on the multi-planar API (V4L2_CAP_VIDEO_M2M_MPLANE).
    public static let memoryToMemoryMultiplanar = VideoDeviceCapabilities(rawValue: 0x0000_4000)
    /// A codec or converter on the single-planar API (V4L2_CAP_VIDEO_M2M).
    public static let memoryToMemory = VideoDeviceCapabilities(rawValue: 0x0000_8000)
    public static let metadataCapture = VideoDeviceCapabilities(rawValue: 0x0080_0000)
    public static let readWrite = VideoDeviceCapabilities(rawValue: 0x0100_0000)
    public static let streaming = VideoDeviceCapabilities(rawValue: 0x0400_0000)
    /// The device reports per-node capabilities in `device_caps`.
    static let deviceCaps = VideoDeviceCapabilities(rawValue: 0x8000_0000)

    /// A node Vigil can record from: single-planar capture with streaming I/O.
    public var isCamera: Bool {
        contains(.videoCapture) && contains(.streaming) && !isMemoryToMemory
    }

    /// A codec or converter: raw frames in on one queue, something else out on the other.
    public var isMemoryToMemory: Bool { !isDisjoint(with: [.memoryToMemory, .memoryToMemoryMultiplanar]) }

    /// For a memory-to-memory device, whether it uses the multi-planar API; nil for any other.
    public var memoryToMemoryIsMultiplanar: Bool? {
        contains(.memoryToMemoryMultiplanar) ? true : contains(.memoryToMemory) ? false : nil
    }

    /// What the node is, for messages about nodes that are not cameras.
    public var kind: String {
        if isMemoryToMemory { return "a memory-to-memory device (a codec or converter)" }
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

/// An open V4L2 device node: a camera through libv4l2 (whose format conversions turn MJPEG and
/// others into frames Vigil can record), an encoder straight through the kernel's ioctl(2).
/// Owns the file descriptor, which goes with it (a camera's closed with `v4l2_close`, as
/// libv4l2 requires for what `v4l2_open` opened). Every call goes through `control`, which
/// retries an interrupted call and names what failed (`V4L2Error`).
///
/// Sendable: the descriptor never changes after `init`, and the kernel (and libv4l2's own
/// per-device lock) serialise ioctls from several threads — a frame's release re-queues its
/// buffer from whichever thread drops it.
public final class V4L2Device: Sendable {
    public let path: String
    public let role: V4L2Role
    let fd: FileDescriptor

    /// Opens `path` for reading and writing, without blocking: through libv4l2 for a camera,
    /// straight for an encoder.
    public init(path: String, role: V4L2Role = .camera) throws(V4L2Error) {
        self.path = path
        self.role = role
        do {
            switch role {
            case .camera:
                CV4L2_silenceLibraryMessages()
                let raw = try retryOnInterrupt { CV4L2_open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) }
                fd = FileDescriptor(adopting: raw, closingWith: { CV4L2_close($0) })
            case .encoder:
                fd = FileDescriptor(adopting: try retryOnInterrupt { open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC) })
            }
        } catch {
            throw V4L2Error(device: path, call: .open, code: error.code, role: role)
        }
    }

    /// One ioctl, retried when a signal interrupts it.
    public func control<Argument>(_ request: UInt, _ argument: inout Argument, _ call: V4L2Call) throws(V4L2Error) {
        let library = role == .camera
        do {
            try retryOnInterrupt {
                withUnsafeMutableBytes(of: &argument) {
                    library
                        ? CV4L2_ioctl(fd.rawValue, request, $0.baseAddress)
                        : CV4L2_rawIoctl(fd.rawValue, request, $0.baseAddress)
                }
            }
        } catch {
            throw failure(call, error.code)
        }
    }

    /// The error for `call` failing with `code` on this device.
    public func failure(_ call: V4L2Call, _ code: Int32) -> V4L2Error {
        V4L2Error(device: path, call: call, code: code, role: role)
    }

    /// Maps `length` bytes of the buffer at `offset` (through libv4l2 for a camera).
    func map(length: Int, offset: Int64) throws(V4L2Error) -> UnsafeMutableRawPointer {
        let mapped =
            role == .camera
            ? CV4L2_mmap(length, fd.rawValue, offset) : CV4L2_rawMmap(length, fd.rawValue, offset)
        guard let mapped else { throw failure(.mapBuffer, errno) }
        return mapped
    }

    /// Undoes `map`.
    func unmap(_ address: UnsafeMutableRawPointer, length: Int) {
        // munmap fails only for an address that is not mapped; there is nothing else to undo.
        if role == .camera { _ = CV4L2_munmap(address, length) } else { _ = munmap(address, length) }
    }

    /// Waits at most `milliseconds` for one of `events` (retried when a signal interrupts it);
    /// returns what happened, empty when the time ran out.
    public func poll(_ events: PollEvents, milliseconds: Int32) throws(V4L2Error) -> PollEvents {
        var entry = pollfd(fd: fd.rawValue, events: events.rawValue, revents: 0)
        let ready: Int32
        do { ready = try retryOnInterrupt { Glibc.poll(&entry, 1, milliseconds) } } catch {
            throw failure(.poll, error.code)
        }
        return ready > 0 ? PollEvents(rawValue: entry.revents) : []
    }

    public func identity() throws(V4L2Error) -> VideoDeviceIdentity {
        var caps = v4l2_capability()
        try control(CV4L2_VIDIOC_QUERYCAP, &caps, .queryCapabilities)
        let all = VideoDeviceCapabilities(rawValue: caps.capabilities)
        let node = all.contains(.deviceCaps) ? VideoDeviceCapabilities(rawValue: caps.device_caps) : all
        return VideoDeviceIdentity(
            driver: string(fromCharacters: caps.driver), card: string(fromCharacters: caps.card),
            busInfo: string(fromCharacters: caps.bus_info), capabilities: node)
    }

    /// Enumerations stop here even if a driver never ends its list.
    public static let enumerationLimit: UInt32 = 1000

    /// Asks the driver for the entries of a list (VIDIOC_ENUM_FMT, VIDIOC_ENUM_FRAMESIZES,
    /// VIDIOC_ENUM_FRAMEINTERVALS) one index at a time: `entry` makes the argument for an index,
    /// `request` fills it in, `body` takes it and says whether to go on. The list ends where the
    /// driver answers EINVAL, or ENOTTY when `unlistedIsEmpty` (a driver that does not list
    /// these), where `body` returns false, or at `enumerationLimit`; other errors are thrown.
    public func enumerate<Entry>(
        _ request: UInt, _ call: V4L2Call, unlistedIsEmpty: Bool = false, entry: (UInt32) -> Entry,
        _ body: (Entry) throws(V4L2Error) -> Bool
    ) throws(V4L2Error) {
        for index in 0..<V4L2Device.enumerationLimit {
            var argument = entry(index)
            do { try control(request, &argument, call) } catch {
                if error.code == EINVAL || (unlistedIsEmpty && error.code == ENOTTY) { return }
                throw error
            }
            guard try body(argument) else { return }
        }
    }

    /// The pixel formats `queue` offers, in the driver's order.
    public func formats(of queue: V4L2Queue) throws(V4L2Error) -> [V4L2FormatDescription] {
        var result: [V4L2FormatDescription] = []
        try enumerate(
            CV4L2_VIDIOC_ENUM_FMT, .enumerateFormats,
            entry: { index in
                var desc = v4l2_fmtdesc()
                desc.index = index
                desc.type = queue.bufferType
                return desc
            }
        ) { desc in
            result.append(
                V4L2FormatDescription(
                    fourcc: FourCC(littleEndian: desc.pixelformat), name: string(fromCharacters: desc.description),
                    isEmulated: desc.flags & UInt32(V4L2_FMT_FLAG_EMULATED) != 0,
                    isCompressed: desc.flags & UInt32(V4L2_FMT_FLAG_COMPRESSED) != 0))
            return true
        }
        return result
    }
}

/// One pixel format a queue offers (VIDIOC_ENUM_FMT).
public struct V4L2FormatDescription: Hashable, Sendable {
    public var fourcc: FourCC
    public var name: String
    /// libv4l2 converts to it from what the camera sends.
    public var isEmulated: Bool
    public var isCompressed: Bool
}

/// What `poll` waits for and what it found on a device.
public struct PollEvents: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }

    public static let readable = PollEvents(rawValue: Int16(POLLIN))
    public static let writable = PollEvents(rawValue: Int16(POLLOUT))
    /// An event (a source change, the end of a drain).
    public static let priority = PollEvents(rawValue: Int16(POLLPRI))
    public static let error = PollEvents(rawValue: Int16(POLLERR))
    public static let hangUp = PollEvents(rawValue: Int16(POLLHUP))
    public static let invalid = PollEvents(rawValue: Int16(POLLNVAL))

    /// "POLLERR|POLLHUP": the failure flags it holds.
    public var description: String {
        [(PollEvents.error, "POLLERR"), (.hangUp, "POLLHUP"), (.invalid, "POLLNVAL")]
            .filter { contains($0.0) }.map(\.1).joined(separator: "|")
    }
}
