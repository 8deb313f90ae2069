internal import CTurboJPEG

/// A small copy of a JPEG for a list of pictures: decoded by libturbojpeg at the largest of its
/// scales (1/2, 1/4, 1/8 … — the reduction done in the inverse DCT, so the big picture is
/// never made) that is still at least `width` pixels wide, and encoded again. The aspect stays
/// the picture's.
///
/// Thread-safe: each call makes, uses and destroys its own decompressor and compressor. A
/// thumbnail of a 1920×1080 picture takes milliseconds and a few hundred kilobytes.
public enum JPEGThumbnail {
    /// The thumbnail of `jpeg`, about `width` pixels wide (never less, never more than the
    /// picture), at `quality`; the picture itself when no scale makes it smaller.
    public static func make(_ jpeg: [UInt8], width: Int, quality: Int = 80) throws(ThumbnailError) -> [UInt8] {
        guard let decoder = tjInitDecompress() else { throw ThumbnailError(details: message(nil)) }
        defer { tjDestroy(decoder) }
        var (w, h, subsampling, colorspace): (Int32, Int32, Int32, Int32) = (0, 0, 0, 0)
        let read = jpeg.withUnsafeBufferPointer {
            tjDecompressHeader3(decoder, $0.baseAddress, UInt($0.count), &w, &h, &subsampling, &colorspace)
        }
        guard read == 0, w > 0, h > 0 else { throw ThumbnailError(details: message(decoder)) }
        // The scales libturbojpeg offers; the smallest that keeps `width`.
        var count: Int32 = 0
        guard let factors = tjGetScalingFactors(&count) else { throw ThumbnailError(details: message(nil)) }
        var best = (width: w, height: h)
        for factor in UnsafeBufferPointer(start: factors, count: Int(count)) where factor.num < factor.denom {
            let sw = (w * factor.num + factor.denom - 1) / factor.denom
            let sh = (h * factor.num + factor.denom - 1) / factor.denom
            if sw >= Int32(width), sw < best.width { best = (sw, sh) }
        }
        guard best.width < w else { return jpeg }
        var pixels = [UInt8](repeating: 0, count: Int(best.width) * Int(best.height) * 3)
        let decoded = jpeg.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer {
                tjDecompress2(
                    decoder, source.baseAddress, UInt(source.count), $0.baseAddress, best.width, 0, best.height,
                    Int32(TJPF_RGB.rawValue), 0)
            }
        }
        guard decoded == 0 else { throw ThumbnailError(details: message(decoder)) }
        guard let encoder = tjInitCompress() else { throw ThumbnailError(details: message(nil)) }
        defer { tjDestroy(encoder) }
        // libturbojpeg allocates the output and may grow it; it is ours to free with tjFree.
        var output: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        defer { if let output { tjFree(output) } }
        let encoded = pixels.withUnsafeBufferPointer {
            tjCompress2(
                encoder, $0.baseAddress, best.width, 0, best.height, Int32(TJPF_RGB.rawValue), &output, &size,
                Int32(TJSAMP_420.rawValue), Int32(max(1, min(quality, 100))), 0)
        }
        guard encoded == 0, let output, size > 0 else { throw ThumbnailError(details: message(encoder)) }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }

    private static func message(_ handle: UnsafeMutableRawPointer?) -> String {
        guard let text = tjGetErrorStr2(handle) else { return "no message" }
        let words = String(cString: text)
        return words.isEmpty ? "no message" : words
    }
}

/// Why a picture could not be made small: libturbojpeg's words (a file that is no JPEG, or a
/// damaged one).
public struct ThumbnailError: Error, Equatable, Sendable, CustomStringConvertible {
    public var details: String
    public var description: String {
        "cannot make a thumbnail of the picture (libturbojpeg: \(details)); the full picture is still served at its own address"
    }
}
