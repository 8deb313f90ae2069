import FoundationEssentials
import Media

/// What the `moov` says about one track apart from its samples: identity, kind, time scale,
/// presentation (size, matrix, volume), the sample description, and when the track starts.
///
/// The writer builds it from a `MovieDescription`; repair reads it back from the header
/// `moov` of an interrupted file. Both then write the index through the same functions.
struct TrackHeader: Equatable {
    enum Kind: Equatable { case video, audio }

    var trackID: UInt32
    var kind: Kind
    var timescale: UInt32
    /// Presentation width and height in pixels as 16.16 fixed point, as `tkhd` stores them;
    /// zero for sound.
    var width: UInt32
    var height: UInt32
    /// The nine matrix values a b u c d v x y w as stored (16.16 and 2.30 fixed point).
    var matrix: [Int32]
    /// The complete sample description entry (an `avc1` or `sowt` box), exactly as written.
    var sampleEntry: [UInt8]
    /// How long after the movie's start this track begins, in the movie time scale
    /// (written as an empty edit; zero means no edit list).
    var startDelay: UInt64 = 0

    /// The video track's header (track 1, the video time scale) for `v`: its display size
    /// (widened by a non-square pixel aspect), its rotation as the matrix, and its `avc1` entry.
    static func video(_ v: VideoTrackFormat) -> TrackHeader {
        var displayWidth = Double(v.width)
        if let aspect = v.pixelAspectRatio, aspect.verticalSpacing > 0 {
            displayWidth = displayWidth * Double(aspect.horizontalSpacing) / Double(aspect.verticalSpacing)
        }
        let width = TrackHeader.fixed(displayWidth), height = TrackHeader.fixed(Double(v.height))
        var entry = ByteWriter()
        entry.writeAVC1(v)
        return TrackHeader(
            trackID: 1, kind: .video, timescale: UInt32(TimeScale.video),
            width: width, height: height,
            matrix: TrackHeader.matrix(for: v.rotation, width: width, height: height),
            sampleEntry: entry.bytes)
    }

    static let identityMatrix: [Int32] = [0x0001_0000, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000]

    /// The 16.16 fixed-point form of a size in pixels.
    static func fixed(_ pixels: Double) -> UInt32 { UInt32(clamping: Int64((pixels * 65536).rounded())) }

    /// The transform for a clockwise rotation (the movie keeps `Rotation` as its track matrix;
    /// the pixels are never touched) of a picture `width`×`height` (16.16) in size (FORMATS.md).
    static func matrix(for rotation: Rotation, width: UInt32, height: UInt32) -> [Int32] {
        let one: Int32 = 0x0001_0000
        let w = Int32(clamping: width)
        let h = Int32(clamping: height)
        let unit: Int32 = 0x4000_0000
        switch rotation {
        case .none: return identityMatrix
        case .clockwise90: return [0, one, 0, -one, 0, 0, h, 0, unit]
        case .clockwise180: return [-one, 0, 0, 0, -one, 0, w, h, unit]
        case .clockwise270: return [0, -one, 0, one, 0, 0, 0, w, unit]
        }
    }
}

/// QuickTime times count seconds from 1904-01-01 00:00:00 UTC.
func quickTimeSeconds(_ date: Date) -> UInt32 {
    let seconds = date.timeIntervalSince1970 + 2_082_844_800
    guard seconds > 0 else { return 0 }
    return seconds >= Double(UInt32.max) ? UInt32.max : UInt32(seconds)
}

func date(fromQuickTimeSeconds seconds: UInt32) -> Date {
    Date(timeIntervalSince1970: Double(seconds) - 2_082_844_800)
}

extension VideoTrackFormat {
    /// Throws unless a movie can describe this video: a size that keeps every size and
    /// rotation offset inside QuickTime's 16.16 fixed point (16384 at most), and an SPS and a
    /// PPS an `avcC` can hold.
    func check() throws(MovieWriterError) {
        guard width > 0, height > 0, width <= 16384, height <= 16384 else {
            throw .unsupportedVideo("a picture of \(width)×\(height) pixels")
        }
        guard sequenceParameterSet.count >= 4, sequenceParameterSet.count <= 65535, !pictureParameterSet.isEmpty,
            pictureParameterSet.count <= 65535
        else {
            throw .unsupportedVideo("the SPS and PPS are missing or malformed")
        }
    }
}
