import Media
import MotionDetection
import Recorder

// The analysis loop: the detector and the event state machine run over a source, frame by
// frame, into a MotionAnalysis.

/// Detection only, over a whole source: the detector, the event state machine and the
/// analysis wired together, so that `vigil analyze` is a loop over frames.
///
///     var analyzer = MotionAnalyzer(settings: motion, eventSettings: events, mask: mask)
///     for frame in source { analyzer.process(frame.luma, at: frame.timestamp) }
///     let analysis = analyzer.finish()
///     analysis.eventLines.forEach { print($0) }; print(analysis.summaryLine)
public struct MotionAnalyzer: Sendable {
    public private(set) var detector: MotionDetector
    public private(set) var machine: EventStateMachine
    public private(set) var analysis: MotionAnalysis
    private var lastTime: Timestamp?

    public init(settings: MotionSettings, eventSettings: EventSettings, mask: MotionMask? = nil) {
        detector = MotionDetector(settings: settings, mask: mask)
        machine = EventStateMachine(settings: eventSettings)
        analysis = MotionAnalysis(settings: settings, eventSettings: eventSettings)
    }

    /// Analyses one frame (its luma plane and capture time) and returns the detector's
    /// result and the state machine's actions for it.
    @discardableResult
    public mutating func process(
        _ luma: PlaneView, at time: Timestamp
    ) -> (result: MotionResult, actions: [EventAction]) {
        let result = detector.process(luma, at: time)
        let actions = machine.handle(.frame(result))
        analysis.detectWidth = detector.detectWidth
        analysis.detectHeight = detector.detectHeight
        analysis.record(result, state: machine.state, actions: actions)
        lastTime = time
        return (result, actions)
    }

    /// Ends an open event at the last frame and returns the analysis.
    public mutating func finish() -> MotionAnalysis {
        if let lastTime {
            analysis.record(machine.handle(.finish(at: lastTime)))
        }
        return analysis
    }
}
