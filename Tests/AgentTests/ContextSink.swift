import AgentTestSupport
import Synchronization
import Testing

@testable import Agent

/// A sink that keeps the context the agent's run hands it (`EventSink.start`), opens the live
/// feed (as the web server does), holds an upload queue of its own (as the upload sink does),
/// and tells the other sinks of each clip saved (as the upload sink tells them of an upload).
/// What a sink may read and do comes to it that way, one `SinkContext` for every sink: nothing
/// is attached to the requests' `AgentControl` later.
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
            context.announce(.clipUploaded(Self.uploaded(saved.record.file)))
        }
    }

    var uploadCounts: UploadFigures { UploadFigures(waiting: 2, uploaded: 5, bytes: 7, failures: 1) }
    var uploadQueue: UploadQueueState { .reading }

    static func uploaded(_ file: String) -> ClipUploaded {
        ClipUploaded(
            file: file, path: file, camera: "yard", url: "s3://x/" + file, bytes: 1, seconds: 0.5, at: "", waiting: 0)
    }

    /// After a run of `frames` frames and `clips` clips on `harness`, with `control` its
    /// requests: the sink got its context before any event, with the agent's own requests,
    /// counters and live feed (the complete GOPs published into it: a keyframe a second), the
    /// upload queue of the sink that holds one, and the others heard what it announced — until
    /// the run was over.
    func expectTheRunsContext(
        _ harness: AgentHarness, control: AgentControl, frames: Int, gops: UInt64,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let context = try #require(context.withLock { $0 }, "no context", sourceLocation: sourceLocation)
        #expect(early.withLock { $0 } == 0, "events before the start", sourceLocation: sourceLocation)
        #expect(context.requests === control, sourceLocation: sourceLocation)
        let counters = context.counters
        #expect(
            counters.framesIn == frames && counters.clipsWritten == harness.clipFiles.count, "\(counters)",
            sourceLocation: sourceLocation)
        // Every GOP, one after the other, of one stream, numbered on from the wall clock's
        // quarter-seconds since 2024 at the start (past 3 × 10^8 by now, under 2^31 until 2041):
        // HLS's sequences never go back, and GStreamer reads them.
        let items = context.live.items
        let numbers = items.map(\.sequence)
        #expect(
            numbers.count == Int(gops) && zip(numbers, numbers.dropFirst()).allSatisfy { $1 == $0 + 1 }
                && (numbers.first ?? 0) > 300_000_000 && (numbers.last ?? .max) < UInt64(Int32.max)
                && items.allSatisfy { $0.stream == items[0].stream },
            "\(numbers)", sourceLocation: sourceLocation)
        #expect(
            context.uploadsIfRunning == UploadFigures(waiting: 2, uploaded: 5, bytes: 7, failures: 1),
            sourceLocation: sourceLocation)
        let uploaded = harness.events.all.compactMap { if case .clipUploaded(let u) = $0 { u.file } else { nil } }
        #expect(
            announced.withLock { $0 } == harness.clipFiles.count && uploaded == harness.clipFiles,
            sourceLocation: sourceLocation)
        // Once the run is over, nothing more reaches the sinks.
        context.announce(.clipUploaded(Self.uploaded("late.mov")))
        #expect(
            !harness.events.all.contains { if case .clipUploaded(let u) = $0 { u.file == "late.mov" } else { false } },
            sourceLocation: sourceLocation)
    }
}
