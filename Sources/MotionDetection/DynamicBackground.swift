import Media

// The dynamic-background model: where the picture moves by itself (foliage, water, a flag,
// flicker), each reduced pixel learns how far it usually strays from the background, and its
// own threshold rises to match; a block of the detection grid where most thresholds are
// raised (auto-masked) counts only when a fifth of it changes at once, as an object does.

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
/// The spread rises only while the pixel *comes and goes*: it blinks — has gone from changed
/// to unchanged or back (against the pixel threshold, as sampled at each `learn`) at least
/// `blinks` times, counted with a weight fading by e every `blinkWindow` seconds — or it moves
/// — differs from its value at the last sample by `moveFraction` of the pixel threshold.
/// Foliage, water and flicker do both all the time; leaves that start to move when the
/// background has learned them still stay changed against it (it waits where the picture
/// differs, for an object to leave) and do not blink, but they move. An object that stops (a
/// parked car, someone standing) neither blinks nor moves once it stands, so its spread does
/// not rise and it keeps counting until the background takes it in
/// (`MotionDetector.absorbAfter`). What counts as motion is not learned from: in a block where
/// at least `holdFill` of the pixels counted (an object passing, whose texture moves across
/// its pixels), no spread rises, so a path crossed every few seconds is not learned like
/// foliage.
///
/// Nothing is known when the model starts: every spread starts at half the pixel threshold
/// and, for `youth` learning times, rises wherever the difference is above it, so a scene
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
    /// (0.2: a person of 5 × 15 reduced pixels still counts in the 8 × 8 blocks it crosses, and
    /// a light shirt against a bright sky beside the leaves).
    static let fill: Float = 0.2
    /// No spread rises in a block where at least this fraction of the pixels counted.
    static let holdFill: Float = 0.5
    /// How many blocks around a block with raised thresholds are auto-masked with it.
    static let maskReach = 1
    /// The spread never falls below this (grey levels), so it can rise again.
    static let floor: Float = 0.5
    /// A pixel blinks when it has changed state at least `blinks` times, counted with a weight
    /// fading by e every `blinkWindow` seconds.
    static let blinks: Float = 1.5
    static let blinkWindow = 2.0
    /// A pixel moves when it differs from its value at the last sample (`interval` ago) by
    /// more than this fraction of the pixel threshold (2 σ of the noise).
    static let moveFraction: Float = 0.5
    /// A pixel's threshold is raised where the largest spread around it exceeds this many
    /// pixel thresholds: well above the spread of noise (about half of one), and above what
    /// one object passing by leaves (about 1.5 times that).
    static let raiseAbove: Float = 1.5
    /// Where every spread starts, as a fraction of the pixel threshold.
    static let startSpread: Float = 0.5
    /// For this many learning times after the model starts, a spread rises wherever the
    /// difference is above it, blinking or not.
    static let youth = 5.0

    let width: Int
    let height: Int
    let enabled: Bool
    let learnTime: Double
    let forgetTime: Double
    private(set) var spread: [Float]
    /// Per pixel: 1 where it was changed at the last `learn`, else 0; its changes of state
    /// since, fading by e every `blinkWindow` seconds; and its value then.
    private var wasChanged: [Float]
    private var blinked: [Float]
    private var previous: [Float]
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
    /// Per pixel: 1 where its spread may rise in this `learn`, 0 where it is held (half of its
    /// block counted as motion: an object passing, not foliage).
    private var mayRise: [Float]
    /// The spread's maxima along the rows, and one row of raised flags, 1 where the pixel's
    /// threshold is raised (buffers of `prepare`).
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
        wasChanged = [Float](repeating: 0, count: width * height)
        blinked = wasChanged
        previous = wasChanged
        limit = [Float](repeating: 0, count: width * height)
        rowMax = limit
        mayRise = [Float](repeating: 1, count: width * height)
        raisedFlags = [UInt8](repeating: 0, count: width)
        blocksAcross = (width + Self.blockSize - 1) / Self.blockSize
        blocksDown = (height + Self.blockSize - 1) / Self.blockSize
        masked = [UInt8](repeating: 0, count: blocksAcross * blocksDown)
        raisedBlock = masked
        blockCounts = [Int32](repeating: 0, count: blocksAcross * blocksDown)
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
                                counts[blockRow + bx] &+= Int32(
                                    Self.ones(
                                        in: flags + bx * size, rows: 1, columns: min(size, w - bx * size), stride: w))
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
                    guard Float(Self.ones(in: corner, rows: rows, columns: columns, stride: padded)) < needed
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

    /// The flags set (each 0 or 1) in an 8-wide block of `rows` rows (at most 8): the rows
    /// added as 64-bit words (each byte lane at most 8), then the lanes summed by a multiply.
    @inline(__always)
    static func onesIn8Wide(_ corner: UnsafePointer<UInt8>, rows: Int, stride: Int) -> Int {
        let raw = UnsafeRawPointer(corner)
        var lanes: UInt64 = 0
        for y in 0..<rows { lanes &+= raw.loadUnaligned(fromByteOffset: y &* stride, as: UInt64.self) }
        return Int((lanes &* 0x0101_0101_0101_0101) >> 56)
    }

    /// Learns from this frame's reduced picture and the background (as updated by this
    /// frame), `dt` seconds after the previous frame. `changed` and `counted` are the padded
    /// change maps (`ChangeMap.flags`, and `counted` after `gate`); `threshold` is the frame's
    /// pixel threshold.
    mutating func learn(
        _ picture: [Float], background: [Float], changed: [UInt8], counted: [UInt8], threshold: Float, dt: Double
    ) {
        let w = width
        let padded = w + 2
        guard enabled, dt > 0, picture.count == w * height, background.count == w * height,
            changed.count == padded * (height + 2), counted.count == changed.count
        else { return }
        guard primed else {
            // Nothing learned yet: each spread starts at `startSpread` of the pixel threshold,
            // so a part that moves is learned in a few learning times rather than from the
            // floor.
            let start = max(threshold * Self.startSpread, Self.floor)
            for i in spread.indices { spread[i] = start }
            for i in previous.indices { previous[i] = picture[i] }
            primed = true
            age = 0
            return
        }
        age += dt
        let young = age < Self.youth * learnTime
        let up = Float(Numerics.exp(dt / learnTime))
        let rates = Rates(
            up: up, rise: young ? up : 1, down: Float(Numerics.exp(-dt / forgetTime)),
            fade: Float(Numerics.exp(-dt / Self.blinkWindow)), blinks: Self.blinks,
            moveAt: threshold * Self.moveFraction, floor: Self.floor)
        holdObjects(counted, young: young)
        picture.withUnsafeBufferPointer { p in
            background.withUnsafeBufferPointer { bg in
                changed.withUnsafeBufferPointer { f in
                    spread.withUnsafeMutableBufferPointer { s in
                        wasChanged.withUnsafeMutableBufferPointer { was in
                            blinked.withUnsafeMutableBufferPointer { b in
                                previous.withUnsafeMutableBufferPointer { pv in
                                    mayRise.withUnsafeBufferPointer { m in
                                        guard let p = p.baseAddress, let bg = bg.baseAddress, let f = f.baseAddress,
                                            let s = s.baseAddress, let was = was.baseAddress, let b = b.baseAddress,
                                            let pv = pv.baseAddress, let m = m.baseAddress
                                        else { return }
                                        for y in 0..<height {
                                            let o = y * w
                                            Self.learnRow(
                                                Row(
                                                    picture: p + o, background: bg + o,
                                                    changed: f + (y + 1) * padded + 1, spread: s + o,
                                                    wasChanged: was + o, blinked: b + o, previous: pv + o,
                                                    mayRise: m + o),
                                                count: w, rates)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Fills `mayRise`: 0 in the blocks where at least `holdFill` of the pixels `counted` (the
    /// padded map), 1 elsewhere, and 1 everywhere while `young`.
    private mutating func holdObjects(_ counted: [UInt8], young: Bool) {
        let w = width
        let size = Self.blockSize
        let padded = w + 2
        counted.withUnsafeBufferPointer { flagBuffer in
            mayRise.withUnsafeMutableBufferPointer { m in
                guard let flags = flagBuffer.baseAddress else { return }
                for by in 0..<blocksDown {
                    let top = by * size
                    let rows = min(size, height - top)
                    for bx in 0..<blocksAcross {
                        let left = bx * size
                        let columns = min(size, w - left)
                        var held = false
                        if !young {
                            let corner = flags + (top + 1) * padded + 1 + left
                            let count = Self.ones(in: corner, rows: rows, columns: columns, stride: padded)
                            held = Float(count) >= Self.holdFill * Float(rows * columns)
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

    /// How many flags (each 0 or 1) are set in a block of `rows × columns` at `corner`, rows
    /// `stride` apart.
    @inline(__always)
    static func ones(in corner: UnsafePointer<UInt8>, rows: Int, columns: Int, stride: Int) -> Int {
        if columns == 8 { return onesIn8Wide(corner, rows: rows, stride: stride) }
        var count = 0
        for y in 0..<rows {
            for x in 0..<columns { count += Int(corner[y * stride + x]) }
        }
        return count
    }

    /// The factors of one `learn` step.
    struct Rates: Sendable {
        /// The spread's factor where the difference is above it: `up` if blinking, else `rise`.
        var up, rise: Float
        /// Its factor where the difference is below it, never under `floor`.
        var down: Float
        /// The blinks' fading, and how many make a pixel blink.
        var fade, blinks: Float
        /// How far a pixel's value must change from the last sample for it to move.
        var moveAt: Float
        var floor: Float
    }

    /// One row of the pictures and the per-pixel state `learnRow` reads and updates.
    struct Row {
        var picture, background: UnsafePointer<Float>
        var changed: UnsafePointer<UInt8>
        var spread, wasChanged, blinked, previous: UnsafeMutablePointer<Float>
        var mayRise: UnsafePointer<Float>
    }

    /// One `learn` step over `count` pixels of a row. Selects of plain values and products,
    /// never `&&` or `if`: either becomes a branch, and the loop no longer vectorises.
    @inline(never)
    static func learnRow(_ row: Row, count: Int, _ k: Rates) {
        let p = row.picture, bg = row.background, f = row.changed
        let s = row.spread, was = row.wasChanged, b = row.blinked, pv = row.previous, m = row.mayRise
        for i in 0..<count {
            let v = s[i]
            // A blink: changed now and not at the last sample, or the other way round.
            let now = Float(f[i])  // 0 or 1 (a conversion: a select here becomes a branch)
            let toggled = now - was[i]
            let blinks = b[i] * k.fade + (toggled < 0 ? -toggled : toggled)
            b[i] = blinks
            was[i] = now
            // A move: a change of value since the last sample.
            let change = p[i] - pv[i]
            pv[i] = p[i]
            let moving: Float = (change < 0 ? -change : change) > k.moveAt ? 1 : 0
            // Above the spread: × up if it blinks or moves (or is young), else × rise, and not
            // at all where held; below: × down, never under the floor.
            let blinking: Float = blinks >= k.blinks ? 1 : 0
            let comesAndGoes = blinking + moving - blinking * moving
            let factor = k.rise + comesAndGoes * (k.up - k.rise)
            let above = v * (1 + m[i] * (factor - 1))
            let fallen = v * k.down
            let below = fallen > k.floor ? fallen : k.floor
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
