import Foundation
import Overlay
import TestSupport
import Testing

@Suite struct FontTests {
    /// The default font: psf-unifont's 8×16 Unifont, a gzip'd PSF1 file (512 glyphs) with a
    /// Unicode table.
    @Test func defaultFontLoads() throws {
        let font = try defaultFont()
        #expect(font.format == .psf1)
        #expect(font.width == 8)
        #expect(font.height == 16)
        #expect(font.glyphCount >= 256)
        #expect(font.hasUnicodeTable)
        #expect(font.path == BitmapFont.defaultPath)
        let zero = font.glyph(for: "0")
        #expect(zero.width == 8 && zero.height == 16)
        #expect(zero.setCount > 10)
        #expect(zero != font.glyph(for: "8"))
        #expect(font.glyph(for: " ").setCount == 0)
        // Every character a clock and a camera name need, as glyphs of their own.
        let needed = "0123456789-:./ ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyzé"
        for scalar in needed.unicodeScalars { #expect(font.glyphIndex(for: scalar) != nil, "\(scalar)") }
        let digits = Set("0123456789".unicodeScalars.map { font.glyph(for: $0).pixels })
        #expect(digits.count == 10)
    }

    /// A character the font lacks is drawn as its `?`.
    @Test func missingCharacterFallsBackToQuestionMark() throws {
        let font = try defaultFont()
        #expect(font.glyphIndex(for: "\u{4E00}") == nil)
        #expect(font.glyph(for: "\u{4E00}") == font.glyph(for: "?"))
        #expect(font.glyph(for: "?").setCount > 0)
    }

    /// A PSF2 font, 10 pixels wide (two bytes a row), and another PSF1 one.
    @Test func otherFontsOfThePackage() throws {
        let wide = try BitmapFont.load(path: "\(fontDirectory)/Lat15-TerminusBold20x10.psf.gz")
        #expect(wide.format == .psf2)
        #expect(wide.width == 10 && wide.height == 20)
        #expect(wide.glyphCount >= 256)
        #expect(wide.hasUnicodeTable)
        #expect(wide.glyph(for: "0").setCount > 10)
        let vga = try BitmapFont.load(path: "\(fontDirectory)/Lat15-VGA14.psf.gz")
        #expect(vga.format == .psf1)
        #expect(vga.width == 8 && vga.height == 14)
        #expect(vga.glyph(for: "A").setCount > 10)
    }

    /// Every font console-setup-linux installs loads, with glyphs where its table says.
    @Test func everyFontOfThePackageLoads() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: fontDirectory).filter {
            $0.hasSuffix(".psf.gz")
        }
        #expect(names.count > 100)
        var formats: Set<BitmapFont.Format> = []
        for name in names {
            let font = try BitmapFont.load(path: "\(fontDirectory)/\(name)")
            formats.insert(font.format)
            #expect(font.glyphCount >= 256, "\(name)")
            #expect(font.width >= 6 && font.height >= 8, "\(name)")
        }
        #expect(formats == [.psf1, .psf2])
    }

    /// A plain `.psf` reads as the gzip'd one does.
    @Test func uncompressedFile() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("font.psf")
        try Data(try gunzipped(BitmapFont.defaultPath)).write(to: URL(fileURLWithPath: path))
        let plain = try BitmapFont.load(path: path)
        let gzipped = try defaultFont()
        #expect(plain.glyphCount == gzipped.glyphCount)
        for scalar in "0123456789:-? Aé".unicodeScalars {
            #expect(plain.glyph(for: scalar) == gzipped.glyph(for: scalar))
        }
    }

    /// PSF2's bit order across a row of two bytes, its UTF-8 table with a sequence entry, and
    /// PSF1 without a table (ASCII by code point).
    @Test func builtFonts() throws {
        // Two glyphs of 10×3: glyph 0 has its rightmost column set, glyph 1 its leftmost.
        var psf2: [UInt8] = []
        for word: UInt32 in [0x864A_B572, 0, 32, 1, 2, 6, 3, 10] {
            psf2 += [UInt8(word & 0xFF), UInt8(word >> 8 & 0xFF), UInt8(word >> 16 & 0xFF), UInt8(word >> 24)]
        }
        psf2 += [0x00, 0x40, 0x00, 0x40, 0x00, 0x40]
        psf2 += [0x80, 0x00, 0x80, 0x00, 0x80, 0x00]
        // Glyph 0: "A" and "é"; glyph 1: "B", then a sequence (e + combining acute) that is skipped.
        psf2 += [0x41, 0xC3, 0xA9, 0xFF, 0x42, 0xFE, 0x65, 0xCC, 0x81, 0xFF]
        let font = try BitmapFont.parse(psf2, path: "built.psf")
        #expect(font.format == .psf2)
        #expect(font.width == 10 && font.height == 3 && font.glyphCount == 2)
        let a = font.glyph(for: "A")
        #expect((0..<3).allSatisfy { y in (0..<10).allSatisfy { x in a.isSet(x: x, y: y) == (x == 9) } })
        let b = font.glyph(for: "B")
        #expect((0..<3).allSatisfy { y in (0..<10).allSatisfy { x in b.isSet(x: x, y: y) == (x == 0) } })
        #expect(font.glyph(for: "é") == a)
        #expect(font.glyphIndex(for: "e") == nil)
        #expect(font.glyphIndex(for: "\u{301}") == nil)
        // No "?" in the font: a blank glyph.
        #expect(font.glyph(for: "Z").setCount == 0)

        // PSF1, 256 glyphs of 8×2, no table: glyph n has the byte n in its first row.
        var psf1: [UInt8] = [0x36, 0x04, 0x00, 2]
        for n in 0..<256 { psf1 += [UInt8(n), 0] }
        let ascii = try BitmapFont.parse(psf1, path: "ascii.psf")
        #expect(ascii.format == .psf1 && !ascii.hasUnicodeTable && ascii.glyphCount == 256)
        #expect(ascii.glyphIndex(for: "A") == 65)
        #expect(ascii.glyphIndex(for: "é") == nil)
        let glyphA = ascii.glyph(for: "A")  // 0x41: pixels 1 and 7 of the first row
        #expect((0..<8).filter { glyphA.isSet(x: $0, y: 0) } == [1, 7])
        #expect(ascii.glyph(for: "é") == ascii.glyph(for: "?"))
    }

    /// The largest fonts of Debian trixie's console-setup-linux (which Raspberry Pi OS has too):
    /// DejaVu at 64×118 pixels, PSF2 with 512 glyphs. A configuration naming one draws with it.
    @Test func theLargestConsoleFontsLoad() throws {
        let width = 64, height = 118, rowBytes = 8
        var psf2: [UInt8] = []
        for word: UInt32 in [0x864A_B572, 0, 32, 0, 512, UInt32(rowBytes * height), UInt32(height), UInt32(width)] {
            psf2 += [UInt8(word & 0xFF), UInt8(word >> 8 & 0xFF), UInt8(word >> 16 & 0xFF), UInt8(word >> 24)]
        }
        // Glyph n has its pixel (n % 64, n / 8) set: the last column and the last rows are read.
        for n in 0..<512 {
            var glyph = [UInt8](repeating: 0, count: rowBytes * height)
            let x = n % width, y = n / 8 % height
            glyph[y * rowBytes + x / 8] = 0x80 >> UInt8(x % 8)
            psf2 += glyph
        }
        let font = try BitmapFont.parse(psf2, path: "Uni3-DejaVu118x64.psf")
        #expect(font.width == 64 && font.height == 118 && font.glyphCount == 512)
        let last = font.glyph(for: "\u{7F}")  // 127: pixel (63, 15)
        #expect(last.setCount == 1 && last.isSet(x: 63, y: 15))
        // The last pixel of the last glyph: the bottom right corner.
        var corner = Array(psf2.prefix(32))
        corner += [UInt8](repeating: 0, count: 512 * rowBytes * height)
        corner[corner.count - 1] = 1
        let glyph = try BitmapFont.parse(corner, path: "corner.psf").glyph(at: 511)
        #expect(glyph?.setCount == 1 && glyph?.isSet(x: 63, y: 117) == true)
    }

    /// The default font cut at every kind of place: an error that names the file and says it
    /// is cut short, never a crash or a font.
    @Test func truncatedFontsAreRefused() throws {
        let bytes = try gunzipped(BitmapFont.defaultPath)
        let glyphEnd = 4 + 256 * 16
        try #require(bytes.count > glyphEnd + 4)
        let cuts =
            Array(0...40) + [glyphEnd - 1, glyphEnd, glyphEnd + 1, (glyphEnd + bytes.count) / 2, bytes.count - 1]
        for cut in cuts {
            let error = overlayError { _ = try BitmapFont.parse(Array(bytes.prefix(cut)), path: "cut.psf") }
            guard case .fontInvalid(let path, let problem) = error else {
                Issue.record("cut at \(cut) of \(bytes.count): \(String(describing: error))")
                continue
            }
            #expect(path == "cut.psf")
            #expect(problem.contains("cut short") || problem.contains("empty") || problem.contains("magic"), "\(cut)")
        }
        let message = overlayError { _ = try BitmapFont.parse(Array(bytes.prefix(2000)), path: "cut.psf") }?.description
        #expect(
            message
                == "cut.psf is not a usable PSF console font: cut short: 512 glyphs of 8×16 need 8196 bytes with the header, the file has 2000; choose one of /usr/share/consolefonts/*.psf.gz"
        )
    }

    /// Files cut or damaged on disk: the gzip stream cut short, damaged gzip data, a PSF cut in
    /// its Unicode table.
    @Test func damagedFilesAreRefused() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let gz = try [UInt8](Data(contentsOf: URL(fileURLWithPath: BitmapFont.defaultPath)))

        let cutGzip = dir.file("cut.psf.gz")
        try Data(gz.prefix(gz.count / 2)).write(to: URL(fileURLWithPath: cutGzip))
        let cut = overlayError { _ = try BitmapFont.load(path: cutGzip) }
        #expect(cut == .fontUnreadable(path: cutGzip, reason: "the gzip stream is cut short (unexpected end of file)"))
        #expect(cut?.description.hasPrefix("cannot read the overlay font \(cutGzip): ") == true)

        var damaged = gz
        for i in 40..<200 { damaged[i] ^= 0x5A }
        let damagedGzip = dir.file("damaged.psf.gz")
        try Data(damaged).write(to: URL(fileURLWithPath: damagedGzip))
        guard case .fontUnreadable(let path, let reason) = overlayError({ _ = try BitmapFont.load(path: damagedGzip) })
        else {
            Issue.record("damaged gzip data read as a font")
            return
        }
        #expect(path == damagedGzip)
        #expect(reason.hasPrefix("the gzip data is damaged"))

        let plain = try gunzipped(BitmapFont.defaultPath)
        let cutTable = dir.file("cut-table.psf")
        try Data(plain.prefix(plain.count - 3)).write(to: URL(fileURLWithPath: cutTable))
        guard case .fontInvalid(_, let problem) = overlayError({ _ = try BitmapFont.load(path: cutTable) }) else {
            Issue.record("a font cut in its Unicode table was read")
            return
        }
        #expect(problem.hasPrefix("its Unicode table is cut short in the entry of glyph"))
    }

    /// Files that are no font: text, an empty file, a directory, an endless device, a header
    /// with absurd sizes.
    @Test func nonFontsAreRefused() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let text = dir.file("notes.psf")
        try "not a font at all\n".write(toFile: text, atomically: true, encoding: .utf8)
        #expect(
            overlayError { _ = try BitmapFont.load(path: text) }
                == .fontInvalid(
                    path: text, problem: "no PSF magic number at the start (PSF1 starts 36 04, PSF2 72 B5 4A 86)"))
        let empty = dir.file("empty.psf.gz")
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        #expect(
            overlayError { _ = try BitmapFont.load(path: empty) }
                == .fontInvalid(path: empty, problem: "the file is empty"))

        guard case .fontUnreadable(_, let reason) = overlayError({ _ = try BitmapFont.load(path: dir.path) }) else {
            Issue.record("a directory read as a font")
            return
        }
        #expect(reason == "is a directory")

        // Reading stops at the limit.
        #expect(
            overlayError { _ = try BitmapFont.load(path: "/dev/zero") }
                == .fontInvalid(
                    path: "/dev/zero",
                    problem: "more than 1048576 bytes uncompressed, over the limit (a console font takes a few KiB)"))

        var header: [UInt8] = []
        for word: UInt32 in [0x864A_B572, 0, 32, 0, 100_000, 4, 4, 8] {
            header += [UInt8(word & 0xFF), UInt8(word >> 8 & 0xFF), UInt8(word >> 16 & 0xFF), UInt8(word >> 24)]
        }
        #expect(
            overlayError { _ = try BitmapFont.parse(header, path: "many.psf") }
                == .fontInvalid(path: "many.psf", problem: "100000 glyphs (1 to 65536)"))
        header[28] = 200  // 200 pixels wide
        #expect(
            overlayError { _ = try BitmapFont.parse(header, path: "wide.psf") }
                == .fontInvalid(path: "wide.psf", problem: "glyphs of 200×4 pixels (each side 1 to 128)"))
    }

    /// A missing font says so; the default one says which package to install.
    @Test func missingFonts() throws {
        let missing = "/nonexistent/vigil/font.psf.gz"
        let error = overlayError { _ = try BitmapFont.load(path: missing) }
        #expect(error == .fontMissing(path: missing))
        #expect(error?.description.contains("no such file") == true)
        #expect(
            OverlayError.fontMissing(path: BitmapFont.defaultPath).description
                == "cannot open the overlay font /usr/share/consolefonts/Unifont-APL8x16.psf.gz: no such file; install it with `apt install psf-unifont`"
        )
    }
}
