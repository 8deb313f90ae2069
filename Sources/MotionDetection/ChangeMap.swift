// The change map: which pixels of the reduced picture differ from the background under this
// frame's light (compare, which also updates the background in the same pass), which of those
// exceed their own threshold (the dynamic background's), which of those have enough changed
// neighbours to count (despeckle), and how many of them are watched (count).

/// One flag per reduced pixel, 1 where it changed, kept between frames with a one-pixel border
/// of zeros so that every pixel has eight neighbours to look at.
struct ChangeMap: Sendable {
    /// Size of the reduced picture.
    let width: Int
    let height: Int
    /// 1 where changed, row by row, `width + 2` wide with a one-pixel zero border.
    private(set) var flags: [UInt8]
    /// 1 where the pixel counts towards the score (over its own threshold), in the same layout;
    /// the dynamic-background model may clear flags here before they are counted.
    var counted: [UInt8]
    private var scratch: [UInt8]  // one row of despeckled flags

    /// An empty map (before the first frame).
    init() {
        width = 0
        height = 0
        flags = []
        counted = []
        scratch = []
    }

    init(width: Int, height: Int) {
        self.width = width
        self.height = height
        flags = [UInt8](repeating: 0, count: (width + 2) * (height + 2))
        counted = flags
        scratch = [UInt8](repeating: 0, count: width + 8)
    }

    /// Marks changed pixels and updates the background: `flags` where the residual exceeds
    /// `threshold` (the background waits there), `counted` where it also exceeds the pixel's
    /// own `limit` (the dynamic background's raised threshold, 0 where not raised).
    mutating func mark(
        _ current: [Float], against background: inout [Float], absorbing: [Float], limit: [Float],
        threshold: Float, gain: Float, offset: Float,
        backgroundRate: Float, absorbRate: Float
    ) {
        let dw = width
        let dh = height
        let paddedWidth = dw + 2
        let slope = gain - 1
        current.withUnsafeBufferPointer { curBuffer in
            absorbing.withUnsafeBufferPointer { absorbBuffer in
                background.withUnsafeMutableBufferPointer { bgBuffer in
                    flags.withUnsafeMutableBufferPointer { flagBuffer in
                        counted.withUnsafeMutableBufferPointer { countedBuffer in
                            limit.withUnsafeBufferPointer { limitBuffer in
                                guard let cur = curBuffer.baseAddress, let bg = bgBuffer.baseAddress,
                                    let absorb = absorbBuffer.baseAddress,
                                    let flag = flagBuffer.baseAddress, let count = countedBuffer.baseAddress,
                                    let lim = limitBuffer.baseAddress
                                else { return }
                                for y in 0..<dh {
                                    let row = y * dw
                                    let padded = (y + 1) * paddedWidth + 1
                                    Self.compareRow(
                                        cur + row, bg + row, absorb + row, flag + padded, count + padded,
                                        lim + row, count: dw, threshold: threshold, slope: slope,
                                        offset: offset, backgroundRate: backgroundRate, absorbRate: absorbRate)
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Counts the watched `counted` pixels with at least `despeckle` counted neighbours.
    mutating func count(watch: [UInt8], despeckle: Int) -> Int {
        let dw = width
        let dh = height
        let paddedWidth = dw + 2
        let minimumNeighbours = UInt8(clamping: despeckle)
        var changedCount = 0
        counted.withUnsafeBufferPointer { countedBuffer in
            watch.withUnsafeBufferPointer { watchBuffer in
                scratch.withUnsafeMutableBufferPointer { scratchBuffer in
                    guard let flag = countedBuffer.baseAddress, let watched = watchBuffer.baseAddress,
                        let rowScratch = scratchBuffer.baseAddress
                    else { return }
                    for y in 0..<dh {
                        changedCount += Self.despeckleRow(
                            flag + y * paddedWidth, width: paddedWidth, count: dw,
                            watched: watched + y * dw, minimum: minimumNeighbours,
                            scratch: rowScratch)
                    }
                }
            }
        }
        return changedCount
    }

    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func compareRow(
        _ cur: UnsafePointer<Float>, _ bg: UnsafeMutablePointer<Float>,
        _ absorbing: UnsafePointer<Float>, _ flag: UnsafeMutablePointer<UInt8>,
        _ counted: UnsafeMutablePointer<UInt8>, _ limit: UnsafePointer<Float>, count: Int,
        threshold: Float, slope: Float, offset: Float,
        backgroundRate: Float, absorbRate: Float
    ) {
        for x in 0..<count {
            let c = cur[x]
            let b = bg[x]
            let held = absorbing[x] * absorbRate
            let predicted = b + (slope * b + offset)  // the background under this frame's light
            let residual = c - predicted
            let size = abs(residual)
            // Selects of plain values and `&`, never `&&` or a select around a load: either
            // becomes a branch, and the loop no longer vectorises (measured: 5 times slower).
            let changed: UInt8 = size > threshold ? 1 : 0
            let over: UInt8 = size > limit[x] ? 1 : 0
            flag[x] = changed
            counted[x] = changed & over
            // Where the picture differs the background waits, unless the change has lasted
            // (a blend, not `changed ? held : backgroundRate`).
            let weight: Float = size > threshold ? 1 : 0
            bg[x] = predicted + (backgroundRate + weight * (held - backgroundRate)) * residual
        }
    }

    /// Counts the changed pixels of one row that have at least `minimum` changed neighbours.
    /// `top` is the padded row above the row being counted; `scratch` holds `count` + 8 bytes.
    @inline(never)  // a whole-row loop: out of line it vectorises better (measured)
    static func despeckleRow(
        _ top: UnsafePointer<UInt8>, width: Int, count: Int, watched: UnsafePointer<UInt8>,
        minimum: UInt8, scratch: UnsafeMutablePointer<UInt8>
    ) -> Int {
        let t = top, m = top + width, b = top + 2 * width
        // Only changed pixels count, and most rows of a quiet picture have none.
        if !anySet(m, count: width) { return 0 }
        for x in 0..<count {
            let x1 = x &+ 1, x2 = x &+ 2
            let neighbours = (t[x] &+ t[x1] &+ t[x2]) &+ (b[x] &+ b[x1] &+ b[x2]) &+ (m[x] &+ m[x2])
            let centre = m[x1] & watched[x]
            scratch[x] = centre & (neighbours >= minimum ? 1 : 0)
        }
        return countOnes(scratch, count: count)
    }

    /// Whether any of `count` bytes is non-zero, eight at a time.
    @inline(__always)
    static func anySet(_ bytes: UnsafePointer<UInt8>, count: Int) -> Bool {
        let raw = UnsafeRawPointer(bytes)
        var any: UInt64 = 0
        let words = count / 8
        for w in 0..<words { any |= raw.loadUnaligned(fromByteOffset: w &* 8, as: UInt64.self) }
        for x in (words * 8)..<count { any |= UInt64(bytes[x]) }
        return any != 0
    }

    /// The sum of `count` bytes that are each 0 or 1, eight at a time (the buffer must be
    /// readable, and zero, up to the next multiple of 8).
    @inline(__always)
    static func countOnes(_ bytes: UnsafeMutablePointer<UInt8>, count: Int) -> Int {
        let words = (count + 7) / 8
        for x in count..<(words * 8) { bytes[x] = 0 }
        let raw = UnsafeRawPointer(bytes)
        var total = 0
        var lanes: UInt64 = 0
        var pending = 0
        for w in 0..<words {
            lanes &+= raw.loadUnaligned(fromByteOffset: 8 * w, as: UInt64.self)
            pending += 1
            if pending == 255 {  // a byte lane could overflow after 256 words
                total += laneSum(lanes)
                lanes = 0
                pending = 0
            }
        }
        return total + laneSum(lanes)
    }

    /// The sum of the eight bytes of `lanes`.
    @inline(__always)
    static func laneSum(_ lanes: UInt64) -> Int {
        var l = lanes
        var sum = 0
        for _ in 0..<8 {
            sum += Int(l & 0xFF)
            l >>= 8
        }
        return sum
    }
}
