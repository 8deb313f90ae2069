/// Why a font could not be used, or an overlay not be made: which file or value, what is wrong
/// with it, and what to do.
public enum OverlayError: Error, Equatable, Sendable, CustomStringConvertible {
    /// There is no font file at `path`.
    case fontMissing(path: String)
    /// The font file could not be read: permissions, an I/O error, a damaged gzip stream. The
    /// system's or zlib's own words.
    case fontUnreadable(path: String, reason: String)
    /// The bytes are not a PSF console font, or one that contradicts itself (cut short, sizes
    /// that do not add up, a broken Unicode table, larger than any console font).
    case fontInvalid(path: String, problem: String)
    /// A text scale outside `TextOverlay.scales`.
    case scaleOutOfRange(Int)

    public var description: String {
        switch self {
        case .fontMissing(let path) where path == BitmapFont.defaultPath:
            "cannot open the overlay font \(path): no such file; install it with `apt install psf-unifont`"
        case .fontMissing(let path):
            "cannot open the overlay font \(path): no such file; check the path (console fonts are in /usr/share/consolefonts, from the psf-unifont and console-setup-linux packages)"
        case .fontUnreadable(let path, let reason):
            "cannot read the overlay font \(path): \(reason)"
        case .fontInvalid(let path, let problem):
            "\(path) is not a usable PSF console font: \(problem); choose one of /usr/share/consolefonts/*.psf.gz"
        case .scaleOutOfRange(let scale):
            "an overlay scale of \(scale): it must be \(TextOverlay.scales.lowerBound) to \(TextOverlay.scales.upperBound) (each font pixel drawn as scale × scale pixels)"
        }
    }
}
