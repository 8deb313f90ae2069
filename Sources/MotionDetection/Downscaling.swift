import Media

// Downscaling: the luma plane reduced to the detector's working size by averaging square
// blocks of pixels, once per frame, with kernels written so that the optimiser vectorises them.

/// Reduces frames of one size to the detector's reduced picture: blocks of `blockSize ×
/// blockSize` pixels (every other row of them for blocks of 4 and more) averaged into one
/// reduced pixel, `width × height` of them; partial blocks at the right and bottom edges
/// are dropped. Keeps its one row of column sums between frames.
struct Downscaler: Sendable {
    /// Side of the square blocks averaged into one reduced pixel (1–255).
    let blockSize: Int
    /// Size of the reduced picture.
    let width: Int
    let height: Int
    private var columnSums: [UInt16]  // vertical sums of one block row, per covered column

    /// Nothing to reduce yet (before the first frame).
    init() {
        blockSize = 1
        width = 0
        height = 0
        columnSums = []
    }

    /// Reduces frames of `frameWidth × frameHeight` to `targetWidth` columns or a few more.
    init(frameWidth: Int, frameHeight: Int, targetWidth: Int) {
        let size = Self.size(width: frameWidth, height: frameHeight, targetWidth: targetWidth)
        blockSize = size.blockSize
        width = size.width
        height = size.height
        columnSums = [UInt16](repeating: 0, count: width * blockSize)
    }

    /// The block size and reduced size for frames of `width × height`: `b` the largest whole
    /// number (at most 255) that still gives at least `targetWidth` columns, or 1 for a picture
    /// narrower than that.
    static func size(width: Int, height: Int, targetWidth: Int) -> (blockSize: Int, width: Int, height: Int) {
        let target = max(1, targetWidth)
        let b = max(1, min(width / target, 255))
        return (b, width / b, height / b)
    }

    /// Blocks of 4 pixels and more average every other row: a 4×4 block still averages 8
    /// pixels (noise shrinks by 2.8 times instead of 4; the threshold follows the noise it
    /// measures), larger blocks 32 or more. That halves the memory the detector reads, which
    /// is most of its cost: the frame comes from another thread, so it is not in this core's
    /// cache.
    static func rowStep(forBlock b: Int) -> Int { b >= 4 ? 2 : 1 }

    /// Block-averages the plane into `current`.
    ///
    /// Even block sizes (all the common ones) add horizontal pairs of bytes as one 16-bit load
    /// split into its two bytes, so that the vertical sums are half as wide and every loop
    /// reads contiguous memory: the optimiser turns them into full-width vector code.
    mutating func reduce(_ plane: PlaneView, into current: inout [Float]) {
        let b = blockSize
        let dw = width
        let dh = height
        let step = Self.rowStep(forBlock: b)
        let rows = (b + step - 1) / step  // rows 0, step, 2·step, … of each block
        let scale = 1 / Float(b * rows)
        let stride = plane.stride
        let base = plane.base
        columnSums.withUnsafeMutableBufferPointer { sumsBuffer in
            current.withUnsafeMutableBufferPointer { outBuffer in
                guard let sums = sumsBuffer.baseAddress, let out = outBuffer.baseAddress else { return }
                if b == 4 {
                    for by in 0..<dh {
                        Self.sumBlocksOf4(
                            base + by * 4 * stride, stride: step * stride, rows: rows, count: dw, scale: scale,
                            into: out + by * dw)
                    }
                } else if b % 2 == 0 && rows <= 128 {  // 128 rows of byte pairs still fit in UInt16
                    let pairs = dw * b / 2
                    for by in 0..<dh {
                        Self.sumRowPairs(
                            base + by * b * stride, stride: step * stride, rows: rows, pairs: pairs, into: sums)
                        Self.sumPairColumns(sums, pairsPerBlock: b / 2, count: dw, scale: scale, into: out + by * dw)
                    }
                } else {
                    for by in 0..<dh {
                        Self.sumRows(
                            base + by * b * stride, stride: step * stride, rows: rows, count: dw * b, into: sums)
                        Self.sumColumns(sums, block: b, count: dw, scale: scale, into: out + by * dw)
                    }
                }
            }
        }
    }

    /// Blocks 4 pixels wide (640×480 and the like) in one pass over `rows` rows (2 or 4)
    /// `stride` apart: each 32-bit load is split into two 16-bit lanes of byte pairs, the rows
    /// are added, then the two lanes.
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumBlocksOf4(
        _ top: UnsafePointer<UInt8>, stride: Int, rows: Int, count: Int, scale: Float,
        into out: UnsafeMutablePointer<Float>
    ) {
        let a = UnsafeRawPointer(top), c = a + stride
        @inline(__always) func spread(_ row: UnsafeRawPointer, _ offset: Int) -> UInt32 {
            let v = row.loadUnaligned(fromByteOffset: offset, as: UInt32.self)
            return (v & 0x00FF_00FF) &+ ((v &>> 8) & 0x00FF_00FF)
        }
        if rows == 2 {
            for i in 0..<count {
                let offset = i &* 4
                let lanes = spread(a, offset) &+ spread(c, offset)
                out[i] = Float((lanes & 0xFFFF) &+ (lanes &>> 16)) * scale
            }
            return
        }
        precondition(rows == 4, "blocks of 4 add 2 or 4 rows")
        let d = c + stride, e = d + stride
        for i in 0..<count {
            let offset = i &* 4
            let lanes = (spread(a, offset) &+ spread(c, offset)) &+ (spread(d, offset) &+ spread(e, offset))
            out[i] = Float((lanes & 0xFFFF) &+ (lanes &>> 16)) * scale
        }
    }

    /// The sum of the two bytes of a 16-bit word.
    @inline(__always)
    static func pairSum(_ row: UnsafeRawPointer, _ x: Int) -> UInt16 {
        let v = row.loadUnaligned(fromByteOffset: x &* 2, as: UInt16.self)
        return (v & 0xFF) &+ (v &>> 8)
    }

    /// sums[x] = Σ over `rows` rows of (row[2x] + row[2x+1]), x < pairs (rows ≤ 128: no overflow).
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumRowPairs(
        _ top: UnsafePointer<UInt8>, stride: Int, rows: Int, pairs: Int,
        into sums: UnsafeMutablePointer<UInt16>
    ) {
        let a = UnsafeRawPointer(top)
        var r = 0
        if rows >= 4 {
            let c = a + stride, d = c + stride, e = d + stride
            for x in 0..<pairs { sums[x] = (pairSum(a, x) &+ pairSum(c, x)) &+ (pairSum(d, x) &+ pairSum(e, x)) }
            r = 4
        } else if rows >= 2 {
            let c = a + stride
            for x in 0..<pairs { sums[x] = pairSum(a, x) &+ pairSum(c, x) }
            r = 2
        } else {
            for x in 0..<pairs { sums[x] = pairSum(a, x) }
            r = 1
        }
        while r + 4 <= rows {
            let p = a + r * stride, q = p + stride, u = q + stride, v = u + stride
            for x in 0..<pairs {
                sums[x] = sums[x] &+ (pairSum(p, x) &+ pairSum(q, x)) &+ (pairSum(u, x) &+ pairSum(v, x))
            }
            r += 4
        }
        while r + 2 <= rows {
            let p = a + r * stride, q = p + stride
            for x in 0..<pairs { sums[x] = sums[x] &+ pairSum(p, x) &+ pairSum(q, x) }
            r += 2
        }
        if r < rows {
            let p = a + r * stride
            for x in 0..<pairs { sums[x] = sums[x] &+ pairSum(p, x) }
        }
    }

    /// out[i] = scale × Σ sums[i·pairsPerBlock ..< (i+1)·pairsPerBlock].
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumPairColumns(
        _ sums: UnsafePointer<UInt16>, pairsPerBlock h: Int, count: Int, scale: Float,
        into out: UnsafeMutablePointer<Float>
    ) {
        let raw = UnsafeRawPointer(sums)
        @inline(__always) func word(_ i: Int) -> UInt32 {
            let v = raw.loadUnaligned(fromByteOffset: i &* 4, as: UInt32.self)
            return (v & 0xFFFF) &+ (v &>> 16)
        }
        switch h {
        case 1:
            for i in 0..<count { out[i] = Float(sums[i]) * scale }
        case 2:
            for i in 0..<count { out[i] = Float(word(i)) * scale }
        case 4:
            for i in 0..<count { out[i] = Float(word(i &* 2) &+ word(i &* 2 &+ 1)) * scale }
        default:
            if h % 2 == 0 {
                let words = h / 2
                for i in 0..<count {
                    var total: UInt32 = 0
                    for j in 0..<words { total &+= word(words * i + j) }
                    out[i] = Float(total) * scale
                }
            } else {
                for i in 0..<count {
                    var total: UInt32 = 0
                    for j in 0..<h { total &+= UInt32(sums[h * i + j]) }
                    out[i] = Float(total) * scale
                }
            }
        }
    }

    /// sums[x] = Σ rows[r][x] for r < rows, x < count (rows ≤ 255, so UInt16 cannot overflow).
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumRows(
        _ top: UnsafePointer<UInt8>, stride: Int, rows: Int, count: Int,
        into sums: UnsafeMutablePointer<UInt16>
    ) {
        var r = 0
        if rows >= 2 {
            let a = top, c = top + stride
            for x in 0..<count { sums[x] = UInt16(a[x]) &+ UInt16(c[x]) }
            r = 2
        } else {
            for x in 0..<count { sums[x] = UInt16(top[x]) }
            r = 1
        }
        while r + 4 <= rows {
            let a = top + r * stride, c = a + stride, d = c + stride, e = d + stride
            for x in 0..<count {
                sums[x] = sums[x] &+ (UInt16(a[x]) &+ UInt16(c[x])) &+ (UInt16(d[x]) &+ UInt16(e[x]))
            }
            r += 4
        }
        while r + 2 <= rows {
            let a = top + r * stride, c = a + stride
            for x in 0..<count { sums[x] = sums[x] &+ UInt16(a[x]) &+ UInt16(c[x]) }
            r += 2
        }
        if r < rows {
            let a = top + r * stride
            for x in 0..<count { sums[x] = sums[x] &+ UInt16(a[x]) }
        }
    }

    /// out[i] = scale × Σ sums[i·block ..< (i+1)·block].
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func sumColumns(
        _ sums: UnsafePointer<UInt16>, block: Int, count: Int, scale: Float,
        into out: UnsafeMutablePointer<Float>
    ) {
        switch block {
        case 1:
            for i in 0..<count { out[i] = Float(sums[i]) * scale }
        case 2:
            for i in 0..<count { out[i] = Float(UInt32(sums[2 * i]) &+ UInt32(sums[2 * i + 1])) * scale }
        case 4:
            for i in 0..<count {
                let s = sums + 4 * i
                out[i] = Float((UInt32(s[0]) &+ UInt32(s[1])) &+ (UInt32(s[2]) &+ UInt32(s[3]))) * scale
            }
        case 8:
            for i in 0..<count {
                let s = sums + 8 * i
                let lo = (UInt32(s[0]) &+ UInt32(s[1])) &+ (UInt32(s[2]) &+ UInt32(s[3]))
                let hi = (UInt32(s[4]) &+ UInt32(s[5])) &+ (UInt32(s[6]) &+ UInt32(s[7]))
                out[i] = Float(lo &+ hi) * scale
            }
        default:
            for i in 0..<count {
                let s = sums + block * i
                var total: UInt32 = 0
                for j in 0..<block { total &+= UInt32(s[j]) }
                out[i] = Float(total) * scale
            }
        }
    }
}
