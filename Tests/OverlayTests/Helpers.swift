import Foundation
import Media
import Overlay
import TestSupport
import Testing

let fontDirectory = "/usr/share/consolefonts"

/// The default font (psf-unifont's 8×16 Unifont).
func defaultFont() throws -> BitmapFont { try BitmapFont.load(path: BitmapFont.defaultPath) }

/// The uncompressed bytes of a gzip'd file, by `gunzip` (not our zlib reader).
func gunzipped(_ path: String) throws -> [UInt8] {
    let r = try runTool("gunzip", ["-c", path])
    try #require(r.status == 0, "gunzip -c \(path): \(r.stderr)")
    return [UInt8](r.stdoutData)
}

/// The error `body` throws, or nil.
func overlayError(_ body: () throws -> Void) -> OverlayError? {
    do {
        try body()
        return nil
    } catch let error as OverlayError {
        return error
    } catch {
        Issue.record("not an OverlayError: \(error)")
        return nil
    }
}

/// Padding bytes at the end of each row of a frame with a stride wider than its picture.
let padding: UInt8 = 0x55

/// A frame of one flat colour (`y`, `u`, `v`); with `bytesPerLine`, each row's padding holds
/// `padding`, so a write past the picture shows.
func flatFrame(
    width: Int, height: Int, format pixelFormat: PixelFormat = .nv12, bytesPerLine: Int? = nil, y: UInt8 = 120,
    u: UInt8 = 60, v: UInt8 = 200
) throws -> VideoFrame {
    let format =
        try bytesPerLine.map {
            try VideoFormat(width: width, height: height, pixelFormat: pixelFormat, bytesPerLine: $0)
        } ?? VideoFormat(width: width, height: height, pixelFormat: pixelFormat)
    let buffer = FrameBuffer(capacity: format.bufferSize)
    buffer.base.update(repeating: padding, count: buffer.count)
    for (p, layout) in format.planes.enumerated() {
        let plane = buffer.mutablePlane(layout)
        switch (pixelFormat, p) {
        case (_, 0) where pixelFormat != .yuyv: plane.fill(y)
        case (.nv12, _):
            for row in 0..<plane.height {
                for x in 0..<plane.width { plane.base[row * plane.stride + x] = x % 2 == 0 ? u : v }
            }
        case (_, 1): plane.fill(u)
        case (_, 2): plane.fill(v)
        default: plane.fill(y)
        }
    }
    return VideoFrame(format: format, buffer: buffer, timestamp: .zero, sequence: 0)
}

/// Draws `text` with a new `overlay` into two flat 320×240 frames, expecting one rasterisation
/// for both and the same picture in each; returns the two frames.
func drawTwice(
    _ text: String, with overlay: TextOverlay, sourceLocation: SourceLocation = #_sourceLocation
) throws -> (first: VideoFrame, second: VideoFrame) {
    let first = try flatFrame(width: 320, height: 240)
    let second = try flatFrame(width: 320, height: 240)
    overlay.draw(text, into: first)
    overlay.draw(text, into: second)
    #expect(overlay.rasterisations == 1, sourceLocation: sourceLocation)
    #expect(bytes(of: first) == bytes(of: second), sourceLocation: sourceLocation)
    return (first, second)
}

/// Every byte of a frame's buffer.
func bytes(of frame: VideoFrame) -> [UInt8] {
    Array(UnsafeBufferPointer(start: frame.buffer.base, count: frame.buffer.count))
}

/// The luma plane of a frame, rows packed (`width` bytes each).
func packedLuma(_ frame: VideoFrame) -> [UInt8] {
    let plane = frame.luma
    var out: [UInt8] = []
    out.reserveCapacity(plane.width * plane.height)
    for y in 0..<plane.height { out += plane.row(y) }
    return out
}

/// What drawing did to a frame, checked against its box, plane by plane: outside the box
/// (and in the rows' padding) every byte as it was; inside, luma only glyph white, outline
/// black or the picture; every chroma sample wholly inside the box neutral, the others as
/// they were. Returns the number of glyph and outline pixels. The box is in the frame's own
/// pixels (as `TextOverlay.box` gives it, turned when the overlay is) and may reach past any edge.
@discardableResult
func checkDrawing(
    before: [UInt8], after frame: VideoFrame, box: TextBox, pictureLuma: UInt8 = 120
) -> (
    glyph: Int, outline: Int
) {
    let format = frame.format
    let after = bytes(of: frame)
    var counts = (glyph: 0, outline: 0)
    var owned = [Bool](repeating: false, count: after.count)
    // Luma.
    let y0 = format.planes[0]
    for y in 0..<format.height {
        for x in 0..<format.width {
            let i = y0.offset + y * y0.stride + x
            owned[i] = true
            let inside = x >= box.x && x < box.x + box.width && y >= box.y && y < box.y + box.height
            if !inside {
                if after[i] != before[i] { Issue.record("luma at \(x),\(y) outside \(box) changed") }
                continue
            }
            switch after[i] {
            case TextOverlay.glyphLuma: counts.glyph += 1
            case TextOverlay.outlineLuma: counts.outline += 1
            case pictureLuma: break
            default: Issue.record("luma \(after[i]) at \(x),\(y)")
            }
        }
    }
    // Chroma: sample (cx, cy) covers luma columns 2cx, 2cx+1 (within the picture), rows alike.
    func wholly(_ c: Int, _ start: Int, _ length: Int, _ limit: Int) -> Bool {
        2 * c >= start && min(2 * c + 2, limit) <= start + length
    }
    let chromaPlanes: [(layout: PlaneLayout, interleaved: Bool)] =
        format.pixelFormat == .nv12
        ? [(format.planes[1], true)] : [(format.planes[1], false), (format.planes[2], false)]
    for (layout, interleaved) in chromaPlanes {
        for cy in 0..<layout.rows {
            for b in 0..<layout.bytesPerRow {
                let i = layout.offset + cy * layout.stride + b
                owned[i] = true
                let cx = interleaved ? b / 2 : b
                let inside =
                    wholly(cx, box.x, box.width, format.width) && wholly(cy, box.y, box.height, format.height)
                if inside {
                    if after[i] != TextOverlay.neutralChroma { Issue.record("chroma \(cx),\(cy) not neutral") }
                } else if after[i] != before[i] {
                    Issue.record("chroma \(cx),\(cy) outside \(box) changed")
                }
            }
        }
    }
    for i in after.indices where !owned[i] && after[i] != before[i] {
        Issue.record("byte \(i), outside every plane's picture, changed")
    }
    return counts
}

/// `pixels`, a `width` × `height` picture row by row, turned clockwise by `degrees` (0, 90,
/// 180 or 270), as a player shows a movie whose matrix says so: the picture and its size.
func turnedClockwise(
    _ pixels: [UInt8], width: Int, height: Int, by degrees: Int
) -> (
    pixels: [UInt8], width: Int, height: Int
) {
    let shownWidth = degrees % 180 == 0 ? width : height
    let shownHeight = degrees % 180 == 0 ? height : width
    var out = [UInt8](repeating: 0, count: width * height)
    for y in 0..<height {
        for x in 0..<width {
            // Where stored pixel (x, y) is shown: the frame's top-left corner goes to the
            // top-right at 90, the bottom-right at 180, the bottom-left at 270.
            let (sx, sy) =
                switch degrees {
                case 90: (height - 1 - y, x)
                case 180: (width - 1 - x, height - 1 - y)
                case 270: (y, width - 1 - x)
                default: (x, y)
                }
            out[sy * shownWidth + sx] = pixels[y * width + x]
        }
    }
    return (out, shownWidth, shownHeight)
}
