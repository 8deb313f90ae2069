/// A read-only view of one image plane: `height` rows of `width` bytes each, the rows
/// `stride` bytes apart (a camera's `bytesperline` may be wider than the picture).
///
/// A view does not own its bytes; it is valid only while the frame it came from is.
public struct PlaneView {
    public let base: UnsafePointer<UInt8>
    public let width: Int
    public let height: Int
    public let stride: Int

    public init(base: UnsafePointer<UInt8>, width: Int, height: Int, stride: Int) {
        precondition(width >= 0 && height >= 0 && stride >= width, "a plane's stride must be at least its width")
        self.base = base
        self.width = width
        self.height = height
        self.stride = stride
    }

    /// The bytes of row `y` (exactly `width` of them, without the stride padding).
    public func row(_ y: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: base + y * stride, count: width)
    }
}
