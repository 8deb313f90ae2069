import Media

/// Something that crosses (or appears in) the synthetic scene.
///
/// Moving objects start just outside one edge of the picture at `enter` and end just outside
/// the opposite edge at `leave`, at constant speed: `enter` is when their first pixel comes
/// into the picture and `leave` when their last pixel goes out. The first frame after `enter`
/// may show only a pixel column of them; `SyntheticScene.visibleObjects(at:)` gives the exact
/// per-frame truth. A `still` object is shown whole from `enter` until `leave`.
public struct SceneObject: Hashable, Sendable {
    public enum Path: Hashable, Sendable {
        /// Crosses horizontally; `y` is the vertical position of its centre (0 top, 1 bottom).
        case leftToRight(y: Double)
        case rightToLeft(y: Double)
        /// Crosses vertically; `x` is the horizontal position of its centre (0 left, 1 right).
        case topToBottom(x: Double)
        case bottomToTop(x: Double)
        /// Appears at `enter`, centred at (`x`, `y`), and vanishes at `leave`.
        case still(x: Double, y: Double)
    }

    /// Time from the start of the schedule (of each period, for a repeating one).
    public var enter: Timestamp.Duration
    public var leave: Timestamp.Duration
    public var path: Path
    /// Size as fractions of the picture's width and height (0.15 × 0.25 is about 4% of the area).
    public var width: Double
    public var height: Double
    /// Mean luma of the object's checkered texture (the background is around 120).
    public var brightness: UInt8

    public init(
        enter: Timestamp.Duration, leave: Timestamp.Duration, path: Path,
        width: Double = 0.15, height: Double = 0.25, brightness: UInt8 = 210
    ) {
        self.enter = enter
        self.leave = leave
        self.path = path
        self.width = width
        self.height = height
        self.brightness = brightness
    }
}

/// A global step in brightness: from `start` until `end`, `delta` grey levels are added to
/// every luma sample (a light switched on, then off again).
public struct LightChange: Hashable, Sendable {
    public var start: Timestamp.Duration
    public var end: Timestamp.Duration
    public var delta: Int

    public init(start: Timestamp.Duration, end: Timestamp.Duration, delta: Int) {
        self.start = start
        self.end = end
        self.delta = delta
    }
}

/// What happens in the synthetic scene, and when: the ground truth detection tests use.
public struct SceneSchedule: Hashable, Sendable {
    public var objects: [SceneObject]
    public var lightChanges: [LightChange]
    /// When set, the schedule repeats with this period (every time in it must fall inside
    /// the period); nil: it happens once.
    public var period: Timestamp.Duration?

    public init(objects: [SceneObject] = [], lightChanges: [LightChange] = [], period: Timestamp.Duration? = nil) {
        self.objects = objects
        self.lightChanges = lightChanges
        self.period = period
    }

    /// Nothing happens: background and noise only.
    public static let empty = SceneSchedule()

    /// The demo: an event about every 20 seconds, repeating each minute — a bright object
    /// crossing left to right (5–9 s), a dark one crossing right to left (25–31 s), a parcel
    /// that appears and later vanishes (45–51 s) — and, with `lightChange`, a light switched
    /// on for 3 seconds in between (15–18 s, +40 grey levels), which is not motion.
    public static func demo(lightChange: Bool = true) -> SceneSchedule {
        let s = { (seconds: Double) in Timestamp.Duration(seconds: seconds) }
        return SceneSchedule(
            objects: [
                SceneObject(
                    enter: s(5), leave: s(9), path: .leftToRight(y: 0.6), width: 0.12, height: 0.3, brightness: 215),
                SceneObject(
                    enter: s(25), leave: s(31), path: .rightToLeft(y: 0.4), width: 0.2, height: 0.2, brightness: 35),
                SceneObject(
                    enter: s(45), leave: s(51), path: .still(x: 0.3, y: 0.75), width: 0.1, height: 0.12, brightness: 190
                ),
            ],
            lightChanges: lightChange ? [LightChange(start: s(15), end: s(18), delta: 40)] : [],
            period: s(60))
    }
}

/// One appearance of a scheduled object, in absolute capture time.
public struct ObjectAppearance: Hashable, Sendable {
    /// Index of the object in `SceneSchedule.objects`.
    public var object: Int
    /// When its first pixel enters the picture, and when its last pixel leaves.
    public var enter: Timestamp
    public var leave: Timestamp

    public init(object: Int, enter: Timestamp, leave: Timestamp) {
        self.object = object
        self.enter = enter
        self.leave = leave
    }
}

/// One light change, in absolute capture time.
public struct LightChangeInterval: Hashable, Sendable {
    public var start: Timestamp
    public var end: Timestamp
    public var delta: Int

    public init(start: Timestamp, end: Timestamp, delta: Int) {
        self.start = start
        self.end = end
        self.delta = delta
    }
}
