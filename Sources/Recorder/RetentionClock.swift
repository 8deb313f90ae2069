import FoundationEssentials
import Media

/// A forward step of the wall clock the agent saw while it ran: what the clock would have read
/// had it not been set (`from`), and what it read once set (`to`).
public struct ClockStep: Equatable, Sendable {
    public var from: Date
    public var to: Date

    public init(from: Date, to: Date) {
        self.from = from
        self.to = to
    }

    /// How far it went.
    public var seconds: Double { to.timeIntervalSince(from) }

    /// The date a clip's age counts from after this step, given the one before: a clip dated
    /// by the clock before it was set (at or before `from`) is as old after the step as it
    /// was before it; one dated between the two readings (later than the clock said, earlier
    /// than it says now) ages from the step.
    func shift(_ date: Date) -> Date {
        if date <= from { return date.addingTimeInterval(seconds) }
        return date < to ? to : date
    }
}

/// Watches the wall clock against the monotonic clock (which no one sets): a jump forward of
/// more than `tolerance` between two looks is a step. A step back is not one here: it makes
/// clips look younger, never older.
public struct ClockWatch: Sendable, Equatable {
    /// Smaller jumps are the clock being disciplined, or scheduling: nothing retention minds.
    public static let tolerance = 60.0
    private var last: (wall: Date, monotonic: Timestamp)?

    public init() {}

    public static func == (a: ClockWatch, b: ClockWatch) -> Bool {
        a.last?.wall == b.last?.wall && a.last?.monotonic == b.last?.monotonic
    }

    /// The clocks read `wall` and `monotonic` now: the step since the last look, if any.
    public mutating func look(wall: Date, monotonic: Timestamp) -> ClockStep? {
        defer { last = (wall, monotonic) }
        guard let last else { return nil }
        let expected = last.wall.addingTimeInterval((monotonic - last.monotonic).seconds)
        guard wall.timeIntervalSince(expected) > ClockWatch.tolerance else { return nil }
        return ClockStep(from: expected, to: wall)
    }
}

/// When each clip's age counts from, for `storage.max_age_days`, when the wall clock was wrong
/// (a value: the clip writer keeps it, retention decides with it):
///
/// - A clip ages from when it was recorded, as its journal line says (`start`; the file's
///   time when it has no line), or from the date its line was given (`aged_from`) when the
///   clock was found wrong.
/// - A clip dated before `earliestPlausibleDate` (a board without a clock battery boots in
///   1970) or after now (the clock was ahead, then set back) was dated by a wrong clock: it
///   ages from now, the first time retention sees it with a plausible clock.
/// - A forward step of the clock the agent saw while it ran (NTP setting a board that booted
///   at a stale time, or a clock stepped far into the future) changes no clip's age: a clip
///   dated before it is as old after the step as it was before (`ClockStep.shift`), and goes
///   on ageing as real time passes. Clips recorded with the stale clock are then aged from
///   about when they were recorded; a clip is kept longer than it would have been, never
///   deleted sooner.
/// - While the clock reads before `earliestPlausibleDate`, no clip is deleted by age.
///
/// Every date decided so is written into the clip's journal line (`aged_from`), so a restart
/// does not forget it.
public struct RetentionClock: Sendable, Equatable {
    /// No clip of this Vigil was recorded before this (2026-01-01T00:00:00Z): a clock that
    /// says earlier is wrong.
    public static let earliestPlausibleDate = Date(timeIntervalSince1970: 1_767_225_600)
    /// How far past now a clip may be dated before its date is taken for a wrong clock's.
    public static let futureTolerance = 60.0

    /// Forward steps of the wall clock seen while the agent ran, oldest first.
    public private(set) var steps: [ClockStep] = []
    /// Per clip, the date it ages from as decided, and how many of `steps` that takes in.
    private var decided: [String: (date: Date, steps: Int)] = [:]

    public init() {}

    public static func == (a: RetentionClock, b: RetentionClock) -> Bool {
        a.steps == b.steps && a.decided.mapValues(\.date) == b.decided.mapValues(\.date)
            && a.decided.mapValues(\.steps) == b.decided.mapValues(\.steps)
    }

    /// The wall clock stepped forward.
    public mutating func stepped(_ step: ClockStep) { steps.append(step) }

    /// Whether `now` can be the date: not before `earliestPlausibleDate`.
    public static func isPlausible(_ now: Date) -> Bool { now >= earliestPlausibleDate }

    /// The date `clip` ages from at `now` (plausible), remembered for the next time.
    mutating func agedFrom(_ clip: StoredFile, now: Date) -> Date {
        let recorded = clip.agedFrom ?? clip.recorded ?? clip.modified
        var (date, done) = decided[clip.relativePath] ?? (recorded, 0)
        for step in steps[done...] { date = step.shift(date) }
        if date < RetentionClock.earliestPlausibleDate || date > now.addingTimeInterval(RetentionClock.futureTolerance)
        {
            date = now
        }
        decided[clip.relativePath] = (date, steps.count)
        return date
    }

    /// Forgets the clips that are gone.
    mutating func keep(only paths: Set<String>) {
        decided = decided.filter { paths.contains($0.key) }
    }
}
