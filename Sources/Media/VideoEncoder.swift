/// An H.264 encoder for one stream of frames of one format: what the pipeline needs of any
/// backend (libx264 in software; a hardware encoder through V4L2). The pipeline knows none.
///
/// - The caller decides where keyframes go (with a `KeyframeSchedule`), so that every
///   backend places them alike. A backend must honour `keyframe: true` on that frame: a GOP
///   ends only at the next keyframe, and a clip is written GOP by GOP, so an encoder that
///   ignored it would leave nothing on disk until the clip closed.
/// - Output may lag input: `encode` returns the samples that are ready — none, one or
///   several — and `flush` returns the rest at the end of the stream.
/// - Samples come out in decode order, in the `avcC` form (4-byte length prefixes, no start
///   codes, no parameter sets), stamped with the capture timestamps of their frames.
///
/// Not thread-safe: an encoder belongs to one thread, and its calls may block for
/// milliseconds (run it on a dedicated thread, not in the Swift concurrency pool).
public protocol VideoEncoder: AnyObject {
    /// The sequence parameter set for `avcC`, without start code or length prefix; known
    /// once the encoder is made.
    var sequenceParameterSet: [UInt8] { get }
    /// The picture parameter set for `avcC`, without start code or length prefix; known
    /// once the encoder is made.
    var pictureParameterSet: [UInt8] { get }
    /// What the encoder is, for logs, as name–value fields: the backend first (`encoder`),
    /// then the settings that say most about it (x264: `encoder=x264 preset=ultrafast`).
    var logDescription: [(name: String, value: String)] { get }

    /// Encodes `frame` (its capture time is `frame.timestamp`; timestamps must increase),
    /// as a keyframe (IDR) when `keyframe` is true; returns the samples ready so far. The
    /// frame's buffer is not kept after the call.
    func encode(_ frame: VideoFrame, keyframe: Bool) throws(EncoderError) -> [EncodedSample]

    /// Ends the stream: returns the samples of the frames still held. The encoder takes no
    /// frames after this (`encode` throws `.closed`); a second flush returns nothing.
    func flush() throws(EncoderError) -> [EncodedSample]
}

/// Makes the encoder for a stream once its format is known, so that the pipeline need not
/// know which backend it gets.
public protocol VideoEncoderFactory: Sendable {
    /// An encoder for frames of `format`: the size, pixel format, rate and pixel aspect ratio
    /// the source negotiated (after any conversion to 4:2:0).
    func makeEncoder(for format: VideoFormat) throws(EncoderError) -> any VideoEncoder
}

/// The encoders a run records with, as one value (`EncoderSelection` in H264 makes it from
/// `encoder.*` and the devices found): the preferred factory (the board's hardware encoder),
/// tried first while it works, and the fallback (x264) it gives way to — when it cannot open
/// for a stream, or keeps failing (`EncoderFailures`) — with what the agent says about the
/// choice when it starts.
public struct EncoderChoice: Sendable {
    /// What to log about the choice: the backend, why, and whether it is a warning (a hardware
    /// encoder that could not take the stream).
    public struct Announcement: Sendable, Equatable {
        public var backend: String
        public var reason: String
        public var warn: Bool

        public init(backend: String, reason: String, warn: Bool = false) {
            self.backend = backend
            self.reason = reason
            self.warn = warn
        }
    }

    /// The hardware encoder; nil for the fallback alone.
    public var preferred: (any VideoEncoderFactory)?
    /// x264: what records when there is no preferred encoder, or once it is given up.
    public var fallback: any VideoEncoderFactory
    /// The preferred encoder was asked for by name (`encoder.backend = "v4l2"`): when it
    /// cannot open for the first stream, the agent stops with the error instead of falling back.
    public var required: Bool
    /// Said once when the agent starts; nil: nothing said.
    public var announcement: Announcement?

    public init(
        preferred: (any VideoEncoderFactory)? = nil, fallback: any VideoEncoderFactory, required: Bool = false,
        announcement: Announcement? = nil
    ) {
        self.preferred = preferred
        self.fallback = fallback
        self.required = required
        self.announcement = announcement
    }
}

/// Why an encoder could not open or encode; any backend's.
public enum EncoderError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The picture cannot be encoded as given (size, pixel format).
    case unsupportedPicture(String)
    /// The backend (`x264`, …) refused the parameters when opening; its own words.
    case openFailed(backend: String, details: String)
    /// A frame differs in size from the format the encoder was opened for.
    case frameSizeMismatch(expected: String, got: String)
    case timestampNotIncreasing(previous: Timestamp, got: Timestamp)
    /// The backend failed to encode a frame (counted from 1); its own words when it gave any.
    case encodeFailed(backend: String, frame: Int, details: String)
    /// A frame was given after `flush()`.
    case closed
    /// The encoding device failed (hung, went away, changed its stream): this encoder is
    /// done, and a new one may work. Its own words.
    case deviceFailed(backend: String, details: String)

    public var description: String {
        switch self {
        case .unsupportedPicture(let why): "cannot encode \(why)"
        case .openFailed(let backend, let details):
            "\(backend) refused the encoder settings (\(details)); check the encoder.* settings and the camera format"
        case .frameSizeMismatch(let expected, let got):
            "a \(got) frame reached an encoder opened for \(expected); the source changed format, so open a new encoder"
        case .timestampNotIncreasing(let previous, let got):
            "frame timestamps must increase: got \(got) after \(previous); the source's clock went backwards"
        case .encodeFailed(let backend, let frame, let details):
            "\(backend) failed to encode frame \(frame)" + (details.isEmpty ? "" : ": \(details)")
        case .closed: "the encoder is closed; open a new one"
        case .deviceFailed(let backend, let details): "the \(backend) encoder failed: \(details)"
        }
    }
}
