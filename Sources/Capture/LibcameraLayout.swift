import Media

/// How a libcamera stream's buffers become frames: straight from the mapped buffer when its
/// planes lie in one dmabuf in a layout Vigil records, else copied (and converted) into a
/// buffer of Vigil's own.
public enum LibcameraLayout {
    /// One plane of one buffer, as the camera describes it.
    public struct Plane: Hashable, Sendable {
        public var descriptor: Int32
        public var offset: Int
        public var length: Int
    }

    /// The packed RGB layouts libcamera names, with the byte order in memory (libcamera's names
    /// are DRM's: RGB888 is B, G, R in memory).
    public enum PackedRGB: Hashable, Sendable {
        case bgr24, rgb24, bgrx32, rgbx32

        public var bytesPerPixel: Int { self == .bgr24 || self == .rgb24 ? 3 : 4 }
        /// Byte offsets of red, green and blue in a pixel.
        var order: (red: Int, green: Int, blue: Int) {
            switch self {
            case .bgr24, .bgrx32: (2, 1, 0)
            case .rgb24, .rgbx32: (0, 1, 2)
            }
        }

        init?(libcameraName name: String) {
            switch name {
            case "RGB888": self = .bgr24
            case "BGR888": self = .rgb24
            case "XRGB8888", "ARGB8888": self = .bgrx32
            case "XBGR8888", "ABGR8888": self = .rgbx32
            default: return nil
            }
        }
    }

    /// What the camera's format is, for Vigil.
    public enum Source: Hashable, Sendable {
        case yuv(PixelFormat)
        case rgb(PackedRGB)

        /// From libcamera's name of a pixel format ("NV12", "YUV420", "RGB888"); nil when
        /// Vigil takes neither it nor a conversion of it.
        public init?(libcameraName name: String) {
            switch name {
            case "NV12": self = .yuv(.nv12)
            case "YUV420": self = .yuv(.i420)
            default:
                guard let rgb = PackedRGB(libcameraName: name) else { return nil }
                self = .rgb(rgb)
            }
        }
    }

    /// How frames are made.
    public enum Plan: Hashable, Sendable {
        /// Every buffer holds all its planes in one dmabuf, the same way: a frame is the mapped
        /// buffer itself, laid out as `format` from the start of the mapping.
        case direct(format: VideoFormat, mappingLength: Int)
        /// A copy into a buffer laid out as `format` (tightly packed): the planes lie in
        /// separate dmabufs or differ from buffer to buffer, or the camera sends RGB.
        case copy(source: Source, format: VideoFormat, reason: String)
    }

    /// The plan for `buffers` (each a list of planes) of a `width`×`height` stream in `source`,
    /// the first plane's rows `stride` bytes apart; throws `VideoFormatError` when the layout
    /// cannot hold the picture.
    public static func plan(
        source: Source, width: Int, height: Int, stride: Int, buffers: [[Plane]], frameRate: Rational?
    ) throws(VideoFormatError) -> Plan {
        guard let first = buffers.first, !first.isEmpty else {
            throw VideoFormatError("the camera granted no buffers")
        }
        let pixel: PixelFormat
        switch source {
        case .rgb:
            let packed = try VideoFormat(width: width, height: height, pixelFormat: .i420, frameRate: frameRate)
            return .copy(source: source, format: packed, reason: "the camera sends RGB, converted to I420")
        case .yuv(let format): pixel = format
        }
        let tight = try VideoFormat(width: width, height: height, pixelFormat: pixel, frameRate: frameRate)
        let sameLayout = buffers.allSatisfy { $0.map(\.offset) == first.map(\.offset) && $0.count == first.count }
        let oneDescriptor = buffers.allSatisfy { planes in planes.allSatisfy { $0.descriptor == planes[0].descriptor } }
        guard sameLayout, oneDescriptor else {
            return .copy(
                source: source, format: tight,
                reason: sameLayout ? "the planes lie in separate buffers" : "the buffers differ in layout")
        }
        let layouts: [PlaneLayout]
        if first.count == pixel.planeCount {
            layouts = first.enumerated().map { index, plane in
                let extent = pixel.planeExtent(index, width: width, height: height)
                let planeStride = index == 0 || pixel == .nv12 ? stride : stride / 2
                return PlaneLayout(
                    offset: plane.offset, stride: planeStride, bytesPerRow: extent.bytesPerRow, rows: extent.rows)
            }
        } else if first.count == 1 {
            // One plane described for the whole frame: the planes follow one another in it.
            let contiguous = try VideoFormat(width: width, height: height, pixelFormat: pixel, bytesPerLine: stride)
            layouts = contiguous.planes.map {
                PlaneLayout(
                    offset: $0.offset + first[0].offset, stride: $0.stride, bytesPerRow: $0.bytesPerRow, rows: $0.rows)
            }
        } else {
            throw VideoFormatError("\(pixel) has \(pixel.planeCount) planes, the camera described \(first.count)")
        }
        let format = try VideoFormat(
            width: width, height: height, pixelFormat: pixel, planes: layouts, frameRate: frameRate)
        let mappingLength = first.map { $0.offset + $0.length }.max() ?? 0
        if first.count > 1 {
            for (index, plane) in first.enumerated() where layouts[index].end > plane.offset + plane.length {
                throw VideoFormatError(
                    "plane \(index) needs \(layouts[index].end - plane.offset) bytes, the camera's buffer has \(plane.length)"
                )
            }
        }
        guard format.bufferSize <= mappingLength else {
            throw VideoFormatError(
                "a frame needs \(format.bufferSize) bytes, the camera's buffer has \(mappingLength)")
        }
        return .direct(format: format, mappingLength: mappingLength)
    }

    /// The capture time of a frame on the monotonic clock (the pipeline's clock, which sound
    /// uses too), from the sensor's timestamp (else the buffer's).
    ///
    /// libcamera documents SensorTimestamp as CLOCK_BOOTTIME, but pipelines pass on the
    /// kernel's buffer timestamp, which is CLOCK_MONOTONIC for V4L2 drivers: the two differ by
    /// the time the system spent suspended. A timestamp within `window` before `monotonicNow`
    /// is taken as it is; one within it before `boottimeNow` is moved onto the monotonic clock;
    /// anything else (zero, or a clock of its own) gives `monotonicNow`, the time the frame was
    /// dequeued.
    public static func captureTime(
        sensor: Int64?, buffer: Int64, monotonicNow: Timestamp, boottimeNow: Timestamp,
        window: Timestamp.Duration = .init(seconds: 2)
    ) -> Timestamp {
        let raw = sensor ?? buffer
        guard raw > 0 else { return monotonicNow }
        let stamp = Timestamp(nanoseconds: raw)
        func recent(_ now: Timestamp) -> Bool {
            let age = (now - stamp).nanoseconds
            return age >= -window.nanoseconds / 100 && age <= window.nanoseconds
        }
        if recent(monotonicNow) { return stamp }
        // On the boot-time clock: moved onto the monotonic one. (Two statements: Swift 6.0
        // cannot type `stamp - (a - b)`.)
        let bootOffset: Timestamp.Duration = boottimeNow - monotonicNow
        if recent(boottimeNow) { return stamp - bootOffset }
        return monotonicNow
    }

    /// Copies a frame whose planes are at `planes` (one base pointer per plane, rows `strides`
    /// apart) into `buffer`, laid out as `format` (4:2:0, tightly packed): YUV planes row by
    /// row; packed RGB converted to BT.601 limited-range I420 (chroma averaged over 2×2 pixels).
    static func copy(
        _ source: Source, planes: [UnsafePointer<UInt8>], strides: [Int], into buffer: FrameBuffer, format: VideoFormat
    ) {
        switch source {
        case .yuv(let pixel):
            for index in 0..<pixel.planeCount {
                let layout = format.planes[index]
                let from = PlaneView(
                    base: planes[index], width: layout.bytesPerRow, height: layout.rows, stride: strides[index])
                PixelConversion.copy(from, into: buffer.mutablePlane(layout))
            }
        case .rgb(let packed):
            convert(
                packed, base: planes[0], stride: strides[0], width: format.width, height: format.height,
                luma: buffer.mutablePlane(format.planes[0]), u: buffer.mutablePlane(format.planes[1]),
                v: buffer.mutablePlane(format.planes[2]))
        }
    }

    /// Packed RGB to I420 (BT.601, limited range: black is Y 16, white Y 235).
    static func convert(
        _ packed: PackedRGB, base: UnsafePointer<UInt8>, stride: Int, width: Int, height: Int,
        luma: MutablePlaneView, u: MutablePlaneView, v: MutablePlaneView
    ) {
        let size = packed.bytesPerPixel
        let (r, g, b) = packed.order
        for y in 0..<height {
            let row = base + y * stride
            let out = luma.base + y * luma.stride
            for x in 0..<width {
                let pixel = row + x * size
                let red = Int(pixel[r]), green = Int(pixel[g]), blue = Int(pixel[b])
                out[x] = UInt8(truncatingIfNeeded: ((66 * red + 129 * green + 25 * blue + 128) >> 8) + 16)
            }
        }
        for cy in 0..<u.height {
            let rows = (2 * cy, min(2 * cy + 1, height - 1))
            let uRow = u.base + cy * u.stride
            let vRow = v.base + cy * v.stride
            for cx in 0..<u.width {
                let columns = (2 * cx, min(2 * cx + 1, width - 1))
                let p00 = base + rows.0 * stride + columns.0 * size
                let p01 = base + rows.0 * stride + columns.1 * size
                let p10 = base + rows.1 * stride + columns.0 * size
                let p11 = base + rows.1 * stride + columns.1 * size
                var red = Int(p00[r]) + Int(p01[r]) + Int(p10[r]) + Int(p11[r])
                var green = Int(p00[g]) + Int(p01[g]) + Int(p10[g]) + Int(p11[g])
                var blue = Int(p00[b]) + Int(p01[b]) + Int(p10[b]) + Int(p11[b])
                red = (red + 2) / 4
                green = (green + 2) / 4
                blue = (blue + 2) / 4
                uRow[cx] = UInt8(clamping: ((-38 * red - 74 * green + 112 * blue + 128) >> 8) + 128)
                vRow[cx] = UInt8(clamping: ((112 * red - 94 * green - 18 * blue + 128) >> 8) + 128)
            }
        }
    }
}
