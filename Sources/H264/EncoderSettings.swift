/// How the H.264 encoder trades CPU for quality and bytes. Each field maps one
/// `encoder.*` setting of the configuration file; `validate()` checks them all and names the
/// setting that is wrong.
public struct EncoderSettings: Hashable, Sendable {
    /// x264 speed preset (`encoder.preset`). Faster presets use less CPU and more bytes for
    /// the same quality. Default `ultrafast`: on a Raspberry Pi 5 (no hardware encoder) it is
    /// the only preset that keeps up with 1080p30 on one core.
    public enum Preset: String, CaseIterable, Sendable {
        case ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow, placebo
    }

    /// x264 tuning (`encoder.tune`, several may be joined with commas). Default `zerolatency`:
    /// no frame lookahead, so each frame comes out of the encoder as soon as it is encoded.
    /// At most one of `film`, `animation`, `grain`, `stillimage`, `psnr`, `ssim`.
    public enum Tune: String, CaseIterable, Sendable {
        case film, animation, grain, stillimage, psnr, ssim, fastdecode, zerolatency

        var isPsychovisual: Bool { self != .fastdecode && self != .zerolatency }
    }

    /// H.264 profile limit (`encoder.profile`): the stream uses no feature beyond it. Default
    /// `high`; `baseline` for the oldest hardware decoders. (`ultrafast` uses baseline
    /// features only, whatever the limit.)
    public enum Profile: String, CaseIterable, Sendable {
        case baseline, main, high
    }

    public var preset: Preset
    public var tune: [Tune]
    public var profile: Profile
    /// Constant rate factor (`encoder.crf`): the quality to keep, 1 (best, most bytes) to 51
    /// (worst). Default 23; each ±6 roughly halves or doubles the bytes.
    public var crf: Double
    /// Cap on the bit rate in kbit/s (`encoder.max_bitrate`, VBV maximum rate), 1 to 800000;
    /// nil (the default) for no cap. A cap makes busy scenes blockier instead of larger.
    public var maxBitrateKbps: Int?
    /// VBV buffer in kbit, 1 to 800000, only with `maxBitrateKbps`; nil (the default) sizes
    /// it to one keyframe interval at the maximum rate.
    public var vbvBufferKbit: Int?
    /// Encoder threads (`encoder.threads`), 0 to 64; 0 (the default) lets x264 choose from the
    /// number of cores. With `zerolatency` the threads split each frame into slices.
    public var threads: Int
    /// Seconds of capture time between keyframes (`encoder.keyframe_interval`), 0.1 to 10;
    /// default 1. A clip can start only at a keyframe, so this bounds how much earlier than
    /// the pre-roll point a clip may start. Keyframes cost bytes: at 1 s they are about
    /// two thirds of the stream.
    public var keyframeInterval: Double

    public init(preset: Preset = .ultrafast, tune: [Tune] = [.zerolatency], profile: Profile = .high,
                crf: Double = 23, maxBitrateKbps: Int? = nil, vbvBufferKbit: Int? = nil,
                threads: Int = 0, keyframeInterval: Double = 1.0) {
        self.preset = preset
        self.tune = tune
        self.profile = profile
        self.crf = crf
        self.maxBitrateKbps = maxBitrateKbps
        self.vbvBufferKbit = vbvBufferKbit
        self.threads = threads
        self.keyframeInterval = keyframeInterval
    }

    public static let crfRange: ClosedRange<Double> = 1...51
    public static let bitrateRange: ClosedRange<Int> = 1...800_000
    public static let threadsRange: ClosedRange<Int> = 0...64
    public static let keyframeIntervalRange: ClosedRange<Double> = 0.1...10

    /// Checks every field; the error names the configuration key, the problem and the fix.
    public func validate() throws(EncoderSettingsError) {
        let psy = tune.filter(\.isPsychovisual)
        if psy.count > 1 {
            throw EncoderSettingsError(setting: "encoder.tune", value: tune.map(\.rawValue).joined(separator: ","),
                                       problem: "combines \(psy.count) psychovisual tunings",
                                       fix: "keep at most one of film, animation, grain, stillimage, psnr, ssim (zerolatency and fastdecode combine with any)")
        }
        if !crf.isFinite || !EncoderSettings.crfRange.contains(crf) {
            throw EncoderSettingsError(setting: "encoder.crf", value: String(crf), problem: "is out of range",
                                       fix: "use a number from 1 (best quality, most bytes) to 51; 23 is the default" +
                                            (crf == 0 ? " (0, lossless, needs a High 4:4:4 profile few players decode)" : ""))
        }
        if let rate = maxBitrateKbps, !EncoderSettings.bitrateRange.contains(rate) {
            throw EncoderSettingsError(setting: "encoder.max_bitrate", value: String(rate), problem: "is out of range",
                                       fix: "give kbit/s from 1 to 800000, or leave it out for no cap")
        }
        if let buffer = vbvBufferKbit {
            guard maxBitrateKbps != nil else {
                throw EncoderSettingsError(setting: "encoder.vbv_buffer", value: String(buffer), problem: "is set without encoder.max_bitrate",
                                           fix: "set encoder.max_bitrate too, or leave the buffer out")
            }
            guard EncoderSettings.bitrateRange.contains(buffer) else {
                throw EncoderSettingsError(setting: "encoder.vbv_buffer", value: String(buffer), problem: "is out of range",
                                           fix: "give kbit from 1 to 800000, or leave it out to size it from the maximum bit rate")
            }
        }
        if !EncoderSettings.threadsRange.contains(threads) {
            throw EncoderSettingsError(setting: "encoder.threads", value: String(threads), problem: "is out of range",
                                       fix: "use 0 (as many as the cores suit) or a count from 1 to 64")
        }
        if !keyframeInterval.isFinite || !EncoderSettings.keyframeIntervalRange.contains(keyframeInterval) {
            throw EncoderSettingsError(setting: "encoder.keyframe_interval", value: String(keyframeInterval), problem: "is out of range",
                                       fix: "give seconds from 0.1 to 10; 1 is the default")
        }
    }

    /// The VBV buffer x264 gets, in kbit, when a maximum bit rate is set.
    var effectiveVBVBufferKbit: Int? {
        guard let rate = maxBitrateKbps else { return nil }
        if let buffer = vbvBufferKbit { return buffer }
        return max(1, min(EncoderSettings.bitrateRange.upperBound, Int((Double(rate) * keyframeInterval).rounded())))
    }
}

extension EncoderSettings.Preset {
    /// The preset named `name` (`encoder.preset`).
    public init(configValue name: String) throws(EncoderSettingsError) {
        guard let value = Self(rawValue: name) else {
            throw EncoderSettingsError(setting: "encoder.preset", value: name, problem: "is not an x264 preset",
                                       fix: "use one of " + Self.allCases.map(\.rawValue).joined(separator: ", "))
        }
        self = value
    }
}

extension EncoderSettings.Profile {
    /// The profile named `name` (`encoder.profile`).
    public init(configValue name: String) throws(EncoderSettingsError) {
        guard let value = Self(rawValue: name) else {
            throw EncoderSettingsError(setting: "encoder.profile", value: name, problem: "is not a supported H.264 profile",
                                       fix: "use one of " + Self.allCases.map(\.rawValue).joined(separator: ", "))
        }
        self = value
    }
}

extension EncoderSettings.Tune {
    /// The tunings in `list` (`encoder.tune`): names joined by commas; empty for none.
    public static func list(configValue list: String) throws(EncoderSettingsError) -> [Self] {
        var tunes: [Self] = []
        for part in list.split(separator: ",") {
            let name = part.trimmingSpaces
            guard let value = Self(rawValue: name) else {
                throw EncoderSettingsError(setting: "encoder.tune", value: list, problem: "names '\(name)', which is not an x264 tuning",
                                           fix: "use one or more of " + allCases.map(\.rawValue).joined(separator: ", ") + ", joined by commas")
            }
            if !tunes.contains(value) { tunes.append(value) }
        }
        return tunes
    }
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}

/// A setting the encoder cannot use.
public struct EncoderSettingsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The configuration key, e.g. `encoder.crf`.
    public let setting: String
    /// The value given, as text.
    public let value: String
    public let problem: String
    public let fix: String

    public init(setting: String, value: String, problem: String, fix: String) {
        self.setting = setting
        self.value = value
        self.problem = problem
        self.fix = fix
    }

    public var description: String { "\(setting) = \(value) \(problem): \(fix)" }
}
