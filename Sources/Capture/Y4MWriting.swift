import Media

/// Writing YUV4MPEG2 as `Y4MSource` reads it: how vigil-bench, the tests and their feeders
/// turn synthetic frames into footage (the lines `ffmpeg -f yuv4mpegpipe` writes for 4:2:0).
extension Y4MHeader {
    /// The stream's header line, newline included, for progressive I420 frames (`C420jpeg`)
    /// with square pixels.
    public static func line(width: Int, height: Int, rate: Rational) -> [UInt8] {
        Array("\(magic) W\(width) H\(height) F\(rate.numerator):\(rate.denominator) Ip A1:1 C420jpeg\n".utf8)
    }

    /// Appends `frame`, which must be I420, as one frame of the stream: its `FRAME` line, then
    /// the rows of its Y, U and V planes without padding.
    public static func appendFrame(_ frame: VideoFrame, to bytes: inout [UInt8]) {
        precondition(frame.format.pixelFormat == .i420, "YUV4MPEG2 frames are written from I420 frames")
        bytes.append(contentsOf: "FRAME\n".utf8)
        for p in 0..<3 {
            let plane = frame.plane(p)
            for y in 0..<plane.height { bytes.append(contentsOf: plane.row(y)) }
        }
    }
}
