import Media

/// What the detector concluded about one frame.
public struct MotionResult: Sendable, Equatable {
    /// Capture time of the frame.
    public var time: Timestamp
    /// Fraction (0–1) of the watched picture that changed, isolated pixels not counted.
    public var score: Double
    /// The score threshold in use (`motion.threshold`).
    public var threshold: Double
    /// True once `min_frames` consecutive frames scored at or over the threshold, and for
    /// every further frame of that run.
    public var motion: Bool
    /// When `motion` is true: the capture time of the first frame of the run (the trigger time).
    public var motionStart: Timestamp?
    /// Measured noise: standard deviation, in grey levels, of picture − background at the
    /// reduced size, smoothed over about 2 s (0 until measured).
    public var noise: Double
    /// Grey levels by which a reduced pixel had to differ from the background to count as changed.
    public var pixelThreshold: Double
    /// Fraction of the watched picture that differed from the background, before despeckling
    /// and before compensating global brightness (estimated from a sample of about 500
    /// pixels): what the light-switch rule compares.
    public var globalChange: Double
    /// True when this frame was taken for a change of light: the background was re-learned.
    public var lightSwitch: Bool
    /// True while the detector cannot declare motion: the first frame, and the settling time
    /// after a light switch.
    public var learning: Bool

    public init(time: Timestamp, score: Double, threshold: Double, motion: Bool, motionStart: Timestamp?,
                noise: Double, pixelThreshold: Double, globalChange: Double, lightSwitch: Bool, learning: Bool) {
        self.time = time
        self.score = score
        self.threshold = threshold
        self.motion = motion
        self.motionStart = motionStart
        self.noise = noise
        self.pixelThreshold = pixelThreshold
        self.globalChange = globalChange
        self.lightSwitch = lightSwitch
        self.learning = learning
    }
}

/// Motion detection on the luma plane alone.
///
/// Per frame: the Y plane is block-averaged once to the reduced size (`motion.detect_width`),
/// compared with a background model (a running average that learns at `background_rate` per
/// second of capture time where the picture has not changed; where it has, the background
/// waits, and learns the change only once it has lasted `absorbAfter` seconds), after
/// compensating a global change of brightness and contrast (a robust fit of the difference
/// against the background level, through the medians of the dark and the bright half). The
/// background follows that global change at once, so a slow change of light (a cloud, dusk,
/// the camera's exposure) never piles up; only a change from one frame to the next can make
/// most of the picture differ. A reduced pixel changed when it differs by more than the
/// pixel threshold, which is derived from the measured noise unless set. Changed pixels with
/// fewer than `despeckle` changed neighbours and pixels outside the mask do not count; the
/// score is the fraction of the watched picture that changed. When most of the picture
/// differs at once (`light_switch_fraction`), the background is re-learned instead. Motion is
/// declared after `min_frames` consecutive frames at or over the threshold.
///
/// The noise is the standard deviation of picture − background over about 500 sampled
/// pixels per frame (1.4826 × their median absolute deviation, robust to moving objects),
/// smoothed over about 2 s. It is measured on the reduced picture, so it already accounts for
/// the block averaging (averaging k pixels divides white sensor noise by √k).
///
/// The detector keeps its buffers between frames and allocates only when the frame size changes.
public struct MotionDetector: Sendable {
    public let settings: MotionSettings
    public let mask: MotionMask?

    /// Size of the frames being analysed (0 before the first frame).
    public private(set) var frameWidth = 0
    public private(set) var frameHeight = 0
    /// The reduced picture: block size and dimensions.
    public private(set) var blockSize = 1
    public private(set) var detectWidth = 0
    public private(set) var detectHeight = 0

    /// Where the picture differs from the background, the background waits this long before
    /// it learns the change (a parked car, a ghost left by something that was there when
    /// learning began), then learns it with a time constant of `absorbTimeConstant`.
    public static let absorbAfter = 30.0
    static let absorbTimeConstant = 1.0
    /// The derived pixel threshold is never below this many grey levels.
    public static let minimumPixelThreshold = 2.0
    /// Time constant of the noise estimate.
    static let noiseTimeConstant = 2.0
    /// After a light switch, the background follows the picture frame by frame and no motion
    /// is declared for this long, while the camera's exposure settles.
    public static let lightSwitchSettling = Timestamp.Duration(seconds: 0.5)
    /// How many reduced pixels per frame feed the noise and brightness statistics.
    static let statisticsSamples = 512
    /// Statistics histogram: differences from −16 to +16 grey levels in steps of 1/32.
    static let histogramRange: Float = 16
    static let histogramBinsPerLevel: Float = 32
    static let histogramBins = 2 * 16 * 32 + 1

    // Buffers (sized by `configure`).
    private var columnSums: [UInt16] = []     // vertical sums of one block row, per covered column
    private var current: [Float] = []         // the reduced picture
    private var background: [Float] = []      // the background model
    private var changedSeconds: [UInt8] = []  // per pixel: whole seconds it has differed without a break
    private var absorbing: [Float] = []       // per pixel: 1 once it has differed for `absorbAfter`
    private var clock: Double = 0             // seconds of capture time since the first frame
    private var nextTick: Double = 1
    private var flags: [UInt8] = []           // 1 where changed, with a one-pixel zero border
    private var watch: [UInt8] = []           // 1 where watched
    private var scratch: [UInt8] = []         // one row of despeckled flags
    private var watchedSamples: [Float] = []  // |picture − background| of the watched sampled pixels
    private var watchedSampleCount = 0
    private var watchedCount = 0
    private var configured = false
    private var histogram: [Int32] = []       // two halves: dark and bright background

    // State.
    private var framesLearned = 0             // frames averaged into the background since (re)start
    private var lastTime: Timestamp?
    private var settlingUntil: Timestamp?
    private var noiseEstimate: Double?
    private var noiseFrames = 0
    private var backgroundMean: Float = 128
    private var run = 0
    private var runStart = Timestamp.zero
    private var samplePhase = 0

    /// The reduced picture of the last frame, row by row (`detectWidth × detectHeight`).
    public var reducedPicture: [Float] { current }
    /// The background model, at the reduced size.
    public var backgroundPicture: [Float] { background }
    /// The mask at the reduced size: 1 where watched.
    public var watchMap: [UInt8] { watch }

    /// A detector; `mask` (if any) is scaled to the reduced size of the first frame.
    public init(settings: MotionSettings, mask: MotionMask? = nil) {
        self.settings = settings
        self.mask = mask
    }

    /// The reduced size the detector uses for frames of `width × height`.
    public static func detectionSize(width: Int, height: Int, settings: MotionSettings)
        -> (blockSize: Int, width: Int, height: Int)
    {
        let target = max(1, settings.detectWidth)
        let b = max(1, min(width / target, 255))
        return (b, width / b, height / b)
    }

    private mutating func configure(width: Int, height: Int) {
        let size = Self.detectionSize(width: width, height: height, settings: settings)
        frameWidth = width
        frameHeight = height
        blockSize = size.blockSize
        detectWidth = size.width
        detectHeight = size.height
        let n = detectWidth * detectHeight
        columnSums = [UInt16](repeating: 0, count: detectWidth * blockSize)
        current = [Float](repeating: 0, count: n)
        background = [Float](repeating: 0, count: n)
        changedSeconds = [UInt8](repeating: 0, count: n)
        absorbing = [Float](repeating: 0, count: n)
        clock = 0
        nextTick = 1
        flags = [UInt8](repeating: 0, count: (detectWidth + 2) * (detectHeight + 2))
        scratch = [UInt8](repeating: 0, count: detectWidth + 8)
        if let mask, n > 0 {
            watch = mask.scaled(toWidth: detectWidth, height: detectHeight)
        } else {
            watch = [UInt8](repeating: 1, count: n)
        }
        watchedCount = watch.reduce(0) { $0 + Int($1) }
        histogram = [Int32](repeating: 0, count: 2 * Self.histogramBins)
        watchedSamples = [Float](repeating: 0, count: Self.statisticsSamples + 1)
        framesLearned = 0
        lastTime = nil
        settlingUntil = nil
        noiseEstimate = nil
        noiseFrames = 0
        run = 0
        samplePhase = 0
        configured = true
    }

    /// Once per second of capture time: counts, per pixel, the seconds it has differed from
    /// the background without a break (as sampled at each tick), and marks the pixels that
    /// have differed for `absorbAfter` seconds, which the background then learns.
    private mutating func tick() {
        let dw = detectWidth
        let paddedWidth = dw + 2
        let limit = UInt8(clamping: Int(Self.absorbAfter))
        flags.withUnsafeBufferPointer { flag in
            changedSeconds.withUnsafeMutableBufferPointer { seconds in
                absorbing.withUnsafeMutableBufferPointer { absorb in
                    for y in 0..<detectHeight {
                        for x in 0..<dw {
                            let i = y * dw + x
                            let changed = flag[(y + 1) * paddedWidth + x + 1] != 0
                            let count = changed ? min(seconds[i], 254) + 1 : 0
                            seconds[i] = count
                            absorb[i] = count >= limit ? 1 : 0
                        }
                    }
                }
            }
        }
    }

    /// background ← current, in place (no allocation).
    private mutating func relearnBackground() {
        current.withUnsafeBufferPointer { cur in
            background.withUnsafeMutableBufferPointer { bg in
                for i in 0..<min(cur.count, bg.count) { bg[i] = cur[i] }
            }
        }
        backgroundMean = mean(current)
        framesLearned = 1
        changedSeconds.withUnsafeMutableBufferPointer { seconds in
            for i in seconds.indices { seconds[i] = 0 }
        }
        absorbing.withUnsafeMutableBufferPointer { absorb in
            for i in absorb.indices { absorb[i] = 0 }
        }
    }

    /// Analyses one frame: `luma` is its Y plane (any stride), `time` its capture time.
    /// A frame of a different size from the previous one restarts learning.
    public mutating func process(_ luma: PlaneView, at time: Timestamp) -> MotionResult {
        if !configured || luma.width != frameWidth || luma.height != frameHeight {
            configure(width: luma.width, height: luma.height)
        }
        var result = MotionResult(time: time, score: 0, threshold: settings.threshold, motion: false, motionStart: nil,
                                  noise: noiseEstimate ?? 0, pixelThreshold: 0, globalChange: 0,
                                  lightSwitch: false, learning: true)
        let n = detectWidth * detectHeight
        guard n > 0, watchedCount > 0 else { return result }

        downscale(luma)

        guard let previous = lastTime, framesLearned > 0 else {
            // First frame: it becomes the background.
            relearnBackground()
            lastTime = time
            run = 0
            return result
        }
        let dt = min(max((time - previous).seconds, 0), 10)
        lastTime = max(previous, time)
        clock += dt

        // Learning rates for this frame: a running average by elapsed time, or the plain
        // mean of the frames so far while that is faster (start, after a light switch).
        let rate = Float(1 - Numerics.exp(-settings.backgroundRate * dt))
        let warmRate = 1 / Float(framesLearned + 1)
        let backgroundRate = max(rate, warmRate)
        let absorbRate = Float(1 - Numerics.exp(-dt / Self.absorbTimeConstant))

        let stats = sampleStatistics()
        let measuredNoise = stats.noise
        let noiseForThreshold = noiseEstimate ?? measuredNoise
        let pixelThreshold = settings.pixelThreshold > 0
            ? settings.pixelThreshold
            : max(Self.minimumPixelThreshold, settings.noiseMultiplier * noiseForThreshold)

        let globalChange = sampledChange(threshold: Float(pixelThreshold))
        let counted = compare(threshold: Float(pixelThreshold), gain: stats.gain, offset: stats.offset,
                              backgroundRate: backgroundRate, absorbRate: absorbRate)
        framesLearned += 1
        if clock >= nextTick {
            tick()
            nextTick = clock.rounded(.down) + 1
        }

        let watched = Double(watchedCount)
        result.pixelThreshold = pixelThreshold
        result.globalChange = globalChange
        result.score = Double(counted) / watched

        let settling = settlingUntil.map { time < $0 } ?? false
        if result.globalChange >= settings.lightSwitchFraction {
            result.lightSwitch = true
            settlingUntil = time + Self.lightSwitchSettling
        }
        if result.lightSwitch || settling {
            // Follow the picture frame by frame; learn it afresh once it is steady.
            relearnBackground()
            run = 0
            result.noise = noiseEstimate ?? 0
            return result
        }
        settlingUntil = nil

        // Noise: a plain mean of the first measurements, then an exponential average.
        noiseFrames += 1
        if let estimate = noiseEstimate {
            let beta = max(1 - Numerics.exp(-dt / Self.noiseTimeConstant), 1 / Double(noiseFrames))
            noiseEstimate = estimate + beta * (measuredNoise - estimate)
        } else {
            noiseEstimate = measuredNoise
        }
        result.noise = noiseEstimate ?? measuredNoise
        result.learning = false

        if result.score >= settings.threshold {
            if run == 0 { runStart = time }
            run += 1
        } else {
            run = 0
        }
        if run >= settings.minFrames {
            result.motion = true
            result.motionStart = runStart
        }
        return result
    }

    // MARK: - Reduction

    /// Blocks of 4 pixels and more average every other row: a 4×4 block still averages 8
    /// pixels (noise shrinks by 2.8 times instead of 4; the threshold follows the noise it
    /// measures), larger blocks 32 or more. That halves the memory the detector reads, which
    /// is most of its cost: the frame comes from another thread, so it is not in this core's
    /// cache.
    public static func rowStep(forBlock b: Int) -> Int { b >= 4 ? 2 : 1 }

    /// Block-averages the plane into `current`.
    ///
    /// Even block sizes (all the common ones) add horizontal pairs of bytes as one 16-bit load
    /// split into its two bytes, so that the vertical sums are half as wide and every loop
    /// reads contiguous memory: the optimiser turns them into full-width vector code.
    private mutating func downscale(_ plane: PlaneView) {
        let b = blockSize
        let dw = detectWidth
        let dh = detectHeight
        let step = Self.rowStep(forBlock: b)
        let rows = (b + step - 1) / step  // rows 0, step, 2·step, … of each block
        let scale = 1 / Float(b * rows)
        let stride = plane.stride
        let base = plane.base
        columnSums.withUnsafeMutableBufferPointer { sumsBuffer in
            current.withUnsafeMutableBufferPointer { outBuffer in
                guard let sums = sumsBuffer.baseAddress, let out = outBuffer.baseAddress else { return }
                if b == 4 {
                    for by in 0..<dh {
                        Self.sumBlocksOf4(base + by * 4 * stride, stride: step * stride, rows: rows, count: dw, scale: scale,
                                          into: out + by * dw)
                    }
                } else if b % 2 == 0 && rows <= 128 {  // 128 rows of byte pairs still fit in UInt16
                    let pairs = dw * b / 2
                    for by in 0..<dh {
                        Self.sumRowPairs(base + by * b * stride, stride: step * stride, rows: rows, pairs: pairs, into: sums)
                        Self.sumPairColumns(sums, pairsPerBlock: b / 2, count: dw, scale: scale, into: out + by * dw)
                    }
                } else {
                    for by in 0..<dh {
                        Self.sumRows(base + by * b * stride, stride: step * stride, rows: rows, count: dw * b, into: sums)
                        Self.sumColumns(sums, block: b, count: dw, scale: scale, into: out + by * dw)
                    }
                }
            }
        }
    }

    /// Blocks 4 pixels wide (640×480 and the like) in one pass over `rows` rows (2 or 4)
    /// `stride` apart: each 32-bit load is split into two 16-bit lanes of byte pairs, the rows
    /// are added, then the two lanes.
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumBlocksOf4(_ top: UnsafePointer<UInt8>, stride: Int, rows: Int, count: Int, scale: Float,
                             into out: UnsafeMutablePointer<Float>) {
        let a = UnsafeRawPointer(top), c = a + stride
        @inline(__always) func spread(_ row: UnsafeRawPointer, _ offset: Int) -> UInt32 {
            let v = row.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
            return (v & 0x00FF_00FF) &+ ((v &>> 8) & 0x00FF_00FF)
        }
        if rows == 2 {
            for i in 0..<count {
                let offset = i &* 4
                let lanes = spread(a, offset) &+ spread(c, offset)
                out[i] = Float((lanes & 0xFFFF) &+ (lanes &>> 16)) * scale
            }
            return
        }
        precondition(rows == 4, "blocks of 4 add 2 or 4 rows")
        let d = c + stride, e = d + stride
        for i in 0..<count {
            let offset = i &* 4
            let lanes = (spread(a, offset) &+ spread(c, offset)) &+ (spread(d, offset) &+ spread(e, offset))
            out[i] = Float((lanes & 0xFFFF) &+ (lanes &>> 16)) * scale
        }
    }

    /// The sum of the two bytes of a 16-bit word.
    @inline(__always)
    static func pairSum(_ row: UnsafeRawPointer, _ x: Int) -> UInt16 {
        let v = row.loadUnaligned(fromByteOffset: x &* 2, as: UInt16.self)
        return (v & 0xFF) &+ (v &>> 8)
    }

    /// sums[x] = Σ over `rows` rows of (row[2x] + row[2x+1]), x < pairs (rows ≤ 128: no overflow).
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumRowPairs(_ top: UnsafePointer<UInt8>, stride: Int, rows: Int, pairs: Int,
                            into sums: UnsafeMutablePointer<UInt16>) {
        let a = UnsafeRawPointer(top)
        var r = 0
        if rows >= 4 {
            let c = a + stride, d = c + stride, e = d + stride
            for x in 0..<pairs { sums[x] = (pairSum(a, x) &+ pairSum(c, x)) &+ (pairSum(d, x) &+ pairSum(e, x)) }
            r = 4
        } else if rows >= 2 {
            let c = a + stride
            for x in 0..<pairs { sums[x] = pairSum(a, x) &+ pairSum(c, x) }
            r = 2
        } else {
            for x in 0..<pairs { sums[x] = pairSum(a, x) }
            r = 1
        }
        while r + 4 <= rows {
            let p = a + r * stride, q = p + stride, u = q + stride, v = u + stride
            for x in 0..<pairs {
                sums[x] = sums[x] &+ (pairSum(p, x) &+ pairSum(q, x)) &+ (pairSum(u, x) &+ pairSum(v, x))
            }
            r += 4
        }
        while r + 2 <= rows {
            let p = a + r * stride, q = p + stride
            for x in 0..<pairs { sums[x] = sums[x] &+ pairSum(p, x) &+ pairSum(q, x) }
            r += 2
        }
        if r < rows {
            let p = a + r * stride
            for x in 0..<pairs { sums[x] = sums[x] &+ pairSum(p, x) }
        }
    }

    /// out[i] = scale × Σ sums[i·pairsPerBlock ..< (i+1)·pairsPerBlock].
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumPairColumns(_ sums: UnsafePointer<UInt16>, pairsPerBlock h: Int, count: Int, scale: Float,
                               into out: UnsafeMutablePointer<Float>) {
        let raw = UnsafeRawPointer(sums)
        @inline(__always) func word(_ i: Int) -> UInt32 {
            let v = raw.loadUnaligned(fromByteOffset: i &* 4, as: UInt32.self)
            return (v & 0xFFFF) &+ (v &>> 16)
        }
        switch h {
        case 1:
            for i in 0..<count { out[i] = Float(sums[i]) * scale }
        case 2:
            for i in 0..<count { out[i] = Float(word(i)) * scale }
        case 4:
            for i in 0..<count { out[i] = Float(word(i &* 2) &+ word(i &* 2 &+ 1)) * scale }
        default:
            if h % 2 == 0 {
                let words = h / 2
                for i in 0..<count {
                    var total: UInt32 = 0
                    for j in 0..<words { total &+= word(words * i + j) }
                    out[i] = Float(total) * scale
                }
            } else {
                for i in 0..<count {
                    var total: UInt32 = 0
                    for j in 0..<h { total &+= UInt32(sums[h * i + j]) }
                    out[i] = Float(total) * scale
                }
            }
        }
    }

    /// sums[x] = Σ rows[r][x] for r < rows, x < count (rows ≤ 255, so UInt16 cannot overflow).
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumRows(_ top: UnsafePointer<UInt8>, stride: Int, rows: Int, count: Int,
                        into sums: UnsafeMutablePointer<UInt16>) {
        var r = 0
        if rows >= 2 {
            let a = top, c = top + stride
            for x in 0..<count { sums[x] = UInt16(a[x]) &+ UInt16(c[x]) }
            r = 2
        } else {
            for x in 0..<count { sums[x] = UInt16(top[x]) }
            r = 1
        }
        while r + 4 <= rows {
            let a = top + r * stride, c = a + stride, d = c + stride, e = d + stride
            for x in 0..<count {
                sums[x] = sums[x] &+ (UInt16(a[x]) &+ UInt16(c[x])) &+ (UInt16(d[x]) &+ UInt16(e[x]))
            }
            r += 4
        }
        while r + 2 <= rows {
            let a = top + r * stride, c = a + stride
            for x in 0..<count { sums[x] = sums[x] &+ UInt16(a[x]) &+ UInt16(c[x]) }
            r += 2
        }
        if r < rows {
            let a = top + r * stride
            for x in 0..<count { sums[x] = sums[x] &+ UInt16(a[x]) }
        }
    }

    /// out[i] = scale × Σ sums[i·block ..< (i+1)·block].
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumColumns(_ sums: UnsafePointer<UInt16>, block: Int, count: Int, scale: Float,
                           into out: UnsafeMutablePointer<Float>) {
        switch block {
        case 1:
            for i in 0..<count { out[i] = Float(sums[i]) * scale }
        case 2:
            for i in 0..<count { out[i] = Float(UInt32(sums[2 * i]) &+ UInt32(sums[2 * i + 1])) * scale }
        case 4:
            for i in 0..<count {
                let s = sums + 4 * i
                out[i] = Float((UInt32(s[0]) &+ UInt32(s[1])) &+ (UInt32(s[2]) &+ UInt32(s[3]))) * scale
            }
        case 8:
            for i in 0..<count {
                let s = sums + 8 * i
                let lo = (UInt32(s[0]) &+ UInt32(s[1])) &+ (UInt32(s[2]) &+ UInt32(s[3]))
                let hi = (UInt32(s[4]) &+ UInt32(s[5])) &+ (UInt32(s[6]) &+ UInt32(s[7]))
                out[i] = Float(lo &+ hi) * scale
            }
        default:
            for i in 0..<count {
                let s = sums + block * i
                var total: UInt32 = 0
                for j in 0..<block { total &+= UInt32(s[j]) }
                out[i] = Float(total) * scale
            }
        }
    }

    private func mean(_ values: [Float]) -> Float {
        guard !values.isEmpty else { return 0 }
        var sum: Float = 0
        for v in values { sum += v }
        return sum / Float(values.count)
    }

    // MARK: - Statistics

    struct Statistics {
        var noise: Double
        var gain: Float
        var offset: Float
    }

    /// From a rotating sample of reduced pixels: the global brightness change (difference ≈
    /// offset + (gain − 1) × background, fitted through the medians of the dark and the bright
    /// half of the picture, so moving objects barely move it) and the noise (1.4826 × the
    /// median absolute deviation of the difference around those medians).
    private mutating func sampleStatistics() -> Statistics {
        let n = current.count
        let samples = min(n, Self.statisticsSamples)
        let step = max(1, n / samples)
        let phase = samplePhase % step
        samplePhase &+= 1
        let bins = Self.histogramBins
        let split = backgroundMean
        var counts = (0, 0)
        var backgroundSums: (Double, Double) = (0, 0)
        var watchedTaken = 0
        histogram.withUnsafeMutableBufferPointer { h in
            for i in h.indices { h[i] = 0 }
            current.withUnsafeBufferPointer { cur in
              background.withUnsafeBufferPointer { bg in
                watch.withUnsafeBufferPointer { watched in
                  watchedSamples.withUnsafeMutableBufferPointer { taken in
                    var i = phase
                    while i < n {
                        let b = bg[i]
                        let d = cur[i] - b
                        if watched[i] != 0 && watchedTaken < taken.count {
                            taken[watchedTaken] = abs(d)
                            watchedTaken += 1
                        }
                        let position = (d + Self.histogramRange) * Self.histogramBinsPerLevel
                        let bin = Int(max(0, min(position, Float(bins - 1))))
                        if b < split {
                            h[bin] &+= 1
                            counts.0 += 1
                            backgroundSums.0 += Double(b)
                        } else {
                            h[bins + bin] &+= 1
                            counts.1 += 1
                            backgroundSums.1 += Double(b)
                        }
                        i += step
                    }
                  }
                }
              }
            }
        }
        watchedSampleCount = watchedTaken
        if counts.0 + counts.1 > 0 {
            backgroundMean = Float((backgroundSums.0 + backgroundSums.1) / Double(counts.0 + counts.1))
        }
        return histogram.withUnsafeBufferPointer { h -> Statistics in
            let dark = UnsafeBufferPointer(rebasing: h[0..<bins])
            let bright = UnsafeBufferPointer(rebasing: h[bins..<(2 * bins)])
            let darkMedian = Self.median(dark, count: counts.0)
            let brightMedian = Self.median(bright, count: counts.1)
            let darkMAD = Self.medianAbsoluteDeviation(dark, count: counts.0, around: darkMedian)
            let brightMAD = Self.medianAbsoluteDeviation(bright, count: counts.1, around: brightMedian)
            let total = counts.0 + counts.1
            let mad = total > 0 ? (darkMAD * Double(counts.0) + brightMAD * Double(counts.1)) / Double(total) : 0
            var gain: Float = 1
            var offset: Float
            let minimum = max(16, samples / 16)
            if counts.0 >= minimum && counts.1 >= minimum {
                let darkLevel = backgroundSums.0 / Double(counts.0)
                let brightLevel = backgroundSums.1 / Double(counts.1)
                if brightLevel - darkLevel >= 8 {
                    let slope = min(max((brightMedian - darkMedian) / (brightLevel - darkLevel), -0.6), 1.5)
                    gain = Float(1 + slope)
                    offset = Float(darkMedian - slope * darkLevel)
                } else {
                    offset = Float((darkMedian * Double(counts.0) + brightMedian * Double(counts.1)) / Double(total))
                }
            } else {
                offset = Float(counts.0 >= counts.1 ? darkMedian : brightMedian)
            }
            return Statistics(noise: 1.4826 * mad, gain: gain, offset: offset)
        }
    }

    static func binValue(_ position: Double) -> Double {
        position / Double(histogramBinsPerLevel) - Double(histogramRange)
    }

    /// The median of the histogrammed differences, interpolated within its bin.
    static func median(_ h: UnsafeBufferPointer<Int32>, count: Int) -> Double {
        guard count > 0 else { return 0 }
        // Find the bin holding the middle sample in integers, then interpolate.
        let doubled = Int32(count)
        var cumulative: Int32 = 0
        for k in h.indices {
            let next = cumulative &+ h[k]
            if 2 &* next >= doubled {
                let c = Double(h[k])
                return binValue(Double(k) + (Double(count) / 2 - Double(cumulative)) / max(c, 1))
            }
            cumulative = next
        }
        return binValue(Double(h.count))
    }

    /// The median of |difference − center|, from the histogram, in grey levels.
    static func medianAbsoluteDeviation(_ h: UnsafeBufferPointer<Int32>, count: Int, around center: Double) -> Double {
        guard count > 0 else { return 0 }
        let position = (center + Double(histogramRange)) * Double(histogramBinsPerLevel)
        let k = min(max(Int(position), 0), h.count - 1)
        let target = Double(count) / 2
        var cumulative = Double(h[k])
        if cumulative >= target {
            return 0.5 * (target / cumulative) / Double(histogramBinsPerLevel)
        }
        var j = 1
        while k - j >= 0 || k + j < h.count {
            let ring = Double(k - j >= 0 ? h[k - j] : 0) + Double(k + j < h.count ? h[k + j] : 0)
            if ring > 0 && cumulative + ring >= target {
                let fraction = (target - cumulative) / ring
                return (Double(j) - 0.5 + fraction) / Double(histogramBinsPerLevel)
            }
            cumulative += ring
            j += 1
        }
        return Double(histogramRange)
    }

    // MARK: - Comparison

    /// The fraction of the watched sampled pixels that differ from the background by more
    /// than `threshold` (no compensation): what the light-switch rule compares.
    private func sampledChange(threshold: Float) -> Double {
        guard watchedSampleCount > 0 else { return 0 }
        var over: Int32 = 0
        watchedSamples.withUnsafeBufferPointer { d in
            for i in 0..<watchedSampleCount { over &+= d[i] > threshold ? 1 : 0 }
        }
        return Double(over) / Double(watchedSampleCount)
    }

    /// Marks changed pixels, updates the background, then counts the watched changed pixels
    /// with enough changed neighbours.
    private mutating func compare(threshold: Float, gain: Float, offset: Float,
                                  backgroundRate: Float, absorbRate: Float) -> Int {
        let dw = detectWidth
        let dh = detectHeight
        let paddedWidth = dw + 2
        let slope = gain - 1
        let minimumNeighbours = UInt8(clamping: settings.despeckle)
        var changedCount = 0
        current.withUnsafeBufferPointer { curBuffer in
          absorbing.withUnsafeBufferPointer { absorbBuffer in
            background.withUnsafeMutableBufferPointer { bgBuffer in
                flags.withUnsafeMutableBufferPointer { flagBuffer in
                    watch.withUnsafeBufferPointer { watchBuffer in
                        scratch.withUnsafeMutableBufferPointer { scratchBuffer in
                            guard let cur = curBuffer.baseAddress, let bg = bgBuffer.baseAddress,
                                  let absorb = absorbBuffer.baseAddress,
                                  let flag = flagBuffer.baseAddress, let watched = watchBuffer.baseAddress,
                                  let rowScratch = scratchBuffer.baseAddress else { return }
                            for y in 0..<dh {
                                let row = y * dw
                                Self.compareRow(cur + row, bg + row, absorb + row, flag + (y + 1) * paddedWidth + 1,
                                                count: dw, threshold: threshold, slope: slope, offset: offset,
                                                backgroundRate: backgroundRate, absorbRate: absorbRate)
                            }
                            for y in 0..<dh {
                                changedCount += Self.despeckleRow(flag + y * paddedWidth, width: paddedWidth, count: dw,
                                                                  watched: watched + y * dw, minimum: minimumNeighbours,
                                                                  scratch: rowScratch)
                            }
                        }
                    }
                }
            }
          }
        }
        return changedCount
    }

    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func compareRow(_ cur: UnsafePointer<Float>, _ bg: UnsafeMutablePointer<Float>,
                           _ absorbing: UnsafePointer<Float>, _ flag: UnsafeMutablePointer<UInt8>, count: Int,
                           threshold: Float, slope: Float, offset: Float,
                           backgroundRate: Float, absorbRate: Float) {
        for x in 0..<count {
            let c = cur[x]
            let b = bg[x]
            let held = absorbing[x] * absorbRate
            let predicted = b + (slope * b + offset)  // the background under this frame's light
            let residual = c - predicted
            let changed = abs(residual) > threshold
            flag[x] = changed ? 1 : 0
            // Where the picture differs the background waits, unless the change has lasted.
            // (A blend, not `changed ? held : backgroundRate`: the optimiser turns that select
            // into a branch around the load, and the loop no longer vectorises.)
            let weight: Float = changed ? 1 : 0
            bg[x] = predicted + (backgroundRate + weight * (held - backgroundRate)) * residual
        }
    }

    /// Counts the changed pixels of one row that have at least `minimum` changed neighbours.
    /// `top` is the padded row above the row being counted; `scratch` holds `count` + 8 bytes.
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func despeckleRow(_ top: UnsafePointer<UInt8>, width: Int, count: Int, watched: UnsafePointer<UInt8>,
                             minimum: UInt8, scratch: UnsafeMutablePointer<UInt8>) -> Int {
        let t = top, m = top + width, b = top + 2 * width
        // Only changed pixels count, and most rows of a quiet picture have none.
        if !anySet(m, count: width) { return 0 }
        for x in 0..<count {
            let x1 = x &+ 1, x2 = x &+ 2
            let neighbours = (t[x] &+ t[x1] &+ t[x2]) &+ (b[x] &+ b[x1] &+ b[x2]) &+ (m[x] &+ m[x2])
            let centre = m[x1] & watched[x]
            scratch[x] = centre & (neighbours >= minimum ? 1 : 0)
        }
        return countOnes(scratch, count: count)
    }

    /// Whether any of `count` bytes is non-zero, eight at a time.
    @inline(__always)
    static func anySet(_ bytes: UnsafePointer<UInt8>, count: Int) -> Bool {
        let raw = UnsafeRawPointer(bytes)
        var any: UInt64 = 0
        let words = count / 8
        for w in 0..<words { any |= raw.loadUnaligned(fromByteOffset: w &* 8, as: UInt64.self) }
        for x in (words * 8)..<count { any |= UInt64(bytes[x]) }
        return any != 0
    }

    /// The sum of `count` bytes that are each 0 or 1, eight at a time (the buffer must be
    /// readable, and zero, up to the next multiple of 8).
    @inline(__always)
    static func countOnes(_ bytes: UnsafeMutablePointer<UInt8>, count: Int) -> Int {
        let words = (count + 7) / 8
        for x in count..<(words * 8) { bytes[x] = 0 }
        let raw = UnsafeRawPointer(bytes)
        var total = 0
        var lanes: UInt64 = 0
        var pending = 0
        for w in 0..<words {
            lanes &+= raw.loadUnaligned(fromByteOffset: 8 * w, as: UInt64.self)
            pending += 1
            if pending == 255 {  // a byte lane could overflow after 256 words
                total += laneSum(lanes)
                lanes = 0
                pending = 0
            }
        }
        return total + laneSum(lanes)
    }

    /// The sum of the eight bytes of `lanes`.
    @inline(__always)
    static func laneSum(_ lanes: UInt64) -> Int {
        var l = lanes
        var sum = 0
        for _ in 0..<8 {
            sum += Int(l & 0xFF)
            l >>= 8
        }
        return sum
    }
}
