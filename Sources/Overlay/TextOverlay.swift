import Media

/// The corner of the picture the overlay's text sits in.
public enum OverlayPosition: String, CaseIterable, Sendable {
    case topLeft = "top-left"
    case topRight = "top-right"
    case bottomLeft = "bottom-left"
    case bottomRight = "bottom-right"
}

/// Where a line of overlay text lies in a picture, in pixels: the box (the characters and
/// their outline) and the first character cell's top-left corner. The box may reach past the
/// picture's right and bottom edges; drawing cuts it there.
///
/// Layout, for `n` characters of a `w`×`h` font at scale `s`: each font pixel is `s`×`s`
/// pixels; the box is `(n·w + 2)·s` × `(h + 2)·s` — the characters side by side, with one font
/// pixel of outline all round — and lies `margin` = 8·`s` pixels from the two edges of its
/// corner. A box too large for its margins moves towards the other edge; one larger than the
/// picture starts at its left (top) edge and is cut at the right (bottom): the start of the
/// text, the date, stays in sight.
public struct TextBox: Equatable, Sendable {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    /// Top-left corner of the first character cell (`s` pixels inside the box).
    public var textX: Int
    public var textY: Int
    /// Width and height of one character cell in pixels (the font's glyph times the scale).
    public var cellWidth: Int
    public var cellHeight: Int

    /// The box of `characters` characters of `font` at `scale`, in `position`, in a picture of
    /// `pictureWidth` × `pictureHeight`. A scale outside `TextOverlay.scales` is taken as the
    /// nearest one, and the count of characters as at most 2²⁴ (far more than any picture shows).
    public init(
        characters: Int, font: BitmapFont, scale: Int, position: OverlayPosition, pictureWidth: Int,
        pictureHeight: Int
    ) {
        let scale = min(max(scale, TextOverlay.scales.lowerBound), TextOverlay.scales.upperBound)
        let characters = min(max(characters, 0), 1 << 24)
        let margin = TextOverlay.marginPerScale * scale
        cellWidth = font.width * scale
        cellHeight = font.height * scale
        width = (characters * font.width + 2) * scale
        height = (font.height + 2) * scale
        let left = position == .topLeft || position == .bottomLeft
        let top = position == .topLeft || position == .topRight
        let preferredX = left ? margin : pictureWidth - margin - width
        let preferredY = top ? margin : pictureHeight - margin - height
        x = max(0, min(preferredX, pictureWidth - width))
        y = max(0, min(preferredY, pictureHeight - height))
        textX = x + scale
        textY = y + scale
    }
}

/// Draws a line of text into frames: white characters with a dark outline, in one corner,
/// on a box whose colour is taken out.
///
/// - Characters are the font's glyphs, one per Unicode scalar, each font pixel `scale`×`scale`
///   pixels; a character the font lacks is drawn as its `?`.
/// - Luma: glyph pixels become `glyphLuma` (235, video white), and the pixels around them — one
///   font pixel in every direction, diagonals included — `outlineLuma` (16, video black), so the
///   text reads on any picture; the rest of the box shows the picture.
/// - Chroma: every chroma sample lying wholly inside the box becomes neutral (128), so the text
///   stays white, not tinted by the picture under it, and the box is the picture in grey. The
///   box's edge is outline or picture, never a glyph, so the glyphs are always neutral.
/// - Layout: `TextBox` (a margin of 8·`scale` pixels from the corner's two edges; text wider
///   than the picture is cut at the right edge).
/// - Only NV12 and I420 frames, the encoder's formats, are drawn into; frames of other formats
///   are left as they are.
/// - Nothing outside the box is written.
///
/// Cheap per frame: the text is rasterised once into a mask, kept until the text or the
/// picture width changes (the clock's text changes once a second), and each frame only blends
/// the mask's rows into the luma plane and fills the box's chroma rows.
///
/// Not thread-safe: an overlay keeps its mask for the thread that draws (the pipeline's).
public final class TextOverlay {
    /// The scales accepted: each font pixel is drawn as `scale` × `scale` pixels.
    public static let scales = 1...8
    /// Luma of glyph pixels: white in video range.
    public static let glyphLuma: UInt8 = 235
    /// Luma of the outline: black in video range.
    public static let outlineLuma: UInt8 = 16
    /// Chroma of the box: no colour.
    public static let neutralChroma: UInt8 = 128

    /// Pixels between the text's box and the picture's edges, a scale step: 8, so 16 at scale 2.
    public static let marginPerScale = 8

    public let font: BitmapFont
    public let position: OverlayPosition
    public let scale: Int

    /// Pixels between the text's box and the edges of its corner (`marginPerScale` × `scale`).
    public var margin: Int { TextOverlay.marginPerScale * scale }

    /// The rasterised text, at the picture's resolution, row by row: `keep` is FF where the
    /// picture stays and 00 where the overlay draws, `value` what it draws there (00 elsewhere),
    /// so each pixel becomes `picture & keep | value`.
    private struct Mask {
        let text: String
        let pictureWidth: Int
        /// Characters in the text (the box's width counts all of them).
        let characters: Int
        /// Rasterised size in pixels: the box, or its part that can be in the picture.
        let width: Int
        let height: Int
        let keep: [UInt8]
        let value: [UInt8]
    }
    private var mask: Mask?
    /// Times the text was rasterised (once per distinct text, or picture width, in a row).
    public private(set) var rasterisations = 0

    /// An overlay in `font` at `scale` (1 to 8) in the `position` corner.
    public init(font: BitmapFont, position: OverlayPosition, scale: Int) throws(OverlayError) {
        guard TextOverlay.scales.contains(scale) else { throw .scaleOutOfRange(scale) }
        self.font = font
        self.position = position
        self.scale = scale
    }

    /// Where `characters` characters lie in a `width` × `height` picture.
    public func box(characters: Int, pictureWidth width: Int, pictureHeight height: Int) -> TextBox {
        TextBox(
            characters: characters, font: font, scale: scale, position: position, pictureWidth: width,
            pictureHeight: height)
    }

    /// Draws `text` into `frame`'s buffer, an NV12 or I420 frame (others are left alone), cut
    /// to the picture; an empty text draws nothing. The frame's buffer must not be shared with
    /// a reader yet (draw before handing the frame on).
    public func draw(_ text: String, into frame: VideoFrame) {
        let format = frame.format
        guard format.pixelFormat == .nv12 || format.pixelFormat == .i420, !text.isEmpty else { return }
        let mask = self.mask(for: text, pictureWidth: format.width)
        let box = self.box(characters: mask.characters, pictureWidth: format.width, pictureHeight: format.height)
        // The part of the box inside the picture (the mask starts at the box's corner).
        let x0 = max(box.x, 0)
        let x1 = min(box.x + mask.width, format.width)
        let y0 = max(box.y, 0)
        let y1 = min(box.y + mask.height, format.height)
        guard x0 < x1, y0 < y1 else { return }

        let luma = frame.buffer.mutablePlane(format.planes[0])
        mask.keep.withUnsafeBufferPointer { keep in
            mask.value.withUnsafeBufferPointer { value in
                guard let keep = keep.baseAddress, let value = value.baseAddress else { return }
                for y in y0..<y1 {
                    let m = (y - box.y) * mask.width + (x0 - box.x)
                    TextOverlay.blendRow(luma.base + y * luma.stride + x0, keep + m, value + m, x1 - x0)
                }
            }
        }

        // Chroma samples wholly inside the box: each covers luma columns 2c, 2c+1 and rows
        // 2r, 2r+1; at the picture's edge an odd last column or row is a sample of its own.
        let cx0 = (x0 + 1) / 2
        let cx1 = x1 == format.width ? (x1 + 1) / 2 : x1 / 2
        let cy0 = (y0 + 1) / 2
        let cy1 = y1 == format.height ? (y1 + 1) / 2 : y1 / 2
        guard cx0 < cx1, cy0 < cy1 else { return }
        if format.pixelFormat == .nv12 {
            let uv = frame.buffer.mutablePlane(format.planes[1])
            for y in cy0..<cy1 {
                (uv.base + y * uv.stride + 2 * cx0).update(repeating: TextOverlay.neutralChroma, count: 2 * (cx1 - cx0))
            }
        } else {
            for p in 1...2 {
                let plane = frame.buffer.mutablePlane(format.planes[p])
                for y in cy0..<cy1 {
                    (plane.base + y * plane.stride + cx0).update(repeating: TextOverlay.neutralChroma, count: cx1 - cx0)
                }
            }
        }
    }

    /// One row of the mask into the picture: `d = d & keep | value`. On its own, so that the
    /// optimiser makes one SIMD loop of it (as `PixelConversion`'s row kernels).
    @inline(never)
    static func blendRow(
        _ d: UnsafeMutablePointer<UInt8>, _ keep: UnsafePointer<UInt8>, _ value: UnsafePointer<UInt8>, _ count: Int
    ) {
        for i in 0..<count {
            d[i] = (d[i] & keep[i]) | value[i]
        }
    }

    /// The mask of `text`, rasterised when the text or the picture width changed.
    private func mask(for text: String, pictureWidth: Int) -> Mask {
        if let mask, mask.pictureWidth == pictureWidth, mask.text == text { return mask }
        let made = rasterise(text, pictureWidth: pictureWidth)
        mask = made
        rasterisations += 1
        return made
    }

    private func rasterise(_ text: String, pictureWidth: Int) -> Mask {
        let scalars = Array(text.unicodeScalars)
        let w = font.width
        let h = font.height
        let s = scale
        // Characters that can reach the picture: the box starts at x ≥ 0, its first cell s
        // pixels in; text longer than that is cut by the picture's edge anyway.
        let visible = min(scalars.count, pictureWidth / (w * s) + 2)
        // In font pixels, with a border of one all round for the outline: 2 glyph, 1 outline.
        let gridWidth = visible * w + 2
        let gridHeight = h + 2
        var grid = [UInt8](repeating: 0, count: gridWidth * gridHeight)
        for (i, scalar) in scalars.prefix(visible).enumerated() {
            let glyph = font.glyph(for: scalar)
            for gy in 0..<h {
                for gx in 0..<w where glyph.pixels[gy * w + gx] != 0 {
                    grid[(gy + 1) * gridWidth + 1 + i * w + gx] = 2
                }
            }
        }
        let glyphs = grid
        for gy in 0..<gridHeight {
            for gx in 0..<gridWidth where glyphs[gy * gridWidth + gx] == 0 {
                var near = false
                for ny in max(gy - 1, 0)...min(gy + 1, gridHeight - 1) {
                    for nx in max(gx - 1, 0)...min(gx + 1, gridWidth - 1) where glyphs[ny * gridWidth + nx] == 2 {
                        near = true
                    }
                }
                if near { grid[gy * gridWidth + gx] = 1 }
            }
        }
        let width = gridWidth * s
        let height = gridHeight * s
        var keep = [UInt8](repeating: 0xFF, count: width * height)
        var value = [UInt8](repeating: 0, count: width * height)
        for y in 0..<height {
            let row = (y / s) * gridWidth
            for x in 0..<width {
                switch grid[row + x / s] {
                case 2:
                    keep[y * width + x] = 0
                    value[y * width + x] = TextOverlay.glyphLuma
                case 1:
                    keep[y * width + x] = 0
                    value[y * width + x] = TextOverlay.outlineLuma
                default: break
                }
            }
        }
        return Mask(
            text: text, pictureWidth: pictureWidth, characters: scalars.count, width: width, height: height, keep: keep,
            value: value)
    }
}
