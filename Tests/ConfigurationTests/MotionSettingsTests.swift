import Testing

@testable import Configuration

/// The motion and event settings: every invalid value is reported under its own key, with
/// what is wrong and how to fix it — by the schema's ranges, or by Settings for what a range
/// cannot say (a pixel threshold between 0 and 1, a threshold not below the light-switch
/// fraction).
@Suite struct MotionSettingsTests {
    @Test func defaultsAreValid() throws {
        let defaults = try Settings.defaults()
        #expect(try defaults.motion == load("").motion)
        #expect(defaults.motion.threshold < defaults.motion.lightSwitchFraction)
        #expect(
            ConfigSchema.keys.filter { $0.section == "motion" }.map(\.name) == [
                "motion.detect_width", "motion.threshold", "motion.pixel_threshold", "motion.noise_multiplier",
                "motion.background_rate", "motion.min_frames", "motion.light_switch_fraction", "motion.despeckle",
                "motion.mask", "motion.dynamic_background", "motion.dynamic_learn", "motion.dynamic_forget",
            ])
    }

    /// One invalid setting each: the key its error must name, and the whole message.
    static let invalid: [(String, String, String)] = [
        (
            "motion.detect_width", "motion = { detect_width = 8; };",
            "motion.detect_width = 8 is out of range — use a whole number from 16 to 1024"
        ),
        (
            "motion.threshold", "motion = { threshold = 0; };",
            "motion.threshold = 0.0 is out of range — use a number from 0.0001 to 0.5"
        ),
        (
            "motion.threshold", "motion = { threshold = 1e999; };",
            "motion.threshold = inf is out of range — use a number from 0.0001 to 0.5"
        ),
        (
            "motion.pixel_threshold", "motion = { pixel_threshold = 0.5; };",
            "motion.pixel_threshold: 0.5 is out of range — use 0 to derive it from the measured noise, or grey levels from 1 to 255"
        ),
        (
            "motion.noise_multiplier", "motion = { noise_multiplier = 40; };",
            "motion.noise_multiplier = 40.0 is out of range — use a number from 1.0 to 20.0"
        ),
        (
            "motion.background_rate", "motion = { background_rate = 0; };",
            "motion.background_rate = 0.0 is out of range — use a number from 0.001 to 10.0"
        ),
        (
            "motion.min_frames", "motion = { min_frames = 0; };",
            "motion.min_frames = 0 is out of range — use a whole number from 1 to 100"
        ),
        (
            "motion.light_switch_fraction", "motion = { light_switch_fraction = 2; };",
            "motion.light_switch_fraction = 2.0 is out of range — use a number from 0.05 to 1.0"
        ),
        (
            "motion.threshold", "motion = { threshold = 0.3; light_switch_fraction = 0.2; };",
            "motion.threshold: 0.3 is not below motion.light_switch_fraction (0.2), so nothing could ever trigger — lower motion.threshold or raise motion.light_switch_fraction"
        ),
        (
            "motion.despeckle", "motion = { despeckle = 9; };",
            "motion.despeckle = 9 is out of range — use a whole number from 0 to 8"
        ),
        (
            "recording.post_roll", "recording = { post_roll = -1; };",
            "recording.post_roll = -1.0 is out of range — use a number from 0.0 to 300.0"
        ),
        (
            "recording.max_clip", "recording = { max_clip = 1; };",
            "recording.max_clip = 1.0 is out of range — use a number from 10.0 to 3600.0"
        ),
    ]

    @Test(arguments: invalid)
    func invalidSettingNamesItsKey(key: String, text: String, message: String) {
        guard let error = failure(text) else {
            Issue.record("accepted: \(text)")
            return
        }
        #expect(error.message.hasPrefix(key + " ") || error.message.hasPrefix(key + ":"), "\(error)")
        #expect(error.message == message)
        #expect(error.line == 1)
    }
}
