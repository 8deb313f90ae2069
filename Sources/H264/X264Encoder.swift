internal import CX264
internal import Glibc
import Media
import Synchronization

/// H.264 encoding with libx264, for a stream of frames from one source: the software
/// `VideoEncoder`, on every board.
///
/// - Timing comes from capture timestamps (passed through x264 with a nanosecond time base),
///   so a camera at 24.7 fps, or one that drops frames, gives right durations.
/// - An IDR keyframe is forced where the caller asks (`encode(_:keyframe:)`, from a
///   `KeyframeSchedule`); x264 never places keyframes of its own (infinite keyint, no scene
///   cuts), except on the first frame, which every H.264 stream starts with.
/// - No B-frames: samples come out in capture order with `dts == pts`.
/// - Output is length-prefixed (`b_annexb = 0`), one access unit per sample, copied out of
///   x264's buffer before the next call. SPS and PPS come from `x264_encoder_headers` and
///   are not repeated in the stream.
/// - NV12 and I420 frames go to x264 as they are, with their strides (x264 copies the
///   picture). Other formats are refused: `PlanarConverter` makes 4:2:0 of them first.
///
/// Not thread-safe: one encoder belongs to one thread (x264 calls block for milliseconds,
/// so run it on a dedicated thread, not in the Swift concurrency pool).
public final class X264Encoder: VideoEncoder {
    /// Picture size the encoder was opened for.
    public let width: Int
    public let height: Int
    public let settings: EncoderSettings
    /// The sequence parameter set for `avcC`, without start code or length prefix.
    public let sequenceParameterSet: [UInt8]
    /// The picture parameter set for `avcC`, without start code or length prefix.
    public let pictureParameterSet: [UInt8]

    private let handle: OpaquePointer
    private let log: X264Log
    /// The first frame's timestamp: x264's pts count nanoseconds from it.
    private var origin: Timestamp?
    private var lastTimestamp: Timestamp?
    private var isClosed = false
    /// Frames given to `encode` so far.
    public private(set) var framesIn = 0
    /// Samples returned so far.
    public private(set) var samplesOut = 0
    /// Keyframes forced so far.
    public private(set) var keyframesForced = 0

    /// The x264 API version the library was built with (`X264_BUILD`).
    public static var libraryBuild: Int { Int(CX264_build()) }

    /// The x264 version the headers describe, such as `0.164.3095 baee400`.
    public static var libraryVersion: String { X264_POINTVER }

    /// Opens an encoder for NV12 or I420 frames of `format`'s size (either of the two, with
    /// any stride, may then be given). The format's pixel aspect ratio goes into the SPS.
    public convenience init(format: VideoFormat, settings: EncoderSettings) throws(EncoderError) {
        try self.init(format: format, settings: settings, byteStream: false)
    }

    /// With `byteStream`, the samples are x264's Annex B byte stream instead — start codes, an
    /// access unit delimiter first, and with `repeatHeaders` the SPS and PPS (and x264's own
    /// SEI) before each IDR — as a hardware encoder writes it: what the tests of the Annex B
    /// conversion compare against.
    init(
        format: VideoFormat, settings: EncoderSettings, byteStream: Bool, repeatHeaders: Bool = false
    ) throws(EncoderError) {
        try X264Encoder.checkPixelFormat(format.pixelFormat)
        guard format.width % 2 == 0, format.height % 2 == 0 else {
            throw .unsupportedPicture(
                "a \(format.width)×\(format.height) picture: H.264 4:2:0 needs an even width and height; set the camera to an even size or crop the file"
            )
        }
        self.width = format.width
        self.height = format.height
        self.settings = settings
        let log = X264Log()
        self.log = log

        var param = x264_param_t()
        let tune = settings.tune.isEmpty ? nil : settings.tune.map(\.rawValue).joined(separator: ",")
        let presetStatus = settings.preset.rawValue.withCString { preset in
            if let tune { return tune.withCString { x264_param_default_preset(&param, preset, $0) } }
            return x264_param_default_preset(&param, preset, nil)
        }
        guard presetStatus == 0 else {
            throw .openFailed(
                backend: "x264",
                details:
                    "x264_param_default_preset rejected preset \(settings.preset.rawValue) with tune \(tune ?? "none")")
        }
        param.i_log_level = X264_LOG_WARNING
        CX264_param_set_log(&param, log.target)

        param.i_width = Int32(format.width)
        param.i_height = Int32(format.height)
        param.i_csp = X264_CSP_I420
        param.i_bitdepth = 8
        param.i_threads = Int32(settings.threads)
        if let sar = format.pixelAspectRatio, sar.numerator != sar.denominator,
            sar.numerator <= 65535, sar.denominator <= 65535
        {
            param.vui.i_sar_width = Int32(sar.numerator)
            param.vui.i_sar_height = Int32(sar.denominator)
        }

        // Timing from capture timestamps, in nanoseconds since the first frame: x264 passes
        // each picture's pts through to its output. Its rate control counts time by the
        // nominal rate (`b_vfr_input = 0`, as `zerolatency` sets it): with VFR input x264
        // holds one frame back to learn its duration, a frame of latency and of memory (6 MB
        // at 1080p) for a CRF encode that does not depend on durations.
        param.b_vfr_input = 0
        param.i_timebase_num = 1
        param.i_timebase_den = 1_000_000_000
        let rate =
            format.frameRate.flatMap { r in
                r.numerator > 0 && r.denominator > 0 && r.numerator <= Int64(UInt32.max)
                    && r.denominator <= Int64(UInt32.max) ? r : nil
            } ?? Rational(30, 1)
        param.i_fps_num = UInt32(rate.numerator)
        param.i_fps_den = UInt32(rate.denominator)

        // Keyframes only where we force them.
        param.i_keyint_max = X264_KEYINT_MAX_INFINITE
        param.i_scenecut_threshold = 0
        param.b_intra_refresh = 0
        param.i_bframe = 0
        param.b_open_gop = 0

        // MOV-ready output.
        param.b_annexb = byteStream ? 1 : 0
        param.b_repeat_headers = byteStream && repeatHeaders ? 1 : 0
        param.b_aud = byteStream ? 1 : 0

        param.rc.i_rc_method = X264_RC_CRF
        param.rc.f_rf_constant = Float(settings.crf)
        if case .vbv(let rate, let buffer) = settings.rateCap {
            param.rc.i_vbv_max_bitrate = Int32(rate)
            param.rc.i_vbv_buffer_size = Int32(buffer)
        }

        let profileStatus = settings.profile.rawValue.withCString { x264_param_apply_profile(&param, $0) }
        guard profileStatus == 0 else {
            throw .openFailed(
                backend: "x264", details: log.summary(orElse: "profile \(settings.profile.rawValue) cannot be applied"))
        }
        guard let handle = CX264_encoder_open(&param) else {
            throw .openFailed(backend: "x264", details: log.summary(orElse: "x264_encoder_open failed for \(format)"))
        }
        // From here the handle is ours: deinit closes it once the encoder is fully
        // initialised; until then, a failure below closes it here.
        self.handle = handle

        var nals: UnsafeMutablePointer<x264_nal_t>?
        var count: Int32 = 0
        var sps: [UInt8]?
        var pps: [UInt8]?
        if x264_encoder_headers(handle, &nals, &count) >= 0, let nals {
            for i in 0..<Int(max(count, 0)) {
                let nal = nals[i]
                guard let payload = nal.p_payload, nal.i_payload > 4 else { continue }
                let bytes = Array(UnsafeBufferPointer(start: payload + 4, count: Int(nal.i_payload) - 4))
                if nal.i_type == Int32(NAL_SPS.rawValue) { sps = bytes }
                if nal.i_type == Int32(NAL_PPS.rawValue) { pps = bytes }
            }
        }
        guard let sps, let pps else {
            x264_encoder_close(handle)
            throw .openFailed(backend: "x264", details: log.summary(orElse: "x264_encoder_headers gave no SPS and PPS"))
        }
        self.sequenceParameterSet = sps
        self.pictureParameterSet = pps
    }

    deinit {
        x264_encoder_close(handle)
    }

    /// Frames x264 holds that have not come out yet.
    public var delayedFrames: Int { Int(x264_encoder_delayed_frames(handle)) }

    /// Warnings x264 logged since the last call (it logs nothing to stderr itself).
    public func takeMessages() -> [String] { log.take() }

    /// For logs: `encoder=x264 preset=…`.
    public var logDescription: [(name: String, value: String)] {
        [("encoder", "x264"), ("preset", settings.preset.rawValue)]
    }

    /// Encodes one NV12 or I420 frame, as an IDR keyframe when `keyframe` is true; returns
    /// the sample that came out, if any (x264 may hold frames back; `flush()` returns them).
    /// The frame's buffer is not kept after the call.
    public func encode(_ frame: VideoFrame, keyframe: Bool) throws(EncoderError) -> [EncodedSample] {
        guard !isClosed else { throw .closed }
        let format = frame.format
        try X264Encoder.checkPixelFormat(format.pixelFormat)
        guard format.width == width, format.height == height else {
            throw .frameSizeMismatch(expected: "\(width)×\(height)", got: "\(format.width)×\(format.height)")
        }
        let t = frame.timestamp
        if let last = lastTimestamp, t <= last {
            throw .timestampNotIncreasing(previous: last, got: t)
        }
        let origin = self.origin ?? t
        self.origin = origin
        lastTimestamp = t

        var picture = x264_picture_t()
        x264_picture_init(&picture)
        picture.i_pts = (t - origin).nanoseconds
        if keyframe {
            picture.i_type = X264_TYPE_IDR
            keyframesForced += 1
        }

        // x264 only reads the input planes (it copies them into its own frame).
        let planes = format.planes
        let base = frame.buffer.base
        picture.img.i_csp = format.pixelFormat == .nv12 ? X264_CSP_NV12 : X264_CSP_I420
        picture.img.i_plane = Int32(planes.count)
        picture.img.plane.0 = base + planes[0].offset
        picture.img.plane.1 = base + planes[1].offset
        picture.img.plane.2 = planes.count > 2 ? base + planes[2].offset : nil
        picture.img.i_stride.0 = Int32(planes[0].stride)
        picture.img.i_stride.1 = Int32(planes[1].stride)
        picture.img.i_stride.2 = planes.count > 2 ? Int32(planes[2].stride) : 0

        framesIn += 1
        let sample = try withExtendedLifetime(frame) { () throws(EncoderError) -> EncodedSample? in
            try encodeCall(&picture)
        }
        return sample.map { [$0] } ?? []
    }

    /// Flushes the frames x264 still holds and returns their samples. The encoder takes no
    /// frames after this; the x264 handle is freed when the encoder is released.
    public func flush() throws(EncoderError) -> [EncodedSample] {
        guard !isClosed else { return [] }
        isClosed = true
        var samples: [EncodedSample] = []
        // Each call with no picture returns at most one delayed frame; bound the loop in
        // case x264 ever reports delayed frames it does not return.
        var attempts = delayedFrames + 2
        while x264_encoder_delayed_frames(handle) > 0 && attempts > 0 {
            attempts -= 1
            if let sample = try encodeCall(nil) { samples.append(sample) }
        }
        return samples
    }

    private func encodeCall(_ picture: UnsafeMutablePointer<x264_picture_t>?) throws(EncoderError) -> EncodedSample? {
        var nals: UnsafeMutablePointer<x264_nal_t>?
        var count: Int32 = 0
        var output = x264_picture_t()
        let size = x264_encoder_encode(handle, &nals, &count, picture, &output)
        guard size >= 0 else {
            throw .encodeFailed(backend: "x264", frame: framesIn, details: log.summary(orElse: ""))
        }
        guard size > 0, count > 0, let nals, let payload = nals[0].p_payload else { return nil }
        // The NAL payloads are contiguous; copy them before the next x264 call reuses the memory.
        let data = Array(UnsafeBufferPointer(start: payload, count: Int(size)))
        guard let origin else { return nil }
        samplesOut += 1
        return EncodedSample(
            data: data,
            pts: origin + Timestamp.Duration(nanoseconds: output.i_pts),
            dts: origin + Timestamp.Duration(nanoseconds: output.i_dts),
            isKeyframe: output.b_keyframe != 0)
    }

    /// x264 takes NV12 and I420 as they are; 4:2:2 would make a High 4:2:2 stream few
    /// players decode, so the caller converts it first.
    private static func checkPixelFormat(_ pixelFormat: PixelFormat) throws(EncoderError) {
        guard pixelFormat.isEncoderNative else {
            throw .unsupportedPicture(
                "\(pixelFormat) frames: the x264 encoder takes NV12 or I420; convert them to 4:2:0 first (PlanarConverter)"
            )
        }
    }
}

/// Makes `X264Encoder`s with the same settings, for each stream's format.
public struct X264EncoderFactory: VideoEncoderFactory {
    public var settings: EncoderSettings

    public init(settings: EncoderSettings) { self.settings = settings }

    public func makeEncoder(for format: VideoFormat) throws(EncoderError) -> any VideoEncoder {
        try X264Encoder(format: format, settings: settings)
    }
}

/// Collects what x264 logs (it would otherwise print to stderr): the last few messages are
/// kept for error reports and `takeMessages()`. x264 may log from its worker threads.
final class X264Log: Sendable {
    private let messages = Mutex<[String]>([])
    static let limit = 32
    /// What x264 is given to log through (the shim formats each line): written once here,
    /// then only read, by x264; freed with the log, which outlives the encoder.
    nonisolated(unsafe) let target: UnsafeMutablePointer<CX264_log_target>

    init() {
        target = .allocate(capacity: 1)
        target.initialize(
            to: CX264_log_target(line: { context, level, text in x264Log(context, level, text) }, context: nil))
        target.pointee.context = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        target.deallocate()
    }

    func append(_ text: String) {
        messages.withLock { list in
            if list.count == X264Log.limit { list.removeFirst() }
            list.append(text)
        }
    }

    func take() -> [String] {
        messages.withLock { list in
            defer { list = [] }
            return list
        }
    }

    func summary(orElse fallback: String) -> String {
        let text = take().joined(separator: "; ")
        return text.isEmpty ? fallback : text
    }
}

/// Hands one x264 log line, formatted by the shim, to the `X264Log` behind `context`.
private func x264Log(_ context: UnsafeMutableRawPointer?, _ level: Int32, _ line: UnsafePointer<CChar>?) {
    guard let context, let line else { return }
    let log = Unmanaged<X264Log>.fromOpaque(context).takeUnretainedValue()
    var text = String(cString: line)
    while text.last == "\n" { text.removeLast() }
    let prefix = level <= X264_LOG_ERROR ? "error: " : level == X264_LOG_WARNING ? "warning: " : ""
    log.append(prefix + text)
}
