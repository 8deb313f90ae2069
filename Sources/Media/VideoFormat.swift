/// How the bytes of a raw picture are arranged.
///
/// All four are 8-bit YCbCr. Chroma planes of an odd-sized picture round up (a 5-pixel row
/// has 3 chroma samples), except YUYV, whose pixel pairs need an even width.
public enum PixelFormat: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// 4:2:0, a Y plane then one plane of interleaved U,V pairs (half width, half height).
    /// What most cameras and the Raspberry Pi ISP deliver; x264 takes it directly.
    case nv12
    /// 4:2:0, three planes Y, U, V; chroma planes half width, half height (`yuv420p`,
    /// V4L2 `YU12`, Y4M `C420*`). x264 takes it directly.
    case i420
    /// Packed 4:2:2, one plane of `Y0 U Y1 V` groups (two pixels in four bytes). What USB
    /// webcams send uncompressed. Converted to NV12 before encoding.
    case yuyv
    /// 4:2:2, three planes Y, U, V; chroma planes half width, full height (`yuv422p`,
    /// Y4M `C422`). Converted to I420 before encoding.
    case i422

    /// Number of planes in a frame of this format.
    public var planeCount: Int {
        switch self {
        case .nv12: 2
        case .i420, .i422: 3
        case .yuyv: 1
        }
    }

    /// Bytes of picture in one row of `plane`, and its number of rows, for a
    /// `width`×`height` picture (without any stride padding).
    public func planeExtent(_ plane: Int, width: Int, height: Int) -> (bytesPerRow: Int, rows: Int) {
        precondition(plane >= 0 && plane < planeCount, "\(self) has no plane \(plane)")
        let halfWidth = (width + 1) / 2
        let halfHeight = (height + 1) / 2
        switch (self, plane) {
        case (.yuyv, _): return (2 * width, height)
        case (_, 0): return (width, height)
        case (.nv12, _): return (2 * halfWidth, halfHeight)
        case (.i420, _): return (halfWidth, halfHeight)
        default: return (halfWidth, height)  // .i422 chroma
        }
    }

    /// Whether x264 accepts frames of this format without a conversion.
    public var isEncoderNative: Bool { self == .nv12 || self == .i420 }

    public var description: String {
        switch self {
        case .nv12: "NV12"
        case .i420: "I420"
        case .yuyv: "YUYV"
        case .i422: "I422"
        }
    }
}

/// Where one plane lies in a frame's buffer.
public struct PlaneLayout: Hashable, Sendable {
    /// Bytes from the start of the frame buffer to the first byte of the plane.
    public let offset: Int
    /// Bytes from the start of one row to the start of the next (a camera's
    /// `bytesperline`); at least `bytesPerRow`.
    public let stride: Int
    /// Bytes of picture in one row.
    public let bytesPerRow: Int
    /// Number of rows.
    public let rows: Int

    public init(offset: Int, stride: Int, bytesPerRow: Int, rows: Int) {
        self.offset = offset
        self.stride = stride
        self.bytesPerRow = bytesPerRow
        self.rows = rows
    }

    /// One past the last byte of the plane, relative to the frame buffer.
    public var end: Int { rows == 0 ? offset : offset + stride * (rows - 1) + bytesPerRow }
}

/// Order of the fields of an interlaced source (Y4M `I` tag, V4L2 `field`).
public enum FieldOrder: String, Hashable, Sendable {
    case progressive
    case topFieldFirst
    case bottomFieldFirst
    /// Varies from frame to frame.
    case mixed
}

/// Why a picture layout was refused.
public struct VideoFormatError: Error, Hashable, Sendable, CustomStringConvertible {
    public let problem: String
    public init(_ problem: String) { self.problem = problem }
    public var description: String { "invalid picture layout: \(problem)" }
}

/// The negotiated format of a frame source: picture size, pixel format, where each plane
/// lies in the frame buffer (strides may be wider than the picture), and the nominal rate
/// and pixel shape. Frame timestamps, not `frameRate`, say when each frame was captured.
public struct VideoFormat: Hashable, Sendable, CustomStringConvertible {
    /// Picture width and height in pixels.
    public let width: Int
    public let height: Int
    public let pixelFormat: PixelFormat
    /// One entry per plane of `pixelFormat`, in order (Y first).
    public let planes: [PlaneLayout]
    /// Bytes a frame buffer needs to hold every plane.
    public let bufferSize: Int
    /// Nominal frames per second, when the source states one. Timestamps are authoritative.
    public var frameRate: Rational?
    /// Width : height of one pixel, when the source states it (nil: unknown, taken as square).
    public var pixelAspectRatio: Rational?
    public var fieldOrder: FieldOrder

    /// Largest accepted width or height, for every source (a Y4M header, a camera's negotiated
    /// size, the synthetic scene), checked before any frame buffer is allocated. A frame of
    /// 8192×8192 takes 96 MiB in 4:2:0 (`largestFrameBytes`; 128 MiB in 4:2:2 or YUYV), and
    /// the agent holds several at once (the capture queue, the frame pools, the encoder's own
    /// pictures); at 16384×16384, which a Y4M header may claim, a frame is four times that, and
    /// the agent reached 4.8 GB (issue 13). Larger than any camera Vigil supports
    /// (`camera.width` and `camera.height` go to 4096). `MovieWriter` has its own, larger
    /// limit, from the movie format.
    public static let maximumDimension = 8192
    /// Bytes of a 4:2:0 frame of `maximumDimension`×`maximumDimension`, for messages.
    public static let largestFrameBytes = maximumDimension * maximumDimension * 3 / 2
    /// Largest accepted stride in bytes.
    public static let maximumStride = 1 << 16

    /// A tightly packed layout: planes one after another, each row exactly as wide as the picture.
    public init(
        width: Int, height: Int, pixelFormat: PixelFormat, frameRate: Rational? = nil,
        pixelAspectRatio: Rational? = nil, fieldOrder: FieldOrder = .progressive
    ) throws(VideoFormatError) {
        try VideoFormat.checkSize(width: width, height: height, pixelFormat: pixelFormat)
        var planes: [PlaneLayout] = []
        var offset = 0
        for p in 0..<pixelFormat.planeCount {
            let e = pixelFormat.planeExtent(p, width: width, height: height)
            planes.append(PlaneLayout(offset: offset, stride: e.bytesPerRow, bytesPerRow: e.bytesPerRow, rows: e.rows))
            offset += e.bytesPerRow * e.rows
        }
        try self.init(
            width: width, height: height, pixelFormat: pixelFormat, planes: planes,
            frameRate: frameRate, pixelAspectRatio: pixelAspectRatio, fieldOrder: fieldOrder)
    }

    /// The layout of a single-planar V4L2 buffer whose first plane's rows are `bytesPerLine`
    /// apart: planes follow one another; NV12's chroma rows are `bytesPerLine` apart too,
    /// I420 and I422 chroma rows `bytesPerLine / 2` apart (as the V4L2 specification has it).
    public init(
        width: Int, height: Int, pixelFormat: PixelFormat, bytesPerLine: Int, frameRate: Rational? = nil,
        pixelAspectRatio: Rational? = nil, fieldOrder: FieldOrder = .progressive
    ) throws(VideoFormatError) {
        try VideoFormat.checkSize(width: width, height: height, pixelFormat: pixelFormat)
        guard bytesPerLine > 0, bytesPerLine <= VideoFormat.maximumStride else {
            throw VideoFormatError("a stride of \(bytesPerLine) bytes (1 to \(VideoFormat.maximumStride))")
        }
        var planes: [PlaneLayout] = []
        var offset = 0
        for p in 0..<pixelFormat.planeCount {
            let e = pixelFormat.planeExtent(p, width: width, height: height)
            let stride: Int
            switch pixelFormat {
            case .nv12, .yuyv: stride = bytesPerLine
            case .i420, .i422: stride = p == 0 ? bytesPerLine : bytesPerLine / 2
            }
            planes.append(PlaneLayout(offset: offset, stride: stride, bytesPerRow: e.bytesPerRow, rows: e.rows))
            offset += stride * e.rows
        }
        try self.init(
            width: width, height: height, pixelFormat: pixelFormat, planes: planes,
            frameRate: frameRate, pixelAspectRatio: pixelAspectRatio, fieldOrder: fieldOrder)
    }

    /// An explicit layout. Each plane must have the rows and row width that `pixelFormat`
    /// gives for this size, a stride at least its row width, and a non-negative offset.
    public init(
        width: Int, height: Int, pixelFormat: PixelFormat, planes: [PlaneLayout], frameRate: Rational? = nil,
        pixelAspectRatio: Rational? = nil, fieldOrder: FieldOrder = .progressive
    ) throws(VideoFormatError) {
        try VideoFormat.checkSize(width: width, height: height, pixelFormat: pixelFormat)
        guard planes.count == pixelFormat.planeCount else {
            throw VideoFormatError(
                "\(pixelFormat) has \(pixelFormat.planeCount) planes, \(planes.count) were described")
        }
        var size = 0
        for (p, plane) in planes.enumerated() {
            let e = pixelFormat.planeExtent(p, width: width, height: height)
            guard plane.bytesPerRow == e.bytesPerRow, plane.rows == e.rows else {
                throw VideoFormatError(
                    "plane \(p) of \(pixelFormat) \(width)×\(height) is \(e.bytesPerRow) bytes × \(e.rows) rows, not \(plane.bytesPerRow) × \(plane.rows)"
                )
            }
            guard plane.stride >= plane.bytesPerRow, plane.stride <= VideoFormat.maximumStride else {
                throw VideoFormatError(
                    "plane \(p) has a stride of \(plane.stride) bytes; it must be from \(plane.bytesPerRow) (the row width) to \(VideoFormat.maximumStride)"
                )
            }
            guard plane.offset >= 0, plane.offset <= Int(Int32.max) else {
                throw VideoFormatError("plane \(p) starts at offset \(plane.offset)")
            }
            size = max(size, plane.end)
        }
        if let r = frameRate, r.numerator <= 0 || r.denominator <= 0 {
            throw VideoFormatError("a frame rate of \(r) (it must be positive)")
        }
        if let a = pixelAspectRatio, a.numerator <= 0 || a.denominator <= 0 {
            throw VideoFormatError("a pixel aspect ratio of \(a) (it must be positive)")
        }
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.planes = planes
        self.bufferSize = size
        self.frameRate = frameRate
        self.pixelAspectRatio = pixelAspectRatio
        self.fieldOrder = fieldOrder
    }

    private static func checkSize(width: Int, height: Int, pixelFormat: PixelFormat) throws(VideoFormatError) {
        guard width >= 1, height >= 1 else {
            throw VideoFormatError("a picture of \(width)×\(height) pixels (each side 1 to \(maximumDimension))")
        }
        guard width <= maximumDimension, height <= maximumDimension else {
            throw VideoFormatError(
                "a picture of \(width)×\(height) pixels is over the limit of \(maximumDimension) pixels a side (a frame of \(maximumDimension)×\(maximumDimension) already takes \(largestFrameBytes >> 20) MiB)"
            )
        }
        if pixelFormat == .yuyv && width % 2 != 0 {
            throw VideoFormatError("YUYV needs an even width (pixels come in pairs), got \(width)")
        }
    }

    /// True when every plane's rows are exactly as wide as the picture and planes follow
    /// one another without gaps.
    public var isTightlyPacked: Bool {
        var offset = 0
        for p in planes {
            if p.offset != offset || p.stride != p.bytesPerRow { return false }
            offset += p.bytesPerRow * p.rows
        }
        return true
    }

    public var description: String {
        var text = "\(pixelFormat) \(width)×\(height)"
        if !isTightlyPacked { text += " strides " + planes.map { String($0.stride) }.joined(separator: "/") }
        if let r = frameRate { text += " @ \(r) fps" }
        if let a = pixelAspectRatio, a != Rational(1, 1) { text += " pixel aspect \(a.numerator):\(a.denominator)" }
        if fieldOrder != .progressive { text += " \(fieldOrder.rawValue)" }
        return text
    }
}
