import Media
/// How the motion detector decides. Each field is the config key `motion.<key>` named in
/// its documentation; `validate()` checks the ranges given there.
public struct MotionSettings: Sendable, Equatable {
    /// `motion.detect_width` — width in pixels of the reduced picture the detector works on;
    /// the height follows the picture's aspect. The luma plane is averaged over square blocks
    /// of `b × b` pixels, `b` the largest whole number that still gives at least this many
    /// columns (640×480 → 160×120, 1280×720 → 160×90, 1920×1080 → 160×90); blocks of 4
    /// pixels and more average every other row. Larger sees smaller things and costs more.
    /// Default 160, range 16–1024. A picture narrower than this is used at full size.
    public var detectWidth: Int = 160

    /// `motion.threshold` — the score that counts as motion: the fraction (0–1) of the watched
    /// picture that must change. Default 0.005 (0.5 %), range 0.0001–0.5, and below
    /// `light_switch_fraction`. `vigil analyze --plot` shows the score to pick it by.
    public var threshold: Double = 0.005

    /// `motion.pixel_threshold` — grey levels (0–255) by which a pixel of the reduced picture
    /// must differ from the background to count as changed. 0 (default) derives it from the
    /// measured noise: `noise_multiplier × noise`. Range 0 or 1–255.
    public var pixelThreshold: Double = 0

    /// `motion.noise_multiplier` — with `pixel_threshold = 0`, the per-pixel threshold is
    /// this many times the measured noise (the standard deviation of picture − background at
    /// the reduced size), but never below 2 grey levels. Default 4, range 1–20.
    public var noiseMultiplier: Double = 4

    /// `motion.background_rate` — how fast the background model learns the picture where it
    /// has not changed, per second of capture time (1 / time constant): 0.2 learns 63 % of a
    /// small change in 5 s. Where the picture differs from the background it does not learn,
    /// so a passing object leaves no trail; a change that stays 30 s (a parked car) is then
    /// learned within a few seconds. A global change of light is followed at once, whatever
    /// the rate. Default 0.2, range 0.001–10.
    public var backgroundRate: Double = 0.2

    /// `motion.min_frames` — motion is declared after this many consecutive frames with a
    /// score at or over `threshold`; the event's trigger time is the first of them.
    /// Default 2, range 1–100.
    public var minFrames: Int = 2

    /// `motion.light_switch_fraction` — when at least this fraction of the watched picture
    /// changes at once, it is taken for a change of light (a lamp, the sun, the camera's
    /// exposure): the background is re-learned and nothing triggers. Default 0.5, range
    /// 0.05–1 (1 turns the suppression off unless every pixel changes), above `threshold`.
    public var lightSwitchFraction: Double = 0.5

    /// `motion.despeckle` — a changed pixel counts only if at least this many of its 8
    /// neighbours changed too, so isolated pixels (noise, a raindrop) do not count.
    /// 0 counts every changed pixel. Default 2, range 0–8.
    public var despeckle: Int = 2

    /// `motion.mask` — path of a PGM image (P5 or P2, any size: it is scaled to the reduced
    /// picture): black is ignored, white (at least half the maximum value) is watched.
    /// Empty (default): the whole picture is watched. Load it with `MotionMask(pgm:source:)`.
    public var mask: String = ""

    public init() {}

    /// The first problem `problems()` finds, thrown.
    public func validate() throws(MotionSettingsError) {
        if let first = problems().first { throw first }
    }

    /// Every problem with these settings, in key order; empty when they are valid.
    public func problems() -> [MotionSettingsError] {
        var found: [MotionSettingsError] = []
        func check(_ ok: Bool, _ key: String, _ problem: @autoclosure () -> String, _ fix: @autoclosure () -> String) {
            if !ok { found.append(MotionSettingsError(key: "motion." + key, problem: problem(), fix: fix())) }
        }
        check((16...1024).contains(detectWidth), "detect_width", "\(detectWidth) is out of range",
              "use a width in pixels from 16 to 1024 (default 160)")
        check(threshold.isFinite && threshold >= 0.0001 && threshold <= 0.5, "threshold",
              "\(threshold) is out of range", "use a fraction of the picture from 0.0001 to 0.5, e.g. 0.005 for 0.5 %")
        check(pixelThreshold.isFinite && (pixelThreshold == 0 || (pixelThreshold >= 1 && pixelThreshold <= 255)),
              "pixel_threshold", "\(pixelThreshold) is out of range",
              "use 0 to derive it from the measured noise, or grey levels from 1 to 255")
        check(noiseMultiplier.isFinite && noiseMultiplier >= 1 && noiseMultiplier <= 20, "noise_multiplier",
              "\(noiseMultiplier) is out of range", "use a factor from 1 to 20 (default 4)")
        check(backgroundRate.isFinite && backgroundRate >= 0.001 && backgroundRate <= 10, "background_rate",
              "\(backgroundRate) is out of range", "use a rate per second from 0.001 to 10 (default 0.2)")
        check((1...100).contains(minFrames), "min_frames", "\(minFrames) is out of range",
              "use a number of frames from 1 to 100 (default 2)")
        check(lightSwitchFraction.isFinite && lightSwitchFraction >= 0.05 && lightSwitchFraction <= 1,
              "light_switch_fraction", "\(lightSwitchFraction) is out of range",
              "use a fraction of the picture from 0.05 to 1 (default 0.5)")
        if threshold.isFinite && lightSwitchFraction.isFinite && threshold >= lightSwitchFraction {
            found.append(MotionSettingsError(
                key: "motion.threshold",
                problem: "\(threshold) is not below motion.light_switch_fraction (\(lightSwitchFraction)), so nothing could ever trigger",
                fix: "lower motion.threshold or raise motion.light_switch_fraction"))
        }
        check((0...8).contains(despeckle), "despeckle", "\(despeckle) is out of range",
              "use a number of neighbours from 0 (off) to 8 (default 2)")
        return found
    }

    /// The effective settings as config keys and values, in the order of the documentation
    /// (for `vigil check`).
    public var keyValues: [KeyValue] {
        [
            KeyValue("motion.detect_width", String(detectWidth)),
            KeyValue("motion.threshold", DecimalText.short(threshold, 6)),
            KeyValue("motion.pixel_threshold", DecimalText.short(pixelThreshold, 3)),
            KeyValue("motion.noise_multiplier", DecimalText.short(noiseMultiplier, 3)),
            KeyValue("motion.background_rate", DecimalText.short(backgroundRate, 4)),
            KeyValue("motion.min_frames", String(minFrames)),
            KeyValue("motion.light_switch_fraction", DecimalText.short(lightSwitchFraction, 4)),
            KeyValue("motion.despeckle", String(despeckle)),
            KeyValue("motion.mask", "\"" + mask + "\""),
        ]
    }
}

/// One effective setting, for display.
public struct KeyValue: Sendable, Equatable, CustomStringConvertible {
    public var key: String
    public var value: String
    public init(_ key: String, _ value: String) {
        self.key = key
        self.value = value
    }
    public var description: String { "\(key) = \(value);" }
}

/// An invalid setting: which key, what is wrong, and how to fix it.
public struct MotionSettingsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The full config key, e.g. `motion.threshold`.
    public var key: String
    public var problem: String
    public var fix: String
    public init(key: String, problem: String, fix: String) {
        self.key = key
        self.problem = problem
        self.fix = fix
    }
    public var description: String { "\(key): \(problem) — \(fix)" }
}
