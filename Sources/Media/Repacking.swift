extension VideoFrame {
    /// The picture of this NV12 frame in a layout cameras deliver — YUYV (rows `rowPadding`
    /// bytes wider than the picture) or planar 4:2:2 — each chroma row used for both rows of its
    /// pair, so that `PlanarConverter` (averaging equal rows) gives exactly this picture back.
    /// The inverse of the converter: what the bench and the tests feed it and the encoders.
    public func repacked(as pixelFormat: PixelFormat, rowPadding: Int = 0) throws(VideoFormatError) -> VideoFrame {
        precondition(format.pixelFormat == .nv12, "repacked(as:) starts from an NV12 frame")
        precondition(pixelFormat == .yuyv || pixelFormat == .i422, "repacked(as:) makes YUYV or I422")
        let f = format
        let target =
            pixelFormat == .yuyv
            ? try VideoFormat(
                width: f.width, height: f.height, pixelFormat: .yuyv, bytesPerLine: 2 * f.width + rowPadding)
            : try VideoFormat(width: f.width, height: f.height, pixelFormat: .i422)
        let buffer = FrameBuffer(capacity: target.bufferSize)
        let y = plane(0), uv = plane(1)
        if pixelFormat == .yuyv {
            let out = buffer.mutablePlane(target.planes[0])
            for row in 0..<f.height {
                let luma = y.row(row), chroma = uv.row(row / 2)
                let d = out.base + row * out.stride
                for x in 0..<f.width {
                    d[2 * x] = luma[x]
                    d[2 * x + 1] = chroma[x]  // U for even x, V for odd x: NV12's chroma order
                }
            }
        } else {
            PixelConversion.copy(y, into: buffer.mutablePlane(target.planes[0]))
            let u = buffer.mutablePlane(target.planes[1]), v = buffer.mutablePlane(target.planes[2])
            for row in 0..<f.height {
                let chroma = uv.row(row / 2)
                for x in 0..<u.width {
                    u.base[row * u.stride + x] = chroma[2 * x]
                    v.base[row * v.stride + x] = chroma[2 * x + 1]
                }
            }
        }
        return VideoFrame(format: target, buffer: buffer, timestamp: timestamp, sequence: sequence)
    }
}
