import Media

@testable import MotionDetection

/// A luma plane owned by the test, with stride padding filled with a marker value so that a
/// detector reading past the width would be caught.
struct TestPlane {
    let width: Int
    let height: Int
    let stride: Int
    var bytes: [UInt8]

    init(width: Int, height: Int, stride: Int? = nil, padding: UInt8 = 255, fill: (Int, Int) -> UInt8) {
        self.width = width
        self.height = height
        self.stride = stride ?? width
        var bytes = [UInt8](repeating: padding, count: max(1, self.stride * height))
        for y in 0..<height {
            for x in 0..<width { bytes[y * self.stride + x] = fill(x, y) }
        }
        self.bytes = bytes
    }

    subscript(x: Int, y: Int) -> UInt8 {
        get { bytes[y * stride + x] }
        set { bytes[y * stride + x] = newValue }
    }

    func withView<R>(_ body: (PlaneView) -> R) -> R {
        bytes.withUnsafeBufferPointer { buffer in
            // `buffer` is never empty (at least one byte is allocated).
            body(
                PlaneView(
                    base: buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!, width: width, height: height,
                    stride: stride))
        }
    }
}

/// Deterministic pseudo-random numbers (SplitMix64) and Gaussian samples.
struct TestRandom {
    private var generator: SplitMix64
    init(seed: UInt64) { generator = SplitMix64(seed: seed) }
    mutating func next() -> UInt64 { generator.next() }
    mutating func unit() -> Double { generator.unit() }
    /// Approximately normal (sum of 12 uniforms).
    mutating func gaussian() -> Double {
        var s = 0.0
        for _ in 0..<12 { s += unit() }
        return s - 6
    }
}

/// A textured static background (smooth blobs and fine detail, 40–200).
func texture(_ x: Int, _ y: Int) -> Int {
    let a = ((x / 9) * 7 + (y / 11) * 13) % 40
    let b = ((x * 5 + y * 3) / 4) % 17
    return 80 + a * 2 + b
}

func clampByte(_ v: Int) -> UInt8 { UInt8(min(max(v, 0), 255)) }
