import Media
import MotionDetection
import Recorder

// The record of an analysis and its text outputs: the events as JSON lines, the summary line
// and the per-frame CSV (the SVG plot is MotionPlot.swift).

/// The outcome of running detection over a source (`vigil analyze`): the events found, a
/// summary, and the per-frame record as CSV and as an SVG plot.
///
/// Feed it every frame's detector result, the state machine's state after that frame and the
/// actions it returned, then the actions of the final `finish`. Times in the outputs are
/// seconds of source time from the first frame.
public struct MotionAnalysis: Sendable {
    /// One event: when motion began (the trigger), when the event ended (last motion +
    /// post-roll, or the end of the source), and its highest score.
    public struct Event: Sendable, Equatable {
        public var start: Double
        public var end: Double
        public var peak: Double
        /// When the detector confirmed the motion (`min_frames` after `start`).
        public var confirmed: Double
        /// How many parts (`max_clip`) the clip would have.
        public var parts: Int
    }

    /// What happened at one frame.
    public struct Frame: Sendable, Equatable {
        public var time: Double
        public var score: Float
        public var threshold: Float
        public var noise: Float
        public var pixelThreshold: Float
        public var state: EventStateMachine.State
        public var lightSwitch: Bool
        public var learning: Bool
        /// Fraction (0–1) of the watched picture the dynamic background auto-masked.
        public var autoMasked: Float = 0
    }

    public let settings: MotionSettings
    public let eventSettings: EventSettings
    /// The detector's reduced size, for the plot's labels (0 when unknown).
    public var detectWidth = 0
    public var detectHeight = 0
    public private(set) var frames: [Frame] = []
    public private(set) var events: [Event] = []
    /// Capture time of the first frame: time 0 of the outputs.
    public private(set) var origin: Timestamp?
    private var open: (start: Double, confirmed: Double)?

    public init(settings: MotionSettings, eventSettings: EventSettings) {
        self.settings = settings
        self.eventSettings = eventSettings
    }

    private mutating func seconds(_ t: Timestamp) -> Double {
        if origin == nil { origin = t }
        return (t - (origin ?? t)).seconds
    }

    /// Records one frame: its detector result, the state machine's state after it, and the
    /// actions the state machine returned for it.
    public mutating func record(_ result: MotionResult, state: EventStateMachine.State, actions: [EventAction]) {
        let time = seconds(result.time)
        record(actions)
        frames.append(
            Frame(
                time: time, score: Float(result.score), threshold: Float(result.threshold),
                noise: Float(result.noise), pixelThreshold: Float(result.pixelThreshold),
                state: state, lightSwitch: result.lightSwitch, learning: result.learning,
                autoMasked: Float(result.autoMasked)))
    }

    /// Records actions that came without a frame (those of `finish`).
    public mutating func record(_ actions: [EventAction]) {
        for action in actions {
            switch action {
            case let .start(trigger, confirmedAt, _):
                open = (seconds(trigger), seconds(confirmedAt))
            case .split:
                break
            case let .end(at, _, peakScore, parts):
                let end = seconds(at)
                let started = open ?? (end, end)
                events.append(
                    Event(start: started.start, end: end, peak: peakScore, confirmed: started.confirmed, parts: parts))
                open = nil
            }
        }
    }

    // MARK: - Text outputs

    /// `{"start": 8.03, "end": 12.40, "peak": 0.061}`: times with two decimals, the peak score
    /// (fraction of the watched picture) with three significant digits.
    public static func jsonLine(_ event: Event) -> String {
        "{\"start\": \(JSONNumber.fixed(event.start, 2)), \"end\": \(JSONNumber.fixed(event.end, 2)), "
            + "\"peak\": \(JSONNumber.significant(event.peak, 3))}"
    }

    /// One JSON line per event, in order.
    public var eventLines: [String] { events.map(Self.jsonLine) }

    /// Frames that count for the noise figures: not learning, not a light switch.
    private var steadyFrames: [Frame] { frames.filter { !$0.learning && !$0.lightSwitch } }

    /// The median noise (grey levels at the reduced size) over the steady frames.
    public var medianNoise: Double { Self.quantile(steadyFrames.map { Double($0.noise) }, 0.5) }
    /// The median pixel threshold over the steady frames.
    public var medianPixelThreshold: Double { Self.quantile(steadyFrames.map { Double($0.pixelThreshold) }, 0.5) }
    /// The 99th percentile of the score over the steady frames outside events: how high the
    /// score goes with nothing happening. The threshold should sit well above it.
    public var idleScore99: Double {
        Self.quantile(steadyFrames.filter { $0.state == .idle }.map { Double($0.score) }, 0.99)
    }

    /// The median share of the watched picture the dynamic background auto-masked, over the
    /// steady frames.
    public var medianAutoMasked: Double { Self.quantile(steadyFrames.map { Double($0.autoMasked) }, 0.5) }

    /// Seconds from the first frame to the last.
    public var duration: Double { frames.last?.time ?? 0 }

    /// A JSON summary: `{"frames": 300, "duration": 19.93, "events": 2, "noise": 0.52,
    /// "pixel_threshold": 2.1, "threshold": 0.005, "idle_score_p99": 0, "max_score": 0.061,
    /// "light_switches": 0, "auto_masked": 0.12, "detect_width": 160, "detect_height": 120}`.
    /// `noise` and `pixel_threshold` are medians over the frames, in grey levels at the
    /// reduced size; `auto_masked` the median share of the watched picture the dynamic
    /// background masked; `max_score` leaves out light-switch frames.
    public var summaryLine: String {
        let maxScore = frames.reduce(0) { $1.lightSwitch ? $0 : max($0, Double($1.score)) }
        let lightSwitches = frames.filter(\.lightSwitch).count
        return "{\"frames\": \(frames.count), \"duration\": \(JSONNumber.fixed(duration, 2)), "
            + "\"events\": \(events.count), \"noise\": \(JSONNumber.fixed(medianNoise, 2)), "
            + "\"pixel_threshold\": \(JSONNumber.fixed(medianPixelThreshold, 2)), "
            + "\"threshold\": \(JSONNumber.significant(settings.threshold, 3)), "
            + "\"idle_score_p99\": \(JSONNumber.significant(idleScore99, 3)), "
            + "\"max_score\": \(JSONNumber.significant(maxScore, 3)), "
            + "\"light_switches\": \(lightSwitches), "
            + "\"auto_masked\": \(JSONNumber.significant(medianAutoMasked, 3)), "
            + "\"detect_width\": \(detectWidth), \"detect_height\": \(detectHeight)}"
    }

    public static let csvHeader = "time,score,threshold,state,auto_masked"

    /// `0.533,0.012345,0.005,motion,0.25`: seconds (3 decimals), score and threshold
    /// (fractions, 6 decimals at most), state (`idle`, `motion`, `post_roll`, or
    /// `light_switch` on a frame where the detector re-learned the background, `learning`
    /// while it settles), and the share of the watched picture the dynamic background
    /// auto-masked (4 decimals at most).
    public static func csvRow(_ frame: Frame) -> String {
        DecimalText.fixed(frame.time, 3) + "," + DecimalText.short(Double(frame.score), 6) + ","
            + DecimalText.short(Double(frame.threshold), 6) + "," + stateName(frame) + ","
            + DecimalText.short(Double(frame.autoMasked), 4)
    }

    static func stateName(_ frame: Frame) -> String {
        switch frame.state {
        case .motion: return "motion"
        case .postRoll: return "post_roll"
        case .idle: return frame.lightSwitch ? "light_switch" : (frame.learning ? "learning" : "idle")
        }
    }

    /// The CSV text: the header and one row per frame, each line ending in a newline.
    public var csv: String {
        var text = Self.csvHeader + "\n"
        text.reserveCapacity(frames.count * 32)
        for frame in frames {
            text += Self.csvRow(frame)
            text += "\n"
        }
        return text
    }

    static func quantile(_ values: [Double], _ q: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let index = min(sorted.count - 1, max(0, Int((q * Double(sorted.count - 1)).rounded())))
        return sorted[index]
    }
}

/// Numbers for the JSON lines, as `DecimalText` writes them, except that a value that is not
/// finite (which JSON cannot hold, and `DecimalText` writes as "nan" or "inf") is written as 0.
enum JSONNumber {
    static func fixed(_ value: Double, _ decimals: Int) -> String {
        DecimalText.fixed(value.isFinite ? value : 0, decimals)
    }

    static func significant(_ value: Double, _ digits: Int) -> String {
        DecimalText.significant(value.isFinite ? value : 0, digits)
    }
}
