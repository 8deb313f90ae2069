/// Where keyframes go in a stream, frame by frame: on the first frame at or after each
/// `interval` boundary of capture time, counted from the first frame (the boundaries are
/// `first + k·interval`). So every frame is less than one interval after the latest
/// keyframe, whatever the real frame rate and however many frames were lost; a clip can
/// start at most one interval before the point it should.
///
/// A value with no clock: the caller asks once per frame, in capture order, and tells the
/// encoder. One schedule per stream (a new encoder gets a new schedule).
public struct KeyframeSchedule: Hashable, Sendable {
    /// Capture time between keyframe boundaries.
    public let interval: Timestamp.Duration
    /// The first frame's timestamp, once a frame was asked about.
    public private(set) var origin: Timestamp?
    /// The boundary the next keyframe waits for.
    public private(set) var nextBoundary = Timestamp.zero

    /// A schedule with a boundary every `interval` (which must be positive).
    public init(interval: Timestamp.Duration) {
        precondition(interval > .zero, "a keyframe interval must be positive, not \(interval)")
        self.interval = interval
    }

    /// Whether the frame captured at `time` is to be a keyframe; the schedule then waits for
    /// the boundary after it. The first frame always is.
    public mutating func keyframeDue(at time: Timestamp) -> Bool {
        let origin = self.origin ?? time
        if self.origin == nil {
            self.origin = time
            nextBoundary = time
        }
        guard time >= nextBoundary else { return false }
        let step = interval.nanoseconds
        nextBoundary = origin + Timestamp.Duration(nanoseconds: ((time - origin).nanoseconds / step + 1) * step)
        return true
    }
}
