import Media

/// When a source that has gone quiet counts as stalled (a hung driver, a pipe nobody writes
/// to, a loose cable): after `minimum` seconds without a frame, or ten frame intervals for a
/// slow camera, the open clip is closed, as when a camera goes away; the next frame starts a
/// new stream. Frame times that jump by as much (or go back) break the stream the same way,
/// so no clip holds a picture frozen across the jump.
///
/// A value with no clock: the pipeline passes frame times and says when its wait ran out.
public struct StallWatch: Sendable, Equatable {
    /// Seconds without a frame that count as a stall, at the least.
    public static let minimum = 5.0

    /// The capture time of the newest frame of the stream.
    public private(set) var lastFrame: Timestamp?
    private var lastInterval = Timestamp.Duration(seconds: 1.0 / 30)
    /// True from a stall until the next frame.
    public private(set) var isStalled = false

    public init() {}

    /// The frame interval last seen (1/30 s before two frames came).
    public var frameInterval: Timestamp.Duration { lastInterval }

    /// How long to wait for the next frame before it counts as a stall: nil (for ever) before
    /// the stream has started and while it is stalled.
    public func timeout(streaming: Bool) -> Double? {
        guard streaming, !isStalled else { return nil }
        return max(StallWatch.minimum, 10 * lastInterval.seconds)
    }

    /// What a frame's capture time says about the stream.
    public enum Arrival: Sendable, Equatable {
        /// The next frame of the stream.
        case next
        /// The first frame after a stall (say so).
        case afterStall
        /// The frame time jumped from the previous frame's by this much: back (a negative
        /// duration), or ahead by more than a stall lasts (a process stopped and continued, a
        /// source whose clock stepped). The stream breaks there: what was recorded before the
        /// jump ends with its last frame (still `lastFrame`), then the caller ends the stream
        /// and gives this frame again, as the first of the next.
        case jumped(Timestamp.Duration)
    }

    /// A frame captured at `time` came. The gap of a stall or a jump is not a frame interval.
    public mutating func frame(at time: Timestamp) -> Arrival {
        if let last = lastFrame, !isStalled {
            let gap = time - last
            if gap < .zero || gap.seconds > max(StallWatch.minimum, 10 * lastInterval.seconds) {
                return .jumped(gap)
            }
            if gap > .zero { lastInterval = gap }
        }
        defer {
            lastFrame = time
            isStalled = false
        }
        return isStalled ? .afterStall : .next
    }

    /// The stream broke off (a camera lost): the next frame starts a new one, and the gap
    /// before it is not a frame interval either.
    public mutating func streamEnded() {
        lastFrame = nil
    }

    /// The wait for a frame ran out: the stream is stalled from now until the next frame.
    public mutating func timedOut() {
        isStalled = true
    }
}
