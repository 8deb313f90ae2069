import Media
internal import POSIX

/// Renders a `SyntheticScene`, frame after frame.
///
/// Everything that does not change is computed once: the background (three octaves of value
/// noise, a gradient and a few flat blocks, so the encoder sees real texture), the objects'
/// checkered textures, and a table of Gaussian noise. A frame is then one pass per row:
/// background + noise (from a random offset into the table) + light, clamped, and the
/// objects' spans drawn the same way — simple loops the optimiser vectorises.
public final class SyntheticSource: FrameSource {
    public let scene: SyntheticScene
    public let format: VideoFormat
    public var name: String { "synthetic" }
    /// Index of the next frame `nextFrame()` returns.
    public private(set) var nextIndex: Int64 = 0

    private let realtime: Bool
    /// In real time: the monotonic time frame 0 was delivered.
    private var clockOrigin: Timestamp?
    private let pool: FramePool
    private let frameCount: Int64?
    private let backgroundY: [UInt8]  // width × height
    private let backgroundU: [UInt8]  // chroma width × chroma height
    private let backgroundV: [UInt8]
    private let lumaNoise: [Int16]  // noiseTableSize + width entries
    private let chromaNoise: [Int16]
    private let textures: [[UInt8]]  // per object: two rows (phases) of its width
    private let objectChroma: [(u: UInt8, v: UInt8)]
    private var visible: [(object: Int, rect: PixelRect, unclipped: PixelRect)] = []
    private let seedState: UInt64

    /// Noise rows start at a random offset below this into the noise table.
    static let noiseTableSize = 1 << 16

    /// Prepares the scene; `realtime` delivers each frame no earlier than its timestamp
    /// says (relative to the first), otherwise frames come as fast as they are asked for.
    ///
    /// In real time the source stands in for a camera, and its frames are stamped as a
    /// camera's are: with the monotonic-clock time each one is delivered (frame 0 when it is
    /// first asked for, frame `n` that plus `n` frame intervals). The scene's own `startTime`
    /// then only fixes what each frame shows, not when it was "captured".
    public init(scene: SyntheticScene, realtime: Bool = false) throws(CaptureError) {
        self.format = try scene.videoFormat()
        self.scene = scene
        self.realtime = realtime
        self.pool = FramePool(bufferSize: format.bufferSize)
        self.frameCount = scene.frameCount
        var random = SplitMix64(seed: scene.seed)
        seedState = random.next()
        let w = scene.width, h = scene.height
        let cw = w / 2, ch = h / 2
        backgroundY = SyntheticSource.makeBackground(width: w, height: h, random: &random)
        backgroundU = SyntheticSource.makeChroma(width: cw, height: ch, centre: 118, amplitude: 10, random: &random)
        backgroundV = SyntheticSource.makeChroma(width: cw, height: ch, centre: 134, amplitude: 8, random: &random)
        lumaNoise = SyntheticSource.makeNoise(
            count: SyntheticSource.noiseTableSize + w, sigma: scene.noiseSigma, random: &random)
        chromaNoise = SyntheticSource.makeNoise(
            count: SyntheticSource.noiseTableSize + w, sigma: scene.noiseSigma / 2, random: &random)
        var textures: [[UInt8]] = []
        var colours: [(UInt8, UInt8)] = []
        for o in scene.schedule.objects {
            let (ow, _) = scene.objectSize(o)
            var texture = [UInt8](repeating: 0, count: 2 * ow)
            for phase in 0..<2 {
                for x in 0..<ow {
                    let light = ((x >> 3) + phase) & 1 == 0
                    texture[phase * ow + x] = UInt8(clamping: Int(o.brightness) + (light ? 22 : -22))
                }
            }
            textures.append(texture)
            colours.append(
                (UInt8(truncatingIfNeeded: 90 + random.next() % 80), UInt8(truncatingIfNeeded: 90 + random.next() % 80))
            )
        }
        self.textures = textures
        self.objectChroma = colours
    }

    public func nextFrame() throws(CaptureError) -> VideoFrame? {
        if let frameCount, nextIndex >= frameCount { return nil }
        let index = nextIndex
        nextIndex += 1
        let frame = self.frame(index)
        guard realtime else { return frame }
        let origin = clockOrigin ?? Clock.monotonic.now()
        clockOrigin = origin
        let due = origin + (frame.timestamp - scene.startTime)
        Clock.sleep(untilMonotonic: due)
        return VideoFrame(format: frame.format, buffer: frame.buffer, timestamp: due, sequence: frame.sequence)
    }

    /// Frame `index` of the scene, rendered now (any index, in any order).
    public func frame(_ index: Int64) -> VideoFrame {
        let buffer = pool.take()
        render(index, into: buffer)
        return VideoFrame(
            format: format, buffer: buffer, timestamp: scene.timestamp(ofFrame: index), sequence: UInt64(max(index, 0)))
    }

    /// Renders frame `index` into `buffer` (laid out as `format`).
    public func render(_ index: Int64, into buffer: FrameBuffer) {
        let t = scene.timestamp(ofFrame: index)
        var random = SplitMix64(seed: seedState ^ (UInt64(bitPattern: index) &* 0xD1B5_4A32_D192_ED03))
        let light = Int16(clamping: scene.lightOffset(at: t))
        visible.removeAll(keepingCapacity: true)
        for i in scene.schedule.objects.indices {
            if let rect = scene.objectRect(i, at: t), let whole = scene.unclippedRect(i, at: t) {
                visible.append((i, rect, whole))
            }
        }
        let w = scene.width, h = scene.height
        let table = SyntheticSource.noiseTableSize

        // Luma.
        let y = buffer.mutablePlane(format.planes[0])
        backgroundY.withUnsafeBufferPointer { bg in
            lumaNoise.withUnsafeBufferPointer { noise in
                guard let bg = bg.baseAddress, let noise = noise.baseAddress else { return }
                for row in 0..<h {
                    let n = noise + Int(random.next() % UInt64(table))
                    let d = y.base + row * y.stride
                    SyntheticSource.addClamped(bg + row * w, n, light, d, w)
                    for v in visible where row >= v.rect.y && row < v.rect.y + v.rect.height {
                        let ow = v.unclipped.width
                        let phase = ((row - v.unclipped.y) >> 3) & 1
                        textures[v.object].withUnsafeBufferPointer { tex in
                            guard let tex = tex.baseAddress else { return }
                            let skip = v.rect.x - v.unclipped.x
                            SyntheticSource.addClamped(
                                tex + phase * ow + skip, n + v.rect.x, light, d + v.rect.x, v.rect.width)
                        }
                    }
                }
            }
        }

        // Chroma: background + half-strength noise; objects in their own colour.
        let cw = w / 2, ch = h / 2
        chromaNoise.withUnsafeBufferPointer { noise in
            guard let noise = noise.baseAddress else { return }
            backgroundU.withUnsafeBufferPointer { bu in
                backgroundV.withUnsafeBufferPointer { bv in
                    guard let bu = bu.baseAddress, let bv = bv.baseAddress else { return }
                    if format.pixelFormat == .nv12 {
                        let uv = buffer.mutablePlane(format.planes[1])
                        for row in 0..<ch {
                            let n = noise + Int(random.next() % UInt64(table))
                            SyntheticSource.interleaveChroma(
                                bu + row * cw, bv + row * cw, n, uv.base + row * uv.stride, cw)
                            for v in visible where 2 * row >= v.rect.y && 2 * row < v.rect.y + v.rect.height {
                                let c = objectChroma[v.object]
                                let d = uv.base + row * uv.stride
                                for x in (v.rect.x / 2)..<((v.rect.x + v.rect.width + 1) / 2) {
                                    d[2 * x] = c.u
                                    d[2 * x + 1] = c.v
                                }
                            }
                        }
                    } else {
                        let u = buffer.mutablePlane(format.planes[1]), vp = buffer.mutablePlane(format.planes[2])
                        for row in 0..<ch {
                            let n = noise + Int(random.next() % UInt64(table))
                            SyntheticSource.addClamped(bu + row * cw, n, 0, u.base + row * u.stride, cw)
                            SyntheticSource.addClamped(bv + row * cw, n + cw, 0, vp.base + row * vp.stride, cw)
                            for v in visible where 2 * row >= v.rect.y && 2 * row < v.rect.y + v.rect.height {
                                let c = objectChroma[v.object]
                                let x0 = v.rect.x / 2, x1 = (v.rect.x + v.rect.width + 1) / 2
                                (u.base + row * u.stride + x0).update(repeating: c.u, count: x1 - x0)
                                (vp.base + row * vp.stride + x0).update(repeating: c.v, count: x1 - x0)
                            }
                        }
                    }
                }
            }
        }
    }

    // MARK: Inner loops

    /// `d[i] = clamp(s[i] + n[i] + light, 0, 255)`.
    @inline(never)
    static func addClamped(
        _ s: UnsafePointer<UInt8>, _ n: UnsafePointer<Int16>, _ light: Int16,
        _ d: UnsafeMutablePointer<UInt8>, _ count: Int
    ) {
        for i in 0..<count {
            let v = Int16(s[i]) &+ n[i] &+ light
            d[i] = UInt8(truncatingIfNeeded: min(max(v, 0), 255))
        }
    }

    /// NV12 chroma row from planar background chroma plus noise.
    @inline(never)
    static func interleaveChroma(
        _ u: UnsafePointer<UInt8>, _ v: UnsafePointer<UInt8>, _ n: UnsafePointer<Int16>,
        _ d: UnsafeMutablePointer<UInt8>, _ count: Int
    ) {
        for i in 0..<count {
            let a = Int16(u[i]) &+ n[2 &* i]
            let b = Int16(v[i]) &+ n[2 &* i &+ 1]
            d[2 &* i] = UInt8(truncatingIfNeeded: min(max(a, 0), 255))
            d[2 &* i &+ 1] = UInt8(truncatingIfNeeded: min(max(b, 0), 255))
        }
    }

    // MARK: Precomputed tables

    /// Value noise: a grid of random values `spacing` pixels apart, bilinearly interpolated.
    /// Evaluated pixel by pixel, so a picture needs no full-size temporary (at 1080p, the
    /// three octaves of the background as arrays of doubles took 50 MB at start-up).
    private struct ValueNoise {
        let grid: [Double]
        let gridWidth: Int
        let inverseSpacing: Double

        init(width: Int, height: Int, spacing: Int, random: inout SplitMix64) {
            gridWidth = width / spacing + 2
            let gridHeight = height / spacing + 2
            grid = (0..<(gridWidth * gridHeight)).map { _ in random.unit() * 2 - 1 }
            inverseSpacing = 1 / Double(spacing)
        }

        func callAsFunction(_ x: Int, _ y: Int) -> Double {
            let gy = Double(y) * inverseSpacing
            let y0 = Int(gy), fy = gy - Double(y0)
            let gx = Double(x) * inverseSpacing
            let x0 = Int(gx), fx = gx - Double(x0)
            let a = grid[y0 * gridWidth + x0], b = grid[y0 * gridWidth + x0 + 1]
            let c = grid[(y0 + 1) * gridWidth + x0], d = grid[(y0 + 1) * gridWidth + x0 + 1]
            return (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy
        }
    }

    private static func makeBackground(width: Int, height: Int, random: inout SplitMix64) -> [UInt8] {
        let coarse = ValueNoise(width: width, height: height, spacing: max(8, width / 10), random: &random)
        let medium = ValueNoise(width: width, height: height, spacing: max(4, width / 40), random: &random)
        let fine = ValueNoise(width: width, height: height, spacing: 3, random: &random)
        // A few flat blocks with sharp edges: walls, windows, a door.
        var blocks: [(x: Range<Int>, y: Range<Int>, shift: Double)] = []
        for _ in 0..<10 {
            let bw = width / 12 + Int(random.next() % UInt64(max(1, width / 6)))
            let bh = height / 12 + Int(random.next() % UInt64(max(1, height / 5)))
            let bx = Int(random.next() % UInt64(max(1, width - bw)))
            let by = Int(random.next() % UInt64(max(1, height - bh)))
            let shift = random.unit() * 50 - 25
            blocks.append((bx..<min(bx + bw, width), by..<min(by + bh, height), shift))
        }
        var out = [UInt8](repeating: 0, count: width * height)
        for y in 0..<height {
            let gradient = 24 * (Double(y) / Double(height) - 0.5)
            let rowBlocks = blocks.filter { $0.y.contains(y) }
            for x in 0..<width {
                var value = 118 + gradient + 38 * coarse(x, y) + 16 * medium(x, y) + 7 * fine(x, y)
                for block in rowBlocks where block.x.contains(x) { value += block.shift }
                out[y * width + x] = UInt8(min(max(value.rounded(), 20), 220))
            }
        }
        return out
    }

    private static func makeChroma(
        width: Int, height: Int, centre: Double, amplitude: Double, random: inout SplitMix64
    ) -> [UInt8] {
        let field = ValueNoise(width: width, height: height, spacing: max(8, width / 6), random: &random)
        var out = [UInt8](repeating: 0, count: width * height)
        for y in 0..<height {
            for x in 0..<width {
                out[y * width + x] = UInt8(min(max((centre + amplitude * field(x, y)).rounded(), 16), 240))
            }
        }
        return out
    }

    /// Gaussian noise with standard deviation `sigma`, rounded to whole grey levels
    /// (Irwin–Hall sums of 12 uniforms, rescaled so the table's own deviation is `sigma`).
    private static func makeNoise(count: Int, sigma: Double, random: inout SplitMix64) -> [Int16] {
        guard sigma > 0 else { return [Int16](repeating: 0, count: count) }
        var raw = [Double](repeating: 0, count: count)
        for i in 0..<count {
            var s = 0.0
            for _ in 0..<12 { s += random.unit() }
            raw[i] = s - 6
        }
        let mean = raw.reduce(0, +) / Double(count)
        let deviation = (raw.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(count)).squareRoot()
        let scale = sigma / max(deviation, 1e-9)
        return raw.map { Int16(min(max((($0 - mean) * scale).rounded(), -127), 127)) }
    }
}
