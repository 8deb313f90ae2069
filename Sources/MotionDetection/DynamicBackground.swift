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
/// The spread rises only while the pixel is *restless*: it swings strongly (by more than
/// `restlessFraction` of the pixel threshold, 3 σ of the noise) away from its own recent
/// average (over `learnTime / restlessSpeed` seconds), and has turned — swung strongly the
/// other way — at least `turns` times lately. Foliage, water and flicker swing one way and
/// back all the time; sensor noise almost never swings that far. An object that arrives and
/// stops (a parked car, someone standing) swings one way, so its spread does not rise and it
/// keeps counting until the background takes it in (`MotionDetector.absorbAfter`). What
/// counts as motion is not learned from: in a block where at least `fill` of the pixels
/// counted (an object passing, whose texture may well turn its pixels), no spread rises, so
/// a path crossed every few seconds is not learned like foliage.
///
/// Nothing is known when the model starts: every spread starts at half the pixel threshold
/// and, for `youth` learning times, rises whether the pixel is restless or not, so a scene
/// that moves is learned in a few seconds (an object that stops in those first seconds is
/// learned too).
struct DynamicBackground: Sendable {
    /// The pixel's threshold is this many times its (pooled) spread.
    static let multiplier: Float = 2
    /// The model learns, and recomputes its thresholds, at most this often (seconds of capture
    /// time; every frame below 5 fps). Its times are a second and more, and a sample of the
    /// frames learns the same quantiles.
    static let interval = 0.2
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
    static let restlessFraction: Float = 0.75
    /// The recent average follows the picture this many times faster than the spread learns
    /// (the larger, the less an object that stops raises its spread; the slower a scene that
    /// moves is learned).
    static let restlessSpeed = 2.5
    /// A pixel is restless when it has turned (swung strongly the other way) at least `turns`
    /// times, counted with a weight fading by e every `turnWindow` seconds: foliage and water
    /// turn all the time; an object that arrives swings one way (and stops, or leaves).
    static let turns: Float = 1.5
    static let turnWindow = 2.0
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
    /// Per pixel: the side (1 above, −1 below its recent average) of its last strong swing,
    /// and its turns (strong swings the other way), fading by e every `turnWindow` seconds.
    private var side: [Float]
    private var turned: [Float]
    private var primed = false
    /// Seconds learned since the model started.
    private var age = 0.0
    /// Per pixel: its raised threshold, 0 where it is not raised (the frame's pixel
    /// threshold applies).
    private(set) var limit: [Float]
    /// Per block: 1 where auto-masked.
    private(set) var masked: [UInt8]
    private var raisedBlock: [UInt8]
    private var blockCounts: [Int32]
    /// Per block: its pixels, those watched (counted at the first `prepare`).
    private var pixelsInBlock: [Int32] = []
    private var watchedInBlock: [Int32] = []
    private var watchedTotal: Int32 = 0
    /// Whether any block is auto-masked.
    private var anyMasked = false
    /// Per pixel: 1 where its spread may rise in this `learn`, 0 where it is held (its block is
    /// not auto-masked and much of it changed at once: an object passing, not foliage).
    private var mayRise: [Float]
    /// The spread's maxima along the rows, and one row of raised flags, 1 where the pixel's
    /// threshold is raised, padded to whole blocks and 8 bytes more (buffers of `prepare`).
    private var rowMax: [Float]
    private var raisedFlags: [UInt8]
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
        side = [Float](repeating: 0, count: width * height)
        turned = [Float](repeating: 0, count: width * height)
        limit = [Float](repeating: 0, count: width * height)
        rowMax = limit
        mayRise = [Float](repeating: 1, count: width * height)
        raisedFlags = [UInt8](
            repeating: 0, count: (width + Self.blockSize - 1) / Self.blockSize * Self.blockSize + 8)
        blocksAcross = (width + Self.blockSize - 1) / Self.blockSize
        blocksDown = (height + Self.blockSize - 1) / Self.blockSize
        masked = [UInt8](repeating: 0, count: blocksAcross * blocksDown)
        raisedBlock = masked
        blockCounts = [Int32](repeating: 0, count: blocksAcross * blocksDown)
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

    /// Fills `limit` from the spread learned so far (`threshold` is the frame's pixel
    /// threshold) and marks the auto-masked blocks. `watch` is 1 where watched (the same map
    /// every frame).
    mutating func prepare(threshold: Float, watch: [UInt8]) {
        let w = width
        let h = height
        guard enabled, w > 0, h > 0 else { return }
        if watchedInBlock.isEmpty { countBlocks(watch) }
        let k = Self.multiplier
        let raiseAt = threshold * Self.raiseAbove
        let size = Self.blockSize
        let across = blocksAcross
        // The largest spread among each pixel and its 8 neighbours: along the rows, then
        // down the columns of those.
        spread.withUnsafeBufferPointer { spreadBuffer in
            rowMax.withUnsafeMutableBufferPointer { rowBuffer in
                guard let s = spreadBuffer.baseAddress, let r = rowBuffer.baseAddress else { return }
                for y in 0..<h {
                    Self.rowMaxima(s + y * w, into: r + y * w, count: w)
                }
            }
        }
        rowMax.withUnsafeBufferPointer { r in
            limit.withUnsafeMutableBufferPointer { lim in
                blockCounts.withUnsafeMutableBufferPointer { counts in
                    raisedFlags.withUnsafeMutableBufferPointer { flagBuffer in
                        guard let base = r.baseAddress, let out = lim.baseAddress, let flags = flagBuffer.baseAddress
                        else { return }
                        for b in 0..<counts.count { counts[b] = 0 }
                        for y in 0..<h {
                            let here = y * w
                            // Raised only where the pixels here stray well past the threshold.
                            Self.raisedRow(
                                base + max(y - 1, 0) * w, base + here, base + min(y + 1, h - 1) * w,
                                into: out + here, flags: flags, count: w, raiseAt: raiseAt, multiplier: k)
                            let blockRow = (y / size) * across
                            for bx in 0..<across {
                                var x = 0
                                while x < size {  // eight at a time (the flags past `w` are 0)
                                    counts[blockRow + bx] &+= Int32(
                                        Self.ones(flags + bx * size + x, count: min(8, size - x)))
                                    x += 8
                                }
                            }
                        }
                    }
                }
            }
        }
        // A block is auto-masked when most of its thresholds are raised, or one of its 8
        // neighbours' are: a gust swings the foliage past where it has been seen to move.
        for b in raisedBlock.indices {
            raisedBlock[b] = Float(blockCounts[b]) > Self.maskedFraction * Float(pixelsInBlock[b]) ? 1 : 0
        }
        var maskedWatched: Int32 = 0
        anyMasked = false
        for by in 0..<blocksDown {
            for bx in 0..<across {
                var isMasked = false
                for ny in max(by - Self.maskReach, 0)...min(by + Self.maskReach, blocksDown - 1) {
                    for nx in max(bx - Self.maskReach, 0)...min(bx + Self.maskReach, across - 1)
                    where raisedBlock[ny * across + nx] != 0 {
                        isMasked = true
                    }
                }
                let b = by * across + bx
                masked[b] = isMasked ? 1 : 0
                if isMasked {
                    maskedWatched += watchedInBlock[b]
                    anyMasked = true
                }
            }
        }
        maskedShare = watchedTotal > 0 ? Double(maskedWatched) / Double(watchedTotal) : 0
    }

    /// `out[x]` = the largest of `s[x − 1]`, `s[x]`, `s[x + 1]` (within the row). Plain
    /// comparisons rather than `max`, whose NaN rules keep the loop from vectorising.
    @inline(never)
    static func rowMaxima(_ s: UnsafePointer<Float>, into out: UnsafeMutablePointer<Float>, count w: Int) {
        guard w > 1 else {
            if w == 1 { out[0] = s[0] }
            return
        }
        out[0] = s[0] > s[1] ? s[0] : s[1]
        for x in 1..<(w &- 1) {
            let a = s[x &- 1] > s[x] ? s[x &- 1] : s[x]
            out[x] = a > s[x &+ 1] ? a : s[x &+ 1]
        }
        out[w &- 1] = s[w &- 2] > s[w &- 1] ? s[w &- 2] : s[w &- 1]
    }

    /// `out[x]` = `multiplier ×` the largest of the three rows at `x` where that exceeds
    /// `raiseAt`, else 0.
    @inline(never)
    static func raisedRow(
        _ up: UnsafePointer<Float>, _ here: UnsafePointer<Float>, _ down: UnsafePointer<Float>,
        into out: UnsafeMutablePointer<Float>, flags: UnsafeMutablePointer<UInt8>, count w: Int, raiseAt: Float,
        multiplier k: Float
    ) {
        for x in 0..<w {
            let a = up[x] > here[x] ? up[x] : here[x]
            let m = a > down[x] ? a : down[x]
            out[x] = m > raiseAt ? k * m : 0
            flags[x] = m > raiseAt ? 1 : 0
        }
    }

    /// How many of the `count` bytes (each 0 or 1, at most 8 of them, readable up to 8) are 1.
    @inline(__always)
    static func ones(_ bytes: UnsafePointer<UInt8>, count: Int) -> Int {
        var word = UInt64(littleEndian: UnsafeRawPointer(bytes).loadUnaligned(as: UInt64.self))
        if count < 8 { word &= (1 << (8 * UInt64(count))) &- 1 }  // the first `count` bytes
        return Int((word &* 0x0101_0101_0101_0101) >> 56)
    }

    /// Per block: its pixels, and those of them watched.
    private mutating func countBlocks(_ watch: [UInt8]) {
        let size = Self.blockSize
        pixelsInBlock = [Int32](repeating: 0, count: blocksAcross * blocksDown)
        watchedInBlock = pixelsInBlock
        watchedTotal = 0
        for y in 0..<height {
            for x in 0..<width {
                let b = (y / size) * blocksAcross + x / size
                pixelsInBlock[b] += 1
                if y * width + x < watch.count, watch[y * width + x] != 0 {
                    watchedInBlock[b] += 1
                    watchedTotal += 1
                }
            }
        }
    }

    /// Clears the changed flags of auto-masked blocks where fewer than `fill` of the pixels
    /// changed. `flags` is the padded map (`width + 2` wide, a one-pixel border).
    func gate(_ flags: inout [UInt8]) {
        guard enabled, width > 0, anyMasked else { return }
        let padded = width + 2
        let size = Self.blockSize
        flags.withUnsafeMutableBufferPointer { buffer in
            guard let f = buffer.baseAddress else { return }
            for by in 0..<blocksDown {
                let top = by * size
                let rows = min(size, height - top)
                for bx in 0..<blocksAcross where masked[by * blocksAcross + bx] != 0 {
                    let corner = f + (top + 1) * padded + 1 + bx * size
                    let columns = min(size, width - bx * size)
                    let needed = Self.fill * Float(pixelsInBlock[by * blocksAcross + bx])
                    guard Float(Self.changed(in: corner, rows: rows, columns: columns, stride: padded)) < needed
                    else { continue }
                    if columns == 8 {
                        let raw = UnsafeMutableRawPointer(corner)
                        for y in 0..<rows {
                            raw.storeBytes(of: 0 as UInt64, toByteOffset: y &* padded, as: UInt64.self)
                        }
                    } else {
                        for y in 0..<rows {
                            for x in 0..<columns { corner[y * padded + x] = 0 }
                        }
                    }
                }
            }
        }
    }

    /// The changed flags (each 0 or 1) in an 8-wide block of `rows` rows (at most 8): the rows
    /// added as 64-bit words (each byte lane at most 8), then the lanes summed by a multiply.
    @inline(__always)
    static func changedIn8Wide(_ corner: UnsafePointer<UInt8>, rows: Int, stride: Int) -> Int {
        let raw = UnsafeRawPointer(corner)
        var lanes: UInt64 = 0
        for y in 0..<rows { lanes &+= raw.loadUnaligned(fromByteOffset: y &* stride, as: UInt64.self) }
        return Int((lanes &* 0x0101_0101_0101_0101) >> 56)
    }

    /// Learns from this frame's reduced picture and the background (as updated by this
    /// frame), `dt` seconds after the previous frame; `threshold` is the frame's pixel
    /// threshold, `restlessFraction` of which a pixel must stray by from its recent average to
    /// be restless.
    mutating func learn(
        _ picture: [Float], background: [Float], changed: [UInt8], threshold: Float, dt: Double
    ) {
        guard enabled, dt > 0 else { return }
        guard primed else {
            // Nothing learned yet: each spread starts at `startSpread` of the pixel threshold,
            // so a part that moves is learned in a few learning times rather than from the
            // floor.
            let start = max(threshold * Self.startSpread, Self.floor)
            for i in spread.indices { spread[i] = start }
            follow(picture)
            primed = true
            age = 0
            return
        }
        age += dt
        let up = Float(Numerics.exp(dt / learnTime))
        let rates = Rates(
            up: up, rise: age < Self.youth * learnTime ? up : 1, down: Float(Numerics.exp(-dt / forgetTime)),
            follow: Float(1 - Numerics.exp(-dt * Self.restlessSpeed / learnTime)),
            restlessAt: threshold * Self.restlessFraction, fade: Float(Numerics.exp(-dt / Self.turnWindow)),
            turns: Self.turns, floor: Self.floor)
        holdObjects(changed, young: age < Self.youth * learnTime)
        let count = min(picture.count, spread.count, background.count, recent.count, mayRise.count)
        picture.withUnsafeBufferPointer { p in
            background.withUnsafeBufferPointer { bg in
                recent.withUnsafeMutableBufferPointer { r in
                    spread.withUnsafeMutableBufferPointer { s in
                        side.withUnsafeMutableBufferPointer { lastSide in
                            turned.withUnsafeMutableBufferPointer { t in
                                mayRise.withUnsafeBufferPointer { m in
                                    guard let p = p.baseAddress, let bg = bg.baseAddress, let r = r.baseAddress,
                                        let s = s.baseAddress, let lastSide = lastSide.baseAddress,
                                        let t = t.baseAddress, let m = m.baseAddress
                                    else { return }
                                    Self.learnPixels(p, bg, r, s, lastSide, t, m, count: count, rates)
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Fills `mayRise`: 0 in the blocks that are not auto-masked where at least `fill` of the
    /// pixels `changed` (the padded change map), 1 elsewhere, and 1 everywhere while `young`.
    private mutating func holdObjects(_ changed: [UInt8], young: Bool) {
        let w = width
        let size = Self.blockSize
        let padded = w + 2
        guard changed.count >= padded * (height + 2) else { return }
        changed.withUnsafeBufferPointer { flagBuffer in
            mayRise.withUnsafeMutableBufferPointer { m in
                guard let flags = flagBuffer.baseAddress else { return }
                for by in 0..<blocksDown {
                    let top = by * size
                    let rows = min(size, height - top)
                    for bx in 0..<blocksAcross {
                        let b = by * blocksAcross + bx
                        let left = bx * size
                        let columns = min(size, w - left)
                        var held = false
                        if !young {
                            let corner = flags + (top + 1) * padded + 1 + left
                            let count = Self.changed(in: corner, rows: rows, columns: columns, stride: padded)
                            held = Float(count) >= Self.fill * Float(pixelsInBlock[b])
                        }
                        let value: Float = held ? 0 : 1
                        for y in top..<(top + rows) {
                            for x in left..<(left + columns) { m[y * w + x] = value }
                        }
                    }
                }
            }
        }
    }

    /// The changed flags (each 0 or 1) in a block of `rows × columns` at `corner`.
    @inline(__always)
    static func changed(in corner: UnsafePointer<UInt8>, rows: Int, columns: Int, stride: Int) -> Int {
        if columns == 8 { return changedIn8Wide(corner, rows: rows, stride: stride) }
        var count = 0
        for y in 0..<rows {
            for x in 0..<columns { count += Int(corner[y * stride + x]) }
        }
        return count
    }

    /// The factors of one `learn` step.
    struct Rates: Sendable {
        /// The spread's factor where the difference is above it: `up` if restless, else `rise`.
        var up, rise: Float
        /// Its factor where the difference is below it, never under `floor`.
        var down: Float
        /// How far the recent average follows the picture.
        var follow: Float
        /// How far from its recent average a pixel swings strongly.
        var restlessAt: Float
        /// The turns' fading, and how many make a pixel restless.
        var fade, turns: Float
        var floor: Float
    }

    /// One `learn` step over `count` pixels. Selects of plain values and products, never `&&`
    /// or `if`: either becomes a branch, and the loop no longer vectorises.
    @inline(never)
    static func learnPixels(
        _ p: UnsafePointer<Float>, _ bg: UnsafePointer<Float>, _ r: UnsafeMutablePointer<Float>,
        _ s: UnsafeMutablePointer<Float>, _ lastSide: UnsafeMutablePointer<Float>,
        _ t: UnsafeMutablePointer<Float>, _ mayRise: UnsafePointer<Float>, count: Int, _ k: Rates
    ) {
        for i in 0..<count {
            let v = s[i]
            let away = p[i] - r[i]
            let size = away < 0 ? -away : away
            // 1 for a strong swing, else 0; the side it swings to, 1 above and −1 below.
            let strong: Float = size > k.restlessAt ? 1 : 0
            let now: Float = away > 0 ? 1 : -1
            // A turn: a strong swing to the other side from the last one.
            let other: Float = now != lastSide[i] ? 1 : 0
            let turns = t[i] * k.fade + strong * other
            t[i] = turns
            lastSide[i] = lastSide[i] + strong * (now - lastSide[i])
            // Above the spread: × up if restless (or young), else × rise; below: × down, never
            // under the floor.
            let restless: Float = turns >= k.turns ? strong : 0
            let factor = k.rise + restless * (k.up - k.rise)
            let above = v * (1 + mayRise[i] * (factor - 1))
            let fallen = v * k.down
            let below = fallen > k.floor ? fallen : k.floor
            r[i] += k.follow * away
            let d = p[i] - bg[i]
            let difference = d < 0 ? -d : d
            s[i] = difference > v ? above : below
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
