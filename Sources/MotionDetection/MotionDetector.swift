import Media

// The motion detector: per frame, the luma plane reduced (Downscaling.swift), measured against
// the background (DifferenceStatistics.swift), compared pixel by pixel (ChangeMap.swift); the
// background model, the light-switch rule and the run of frames that makes motion live here.

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
    /// When this frame scored at or over the threshold: the capture time of the first frame of
    /// its run, confirmed or not yet (a clip that this run may start must reach back to it).
    public var runStart: Timestamp?
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
    /// Fraction (0–1) of the watched picture the dynamic-background model has auto-masked
    /// (blocks that count only when most of them change at once); 0 when it is off.
    public var autoMasked: Double = 0

    public init(
        time: Timestamp, score: Double, threshold: Double, motion: Bool, motionStart: Timestamp?,
        noise: Double, pixelThreshold: Double, globalChange: Double, lightSwitch: Bool, learning: Bool,
        runStart: Timestamp? = nil
    ) {
        self.runStart = runStart ?? motionStart
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
    public var blockSize: Int { downscaler.blockSize }
    public var detectWidth: Int { downscaler.width }
    public var detectHeight: Int { downscaler.height }

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

    // The parts (Downscaling.swift, DifferenceStatistics.swift, ChangeMap.swift).
    private var downscaler = Downscaler()
    private var statistics = DifferenceStatistics()
    private var changes = ChangeMap()
    private var dynamic = DynamicBackground()

    // Buffers (sized by `configure`).
    private var current: [Float] = []  // the reduced picture
    private var background: [Float] = []  // the background model
    private var changedSeconds: [UInt8] = []  // per pixel: whole seconds it has differed without a break
    private var absorbing: [Float] = []  // per pixel: 1 once it has differed for `absorbAfter`
    private var clock: Double = 0  // seconds of capture time since the first frame
    private var dynamicSeconds: Double = 0  // capture time since the dynamic background last learned
    private var nextTick: Double = 1
    private var watch: [UInt8] = []  // 1 where watched
    private var watchedCount = 0
    private var configured = false

    // State.
    private var framesLearned = 0  // frames averaged into the background since (re)start
    private var lastTime: Timestamp?
    private var settlingUntil: Timestamp?
    private var noiseEstimate: Double?
    private var noiseFrames = 0
    private var run = 0
    private var runStart = Timestamp.zero

    /// The reduced picture of the last frame, row by row (`detectWidth × detectHeight`).
    public var reducedPicture: [Float] { current }
    /// The background model, at the reduced size.
    public var backgroundPicture: [Float] { background }
    /// The mask at the reduced size: 1 where watched.
    public var watchMap: [UInt8] { watch }
    /// The dynamic-background model's auto-mask at the reduced size: 1 where auto-masked.
    public var autoMaskMap: [UInt8] { dynamic.maskMap }

    /// A detector; `mask` (if any) is scaled to the reduced size of the first frame.
    public init(settings: MotionSettings, mask: MotionMask? = nil) {
        self.settings = settings
        self.mask = mask
    }

    /// The reduced size the detector uses for frames of `width × height`.
    public static func detectionSize(
        width: Int, height: Int, settings: MotionSettings
    )
        -> (blockSize: Int, width: Int, height: Int)
    {
        Downscaler.size(width: width, height: height, targetWidth: settings.detectWidth)
    }

    private mutating func configure(width: Int, height: Int) {
        frameWidth = width
        frameHeight = height
        downscaler = Downscaler(frameWidth: width, frameHeight: height, targetWidth: settings.detectWidth)
        let n = detectWidth * detectHeight
        current = [Float](repeating: 0, count: n)
        background = [Float](repeating: 0, count: n)
        changedSeconds = [UInt8](repeating: 0, count: n)
        absorbing = [Float](repeating: 0, count: n)
        dynamic = DynamicBackground(
            width: detectWidth, height: detectHeight, enabled: settings.dynamicBackground,
            learnTime: settings.dynamicLearn, forgetTime: settings.dynamicForget)
        clock = 0
        dynamicSeconds = 0
        nextTick = 1
        changes = ChangeMap(width: detectWidth, height: detectHeight)
        if let mask, n > 0 {
            watch = mask.scaled(toWidth: detectWidth, height: detectHeight)
        } else {
            watch = [UInt8](repeating: 1, count: n)
        }
        watchedCount = watch.reduce(0) { $0 + Int($1) }
        statistics.restart()
        framesLearned = 0
        lastTime = nil
        settlingUntil = nil
        noiseEstimate = nil
        noiseFrames = 0
        run = 0
        configured = true
    }

    /// Once per second of capture time: counts, per pixel, the seconds it has differed from
    /// the background without a break (as sampled at each tick), and marks the pixels that
    /// have differed for `absorbAfter` seconds, which the background then learns.
    private mutating func tick() {
        let dw = detectWidth
        let dh = detectHeight
        let paddedWidth = dw + 2
        let limit = UInt8(clamping: Int(Self.absorbAfter))
        changes.flags.withUnsafeBufferPointer { flag in
            changedSeconds.withUnsafeMutableBufferPointer { seconds in
                absorbing.withUnsafeMutableBufferPointer { absorb in
                    for y in 0..<dh {
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
        statistics.backgroundMean = mean(current)
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
        var result = MotionResult(
            time: time, score: 0, threshold: settings.threshold, motion: false, motionStart: nil,
            noise: noiseEstimate ?? 0, pixelThreshold: 0, globalChange: 0,
            lightSwitch: false, learning: true)
        let n = detectWidth * detectHeight
        guard n > 0, watchedCount > 0 else { return result }

        downscaler.reduce(luma, into: &current)

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

        let stats = statistics.measure(current, background: background, watch: watch)
        let measuredNoise = stats.noise
        let noiseForThreshold = noiseEstimate ?? measuredNoise
        let pixelThreshold =
            settings.pixelThreshold > 0
            ? settings.pixelThreshold
            : max(Self.minimumPixelThreshold, settings.noiseMultiplier * noiseForThreshold)

        let globalChange = statistics.sampledChange(threshold: Float(pixelThreshold))
        changes.mark(
            current, against: &background, absorbing: absorbing, limit: dynamic.limit,
            threshold: Float(pixelThreshold), gain: stats.gain, offset: stats.offset,
            backgroundRate: backgroundRate, absorbRate: absorbRate)
        dynamic.gate(&changes.counted)
        let counted = changes.count(watch: watch, despeckle: settings.despeckle)
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
            // Follow the picture frame by frame; learn it afresh once it is steady. The
            // dynamic model keeps what it learned: the foliage still moves under the new light.
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
        result.autoMasked = dynamic.maskedShare
        // The dynamic background learns, and recomputes its thresholds for the frames to come,
        // at most every `DynamicBackground.interval`: its times are seconds.
        dynamicSeconds += dt
        if dynamicSeconds >= DynamicBackground.interval {
            dynamic.learn(
                current, background: background, changed: changes.flags, counted: changes.counted,
                threshold: Float(pixelThreshold), dt: dynamicSeconds)
            dynamic.prepare(threshold: Float(pixelThreshold), watch: watch)
            dynamicSeconds = 0
        }

        if result.score >= settings.threshold {
            if run == 0 { runStart = time }
            run += 1
            result.runStart = runStart
        } else {
            run = 0
        }
        if run >= settings.minFrames {
            result.motion = true
            result.motionStart = runStart
        }
        return result
    }

    private func mean(_ values: [Float]) -> Float {
        guard !values.isEmpty else { return 0 }
        var sum: Float = 0
        for v in values { sum += v }
        return sum / Float(values.count)
    }
}
