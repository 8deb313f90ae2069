import Media
internal import POSIX

/// A camera's running stream (`V4L2Stream`, `LibcameraStream`).
protocol CameraStream: AnyObject {
    /// Stops it and lets go of its buffers.
    func stop()
}

/// A camera whose frames come from a stream that any failure ends (`V4L2Camera`,
/// `LibcameraSource`): the stream is stopped and let go of, and the camera must be opened
/// again (the agent's capture thread does, as `Retry` says).
protocol StreamingCamera: AnyObject {
    associatedtype Stream: CameraStream
    var name: String { get }
    /// Nil once a failure ended it.
    var stream: Stream? { get set }
    /// The next frame from the running stream; throws what ends it.
    func nextFrame(from stream: Stream) throws(CaptureError) -> VideoFrame
    /// How long `nextFrame()` waits for a frame before it gives up on the stream.
    var stallTimeout: Timestamp.Duration { get }
    /// The same for the first frame (sensors take a moment to start).
    var firstFrameTimeout: Timestamp.Duration { get }
    /// Frames delivered so far.
    var delivered: Int { get }
}

extension StreamingCamera {
    /// `stallTimeout`: `asked`, or else five frame intervals (`fiveFrames`) and at least 2 s;
    /// `firstFrameTimeout`: that, and at least 5 s.
    static func frameTimeouts(
        asked: Timestamp.Duration?, fiveFrames: Timestamp.Duration
    ) -> (stall: Timestamp.Duration, firstFrame: Timestamp.Duration) {
        let stall = asked ?? max(Timestamp.Duration(seconds: 2), fiveFrames)
        return (stall, max(stall, Timestamp.Duration(seconds: 5)))
    }

    /// How long to wait for the next frame (`firstFrameTimeout` until one came, then
    /// `stallTimeout`), and when that wait ends on the monotonic clock.
    func frameWait() -> (wait: Timestamp.Duration, deadline: Timestamp) {
        let wait = delivered == 0 ? firstFrameTimeout : stallTimeout
        return (wait, Clock.monotonic.now() + wait)
    }

    /// `FrameSource.nextFrame` for a camera: the stream's next frame, or its failure, after
    /// which the stream is gone.
    func nextFrameEndingTheStreamOnFailure() throws(CaptureError) -> VideoFrame? {
        guard let stream else {
            throw CaptureError.deviceLost(source: name, reason: "the stream already failed; open the camera again")
        }
        do {
            return try nextFrame(from: stream)
        } catch {
            stream.stop()
            self.stream = nil
            throw error
        }
    }
}

extension V4L2Camera: StreamingCamera {}
extension LibcameraSource: StreamingCamera {}
