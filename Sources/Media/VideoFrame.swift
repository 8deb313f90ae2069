/// One raw frame from a source: its bytes, where its planes lie, and when it was captured.
///
/// The bytes are shared, not copied, when a frame is copied; they stay valid as long as any
/// copy of the frame exists, and go back to their pool (or camera) after the last one.
public struct VideoFrame: Sendable {
    /// Size, pixel format and plane layout of this frame.
    public let format: VideoFormat
    /// Capture time on the monotonic clock (or computed from the frame index and rate).
    public let timestamp: Timestamp
    /// Counts every frame the source produced or should have produced, starting at 0; a
    /// jump of more than one means frames were lost before they reached us.
    public let sequence: UInt64
    public let buffer: FrameBuffer

    public init(format: VideoFormat, buffer: FrameBuffer, timestamp: Timestamp, sequence: UInt64) {
        precondition(
            buffer.count >= format.bufferSize,
            "a frame buffer of \(buffer.count) bytes cannot hold \(format) (\(format.bufferSize) bytes)")
        self.format = format
        self.buffer = buffer
        self.timestamp = timestamp
        self.sequence = sequence
    }

    /// Plane `index` (0 is Y, or the packed YUYV plane).
    public func plane(_ index: Int) -> PlaneView { buffer.plane(format.planes[index]) }

    /// The luma plane of a planar format. For YUYV this is the packed plane; use
    /// `PixelConversion` to get a luma plane from it.
    public var luma: PlaneView { plane(0) }
}

/// A writable view of one image plane: `height` rows of `width` bytes, `stride` bytes apart.
/// Valid only while the buffer it came from is.
public struct MutablePlaneView {
    public let base: UnsafeMutablePointer<UInt8>
    public let width: Int
    public let height: Int
    public let stride: Int

    public init(base: UnsafeMutablePointer<UInt8>, width: Int, height: Int, stride: Int) {
        precondition(width >= 0 && height >= 0 && stride >= width, "a plane's stride must be at least its width")
        self.base = base
        self.width = width
        self.height = height
        self.stride = stride
    }

    /// The same plane, read-only.
    public var readOnly: PlaneView {
        PlaneView(base: UnsafePointer(base), width: width, height: height, stride: stride)
    }

    /// The bytes of row `y` (exactly `width` of them).
    public func row(_ y: Int) -> UnsafeMutableBufferPointer<UInt8> {
        UnsafeMutableBufferPointer(start: base + y * stride, count: width)
    }

    /// Sets every byte of the picture (not the stride padding) to `value`.
    public func fill(_ value: UInt8) {
        for y in 0..<height { (base + y * stride).update(repeating: value, count: width) }
    }
}
