import FoundationEssentials
import Media

/// The shape of one pixel as horizontal : vertical spacing (`pasp`).
public struct PixelAspectRatio: Hashable, Sendable {
    public var horizontalSpacing: UInt32
    public var verticalSpacing: UInt32
    public init(horizontalSpacing: UInt32, verticalSpacing: UInt32) {
        self.horizontalSpacing = horizontalSpacing
        self.verticalSpacing = verticalSpacing
    }
    /// Square pixels.
    public static let square = PixelAspectRatio(horizontalSpacing: 1, verticalSpacing: 1)
}

/// The clean aperture (`clap`): the part of the coded picture meant to be shown, as
/// rational width, height and centre offsets.
public struct CleanAperture: Hashable, Sendable {
    public var width: Rational
    public var height: Rational
    public var horizontalOffset: Rational
    public var verticalOffset: Rational
    public init(
        width: Rational, height: Rational, horizontalOffset: Rational = Rational(0, 1),
        verticalOffset: Rational = Rational(0, 1)
    ) {
        self.width = width
        self.height = height
        self.horizontalOffset = horizontalOffset
        self.verticalOffset = verticalOffset
    }
}

/// Colour description (`colr`, type `nclc`): primaries, transfer function and matrix, as the
/// code points of ITU-T H.273.
public struct ColorDescription: Hashable, Sendable {
    public var primaries: UInt16
    public var transferFunction: UInt16
    public var matrix: UInt16
    public init(primaries: UInt16, transferFunction: UInt16, matrix: UInt16) {
        self.primaries = primaries
        self.transferFunction = transferFunction
        self.matrix = matrix
    }
    public static let bt709 = ColorDescription(primaries: 1, transferFunction: 1, matrix: 1)
    /// BT.601 for 525-line (NTSC-era) sources, what most webcams deliver.
    public static let bt601 = ColorDescription(primaries: 6, transferFunction: 1, matrix: 6)
}

/// The H.264 video track of a movie.
public struct VideoTrackFormat: Hashable, Sendable {
    /// Coded picture size in pixels.
    public var width: Int
    public var height: Int
    /// The sequence parameter set, without a length prefix or start code.
    public var sequenceParameterSet: [UInt8]
    /// The picture parameter set, without a length prefix or start code.
    public var pictureParameterSet: [UInt8]
    public var rotation: Rotation
    public var pixelAspectRatio: PixelAspectRatio?
    public var cleanAperture: CleanAperture?
    public var color: ColorDescription?

    public init(
        width: Int, height: Int, sequenceParameterSet: [UInt8], pictureParameterSet: [UInt8],
        rotation: Rotation = .none, pixelAspectRatio: PixelAspectRatio? = nil,
        cleanAperture: CleanAperture? = nil, color: ColorDescription? = nil
    ) {
        self.width = width
        self.height = height
        self.sequenceParameterSet = sequenceParameterSet
        self.pictureParameterSet = pictureParameterSet
        self.rotation = rotation
        self.pixelAspectRatio = pixelAspectRatio
        self.cleanAperture = cleanAperture
        self.color = color
    }
}

/// A 16-bit little-endian PCM audio track (`sowt`), samples interleaved by channel.
public struct AudioTrackFormat: Hashable, Sendable {
    public var sampleRate: Int
    public var channels: Int
    public init(sampleRate: Int, channels: Int) {
        self.sampleRate = sampleRate
        self.channels = channels
    }
    /// Bytes in one sample frame (one 16-bit sample per channel).
    public var bytesPerFrame: Int { channels * 2 }
}

/// What a movie holds and when it was made.
public struct MovieDescription: Hashable, Sendable {
    /// Wall-clock time of the movie's first frame; written as the creation time.
    public var creationTime: Date
    public var video: VideoTrackFormat
    public var audio: AudioTrackFormat?

    public init(creationTime: Date, video: VideoTrackFormat, audio: AudioTrackFormat? = nil) {
        self.creationTime = creationTime
        self.video = video
        self.audio = audio
    }
}

/// The time scales the writer uses.
enum TimeScale {
    /// Movie header and edit lists.
    static let movie: Int64 = 1000
    /// Video media.
    static let video: Int64 = 90_000
}
