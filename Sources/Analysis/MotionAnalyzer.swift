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

    /// The dynamic background's auto-mask over the last frame, as a binary PGM (P5) at the
    /// detector's reduced size: the picture as it is where watched, at a third of its
    /// brightness where auto-masked, black where the configured mask ignores it. Nil before
    /// the first frame.
    public func maskImage() -> [UInt8]? {
        let width = detector.detectWidth
        let height = detector.detectHeight
        let picture = detector.reducedPicture
        let autoMask = detector.autoMaskMap
        let watch = detector.watchMap
        let n = width * height
        guard n > 0, picture.count == n, autoMask.count == n, watch.count == n else { return nil }
        var bytes = Array("P5\n\(width) \(height)\n255\n".utf8)
        bytes.reserveCapacity(bytes.count + n)
        for i in 0..<n {
            let level = min(max(picture[i], 0), 255)
            let shown = watch[i] == 0 ? 0 : (autoMask[i] != 0 ? level / 3 : level)
            bytes.append(UInt8(shown.rounded()))
        }
        return bytes
    }
}
