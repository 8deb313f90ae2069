import Foundation
import Media
import Overlay
import TestSupport
import Testing

let fontDirectory = "/usr/share/consolefonts"

/// The default font (console-setup-linux's bold 8×16 Terminus).
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
