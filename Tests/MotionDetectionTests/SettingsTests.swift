import Media
import Testing
import TestSupport
@testable import MotionDetection

@Suite struct SettingsTests {
    @Test func defaultsAreValid() throws {
        try MotionSettings().validate()
        try EventSettings().validate()
        #expect(MotionSettings().keyValues.map(\.key) == [
            "motion.detect_width", "motion.threshold", "motion.pixel_threshold", "motion.noise_multiplier",
            "motion.background_rate", "motion.min_frames", "motion.light_switch_fraction", "motion.despeckle",
            "motion.mask",
        ])
    }

    /// One invalid setting each, with the key its error must name.
    static let invalid: [(String, MotionSettings)] = {
        func with(_ change: (inout MotionSettings) -> Void) -> MotionSettings {
            var s = MotionSettings()
            change(&s)
            return s
        }
        return [
            ("motion.detect_width", with { $0.detectWidth = 8 }),
            ("motion.threshold", with { $0.threshold = 0 }),
            ("motion.threshold", with { $0.threshold = .nan }),
            ("motion.pixel_threshold", with { $0.pixelThreshold = 0.5 }),
            ("motion.noise_multiplier", with { $0.noiseMultiplier = 40 }),
            ("motion.background_rate", with { $0.backgroundRate = 0 }),
            ("motion.min_frames", with { $0.minFrames = 0 }),
            ("motion.light_switch_fraction", with { $0.lightSwitchFraction = 2 }),
            ("motion.threshold", with { $0.threshold = 0.3; $0.lightSwitchFraction = 0.2 }),
            ("motion.despeckle", with { $0.despeckle = 9 }),
        ]
    }()

    @Test(arguments: invalid)
    func invalidSettingNamesItsKey(key: String, settings: MotionSettings) {
        #expect(throws: MotionSettingsError.self) { try settings.validate() }
        let problems = settings.problems()
        #expect(problems.map(\.key).contains(key), "\(problems)")
        #expect(problems.allSatisfy { $0.description.hasPrefix($0.key + ": ") && !$0.fix.isEmpty })
    }

    @Test func eventSettingsRanges() {
        #expect(EventSettings(postRoll: .s(-1), maxClip: .s(60)).problems().map(\.key) == ["recording.post_roll"])
        #expect(EventSettings(postRoll: .s(5), maxClip: .s(1)).problems().map(\.key) == ["recording.max_clip"])
    }
}
