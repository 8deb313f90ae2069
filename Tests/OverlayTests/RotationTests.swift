import Media
import Overlay
import TestSupport
import Testing

/// A camera mounted turned: the overlay draws into the stored frame so that the picture a
/// player shows — the frame turned clockwise by the rotation — has the text upright in its
/// corner. Each test turns the drawn frame as a player would and reads the text there.
@Suite struct RotationTests {
    let clockAlphabet = "0123456789-: "

    /// The box as the viewer sees it, from the layout's rules alone: `margin` from the two
    /// edges of its corner in a `width` × `height` shown picture (when it fits).
    func shownBox(
        characters: Int, scale: Int, position: OverlayPosition, width: Int, height: Int
    ) -> (x: Int, y: Int, width: Int, height: Int) {
        let margin = TextOverlay.marginPerScale * scale
        let boxWidth = (characters * 8 + 2) * scale
        let boxHeight = (16 + 2) * scale
        let left = position == .topLeft || position == .bottomLeft
        let top = position == .topLeft || position == .topRight
        return (
            left ? margin : width - margin - boxWidth, top ? margin : height - margin - boxHeight, boxWidth, boxHeight
        )
    }

    /// In every corner, at every rotation, in frames wider and taller than they are shown, both
    /// layouts with padded strides and an odd size: the shown picture reads back the text,
    /// upright, in its corner, with the margins from the shown edges; only the box changed;
    /// the chroma under it is neutral.
    @Test(
        arguments: Rotation.allCases,
        [(PixelFormat.nv12, 320, 240, 352), (.i420, 240, 320, 256), (.nv12, 161, 121, 176), (.i420, 121, 161, 130)])
    func readsUprightWhenShown(rotation: Rotation, frameSize: (PixelFormat, Int, Int, Int)) throws {
        let (pixelFormat, width, height, stride) = frameSize
        let font = try defaultFont()
        #expect(font.width == 8 && font.height == 16)
        let texts = width > 200 || height > 200 ? [("2026-12-02 13:45:07", 1), ("13:45:07", 2)] : [("12:34", 1)]
        for (text, scale) in texts {
            for position in OverlayPosition.allCases {
                let overlay = try TextOverlay(font: font, position: position, scale: scale, rotation: rotation)
                #expect(overlay.rotation == rotation)
                let frame = try flatFrame(width: width, height: height, format: pixelFormat, bytesPerLine: stride)
                let before = bytes(of: frame)
                overlay.draw(text, into: frame)
                let characters = text.unicodeScalars.count
                let box = overlay.box(characters: characters, pictureWidth: width, pictureHeight: height)
                #expect(box.rotation == rotation)
                let counts = checkDrawing(before: before, after: frame, box: box)
                #expect(counts.glyph > characters * 10 * scale * scale)

                let shown = turnedClockwise(packedLuma(frame), width: width, height: height, by: rotation.degrees)
                let read = readText(
                    luma: shown.pixels, width: shown.width, height: shown.height, font: font, position: position,
                    scale: scale, length: characters, alphabet: clockAlphabet)
                #expect(read == text, "\(position) at \(rotation.degrees)° in \(width)×\(height)")

                // The box, turned as the frame is, is where the layout puts it in the shown
                // picture; everything drawn lies in it.
                let expected = shownBox(
                    characters: characters, scale: scale, position: position, width: shown.width,
                    height: shown.height)
                var inBox = [UInt8](repeating: 0, count: width * height)
                for y in max(box.y, 0)..<min(box.y + box.height, height) {
                    for x in max(box.x, 0)..<min(box.x + box.width, width) { inBox[y * width + x] = 1 }
                }
                let shownInBox = turnedClockwise(inBox, width: width, height: height, by: rotation.degrees).pixels
                var drawnOutside = 0
                var boxMismatches = 0
                for y in 0..<shown.height {
                    for x in 0..<shown.width {
                        let inside =
                            x >= expected.x && x < expected.x + expected.width && y >= expected.y
                            && y < expected.y + expected.height
                        if (shownInBox[y * shown.width + x] == 1) != inside { boxMismatches += 1 }
                        if !inside && shown.pixels[y * shown.width + x] != 120 { drawnOutside += 1 }
                    }
                }
                #expect(
                    boxMismatches == 0, "\(position) at \(rotation.degrees)°: the box turned is not the shown layout")
                #expect(drawnOutside == 0)

                // Unturned, the frame does not read as the text (the test would notice a
                // rotation ignored).
                if rotation != .none {
                    let stored = readText(
                        luma: packedLuma(frame), width: width, height: height, font: font, position: position,
                        scale: scale, length: characters, alphabet: clockAlphabet)
                    #expect(stored != text)
                }
            }
        }
    }

    /// Text longer than the shown picture is wide starts at the shown left edge and is cut at
    /// the shown right, whichever edge of the stored frame that is; nothing past the frame is
    /// written. And pictures smaller than the box, at every rotation.
    @Test(arguments: Rotation.allCases)
    func clippingAsShown(rotation: Rotation) throws {
        let font = try defaultFont()
        let text = "2026-12-02 13:45:07 a camera with a very long name"
        // Shown 160 × 120.
        let (width, height) = rotation.isSideways ? (120, 160) : (160, 120)
        for position in OverlayPosition.allCases {
            let overlay = try TextOverlay(font: font, position: position, scale: 2, rotation: rotation)
            let frame = try flatFrame(width: width, height: height, bytesPerLine: width + 32)
            let before = bytes(of: frame)
            overlay.draw(text, into: frame)
            let box = overlay.box(characters: text.unicodeScalars.count, pictureWidth: width, pictureHeight: height)
            checkDrawing(before: before, after: frame, box: box)
            let shown = turnedClockwise(packedLuma(frame), width: width, height: height, by: rotation.degrees)
            #expect(shown.width == 160 && shown.height == 120)
            // Cells wholly inside: the ninth ends at 2 + 9·16 = 146; the tenth is cut at 160.
            let read = readText(
                luma: shown.pixels, width: 160, height: 120, font: font, position: position, scale: 2, length: 12,
                alphabet: clockAlphabet)
            #expect(read == "2026-12-0???", "\(position) at \(rotation.degrees)°")
        }
        for (width, height) in [(64, 20), (20, 64), (2, 2), (1, 1), (3, 1)] {
            for position in OverlayPosition.allCases {
                let overlay = try TextOverlay(font: font, position: position, scale: 3, rotation: rotation)
                let frame = try flatFrame(width: width, height: height, format: .i420, bytesPerLine: width + 7)
                let before = bytes(of: frame)
                overlay.draw("13:45", into: frame)
                let box = overlay.box(characters: 5, pictureWidth: width, pictureHeight: height)
                checkDrawing(before: before, after: frame, box: box)
            }
        }
    }

    /// The mask is turned once per text: a frame of another size shown as wide needs no new one.
    @Test func maskIsCachedPerTextAndShownWidth() throws {
        let overlay = try TextOverlay(font: try defaultFont(), position: .bottomRight, scale: 2, rotation: .clockwise90)
        _ = try drawTwice("13:45:07", with: overlay)
        // Shown 240 wide still.
        overlay.draw("13:45:07", into: try flatFrame(width: 480, height: 240))
        #expect(overlay.rasterisations == 1)
        overlay.draw("13:45:07", into: try flatFrame(width: 240, height: 320))
        #expect(overlay.rasterisations == 2)
    }

    /// Only quarter turns are rotations; the box follows the one it is given.
    @Test func rotationIsAQuarterTurn() throws {
        let font = try defaultFont()
        for degrees in [-90, 45, 360, 1, 271, .max, .min] {
            #expect(Rotation(degrees: degrees) == nil, "\(degrees)")
        }
        #expect(Rotation.allCases.map(\.degrees) == [0, 90, 180, 270])
        #expect(try TextOverlay(font: font, position: .topLeft, scale: 1).rotation == .none)
        func box(_ rotation: Rotation) -> TextBox {
            TextBox(
                characters: 5, font: font, scale: 1, position: .topLeft, pictureWidth: 320, pictureHeight: 240,
                rotation: rotation)
        }
        // Top-left as shown at 90 is the stored frame's bottom-left; the text runs upwards.
        let turned = box(.clockwise90)
        #expect(turned.x == 8 && turned.width == 18 && turned.height == 42 && turned.y == 240 - 8 - 42)
        #expect(turned.cellWidth == 16 && turned.cellHeight == 8)
        #expect(turned.textX == 9 && turned.textY == 240 - 8 - 1 - 8)
    }
}
