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
    ///
    /// With a rotation the movie's matrix says so, and ffmpeg, which applies the matrix when it
    /// decodes (its default, autorotate), gives the picture as a player shows it — turned, the
    /// time upright in its corner — where the text is read.
    @Test(arguments: [
        (PixelFormat.nv12, OverlayPosition.topLeft, 2, Rotation.none), (.i420, .bottomRight, 1, .none),
        (.nv12, .topRight, 2, .clockwise90),
    ])
    func timeReadsBackAfterEncoding(
        format: PixelFormat, position: OverlayPosition, scale: Int, rotation: Rotation
    ) throws {
        let width = 1280
        let height = 720
        let text = "2026-12-02 13:45:07"
        let alphabet = "0123456789-: "
        let font = try defaultFont()
        let overlay = try TextOverlay(font: font, position: position, scale: scale, rotation: rotation)
        let box = overlay.box(characters: text.count, pictureWidth: width, pictureHeight: height)
        // A bright checkered object behind half of the text, along it (the box is in the stored
        // frame: the text runs across it, or up it at 90°).
        let across = rotation.degrees % 180 == 0
        let object = SceneObject(
            enter: .zero, leave: .init(seconds: 10),
            path: .still(
                x: Double(box.x + (across ? box.width / 4 : box.width / 2)) / Double(width),
                y: Double(box.y + (across ? box.height / 2 : box.height / 4)) / Double(height)),
            width: Double(across ? box.width / 2 : box.width * 2) / Double(width),
            height: Double(across ? box.height * 2 : box.height / 2) / Double(height),
            brightness: 230)
        let scene = SyntheticScene(
            width: width, height: height, frameRate: Rational(30, 1), pixelFormat: format, seed: 5, noiseSigma: 3,
            schedule: SceneSchedule(objects: [object]), duration: .init(seconds: 0.2))
        let source = try SyntheticSource(scene: scene)
        var frames: [VideoFrame] = []
        while let frame = try source.nextFrame() { frames.append(frame) }
        try #require(frames.count == 6)

        // The reader does not find the text where none was drawn.
        let shownWidth = rotation.degrees % 180 == 0 ? width : height
        let shownHeight = rotation.degrees % 180 == 0 ? height : width
        let untouched = turnedClockwise(packedLuma(frames[0]), width: width, height: height, by: rotation.degrees)
        let untouchedRead = readText(
            luma: untouched.pixels, width: shownWidth, height: shownHeight, font: font, position: position,
            scale: scale, length: text.count, alphabet: alphabet)
        #expect(untouchedRead != text)

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
                    pictureParameterSet: encoder.pictureParameterSet, rotation: rotation)))
        for gop in groupedIntoGOPs(samples, end: scene.timestamp(ofFrame: Int64(frames.count))) {
            try writer.append(gop)
        }
        try writer.close()

        let decoded = try runTool(
            "ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "gray", "-"])
        #expect(decoded.status == 0)
        #expect(decoded.stderr == "")
        let luma = [UInt8](decoded.stdoutData)
        let frameBytes = shownWidth * shownHeight
        try #require(luma.count == frameBytes * frames.count)
        for n in frames.indices {
            let picture = Array(luma[(n * frameBytes)..<((n + 1) * frameBytes)])
            let read = readText(
                luma: picture, width: shownWidth, height: shownHeight, font: font, position: position,
                scale: scale, length: text.count, alphabet: alphabet)
            #expect(read == text, "frame \(n)")
        }
    }
}
