import Media

// The dynamic-background model: where the picture moves by itself (foliage, water, a flag,
// flicker), each reduced pixel learns how far it usually strays from the background, and its
// own threshold rises to match; a block of the detection grid where most thresholds are
// raised (auto-masked) counts only when much of it (30 %) changes at once, as an object does.

/// Per reduced pixel, its *spread*: a high quantile of |picture − background| tracked in the
/// log domain. It rises by a factor e per `learnTime` seconds while the difference is above
/// it and falls by a factor e per `forgetTime` seconds while it is below, so it settles where
/// the difference exceeds it about `learnTime / (learnTime + forgetTime)` of the time (for
/// 1 s and 60 s, the 98th percentile). Where the largest spread among a pixel and its 8
/// neighbours (a leaf swings into the next pixel too) exceeds `raiseAbove` pixel thresholds,
/// the pixel's own threshold is `multiplier ×` that spread; elsewhere it is the pixel
/// threshold. Sensor noise never raises it (its 98th percentile is about 2.3 σ, the pixel
/// threshold 4 σ), nor does one object passing by.
///
/// The spread rises only while the pixel is *restless*: it differs by more than half the
/// pixel threshold from its own recent average (over `learnTime / restlessSpeed` seconds).
/// Foliage, water and flicker are restless all the time. An object that stops (a parked car,
/// someone standing) is restless only while it arrives and for
/// `learnTime / restlessSpeed × ln(2 × contrast / pixel threshold)` seconds after, so its
/// spread rises by at most `(2 × contrast / pixel threshold)^(1 / restlessSpeed)` once it
/// stops: from the spread of noise, that stays below its contrast, and it keeps counting
/// until the background takes it in (`MotionDetector.absorbAfter`). A passing object raises
/// the spread of the pixels it covers by e^(t / learnTime) for the t seconds it changes
/// them, after the frames that counted it.
///
/// Nothing is known when the model starts: every spread starts at half the pixel threshold
/// and, for `youth` learning times, rises whether the pixel is restless or not, so a scene
/// that moves is learned in a few seconds (an object that stops in those first seconds is
/// learned too).
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
    /// A pixel is restless when it strays from its recent average by more than this fraction
    /// of the pixel threshold.
    static let restlessFraction: Float = 0.5
    /// The recent average follows the picture this many times faster than the spread learns
    /// (the larger, the less an object that stops raises its spread; the slower a scene that
    /// moves is learned).
    static let restlessSpeed = 2.5
    /// A pixel's threshold is raised where the largest spread around it exceeds this many
    /// pixel thresholds: well above the spread of noise (about half of one), and above what
    /// one object passing by leaves (about 1.5 times that).
    static let raiseAbove: Float = 1.5
    /// Where every spread starts, as a fraction of the pixel threshold.
    static let startSpread: Float = 0.5
    /// For this many learning times after the model starts, a spread rises whether the
    /// pixel is restless or not.
    static let youth = 5.0

    let width: Int
    let height: Int
    let enabled: Bool
    let learnTime: Double
    let forgetTime: Double
    private(set) var spread: [Float]
    /// Per pixel: the picture averaged over about `learnTime / restlessSpeed` seconds.
    private var recent: [Float]
    private var primed = false
    /// Seconds learned since the model started.
    private var age = 0.0
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
        recent = [Float](repeating: 0, count: width * height)
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
        primed = false
    }

    /// Takes `picture` as the recent average: after a light switch, the picture's own change
    /// is not restlessness.
    mutating func follow(_ picture: [Float]) {
        guard enabled else { return }
        picture.withUnsafeBufferPointer { from in
            recent.withUnsafeMutableBufferPointer { to in
                for i in 0..<min(from.count, to.count) { to[i] = from[i] }
            }
        }
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
        let raiseAt = threshold * Self.raiseAbove
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
                            // Raised only where the pixels here stray well past the threshold.
                            let raised = m > raiseAt ? k * m : 0
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
    /// frame), `dt` seconds after the previous frame; `threshold` is the frame's pixel
    /// threshold, half of which a pixel must stray by from its recent average to be restless.
    mutating func learn(_ picture: [Float], background: [Float], threshold: Float, dt: Double) {
        guard enabled, dt > 0 else { return }
        guard primed else {
            // Nothing learned yet: each spread starts where it would raise the threshold,
            // so a part that moves is learned in ln(amplitude / threshold) learning times
            // rather than from the floor.
            let start = max(threshold * Self.startSpread, Self.floor)
            for i in spread.indices { spread[i] = start }
            follow(picture)
            primed = true
            age = 0
            return
        }
        age += dt
        let young = age < Self.youth * learnTime
        let up = Float(Numerics.exp(dt / learnTime))
        let down = Float(Numerics.exp(-dt / forgetTime))
        let follow = Float(1 - Numerics.exp(-dt * Self.restlessSpeed / learnTime))
        let restlessAt = threshold * Self.restlessFraction
        let floor = Self.floor
        picture.withUnsafeBufferPointer { p in
            background.withUnsafeBufferPointer { bg in
                recent.withUnsafeMutableBufferPointer { r in
                    spread.withUnsafeMutableBufferPointer { s in
                        for i in 0..<min(p.count, s.count, bg.count, r.count) {
                            let restless = young || abs(p[i] - r[i]) > restlessAt
                            r[i] += follow * (p[i] - r[i])
                            let v = s[i]
                            if abs(p[i] - bg[i]) > v {
                                if restless { s[i] = v * up }
                            } else {
                                s[i] = max(v * down, floor)
                            }
                        }
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
