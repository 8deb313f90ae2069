/// The PSF1 and PSF2 formats (as the Linux kernel's `include/linux/font.h` and kbd's
/// `psf.h` describe them), read from uncompressed bytes with every size checked against the
/// bytes there are.
enum PSFParser {
    struct Failure: Error {
        let problem: String
        init(_ problem: String) { self.problem = problem }
    }

    static let psf1Magic: [UInt8] = [0x36, 0x04]
    static let psf2Magic: [UInt8] = [0x72, 0xB5, 0x4A, 0x86]
    /// PSF1 mode bits.
    static let psf1Mode512: UInt8 = 0x01
    static let psf1ModeHasTable: UInt8 = 0x02
    static let psf1ModeHasSequences: UInt8 = 0x04
    /// PSF2 flag: the file has a Unicode table.
    static let psf2HasTable: UInt32 = 0x01
    /// Most glyphs a PSF2 header may claim (PSF1 has 512 at most; Unicode fonts a few thousand).
    static let maximumGlyphs = 65536

    static func parse(_ bytes: [UInt8], path: String) throws(Failure) -> BitmapFont {
        guard bytes.count <= BitmapFont.maximumFileBytes else {
            throw Failure(
                "\(bytes.count) bytes, over the limit of \(BitmapFont.maximumFileBytes) (a console font takes a few KiB)"
            )
        }
        if bytes.starts(with: psf2Magic) { return try parsePSF2(bytes, path: path) }
        if bytes.starts(with: psf1Magic) { return try parsePSF1(bytes, path: path) }
        if bytes.isEmpty { throw Failure("the file is empty") }
        throw Failure("no PSF magic number at the start (PSF1 starts 36 04, PSF2 72 B5 4A 86)")
    }

    // MARK: PSF1

    /// Header: magic (2 bytes), mode (1), height (1, = bytes per glyph); glyphs of 8 pixels wide,
    /// one byte a row; then, with a table, for each glyph 16-bit little-endian code points up to
    /// FFFF, FFFE starting the sequences.
    static func parsePSF1(_ bytes: [UInt8], path: String) throws(Failure) -> BitmapFont {
        guard bytes.count >= 4 else { throw Failure("cut short in its 4-byte PSF1 header (\(bytes.count) bytes)") }
        let mode = bytes[2]
        let height = Int(bytes[3])
        guard height >= 1, height <= BitmapFont.maximumGlyphSide else {
            throw Failure("a PSF1 glyph height of \(height) (1 to \(BitmapFont.maximumGlyphSide))")
        }
        let count = mode & psf1Mode512 != 0 ? 512 : 256
        let glyphBytes = 4 + count * height
        guard bytes.count >= glyphBytes else {
            throw Failure(
                "cut short: \(count) glyphs of 8×\(height) need \(glyphBytes) bytes with the header, the file has \(bytes.count)"
            )
        }
        let glyphs = unpackGlyphs(bytes, at: 4, count: count, width: 8, height: height)
        guard mode & (psf1ModeHasTable | psf1ModeHasSequences) != 0 else {
            return BitmapFont(path: path, format: .psf1, width: 8, height: height, glyphs: glyphs, indices: nil)
        }
        var indices: [UInt32: Int] = [:]
        var offset = glyphBytes
        for glyph in 0..<count {
            var inSequences = false
            while true {
                guard offset + 2 <= bytes.count else {
                    throw Failure("its Unicode table is cut short in the entry of glyph \(glyph) of \(count)")
                }
                let value = UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8
                offset += 2
                if value == 0xFFFF { break }
                if value == 0xFFFE {
                    inSequences = true
                    continue
                }
                if inSequences { continue }
                guard Unicode.Scalar(value) != nil else {
                    throw Failure(
                        "its Unicode table gives glyph \(glyph) the value \(hex(value)), which is not a Unicode character"
                    )
                }
                if indices[value] == nil { indices[value] = glyph }
            }
        }
        return BitmapFont(path: path, format: .psf1, width: 8, height: height, glyphs: glyphs, indices: indices)
    }

    // MARK: PSF2

    /// Header, eight 32-bit little-endian words: magic, version (0), header size, flags, glyph
    /// count, bytes per glyph, height, width; glyphs of `(width + 7) / 8` bytes a row; then, with
    /// a table, for each glyph UTF-8 characters up to FF, FE starting the sequences.
    static func parsePSF2(_ bytes: [UInt8], path: String) throws(Failure) -> BitmapFont {
        guard bytes.count >= 32 else { throw Failure("cut short in its 32-byte PSF2 header (\(bytes.count) bytes)") }
        func word(_ i: Int) -> UInt32 {
            let o = 4 * i
            return UInt32(bytes[o]) | UInt32(bytes[o + 1]) << 8 | UInt32(bytes[o + 2]) << 16 | UInt32(bytes[o + 3])
                << 24
        }
        let version = word(1), headerSize = word(2), flags = word(3)
        let count = word(4), charSize = word(5), height = word(6), width = word(7)
        guard version == 0 else { throw Failure("PSF2 version \(version) (only version 0 exists)") }
        let side = UInt32(BitmapFont.maximumGlyphSide)
        guard width >= 1, width <= side, height >= 1, height <= side else {
            throw Failure("glyphs of \(width)×\(height) pixels (each side 1 to \(side))")
        }
        let rowBytes = (Int(width) + 7) / 8
        guard Int(charSize) == rowBytes * Int(height) else {
            throw Failure(
                "\(charSize) bytes per glyph, but glyphs of \(width)×\(height) take \(rowBytes * Int(height))")
        }
        guard count >= 1, count <= UInt32(maximumGlyphs) else {
            throw Failure("\(count) glyphs (1 to \(maximumGlyphs))")
        }
        guard headerSize >= 32, headerSize <= UInt32(bytes.count) else {
            throw Failure("a header size of \(headerSize) bytes in a file of \(bytes.count) (at least 32)")
        }
        let start = Int(headerSize)
        let glyphEnd = start + Int(count) * Int(charSize)
        guard bytes.count >= glyphEnd else {
            throw Failure(
                "cut short: \(count) glyphs of \(width)×\(height) need \(glyphEnd) bytes with the header, the file has \(bytes.count)"
            )
        }
        let glyphs = unpackGlyphs(bytes, at: start, count: Int(count), width: Int(width), height: Int(height))
        guard flags & psf2HasTable != 0 else {
            return BitmapFont(
                path: path, format: .psf2, width: Int(width), height: Int(height), glyphs: glyphs, indices: nil)
        }
        var indices: [UInt32: Int] = [:]
        var offset = glyphEnd
        for glyph in 0..<Int(count) {
            var inSequences = false
            while true {
                guard offset < bytes.count else {
                    throw Failure("its Unicode table is cut short in the entry of glyph \(glyph) of \(count)")
                }
                let lead = bytes[offset]
                if lead == 0xFF {
                    offset += 1
                    break
                }
                if lead == 0xFE {
                    offset += 1
                    inSequences = true
                    continue
                }
                guard let (scalar, length) = decodeUTF8(bytes, at: offset) else {
                    throw Failure(
                        "its Unicode table has a byte sequence that is not UTF-8 at offset \(offset) (glyph \(glyph))")
                }
                offset += length
                if !inSequences, indices[scalar.value] == nil { indices[scalar.value] = glyph }
            }
        }
        return BitmapFont(
            path: path, format: .psf2, width: Int(width), height: Int(height), glyphs: glyphs, indices: indices)
    }

    // MARK: Pieces

    /// `count` glyphs from `offset`, rows of `(width + 7) / 8` bytes, the leftmost pixel in the
    /// top bit; the caller has checked they lie within `bytes`.
    static func unpackGlyphs(_ bytes: [UInt8], at offset: Int, count: Int, width: Int, height: Int) -> [Glyph] {
        let rowBytes = (width + 7) / 8
        var glyphs: [Glyph] = []
        glyphs.reserveCapacity(count)
        for g in 0..<count {
            var pixels = [UInt8](repeating: 0, count: width * height)
            let base = offset + g * rowBytes * height
            for y in 0..<height {
                for x in 0..<width {
                    let byte = bytes[base + y * rowBytes + x / 8]
                    pixels[y * width + x] = (byte >> (7 - UInt8(x % 8))) & 1
                }
            }
            glyphs.append(Glyph(width: width, height: height, pixels: pixels))
        }
        return glyphs
    }

    /// One UTF-8 character at `offset`: the scalar and its length in bytes, or nil for bytes
    /// that are not one (a stray continuation byte, an overlong form, a surrogate, cut short).
    static func decodeUTF8(_ bytes: [UInt8], at offset: Int) -> (Unicode.Scalar, Int)? {
        let lead = bytes[offset]
        let length: Int
        var value: UInt32
        switch lead {
        case 0x00...0x7F: return Unicode.Scalar(UInt32(lead)).map { ($0, 1) }
        case 0xC2...0xDF: (length, value) = (2, UInt32(lead & 0x1F))
        case 0xE0...0xEF: (length, value) = (3, UInt32(lead & 0x0F))
        case 0xF0...0xF4: (length, value) = (4, UInt32(lead & 0x07))
        default: return nil
        }
        guard offset + length <= bytes.count else { return nil }
        for i in 1..<length {
            let b = bytes[offset + i]
            guard b & 0xC0 == 0x80 else { return nil }
            value = value << 6 | UInt32(b & 0x3F)
        }
        let smallest: UInt32 = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000
        guard value >= smallest, let scalar = Unicode.Scalar(value) else { return nil }
        return (scalar, length)
    }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
