import Media
import V4L2

/// What `V4L2Encoder` needs of a memory-to-memory session: `M2MSession`, or a test's stand-in.
public protocol EncodingSession: AnyObject {
    var path: String { get }
    var identity: (driver: String, card: String) { get }
    /// Sets a control; false when the device does not have it.
    @discardableResult func setControl(_ id: UInt32, _ value: Int32, _ name: String) throws(V4L2Error) -> Bool
    /// Queues a frame; returns the coded buffers ready so far.
    func encode(_ frame: VideoFrame) throws(V4L2Error) -> [M2MCodedBuffer]
    /// Ends the stream; returns the coded buffers still held.
    func drain() throws(V4L2Error) -> [M2MCodedBuffer]
    /// After `drain`: takes frames again.
    func restart() throws(V4L2Error)
}

extension M2MSession: EncodingSession {}

/// The hardware encoder's settings (the `encoder.*` keys that apply to it).
public struct HardwareEncoderSettings: Hashable, Sendable {
    /// The average bit rate, in kbit/s (variable bit rate around it).
    public var bitrateKbps: Int
    /// The profile asked of the device.
    public var profile: EncoderSettings.Profile
    /// Seconds between keyframes: the device's own I-frame period, as a backstop to the
    /// keyframes the pipeline forces.
    public var keyframeInterval: Double

    public init(bitrateKbps: Int, profile: EncoderSettings.Profile, keyframeInterval: Double) {
        self.bitrateKbps = bitrateKbps
        self.profile = profile
        self.keyframeInterval = keyframeInterval
    }
}

/// H.264 through a V4L2 memory-to-memory encoder (the Raspberry Pi's `bcm2835-codec`, venus,
/// coda, wave5, …): the same samples as `X264Encoder` gives, for a few percent of a core.
///
/// - The device writes an Annex B byte stream; each coded buffer becomes one sample in the
///   `avcC` form (`AnnexB.accessUnit`: parameter sets, delimiters and filler taken out).
/// - The parameter sets for `avcC` are the device's own. A stateful encoder writes them only
///   with its first keyframe, so opening encodes one grey frame, drains, keeps them and starts
///   the stream again. `REPEAT_SEQ_HEADER` is set (the Pi's default is off) so that every IDR
///   carries them; when they ever differ from the first, the encoder fails with
///   `.deviceFailed`, and the pipeline closes the clip and opens a new encoder (a new clip
///   part with the new `avcC`).
/// - Keyframes: `FORCE_KEY_FRAME` before the frame the pipeline's schedule marks, and the
///   device's I-frame period set to the same interval as a backstop. A sample is a keyframe
///   when it holds an IDR slice, whatever the driver's flag says.
/// - A device that stops answering (no buffer back within its timeout), takes frames and
///   returns nothing for `silenceLimit` of capture time, or goes away fails the encoder with
///   `.deviceFailed`.
public final class V4L2Encoder: VideoEncoder {
    public let sequenceParameterSet: [UInt8]
    public let pictureParameterSet: [UInt8]
    public let logDescription: [(name: String, value: String)]
    /// The level chosen for the size and rate (`H264Level`).
    public let level: H264Level
    private let session: any EncodingSession
    private let width: Int
    private let height: Int
    private var lastTimestamp: Timestamp?
    private var closed = false
    /// The device failed: nothing more is asked of it (a drain would wait out its timeout again).
    private var failed = false
    private var framesIn = 0
    private var samplesOut = 0
    /// The capture time of the frame that brought the last coded output (or of the first frame).
    private var lastOutput: Timestamp?
    /// How long, in capture time, frames may go in with nothing coming out before the device
    /// counts as hung (one that takes frames but returns nothing never blocks a call).
    public static let silenceLimit = Timestamp.Duration(seconds: 2)

    /// Opens the encoder at `device` for frames of `format`.
    public convenience init(device: String, format: VideoFormat, settings: HardwareEncoderSettings) throws(EncoderError)
    {
        let session: M2MSession
        do { session = try M2MSession(path: device, format: format, coded: "H264") } catch {
            throw .openFailed(backend: "v4l2", details: error.description)
        }
        try self.init(session: session, format: format, settings: settings)
    }

    /// Sets the controls on `session` and takes the parameter sets from a first, grey frame.
    public init(
        session: any EncodingSession, format: VideoFormat, settings: HardwareEncoderSettings
    )
        throws(EncoderError)
    {
        self.session = session
        width = format.width
        height = format.height
        let rate = format.frameRate?.doubleValue ?? 30
        level = H264Level.fitting(width: format.width, height: format.height, frameRate: rate)
        let device = "\(session.path) (\(session.identity.card))"
        func set(_ id: UInt32, _ value: Int32, _ name: String, required: Bool = false) throws(EncoderError) {
            let done: Bool
            do { done = try session.setControl(id, value, name) } catch {
                throw .openFailed(backend: "v4l2", details: error.description)
            }
            if required && !done {
                throw .openFailed(
                    backend: "v4l2", details: "\(device) has no \(name) control, which Vigil needs to place keyframes")
            }
        }
        let period = Int32(max(1, (settings.keyframeInterval * rate).rounded()))
        try set(M2MSession.Control.bitrateMode, 0, "BITRATE_MODE (VBR)")
        try set(M2MSession.Control.bitrate, Int32(clamping: settings.bitrateKbps * 1000), "BITRATE")
        try set(M2MSession.Control.h264Profile, settings.profile.v4l2Value, "H264_PROFILE")
        try set(M2MSession.Control.h264Level, level.v4l2Value, "H264_LEVEL")
        try set(M2MSession.Control.h264IPeriod, period, "H264_I_PERIOD")
        try set(M2MSession.Control.gopSize, period, "GOP_SIZE")
        try set(M2MSession.Control.repeatSequenceHeader, 1, "REPEAT_SEQ_HEADER")
        try set(M2MSession.Control.forceKeyFrame, 1, "FORCE_KEY_FRAME", required: true)

        // The parameter sets: a grey keyframe, drained, then the stream starts again.
        var coded: [M2MCodedBuffer] = []
        do {
            let grey = FrameBuffer(capacity: format.bufferSize)
            grey.base.update(repeating: 128, count: format.bufferSize)
            coded = try session.encode(VideoFrame(format: format, buffer: grey, timestamp: .zero, sequence: 0))
            coded += try session.drain()
            try session.restart()
        } catch {
            throw .openFailed(backend: "v4l2", details: error.description)
        }
        var units: [AnnexBAccessUnit] = []
        for buffer in coded {
            do { units.append(try AnnexB.accessUnit(buffer.bytes[...])) } catch {
                throw .openFailed(backend: "v4l2", details: "\(device) wrote \(error.description)")
            }
        }
        guard let sps = units.lazy.compactMap(\.sequenceParameterSets.first).first,
            let pps = units.lazy.compactMap(\.pictureParameterSets.first).first
        else {
            throw .openFailed(
                backend: "v4l2",
                details: "\(device) gave no sequence and picture parameter sets with its first keyframe")
        }
        sequenceParameterSet = sps
        pictureParameterSet = pps
        logDescription = [
            ("encoder", "v4l2"), ("device", session.path), ("card", session.identity.card),
            ("bitrate_kbps", "\(settings.bitrateKbps)"), ("level", level.name),
        ]
    }

    public func encode(_ frame: VideoFrame, keyframe: Bool) throws(EncoderError) -> [EncodedSample] {
        guard !closed else { throw .closed }
        guard !failed else {
            throw .deviceFailed(backend: "v4l2", details: "\(session.path) failed before; open a new encoder")
        }
        guard frame.format.width == width, frame.format.height == height else {
            throw .frameSizeMismatch(
                expected: "\(width)×\(height)", got: "\(frame.format.width)×\(frame.format.height)")
        }
        if let last = lastTimestamp, frame.timestamp <= last {
            throw .timestampNotIncreasing(previous: last, got: frame.timestamp)
        }
        lastTimestamp = frame.timestamp
        framesIn += 1
        let coded: [M2MCodedBuffer]
        do {
            if keyframe { try session.setControl(M2MSession.Control.forceKeyFrame, 1, "FORCE_KEY_FRAME") }
            coded = try session.encode(frame)
        } catch {
            failed = true
            throw .deviceFailed(backend: "v4l2", details: "frame \(framesIn): \(error.description)")
        }
        let out = try samples(coded, "frame \(framesIn)")
        samplesOut += out.count
        if lastOutput == nil || !out.isEmpty { lastOutput = frame.timestamp }
        if let lastOutput, framesIn > samplesOut, frame.timestamp - lastOutput > Self.silenceLimit {
            failed = true
            throw .deviceFailed(
                backend: "v4l2",
                details:
                    "frame \(framesIn): \(session.path) returned nothing for \(DecimalText.short((frame.timestamp - lastOutput).seconds, 3)) s of frames; it is hung"
            )
        }
        return out
    }

    public func flush() throws(EncoderError) -> [EncodedSample] {
        guard !closed, !failed else {
            closed = true
            return []
        }
        closed = true
        let coded: [M2MCodedBuffer]
        do { coded = try session.drain() } catch {
            failed = true
            throw .deviceFailed(backend: "v4l2", details: "draining: \(error.description)")
        }
        return try samples(coded, "draining")
    }

    /// The samples of `coded` (the buffers the device returned while doing `step`).
    private func samples(_ coded: [M2MCodedBuffer], _ step: String) throws(EncoderError) -> [EncodedSample] {
        func fail(_ problem: String) -> EncoderError {
            failed = true
            return .deviceFailed(backend: "v4l2", details: "\(step): \(session.path) \(problem)")
        }
        var out: [EncodedSample] = []
        for buffer in coded {
            let unit: AnnexBAccessUnit
            do { unit = try AnnexB.accessUnit(buffer.bytes[...]) } catch { throw fail("wrote \(error.description)") }
            if let sps = unit.sequenceParameterSets.last, sps != sequenceParameterSet {
                throw fail("changed its sequence parameter set mid-stream")
            }
            if let pps = unit.pictureParameterSets.last, pps != pictureParameterSet {
                throw fail("changed its picture parameter set mid-stream")
            }
            // A buffer of parameter sets alone (some drivers send them apart) is no picture.
            guard !unit.sample.isEmpty else { continue }
            out.append(
                EncodedSample(data: unit.sample, pts: buffer.timestamp, dts: buffer.timestamp, isKeyframe: unit.isIDR))
        }
        return out
    }
}

/// An H.264 level (ITU-T H.264 Table A-1): the smallest whose frame size and macroblock rate
/// hold a stream, so that decoders know what they need.
public struct H264Level: Hashable, Sendable {
    public let name: String
    /// `enum v4l2_mpeg_video_h264_level`.
    public let v4l2Value: Int32
    /// Macroblocks a second, and in a frame, at most.
    let maxMacroblockRate: Int
    let maxFrameSize: Int

    static let table: [H264Level] = [
        .init(name: "3.0", v4l2Value: 8, maxMacroblockRate: 40_500, maxFrameSize: 1_620),
        .init(name: "3.1", v4l2Value: 9, maxMacroblockRate: 108_000, maxFrameSize: 3_600),
        .init(name: "3.2", v4l2Value: 10, maxMacroblockRate: 216_000, maxFrameSize: 5_120),
        .init(name: "4.0", v4l2Value: 11, maxMacroblockRate: 245_760, maxFrameSize: 8_192),
        .init(name: "4.2", v4l2Value: 13, maxMacroblockRate: 522_240, maxFrameSize: 8_704),
        .init(name: "5.0", v4l2Value: 14, maxMacroblockRate: 589_824, maxFrameSize: 22_080),
        .init(name: "5.1", v4l2Value: 15, maxMacroblockRate: 983_040, maxFrameSize: 36_864),
        .init(name: "5.2", v4l2Value: 16, maxMacroblockRate: 2_073_600, maxFrameSize: 36_864),
    ]

    /// The smallest level from 3.0 up that holds `width`×`height` at `frameRate`; 5.2 when
    /// none does (the device then refuses what it cannot do).
    public static func fitting(width: Int, height: Int, frameRate: Double) -> H264Level {
        let frame = ((width + 15) / 16) * ((height + 15) / 16)
        let rate = Int((Double(frame) * frameRate).rounded(.up))
        return table.first { frame <= $0.maxFrameSize && rate <= $0.maxMacroblockRate } ?? table.last!
    }
}

extension EncoderSettings.Profile {
    /// `enum v4l2_mpeg_video_h264_profile`.
    var v4l2Value: Int32 {
        switch self {
        case .baseline: 1  // constrained baseline, what every decoder takes
        case .main: 2
        case .high: 4
        }
    }
}
