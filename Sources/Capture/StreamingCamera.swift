import Media

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
}

extension StreamingCamera {
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
