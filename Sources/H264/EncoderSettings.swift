/// How libx264 trades CPU for quality and bytes: typed settings, as x264 takes them. Where
/// they come from — the configuration's `encoder.*` keys, their defaults and ranges, and the
/// checks across them — is Configuration's business.
public struct EncoderSettings: Hashable, Sendable {
    /// x264 speed preset. Faster presets use less CPU and more bytes for the same quality;
    /// on a Raspberry Pi 5 (no hardware encoder) only `ultrafast` keeps up with 1080p30 on
    /// one core.
    public enum Preset: String, CaseIterable, Sendable {
        case ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow, placebo
    }

    /// x264 tuning. `zerolatency` means no frame lookahead, so each frame comes out of the
    /// encoder as soon as it is encoded.
    public enum Tune: String, CaseIterable, Sendable {
        case film, animation, grain, stillimage, psnr, ssim, fastdecode, zerolatency

        /// The psychovisual tunings, of which x264 takes at most one; `fastdecode` and
        /// `zerolatency` combine with any.
        public var isPsychovisual: Bool { self != .fastdecode && self != .zerolatency }
    }

    /// H.264 profile limit: the stream uses no feature beyond it (`ultrafast` uses baseline
    /// features only, whatever the limit).
    public enum Profile: String, CaseIterable, Sendable {
        case baseline, main, high
    }

    /// Whether the bit rate is capped. A cap (x264's VBV) makes busy scenes blockier
    /// instead of larger.
    public enum RateCap: Hashable, Sendable {
        case uncapped
        /// The VBV maximum rate in kbit/s, and the VBV buffer in kbit.
        case vbv(maxBitrateKbps: Int, bufferKbit: Int)
    }

    public var preset: Preset
    /// Tunings joined for x264; empty for none.
    public var tune: [Tune]
    public var profile: Profile
    /// Constant rate factor: the quality to keep, lower is better and larger (each ±6
    /// roughly halves or doubles the bytes).
    public var crf: Double
    public var rateCap: RateCap
    /// Encoder threads; 0 lets x264 choose from the number of cores. With `zerolatency`
    /// the threads split each frame into slices.
    public var threads: Int

    public init(preset: Preset, tune: [Tune], profile: Profile, crf: Double, rateCap: RateCap, threads: Int) {
        self.preset = preset
        self.tune = tune
        self.profile = profile
        self.crf = crf
        self.rateCap = rateCap
        self.threads = threads
    }
}
