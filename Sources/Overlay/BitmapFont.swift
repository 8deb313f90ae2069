/// A bitmap console font: fixed-size glyphs of `width` × `height` pixels, each pixel on or off,
/// read from a PSF file (what the Linux console loads; Debian's console-setup-linux installs
/// them in /usr/share/consolefonts, gzip'd).
///
/// Both versions of the format are read, plain or gzip'd:
/// - PSF1 (magic `36 04`): 8 pixels wide, 256 or 512 glyphs, an optional Unicode table of
///   16-bit values. Most 8-pixel fonts of console-setup-linux, the default among them.
/// - PSF2 (magic `72 B5 4A 86`): any width, any number of glyphs, an optional Unicode table in
///   UTF-8. The wider fonts (`Terminus20x10`, `VGA32x16`).
///
/// With a Unicode table, characters map to the glyphs it lists (a glyph may stand for several
/// characters; the table's multi-character sequences are skipped). Without one, the glyph index
/// of an ASCII character is its code point. A character the font has no glyph for is drawn as
/// its `?`, or blank when it has none.
public struct BitmapFont: Sendable, Equatable {
    /// GNU Unifont's 8×16 console font (Latin, Greek, Cyrillic, APL: 512 glyphs), from the
    /// psf-unifont package: 36 KB and no dependencies, unlike console-setup-linux's fonts.
    public static let defaultPath = "/usr/share/consolefonts/Unifont-APL8x16.psf.gz"
    /// Largest font file accepted, uncompressed: 1 MiB. Console fonts take a few KiB; the
    /// largest of console-setup-linux (Debian trixie's, as on Raspberry Pi OS), 512 DejaVu glyphs
    /// of 64×118 with their table, under 480 KiB.
    public static let maximumFileBytes = 1 << 20
    /// Largest glyph width and height accepted: trixie's console-setup-linux has glyphs 118
    /// pixels high.
    public static let maximumGlyphSide = 128

    /// Which version of PSF a font was read from.
    public enum Format: String, Sendable {
        case psf1
        case psf2
    }

    /// The file the font was read from (or the name given to `parse`).
    public let path: String
    public let format: Format
    /// Glyph width and height in pixels.
    public let width: Int
    public let height: Int
    /// Whether the file maps Unicode characters to its glyphs.
    public let hasUnicodeTable: Bool
    private let glyphs: [Glyph]
    /// Unicode scalar value → glyph index.
    private let indices: [UInt32: Int]
    /// What a character without a glyph is drawn as.
    private let fallback: Glyph

    /// Number of glyphs in the font.
    public var glyphCount: Int { glyphs.count }

    init(path: String, format: Format, width: Int, height: Int, glyphs: [Glyph], indices: [UInt32: Int]?) {
        self.path = path
        self.format = format
        self.width = width
        self.height = height
        self.glyphs = glyphs
        self.hasUnicodeTable = indices != nil
        var map = indices ?? [:]
        if indices == nil {
            for code in 0..<min(128, glyphs.count) { map[UInt32(code)] = code }
        }
        self.indices = map
        let blank = Glyph(width: width, height: height, pixels: [UInt8](repeating: 0, count: width * height))
        self.fallback = map[UInt32(("?" as Unicode.Scalar).value)].map { glyphs[$0] } ?? blank
    }

    /// Reads the font at `path`: a PSF1 or PSF2 file, plain or gzip'd (`.psf`, `.psf.gz`).
    ///
    /// Nothing beyond `maximumFileBytes` of uncompressed data is read. A missing file, a read
    /// or gzip error, and bytes that are not a whole, consistent PSF font are errors that name
    /// the file and what is wrong.
    public static func load(path: String) throws(OverlayError) -> BitmapFont {
        let bytes = try GzipFile.read(path: path, limit: maximumFileBytes)
        return try parse(bytes, path: path)
    }

    /// Reads a font from the uncompressed bytes of a PSF file; `path` names it in errors.
    public static func parse(_ bytes: [UInt8], path: String) throws(OverlayError) -> BitmapFont {
        do {
            return try PSFParser.parse(bytes, path: path)
        } catch {
            throw .fontInvalid(path: path, problem: error.problem)
        }
    }

    /// The glyph the font draws `scalar` with; `?` (or a blank glyph) when it has none.
    public func glyph(for scalar: Unicode.Scalar) -> Glyph {
        glyphIndex(for: scalar).map { glyphs[$0] } ?? fallback
    }

    /// The index of the glyph for `scalar`, or nil when the font has none.
    public func glyphIndex(for scalar: Unicode.Scalar) -> Int? { indices[scalar.value] }

    /// Glyph number `index` (0 ..< `glyphCount`), or nil.
    public func glyph(at index: Int) -> Glyph? { glyphs.indices.contains(index) ? glyphs[index] : nil }
}

/// One glyph of a `BitmapFont`: `width` × `height` pixels, each on or off.
public struct Glyph: Sendable, Equatable {
    public let width: Int
    public let height: Int
    /// One byte per pixel, row by row from the top: 1 where the glyph is drawn, 0 elsewhere.
    public let pixels: [UInt8]

    init(width: Int, height: Int, pixels: [UInt8]) {
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// Whether the pixel at column `x`, row `y` is drawn; false outside the glyph.
    public func isSet(x: Int, y: Int) -> Bool {
        guard x >= 0, x < width, y >= 0, y < height else { return false }
        return pixels[y * width + x] != 0
    }

    /// Number of pixels drawn.
    public var setCount: Int { pixels.reduce(0) { $0 + Int($1) } }
}
