import Media
import Synchronization
import TestSupport
import Testing

@Suite struct VideoFormatTests {
    @Test func tightLayouts() throws {
        let nv12 = try VideoFormat(width: 6, height: 5, pixelFormat: .nv12)
        #expect(
            nv12.planes == [
                PlaneLayout(offset: 0, stride: 6, bytesPerRow: 6, rows: 5),
                PlaneLayout(offset: 30, stride: 6, bytesPerRow: 6, rows: 3),
            ])
        #expect(nv12.bufferSize == 48)
        #expect(nv12.isTightlyPacked)
        let i420 = try VideoFormat(width: 5, height: 4, pixelFormat: .i420)
        #expect(i420.planes.map(\.bytesPerRow) == [5, 3, 3])
        #expect(i420.planes.map(\.offset) == [0, 20, 26])
        #expect(i420.bufferSize == 32)
        let i422 = try VideoFormat(width: 8, height: 4, pixelFormat: .i422)
        #expect(i422.planes.map(\.rows) == [4, 4, 4])
        #expect(i422.bufferSize == 64)
        let yuyv = try VideoFormat(width: 8, height: 2, pixelFormat: .yuyv)
        #expect(yuyv.planes == [PlaneLayout(offset: 0, stride: 16, bytesPerRow: 16, rows: 2)])
    }

    /// V4L2's single-planar layouts with a `bytesperline` wider than the picture.
    @Test func cameraLayouts() throws {
        let nv12 = try VideoFormat(width: 640, height: 480, pixelFormat: .nv12, bytesPerLine: 704)
        #expect(nv12.planes.map(\.stride) == [704, 704])
        #expect(nv12.planes[1].offset == 704 * 480)
        #expect(nv12.bufferSize == 704 * 480 + 704 * 239 + 640)
        #expect(!nv12.isTightlyPacked)
        let i420 = try VideoFormat(width: 640, height: 480, pixelFormat: .i420, bytesPerLine: 643)
        #expect(i420.planes.map(\.stride) == [643, 321, 321])
        #expect(i420.planes.map(\.offset) == [0, 643 * 480, 643 * 480 + 321 * 240])
        #expect(i420.description == "I420 640×480 strides 643/321/321")
    }

    /// No side over 8192 pixels, whatever the source: a frame at the limit is 96 MiB in 4:2:0,
    /// and one of 16384×16384 (which a Y4M header may claim) would be four times that.
    @Test func framesOverTheSizeLimitAreRefusedNamingIt() throws {
        #expect(VideoFormat.maximumDimension == 8192)
        let largest = try VideoFormat(width: 8192, height: 8192, pixelFormat: .nv12)
        #expect(largest.bufferSize == 96 << 20)
        for (width, height) in [(16384, 16384), (8194, 16), (16, 8194)] {
            let error = expectError(VideoFormatError.self) {
                try VideoFormat(width: width, height: height, pixelFormat: .i420)
            }
            #expect(error?.problem.contains("\(width)×\(height)") == true, "\(String(describing: error))")
            #expect(error?.problem.contains("8192") == true, "\(String(describing: error))")
        }
    }

    @Test func invalidLayoutsAreRefused() throws {
        #expect(throws: VideoFormatError.self) { try VideoFormat(width: 0, height: 4, pixelFormat: .nv12) }
        #expect(throws: VideoFormatError.self) { try VideoFormat(width: 20000, height: 4, pixelFormat: .nv12) }
        #expect(throws: VideoFormatError.self) { try VideoFormat(width: 7, height: 4, pixelFormat: .yuyv) }
        #expect(throws: VideoFormatError.self) {
            try VideoFormat(width: 640, height: 480, pixelFormat: .nv12, bytesPerLine: 600)
        }
        #expect(throws: VideoFormatError.self) {
            try VideoFormat(width: 640, height: 480, pixelFormat: .yuyv, bytesPerLine: 1279)
        }
        #expect(throws: VideoFormatError.self) {
            try VideoFormat(
                width: 8, height: 4, pixelFormat: .nv12,
                planes: [PlaneLayout(offset: 0, stride: 8, bytesPerRow: 8, rows: 4)])
        }
        #expect(throws: VideoFormatError.self) {
            try VideoFormat(
                width: 8, height: 4, pixelFormat: .nv12,
                planes: [
                    PlaneLayout(offset: 0, stride: 8, bytesPerRow: 8, rows: 4),
                    PlaneLayout(offset: -1, stride: 8, bytesPerRow: 8, rows: 2),
                ])
        }
        #expect(throws: VideoFormatError.self) {
            try VideoFormat(width: 8, height: 4, pixelFormat: .nv12, frameRate: Rational(-30, 1))
        }
        let error = expectError(VideoFormatError.self) {
            try VideoFormat(width: 640, height: 480, pixelFormat: .nv12, bytesPerLine: 600)
        }
        #expect(error?.description.contains("stride") == true)
    }
}

@Suite struct FrameBufferTests {
    @Test func poolReusesReturnedBuffers() {
        let pool = FramePool(bufferSize: 100, maximumIdle: 2)
        var a: FrameBuffer? = pool.take()
        let address = a?.base
        a = nil
        let b = pool.take()
        #expect(b.base == address)
        #expect(pool.statistics.allocated == 1 && pool.statistics.reused == 1)
        // Three in use at once, then all returned: only two are kept.
        var held = [pool.take(), pool.take()]
        held.removeAll()
        #expect(pool.statistics.allocated == 3)
        _ = [pool.take(), pool.take(), pool.take()]
        #expect(pool.statistics.allocated == 4)
        #expect(b.count == 100)
    }

    @Test func borrowedBytesAreReleasedOnceAfterTheLastFrame() throws {
        let released = Mutex(0)
        let memory = UnsafeMutablePointer<UInt8>.allocate(capacity: 48)
        defer { memory.deallocate() }
        let format = try VideoFormat(width: 6, height: 5, pixelFormat: .nv12)
        do {
            let buffer = FrameBuffer(borrowing: memory, count: 48, release: { released.withLock { $0 += 1 } })
            let frame = VideoFrame(format: format, buffer: buffer, timestamp: .zero, sequence: 9)
            let copy = frame
            #expect(copy.plane(1).base == UnsafePointer(memory + 30))
            #expect(released.withLock { $0 } == 0)
        }
        #expect(released.withLock { $0 } == 1)
    }

    @Test func framesCrossThreads() async throws {
        let pool = FramePool(bufferSize: 48)
        let format = try VideoFormat(width: 6, height: 5, pixelFormat: .nv12)
        let buffer = pool.take()
        buffer.mutablePlane(format.planes[0]).fill(7)
        let frame = VideoFrame(format: format, buffer: buffer, timestamp: Timestamp(nanoseconds: 5), sequence: 1)
        let sum = await Task.detached { frame.luma.row(2).reduce(0) { $0 + Int($1) } }.value
        #expect(sum == 42)
    }
}

/// Reference conversions, one pixel at a time.
func referenceYUYVToNV12(_ src: [UInt8], width: Int, height: Int, stride: Int) -> (y: [UInt8], uv: [UInt8]) {
    var y = [UInt8](repeating: 0, count: width * height)
    var uv = [UInt8](repeating: 0, count: width * ((height + 1) / 2))
    for row in 0..<height { for x in 0..<width { y[row * width + x] = src[row * stride + 2 * x] } }
    for cy in 0..<(height + 1) / 2 {
        let r0 = 2 * cy, r1 = min(2 * cy + 1, height - 1)
        for pair in 0..<width / 2 {
            for c in 0..<2 {  // U at byte 1, V at byte 3 of each 4-byte group
                let a = Int(src[r0 * stride + 4 * pair + 1 + 2 * c]), b = Int(src[r1 * stride + 4 * pair + 1 + 2 * c])
                uv[cy * width + 2 * pair + c] = UInt8((a + b + 1) / 2)
            }
        }
    }
    return (y, uv)
}

func pseudoRandomBytes(_ count: Int, seed: UInt32) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 1_664_525 &+ 1_013_904_223
        return UInt8(truncatingIfNeeded: state >> 24)
    }
}

func planeBytes(_ plane: MutablePlaneView) -> [UInt8] { (0..<plane.height).flatMap { Array(plane.row($0)) } }

@Suite struct PixelConversionTests {
    @Test(arguments: [(16, 4, 32), (16, 5, 40), (640, 3, 1290), (2, 1, 4), (34, 7, 71)])
    func yuyvToNV12MatchesTheReference(width: Int, height: Int, stride: Int) throws {
        let src = pseudoRandomBytes(stride * height, seed: UInt32(width * 31 + height))
        let lumaStride = width + 3, chromaStride = width + 5
        let luma = UnsafeMutablePointer<UInt8>.allocate(capacity: lumaStride * height)
        let chroma = UnsafeMutablePointer<UInt8>.allocate(capacity: chromaStride * ((height + 1) / 2))
        defer {
            luma.deallocate()
            chroma.deallocate()
        }
        let y = MutablePlaneView(base: luma, width: width, height: height, stride: lumaStride)
        let uv = MutablePlaneView(base: chroma, width: width, height: (height + 1) / 2, stride: chromaStride)
        src.withUnsafeBufferPointer { s in
            PixelConversion.yuyvToNV12(
                PlaneView(base: s.baseAddress!, width: 2 * width, height: height, stride: stride), luma: y, chroma: uv)
        }
        let reference = referenceYUYVToNV12(src, width: width, height: height, stride: stride)
        #expect(planeBytes(y) == reference.y)
        #expect(planeBytes(uv) == reference.uv)
    }

    @Test(arguments: [(8, 4), (9, 5), (1, 1), (320, 3)])
    func halvingChromaRowsAveragesPairs(width: Int, height: Int) {
        let src = pseudoRandomBytes(width * height, seed: 5)
        let out = UnsafeMutablePointer<UInt8>.allocate(capacity: width * ((height + 1) / 2))
        defer { out.deallocate() }
        let d = MutablePlaneView(base: out, width: width, height: (height + 1) / 2, stride: width)
        src.withUnsafeBufferPointer { s in
            PixelConversion.halveChromaRows(
                PlaneView(base: s.baseAddress!, width: width, height: height, stride: width), into: d)
        }
        var expected: [UInt8] = []
        for cy in 0..<(height + 1) / 2 {
            let r0 = 2 * cy, r1 = min(2 * cy + 1, height - 1)
            for x in 0..<width { expected.append(UInt8((Int(src[r0 * width + x]) + Int(src[r1 * width + x]) + 1) / 2)) }
        }
        #expect(planeBytes(d) == expected)
    }

    /// Whole frames: I422 with padded rows to tight I420, and a plain copy between strides.
    @Test func frameConversions() throws {
        let source = try VideoFormat(width: 6, height: 4, pixelFormat: .i422, bytesPerLine: 10)
        let buffer = FrameBuffer(capacity: source.bufferSize)
        for (i, p) in source.planes.enumerated() {
            let plane = buffer.mutablePlane(p)
            for y in 0..<plane.height {
                for x in 0..<plane.width { plane.base[y * plane.stride + x] = UInt8(i * 100 + y * 10 + x) }
            }
        }
        let frame = VideoFrame(format: source, buffer: buffer, timestamp: Timestamp(nanoseconds: 77), sequence: 3)
        let target = try VideoFormat(width: 6, height: 4, pixelFormat: .i420)
        let out = PixelConversion.convert(frame, into: FrameBuffer(capacity: target.bufferSize), format: target)
        #expect(out.timestamp == frame.timestamp && out.sequence == 3)
        #expect(Array(out.plane(0).row(3)) == [30, 31, 32, 33, 34, 35])
        #expect(Array(out.plane(1).row(0)) == [105, 106, 107])  // rows 0 and 1: (100+110+1)/2
        #expect(Array(out.plane(2).row(1)) == [225, 226, 227])  // rows 2 and 3
        #expect(PixelConversion.canConvert(from: .yuyv, to: .nv12))
        #expect(!PixelConversion.canConvert(from: .yuyv, to: .i420))

        let wide = try VideoFormat(width: 6, height: 4, pixelFormat: .i422, bytesPerLine: 16)
        let copy = PixelConversion.convert(frame, into: FrameBuffer(capacity: wide.bufferSize), format: wide)
        for p in 0..<3 { for y in 0..<4 { #expect(Array(copy.plane(p).row(y)) == Array(frame.plane(p).row(y))) } }
    }
}

@Suite struct EncodedSampleTests {
    func sample(_ t: Int64, key: Bool, bytes: Int = 3) -> EncodedSample {
        EncodedSample(
            data: [0, 0, 0, UInt8(bytes)] + [UInt8](repeating: key ? 0x65 : 0x41, count: bytes),
            pts: Timestamp(nanoseconds: t), dts: Timestamp(nanoseconds: t), isKeyframe: key)
    }

    @Test func nalUnitsMustAddUp() {
        let two = EncodedSample(
            data: [0, 0, 0, 2, 0x67, 1, 0, 0, 0, 1, 0x68], pts: .zero, dts: .zero, isKeyframe: true)
        #expect(two.nalUnits?.map(Array.init) == [[0x67, 1], [0x68]])
        for bad: [UInt8] in [[0, 0, 0, 5, 1], [0, 0, 1], [0, 0, 0, 0], [0, 0, 0, 1, 9, 0]] {
            #expect(EncodedSample(data: bad, pts: .zero, dts: .zero, isKeyframe: false).nalUnits == nil)
        }
    }

    @Test func gopsStartAtKeyframes() throws {
        #expect(GOP(keyframe: sample(0, key: false)) == nil)
        var gop = try #require(GOP(keyframe: sample(0, key: true, bytes: 10)))
        let added = [
            gop.append(sample(1, key: false, bytes: 2)),
            gop.append(sample(1, key: false)),  // not later: refused
            gop.append(sample(2, key: true)),
        ]  // starts the next GOP: refused
        #expect(added == [true, false, false])
        #expect(gop.count == 2 && gop.byteCount == 14 + 6)
        #expect(gop.start == .zero && gop.lastTime == Timestamp(nanoseconds: 1))
    }

    @Test func anEndedGOPTakesNoMoreSamples() throws {
        let gop = try #require(GOP(keyframe: sample(0, key: true)))
        var ended = gop.ended(at: Timestamp(nanoseconds: 5))
        #expect(gop.end == nil && ended.end == Timestamp(nanoseconds: 5))
        let appended = ended.append(sample(1, key: false))
        #expect(!appended && ended.count == 1)
        // An end before the last frame would give it a negative duration: it ends no earlier than it shows.
        #expect(gop.ended(at: Timestamp(nanoseconds: -1)).end == .zero)
    }
}

@Suite struct PlanarConverterTests {
    @Test func convertsOnlyWhatNeedsIt() throws {
        let nv12 = try VideoFormat(width: 8, height: 4, pixelFormat: .nv12, bytesPerLine: 12)
        let passthrough = PlanarConverter(input: nv12)
        #expect(passthrough.output == nv12)
        let frame = VideoFrame(
            format: nv12, buffer: FrameBuffer(capacity: nv12.bufferSize), timestamp: .zero, sequence: 0)
        #expect(passthrough.convert(frame).buffer === frame.buffer)

        let yuyv = try VideoFormat(
            width: 8, height: 4, pixelFormat: .yuyv, frameRate: Rational(25, 1), pixelAspectRatio: Rational(4, 3))
        let converter = PlanarConverter(input: yuyv, maximumIdle: 2)
        #expect(converter.output.pixelFormat == .nv12)
        #expect(converter.output.frameRate == Rational(25, 1) && converter.output.pixelAspectRatio == Rational(4, 3))
        let buffer = FrameBuffer(capacity: yuyv.bufferSize)
        let packed = buffer.mutablePlane(yuyv.planes[0])
        for y in 0..<4 {
            for x in 0..<16 { packed.base[y * packed.stride + x] = UInt8(x % 2 == 0 ? 50 + x / 2 : 100 + y) }
        }
        let source = VideoFrame(
            format: yuyv, buffer: buffer, timestamp: Timestamp(nanoseconds: 40_000_000), sequence: 1)
        var first: UnsafeMutablePointer<UInt8>?
        for _ in 0..<3 {
            let out = converter.convert(source)
            #expect(out.timestamp == source.timestamp && out.sequence == 1)
            #expect(Array(out.luma.row(2)) == (50..<58).map { UInt8($0) })
            #expect(Array(out.plane(1).row(1)) == [UInt8](repeating: 103, count: 8))  // rows 2 and 3: (102+103+1)/2
            if let first { #expect(out.buffer.base == first) } else { first = out.buffer.base }
        }
        let planar = try VideoFormat(width: 8, height: 4, pixelFormat: .i422)
        #expect(PlanarConverter(input: planar).output.pixelFormat == .i420)
    }
}
