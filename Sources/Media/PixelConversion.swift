/// Repacking raw pictures into the 4:2:0 layouts x264 takes. Every function writes into
/// planes the caller owns and allocates nothing, so a converter reused frame after frame
/// costs only the loop.
///
/// Vertical chroma subsampling averages each pair of rows, rounding halves up (what
/// `pavgb` does); an odd last row's chroma is taken as it is. The loops are plain counted
/// loops over raw pointers so that the optimiser vectorises them (`vigil-bench` measures
/// them). Each row kernel is `@inline(never)`: compiled on its own, with nothing but its
/// arguments in play, it gets a clean 16-byte SIMD loop; inlined into the row loop it came
/// out five times slower.
public enum PixelConversion {
    /// YUYV (packed 4:2:2) → NV12.
    ///
    /// - Parameters:
    ///   - source: the packed plane: `2·width` bytes per row, `height` rows.
    ///   - luma: `width` × `height`.
    ///   - chroma: interleaved U,V: `width` bytes (width/2 pairs) × `(height + 1) / 2` rows.
    public static func yuyvToNV12(_ source: PlaneView, luma: MutablePlaneView, chroma: MutablePlaneView) {
        let width = source.width / 2
        let height = source.height
        precondition(source.width % 4 == 0, "YUYV rows hold whole pixel pairs (an even width)")
        precondition(luma.width == width && luma.height == height, "luma plane must be \(width)×\(height)")
        precondition(
            chroma.width == width && chroma.height == (height + 1) / 2,
            "NV12 chroma plane must be \(width)×\((height + 1) / 2)")
        for cy in 0..<chroma.height {
            let y0 = 2 * cy
            let y1 = min(y0 + 1, height - 1)
            let s0 = UnsafeRawPointer(source.base + y0 * source.stride)
            let s1 = UnsafeRawPointer(source.base + y1 * source.stride)
            let c = chroma.base + cy * chroma.stride
            let d0 = luma.base + y0 * luma.stride
            if y1 != y0 {
                yuyvRowPair(s0, s1, d0, luma.base + y1 * luma.stride, c, width)
            } else {
                // An odd last row: its own chroma; write its luma twice into the same row.
                yuyvRowPair(s0, s0, d0, d0, c, width)
            }
        }
    }

    /// Two YUYV rows → two luma rows and one averaged NV12 chroma row.
    ///
    /// Read as little-endian 16-bit words, a YUYV row is `Y | C << 8` per pixel, and the
    /// high bytes run U0 V0 U1 V1 … — already NV12's chroma order. So each output byte comes
    /// from the word at the same index: a stride-1 loop the optimiser turns into SIMD.
    @inline(never)
    static func yuyvRowPair(
        _ s0: UnsafeRawPointer, _ s1: UnsafeRawPointer,
        _ d0: UnsafeMutablePointer<UInt8>, _ d1: UnsafeMutablePointer<UInt8>,
        _ c: UnsafeMutablePointer<UInt8>, _ width: Int
    ) {
        for k in 0..<width {
            let a = s0.loadUnaligned(fromByteOffset: 2 &* k, as: UInt16.self)
            let b = s1.loadUnaligned(fromByteOffset: 2 &* k, as: UInt16.self)
            d0[k] = UInt8(truncatingIfNeeded: UInt16(littleEndian: a))
            d1[k] = UInt8(truncatingIfNeeded: UInt16(littleEndian: b))
            c[k] = UInt8(
                truncatingIfNeeded: ((UInt16(littleEndian: a) >> 8) &+ (UInt16(littleEndian: b) >> 8) &+ 1) >> 1)
        }
    }

    /// One chroma plane of 4:2:2 → 4:2:0: each pair of rows averaged into one.
    ///
    /// `destination` has the source's width and `(source.height + 1) / 2` rows.
    public static func halveChromaRows(_ source: PlaneView, into destination: MutablePlaneView) {
        precondition(
            destination.width == source.width && destination.height == (source.height + 1) / 2,
            "a 4:2:0 chroma plane from \(source.width)×\(source.height) is \(source.width)×\((source.height + 1) / 2)")
        let width = source.width
        for y in 0..<destination.height {
            let r0 = source.base + 2 * y * source.stride
            let r1 = 2 * y + 1 < source.height ? r0 + source.stride : r0
            averageRows(r0, r1, destination.base + y * destination.stride, width)
        }
    }

    @inline(never)
    static func averageRows(
        _ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ d: UnsafeMutablePointer<UInt8>, _ count: Int
    ) {
        for i in 0..<count {
            d[i] = UInt8(truncatingIfNeeded: (UInt16(a[i]) &+ UInt16(b[i]) &+ 1) >> 1)
        }
    }

    /// Copies a plane row by row (strides may differ; widths and heights must match).
    public static func copy(_ source: PlaneView, into destination: MutablePlaneView) {
        precondition(source.width == destination.width && source.height == destination.height, "planes differ in size")
        if source.stride == destination.stride {
            let total = source.stride * (source.height - 1) + source.width
            if source.height > 0 { destination.base.update(from: source.base, count: total) }
            return
        }
        for y in 0..<source.height {
            (destination.base + y * destination.stride).update(
                from: source.base + y * source.stride, count: source.width)
        }
    }

    /// Whether `convert(_:into:)` can turn `source` frames into `destination` frames.
    public static func canConvert(from source: PixelFormat, to destination: PixelFormat) -> Bool {
        source == destination || (source == .yuyv && destination == .nv12) || (source == .i422 && destination == .i420)
    }

    /// Converts `frame` into `buffer` laid out as `format` (same size), keeping the
    /// timestamp and sequence number: YUYV → NV12, I422 → I420, or a copy when the pixel
    /// formats agree (strides may differ). Allocates nothing but the returned frame value.
    public static func convert(_ frame: VideoFrame, into buffer: FrameBuffer, format: VideoFormat) -> VideoFrame {
        let source = frame.format
        precondition(
            source.width == format.width && source.height == format.height, "conversion keeps the picture size")
        precondition(
            canConvert(from: source.pixelFormat, to: format.pixelFormat),
            "no conversion from \(source.pixelFormat) to \(format.pixelFormat)")
        precondition(buffer.count >= format.bufferSize, "destination buffer too small for \(format)")
        func out(_ p: Int) -> MutablePlaneView { buffer.mutablePlane(format.planes[p]) }
        switch (source.pixelFormat, format.pixelFormat) {
        case (.yuyv, .nv12):
            yuyvToNV12(frame.plane(0), luma: out(0), chroma: out(1))
        case (.i422, .i420):
            copy(frame.plane(0), into: out(0))
            halveChromaRows(frame.plane(1), into: out(1))
            halveChromaRows(frame.plane(2), into: out(2))
        default:
            for p in 0..<source.planes.count { copy(frame.plane(p), into: out(p)) }
        }
        return VideoFrame(format: format, buffer: buffer, timestamp: frame.timestamp, sequence: frame.sequence)
    }
}

/// Gives every frame of a source as 4:2:0 — what x264 takes and what the motion detector
/// reads its luma from — converting at most once per frame, into pooled buffers:
/// YUYV → NV12, I422 → I420; NV12 and I420 frames pass through untouched.
///
/// Run it on the capture thread, so the detector and the encoder share the converted frame.
/// Not thread-safe (one per source); the frames it returns may go to any thread.
public final class PlanarConverter {
    /// The format of the frames `convert` returns.
    public let output: VideoFormat
    private let input: VideoFormat
    private let pool: FramePool?

    /// A converter for frames of `input`; `maximumIdle` buffers are kept for reuse.
    public init(input: VideoFormat, maximumIdle: Int = 8) {
        self.input = input
        switch input.pixelFormat {
        case .nv12, .i420:
            output = input
            pool = nil
        case .yuyv, .i422:
            let target: PixelFormat = input.pixelFormat == .yuyv ? .nv12 : .i420
            // The input's size and rate were validated by its own format; a tight layout of them is valid.
            guard
                let format = try? VideoFormat(
                    width: input.width, height: input.height, pixelFormat: target,
                    frameRate: input.frameRate, pixelAspectRatio: input.pixelAspectRatio,
                    fieldOrder: input.fieldOrder)
            else {
                preconditionFailure("\(input) has a valid 4:2:0 layout")
            }
            output = format
            pool = FramePool(bufferSize: format.bufferSize, maximumIdle: maximumIdle)
        }
    }

    /// `frame` as `output`: the same frame when no conversion is needed.
    public func convert(_ frame: VideoFrame) -> VideoFrame {
        guard let pool else { return frame }
        precondition(
            frame.format.pixelFormat == input.pixelFormat && frame.format.width == input.width
                && frame.format.height == input.height, "a \(frame.format) frame given to a converter for \(input)")
        return PixelConversion.convert(frame, into: pool.take(), format: output)
    }
}
