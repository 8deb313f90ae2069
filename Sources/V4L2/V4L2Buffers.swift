internal import CV4L2
internal import Glibc
import Media

/// One of a device's two buffer queues, on the single- or the multi-planar API.
///
/// A camera fills buffers on its CAPTURE queue; an encoder takes raw frames on its OUTPUT queue
/// and fills coded buffers on its CAPTURE queue.
public struct V4L2Queue: Hashable, Sendable {
    public enum Direction: Hashable, Sendable {
        /// The device writes these buffers (a camera's frames, an encoder's coded data).
        case capture
        /// The program writes these buffers (an encoder's raw frames).
        case output
    }
    public var direction: Direction
    public var multiplanar: Bool

    public init(_ direction: Direction, multiplanar: Bool = false) {
        self.direction = direction
        self.multiplanar = multiplanar
    }

    /// A camera's queue (single-planar capture).
    public static let capture = V4L2Queue(.capture)

    /// The `v4l2_buf_type` of the queue.
    package var bufferType: UInt32 {
        switch (direction, multiplanar) {
        case (.capture, false): V4L2_BUF_TYPE_VIDEO_CAPTURE.rawValue
        case (.capture, true): V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE.rawValue
        case (.output, false): V4L2_BUF_TYPE_VIDEO_OUTPUT.rawValue
        case (.output, true): V4L2_BUF_TYPE_VIDEO_OUTPUT_MPLANE.rawValue
        }
    }
}

/// What a buffer's flags say (`V4L2_BUF_FLAG_*`).
public struct V4L2BufferFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let keyframe = V4L2BufferFlags(rawValue: CV4L2_BUF_FLAG_KEYFRAME)
    /// The driver saw the data go bad (a transfer error): skip it.
    public static let error = V4L2BufferFlags(rawValue: CV4L2_BUF_FLAG_ERROR)
    /// The last buffer of a drain.
    public static let last = V4L2BufferFlags(rawValue: CV4L2_BUF_FLAG_LAST)
}

/// A buffer taken back from the driver (VIDIOC_DQBUF).
public struct V4L2DequeuedBuffer: Hashable, Sendable {
    public var index: Int
    /// The bytes of data in it (after the plane's data offset, for a multi-planar buffer).
    public var bytesUsed: Int
    public var flags: V4L2BufferFlags
    /// Its timestamp, as the driver gives it (seconds and microseconds).
    public var seconds: Int64
    public var microseconds: Int64
    /// The driver's frame counter.
    public var sequence: UInt32
}

/// The memory-mapped buffers of one queue of a device: the one place that requests, maps,
/// queues, dequeues and unmaps V4L2 buffers, for cameras and the hardware encoder alike
/// (single- and multi-planar, one plane per buffer). The buffers are unmapped in `deinit`,
/// which runs after the last user lets go; it holds the device, so the descriptor closes after.
///
/// Sendable: the device and the mappings never change after `init`; queueing and dequeueing
/// are ioctls, which the kernel serialises (a camera's frame re-queues its buffer from
/// whichever thread drops it).
public final class V4L2Buffers: Sendable {
    /// One mapped buffer.
    public struct Mapping: Hashable, Sendable {
        /// Where it is mapped (an address, so that the value is Sendable).
        public let address: UInt
        public let length: Int

        public var base: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(bitPattern: address) }
    }

    public let device: V4L2Device
    public let queue: V4L2Queue
    public let mappings: [Mapping]

    /// VIDIOC_REQBUFS `count` (the driver may grant another number), then VIDIOC_QUERYBUF and
    /// mmap each; what was mapped is unmapped again when one fails.
    public init(device: V4L2Device, queue: V4L2Queue, count: Int) throws(V4L2Error) {
        self.device = device
        self.queue = queue
        var request = v4l2_requestbuffers()
        request.count = UInt32(clamping: count)
        request.type = queue.bufferType
        request.memory = V4L2_MEMORY_MMAP.rawValue
        try device.control(CV4L2_VIDIOC_REQBUFS, &request, .requestBuffers)
        var mapped: [Mapping] = []
        for index in 0..<request.count {
            do {
                let (length, offset) = try V4L2Buffers.query(device, queue, index: index)
                let address = try device.map(length: length, offset: offset)
                mapped.append(Mapping(address: UInt(bitPattern: address), length: length))
            } catch {
                V4L2Buffers.unmap(mapped, device)
                throw error
            }
        }
        mappings = mapped
    }

    deinit {
        V4L2Buffers.unmap(mappings, device)
    }

    public var count: Int { mappings.count }

    /// Hands buffer `index` to the driver: an empty one to fill (capture), or one holding
    /// `bytesUsed` bytes stamped with `microseconds` (output).
    public func queue(_ index: Int, bytesUsed: Int = 0, microseconds: Int64 = 0) throws(V4L2Error) {
        var plane = v4l2_plane()
        var buffer = v4l2_buffer()
        buffer.index = UInt32(index)
        buffer.type = queue.bufferType
        buffer.memory = V4L2_MEMORY_MMAP.rawValue
        buffer.timestamp = timeval(tv_sec: .init(microseconds / 1_000_000), tv_usec: .init(microseconds % 1_000_000))
        let length = UInt32(clamping: mappings[index].length)
        if queue.multiplanar {
            plane.bytesused = UInt32(clamping: bytesUsed)
            plane.length = length
        } else {
            buffer.bytesused = UInt32(clamping: bytesUsed)
            buffer.length = length
        }
        try withPlane(&buffer, &plane) { (buffer: inout v4l2_buffer) throws(V4L2Error) in
            try device.control(CV4L2_VIDIOC_QBUF, &buffer, .queueBuffer)
        }
    }

    /// Takes a buffer the driver is done with; nil when none is ready (EAGAIN).
    public func dequeue() throws(V4L2Error) -> V4L2DequeuedBuffer? {
        var plane = v4l2_plane()
        var buffer = v4l2_buffer()
        buffer.type = queue.bufferType
        buffer.memory = V4L2_MEMORY_MMAP.rawValue
        do {
            try withPlane(&buffer, &plane) { (buffer: inout v4l2_buffer) throws(V4L2Error) in
                try device.control(CV4L2_VIDIOC_DQBUF, &buffer, .dequeueBuffer)
            }
        } catch {
            if error.code == EAGAIN { return nil }
            throw error
        }
        let used =
            queue.multiplanar ? Int(plane.bytesused) - Int(plane.data_offset) : Int(buffer.bytesused)
        return V4L2DequeuedBuffer(
            index: Int(buffer.index), bytesUsed: max(0, used), flags: V4L2BufferFlags(rawValue: buffer.flags),
            seconds: Int64(buffer.timestamp.tv_sec), microseconds: Int64(buffer.timestamp.tv_usec),
            sequence: buffer.sequence)
    }

    /// VIDIOC_STREAMON on the queue.
    public func streamOn() throws(V4L2Error) {
        var type = Int32(queue.bufferType)
        try device.control(CV4L2_VIDIOC_STREAMON, &type, .streamOn)
    }

    /// VIDIOC_STREAMOFF on the queue: the driver gives every buffer back.
    public func streamOff() throws(V4L2Error) {
        var type = Int32(queue.bufferType)
        try device.control(CV4L2_VIDIOC_STREAMOFF, &type, .streamOff)
    }

    /// Runs `body` on `buffer` with `plane` as its one plane when the queue is multi-planar.
    private func withPlane(
        _ buffer: inout v4l2_buffer, _ plane: inout v4l2_plane,
        _ body: (inout v4l2_buffer) throws(V4L2Error) -> Void
    ) throws(V4L2Error) {
        try V4L2Buffers.withPlane(queue, &buffer, &plane, body)
    }

    private static func withPlane(
        _ queue: V4L2Queue, _ buffer: inout v4l2_buffer, _ plane: inout v4l2_plane,
        _ body: (inout v4l2_buffer) throws(V4L2Error) -> Void
    ) throws(V4L2Error) {
        guard queue.multiplanar else { return try body(&buffer) }
        try withUnsafeMutablePointer(to: &plane) { (pointer: UnsafeMutablePointer<v4l2_plane>) throws(V4L2Error) in
            buffer.m.planes = pointer
            buffer.length = 1
            try body(&buffer)
        }
    }

    /// Where buffer `index` lies: its length and its offset for mmap.
    private static func query(
        _ device: V4L2Device, _ queue: V4L2Queue, index: UInt32
    ) throws(V4L2Error) -> (length: Int, offset: Int64) {
        var plane = v4l2_plane()
        var buffer = v4l2_buffer()
        buffer.index = index
        buffer.type = queue.bufferType
        buffer.memory = V4L2_MEMORY_MMAP.rawValue
        try withPlane(queue, &buffer, &plane) { (buffer: inout v4l2_buffer) throws(V4L2Error) in
            try device.control(CV4L2_VIDIOC_QUERYBUF, &buffer, .queryBuffer)
        }
        return queue.multiplanar
            ? (Int(plane.length), Int64(plane.m.mem_offset)) : (Int(buffer.length), Int64(buffer.m.offset))
    }

    private static func unmap(_ mappings: [Mapping], _ device: V4L2Device) {
        for m in mappings {
            guard let base = m.base else { continue }
            device.unmap(base, length: m.length)
        }
    }
}
