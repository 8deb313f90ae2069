import Configuration
import Foundation
import Media
import MotionDetection
import Recorder
import TestSupport
import Testing

@testable import Analysis

#if canImport(FoundationXML)
import FoundationXML
#endif

@Suite struct AnalysisTests {
    /// An analysis built from chosen results: motion from 8.03 s to 10.40 s (post-roll 2 s).
    static func sample(frames: Int = 200, fps: Double = 15, start: Double = 100) throws -> MotionAnalysis {
        var settings = try Settings.defaults().motion
        settings.threshold = 0.005
        let events = EventSettings(postRoll: .s(2), maxClip: .s(300))
        var machine = EventStateMachine(settings: events)
        var analysis = MotionAnalysis(settings: settings, eventSettings: events)
        analysis.detectWidth = 160
        analysis.detectHeight = 120
        var last = Timestamp.zero
        for i in 0..<frames {
            let t = Double(i) / fps
            let time = Timestamp.s(start + t)
            let moving = t >= 8.0 && t < 10.4
            let score = moving ? 0.02 + 0.041 * (t - 8) / 2.4 : 0.0001 * Double(i % 3)
            var result = MotionResult(
                time: time, score: score, threshold: 0.005, motion: moving && t >= 8.06,
                motionStart: moving ? .s(start + 8.0 + 1 / fps * 0.45) : nil, noise: 0.5 + 0.01 * Double(i % 5),
                pixelThreshold: 2.1, globalChange: 0, lightSwitch: i == 30, learning: i == 0 || i == 30)
            // The dynamic background masks a quarter of the picture from frame 100 on.
            result.autoMasked = i >= 100 ? 0.25 : 0
            let actions = machine.handle(.frame(result))
            analysis.record(result, state: machine.state, actions: actions)
            last = time
        }
        analysis.record(machine.handle(.finish(at: last)))
        return analysis
    }

    @Test func eventLinesAreJSON() throws {
        let analysis = try Self.sample()
        #expect(analysis.events.count == 1)
        // Motion frames from 8.067 to 10.333 s (trigger 8.03), post-roll 2 s.
        #expect(analysis.eventLines == ["{\"start\": 8.03, \"end\": 12.33, \"peak\": 0.0599}"])
        for line in analysis.eventLines + [analysis.summaryLine] {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object != nil, "\(line)")
        }
    }

    @Test func summaryLine() throws {
        let analysis = try Self.sample()
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(analysis.summaryLine.utf8)) as? [String: Any])
        #expect(object["frames"] as? Int == 200)
        #expect((object["duration"] as? Double).map { abs($0 - 13.27) < 0.001 } == true)
        #expect(object["events"] as? Int == 1)
        #expect(object["threshold"] as? Double == 0.005)
        #expect(object["light_switches"] as? Int == 1)
        #expect(object["detect_width"] as? Int == 160)
        #expect((object["noise"] as? Double).map { abs($0 - 0.52) < 0.011 } == true)
        #expect(object["pixel_threshold"] as? Double == 2.1)
        #expect(object["idle_score_p99"] as? Double == 0.0002)
        #expect(object["auto_masked"] as? Double == 0.25)
    }

    @Test func csv() throws {
        let analysis = try Self.sample()
        let lines = analysis.csv.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first == "time,score,threshold,state,auto_masked")
        #expect(lines.count == 200 + 2)  // header, rows, and the empty string after the last newline
        #expect(lines.last == "")
        #expect(lines[1] == "0.000,0,0.005,learning,0")
        #expect(lines[2] == "0.067,0.0001,0.005,idle,0")
        #expect(lines[31] == "2.000,0,0.005,light_switch,0")
        #expect(lines[130].hasSuffix(",motion,0.25"))
        #expect(lines[170].hasSuffix(",post_roll,0.25"))
        var worst = 0
        for line in lines.dropFirst().dropLast() {
            let fields = line.split(separator: ",")
            guard fields.count == 5, Double(fields[0]) != nil, Double(fields[1]) != nil, Double(fields[2]) != nil,
                let masked = Double(fields[4]), masked >= 0, masked <= 1
            else {
                worst += 1
                continue
            }
        }
        #expect(worst == 0, "\(worst) rows are not time,score,threshold,state,auto_masked")
    }

    /// The plot is a well-formed SVG document with the parts a reader needs.
    @Test(arguments: [200, 30_000])
    func svgIsWellFormed(frames: Int) throws {
        let analysis = try Self.sample(frames: frames)
        let svg = analysis.svg(title: "garden <cam> & \"night\"")
        #expect(svg.hasPrefix("<?xml"))
        for part in [
            "<svg", "<title>", "<polyline", "stroke-dasharray", "fill-opacity", "time (s)", "noise σ",
            "threshold", "light switch", "0.01%", "10%", "auto-masked",
        ] {
            #expect(svg.contains(part), "missing \(part)")
        }
        #expect(svg.contains("garden &lt;cam&gt; &amp; &quot;night&quot;"))
        // The auto-masked share, a quarter from frame 100 on: a quarter up its panel.
        #expect(svg.contains(",627.5"), "no point at 25 % masked")
        #if canImport(FoundationXML) || canImport(Darwin)
        let document = try XMLDocument(xmlString: svg, options: [])
        #expect(document.rootElement()?.name == "svg")
        let polylines = try document.nodes(forXPath: "//*[local-name()='polyline']")
        #expect(polylines.count == 5)
        for node in polylines {
            let element = try #require(node as? XMLElement, "\(type(of: node))")
            let points = element.attributes?.first { $0.name == "points" }?.stringValue ?? ""
            let count = points.split(separator: " ").count
            #expect(count > 0 && count <= MotionAnalysis.maximumPoints)
        }
        #endif
        // Reasonable size for long inputs too.
        #expect(svg.utf8.count < 400_000)
    }

    /// JSON has no NaN or infinity: a value that is not finite is written as 0.
    @Test func nonFiniteNumbersStayJSON() throws {
        let event = MotionAnalysis.Event(start: .nan, end: .infinity, peak: -.infinity, confirmed: 0, parts: 1)
        #expect(MotionAnalysis.jsonLine(event) == "{\"start\": 0.00, \"end\": 0.00, \"peak\": 0}")
        var settings = try Settings.defaults().motion
        settings.threshold = .nan
        let analysis = MotionAnalysis(
            settings: settings, eventSettings: EventSettings(postRoll: .s(2), maxClip: .s(300)))
        #expect(analysis.summaryLine.contains("\"threshold\": 0,"), "\(analysis.summaryLine)")
        #expect(try JSONSerialization.jsonObject(with: Data(analysis.summaryLine.utf8)) is [String: Any])
    }

    @Test func emptyAnalysis() throws {
        let analysis = MotionAnalysis(
            settings: try Settings.defaults().motion, eventSettings: EventSettings(postRoll: .s(2), maxClip: .s(300)))
        #expect(analysis.eventLines.isEmpty)
        #expect(analysis.csv == "time,score,threshold,state,auto_masked\n")
        #expect(try JSONSerialization.jsonObject(with: Data(analysis.summaryLine.utf8)) is [String: Any])
        #if canImport(FoundationXML) || canImport(Darwin)
        _ = try XMLDocument(xmlString: analysis.svg(title: "nothing"), options: [])
        #endif
    }
}
