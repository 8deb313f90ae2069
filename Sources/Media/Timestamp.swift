/// A point on a monotonic clock, in nanoseconds.
///
/// Capture timestamps come from `CLOCK_MONOTONIC` (V4L2 and ALSA both report it), or are
/// computed from a frame index and a rational rate (Y4M files, the synthetic scene). Both
/// fit in nanoseconds exactly enough: converting to a 90 kHz media timescale rounds each
/// absolute instant, so durations computed as differences never drift.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static let zero = Timestamp(nanoseconds: 0)

    public init(seconds: Double) { self.nanoseconds = Int64((seconds * 1e9).rounded()) }

    /// The instant of frame `index` at `rate` frames per second, exactly rounded to the nanosecond.
    public init(frameIndex index: Int64, rate: Rational) {
        self = .zero + Duration(frames: index, rate: rate)
    }

    public var seconds: Double { Double(nanoseconds) / 1e9 }

    /// This instant in units of `1/timescale` seconds, rounded to the nearest unit.
    public func ticks(timescale: Int64) -> Int64 {
        Rational.scale(nanoseconds, by: timescale, over: 1_000_000_000)
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.nanoseconds < b.nanoseconds }
    public static func + (a: Timestamp, b: Duration) -> Timestamp {
        Timestamp(nanoseconds: a.nanoseconds + b.nanoseconds)
    }
    public static func - (a: Timestamp, b: Duration) -> Timestamp {
        Timestamp(nanoseconds: a.nanoseconds - b.nanoseconds)
    }
    public static func - (a: Timestamp, b: Timestamp) -> Duration {
        Duration(nanoseconds: a.nanoseconds - b.nanoseconds)
    }

    public var description: String { DecimalText.fixed(seconds, 3) + "s" }
}

extension Timestamp {
    /// A span between two timestamps, in nanoseconds.
    public struct Duration: Hashable, Comparable, Sendable, CustomStringConvertible {
        public var nanoseconds: Int64
        public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
        public init(seconds: Double) { self.nanoseconds = Int64((seconds * 1e9).rounded()) }
        public static let zero = Duration(nanoseconds: 0)
        public var seconds: Double { Double(nanoseconds) / 1e9 }
        public static func < (a: Duration, b: Duration) -> Bool { a.nanoseconds < b.nanoseconds }
        public static func + (a: Duration, b: Duration) -> Duration {
            Duration(nanoseconds: a.nanoseconds + b.nanoseconds)
        }
        public static func - (a: Duration, b: Duration) -> Duration {
            Duration(nanoseconds: a.nanoseconds - b.nanoseconds)
        }
        public var description: String { DecimalText.fixed(seconds, 3) + "s" }

        /// How long `frames` frames last at `rate` frames per second, exactly rounded to the
        /// nanosecond: video frames at a camera's rate, or sound's sample frames at its sample
        /// rate. The one conversion from frames to time; `frames(at:)` is the way back.
        public init(frames: Int64, rate: Rational) {
            // frames * 1e9 * rate.denominator / rate.numerator, without intermediate overflow.
            nanoseconds = Rational.scale(frames, by: 1_000_000_000 * rate.denominator, over: rate.numerator)
        }

        /// How long `frames` sample frames of sound last at `sampleRate` (Hz).
        public init(frames: Int, sampleRate: Int) {
            self.init(frames: Int64(frames), rate: Rational(Int64(sampleRate), 1))
        }

        /// The frames at `rate` frames per second this span holds, rounded to the nearest.
        public func frames(at rate: Rational) -> Int64 {
            Rational.scale(nanoseconds, by: rate.numerator, over: 1_000_000_000 * rate.denominator)
        }

        /// The sample frames of sound at `sampleRate` (Hz) this span holds, rounded to the nearest.
        public func frames(sampleRate: Int) -> Int { Int(frames(at: Rational(Int64(sampleRate), 1))) }
    }
}

/// A positive rational number such as a frame rate (30000/1001) or a pixel aspect ratio.
public struct Rational: Hashable, Sendable, CustomStringConvertible {
    public var numerator: Int64
    public var denominator: Int64

    /// Creates `numerator/denominator` in lowest terms; the denominator must not be zero.
    public init(_ numerator: Int64, _ denominator: Int64) {
        precondition(denominator != 0, "a rational number needs a non-zero denominator")
        let sign: Int64 = denominator < 0 ? -1 : 1
        let g = Rational.gcd(abs(numerator), abs(denominator))
        self.numerator = sign * numerator / max(g, 1)
        self.denominator = sign * denominator / max(g, 1)
    }

    /// A frame rate given as a decimal number: whole rates exactly (30 → 30/1), the NTSC-family
    /// rates as their true fractions (29.97 → 30000/1001), others to a thousandth (12.5 → 25/2).
    public init(framesPerSecond fps: Double) {
        precondition(fps.isFinite && fps > 0 && fps < 1_000_000, "a frame rate is a positive number")
        if fps == fps.rounded() {
            self.init(Int64(fps), 1)
        } else if abs(fps * 1.001 - (fps * 1.001).rounded()) < 0.0005 {
            self.init(Int64((fps * 1.001).rounded()) * 1000, 1001)
        } else {
            self.init(Int64((fps * 1000).rounded()), 1000)
        }
    }

    public var doubleValue: Double { Double(numerator) / Double(denominator) }
    public var description: String { "\(numerator)/\(denominator)" }

    static func gcd(_ a: Int64, _ b: Int64) -> Int64 {
        var (a, b) = (a, b)
        while b != 0 { (a, b) = (b, a % b) }
        return a
    }

    /// `value * multiplier / divisor`, rounded to nearest (halves away from zero), computed
    /// in 128 bits so that nanosecond instants times a timescale never overflow.
    public static func scale(_ value: Int64, by multiplier: Int64, over divisor: Int64) -> Int64 {
        precondition(divisor > 0, "scale needs a positive divisor")
        let negative = (value < 0) != (multiplier < 0)
        let product = value.magnitude.multipliedFullWidth(by: multiplier.magnitude)
        let d = divisor.magnitude
        // Divide the 128-bit product (high, low) by d.
        let (q, r) = d.dividingFullWidth((product.high, product.low))
        let rounded = r >= d - r ? q + 1 : q
        return negative ? -Int64(rounded) : Int64(rounded)
    }
}
