import Media

/// The built-in scene: a textured static background, per-frame sensor noise, objects that
/// cross on a schedule, and optional light changes. Frame `n` is a pure function of the
/// scene and `n` (same seed, same bytes), so tests can reproduce any frame, and the
/// schedule is the ground truth.
public struct SyntheticScene: Hashable, Sendable {
    /// Picture size in pixels; even, 16 to 4096.
    public var width: Int
    public var height: Int
    /// Frames per second, 1 to 240.
    public var frameRate: Rational
    /// `nv12` (what most cameras give) or `i420`.
    public var pixelFormat: PixelFormat
    /// Bytes from one luma row to the next (a camera's `bytesperline`); nil for the width.
    /// Chroma rows follow V4L2's convention (see `VideoFormat(…bytesPerLine:)`).
    public var bytesPerLine: Int?
    /// Seeds the background texture and the noise.
    public var seed: UInt64
    /// Standard deviation of the sensor noise in grey levels (luma; chroma gets half),
    /// 0 to 20. Real sensors show 2 to 6.
    public var noiseSigma: Double
    public var schedule: SceneSchedule
    /// How long the scene runs; nil runs for ever.
    public var duration: Timestamp.Duration?
    /// Timestamp of frame 0; frame `n` is at `startTime + n / frameRate`.
    public var startTime: Timestamp

    public init(
        width: Int = 640, height: Int = 480, frameRate: Rational = Rational(30, 1),
        pixelFormat: PixelFormat = .nv12, bytesPerLine: Int? = nil, seed: UInt64 = 1,
        noiseSigma: Double = 3, schedule: SceneSchedule = .demo(), duration: Timestamp.Duration? = nil,
        startTime: Timestamp = .zero
    ) {
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.pixelFormat = pixelFormat
        self.bytesPerLine = bytesPerLine
        self.seed = seed
        self.noiseSigma = noiseSigma
        self.schedule = schedule
        self.duration = duration
        self.startTime = startTime
    }

    /// Checks every field; the error names the field and the accepted range.
    public func validate() throws(CaptureError) {
        func bad(_ setting: String, _ problem: String) -> CaptureError {
            .invalidSettings(setting: "synthetic scene " + setting, problem: problem)
        }
        guard (16...4096).contains(width), width % 2 == 0 else {
            throw bad("width", "\(width) is not an even number from 16 to 4096")
        }
        guard (16...4096).contains(height), height % 2 == 0 else {
            throw bad("height", "\(height) is not an even number from 16 to 4096")
        }
        guard frameRate.numerator > 0, frameRate.denominator > 0, frameRate.numerator <= 1_000_000,
            frameRate.denominator <= 1_000_000, frameRate.numerator <= 240 * frameRate.denominator,
            frameRate.numerator >= frameRate.denominator
        else {
            throw bad("frame rate", "\(frameRate) is not from 1 to 240 frames per second")
        }
        guard pixelFormat == .nv12 || pixelFormat == .i420 else {
            throw bad("pixel format", "\(pixelFormat) is not produced; use NV12 or I420")
        }
        if let b = bytesPerLine, !(width...VideoFormat.maximumStride).contains(b) {
            throw bad("bytes per line", "\(b) is not from the width (\(width)) to \(VideoFormat.maximumStride)")
        }
        guard noiseSigma.isFinite, (0...20).contains(noiseSigma) else {
            throw bad("noise", "a sigma of \(noiseSigma) is not from 0 to 20 grey levels")
        }
        if let d = duration, d <= .zero { throw bad("duration", "\(d) is not positive") }
        let period = schedule.period
        if let p = period, p <= .zero { throw bad("period", "\(p) is not positive") }
        for (i, o) in schedule.objects.enumerated() {
            guard o.enter >= .zero, o.leave > o.enter else {
                throw bad(
                    "object \(i)",
                    "enters at \(o.enter) and leaves at \(o.leave); it must leave after it enters, both at or after 0")
            }
            if let p = period, o.leave > p {
                throw bad("object \(i)", "leaves at \(o.leave), after the period of \(p)")
            }
            guard o.width > 0, o.width <= 1, o.height > 0, o.height <= 1 else {
                throw bad("object \(i)", "its size \(o.width)×\(o.height) is not a fraction of the picture from 0 to 1")
            }
            let position: [Double]
            switch o.path {
            case .leftToRight(let y), .rightToLeft(let y): position = [y]
            case .topToBottom(let x), .bottomToTop(let x): position = [x]
            case .still(let x, let y): position = [x, y]
            }
            guard position.allSatisfy({ $0.isFinite && (0...1).contains($0) }) else {
                throw bad("object \(i)", "its position is not within 0 to 1")
            }
        }
        for (i, l) in schedule.lightChanges.enumerated() {
            guard l.start >= .zero, l.end > l.start else {
                throw bad("light change \(i)", "runs from \(l.start) to \(l.end); it must end after it starts")
            }
            if let p = period, l.end > p {
                throw bad("light change \(i)", "ends at \(l.end), after the period of \(p)")
            }
            guard (-200...200).contains(l.delta) else {
                throw bad("light change \(i)", "a step of \(l.delta) grey levels is not from -200 to 200")
            }
        }
    }

    /// The format of the frames this scene produces.
    public func videoFormat() throws(CaptureError) -> VideoFormat {
        try validate()
        do {
            return try VideoFormat(
                width: width, height: height, pixelFormat: pixelFormat, bytesPerLine: bytesPerLine ?? width,
                frameRate: frameRate, pixelAspectRatio: Rational(1, 1))
        } catch {
            throw .invalidSettings(setting: "synthetic scene", problem: error.problem)
        }
    }

    /// Timestamp of frame `index`.
    public func timestamp(ofFrame index: Int64) -> Timestamp {
        startTime + Timestamp.Duration(frames: index, rate: frameRate)
    }

    /// Number of frames in the scene, or nil when it runs for ever.
    public var frameCount: Int64? {
        guard let duration else { return nil }
        // Frames n with n / rate < duration.
        let exact = duration.frames(at: frameRate)
        var n = max(exact - 1, 0)
        while (timestamp(ofFrame: n) - startTime) < duration { n += 1 }
        return n
    }

    // MARK: Ground truth

    /// The time within the schedule (within the period, for a repeating one).
    func scheduleTime(_ t: Timestamp) -> Timestamp.Duration {
        let d = t - startTime
        guard let p = schedule.period else { return d }
        let r = d.nanoseconds % p.nanoseconds
        return Timestamp.Duration(nanoseconds: r < 0 ? r + p.nanoseconds : r)
    }

    /// Every object appearance that overlaps `start...end`, in absolute time, in order of entry.
    public func appearances(from start: Timestamp, to end: Timestamp) -> [ObjectAppearance] {
        var out: [ObjectAppearance] = []
        for (offset, _) in cycles(from: start, to: end) {
            for (i, o) in schedule.objects.enumerated() {
                let a = ObjectAppearance(object: i, enter: offset + o.enter, leave: offset + o.leave)
                if a.leave >= start && a.enter <= end { out.append(a) }
            }
        }
        return out.sorted { ($0.enter, $0.object) < ($1.enter, $1.object) }
    }

    /// Every light change that overlaps `start...end`, in absolute time.
    public func lightChanges(from start: Timestamp, to end: Timestamp) -> [LightChangeInterval] {
        var out: [LightChangeInterval] = []
        for (offset, _) in cycles(from: start, to: end) {
            for l in schedule.lightChanges {
                let c = LightChangeInterval(start: offset + l.start, end: offset + l.end, delta: l.delta)
                if c.end >= start && c.start <= end { out.append(c) }
            }
        }
        return out.sorted { $0.start < $1.start }
    }

    /// Start times of the schedule's periods that may overlap `start...end`.
    private func cycles(from start: Timestamp, to end: Timestamp) -> [(Timestamp, Int64)] {
        guard let p = schedule.period?.nanoseconds else { return [(startTime, 0)] }
        let first = max(0, (start - startTime).nanoseconds / p - 1)
        let last = max(first, (end - startTime).nanoseconds / p + 1)
        return (first...last).map { (startTime + Timestamp.Duration(nanoseconds: $0 * p), $0) }
    }

    /// Grey levels added to luma at `t` by the light changes active then.
    public func lightOffset(at t: Timestamp) -> Int {
        let s = scheduleTime(t)
        return schedule.lightChanges.reduce(0) { $0 + ($1.start <= s && s < $1.end ? $1.delta : 0) }
    }

    /// Indices of the objects with at least one pixel in the frame at `t` — exactly the
    /// objects the frame shows.
    public func visibleObjects(at t: Timestamp) -> [Int] {
        schedule.objects.indices.filter { objectRect($0, at: t) != nil }
    }

    /// The part of the picture object `index` covers at `t` (clipped to the picture), or nil
    /// when none of it is in the picture.
    public func objectRect(_ index: Int, at t: Timestamp) -> PixelRect? {
        guard let r = unclippedRect(index, at: t) else { return nil }
        let x0 = max(r.x, 0), y0 = max(r.y, 0)
        let x1 = min(r.x + r.width, width), y1 = min(r.y + r.height, height)
        guard x1 > x0, y1 > y0 else { return nil }
        return PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
    }

    /// Object `index`'s whole rectangle at `t` (it may lie partly or wholly outside the
    /// picture), or nil outside its scheduled time.
    func unclippedRect(_ index: Int, at t: Timestamp) -> PixelRect? {
        let o = schedule.objects[index]
        let s = scheduleTime(t)
        guard s >= o.enter, s < o.leave else { return nil }
        let (w, h) = objectSize(o)
        let span = Double((o.leave - o.enter).nanoseconds)
        let f = Double((s - o.enter).nanoseconds) / span
        func along(_ extent: Int, _ size: Int) -> Int { -size + Int((Double(extent + size) * f).rounded(.down)) }
        func centred(_ fraction: Double, _ extent: Int, _ size: Int) -> Int {
            Int((fraction * Double(extent)).rounded()) - size / 2
        }
        switch o.path {
        case .leftToRight(let y):
            return PixelRect(x: along(width, w), y: centred(y, height, h), width: w, height: h)
        case .rightToLeft(let y):
            return PixelRect(x: width - w - along(width, w), y: centred(y, height, h), width: w, height: h)
        case .topToBottom(let x):
            return PixelRect(x: centred(x, width, w), y: along(height, h), width: w, height: h)
        case .bottomToTop(let x):
            return PixelRect(x: centred(x, width, w), y: height - h - along(height, h), width: w, height: h)
        case .still(let x, let y):
            return PixelRect(x: centred(x, width, w), y: centred(y, height, h), width: w, height: h)
        }
    }

    func objectSize(_ o: SceneObject) -> (Int, Int) {
        (max(1, Int((o.width * Double(width)).rounded())), max(1, Int((o.height * Double(height)).rounded())))
    }
}

/// A rectangle of pixels.
public struct PixelRect: Hashable, Sendable {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
}
