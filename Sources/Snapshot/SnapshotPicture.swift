import Media

/// A picture for an event's snapshot: an owned I420 copy of one frame, downscaled, waiting
/// to be encoded (`JPEGEncoder`).
///
/// Made on the pipeline thread each time an event reaches a new peak score, so making one is
/// a downscale and a copy only: one pass over the frame's planes (a box average per output
/// pixel) into one array. The frame's buffer is not kept, so the camera gets its buffer back
/// at once.
///
/// The rotation is kept, not applied: `JPEGEncoder` turns the planes upright when it
/// encodes. Most pictures of an event are replaced by a later peak before the event ends and
/// only the last is encoded, so the turn is paid once per event, off the pipeline thread;
/// and the copy stays a walk in row order (a turn during the copy writes down columns, a
/// cache miss per pixel on a full-size picture).
public struct SnapshotPicture: Sendable {
    /// The smallest width that may be asked for (other than 0, the frame's size).
    public static let minimumWidth = 16

    /// Width of the upright picture (of the JPEG), in pixels; even.
    public let width: Int
    /// Height of the upright picture (of the JPEG), in pixels; even.
    public let height: Int
    /// How the stored planes are turned when encoded (the camera's `camera.rotation`).
    public let rotation: Rotation
    /// Capture time of the frame the picture was copied from.
    public let timestamp: Timestamp

    /// Size of the stored planes, in the frame's own orientation (before the rotation).
    let storedWidth: Int
    let storedHeight: Int
    /// The stored planes, I420 and tightly packed: Y (`storedWidth`×`storedHeight`), then U
    /// and V (each half as wide and half as high).
    let samples: [UInt8]

    /// Copies `frame`, downscaled, for a snapshot.
    ///
    /// - Parameters:
    ///   - frame: an NV12 or I420 frame (any strides); other formats are refused.
    ///   - rotation: how the frame is turned to be upright (the camera's `camera.rotation`).
    ///   - width: the width of the upright picture wanted, or 0 for the frame's own size. A
    ///     picture is never scaled up (a wider request gives the frame's size), keeps the
    ///     frame's aspect ratio (the height is rounded to the nearest even number), and has
    ///     even sides (an odd side loses its last pixel's worth).
    /// - Throws: `SnapshotError.unsupportedPixelFormat`, `.invalidWidth`
    ///   (not 0 nor `minimumWidth` to `VideoFormat.maximumDimension`), `.frameTooSmall` (a side
    ///   under 2 pixels).
    public init(copying frame: VideoFrame, rotation: Rotation, width: Int) throws(SnapshotError) {
        let format = frame.format
        guard format.pixelFormat == .nv12 || format.pixelFormat == .i420 else {
            throw .unsupportedPixelFormat(format.pixelFormat)
        }
        guard width == 0 || (SnapshotPicture.minimumWidth...VideoFormat.maximumDimension).contains(width) else {
            throw .invalidWidth(width)
        }
        let size = try SnapshotPicture.size(
            frameWidth: format.width, frameHeight: format.height, rotation: rotation, width: width)
        let (storedWidth, storedHeight) = rotation.shown(width: size.width, height: size.height)

        let lumaCount = storedWidth * storedHeight
        let chromaCount = (storedWidth / 2) * (storedHeight / 2)
        let chromaWidth = (format.width + 1) / 2
        let chromaHeight = (format.height + 1) / 2
        let luma = frame.plane(0)
        var sources = [SourcePlane(luma, width: format.width, height: format.height, step: 1)]
        if format.pixelFormat == .nv12 {
            // One plane of interleaved U,V pairs: U at even bytes, V at odd ones.
            let pairs = frame.plane(1)
            sources.append(SourcePlane(pairs, width: chromaWidth, height: chromaHeight, step: 2))
            sources.append(SourcePlane(pairs, width: chromaWidth, height: chromaHeight, step: 2, offset: 1))
        } else {
            sources.append(SourcePlane(frame.plane(1), width: chromaWidth, height: chromaHeight, step: 1))
            sources.append(SourcePlane(frame.plane(2), width: chromaWidth, height: chromaHeight, step: 1))
        }
        let targets = [
            (offset: 0, width: storedWidth, height: storedHeight),
            (offset: lumaCount, width: storedWidth / 2, height: storedHeight / 2),
            (offset: lumaCount + chromaCount, width: storedWidth / 2, height: storedHeight / 2),
        ]
        self.samples = [UInt8](unsafeUninitializedCapacity: lumaCount + 2 * chromaCount) { buffer, count in
            guard let base = buffer.baseAddress else { return }
            var scaler = BoxScaler()
            for (source, target) in zip(sources, targets) {
                scaler.scale(source, into: base + target.offset, width: target.width, height: target.height)
            }
            count = lumaCount + 2 * chromaCount
        }
        self.width = size.width
        self.height = size.height
        self.rotation = rotation
        self.timestamp = frame.timestamp
        self.storedWidth = storedWidth
        self.storedHeight = storedHeight
    }

    /// The upright size of a snapshot of a `frameWidth`×`frameHeight` frame turned by
    /// `rotation`, `width` wide (0: as wide as the upright frame): never wider than the frame,
    /// the frame's aspect ratio, even sides of at least 2.
    static func size(
        frameWidth: Int, frameHeight: Int, rotation: Rotation, width: Int
    ) throws(SnapshotError) -> (width: Int, height: Int) {
        let (uprightWidth, uprightHeight) = rotation.shown(width: frameWidth, height: frameHeight)
        guard uprightWidth >= 2, uprightHeight >= 2 else {
            throw .frameTooSmall(width: frameWidth, height: frameHeight)
        }
        let wanted = width == 0 ? uprightWidth : min(width, uprightWidth)
        let outputWidth = wanted & ~1
        // uprightHeight · outputWidth / uprightWidth, rounded to the nearest even number.
        let halfHeight = (uprightHeight * outputWidth + uprightWidth) / (2 * uprightWidth)
        let outputHeight = min(max(2 * halfHeight, 2), uprightHeight & ~1)
        return (outputWidth, outputHeight)
    }

    /// The planes turned upright, I420 and tightly packed (`width`×`height` luma, then U, V):
    /// the stored planes themselves when there is no rotation.
    func uprightSamples() -> [UInt8] {
        guard rotation != .none else { return samples }
        let lumaCount = storedWidth * storedHeight
        let chromaCount = (storedWidth / 2) * (storedHeight / 2)
        let planes = [
            (offset: 0, width: storedWidth, height: storedHeight),
            (offset: lumaCount, width: storedWidth / 2, height: storedHeight / 2),
            (offset: lumaCount + chromaCount, width: storedWidth / 2, height: storedHeight / 2),
        ]
        return [UInt8](unsafeUninitializedCapacity: samples.count) { buffer, count in
            guard let destination = buffer.baseAddress else { return }
            samples.withUnsafeBufferPointer { stored in
                guard let source = stored.baseAddress else { return }
                for plane in planes {
                    rotation.turn(
                        source + plane.offset, width: plane.width, height: plane.height,
                        into: destination + plane.offset)
                }
            }
            count = samples.count
        }
    }
}

/// One plane of a frame as the scaler reads it: sample `(x, y)` is the byte at
/// `base + y·stride + x·step` (`step` 2 reads one of NV12's interleaved chroma planes).
struct SourcePlane {
    let base: UnsafePointer<UInt8>
    let width: Int
    let height: Int
    let stride: Int
    let step: Int

    init(_ view: PlaneView, width: Int, height: Int, step: Int, offset: Int = 0) {
        self.base = view.base + offset
        self.width = width
        self.height = height
        self.stride = view.stride
        self.step = step
    }
}

/// Downscaling by box averages: each output pixel is the mean, rounded, of the source pixels
/// in its box. Box edges fall on whole source pixels (output column `i` covers source columns
/// `i·w/W` up to `(i+1)·w/W`), so every source pixel counts once; a 1920-wide plane to 640
/// averages 3×3 boxes. Keeps one row of column sums between calls.
struct BoxScaler {
    private var columnSums: [UInt32] = []

    /// Scales `source` into the tightly packed `width`×`height` plane at `destination`; the
    /// size must not exceed the source's.
    mutating func scale(
        _ source: SourcePlane, into destination: UnsafeMutablePointer<UInt8>, width: Int, height: Int
    ) {
        guard width > 0, height > 0 else { return }
        if width == source.width && height == source.height {
            for y in 0..<height {
                BoxScaler.copyRow(source.base + y * source.stride, source.step, destination + y * width, width)
            }
            return
        }
        if columnSums.count < source.width { columnSums = [UInt32](repeating: 0, count: source.width) }
        let columnEdges = (0...width).map { $0 * source.width / width }
        columnSums.withUnsafeMutableBufferPointer { sums in
            guard let sums = sums.baseAddress else { return }
            for outputY in 0..<height {
                let top = outputY * source.height / height
                let bottom = (outputY + 1) * source.height / height
                sums.update(repeating: 0, count: source.width)
                for y in top..<bottom {
                    BoxScaler.addRow(source.base + y * source.stride, source.step, sums, source.width)
                }
                let row = destination + outputY * width
                for outputX in 0..<width {
                    let left = columnEdges[outputX]
                    let right = columnEdges[outputX + 1]
                    var total = 0
                    for x in left..<right { total &+= Int(sums[x]) }
                    let count = (right - left) * (bottom - top)
                    row[outputX] = UInt8(truncatingIfNeeded: (total + count / 2) / count)
                }
            }
        }
    }

    @inline(never)
    static func addRow(
        _ row: UnsafePointer<UInt8>, _ step: Int, _ sums: UnsafeMutablePointer<UInt32>, _ count: Int
    ) {
        if step == 1 {
            for x in 0..<count { sums[x] &+= UInt32(row[x]) }
        } else {
            for x in 0..<count { sums[x] &+= UInt32(row[x &* step]) }
        }
    }

    @inline(never)
    static func copyRow(
        _ row: UnsafePointer<UInt8>, _ step: Int, _ destination: UnsafeMutablePointer<UInt8>, _ count: Int
    ) {
        if step == 1 {
            destination.update(from: row, count: count)
        } else {
            for x in 0..<count { destination[x] = row[x &* step] }
        }
    }
}
