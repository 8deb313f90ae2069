import Media
import Overlay
import TestSupport
import Testing

@Suite struct DrawingTests {
    let clock = "2026-12-02 13:45:07"
    let clockAlphabet = "0123456789-: "

    /// In each corner, at each scale: the text reads back exactly from the frame, the box
    /// keeps its margin, and nothing outside it changes.
    @Test(arguments: OverlayPosition.allCases, [1, 2, 3])
    func corners(position: OverlayPosition, scale: Int) throws {
        let font = try defaultFont()
        let overlay = try TextOverlay(font: font, position: position, scale: scale)
        let frame = try flatFrame(width: 640, height: 360)
        let before = bytes(of: frame)
        overlay.draw(clock, into: frame)

        let box = overlay.box(characters: 19, pictureWidth: 640, pictureHeight: 360)
        let margin = 8 * scale
        #expect(overlay.margin == margin)
        #expect(box.width == (19 * 8 + 2) * scale)
        #expect(box.height == 18 * scale)
        switch position {
        case .topLeft: #expect(box.x == margin && box.y == margin)
        case .topRight: #expect(box.x + box.width == 640 - margin && box.y == margin)
        case .bottomLeft: #expect(box.x == margin && box.y + box.height == 360 - margin)
        case .bottomRight: #expect(box.x + box.width == 640 - margin && box.y + box.height == 360 - margin)
        }
        let counts = checkDrawing(before: before, after: frame, box: box)
        #expect(counts.glyph > 19 * 10 * scale * scale)
        #expect(counts.outline > counts.glyph / 2)
        let read = readText(
            luma: packedLuma(frame), width: 640, height: 360, font: font, position: position, scale: scale,
            length: 19, alphabet: clockAlphabet)
        #expect(read == clock)
        // The reader can fail: in another corner there is nothing to read.
        let elsewhere = OverlayPosition.allCases.first { $0 != position } ?? .topLeft
        let none = readText(
            luma: packedLuma(frame), width: 640, height: 360, font: font, position: elsewhere, scale: scale,
            length: 19, alphabet: clockAlphabet)
        #expect(none != clock)
    }

    /// Strides wider than the picture, both 4:2:0 layouts, odd sizes: only the box changes,
    /// never the padding.
    @Test(arguments: [PixelFormat.nv12, .i420], [(161, 121, 176), (320, 240, 384), (99, 37, 100)])
    func layouts(format: PixelFormat, size: (Int, Int, Int)) throws {
        let (width, height, stride) = size
        let font = try defaultFont()
        for position in OverlayPosition.allCases {
            let overlay = try TextOverlay(font: font, position: position, scale: 1)
            let frame = try flatFrame(width: width, height: height, format: format, bytesPerLine: stride)
            let before = bytes(of: frame)
            overlay.draw("12:34", into: frame)
            let box = overlay.box(characters: 5, pictureWidth: width, pictureHeight: height)
            let counts = checkDrawing(before: before, after: frame, box: box)
            #expect(counts.glyph > 0)
            let read = readText(
                luma: packedLuma(frame), width: width, height: height, font: font, position: position, scale: 1,
                length: 5, alphabet: clockAlphabet)
            #expect(read == "12:34", "\(position) \(width)×\(height)")
        }
    }

    /// Text wider or taller than the picture: it starts at the left (top) edge and is cut at
    /// the right (bottom), writing nothing past the picture.
    @Test func clipping() throws {
        let font = try defaultFont()
        let text = "2026-12-02 13:45:07 a camera with a very long name"
        for position in OverlayPosition.allCases {
            let overlay = try TextOverlay(font: font, position: position, scale: 2)
            let frame = try flatFrame(width: 160, height: 120, bytesPerLine: 192)
            let before = bytes(of: frame)
            overlay.draw(text, into: frame)
            let box = overlay.box(characters: text.unicodeScalars.count, pictureWidth: 160, pictureHeight: 120)
            #expect(box.x == 0)
            #expect(box.y == (position == .topLeft || position == .topRight ? 16 : 120 - 16 - 36))
            checkDrawing(before: before, after: frame, box: box)
            // Cells wholly inside: the ninth ends at 2 + 9·16 = 146; the tenth is cut at 160.
            let read = readText(
                luma: packedLuma(frame), width: 160, height: 120, font: font, position: position, scale: 2,
                length: 12, alphabet: clockAlphabet)
            #expect(read == "2026-12-0???")
        }
        // Taller than the picture, and a picture smaller than a character.
        for (width, height) in [(64, 20), (2, 2), (1, 1)] {
            let overlay = try TextOverlay(font: font, position: .bottomRight, scale: 3)
            let frame = try flatFrame(width: width, height: height, format: .i420, bytesPerLine: width + 7)
            let before = bytes(of: frame)
            overlay.draw("13:45", into: frame)
            let box = overlay.box(characters: 5, pictureWidth: width, pictureHeight: height)
            #expect(box.x == 0 && box.y == 0)
            checkDrawing(before: before, after: frame, box: box)
        }
    }

    /// The colour goes under the box: chroma neutral wherever glyphs are, in both layouts; the
    /// luma of NV12 and I420 is drawn alike.
    @Test func chromaIsNeutralUnderTheText() throws {
        let font = try defaultFont()
        let overlay = try TextOverlay(font: font, position: .topRight, scale: 2)
        let nv12 = try flatFrame(width: 320, height: 180, format: .nv12)
        let i420 = try flatFrame(width: 320, height: 180, format: .i420)
        overlay.draw(clock, into: nv12)
        overlay.draw(clock, into: i420)
        #expect(packedLuma(nv12) == packedLuma(i420))
        let luma = nv12.luma
        let uv = nv12.plane(1)
        let u = i420.plane(1)
        let v = i420.plane(2)
        var glyphs = 0
        for y in 0..<luma.height {
            for x in 0..<luma.width where luma.row(y)[x] == TextOverlay.glyphLuma {
                glyphs += 1
                #expect(uv.row(y / 2)[2 * (x / 2)] == 128 && uv.row(y / 2)[2 * (x / 2) + 1] == 128)
                #expect(u.row(y / 2)[x / 2] == 128 && v.row(y / 2)[x / 2] == 128)
            }
        }
        #expect(glyphs > 0)
        // Away from the box, the colour is the picture's.
        #expect(uv.row(170 / 2)[0] == 60 && uv.row(170 / 2)[1] == 200)
    }

    /// Only 4:2:0 frames are drawn into; YUYV and I422 stay as they were.
    @Test func otherFormatsAreLeftAlone() throws {
        let overlay = try TextOverlay(font: try defaultFont(), position: .topLeft, scale: 1)
        for format in [PixelFormat.yuyv, .i422] {
            let frame = try flatFrame(width: 64, height: 32, format: format)
            let before = bytes(of: frame)
            overlay.draw("12:00", into: frame)
            #expect(bytes(of: frame) == before)
        }
    }

    /// The text is rasterised once per text (and picture width), not per frame.
    @Test func maskIsCachedPerText() throws {
        let overlay = try TextOverlay(font: try defaultFont(), position: .bottomLeft, scale: 2)
        let (first, second) = try drawTwice("13:45:07", with: overlay)
        overlay.draw("13:45:08", into: second)
        #expect(overlay.rasterisations == 2)
        #expect(bytes(of: first) != bytes(of: second))
        overlay.draw("13:45:08", into: try flatFrame(width: 640, height: 240))
        #expect(overlay.rasterisations == 3)
        overlay.draw("", into: first)
        #expect(overlay.rasterisations == 3)
    }

    @Test func scaleIsChecked() throws {
        let font = try defaultFont()
        for scale in [0, -1, 9, 1000] {
            #expect(
                overlayError { _ = try TextOverlay(font: font, position: .topLeft, scale: scale) }
                    == .scaleOutOfRange(scale))
        }
        #expect(
            OverlayError.scaleOutOfRange(9).description
                == "an overlay scale of 9: it must be 1 to 8 (each font pixel drawn as scale × scale pixels)")
        for scale in TextOverlay.scales { _ = try TextOverlay(font: font, position: .topLeft, scale: scale) }
        // The layout takes any numbers without trapping.
        let huge = TextBox(
            characters: .max, font: font, scale: .max, position: .bottomRight, pictureWidth: 100, pictureHeight: 50)
        #expect(huge.x == 0 && huge.y == 0 && huge.cellWidth == 64)
        let none = TextBox(
            characters: -5, font: font, scale: .min, position: .topLeft, pictureWidth: 100, pictureHeight: 50)
        #expect(none.width == 2 && none.x == 8)
        #expect(OverlayPosition.allCases.map(\.rawValue) == ["top-left", "top-right", "bottom-left", "bottom-right"])
    }
}
