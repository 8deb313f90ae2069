// The detector's settings, typed: what each one means to the detector. Their configuration
// keys (the `motion` section), ranges and defaults, and the checks between them, belong to
// Configuration (ConfigSchema and Settings), which builds these values.

/// How the motion detector decides.
public struct MotionSettings: Sendable, Equatable {
    /// Width in pixels of the reduced picture the detector works on (`motion.detect_width`);
    /// the height follows the picture's aspect. The luma plane is averaged over square blocks
    /// of `b × b` pixels, `b` the largest whole number that still gives at least this many
    /// columns (for 160: 640×480 → 160×120, 1280×720 → 160×90, 1920×1080 → 160×90); blocks of
    /// 4 pixels and more average every other row. Larger sees smaller things and costs more.
    /// A picture narrower than this is used at full size.
    public var detectWidth: Int

    /// The score that counts as motion (`motion.threshold`): the fraction (0–1) of the watched
    /// picture that must change. It must be below `lightSwitchFraction`, or nothing could ever
    /// trigger. `vigil analyze --plot` shows the score to pick it by.
    public var threshold: Double

    /// Grey levels (0–255) by which a pixel of the reduced picture must differ from the
    /// background to count as changed (`motion.pixel_threshold`). 0 derives it from the
    /// measured noise: `noiseMultiplier × noise`.
    public var pixelThreshold: Double

    /// With `pixelThreshold` 0, the per-pixel threshold is this many times the measured noise
    /// (the standard deviation of picture − background at the reduced size), but never below
    /// `MotionDetector.minimumPixelThreshold` grey levels (`motion.noise_multiplier`).
    public var noiseMultiplier: Double

    /// How fast the background model learns the picture where it has not changed, per second
    /// of capture time (1 / time constant; `motion.background_rate`): 0.2 learns 63 % of a
    /// small change in 5 s. Where the picture differs from the background it does not learn,
    /// so a passing object leaves no trail; a change that stays `MotionDetector.absorbAfter`
    /// seconds (a parked car) is then learned within a few seconds. A global change of light
    /// is followed at once, whatever the rate.
    public var backgroundRate: Double

    /// Motion is declared after this many consecutive frames with a score at or over
    /// `threshold` (`motion.min_frames`); the event's trigger time is the first of them.
    public var minFrames: Int

    /// When at least this fraction of the watched picture changes at once, it is taken for a
    /// change of light (a lamp, the sun, the camera's exposure): the background is re-learned
    /// and nothing triggers (`motion.light_switch_fraction`). 1 turns the suppression off
    /// unless every pixel changes.
    public var lightSwitchFraction: Double

    /// A changed pixel counts only if at least this many of its 8 neighbours changed too, so
    /// isolated pixels (noise, a raindrop) do not count (`motion.despeckle`). 0 counts every
    /// changed pixel.
    public var despeckle: Int

    /// Path of a PGM image (P5 or P2, any size: it is scaled to the reduced picture): black is
    /// ignored, white (at least half the maximum value) is watched (`motion.mask`). Empty: the
    /// whole picture is watched. Load it with `MotionMask(pgm:source:)`.
    public var mask: String

    /// Whether the detector learns where the picture moves by itself (foliage, water, a flag,
    /// flicker) and stops counting that motion (`motion.dynamic_background`): each reduced
    /// pixel learns how far it usually strays from the background (a high quantile of the
    /// difference, learned only while the pixel comes and goes — goes from changed to unchanged
    /// and back, or changes its value between samples — and not where the block counts as
    /// motion, so an object that stops or passes is not learned) and its threshold rises to twice that (the largest among it and its
    /// neighbours); a block of 8 × 8 reduced pixels where most thresholds are raised is
    /// auto-masked and counts only when at least 20 % of it changes at once, as an object
    /// does (DynamicBackground.swift). False: every pixel has the one pixel threshold.
    public var dynamicBackground: Bool

    /// Seconds in which a pixel's learned spread grows by a factor e while the picture keeps
    /// straying further (`motion.dynamic_learn`): how fast a moving region is learned.
    /// Shorter learns a gust sooner, and a lingering object sooner too.
    public var dynamicLearn: Double

    /// Seconds in which a pixel's learned spread shrinks by a factor e while the picture
    /// stays closer (`motion.dynamic_forget`): how long a region that moved stays masked
    /// after it calms down. With `dynamicLearn` it sets the quantile learned: the threshold
    /// is exceeded about `learn / (learn + forget)` of the time.
    public var dynamicForget: Double

    public init(
        detectWidth: Int, threshold: Double, pixelThreshold: Double, noiseMultiplier: Double,
        backgroundRate: Double, minFrames: Int, lightSwitchFraction: Double, despeckle: Int, mask: String,
        dynamicBackground: Bool, dynamicLearn: Double, dynamicForget: Double
    ) {
        self.dynamicBackground = dynamicBackground
        self.dynamicLearn = dynamicLearn
        self.dynamicForget = dynamicForget
        self.detectWidth = detectWidth
        self.threshold = threshold
        self.pixelThreshold = pixelThreshold
        self.noiseMultiplier = noiseMultiplier
        self.backgroundRate = backgroundRate
        self.minFrames = minFrames
        self.lightSwitchFraction = lightSwitchFraction
        self.despeckle = despeckle
        self.mask = mask
    }
}
