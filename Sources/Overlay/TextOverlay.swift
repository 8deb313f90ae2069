import Media

/// The corner of the picture the overlay's text sits in.
public enum OverlayPosition: String, CaseIterable, Sendable {
    case topLeft = "top-left"
    case topRight = "top-right"
    case bottomLeft = "bottom-left"
    case bottomRight = "bottom-right"
}

/// Where a line of overlay text lies in a frame, in pixels: the box (the characters and their
/// outline) and the first character cell.
///
/// Layout, as the picture is shown, for `n` characters of a `w`×`h` font at scale `s`: each
/// font pixel is `s`×`s` pixels; the box is `(n·w + 2)·s` × `(h + 2)·s` — the characters side by
/// side, with one font pixel of outline all round — and lies `margin` = 8·`s` pixels from the
/// two edges of its corner. A box too large for its margins moves towards the other edge; one
/// larger than the picture starts at its left (top) edge and is cut at the right (bottom): the
/// start of the text, the date, stays in sight.
///
/// Rotation: a camera mounted turned stores frames that a player shows turned `rotation`
/// degrees clockwise (the movie's matrix). The layout above is made in that shown picture —
/// the text upright, in the `position` corner as the viewer sees it — and every field here is
/// then in the stored frame's own pixels, the ones drawn into. With a rotation of 0 the two are
/// the same. Otherwise the box is turned: 90 or 270 makes it `(h + 2)·s` wide and `(n·w + 2)·s`
/// tall, and the part cut off by the shown picture's right (bottom) edge lies past whichever
/// frame edge that is, so `x` or `y` may be negative. Drawing cuts the box at the frame's
/// edges.
public struct TextBox: Equatable, Sendable {
    /// The box in the stored frame: top-left corner and size (see the rotation above).
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    /// Top-left corner, in the stored frame, of the first character cell's rectangle (`s`
    /// pixels inside the box, on the side the text starts from).
    public var textX: Int
    public var textY: Int
    /// Size of one character cell's rectangle in the stored frame: the font's glyph times the
    /// scale, width and height exchanged at 90 and 270.
    public var cellWidth: Int
    public var cellHeight: Int
    /// How the frame is turned, clockwise, to be shown. The cells follow one another rightwards
    /// in the frame at 0, upwards at 90, leftwards at 180 and downwards at 270 — left to right,
    /// as shown.
    public var rotation: Rotation

    /// The box of `characters` characters of `font` at `scale`, in `position`, for a stored
    /// frame of `pictureWidth` × `pictureHeight` shown turned `rotation` degrees clockwise.
    /// A scale outside `TextOverlay.scales` is taken as the nearest one, the count of characters
    /// as at most 2²⁴ (far more than any picture shows).
    public init(
        characters: Int, font: BitmapFont, scale: Int, position: OverlayPosition, pictureWidth: Int,
        pictureHeight: Int, rotation: Rotation = .none
    ) {
        let scale = min(max(scale, TextOverlay.scales.lowerBound), TextOverlay.scales.upperBound)
        let characters = min(max(characters, 0), 1 << 24)
        let margin = TextOverlay.marginPerScale * scale
        // The layout as shown.
        let (shownWidth, shownHeight) = rotation.shown(width: pictureWidth, height: pictureHeight)
        let boxWidth = (characters * font.width + 2) * scale
        let boxHeight = (font.height + 2) * scale
        let left = position == .topLeft || position == .bottomLeft
        let top = position == .topLeft || position == .topRight
        let preferredX = left ? margin : shownWidth - margin - boxWidth
        let preferredY = top ? margin : shownHeight - margin - boxHeight
        let shownX = max(0, min(preferredX, shownWidth - boxWidth))
        let shownY = max(0, min(preferredY, shownHeight - boxHeight))
        // Back into the stored frame.
        let frame = (width: pictureWidth, height: pictureHeight)
        let box = TextBox.stored(
            x: shownX, y: shownY, width: boxWidth, height: boxHeight, rotation: rotation, frame: frame)
        let cell = TextBox.stored(
            x: shownX + scale, y: shownY + scale, width: font.width * scale, height: font.height * scale,
            rotation: rotation, frame: frame)
        (x, y, width, height) = box
        (textX, textY, cellWidth, cellHeight) = cell
        self.rotation = rotation
    }

    /// The rectangle of the stored frame (`frame`'s size, before the turn) that is shown as the
    /// rectangle at `x`, `y`, `width` × `height` once the frame is turned by `rotation`
    /// clockwise. Shown pixel (X, Y) comes from stored pixel (Y, H−1−X) at
    /// 90, (W−1−X, H−1−Y) at 180 and (W−1−Y, X) at 270.
    static func stored(
        x: Int, y: Int, width: Int, height: Int, rotation: Rotation, frame: (width: Int, height: Int)
    ) -> (x: Int, y: Int, width: Int, height: Int) {
        switch rotation {
        case .clockwise90: (y, frame.height - x - width, height, width)
        case .clockwise180: (frame.width - x - width, frame.height - y - height, width, height)
        case .clockwise270: (frame.width - y - height, x, height, width)
        case .none: (x, y, width, height)
        }
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
/// - Rotation: for a camera mounted turned, whose frames a player shows turned `rotation`
///   degrees clockwise, the text is laid out in the picture as shown — upright, in the
///   `position` corner, its margins from the shown edges, cut at the shown right edge — and
///   drawn turned the other way, counter-clockwise, into the stored frame, at the corner that is
///   shown as `position`.
/// - Only NV12 and I420 frames, the encoder's formats, are drawn into; frames of other formats
///   are left as they are.
/// - Nothing outside the box is written.
///
/// Cheap per frame: the text is rasterised once into a mask, already turned, kept until the
/// text or the shown picture's width changes (the clock's text changes once a second), and
/// each frame only blends the mask's rows into the luma plane and fills the box's chroma rows.
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
    /// How the frames are turned, clockwise, to be shown (the movie's matrix, from
    /// `camera.rotation`).
    public let rotation: Rotation

    /// Pixels between the text's box and the edges of its corner (`marginPerScale` × `scale`).
    public var margin: Int { TextOverlay.marginPerScale * scale }

    /// The rasterised text, at the picture's resolution, turned as the stored frame is, row by
    /// row: `keep` is FF where the picture stays and 00 where the overlay draws, `value` what it
    /// draws there (00 elsewhere), so each pixel becomes `picture & keep | value`.
    private struct Mask {
        let text: String
        /// Width of the picture as shown (the stored frame's height at 90 and 270).
        let shownWidth: Int
        /// Characters in the text (the box's width counts all of them).
        let characters: Int
        /// Rasterised size as shown, in pixels: the box, or its part (from the text's start)
        /// that can be in the picture.
        let shownMaskWidth: Int
        let shownMaskHeight: Int
        /// Size in the stored frame: the size as shown, exchanged at 90 and 270.
        let width: Int
        let height: Int
        let keep: [UInt8]
        let value: [UInt8]
    }
    private var mask: Mask?
    /// Times the text was rasterised (once per distinct text, or shown picture width, in a row).
    public private(set) var rasterisations = 0

    /// An overlay in `font` at `scale` (1 to 8) in the `position` corner of frames shown turned
    /// by `rotation` (the camera's `camera.rotation`).
    public init(
        font: BitmapFont, position: OverlayPosition, scale: Int, rotation: Rotation = .none
    ) throws(OverlayError) {
        guard TextOverlay.scales.contains(scale) else { throw .scaleOutOfRange(scale) }
        self.font = font
        self.position = position
        self.scale = scale
        self.rotation = rotation
    }

    /// Where `characters` characters lie in a stored frame of `width` × `height` (the frame
    /// drawn into, before the player's turn), in that frame's pixels.
    public func box(characters: Int, pictureWidth width: Int, pictureHeight height: Int) -> TextBox {
        TextBox(
            characters: characters, font: font, scale: scale, position: position, pictureWidth: width,
            pictureHeight: height, rotation: rotation)
    }

    /// How many characters fit across a stored frame of `width` × `height` as it is shown (the
    /// box with its outline inside the picture; its margins give way first).
    public func charactersThatFit(pictureWidth width: Int, pictureHeight height: Int) -> Int {
        let shownWidth = rotation.shown(width: width, height: height).width
        return max(0, (shownWidth / scale - 2) / font.width)
    }

    /// Draws `text` into `frame`'s buffer, an NV12 or I420 frame (others are left alone), cut
    /// to the picture; an empty text draws nothing. The frame's buffer must not be shared with
    /// a reader yet (draw before handing the frame on).
    public func draw(_ text: String, into frame: VideoFrame) {
        let format = frame.format
        guard format.pixelFormat == .nv12 || format.pixelFormat == .i420, !text.isEmpty else { return }
        // The picture as shown: the frame turned clockwise by `rotation`.
        let (shownWidth, shownHeight) = rotation.shown(width: format.width, height: format.height)
        let mask = self.mask(for: text, shownWidth: shownWidth)
        // The mask where it lies in the frame: as shown, it starts at the box's corner.
        let shown = TextBox(
            characters: mask.characters, font: font, scale: scale, position: position, pictureWidth: shownWidth,
            pictureHeight: shownHeight)
        let box = TextBox.stored(
            x: shown.x, y: shown.y, width: mask.shownMaskWidth, height: mask.shownMaskHeight, rotation: rotation,
            frame: (format.width, format.height))
        // The part of the mask inside the frame: the part of the box inside it, since the mask
        // is cut only past the picture.
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

    /// The mask of `text`, rasterised when the text or the shown picture's width changed.
    private func mask(for text: String, shownWidth: Int) -> Mask {
        if let mask, mask.shownWidth == shownWidth, mask.text == text { return mask }
        let made = rasterise(text, shownWidth: shownWidth)
        mask = made
        rasterisations += 1
        return made
    }

    /// The mask of `text`: rasterised upright, as shown, then turned counter-clockwise by
    /// `rotation`, so that the player's clockwise turn makes it upright again.
    private func rasterise(_ text: String, shownWidth: Int) -> Mask {
        let scalars = Array(text.unicodeScalars)
        let w = font.width
        let h = font.height
        let s = scale
        // Characters that can reach the picture: the box starts at x ≥ 0, its first cell s
        // pixels in; text longer than that is cut by the picture's edge anyway.
        let visible = min(scalars.count, max(shownWidth, 0) / (w * s) + 2)
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
        // Turned counter-clockwise: the player's clockwise turn makes it upright again.
        let back = rotation.inverse
        let turned = back.shown(width: width, height: height)
        return Mask(
            text: text, shownWidth: shownWidth, characters: scalars.count, shownMaskWidth: width,
            shownMaskHeight: height,
            width: turned.width, height: turned.height,
            keep: back.turned(keep, width: width, height: height),
            value: back.turned(value, width: width, height: height))
    }
}
