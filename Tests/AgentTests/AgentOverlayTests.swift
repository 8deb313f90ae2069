import AgentTestSupport
import Capture
import Foundation
import Media
import Overlay
import Recorder
import TestSupport
import Testing

@testable import Agent

/// The time on the picture (`overlay.*`): drawn into what is recorded, readable after x264
/// and a decode by ffmpeg, and never seen by the detector.
@Suite(.serialized) struct AgentOverlayTests {
    /// The wall clock of the first frame: half a second past a whole second, so no frame of
    /// 1/15 s falls within 1/30 s of a second's tick.
    static let firstFrame = Date(timeIntervalSince1970: 1_796_472_000.5)

    /// Runs the agent on `config` over a 6 s scene that one object crosses, its first frame at
    /// `firstFrame`: the luma of each frame of its one clip (320×240), decoded by ffmpeg, which
    /// must say nothing and find as many frames as the journal; the clip's start in the
    /// source's seconds (frame i was captured that long plus i/15 s after the first frame).
    static func oneCrossing(config: String) throws -> (frames: [[UInt8]], clipStart: Double, agent: EmbeddedAgent) {
        let agent = try EmbeddedAgent(
            config: config,
            openSource: { _ throws(CaptureError) in try synthetic(scene(seconds: 6, objects: [crossing(2, 4)])) },
            wall: { AgentOverlayTests.firstFrame.addingTimeInterval($0.seconds) })
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        _ = try agent.expectCompletePlayableClips()
        let clips = agent.clipFiles
        try #require(clips.count == 1, "\(clips)\n\(agent.output)")
        let record = try #require(try agent.journal().first)
        let path = agent.directory.file("clip.mov")
        try Data(try #require(agent.storage.contents(clips[0]))).write(to: URL(fileURLWithPath: path))
        let decoded = try runTool("ffmpeg", ["-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        #expect(decoded.stderr.isEmpty, "\(decoded.stderr)")
        let size = 320 * 240
        let bytes = [UInt8](decoded.stdoutData)
        let frames = stride(from: 0, to: bytes.count - size + 1, by: size).map { Array(bytes[$0..<($0 + size)]) }
        try #require(frames.count == record.frames, "decoded \(frames.count) frames, the journal says \(record.frames)")
        return (frames, try #require(record.triggerSourceSeconds) - (record.preRollSeconds ?? 0), agent)
    }

    /// One object crossing: the clip's frames carry the capture time and the camera's name,
    /// read back frame by frame against the font's glyphs.
    @Test func theCaptureTimeReadsBackFromTheClip() throws {
        let pattern = "%H:%M:%S {camera}"
        let (frames, clipStart, _) = try Self.oneCrossing(
            config: testConfig(extra: "overlay = { text = \"\(pattern)\"; position = \"bottom-right\"; scale = 1; };"))
        let font = try BitmapFont.load(path: BitmapFont.defaultPath)
        let text = OverlayText(pattern: pattern, camera: "yard")
        for i in [0, frames.count / 2, frames.count - 1] {
            let captured = Self.firstFrame.addingTimeInterval(clipStart + Double(i) / 15)
            let expected = text.text(at: captured)
            let read = readText(
                luma: frames[i], width: 320, height: 240, font: font,
                position: .bottomRight, scale: 1, length: expected.count, alphabet: "0123456789: ayrd")
            #expect(read == expected, "frame \(i) of \(frames.count)")
        }
    }

    /// A long camera name before the time, on a picture 39 characters wide: the whole text (41
    /// characters) would lose the end of the time at the right edge. The name is cut short
    /// instead, the time reads back whole from every frame checked, and the log says so once.
    @Test func theTimeIsKeptWhenTheTextIsTooWide() throws {
        let name = "frontdoorcamera-north-side-gate1"
        let pattern = "{camera} %H:%M:%S"
        let (frames, clipStart, agent) = try Self.oneCrossing(
            config: testConfig(extra: "overlay = { text = \"\(pattern)\"; scale = 1; };")
                .replacingOccurrences(of: "name = \"yard\"", with: "name = \"\(name)\""))
        let font = try BitmapFont.load(path: BitmapFont.defaultPath)
        let time = OverlayText(pattern: "%H:%M:%S", camera: "")
        for i in [0, frames.count / 2, frames.count - 1] {
            let captured = Self.firstFrame.addingTimeInterval(clipStart + Double(i) / 15)
            let read = readText(
                luma: frames[i], width: 320, height: 240, font: font, position: .topLeft, scale: 1, length: 39,
                alphabet: "0123456789: -" + name)
            #expect(read == String(name.prefix(30)) + " " + time.text(at: captured), "frame \(i) of \(frames.count)")
        }
        let said = agent.events.notices(.overlayShortened)
        #expect(said.count == 1 && said.first?.field("characters_that_fit") == "39", "\(agent.output)")
    }

    /// A scene where nothing moves, with the seconds ticking on the picture: no event.
    @Test func theTickingClockIsNoMotion() throws {
        let agent = try EmbeddedAgent(
            config: testConfig(extra: "overlay = { text = \"%Y-%m-%d %H:%M:%S\"; scale = 2; };"),
            openSource: { _ throws(CaptureError) in try synthetic(scene(seconds: 10, objects: [])) })
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        #expect(agent.clipFiles.isEmpty, "\(agent.output)")
        #expect(agent.events.count(.motionStarted) == 0)
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }
}
