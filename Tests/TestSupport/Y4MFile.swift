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
        try handle.write(
            contentsOf: Data(
                "YUV4MPEG2 W\(width) H\(height) F\(rate.numerator):\(rate.denominator) Ip A1:1 C420jpeg\n".utf8))
    }

    /// Appends one frame, which must be I420 (planes Y, U, V).
    public func write(_ frame: VideoFrame) throws {
        precondition(frame.format.pixelFormat == .i420, "Y4MFileWriter writes I420 frames")
        buffer.removeAll(keepingCapacity: true)
        buffer.append(contentsOf: Array("FRAME\n".utf8))
        for p in 0..<3 {
            let plane = frame.plane(p)
            for y in 0..<plane.height { buffer.append(contentsOf: plane.row(y)) }
        }
        try handle.write(contentsOf: buffer)
    }

    public func close() throws { try handle.close() }
}
