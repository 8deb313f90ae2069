import Capture
import Foundation
import Media
import QuickTime
import Storage
import TestSupport
import Testing

/// A source that stops or fails in the middle of an event. The frames come through a named
/// pipe the test feeds (as they would from `ffmpeg … -f yuv4mpegpipe` reading a network
/// camera), so the test decides where the stream breaks.
///
/// What each kind of source does: a `file:` source that ends or turns out malformed ends the
/// run once the open clip is closed (0 at a clean end, 65 for bad data: systemd's restart
/// policy decides what follows); one that stalls keeps the agent up, and the open clip is
/// closed after `stall` seconds without a frame and a new one starts when frames come back.
/// Cameras (`/dev/video*`) are reopened with backoff; that path is tested with real drivers
/// in the VM harness.
@Suite(.serialized) struct SourceFailureTests {
    /// Something crosses from 1 s to 6 s: the event is open from 1 s to 7 s (post_roll 1 s).
    static func feeder(in dir: TemporaryDirectory, seconds: Double = 12) throws -> FifoFeeder {
        try FifoFeeder(path: dir.file("camera.y4m"), scene: scene(seconds: seconds, objects: [crossing(1, 6)]))
    }

    /// An agent reading frames the test feeds it through a pipe (`feeder`), fed the scene up to
    /// 3.5 s: inside the event, with a clip open.
    static func agentInsideAnEvent(
        _ dir: TemporaryDirectory, recording: String = "pre_roll = 1.0; post_roll = 1.0;"
    ) throws -> (feeder: FifoFeeder, storage: String, agent: AgentProcess) {
        let feeder = try Self.feeder(in: dir)
        let storage = dir.file("clips")
        let agent = try AgentProcess(
            config: writeConfig(dir.file("vigil.conf"), footage: feeder.path, storage: storage, recording: recording))
        try feeder.open()
        try feeder.feed(until: 3.5)
        return (feeder, storage, agent)
    }

    /// The clip the agent started is a complete movie that plays, with `frames` frames.
    static func expectClosedClip(
        _ output: String, in storage: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Int {
        let started = logLines(output, "clip started")
        #expect(started.count == 1, "\(output)", sourceLocation: sourceLocation)
        guard let file = started.first.flatMap({ logValue($0, "file") }) else { return 0 }
        let saved = logLines(output, "clip saved").filter { logValue($0, "file") == file }
        #expect(saved.count == 1, "the clip was not closed:\n\(output)", sourceLocation: sourceLocation)
        let path = storage + "/" + file
        #expect(
            (try? MovieRepair.inspect(path: path)) == .complete, "\(file) is not a complete movie",
            sourceLocation: sourceLocation)
        let probe = try expectPlayable(path, sourceLocation: sourceLocation)
        let frames = Int(probe?.video?["nb_frames"] ?? "") ?? 0
        #expect(saved.first.flatMap { logValue($0, "frames") } == String(frames), sourceLocation: sourceLocation)
        return frames
    }

    @Test func aStreamThatEndsMidEventClosesTheClipAndEndsTheRun() throws {
        let dir = try TemporaryDirectory("vigil-faults-source")
        defer { dir.remove() }
        let (feeder, storage, agent) = try Self.agentInsideAnEvent(dir)
        feeder.close()
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(agent.output.contains("msg=\"end of source\""))
        let frames = try Self.expectClosedClip(agent.output, in: storage)
        #expect(frames == 53, "the clip should hold every frame from 0 s to 3.5 s")
        #expect(logLines(agent.output, "clip saved").first.flatMap { logValue($0, "reason") } == "stopped")
    }

    @Test(arguments: ["inside a frame", "inside a marker", "with a broken marker"])
    func aStreamThatBreaksMidEventClosesTheClipAndSaysWhere(_ how: String) throws {
        let dir = try TemporaryDirectory("vigil-faults-source")
        defer { dir.remove() }
        let (feeder, storage, agent) = try Self.agentInsideAnEvent(dir)
        switch how {
        case "inside a frame":
            try feeder.writeRaw(Array("FRAME\n".utf8) + [UInt8](repeating: 128, count: feeder.frameBytes / 3))
        case "inside a marker": try feeder.writeRaw(Array("FRA".utf8))
        default: try feeder.writeRaw(Array("FRAMX\n".utf8) + [UInt8](repeating: 128, count: feeder.frameBytes))
        }
        feeder.close()
        let status = agent.waitForExit(timeout: 60)
        let output = agent.output
        #expect(status == 65, "\(output)")
        // The error names the source and the frame (the 54th), once.
        let failed = logLines(output, "reading the source failed")
        #expect(failed.count == 1, "\(output)")
        let error = failed.first.flatMap { logValue($0, "error") } ?? ""
        #expect(error.hasPrefix("file:\(feeder.path): ") && error.contains("frame 54"), "\(error)")
        let frames = try Self.expectClosedClip(output, in: storage)
        #expect(frames == 53)
    }

    /// The pipe stays open and nothing comes: the clip is closed after the stall, the agent
    /// stays up, records the next event when frames come back, and a SIGTERM during a stall
    /// still ends it cleanly.
    @Test func aStreamThatStallsClosesTheClipAndRecordsAgainWhenFramesReturn() throws {
        let dir = try TemporaryDirectory("vigil-faults-source")
        defer { dir.remove() }
        let feeder = try FifoFeeder(
            path: dir.file("camera.y4m"), scene: scene(seconds: 30, objects: [crossing(1, 3.2), crossing(16, 18)]))
        let storage = dir.file("clips")
        let agent = try AgentProcess(
            config: writeConfig(dir.file("vigil.conf"), footage: feeder.path, storage: storage))
        try feeder.open()
        // The event is still open (its post-roll runs to 4.2 s) when the frames stop at 3.5 s.
        try feeder.feed(until: 3.5)
        // The writer finishes the clip just after the pipeline gives up on the source (and says so).
        #expect(agent.waitUntil(timeout: 90) { journalRecords(in: storage).count == 1 }, "\(agent.output)")
        let stalled = logLines(agent.output, "the source delivered nothing").first
        #expect(stalled.flatMap { logValue($0, "closing_clip") } == "true", "\(agent.output)")
        #expect(agent.isRunning)
        // Frames again: a second event, then a stall, and SIGTERM while nothing comes.
        try feeder.feed(until: 20)
        #expect(agent.waitUntil(timeout: 120) { journalRecords(in: storage).count == 2 }, "\(agent.output)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 20) == 0, "\(agent.output)")
        feeder.close()
        #expect(!logLines(agent.output, "frames again").isEmpty, "\(agent.output)")
        let saved = logLines(agent.output, "clip saved")
        #expect(saved.count == 2)
        for line in saved {
            let path = storage + "/" + (logValue(line, "file") ?? "")
            #expect((try? MovieRepair.inspect(path: path)) == .complete)
            try expectPlayable(path)
        }
    }

    /// SIGTERM while the source is stuck inside a read (the pipe open, nothing coming): the
    /// agent still finishes the open clip and exits within seconds.
    @Test func sigtermDuringAStuckReadFinishesTheClip() throws {
        let dir = try TemporaryDirectory("vigil-faults-source")
        defer { dir.remove() }
        let (feeder, storage, agent) = try Self.agentInsideAnEvent(dir, recording: "pre_roll = 1.0; post_roll = 30.0;")
        #expect(agent.waitUntil(timeout: 60) { !movieFiles(in: storage).isEmpty }, "\(agent.output)")
        usleep(500_000)  // the frames fed are through the pipeline; the next read waits
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 20) == 0, "\(agent.output)")
        feeder.close()
        let frames = try Self.expectClosedClip(agent.output, in: storage)
        #expect(frames == 53)
    }
}
