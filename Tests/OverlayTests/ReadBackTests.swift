import Capture
import Configuration
import Foundation
import H264
import Media
import Overlay
import QuickTime
import Storage
import TestSupport
import Testing

@Suite struct ReadBackTests {
    /// The check, end to end: a known time drawn into 1280×720 frames of the synthetic
    /// scene (a bright checkered object behind part of it), encoded by x264 at the shipped
    /// settings into a movie, decoded by ffmpeg (which says nothing), and read back from the
    /// decoded luma, character by character, as drawn.
    @Test(arguments: [(PixelFormat.nv12, OverlayPosition.topLeft, 2), (.i420, .bottomRight, 1)])
    func timeReadsBackAfterEncoding(format: PixelFormat, position: OverlayPosition, scale: Int) throws {
        let width = 1280
        let height = 720
        let text = "2026-12-02 13:45:07"
        let alphabet = "0123456789-: "
        let font = try defaultFont()
        let overlay = try TextOverlay(font: font, position: position, scale: scale)
        let box = overlay.box(characters: text.count, pictureWidth: width, pictureHeight: height)
        // A bright checkered object over the left half of the text.
        let object = SceneObject(
            enter: .zero, leave: .init(seconds: 10),
            path: .still(
                x: Double(box.x + box.width / 4) / Double(width), y: Double(box.y + box.height / 2) / Double(height)),
            width: Double(box.width / 2) / Double(width), height: Double(box.height * 2) / Double(height),
            brightness: 230)
        let scene = SyntheticScene(
            width: width, height: height, frameRate: Rational(30, 1), pixelFormat: format, seed: 5, noiseSigma: 3,
            schedule: SceneSchedule(objects: [object]), duration: .init(seconds: 0.2))
        let source = try SyntheticSource(scene: scene)
        var frames: [VideoFrame] = []
        while let frame = try source.nextFrame() { frames.append(frame) }
        try #require(frames.count == 6)

        // The reader does not find the text where none was drawn.
        let untouched = readText(
            luma: packedLuma(frames[0]), width: width, height: height, font: font, position: position,
            scale: scale, length: text.count, alphabet: alphabet)
        #expect(untouched != text)

        for frame in frames { overlay.draw(text, into: frame) }
        #expect(overlay.rasterisations == 1)

        let settings = try Settings.defaults().encoder
        let encoder = try X264Encoder(format: source.format, settings: settings.x264)
        var keyframes = KeyframeSchedule(interval: .init(seconds: settings.keyframeInterval))
        var samples: [EncodedSample] = []
        for frame in frames {
            samples += try encoder.encode(frame, keyframe: keyframes.keyframeDue(at: frame.timestamp))
        }
        samples += try encoder.flush()
        try #require(samples.count == frames.count)

        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("overlay.mov")
        let writer = try MovieWriter(
            path: path,
            description: MovieDescription(
                creationTime: Date(),
                video: VideoTrackFormat(
                    width: width, height: height, sequenceParameterSet: encoder.sequenceParameterSet,
                    pictureParameterSet: encoder.pictureParameterSet)))
        for gop in groupedIntoGOPs(samples, end: scene.timestamp(ofFrame: Int64(frames.count))) {
            try writer.append(gop)
        }
        try writer.close()

        let decoded = try runTool(
            "ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        #expect(decoded.status == 0)
        #expect(decoded.stderr == "")
        let luma = [UInt8](decoded.stdoutData)
        let frameBytes = width * height
        try #require(luma.count == frameBytes * frames.count)
        for n in frames.indices {
            let picture = Array(luma[(n * frameBytes)..<((n + 1) * frameBytes)])
            let read = readText(
                luma: picture, width: width, height: height, font: font, position: position, scale: scale,
                length: text.count, alphabet: alphabet)
            #expect(read == text, "frame \(n)")
        }
    }
}
