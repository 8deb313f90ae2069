import AgentTestSupport
import Foundation
import Media
import TestSupport
import Testing

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

/// The agent started on `storage`, its wall clock now, run to the end of two seconds of an
/// empty scene: what the tests of what it does at start (repairs, the journal, retention) run,
/// once or again.
func runAtStart(
    on storage: MemoryStorage, config: String = testConfig(), sourceLocation: SourceLocation = #_sourceLocation
) throws -> EmbeddedAgent {
    let now = Date()
    let agent = try EmbeddedAgent(
        config: config, storage: storage,
        openSource: { _ throws(CaptureError) in try synthetic(scene(seconds: 2, objects: [])) },
        wall: { now.addingTimeInterval($0.seconds) })
    #expect(agent.runToTheEnd() == .stopped, "\(agent.output)", sourceLocation: sourceLocation)
    return agent
}
