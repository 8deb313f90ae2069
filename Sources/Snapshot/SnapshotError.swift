import Media

/// Why a snapshot could not be taken or encoded. Each message names what was asked, what is
/// wrong with it, and what to do.
public enum SnapshotError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The frame is not 4:2:0 (NV12 or I420), the only layouts a snapshot is copied from.
    case unsupportedPixelFormat(PixelFormat)
    /// A requested width other than 0 (full size) or `SnapshotPicture.minimumWidth` to
    /// `VideoFormat.maximumDimension`.
    case invalidWidth(Int)
    /// The frame is too small to give a picture of at least 2×2 pixels (even sides, as 4:2:0
    /// needs).
    case frameTooSmall(width: Int, height: Int)
    /// A JPEG quality outside 1…100.
    case invalidQuality(Int)
    /// libturbojpeg could not make a compressor; its own words.
    case encoderUnavailable(String)
    /// libturbojpeg failed to compress the picture; its own words.
    case encodeFailed(width: Int, height: Int, details: String)

    public var description: String {
        switch self {
        case .unsupportedPixelFormat(let format):
            "cannot take a snapshot of a \(format) frame: snapshots are copied from NV12 or I420 frames; convert the frame to 4:2:0 first (PlanarConverter)"
        case .invalidWidth(let width):
            "cannot take a snapshot \(width) pixels wide: the width must be 0 (the camera's size) or \(SnapshotPicture.minimumWidth) to \(VideoFormat.maximumDimension); set the snapshot width in that range"
        case .frameTooSmall(let width, let height):
            "cannot take a snapshot of a \(width)×\(height) frame: a snapshot needs at least 2×2 pixels; use a larger camera size"
        case .invalidQuality(let quality):
            "cannot encode a JPEG at quality \(quality): the quality must be 1 to 100 (100 is best, 80 to 90 suits snapshots); set the snapshot quality in that range"
        case .encoderUnavailable(let details):
            "cannot make a JPEG compressor (libturbojpeg: \(details)); the process may be out of memory"
        case .encodeFailed(let width, let height, let details):
            "libturbojpeg failed to encode a \(width)×\(height) snapshot: \(details)"
        }
    }
}
