import Media

/// Turns a driver's 32-bit frame sequence numbers into a 64-bit count that starts at 0 with
/// the first frame seen, so a jump of more than one is a lost frame.
///
/// A V4L2 driver counts every frame it captured, delivered or not: when the application holds
/// all buffers, the driver drops frames and `sequence` skips. The counter wraps at 2^32 (at
/// 30 fps after 4.5 years; vivid's "Sequence Wrap" control starts it just below); a step
/// backwards means the driver restarted its count, which loses nothing.
public struct SequenceCounter: Hashable, Sendable {
    private var lastRaw: UInt32?
    private var lastSequence: UInt64 = 0
    /// Frames lost so far (the sum of every gap).
    public private(set) var lost = 0

    public init() {}

    /// The extended sequence number of a frame the driver numbered `raw`, and the frames lost
    /// just before it.
    public mutating func count(_ raw: UInt32) -> (sequence: UInt64, lost: Int) {
        guard let lastRaw else {
            self.lastRaw = raw
            return (0, 0)
        }
        let step = raw &- lastRaw
        // Forward by less than half the range: a normal step (1) or a gap. Otherwise the
        // driver went back (restarted): continue the count without a gap.
        let advance: UInt64 = step != 0 && step < 1 << 31 ? UInt64(step) : 1
        self.lastRaw = raw
        lastSequence += advance
        let gap = Int(advance - 1)
        lost += gap
        return (lastSequence, gap)
    }
}

/// When a V4L2 buffer was captured, on the monotonic clock.
public enum BufferTimestamp {
    /// `V4L2_BUF_FLAG_TIMESTAMP_MASK` and its `MONOTONIC` value (linux/videodev2.h).
    static let mask: UInt32 = 0xE000
    static let monotonic: UInt32 = 0x2000

    /// The driver's timestamp when its flags say it is on the monotonic clock (uvcvideo,
    /// vivid, libcamera's compatibility layer), else `dequeuedAt` — the time the frame was
    /// taken from the driver, later than the capture by up to a frame.
    public static func capture(seconds: Int64, microseconds: Int64, flags: UInt32, dequeuedAt: Timestamp) -> Timestamp {
        guard flags & mask == monotonic, seconds > 0 || microseconds > 0 else { return dequeuedAt }
        return Timestamp(nanoseconds: seconds * 1_000_000_000 + microseconds * 1000)
    }
}

/// Puts camera frames on the grid of their nominal rate.
///
/// Drivers stamp frames with a few milliseconds of jitter (USB transfers, interrupt latency,
/// vivid's end-of-frame stamps under load). A frame within a quarter of a frame interval of
/// the grid — the first frame's time plus whole intervals — gets the grid's time, so a clip
/// has a constant rate and lost frames leave whole intervals out (players and ffmpeg then see
/// the nominal rate, not a variable one). A frame further off (a camera whose real rate
/// drifts from its nominal one, a stall) starts a new grid at its own time.
///
/// Times always increase, by at least half an interval: the encoder refuses a frame that is
/// not later than the one before, so a driver stamp that goes back or stands still (a camera
/// clock reset, a starved driver) is moved to just after its predecessor.
public struct FrameTimeline: Sendable {
    public let rate: Rational
    private let tolerance: Int64
    private let minimumStep: Int64
    private var anchor: Timestamp?
    private var lastIndex: Int64 = 0
    private var last = Timestamp.zero
    /// How many times a frame was off the grid and the grid started again.
    public private(set) var restarts = 0

    public init(rate: Rational) {
        precondition(rate.numerator > 0 && rate.denominator > 0, "a frame rate must be positive")
        self.rate = rate
        let interval = Timestamp.Duration(frames: 1, rate: rate).nanoseconds
        tolerance = interval / 4
        minimumStep = interval / 2
    }

    public mutating func place(_ measured: Timestamp) -> Timestamp {
        if let anchor {
            // The nearest grid point: index = round(elapsed · rate).
            let index = (measured - anchor).frames(at: rate)
            let grid = anchor + Timestamp.Duration(frames: index, rate: rate)
            if index > lastIndex && abs((measured - grid).nanoseconds) <= tolerance {
                lastIndex = index
                last = grid
                return grid
            }
            restarts += 1
        }
        let start = anchor == nil ? measured : max(measured, last + Timestamp.Duration(nanoseconds: minimumStep))
        anchor = start
        lastIndex = 0
        last = start
        return start
    }
}

/// Places captured sound on the monotonic clock.
///
/// ALSA pairs a buffer position with a monotonic timestamp (`snd_pcm_htimestamp`): the first
/// unread frame was captured `avail / rate` before `ts`. Each measurement jitters by the
/// driver's pointer granularity (a period, or a timer tick), so chunks follow one another
/// exactly while measurements agree, and a slow correction follows the sound card's clock
/// drift; a measurement further off than `resyncThreshold` (an overrun, a suspend) restarts
/// the line there.
public struct AudioTimeline: Sendable {
    public let sampleRate: Int
    /// A measurement this far from the line restarts it (as `MovieWriter` fills or drops
    /// audio beyond the same distance).
    public let resyncThreshold: Timestamp.Duration
    /// Fraction of the measured offset corrected per chunk.
    public let gain: Double
    private var anchor: Timestamp?
    private var framesSinceAnchor: Int64 = 0
    private var correction: Double = 0  // nanoseconds added to the line

    public init(sampleRate: Int, resyncThreshold: Timestamp.Duration = .init(seconds: 0.02), gain: Double = 1.0 / 16) {
        precondition(sampleRate > 0, "a timeline needs a sample rate")
        self.sampleRate = sampleRate
        self.resyncThreshold = resyncThreshold
        self.gain = gain
    }

    /// The capture time of the first frame of a chunk of `frames` frames whose first frame
    /// was measured at `measured`.
    public mutating func place(measured: Timestamp, frames: Int) -> Timestamp {
        let time: Timestamp
        if let expected = expectedNext, abs((measured - expected).nanoseconds) <= resyncThreshold.nanoseconds {
            correction += Double((measured - expected).nanoseconds) * gain
            time = expectedNext ?? measured
        } else {
            anchor = measured
            framesSinceAnchor = 0
            correction = 0
            time = measured
        }
        framesSinceAnchor += Int64(frames)
        return time
    }

    /// Forgets the line (after an overrun the next chunk starts a new one).
    public mutating func reset() {
        anchor = nil
        framesSinceAnchor = 0
        correction = 0
    }

    /// Where the next chunk should start.
    var expectedNext: Timestamp? {
        guard let anchor else { return nil }
        let elapsed = Timestamp.Duration(frames: framesSinceAnchor, rate: Rational(Int64(sampleRate), 1)).nanoseconds
        return Timestamp(nanoseconds: anchor.nanoseconds + elapsed + Int64(correction.rounded()))
    }

    /// The capture time of the first unread frame, from an ALSA high-resolution timestamp
    /// and the frames available then. A zero or implausible timestamp (a plugin that does not
    /// pass them on) falls back to `now`, the time the position was read.
    public static func firstUnreadFrame(
        timestamp: Timestamp, available: Int, sampleRate: Int, now: Timestamp
    ) -> Timestamp {
        let base = timestamp.nanoseconds > 0 && abs((now - timestamp).nanoseconds) < 1_000_000_000 ? timestamp : now
        return base - Timestamp.Duration(frames: available, sampleRate: sampleRate)
    }
}
