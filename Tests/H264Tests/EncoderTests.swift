import Capture
import Foundation
import H264
import Media
import QuickTime
import TestSupport
import Testing

@Suite struct EncoderTimingTests {
    /// Frames at `rate` for `seconds`: every frame comes out once, in order, with its
    /// capture timestamp; keyframes sit where the schedule asked for them (the first frame at
    /// or after each second); the movie's packets carry the same times, durations and key flags.
    @Test(arguments: [Rational(30, 1), Rational(247, 10), Rational(30000, 1001)])
    func rateGivesTimesDurationsAndKeyframes(rate: Rational) throws {
        let source = try scene(rate: rate, seconds: 3.5)
        let frames = try allFrames(source)
        let encoder = try X264Encoder(format: source.format, settings: deterministic)
        let samples = try encodeAll(frames, encoder: encoder)

        #expect(samples.count == frames.count)
        #expect(samples.map(\.pts) == frames.map(\.timestamp))
        #expect(samples.map(\.dts) == samples.map(\.pts))
        let keys = samples.indices.filter { samples[$0].isKeyframe }
        #expect(keys == scheduledKeyframes(frames.map(\.timestamp)))
        #expect(keys.count == 4)

        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("rate.mov")
        let end = source.scene.timestamp(ofFrame: Int64(frames.count))
        try writeMovie(samples, encoder: encoder, to: path, endTime: end)
        _ = try checkPlays(path, frames: frames.count, width: 160, height: 120)
        let packets = try FFprobe.videoPackets(path)
        try #require(packets.count == frames.count)
        #expect(packets.indices.filter { packets[$0].isKey } == keys)
        for (i, p) in packets.enumerated() {
            // 90 kHz media time: each instant is rounded to the nearest tick.
            #expect(abs(p.time - frames[i].timestamp.seconds) <= 1.0 / 90000 + 1e-6, "packet \(i) time")
            let next = i + 1 < frames.count ? frames[i + 1].timestamp : end
            #expect(
                abs(p.duration - (next - frames[i].timestamp).seconds) <= 2.0 / 90000 + 1e-6, "packet \(i) duration")
        }
    }

    /// Dropped frames and a long stall: durations follow the timestamps, a keyframe comes
    /// on the first frame at or after each second boundary, and no frame is a second or
    /// more after the latest keyframe.
    @Test func gapsKeepKeyframesWithinTheInterval() throws {
        let source = try scene(seconds: 6)
        let all = try allFrames(source)
        // Lose single frames, a short burst, and 2.4 s at once (a USB hiccup).
        let lost = Set([3, 17, 29, 30, 31, 44]).union(50..<58).union(95..<167)
        let frames = all.filter { !lost.contains(Int($0.sequence)) }
        let encoder = try X264Encoder(format: source.format, settings: deterministic)
        let samples = try encodeAll(frames, encoder: encoder)

        #expect(samples.map(\.pts) == frames.map(\.timestamp))
        let keys = samples.indices.filter { samples[$0].isKeyframe }
        #expect(keys == scheduledKeyframes(frames.map(\.timestamp)))
        var latestKey = samples[0].pts
        for s in samples {
            if s.isKeyframe { latestKey = s.pts }
            #expect(
                s.pts - latestKey < Timestamp.Duration(seconds: 1),
                "frame at \(s.pts) is \(s.pts - latestKey) after its keyframe")
        }
        // The frame after the stall is a keyframe.
        let afterStall = try #require(frames.firstIndex { $0.sequence == 167 })
        #expect(samples[afterStall].isKeyframe)

        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("gaps.mov")
        try writeMovie(samples, encoder: encoder, to: path, endTime: source.scene.timestamp(ofFrame: 180))
        _ = try checkPlays(path, frames: frames.count, width: 160, height: 120)
        let packets = try FFprobe.videoPackets(path)
        try #require(packets.count == frames.count)
        #expect(packets.indices.filter { packets[$0].isKey } == keys)
        for i in 0..<(frames.count - 1) {
            let expected = (frames[i + 1].timestamp - frames[i].timestamp).seconds
            #expect(abs(packets[i].duration - expected) <= 2.0 / 90000 + 1e-6, "packet \(i) duration")
        }
    }

    /// The keyframe interval is capture time, whatever the rate: at 0.5 s and 10 fps a
    /// keyframe every 5 frames; at 2 s, every 20.
    @Test(arguments: [(0.5, 5), (2.0, 20)])
    func keyframeIntervalSetting(interval: Double, every: Int) throws {
        let source = try scene(rate: Rational(10, 1), seconds: 4)
        let frames = try allFrames(source)
        let encoder = try X264Encoder(format: source.format, settings: deterministic)
        let samples = try encodeAll(frames, encoder: encoder, interval: interval)
        #expect(
            samples.indices.filter { samples[$0].isKeyframe } == Array(stride(from: 0, to: frames.count, by: every)))
        #expect(encoder.keyframesForced == frames.count / every)
    }

    /// Keyframes come only where the caller asks (and on the first frame, which every stream
    /// starts with): x264 places none of its own.
    @Test func keyframesOnlyWhereAsked() throws {
        let source = try scene(seconds: 3.5)
        let frames = try allFrames(source)
        let encoder = try X264Encoder(format: source.format, settings: deterministic)
        var samples: [EncodedSample] = []
        for (i, frame) in frames.enumerated() { samples += try encoder.encode(frame, keyframe: [7, 50].contains(i)) }
        samples += try encoder.flush()
        #expect(samples.count == frames.count)
        #expect(samples.indices.filter { samples[$0].isKeyframe } == [0, 7, 50])
        #expect(encoder.keyframesForced == 2)
    }

    /// Capture timestamps are monotonic-clock instants far from zero; they go through as they are.
    @Test func largeTimestampsPassThrough() throws {
        let start = Timestamp(nanoseconds: 86_400 * 1_000_000_000 * 40 + 123_456_789)  // 40 days of uptime
        let source = try scene(seconds: 1.2, startTime: start)
        let frames = try allFrames(source)
        let encoder = try X264Encoder(format: source.format, settings: deterministic)
        let samples = try encodeAll(frames, encoder: encoder)
        #expect(samples.map(\.pts) == frames.map(\.timestamp))
        #expect(samples.indices.filter { samples[$0].isKeyframe } == [0, 30])
    }
}

@Suite struct EncoderInputTests {
    /// NV12 and I420 of the same picture, with tight or odd strides, and YUYV / I422 that
    /// `PlanarConverter` makes into it exactly, all give the same bitstream.
    @Test func inputLayoutsGiveIdenticalStreams() throws {
        let source = try scene(width: 160, height: 120, seconds: 0.4, schedule: movingObject)
        let frames = try allFrames(source)
        func encode(_ frames: [VideoFrame]) throws -> [EncodedSample] {
            try encodeAll(frames, encoder: X264Encoder(format: frames[0].format, settings: deterministic))
        }
        func planar(_ frame: VideoFrame) -> VideoFrame { PlanarConverter(input: frame.format).convert(frame) }
        let reference = try encode(frames)
        #expect(reference.count == frames.count)
        #expect(try encode(frames.map { try i420Copy(of: $0) }) == reference, "I420")
        #expect(try encode(frames.map { try i420Copy(of: $0, bytesPerLine: 163) }) == reference, "I420, stride 163")
        #expect(try encode(frames.map { try planar($0.repacked(as: .yuyv)) }) == reference, "YUYV")
        #expect(
            try encode(frames.map { try planar($0.repacked(as: .yuyv, rowPadding: 6)) }) == reference,
            "YUYV, padded rows")
        #expect(try encode(frames.map { try planar($0.repacked(as: .i422)) }) == reference, "I422")
        for bytesPerLine in [163, 224] {
            let padded = try allFrames(
                scene(width: 160, height: 120, seconds: 0.4, schedule: movingObject, bytesPerLine: bytesPerLine))
            #expect(padded[0].format.planes[0].stride == bytesPerLine)
            #expect(try encode(padded) == reference, "NV12, stride \(bytesPerLine)")
        }
    }

    /// A 640-pixel picture with 643-byte rows (a camera's odd bytesperline) encodes, plays,
    /// and decodes to the same picture as the tightly packed frames.
    @Test func oddStrideDecodesToTheSamePicture() throws {
        let tight = try allFrames(scene(width: 640, height: 480, seconds: 0.1))
        let padded = try allFrames(scene(width: 640, height: 480, seconds: 0.1, bytesPerLine: 643))
        #expect(padded[0].format.planes[1].stride == 643)
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        var hashes: [String] = []
        for (name, frames) in [("tight", tight), ("padded", padded)] {
            let encoder = try X264Encoder(format: frames[0].format, settings: deterministic)
            let samples = try encodeAll(frames, encoder: encoder)
            let path = dir.file("\(name).mov")
            try writeMovie(samples, encoder: encoder, to: path)
            _ = try checkPlays(path, frames: frames.count, width: 640, height: 480)
            let md5 = try runTool(
                "ffmpeg",
                ["-nostdin", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-f", "md5", "-"])
            #expect(md5.status == 0)
            hashes.append(md5.stdout)
        }
        #expect(hashes[0] == hashes[1])
        #expect(hashes[0].hasPrefix("MD5="))
    }

    /// 4:2:2 (packed or planar) is refused with what to do, when the encoder opens and when a
    /// frame comes: the caller converts it to 4:2:0 first.
    @Test func fourTwoTwoIsRefused() throws {
        let nv12 = try scene(seconds: 0.1).frame(0)
        let encoder = try X264Encoder(format: nv12.format, settings: deterministic)
        for frame in [try nv12.repacked(as: .yuyv), try nv12.repacked(as: .i422)] {
            let name = frame.format.pixelFormat.description
            let why =
                "\(name) frames: the x264 encoder takes NV12 or I420; convert them to 4:2:0 first (PlanarConverter)"
            #expect(throws: EncoderError.unsupportedPicture(why)) {
                try X264Encoder(format: frame.format, settings: deterministic)
            }
            #expect(throws: EncoderError.unsupportedPicture(why)) { try encoder.encode(frame, keyframe: true) }
            #expect(EncoderError.unsupportedPicture(why).description == "cannot encode " + why)
        }
        // The encoder is unharmed: the NV12 frame still encodes.
        #expect(try encoder.encode(nv12, keyframe: true).count == 1)
    }

    @Test func frameOfAnotherSizeIsRefused() throws {
        let encoder = try X264Encoder(
            format: VideoFormat(width: 160, height: 120, pixelFormat: .nv12), settings: deterministic)
        let other = try scene(width: 320, height: 240, seconds: 0.1).frame(0)
        #expect(throws: EncoderError.frameSizeMismatch(expected: "160×120", got: "320×240")) {
            try encoder.encode(other, keyframe: false)
        }
    }

    @Test func timestampsMustIncrease() throws {
        let source = try scene(seconds: 0.2)
        let encoder = try X264Encoder(format: source.format, settings: deterministic)
        let a = source.frame(3), b = source.frame(2)
        _ = try encoder.encode(a, keyframe: true)
        #expect(throws: EncoderError.timestampNotIncreasing(previous: a.timestamp, got: b.timestamp)) {
            try encoder.encode(b, keyframe: false)
        }
        #expect(throws: EncoderError.timestampNotIncreasing(previous: a.timestamp, got: a.timestamp)) {
            try encoder.encode(a, keyframe: false)
        }
    }

    /// What x264 logs (its own printf-style lines, formatted by the shim) reaches
    /// `takeMessages()` once, marked with its level, without the newline.
    @Test func x264WarningsAreKept() throws {
        let source = try scene(seconds: 0.1)
        let capped = x264Settings(rateCap: .vbv(maxBitrateKbps: 1_000_000, bufferKbit: 1_000_000), threads: 1)
        let encoder = try X264Encoder(format: source.format, settings: capped)
        let messages = encoder.takeMessages()
        #expect(messages.count == 2, "\(messages)")
        for (i, what) in ["VBV bitrate", "VBV buffer"].enumerated() where i < messages.count {
            #expect(messages[i].hasPrefix("warning: \(what) (1000000) > level limit ("), "\(messages)")
            #expect(messages[i].hasSuffix(")"), "\(messages)")
        }
        #expect(encoder.takeMessages().isEmpty)
    }

    @Test func oddPictureSizeIsRefused() throws {
        let format = try VideoFormat(width: 161, height: 120, pixelFormat: .i420)
        let error = expectError(EncoderError.self) { try X264Encoder(format: format, settings: deterministic) }
        #expect(error?.description.contains("even width and height") == true)
    }

    @Test func closedEncoderTakesNoFrames() throws {
        let source = try scene(seconds: 0.1)
        let encoder = try X264Encoder(format: source.format, settings: deterministic)
        _ = try encoder.flush()
        #expect(throws: EncoderError.closed) { try encoder.encode(source.frame(0), keyframe: true) }
        #expect(try encoder.flush().isEmpty)
    }
}

@Suite struct EncoderOutputTests {
    /// Samples are MOV-ready: length-prefixed NAL units that add up exactly, no start codes,
    /// no parameter sets; the first is an IDR; SPS and PPS come without prefixes.
    @Test func samplesAreLengthPrefixedAccessUnits() throws {
        let source = try scene(seconds: 1.2)
        let encoder = try X264Encoder(format: source.format, settings: deterministic)
        let samples = try encodeAll(allFrames(source), encoder: encoder)
        #expect(encoder.sequenceParameterSet.first.map { $0 & 0x1F } == 7)
        #expect(encoder.pictureParameterSet.first.map { $0 & 0x1F } == 8)
        for (i, s) in samples.enumerated() {
            let units = try #require(s.nalUnits, "sample \(i) is not a run of length-prefixed NAL units")
            let types = units.map { $0[$0.startIndex] & 0x1F }
            #expect(!types.contains(7) && !types.contains(8), "sample \(i) repeats SPS/PPS")
            #expect(types.contains(5) == s.isKeyframe, "sample \(i): IDR slice iff keyframe")
            #expect(s.data.starts(with: [0, 0, 0, 1]) == false || units.count > 0)
        }
        #expect(encoder.samplesOut == samples.count)
    }

    /// Without `zerolatency` x264 holds frames back for its lookahead; `flush()` returns
    /// them all, in order, with their timestamps.
    @Test func delayedFramesAreFlushedOnClose() throws {
        let source = try scene(seconds: 2)
        let frames = try allFrames(source)
        let encoder = try X264Encoder(
            format: source.format, settings: x264Settings(preset: .veryfast, tune: [], threads: 2))
        let keys = scheduledKeyframes(frames.map(\.timestamp))
        var samples: [EncodedSample] = []
        for (i, f) in frames.enumerated() { samples += try encoder.encode(f, keyframe: keys.contains(i)) }
        let held = encoder.delayedFrames
        #expect(held > 0)
        let flushed = try encoder.flush()
        #expect(flushed.count == held)
        samples += flushed
        #expect(samples.map(\.pts) == frames.map(\.timestamp))
        #expect(samples.map(\.dts) == samples.map(\.pts))
        #expect(samples.indices.filter { samples[$0].isKeyframe } == [0, 30])
        #expect(encoder.delayedFrames == 0)

        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("lookahead.mov")
        try writeMovie(samples, encoder: encoder, to: path)
        _ = try checkPlays(path, frames: frames.count, width: 160, height: 120)
    }

    /// A clip of the synthetic scene, 320×240 with an object crossing and the light
    /// switched on, written by the QuickTime writer, plays; a maximum bit rate and a pixel
    /// aspect ratio are honoured.
    @Test func syntheticClipPlays() throws {
        let s = { (seconds: Double) in Timestamp.Duration(seconds: seconds) }
        let schedule = SceneSchedule(
            objects: [SceneObject(enter: s(0.1), leave: s(1.3), path: .rightToLeft(y: 0.5))],
            lightChanges: [LightChange(start: s(0.6), end: s(1), delta: 40)])
        let sceneSettings = SyntheticScene(
            width: 320, height: 240, seed: 3, schedule: schedule,
            duration: s(1.5), startTime: Timestamp(seconds: 5))
        let source = try SyntheticSource(scene: sceneSettings)
        var format = source.format
        format.pixelAspectRatio = Rational(4, 3)
        let encoder = try X264Encoder(
            format: format, settings: x264Settings(rateCap: .vbv(maxBitrateKbps: 400, bufferKbit: 400), threads: 0))
        let frames = try allFrames(source)
        #expect(frames.contains { !sceneSettings.visibleObjects(at: $0.timestamp).isEmpty })
        let samples = try encodeAll(frames, encoder: encoder)
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.file("demo.mov")
        try writeMovie(samples, encoder: encoder, to: path)
        let report = try checkPlays(path, frames: frames.count, width: 320, height: 240)
        // No pasp box was written: the ratio ffprobe sees comes from the SPS.
        #expect(report.video?["sample_aspect_ratio"] == "4:3")
        #expect(encoder.takeMessages().filter { $0.hasPrefix("error") }.isEmpty)
    }
}

@Suite struct EncoderSettingsTests {
    /// Every preset, tune and profile opens and encodes (each combination x264 accepts).
    @Test(arguments: EncoderSettings.Profile.allCases)
    func profilesOpen(profile: EncoderSettings.Profile) throws {
        let source = try scene(seconds: 0.2)
        let encoder = try X264Encoder(
            format: source.format, settings: x264Settings(preset: .fast, profile: profile, threads: 1))
        let samples = try encodeAll(allFrames(source), encoder: encoder)
        #expect(samples.count == 6)
        // profile_idc is the SPS's second byte: 66 baseline, 77 main, 100 high.
        let idc = encoder.sequenceParameterSet[1]
        switch profile {
        case .baseline: #expect(idc == 66)
        case .main: #expect(idc == 77)
        case .high: #expect(idc == 100)
        }
    }

    /// The factory the agent is given makes x264 encoders with its settings, for each
    /// stream's format; they name themselves for the log.
    @Test func factoryMakesEncodersOfItsSettings() throws {
        let factory: any VideoEncoderFactory = X264EncoderFactory(settings: deterministic)
        for (width, height) in [(160, 120), (320, 240)] {
            let encoder = try factory.makeEncoder(for: VideoFormat(width: width, height: height, pixelFormat: .i420))
            let x264 = try #require(encoder as? X264Encoder)
            #expect(x264.settings == deterministic && x264.width == width && x264.height == height)
            #expect(encoder.logDescription.map { "\($0.name)=\($0.value)" } == ["encoder=x264", "preset=ultrafast"])
        }
    }

    @Test func libraryBuildIsKnown() {
        #expect(X264Encoder.libraryBuild >= 148)
        #expect(X264Encoder.libraryVersion.hasPrefix("0.\(X264Encoder.libraryBuild)."))
    }
}

let movingObject = SceneSchedule(objects: [
    SceneObject(
        enter: .zero, leave: Timestamp.Duration(seconds: 0.4), path: .leftToRight(y: 0.5), width: 0.3, height: 0.4)
])

@Suite struct FileToMovieTests {
    /// Recorded footage end to end: ffmpeg writes 4:2:2 Y4M at 24.7 fps, the file source
    /// reads it, `PlanarConverter` makes 4:2:0 of it (as the agent's capture thread does), the
    /// encoder encodes it, the writer makes a movie that plays with the file's frame count,
    /// durations and pixel aspect.
    @Test func y4mFootageBecomesAPlayableClip() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let input = dir.file("yard.y4m")
        try ffmpegTestPatternY4M(
            to: input, size: "176x144", rate: "24.7", frames: 40, filters: "setsar=12/11", pixelFormat: "yuv422p")
        let source = try Y4MSource(path: input)
        #expect(source.format.pixelFormat == .i422)
        let converter = PlanarConverter(input: source.format)
        let encoder = try X264Encoder(format: converter.output, settings: deterministic)
        let frames = try allFrames(source).map(converter.convert)
        let samples = try encodeAll(frames, encoder: encoder)
        #expect(samples.count == 40)
        #expect(samples.indices.filter { samples[$0].isKeyframe } == [0, 25])
        let path = dir.file("yard.mov")
        let end = Timestamp(frameIndex: 40, rate: Rational(247, 10))
        try writeMovie(
            samples, encoder: encoder, to: path, endTime: end,
            pixelAspectRatio: PixelAspectRatio(horizontalSpacing: 12, verticalSpacing: 11))
        let report = try checkPlays(path, frames: 40, width: 176, height: 144)
        #expect(report.video?["sample_aspect_ratio"] == "12:11")
        let duration = try #require(report.video?["duration"].flatMap(Double.init))
        #expect(abs(duration - end.seconds) < 0.001)
    }
}
