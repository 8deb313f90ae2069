import AgentTestSupport
import Capture
import Foundation
import Media
import Recorder
import TestSupport
import Testing

@testable import Agent

/// Each clip's picture: the frame with the peak motion score, as JPEG beside the clip, named
/// in the journal and handed to the sinks; and `latest.jpg` now and then.
@Suite(.serialized) struct AgentSnapshotTests {
    /// One object crossing: the clip's snapshot decodes (ffprobe, ffmpeg), and shows the object
    /// — against the empty scene, a patch about the object's size differs, in the band it
    /// crosses in.
    @Test func eachClipHasAPictureOfItsPeakFrame() throws {
        let footage = scene(seconds: 8, objects: [crossing(2, 5)])
        let agent = try EmbeddedAgent(
            config: testConfig(extra: "snapshot = { width = 0; quality = 90; live_interval = 1.0; };"),
            openSource: { _ throws(CaptureError) in try synthetic(footage) })
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")

        let record = try #require(try agent.journal().first, "\(agent.output)")
        let file = try #require(record.snapshot, "\(record)")
        #expect(file == String(record.file.dropLast(4)) + ".jpg")
        let jpeg = try #require(agent.storage.contents(file))
        let saved = try #require(agent.events.clipsSaved.first)
        #expect(saved.snapshotJPEG == jpeg && saved.record.snapshot == file)

        let path = agent.directory.file("snapshot.jpg")
        try Data(jpeg).write(to: URL(fileURLWithPath: path))
        let probe = try runTool(
            "ffprobe", ["-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0", path])
        #expect(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "320,240", "\(probe)")
        let decoded = try runTool("ffmpeg", ["-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        #expect(decoded.stderr.isEmpty, "\(decoded.stderr)")
        let picture = [UInt8](decoded.stdoutData)
        try #require(picture.count == 320 * 240)

        // The empty scene (frame 0, before the object enters), as the snapshot would show it.
        // (The frame is kept while its plane is read: the plane is a view into its buffer.)
        let empty = try SyntheticSource(scene: footage).frame(0)
        var changed: [(x: Int, y: Int)] = []
        for y in 0..<240 {
            let row = empty.luma.row(y)
            for x in 0..<320 where abs(Int(picture[y * 320 + x]) - Int(row[x])) > 40 { changed.append((x, y)) }
        }
        withExtendedLifetime(empty) {}
        // The object covers 15 % × 25 % of the picture (3.75 %), on the middle line.
        let fraction = Double(changed.count) / Double(320 * 240)
        #expect(fraction > 0.015 && fraction < 0.08, "changed fraction \(fraction)")
        let meanY = Double(changed.reduce(0) { $0 + $1.y }) / Double(max(changed.count, 1))
        #expect(meanY > 0.35 * 240 && meanY < 0.65 * 240, "the changed patch centres at y \(meanY)")

        // latest.jpg: replaced while the source ran, a whole JPEG at the end.
        let latest = try #require(agent.storage.contents("latest.jpg"))
        #expect(latest.starts(with: [0xFF, 0xD8]) && latest.suffix(2) == [0xFF, 0xD9])
        #expect(agent.errors.isEmpty && agent.warnings.isEmpty, "\(agent.output)")
    }

    /// With snapshots off, no picture and no `snapshot` in the journal.
    @Test func snapshotsOff() throws {
        let agent = try EmbeddedAgent(
            config: testConfig(extra: "snapshot = { enabled = false; };"),
            openSource: { _ throws(CaptureError) in try synthetic(scene(seconds: 8, objects: [crossing(2, 5)])) })
        #expect(agent.runToTheEnd() == .stopped, "\(agent.output)")
        let record = try #require(try agent.journal().first)
        #expect(record.snapshot == nil)
        #expect(!agent.storage.fileNames.contains { $0.hasSuffix(".jpg") }, "\(agent.storage.fileNames)")
    }
}
