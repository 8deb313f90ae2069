import AgentTestSupport
import Capture
import Foundation
import Media
import Recorder
import Synchronization
import TestSupport
import Testing

@testable import Agent

/// What a sink may read and do comes to it when the agent's run starts (`EventSink.start`),
/// one `SinkContext` for every sink: nothing is attached to the requests' `AgentControl` later.
@Suite(.serialized) struct SinkContextTests {
    /// A sink that keeps its context, opens the live feed (as the web server does), holds an
    /// upload queue of its own (as the upload sink does), and tells the others of each clip saved.
    final class ContextSink: EventSink, UploadStatus {
        let context = Mutex<SinkContext?>(nil)
        /// Events it was handed before its start (none, by the promise).
        let early = Mutex(0)
        let announced = Mutex(0)

        func start(_ context: SinkContext) {
            context.live.open()
            self.context.withLock { $0 = context }
        }

        func handle(_ event: AgentEvent) {
            guard let context = context.withLock({ $0 }) else {
                early.withLock { $0 += 1 }
                return
            }
            if case .clipSaved(let saved) = event {
                announced.withLock { $0 += 1 }
                context.announce(
                    .clipUploaded(
                        ClipUploaded(
                            file: saved.record.file, path: saved.path, camera: "yard", url: "s3://x/y", bytes: 1,
                            seconds: 0.5, at: saved.record.end, waiting: 0)))
            }
        }

        var uploadCounts: UploadFigures { UploadFigures(waiting: 2, uploaded: 5, bytes: 7, failures: 1) }
        var uploadQueue: UploadQueueState { .reading }
    }

    /// An 8 s scene with one crossing, to its end: the sink got its context before any event,
    /// with the agent's own requests, counters and live feed (the complete GOPs published
    /// into it), the upload queue of the sink that holds one, and the others heard what it
    /// announced.
    @Test func everySinkGetsTheRunsContextBeforeAnyEvent() throws {
        let sink = ContextSink()
        let control = AgentControl()
        let harness = try AgentHarness(
            config: testConfig(),
            openSource: { _ throws(CaptureError) in try synthetic(scene(seconds: 8, objects: [crossing(2, 5)])) },
            control: control, sinks: { _, _, _ in [sink] })
        #expect(harness.runToTheEnd() == .stopped, "\(harness.output)")

        let context = try #require(sink.context.withLock { $0 }, "no context")
        #expect(sink.early.withLock { $0 } == 0, "events before the start")
        #expect(context.requests === control)
        #expect(context.counters.framesIn == 120 && context.counters.clipsWritten == 1, "\(context.counters)")
        // A keyframe a second: 7 complete GOPs of the one stream, the newest kept.
        let items = context.live.items
        #expect(items.last?.sequence == 7 && items.allSatisfy { $0.stream == 1 }, "\(items.map(\.sequence))")
        #expect(context.uploadsIfRunning == UploadFigures(waiting: 2, uploaded: 5, bytes: 7, failures: 1))
        // Announced from a sink to the others: the journal, the hooks, the test's recorder.
        #expect(sink.announced.withLock { $0 } == 1)
        let uploaded = harness.events.all.compactMap { if case .clipUploaded(let u) = $0 { u } else { nil } }
        #expect(uploaded.map(\.file) == harness.clipFiles)
        // Once the run is over, nothing more reaches the sinks.
        context.announce(
            .clipUploaded(
                ClipUploaded(
                    file: "late.mov", path: "late.mov", camera: "yard", url: "s3://x/late.mov", bytes: 1, seconds: 1,
                    at: "", waiting: 0)))
        #expect(
            harness.events.all.count { if case .clipUploaded(let u) = $0 { u.file == "late.mov" } else { false } } == 0)
    }
}
