import Foundation
import TestSupport
import Testing

/// Clip times say when things happened in front of the camera, not when the pipeline got to
/// them: with a live source (here the synthetic camera) the wall-clock time of a frame comes
/// from its capture timestamp.
@Suite struct CaptureTimeTests {
    /// The motion was confirmed by a frame captured no later than the line that logs it.
    @Test func triggerTimesAreCaptureTimes() throws {
        let dir = try TemporaryDirectory("vigil-clock")
        defer { dir.remove() }
        let config = try AgentTests.syntheticConfig(
            dir, width: 640, height: 480, extra: "recording = { pre_roll = 1.0; post_roll = 1.0; };")
        let agent = try AgentProcess(config: config)
        let started = agent.waitUntil(timeout: 60) { !movieFiles(in: dir.file("clips")).isEmpty }
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 30) == 0, "\(agent.output)")
        #expect(started, "\(agent.output)")
        let lines = agent.output.split(separator: "\n").map(String.init)
        let motion = try #require(lines.first { $0.contains("msg=\"motion started\"") }, "\(agent.output)")
        let clip = try #require(lines.first { $0.contains("msg=\"clip started\"") }, "\(agent.output)")
        let logged = try #require(
            ISO8601DateFormatter.fractional.date(from: String(motion.dropFirst(3).prefix { $0 != " " })))
        let trigger = try #require(logValue(clip, "trigger").flatMap { ISO8601DateFormatter.fractional.date(from: $0) })
        let triggerSeconds = try #require(logValue(motion, "trigger").flatMap(Double.init))
        let confirmedSeconds = try #require(logValue(motion, "confirmed").flatMap(Double.init))
        let confirmed = trigger.addingTimeInterval(confirmedSeconds - triggerSeconds)
        // Log times are whole milliseconds.
        #expect(
            confirmed.timeIntervalSince(logged) <= 0.001,
            "the confirming frame is dated \(confirmed), after the line logging it (\(logged))")
    }
}
