import H264
import Testing

@testable import Configuration

/// The `encoder` section becomes the pipeline's keyframe interval and x264's typed settings;
/// what is wrong in it is reported at its line, naming the setting and the fix.
@Suite struct EncoderSettingsTests {
    @Test func defaults() throws {
        let encoder = try load("").encoder
        #expect(encoder.keyframeInterval == 1)
        #expect(
            encoder.x264
                == EncoderSettings(
                    preset: .ultrafast, tune: [.zerolatency], profile: .high, crf: 23, rateCap: .uncapped, threads: 0))
    }

    @Test func valuesAreTyped() throws {
        let encoder = try load(
            """
            encoder = { preset = "veryfast"; tune = "film, fastdecode"; profile = "baseline"; crf = 28;
                        threads = 2; keyframe_interval = 0.5; };
            """
        ).encoder
        #expect(encoder.keyframeInterval == 0.5)
        #expect(
            encoder.x264
                == EncoderSettings(
                    preset: .veryfast, tune: [.film, .fastdecode], profile: .baseline, crf: 28, rateCap: .uncapped,
                    threads: 2))
    }

    /// Names joined by commas, spaces around them ignored, each kept once; "none" and ""
    /// are no tuning.
    @Test(
        arguments: [
            ("zerolatency, fastdecode", [.zerolatency, .fastdecode]),
            ("film,zerolatency,film", [.film, .zerolatency]),
            ("none", []),
            ("", []),
        ] as [(String, [EncoderSettings.Tune])])
    func tuningsParse(text: String, tunes: [EncoderSettings.Tune]) throws {
        #expect(try load("encoder = { tune = \"\(text)\"; };").encoder.x264.tune == tunes)
    }

    /// A maximum bit rate caps x264's VBV with a buffer of one keyframe interval at that
    /// rate (at least 1 kbit); 0 is no cap.
    @Test(
        arguments: [
            ("max_bitrate = 2000;", .vbv(maxBitrateKbps: 2000, bufferKbit: 2000)),
            ("max_bitrate = 2000; keyframe_interval = 0.5;", .vbv(maxBitrateKbps: 2000, bufferKbit: 1000)),
            ("max_bitrate = 3; keyframe_interval = 0.25;", .vbv(maxBitrateKbps: 3, bufferKbit: 1)),
            ("max_bitrate = 1; keyframe_interval = 0.25;", .vbv(maxBitrateKbps: 1, bufferKbit: 1)),
            ("max_bitrate = 0;", .uncapped),
        ] as [(String, EncoderSettings.RateCap)])
    func maximumBitrateSizesTheBuffer(text: String, cap: EncoderSettings.RateCap) throws {
        #expect(try load("encoder = { \(text) };").encoder.x264.rateCap == cap)
    }

    /// Each wrong value, by the schema's range or by the checks across tunings, gives its
    /// line and the whole message `vigil check` prints.
    @Test(
        arguments: [
            ("crf = 0.0;", "encoder.crf = 0.0 is out of range — use a number from 1.0 to 51.0"),
            ("crf = 52;", "encoder.crf = 52.0 is out of range — use a number from 1.0 to 51.0"),
            ("max_bitrate = -1;", "encoder.max_bitrate = -1 is out of range — use a whole number from 0 to 200000"),
            (
                "max_bitrate = 900000;",
                "encoder.max_bitrate = 900000 is out of range — use a whole number from 0 to 200000"
            ),
            ("threads = -1;", "encoder.threads = -1 is out of range — use a whole number from 0 to 16"),
            ("threads = 65;", "encoder.threads = 65 is out of range — use a whole number from 0 to 16"),
            (
                "keyframe_interval = 0.1;",
                "encoder.keyframe_interval = 0.1 is out of range — use a number from 0.25 to 1.0"
            ),
            (
                "keyframe_interval = 11;",
                "encoder.keyframe_interval = 11.0 is out of range — use a number from 0.25 to 1.0"
            ),
            (
                "tune = \"film,grain\";",
                "encoder.tune = film,grain combines 2 psychovisual tunings: keep at most one of film, animation, grain, stillimage, psnr, ssim (zerolatency and fastdecode combine with any)"
            ),
            (
                "tune = \"zerolatency, film, psnr, ssim\";",
                "encoder.tune = zerolatency,film,psnr,ssim combines 3 psychovisual tunings: keep at most one of"
            ),
            (
                "tune = \"zerolatency,fast\";",
                "encoder.tune = zerolatency,fast names 'fast', which is not an x264 tuning: use one or more of film, animation, grain, stillimage, psnr, ssim, fastdecode, zerolatency, joined by commas"
            ),
            (
                "preset = \"quick\";",
                "encoder.preset = \"quick\" is not allowed — use one of \"ultrafast\", \"superfast\", \"veryfast\", \"faster\", \"fast\", \"medium\", \"slow\", \"slower\", \"veryslow\", \"placebo\""
            ),
            (
                "profile = \"high10\";",
                "encoder.profile = \"high10\" is not allowed — use one of \"baseline\", \"main\", \"high\""
            ),
        ] as [(String, String)])
    func invalidSettingIsNamedAtItsLine(text: String, message: String) throws {
        let error = try #require(failure("encoder = {\n  # the line the error names:\n  \(text)\n};\n"))
        #expect(error.line == 3, "\(error)")
        #expect(error.description.hasPrefix("test.conf:3: " + message), "\(error)")
    }

    /// The schema's choices are x264's own names, so every one it accepts is typed.
    @Test func choicesAreX264Names() throws {
        for preset in EncoderSettings.Preset.allCases {
            #expect(try load("encoder = { preset = \"\(preset.rawValue)\"; };").encoder.x264.preset == preset)
        }
        for profile in EncoderSettings.Profile.allCases {
            #expect(try load("encoder = { profile = \"\(profile.rawValue)\"; };").encoder.x264.profile == profile)
        }
    }
}
