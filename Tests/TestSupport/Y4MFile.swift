import Capture
import Foundation
import Media

/// Writes frames as a YUV4MPEG2 file, the format of Vigil's `file:` source (what
/// `ffmpeg -f yuv4mpegpipe` writes): a header line, then `FRAME` and the planes of each frame.
public final class Y4MFileWriter {
    private let handle: FileHandle
    public let path: String
    private var buffer: [UInt8] = []

    /// Creates `path` for `width`×`height` 4:2:0 frames at `rate` frames per second.
    public init(path: String, width: Int, height: Int, rate: Rational) throws {
        _ = FileManager.default.createFile(atPath: path, contents: nil)  // the open below says when it failed
        guard let h = FileHandle(forWritingAtPath: path) else { throw ToolError.notFound(path) }
        handle = h
        self.path = path
        try handle.write(contentsOf: Y4MHeader.line(width: width, height: height, rate: rate))
    }

    /// Appends one frame, which must be I420 (planes Y, U, V).
    public func write(_ frame: VideoFrame) throws {
        buffer.removeAll(keepingCapacity: true)
        Y4MHeader.appendFrame(frame, to: &buffer)
        try handle.write(contentsOf: buffer)
    }

    public func close() throws { try handle.close() }
}

/// Has ffmpeg write `frames` frames of its `testsrc2` pattern, `size` (as 96x64) at `rate` (as
/// 24.7) through the filters `filters`, in its pixel format `pixelFormat`, as a YUV4MPEG2 file.
public func ffmpegTestPatternY4M(
    to path: String, size: String, rate: String, frames: Int, filters: String, pixelFormat: String
) throws {
    let arguments = [
        "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=\(size):rate=\(rate)", "-frames:v", "\(frames)",
        "-vf", filters, "-pix_fmt", pixelFormat, "-f", "yuv4mpegpipe", path,
    ]
    let made = try runTool("ffmpeg", arguments)
    guard made.status == 0 else { throw ToolError.failed("ffmpeg " + arguments.joined(separator: " "), made) }
}
