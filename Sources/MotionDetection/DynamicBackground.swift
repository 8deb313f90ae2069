import Media

// The dynamic-background model: where the picture moves by itself (foliage, water, a flag,
// flicker), each reduced pixel learns how far it usually strays from the background, and its
// own threshold rises to match; a block of the detection grid where most thresholds are
// raised (auto-masked) counts only when much of it (30 %) changes at once, as an object does.

/// Per reduced pixel, a high quantile of |picture − background| tracked in the log domain:
/// it rises by a factor e per `learnTime` seconds while the difference is above it and falls
/// by a factor e per `forgetTime` seconds while it is below, so it settles where the
/// difference exceeds it about `learnTime / (learnTime + forgetTime)` of the time (for 1 s
/// and 60 s, the 98th percentile). A steady difference is learned too: an object that stops
/// (a parked car) stops counting after a few seconds instead of at
/// `MotionDetector.absorbAfter`, which is why the model is off by default. A pixel counts as changed when its
/// residual (|picture − background|) exceeds
/// `multiplier ×` the largest spread among it and its 8 neighbours (a leaf swings into the
/// next pixel too), and never less than the frame's pixel threshold.
///
/// A passing object raises the spread of the pixels it covers only by e^(t / learnTime) for
/// the t seconds its edges and texture change them, and only after the frames that counted it.
struct DynamicBackground: Sendable {
    /// The pixel's threshold is this many times its (pooled) spread.
    static let multiplier: Float = 2
    /// Blocks of the detection grid, in reduced pixels (8: a 160-wide picture has 20 × 15).
    static let blockSize = 8
    /// A block is auto-masked when more than this fraction of its pixels have raised thresholds.
    static let maskedFraction: Float = 0.5
    /// An auto-masked block counts only when at least this fraction of its pixels changed
    /// (0.3: a person of 5 × 15 reduced pixels still counts in the 8 × 8 blocks it crosses).
    static let fill: Float = 0.3
    /// How many blocks around a block with raised thresholds are auto-masked with it.
    static let maskReach = 1
    /// The spread never falls below this (grey levels), so it can rise again.
    static let floor: Float = 0.5

    let width: Int
    let height: Int
    let enabled: Bool
    let learnTime: Double
    let forgetTime: Double
    private(set) var spread: [Float]
    /// Per pixel: the threshold of the frame being compared.
    private(set) var limit: [Float]
    /// Per block: 1 where auto-masked.
    private(set) var masked: [UInt8]
    private var raisedBlock: [UInt8]
    private var blockCounts: [Int32]
    let blocksAcross: Int
    let blocksDown: Int
    /// Fraction of the watched picture in auto-masked blocks, as of the last `prepare`.
    private(set) var maskedShare: Double = 0

    init() {
        self.init(width: 0, height: 0, enabled: false, learnTime: 1, forgetTime: 60)
    }

    init(width: Int, height: Int, enabled: Bool, learnTime: Double, forgetTime: Double) {
        self.width = width
        self.height = height
        self.enabled = enabled
        self.learnTime = max(learnTime, 0.001)
        self.forgetTime = max(forgetTime, 0.001)
        spread = [Float](repeating: Self.floor, count: width * height)
        limit = [Float](repeating: 0, count: width * height)
        blocksAcross = (width + Self.blockSize - 1) / Self.blockSize
        blocksDown = (height + Self.blockSize - 1) / Self.blockSize
        masked = [UInt8](repeating: 0, count: blocksAcross * blocksDown)
        raisedBlock = masked
        blockCounts = [Int32](repeating: 0, count: blocksAcross * blocksDown)
    }

    /// Forgets everything learned (a light switch, a new frame size).
    mutating func restart() {
        for i in spread.indices { spread[i] = Self.floor }
        for i in masked.indices { masked[i] = 0 }
        maskedShare = 0
    }

    /// Fills `limit` for this frame from the spread learned so far and marks the auto-masked
    /// blocks. `watch` is 1 where watched.
    mutating func prepare(threshold: Float, watch: [UInt8]) {
        let w = width
        let h = height
        guard enabled, w > 0, h > 0 else {
            for i in limit.indices { limit[i] = threshold }
            maskedShare = 0
            return
        }
        let k = Self.multiplier
        for i in blockCounts.indices { blockCounts[i] = 0 }
        spread.withUnsafeBufferPointer { s in
            limit.withUnsafeMutableBufferPointer { lim in
                blockCounts.withUnsafeMutableBufferPointer { counts in
                    for y in 0..<h {
                        let y0 = max(y - 1, 0)
                        let y1 = min(y + 1, h - 1)
                        let blockRow = (y / Self.blockSize) * blocksAcross
                        for x in 0..<w {
                            let x0 = max(x - 1, 0)
                            let x1 = min(x + 1, w - 1)
                            var m: Float = 0
                            for yy in y0...y1 {
                                let row = yy * w
                                for xx in x0...x1 { m = max(m, s[row + xx]) }
                            }
                            let raised = k * m
                            lim[y * w + x] = max(threshold, raised)
                            if raised > threshold { counts[blockRow + x / Self.blockSize] += 1 }
                        }
                    }
                }
            }
        }
        // A block is auto-masked when most of its thresholds are raised, or one of its 8
        // neighbours' are: a gust swings the foliage past where it has been seen to move.
        for by in 0..<blocksDown {
            for bx in 0..<blocksAcross {
                let b = by * blocksAcross + bx
                raisedBlock[b] = Float(blockCounts[b]) > Self.maskedFraction * Float(blockPixels(bx, by)) ? 1 : 0
            }
        }
        var maskedWatched = 0
        var watched = 0
        for by in 0..<blocksDown {
            for bx in 0..<blocksAcross {
                var isMasked = false
                for ny in max(by - Self.maskReach, 0)...min(by + Self.maskReach, blocksDown - 1) {
                    for nx in max(bx - Self.maskReach, 0)...min(bx + Self.maskReach, blocksAcross - 1)
                    where raisedBlock[ny * blocksAcross + nx] != 0 {
                        isMasked = true
                    }
                }
                masked[by * blocksAcross + bx] = isMasked ? 1 : 0
                for y in (by * Self.blockSize)..<min((by + 1) * Self.blockSize, h) {
                    for x in (bx * Self.blockSize)..<min((bx + 1) * Self.blockSize, w) where watch[y * w + x] != 0 {
                        watched += 1
                        if isMasked { maskedWatched += 1 }
                    }
                }
            }
        }
        maskedShare = watched > 0 ? Double(maskedWatched) / Double(watched) : 0
    }

    private func blockPixels(_ bx: Int, _ by: Int) -> Int {
        let bw = min((bx + 1) * Self.blockSize, width) - bx * Self.blockSize
        let bh = min((by + 1) * Self.blockSize, height) - by * Self.blockSize
        return bw * bh
    }

    /// Clears the changed flags of auto-masked blocks where fewer than `fill` of the pixels
    /// changed. `flags` is the padded map (`width + 2` wide, a one-pixel border).
    mutating func gate(_ flags: inout [UInt8]) {
        guard enabled, width > 0 else { return }
        let padded = width + 2
        for i in blockCounts.indices { blockCounts[i] = 0 }
        for y in 0..<height {
            let blockRow = (y / Self.blockSize) * blocksAcross
            let row = (y + 1) * padded + 1
            for x in 0..<width where flags[row + x] != 0 {
                blockCounts[blockRow + x / Self.blockSize] += 1
            }
        }
        for by in 0..<blocksDown {
            for bx in 0..<blocksAcross {
                let b = by * blocksAcross + bx
                guard masked[b] != 0, Float(blockCounts[b]) < Self.fill * Float(blockPixels(bx, by)) else { continue }
                for y in (by * Self.blockSize)..<min((by + 1) * Self.blockSize, height) {
                    let row = (y + 1) * padded + 1
                    for x in (bx * Self.blockSize)..<min((bx + 1) * Self.blockSize, width) { flags[row + x] = 0 }
                }
            }
        }
    }

    /// Learns from this frame's reduced picture and the background (as updated by this
    /// frame), `dt` seconds after the previous frame.
    mutating func learn(_ picture: [Float], background: [Float], dt: Double) {
        guard enabled, dt > 0 else { return }
        let up = Float(Numerics.exp(dt / learnTime))
        let down = Float(Numerics.exp(-dt / forgetTime))
        let floor = Self.floor
        picture.withUnsafeBufferPointer { p in
            background.withUnsafeBufferPointer { bg in
                spread.withUnsafeMutableBufferPointer { s in
                    for i in 0..<min(p.count, s.count, bg.count) {
                        let v = s[i]
                        s[i] = abs(p[i] - bg[i]) > v ? max(v * up, floor) : max(v * down, floor)
                    }
                }
            }
        }
    }

    /// The auto-mask at the reduced size: 1 where the pixel's block is auto-masked.
    var maskMap: [UInt8] {
        var map = [UInt8](repeating: 0, count: width * height)
        for y in 0..<height {
            for x in 0..<width {
                map[y * width + x] = masked[(y / Self.blockSize) * blocksAcross + x / Self.blockSize]
            }
        }
        return map
    }
}
