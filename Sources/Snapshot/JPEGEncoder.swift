internal import CTurboJPEG
import Media

/// Encodes snapshots as JPEG with libturbojpeg, straight from the picture's Y, U and V planes
/// (`tjCompressFromYUVPlanes`, 4:2:0): no conversion to RGB and back.
///
/// The samples go into the JPEG as they are: JFIF reads them as full-range BT.601, so a
/// camera's limited-range video (black at 16) comes out a little flat.
///
/// Thread-safe: each call makes, uses and destroys its own compressor, so calls may run on
/// any threads at once. An encode takes milliseconds; run it off the pipeline thread.
public enum JPEGEncoder {
    /// The qualities libturbojpeg takes: 1 is the smallest file, 100 the best picture.
    public static let qualities = 1...100

    /// The JPEG of `picture`, upright (`picture.rotation` applied), `picture.width` ×
    /// `picture.height` pixels, at `quality` (1 to 100).
    ///
    /// - Throws: `SnapshotError.invalidQuality` for a quality outside 1…100;
    ///   `.encoderUnavailable` when libturbojpeg cannot make a compressor; `.encodeFailed`
    ///   with libturbojpeg's message when it fails to compress.
    public static func encode(_ picture: SnapshotPicture, quality: Int) throws(SnapshotError) -> [UInt8] {
        guard qualities.contains(quality) else { throw .invalidQuality(quality) }
        let width = picture.width
        let height = picture.height
        let samples = picture.uprightSamples()
        let lumaCount = width * height
        let chromaCount = (width / 2) * (height / 2)
        guard samples.count == lumaCount + 2 * chromaCount else {
            throw .encodeFailed(
                width: width, height: height,
                details: "the picture holds \(samples.count) bytes, not the \(lumaCount + 2 * chromaCount) of its size")
        }

        guard let handle = tjInitCompress() else { throw .encoderUnavailable(errorMessage(nil)) }
        defer { tjDestroy(handle) }
        // libturbojpeg allocates the output (`jpeg` starts nil) and may grow it; it is ours to
        // free with tjFree, whether the call succeeded or not.
        var jpeg: UnsafeMutablePointer<UInt8>?
        var jpegSize: UInt = 0
        defer { if let jpeg { tjFree(jpeg) } }
        let status = samples.withUnsafeBufferPointer { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return -1 }
            var planes: [UnsafePointer<UInt8>?] = [base, base + lumaCount, base + lumaCount + chromaCount]
            var strides: [Int32] = [Int32(width), Int32(width / 2), Int32(width / 2)]
            return tjCompressFromYUVPlanes(
                handle, &planes, Int32(width), &strides, Int32(height), Int32(TJSAMP_420.rawValue), &jpeg,
                &jpegSize, Int32(quality), 0)
        }
        guard status == 0, let jpeg, jpegSize > 0 else {
            throw .encodeFailed(width: width, height: height, details: errorMessage(handle))
        }
        return Array(UnsafeBufferPointer(start: jpeg, count: Int(jpegSize)))
    }

    /// libturbojpeg's message for the last error of `handle` (nil: of the last failed
    /// `tjInit*`).
    private static func errorMessage(_ handle: UnsafeMutableRawPointer?) -> String {
        guard let text = tjGetErrorStr2(handle) else { return "no message" }
        let message = String(cString: text)
        return message.isEmpty ? "no message" : message
    }
}
