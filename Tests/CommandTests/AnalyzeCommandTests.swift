import Capture
import Foundation
import Media
import TestSupport
import Testing

@Suite struct AnalyzeCommandTests {
    /// Two objects and a light switch in a Y4M file: two events, at the right times.
    @Test func findsTheEventsOfAFileAndWritesCSVAndPlot() throws {
        let dir = try TemporaryDirectory("vigil-analyze")
        defer { dir.remove() }
        let scene = AgentTests.scene(
            seconds: 20, objects: [AgentTests.object(3, 6), AgentTests.object(12, 14, .rightToLeft(y: 0.3))],
            lights: [LightChange(start: .init(seconds: 8), end: .init(seconds: 10), delta: 45)])
        let footage = try AgentTests.footage(scene, in: dir)
        let config = dir.file("vigil.conf")
        try "recording = { post_roll = 2.0; };\n".write(toFile: config, atomically: true, encoding: .utf8)
        let r = try runTool(
            builtExecutable("vigil"),
            [
                "analyze", "--config", config, "--source", "file:" + footage,
                "--csv", dir.file("scores.csv"), "--plot", dir.file("scores.svg"),
            ])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(r.stdout)")
        guard lines.count == 3 else { return }
        let events = try lines.prefix(2).map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Double] ?? [:]
        }
        for (event, (enter, leave)) in zip(events, [(3.0, 6.0), (12.0, 14.0)]) {
            let start = try #require(event["start"]), end = try #require(event["end"])
            #expect(
                start >= enter - 0.01 && start <= enter + 0.25, "event starts at \(start), object enters at \(enter)")
            #expect(end >= leave + 2 - 0.1 && end <= leave + 2.5, "event ends at \(end), object leaves at \(leave)")
            #expect((event["peak"] ?? 0) > 0.005)
        }
        let summary = try JSONSerialization.jsonObject(with: Data(lines[2].utf8)) as? [String: Any]
        #expect(summary?["events"] as? Int == 2)
        #expect(summary?["frames"] as? Int == 300)
        #expect((summary?["light_switches"] as? Int ?? 0) >= 1)

        let csv = try String(contentsOfFile: dir.file("scores.csv"), encoding: .utf8).split(separator: "\n")
        #expect(csv.first == "time,score,threshold,state,auto_masked")
        #expect(csv.count == 301)
        let svg = try String(contentsOfFile: dir.file("scores.svg"), encoding: .utf8)
        #expect(svg.hasPrefix("<svg") || svg.hasPrefix("<?xml"))
        #expect(svg.contains("</svg>"))
    }

    @Test func badSourcesAndUsageAreReported() throws {
        let dir = try TemporaryDirectory("vigil-analyze")
        defer { dir.remove() }
        let config = dir.file("vigil.conf")
        try "motion = { threshold = 0.005; };\n".write(toFile: config, atomically: true, encoding: .utf8)
        let missing = try runTool(
            builtExecutable("vigil"), ["analyze", "--config", config, "--source", "file:" + dir.file("none.y4m")])
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("none.y4m"))
        let noSource = try runTool(builtExecutable("vigil"), ["analyze", "--config", config])
        #expect(noSource.status == 64)
        #expect(noSource.stderr.contains("--source is required"))
        // A file cut short: the events before it are printed, then the error, exit 65.
        let scene = AgentTests.scene(seconds: 6, objects: [AgentTests.object(1, 2)])
        let footage = try AgentTests.footage(scene, in: dir)
        let data = try Data(contentsOf: URL(fileURLWithPath: footage))
        try data.prefix(data.count - 1000).write(to: URL(fileURLWithPath: footage))
        let cut = try runTool(builtExecutable("vigil"), ["analyze", "--config", config, "--source", "file:" + footage])
        #expect(cut.status == 65)
        #expect(cut.stderr.contains("ends inside frame 90"), "\(cut.stderr)")
        #expect(cut.stdout.contains("\"events\": 1"))
    }
}
