import Foundation
import Media
import TestSupport
import Testing

@testable import Snapshot

/// Snapshots of hand-made frames, read back by an independent decoder (ffmpeg, ffprobe).
@Suite struct SnapshotTests {
    /// 1280×720 and 1920×1080 frames at each width and rotation: the upright size, in the
    /// picture and in the JPEG ffprobe reads.
    @Test(arguments: [
        (1280, 720, 0, 0, 1280, 720),
        (1280, 720, 0, 640, 640, 360),
        (1280, 720, 90, 360, 360, 640),
        (1280, 720, 90, 0, 720, 1280),
        (1280, 720, 270, 360, 360, 640),
        (1280, 720, 180, 640, 640, 360),
        (1280, 720, 0, 4000, 1280, 720),  // never scaled up
        (1920, 1080, 0, 640, 640, 360),
        (321, 241, 0, 0, 320, 240),  // odd sides lose a pixel's worth
        (1280, 720, 0, 101, 100, 56),  // even sides, the height rounded to the nearest even
    ])
    func uprightSize(
        frameWidth: Int, frameHeight: Int, degrees: Int, width: Int, expectedWidth: Int, expectedHeight: Int
    ) throws {
        let rotation = try #require(Rotation(degrees: degrees))
        let frame = try TestFrame.make(width: frameWidth, height: frameHeight, format: .nv12)
        let picture = try SnapshotPicture(copying: frame, rotation: rotation, width: width)
        #expect(picture.width == expectedWidth && picture.height == expectedHeight)
        let decoded = try Decoded(JPEGEncoder.encode(picture, quality: 85), pixelFormat: "gray")
        #expect(decoded.probedWidth == expectedWidth && decoded.probedHeight == expectedHeight)
        #expect(decoded.bytes.count == expectedWidth * expectedHeight)
    }

    /// The bright square lands where the upright picture puts it, at full size and scaled down,
    /// from NV12 and I420 frames with padded strides: its region is bright, the rest dark.
    @Test(arguments: [PixelFormat.nv12, .i420], Rotation.allCases)
    func squareLandsWhereTheUprightPicturePutsIt(format: PixelFormat, rotation: Rotation) throws {
        for scale in [1, 2] {
            let frame = try TestFrame.make(width: 320, height: 240, format: format)
            let uprightWidth = rotation.isSideways ? 240 : 320
            let picture = try SnapshotPicture(
                copying: frame, rotation: rotation, width: scale == 1 ? 0 : uprightWidth / scale)
            let decoded = try Decoded(JPEGEncoder.encode(picture, quality: 90), pixelFormat: "gray")
            let square = TestFrame.uprightSquare(rotation: rotation).scaled(down: scale)
            #expect(decoded.width == uprightWidth / scale)
            let inside = decoded.mean(of: square.inset(by: 4 / scale), channel: 0)
            let outside = decoded.mean(outside: square.inset(by: -4 / scale), channel: 0)
            #expect(
                inside > 160, "\(format) rotated \(rotation.degrees)° at 1/\(scale): the square's region is \(inside)")
            #expect(outside < 60, "\(format) rotated \(rotation.degrees)° at 1/\(scale): the background is \(outside)")
        }
    }

    /// The square's colour comes through (U and V neither lost nor swapped), and the
    /// background stays grey.
    @Test(arguments: [PixelFormat.nv12, .i420])
    func chromaComesThrough(format: PixelFormat) throws {
        let frame = try TestFrame.make(width: 320, height: 240, format: format)
        let picture = try SnapshotPicture(copying: frame, rotation: .clockwise90, width: 120)
        let decoded = try Decoded(JPEGEncoder.encode(picture, quality: 90), pixelFormat: "rgb24")
        let square = TestFrame.uprightSquare(rotation: .clockwise90).scaled(down: 2).inset(by: 3)
        let colour = (0..<3).map { decoded.mean(of: square, channel: $0) }
        let grey = (0..<3).map { decoded.mean(outside: square.inset(by: -6), channel: $0) }
        // Y 180, Cb 100, Cr 160 is about (225, 167, 130) in RGB (full-range BT.601, as JFIF).
        for (measured, expected) in zip(colour, [225.0, 167.0, 130.0]) {
            #expect(abs(measured - expected) < 16, "\(format): the square is \(colour), not about (225, 167, 130)")
        }
        for measured in grey {
            #expect(abs(measured - 40) < 10, "\(format): the background is \(grey), not grey 40")
        }
    }

    /// A one-pixel checker of 0 and 255 halved is an even grey: box averages, not the nearest
    /// pixel (which would give all 0 or all 255).
    @Test(arguments: [PixelFormat.nv12, .i420])
    func downscalingAverages(format: PixelFormat) throws {
        let frame = try TestFrame.make(width: 64, height: 64, format: format, paint: .checker)
        let picture = try SnapshotPicture(copying: frame, rotation: .none, width: 32)
        #expect(picture.width == 32 && picture.height == 32)
        let luma = picture.samples.prefix(32 * 32)
        #expect(luma.allSatisfy { $0 == 128 }, "luma \(Set(luma).sorted())")
        let decoded = try Decoded(JPEGEncoder.encode(picture, quality: 95), pixelFormat: "gray")
        #expect(decoded.bytes.allSatisfy { abs(Int($0) - 128) <= 3 }, "decoded \(Set(decoded.bytes).sorted())")
    }

    /// The same picture in NV12 and in I420, with different strides, gives the same samples.
    @Test func nv12AndI420GiveTheSamePicture() throws {
        for width in [0, 160, 100] {
            let nv12 = try SnapshotPicture(
                copying: TestFrame.make(width: 320, height: 240, format: .nv12), rotation: .none, width: width)
            let i420 = try SnapshotPicture(
                copying: TestFrame.make(width: 320, height: 240, format: .i420), rotation: .none, width: width)
            let firstDifference = nv12.samples.indices.first {
                $0 < i420.samples.count && nv12.samples[$0] != i420.samples[$0]
            }
            #expect(nv12.samples.count == i420.samples.count, "at width \(width)")
            #expect(firstDifference == nil, "at width \(width), the samples differ from byte \(firstDifference ?? -1)")
        }
    }

    @Test func qualityOutOfRangeIsRefusedNamingTheRange() throws {
        let picture = try SnapshotPicture(
            copying: TestFrame.make(width: 64, height: 48, format: .i420), rotation: .none, width: 0)
        for quality in [0, 101, -5] {
            let error = expectError(SnapshotError.self) { try JPEGEncoder.encode(picture, quality: quality) }
            #expect(error == .invalidQuality(quality))
            let text = error.map(String.init(describing:)) ?? ""
            #expect(text.contains("quality \(quality)") && text.contains("1 to 100"), "\(text)")
        }
        for quality in [1, 100] {
            let decoded = try Decoded(JPEGEncoder.encode(picture, quality: quality), pixelFormat: "gray")
            #expect(decoded.probedWidth == 64 && decoded.probedHeight == 48)
        }
    }

    /// YUYV and I422 frames are refused with a message naming the format and the fix; so is a
    /// width out of range. (A rotation is a `Rotation`: only right angles can be asked for.)
    @Test func badInputIsRefusedWithoutACrash() throws {
        for format in [PixelFormat.yuyv, .i422] {
            let frame = try TestFrame.make(width: 64, height: 48, format: format)
            let error = expectError(SnapshotError.self) {
                try SnapshotPicture(copying: frame, rotation: .none, width: 0)
            }
            #expect(error == .unsupportedPixelFormat(format))
            let text = error.map(String.init(describing:)) ?? ""
            #expect(text.contains("\(format)") && text.contains("NV12 or I420"), "\(text)")
        }
        let frame = try TestFrame.make(width: 64, height: 48, format: .nv12)
        for width in [-2, 1, 15, 8194] {
            let error = expectError(SnapshotError.self) {
                try SnapshotPicture(copying: frame, rotation: .none, width: width)
            }
            #expect(error == .invalidWidth(width))
            #expect(error.map(String.init(describing:))?.contains("16 to 8192") == true)
        }
        let tiny = try TestFrame.make(width: 1, height: 1, format: .i420)
        let error = expectError(SnapshotError.self) { try SnapshotPicture(copying: tiny, rotation: .none, width: 0) }
        #expect(error == .frameTooSmall(width: 1, height: 1))
    }
}

/// A rectangle of pixels: columns `x`, rows `y`.
struct Region {
    var x: Range<Int>
    var y: Range<Int>

    func scaled(down factor: Int) -> Region {
        Region(
            x: x.lowerBound / factor..<x.upperBound / factor, y: y.lowerBound / factor..<y.upperBound / factor)
    }

    /// Smaller by `margin` on each side (larger for a negative margin).
    func inset(by margin: Int) -> Region {
        Region(
            x: x.lowerBound + margin..<x.upperBound - margin, y: y.lowerBound + margin..<y.upperBound - margin)
    }

    func contains(_ px: Int, _ py: Int) -> Bool { x.contains(px) && y.contains(py) }
}

/// Frames made by hand, with padded strides whose padding is bright (so a reader that
/// ignores the strides shows it).
enum TestFrame {
    enum Paint {
        /// Grey 40 with neutral chroma, and a 64×64 square of Y 180, Cb 100, Cr 160 at columns
        /// 32..<96, rows 48..<112 of a 320×240 frame (at the same fractions of other sizes).
        case square
        /// Luma alternating 0 and 255 pixel by pixel, neutral chroma.
        case checker
    }

    static let square = Region(x: 32..<96, y: 48..<112)

    /// Where the square lies in the upright 320×240 (or 240×320) picture: worked out by hand,
    /// not by the code under test.
    static func uprightSquare(rotation: Rotation) -> Region {
        switch rotation.degrees {
        case 90: Region(x: 128..<192, y: 32..<96)  // x' = 239 − y, y' = x
        case 180: Region(x: 224..<288, y: 128..<192)  // x' = 319 − x, y' = 239 − y
        case 270: Region(x: 48..<112, y: 224..<288)  // x' = y, y' = 319 − x
        default: square
        }
    }

    static func make(width: Int, height: Int, format: PixelFormat, paint: Paint = .square) throws -> VideoFrame {
        let layout = try paddedLayout(width: width, height: height, format: format)
        let buffer = FrameBuffer(capacity: layout.bufferSize)
        buffer.base.update(repeating: 255, count: buffer.count)
        let box = Region(
            x: square.x.lowerBound * width / 320..<square.x.upperBound * width / 320,
            y: square.y.lowerBound * height / 240..<square.y.upperBound * height / 240)
        func luma(_ x: Int, _ y: Int) -> UInt8 {
            switch paint {
            case .square: box.contains(x, y) ? 180 : 40
            case .checker: (x + y) % 2 == 0 ? 0 : 255
            }
        }
        // Chroma sample (cx, cy) covers pixels (2cx, 2cy) to (2cx + 1, 2cy + 1).
        func chroma(_ cx: Int, _ cy: Int) -> (u: UInt8, v: UInt8) {
            paint == .square && box.contains(2 * cx, 2 * cy) ? (100, 160) : (128, 128)
        }
        switch format {
        case .nv12, .i420, .i422:
            let y = buffer.mutablePlane(layout.planes[0])
            for row in 0..<height { for x in 0..<width { y.base[row * y.stride + x] = luma(x, row) } }
            let chromaRows = layout.planes[1].rows
            let chromaWidth = (width + 1) / 2
            if format == .nv12 {
                let uv = buffer.mutablePlane(layout.planes[1])
                for row in 0..<chromaRows {
                    for cx in 0..<chromaWidth {
                        let c = chroma(cx, row)
                        uv.base[row * uv.stride + 2 * cx] = c.u
                        uv.base[row * uv.stride + 2 * cx + 1] = c.v
                    }
                }
            } else {
                let u = buffer.mutablePlane(layout.planes[1])
                let v = buffer.mutablePlane(layout.planes[2])
                for row in 0..<chromaRows {
                    for cx in 0..<chromaWidth {
                        let c = chroma(cx, format == .i422 ? row / 2 : row)
                        u.base[row * u.stride + cx] = c.u
                        v.base[row * v.stride + cx] = c.v
                    }
                }
            }
        case .yuyv:
            let packed = buffer.mutablePlane(layout.planes[0])
            for row in 0..<height {
                for x in 0..<width {
                    let c = chroma(x / 2, row / 2)
                    packed.base[row * packed.stride + 2 * x] = luma(x, row)
                    packed.base[row * packed.stride + 2 * x + 1] = x % 2 == 0 ? c.u : c.v
                }
            }
        }
        return VideoFrame(format: layout, buffer: buffer, timestamp: .zero, sequence: 0)
    }

    /// Every plane's stride wider than its rows (by an odd amount for I420's chroma), with a
    /// gap between planes.
    static func paddedLayout(width: Int, height: Int, format: PixelFormat) throws -> VideoFormat {
        var planes: [PlaneLayout] = []
        var offset = 0
        for p in 0..<format.planeCount {
            let extent = format.planeExtent(p, width: width, height: height)
            let stride = extent.bytesPerRow + (p == 0 ? 24 : 13)
            planes.append(
                PlaneLayout(offset: offset, stride: stride, bytesPerRow: extent.bytesPerRow, rows: extent.rows))
            offset += stride * extent.rows + 40
        }
        return try VideoFormat(width: width, height: height, pixelFormat: format, planes: planes)
    }
}

/// A JPEG decoded by ffmpeg into packed `gray` or `rgb24` pixels, with the size ffprobe reads.
struct Decoded {
    let bytes: [UInt8]
    let channels: Int
    let probedWidth: Int
    let probedHeight: Int
    var width: Int { probedWidth }

    init(_ jpeg: [UInt8], pixelFormat: String) throws {
        let directory = try TemporaryDirectory("vigil-snapshot")
        defer { directory.remove() }
        let path = directory.file("snapshot.jpg")
        try Data(jpeg).write(to: URL(fileURLWithPath: path))
        let probe = try FFprobe.probe(path, countPackets: false)
        probedWidth = probe.video.flatMap { $0["width"] }.flatMap { Int($0) } ?? -1
        probedHeight = probe.video.flatMap { $0["height"] }.flatMap { Int($0) } ?? -1
        let decode = try runTool(
            "ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", pixelFormat, "-"])
        guard decode.status == 0, decode.stderr.isEmpty else {
            throw ToolError.failed("ffmpeg decoding \(path)", decode)
        }
        bytes = [UInt8](decode.stdoutData)
        channels = pixelFormat == "rgb24" ? 3 : 1
        #expect(bytes.count == probedWidth * probedHeight * channels, "ffmpeg gave \(bytes.count) bytes")
    }

    /// Mean of `channel` over the pixels of `region`.
    func mean(of region: Region, channel: Int) -> Double {
        mean(channel) { region.contains($0, $1) }
    }

    /// Mean of `channel` over the pixels outside `region`.
    func mean(outside region: Region, channel: Int) -> Double {
        mean(channel) { !region.contains($0, $1) }
    }

    private func mean(_ channel: Int, where included: (Int, Int) -> Bool) -> Double {
        var total = 0
        var count = 0
        for y in 0..<probedHeight {
            for x in 0..<probedWidth where included(x, y) {
                let index = (y * probedWidth + x) * channels + channel
                guard index < bytes.count else { continue }
                total += Int(bytes[index])
                count += 1
            }
        }
        return count == 0 ? .nan : Double(total) / Double(count)
    }
}
