import H264

extension Settings {
    /// The `encoder` section: what every encoder backend shares, and each backend's own
    /// settings.
    public struct Encoder: Equatable, Sendable {
        /// Seconds of capture time between keyframes (`encoder.keyframe_interval`): the
        /// pipeline's keyframe schedule, whichever backend encodes.
        public var keyframeInterval: Double
        /// Which encoder records (`encoder.backend`).
        public var backend: EncoderBackend
        /// The hardware encoder's device (`encoder.device`); nil to find the first one.
        public var device: String?
        /// libx264's settings.
        public var x264: EncoderSettings
        /// The hardware encoder's settings (`encoder.bitrate`, `encoder.profile`, the interval).
        public var hardware: HardwareEncoderSettings
    }

    /// The `encoder.*` values, typed and checked where the schema's ranges cannot (the
    /// tunings, which x264 combines only so far).
    static func encoder(_ v: ConfigValues) throws(ConfigurationError) -> Encoder {
        let keyframeInterval = v.number("encoder.keyframe_interval")
        let tune = v.text("encoder.tune")
        let tunes = tune == "none" ? [] : try tuneList(tune, v)
        let psychovisual = tunes.filter(\.isPsychovisual)
        if psychovisual.count > 1 {
            throw v.error(
                "encoder.tune",
                "encoder.tune = \(tunes.map(\.rawValue).joined(separator: ",")) combines \(psychovisual.count) psychovisual tunings: "
                    + "keep at most one of film, animation, grain, stillimage, psnr, ssim (zerolatency and fastdecode combine with any)"
            )
        }
        // The VBV buffer holds one keyframe interval at the maximum rate.
        let maxBitrate = v.integer("encoder.max_bitrate")
        let rateCap: EncoderSettings.RateCap =
            maxBitrate == 0
            ? .uncapped
            : .vbv(
                maxBitrateKbps: maxBitrate, bufferKbit: max(1, Int((Double(maxBitrate) * keyframeInterval).rounded())))
        let x264 = EncoderSettings(
            preset: try choice("encoder.preset", v), tune: tunes, profile: try choice("encoder.profile", v),
            crf: v.number("encoder.crf"), rateCap: rateCap, threads: v.integer("encoder.threads"))
        let device = v.text("encoder.device")
        let hardware = HardwareEncoderSettings(
            bitrateKbps: v.integer("encoder.bitrate"), profile: x264.profile, keyframeInterval: keyframeInterval)
        return Encoder(
            keyframeInterval: keyframeInterval, backend: try choice("encoder.backend", v),
            device: device.isEmpty ? nil : device, x264: x264, hardware: hardware)
    }

    /// The tunings in `list` (`encoder.tune`): names joined by commas, each once; empty for none.
    private static func tuneList(_ list: String, _ v: ConfigValues) throws(ConfigurationError) -> [EncoderSettings.Tune]
    {
        var tunes: [EncoderSettings.Tune] = []
        for part in list.split(separator: ",") {
            let name = String(part.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
            guard let value = EncoderSettings.Tune(rawValue: name) else {
                throw v.error(
                    "encoder.tune",
                    "encoder.tune = \(list) names '\(name)', which is not an x264 tuning: use one or more of "
                        + EncoderSettings.Tune.allCases.map(\.rawValue).joined(separator: ", ") + ", joined by commas")
            }
            if !tunes.contains(value) { tunes.append(value) }
        }
        return tunes
    }

    /// The value of the choice setting `key` (the schema allows only `T`'s names).
    static func choice<T: RawRepresentable & CaseIterable>(
        _ key: String, _ v: ConfigValues
    ) throws(ConfigurationError) -> T
    where T.RawValue == String {
        let text = v.text(key)
        guard let value = T(rawValue: text) else {
            throw v.error(
                key,
                "\(key) = \"\(text)\" is not allowed — use one of "
                    + T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))
        }
        return value
    }
}
