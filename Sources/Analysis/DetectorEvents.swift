import MotionDetection
import Recorder

// Where detection meets the event logic: a detector's result as the event state machine's
// input. Here because Recorder does not know the detector; the analysis and the agent's
// pipeline both feed the state machine this way.

extension EventInput {
    /// The verdict of a detector result.
    public static func frame(_ result: MotionResult) -> EventInput {
        .frame(time: result.time, motion: result.motion, score: result.score, motionStart: result.motionStart)
    }
}
