import Media

@testable import Capture

/// `source` as the test's environment opens it: not live, so it is read as fast as the agent
/// takes its frames (`OpenedSource` has no public initialiser: Capture is imported `@testable`).
func opened(_ source: any FrameSource) -> OpenedSource {
    OpenedSource(source: source, isLive: false)
}

/// Opens `scene` as a synthetic source, read as fast as the agent takes its frames.
func synthetic(_ scene: SyntheticScene) throws(CaptureError) -> OpenedSource {
    opened(try SyntheticSource(scene: scene))
}
