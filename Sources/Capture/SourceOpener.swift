import Media
internal import POSIX

/// A source, opened: what `vigil run`, `vigil analyze` and `vigil probe` get from `open`.
public struct OpenedSource {
    public var source: any FrameSource
    /// Frames come as the world makes them (a camera, the synthetic scene, a file paced in real
    /// time): a consumer that falls behind loses frames rather than slowing the source down.
    public var isLive: Bool
    /// What a camera agreed to, for the log; `.none` for other sources.
    public var negotiation: Negotiation = .none

    /// What the camera and the driver settled on.
    public enum Negotiation {
        /// Not a camera (the synthetic scene, a file).
        case none
        /// A V4L2 camera.
        case v4l2(CameraNegotiation)
        /// A libcamera camera.
        case libcamera(LibcameraNegotiation)
    }

    public init(source: any FrameSource, isLive: Bool, negotiation: Negotiation = .none) {
        self.source = source
        self.isLive = isLive
        self.negotiation = negotiation
    }
}

/// The one way a source is opened.
public enum SourceOpener {
    /// What the source is opened for.
    public enum Purpose: Sendable, Equatable {
        /// The agent: the synthetic scene stands in for a camera (in real time, stamped on the
        /// monotonic clock so sound lines up); a file is paced at its own rate when `realtime`.
        case recording(realtime: Bool)
        /// Detection only, as fast as it goes: two minutes of the synthetic scene; files and
        /// cameras as they come.
        case analysis
    }

    /// How long `analysis` runs the synthetic scene.
    public static let analysisSyntheticSeconds = 120.0

    /// Opens `specifier`, asking a camera for `width`×`height` at `fps` (the synthetic scene is
    /// made at that size and rate).
    public static func open(
        _ specifier: SourceSpecifier, width: Int, height: Int, fps: Double,
        purpose: Purpose
    ) throws(CaptureError) -> OpenedSource {
        switch specifier {
        case .synthetic:
            let scene: SyntheticScene
            let live: Bool
            switch purpose {
            case .recording:
                scene = SyntheticScene(
                    width: width, height: height, frameRate: Rational(framesPerSecond: fps), schedule: .demo(),
                    startTime: Clock.monotonic.now())
                live = true
            case .analysis:
                scene = SyntheticScene(
                    width: width, height: height, frameRate: Rational(framesPerSecond: fps), schedule: .demo(),
                    duration: .init(seconds: analysisSyntheticSeconds))
                live = false
            }
            return OpenedSource(source: try SyntheticSource(scene: scene, realtime: live), isLive: live)
        case .file(let path):
            let realtime = purpose == .recording(realtime: true)
            return OpenedSource(source: try Y4MSource(path: path, realtime: realtime), isLive: realtime)
        case .device(let path):
            let camera = try V4L2Camera(path: path, request: CameraRequest(width: width, height: height, fps: fps))
            return OpenedSource(source: camera, isLive: true, negotiation: .v4l2(camera.negotiation))
        case .libcamera(let id):
            let camera = try LibcameraSource(camera: id, request: CameraRequest(width: width, height: height, fps: fps))
            return OpenedSource(source: camera, isLive: true, negotiation: .libcamera(camera.negotiation))
        }
    }
}
