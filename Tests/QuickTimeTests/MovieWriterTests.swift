import Foundation
import Media
import Storage
import TestSupport
import Testing

@testable import QuickTime

/// Shared fixtures: one ffmpeg-made H.264 stream per process.
enum Fixture {
    static let directory: TemporaryDirectory = {
        do { return try TemporaryDirectory("vigil-qt") } catch {
            fatalError("cannot create a temporary directory: \(error)")
        }
    }()

    /// 150 frames of 320×240 at 30 fps, a keyframe every 30 frames.
    static let stream: Result<H264TestStream, any Error> = Result {
        try H264TestStream.make(frames: 150, gop: 30, in: directory)
    }

    static func h264() throws -> H264TestStream { try stream.get() }

    static func description(
        _ s: H264TestStream, rotation: Rotation = .none, audio: AudioTrackFormat? = nil,
        aspect: PixelAspectRatio? = nil, aperture: CleanAperture? = nil,
        color: ColorDescription? = nil, created: Date = Date(timeIntervalSince1970: 1_790_000_000)
    ) -> MovieDescription {
        MovieDescription(
            creationTime: created,
            video: VideoTrackFormat(
                width: s.width, height: s.height, sequenceParameterSet: s.sps, pictureParameterSet: s.pps,
                rotation: rotation, pixelAspectRatio: aspect, cleanAperture: aperture, color: color),
            audio: audio)
    }

    /// Writes `frames` samples of the stream at the given capture times (default: 30 fps from
    /// t = 5 s), GOP by GOP as the agent gives them, calling `audio` for each frame's time. Without `close`, the last GOP is not given either (it is the one still
    /// being recorded) and is returned.
    @discardableResult
    static func writeMovie(
        _ path: String, _ d: MovieDescription, frames: Int? = nil, times: [Timestamp]? = nil,
        audio: ((MovieWriter, Timestamp) throws -> Void)? = nil,
        close: Bool = true
    ) throws -> (writer: MovieWriter, open: GOP?) {
        let s = try h264()
        let n = frames ?? times?.count ?? s.samples.count
        let writer = try MovieWriter(path: path, description: d)
        var gops = s.gops(count: n) {
            times?[$0] ?? Timestamp(nanoseconds: 5_000_000_000 + Int64($0) * 1_000_000_000 / 30)
        }
        let open = close ? nil : gops.popLast()
        // Sound as it comes during a GOP, then the GOP when it is complete: each fragment holds
        // its GOP's sound, as in the agent.
        for gop in gops {
            for sample in gop.samples { try audio?(writer, sample.pts) }
            try writer.append(gop)
            try writer.synchronize()  // as the agent does: the fragment is revealed once durable
        }
        if close { try writer.close() }
        return (writer, open)
    }
}

/// Checks what every movie a test writes must pass (TestSupport's `expectPlayable`: ffprobe,
/// ffmpeg, GStreamer, and no hidden box that looks live), returning ffprobe's report.
func expectPlayable(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> ProbeReport {
    let probe = try TestSupport.expectPlayable(path, sourceLocation: sourceLocation)
    return try probe ?? FFprobe.probe(path)
}

@Suite struct MovieWriterTests {
    @Test func constantRateVideoHasEveryFrameAndExactDuration() throws {
        let path = Fixture.directory.file("constant.mov")
        _ = try Fixture.writeMovie(path, Fixture.description(try Fixture.h264()))
        let probe = try expectPlayable(path)
        let video = try #require(probe.video)
        #expect(video["codec_name"] == "h264")
        #expect(video["width"] == "320" && video["height"] == "240")
        #expect(video["nb_frames"] == "150")
        #expect(video["nb_read_packets"] == "150")
        #expect(video["r_frame_rate"] == "30/1")
        #expect(Double(video["duration"] ?? "") == 5.0)
        #expect(probe.audio == nil)
        #expect(probe.format["format_name"]?.contains("mov") == true)

        let packets = try FFprobe.videoPackets(path)
        #expect(packets.count == 150)
        #expect(packets.enumerated().filter(\.element.isKey).map(\.offset) == [0, 30, 60, 90, 120])
    }

    @Test func variableFrameDurationsSurvive() throws {
        // 24.7 fps on average with jitter, and a 0.4 s gap of dropped frames.
        var times: [Timestamp] = []
        var t: Int64 = 1_000_000_000
        let pattern: [Int64] = [40_000_000, 41_500_000, 39_000_000, 41_000_000]
        for i in 0..<120 {
            times.append(Timestamp(nanoseconds: t))
            t += i == 60 ? 400_000_000 : pattern[i % pattern.count]
        }
        let path = Fixture.directory.file("vfr.mov")
        _ = try Fixture.writeMovie(path, Fixture.description(try Fixture.h264()), times: times)
        _ = try expectPlayable(path)
        let packets = try FFprobe.videoPackets(path)
        #expect(packets.count == 120)
        for (i, p) in packets.enumerated() {
            let expected = (times[i] - times[0]).seconds
            #expect(abs(p.time - expected) < 1.0 / 90000 + 1e-9, "frame \(i) at \(p.time) s, captured at \(expected) s")
        }
        // The gap shows as one long frame, not as lost time.
        #expect(abs(packets[60].duration - 0.4) < 1e-4)
    }

    @Test(
        arguments: [(Rotation.none, nil), (.clockwise90, -90.0), (.clockwise180, 180.0), (.clockwise270, 90.0)]
            as [(Rotation, Double?)])
    func rotationIsTheDisplayMatrix(rotation: Rotation, ffprobeRotation: Double?) throws {
        let path = Fixture.directory.file("rot\(rotation.degrees).mov")
        _ = try Fixture.writeMovie(path, Fixture.description(try Fixture.h264(), rotation: rotation), frames: 30)
        let probe = try expectPlayable(path)
        if let expected = ffprobeRotation {
            let got = try #require(probe.videoRotation, "no display matrix reported")
            #expect(got == expected || (abs(expected) == 180 && abs(got) == 180))
        } else {
            #expect(probe.videoRotation == nil || probe.videoRotation == 0)
        }
        // The coded size is untouched.
        #expect(probe.video?["width"] == "320" && probe.video?["height"] == "240")
    }

    @Test func pixelAspectCleanApertureAndColourAreReported() throws {
        let path = Fixture.directory.file("aspect.mov")
        let d = Fixture.description(
            try Fixture.h264(), aspect: PixelAspectRatio(horizontalSpacing: 4, verticalSpacing: 3),
            aperture: CleanAperture(width: Rational(320, 1), height: Rational(240, 1)),
            color: .bt709)
        _ = try Fixture.writeMovie(path, d, frames: 30)
        let probe = try expectPlayable(path)
        let video = try #require(probe.video)
        #expect(video["sample_aspect_ratio"] == "4:3")
        #expect(video["display_aspect_ratio"] == "16:9")
        #expect(video["color_primaries"] == "bt709")
        #expect(video["color_transfer"] == "bt709")
        #expect(video["color_space"] == "bt709")
    }

    @Test func creationTimeIsTheFirstFramesWallClock() throws {
        let path = Fixture.directory.file("created.mov")
        let created = Date(timeIntervalSince1970: 1_796_000_000)  // 2026-11-30T...
        _ = try Fixture.writeMovie(path, Fixture.description(try Fixture.h264(), created: created), frames: 30)
        let probe = try expectPlayable(path)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let reported = try #require(probe.formatTags["creation_time"])
        #expect(formatter.date(from: reported) == created)
    }

    @Test(arguments: [(48000, 1), (44100, 2), (16000, 1)])
    func audioTrackIsAlignedAndComplete(rate: Int, channels: Int) throws {
        let path = Fixture.directory.file("audio-\(rate)-\(channels).mov")
        let format = AudioTrackFormat(sampleRate: rate, channels: channels)
        // Audio starts 0.25 s after the first video frame, in 20 ms periods, with one 100 ms gap
        // (an overrun) that the writer must fill with silence to keep the tracks aligned.
        let videoStart = Timestamp(nanoseconds: 5_000_000_000)
        var next = videoStart + .init(seconds: 0.25)
        let period = rate / 50
        var appended = 0
        var periods = 0
        _ = try Fixture.writeMovie(path, Fixture.description(try Fixture.h264(), audio: format), frames: 120) {
            writer, t in
            while next <= t {
                let pcm = sine(frames: period, channels: channels, rate: rate, startFrame: appended)
                try writer.appendAudio(pcm, time: next)
                appended += period
                periods += 1
                next = next + .init(seconds: 0.02)
                if periods == 40 { next = next + .init(seconds: 0.1) }
            }
        }
        let probe = try expectPlayable(path)
        let audio = try #require(probe.audio)
        #expect(audio["codec_name"] == "pcm_s16le")
        #expect(audio["sample_rate"] == "\(rate)")
        #expect(audio["channels"] == "\(channels)")
        let start = try #require(Double(audio["start_time"] ?? ""))
        #expect(abs(start - 0.25) <= 0.001, "audio starts at \(start) s")
        // Every appended frame is there, plus the silence that fills the 100 ms gap.
        let samples = try #require(Int(audio["duration_ts"] ?? ""))
        #expect(samples == appended + rate / 10)
        #expect(probe.video?["nb_frames"] == "120")
    }

    @Test func audioBeforeTheFirstFrameIsTrimmed() throws {
        let path = Fixture.directory.file("audio-early.mov")
        let format = AudioTrackFormat(sampleRate: 8000, channels: 1)
        let s = try Fixture.h264()
        let writer = try MovieWriter(path: path, description: Fixture.description(s, audio: format))
        let t0 = Timestamp(nanoseconds: 10_000_000_000)
        // Half a second of audio that began 0.3 s before the first video frame.
        try writer.appendAudio(
            sine(frames: 4000, channels: 1, rate: 8000, startFrame: 0), time: t0 - .init(seconds: 0.3))
        for gop in s.gops(count: 30, time: { t0 + .init(nanoseconds: Int64($0) * 33_333_333) }) {
            try writer.append(gop)
        }
        try writer.close()
        let probe = try expectPlayable(path)
        let audio = try #require(probe.audio)
        #expect(Int(audio["duration_ts"] ?? "") == 1600)
        #expect(abs((Double(audio["start_time"] ?? "") ?? -1)) < 0.001)
    }

    /// The pipeline drops whole GOPs while the disk falls behind: the frame before the gap
    /// stays on screen through it, so the movie keeps its length and the sound stays with the
    /// picture — whether the writer closes the movie or repair finishes it.
    @Test(arguments: [false, true])
    func aDroppedGOPLeavesAGapNotAShorterMovie(repaired: Bool) throws {
        let s = try Fixture.h264()
        let path = Fixture.directory.file("gap-\(repaired).mov")
        let writer = try MovieWriter(
            path: path, description: Fixture.description(s, audio: AudioTrackFormat(sampleRate: 8000, channels: 1)))
        let t0 = Timestamp(nanoseconds: 5_000_000_000)
        let gops = s.gops(count: 150, end: t0 + .init(seconds: 5)) {
            t0 + .init(nanoseconds: Int64($0) * 1_000_000_000 / 30)
        }
        #expect(gops.count == 5)
        for (i, gop) in gops.enumerated() {
            // A second of sound per GOP, as it is captured, before the GOP completes.
            try writer.appendAudio(sine(frames: 8000, channels: 1, rate: 8000, startFrame: i * 8000), time: gop.start)
            if i != 1 { try writer.append(gop) }  // the second GOP was dropped
        }
        if repaired {
            writer.abandon()
            let report = try #require(try MovieRepair.repair(path: path))
            #expect(report.videoFrames == 120 && report.videoDuration == .init(seconds: 5))
        } else {
            let summary = try writer.close()
            #expect(summary.videoFrames == 120 && summary.duration == .init(seconds: 5))
        }
        let probe = try expectPlayable(path)
        #expect(probe.video?["nb_frames"] == "120")
        #expect(probe.video?["duration"] == "5.000000")
        // Sound for every second the picture covers, on its clock (the last second's sound
        // came before the last GOP was complete, so it is in the movie too).
        #expect(probe.audio?["duration_ts"] == "40000")
    }

    @Test func soundAfterTheLastFrameIsCut() throws {
        let path = Fixture.directory.file("audio-late.mov")
        let s = try Fixture.h264()
        let writer = try MovieWriter(
            path: path, description: Fixture.description(s, audio: AudioTrackFormat(sampleRate: 8000, channels: 1)))
        let t0 = Timestamp(nanoseconds: 10_000_000_000)
        // 1.5 s of sound arrives (the microphone runs ahead of the encoder) for 1 s of video.
        try writer.appendAudio(sine(frames: 12000, channels: 1, rate: 8000, startFrame: 0), time: t0)
        for gop in s.gops(
            count: 30, end: t0 + .init(seconds: 1), time: { t0 + .init(nanoseconds: Int64($0) * 33_333_333) })
        {
            try writer.append(gop)
        }
        try writer.close()
        let probe = try expectPlayable(path)
        #expect(probe.audio?["duration_ts"] == "8000")
        #expect(probe.video?["duration"] == "1.000000")
    }

    @Test func openMovieIsAPlayableFragmentedMovie() throws {
        let path = Fixture.directory.file("open.mov")
        let (writer, open) = try Fixture.writeMovie(
            path, Fixture.description(try Fixture.h264()), frames: 100, close: false)
        // 100 frames with keyframes every 30: three GOPs are complete and on disk.
        #expect(writer.fragmentsWritten == 3)
        let copy = Fixture.directory.file("open-copy.mov")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        let probe = try expectPlayable(copy)
        #expect(probe.video?["nb_read_packets"] == "90")
        #expect(topLevelTypes(copy) == ["ftyp", "moov", "moof", "mdat", "moof", "mdat", "moof", "mdat"])
        try writer.append(try #require(open))
        try writer.close()
        #expect(
            topLevelTypes(path) == [
                "ftyp", "free", "free", "mdat", "free", "mdat", "free", "mdat", "free", "mdat", "moov",
            ])
        #expect(try expectPlayable(path).video?["nb_frames"] == "100")
    }

    @Test func mediainfoReadsTheMovie() throws {
        guard which("mediainfo") != nil else {
            Issue.record("mediainfo is not installed (make deps installs it)")
            return
        }
        let path = Fixture.directory.file("mediainfo.mov")
        _ = try Fixture.writeMovie(
            path, Fixture.description(try Fixture.h264(), audio: AudioTrackFormat(sampleRate: 48000, channels: 1)),
            frames: 60
        ) { w, t in
            try w.appendAudio(sine(frames: 1600, channels: 1, rate: 48000, startFrame: 0), time: t)
        }
        _ = try expectPlayable(path)
        let r = try runTool("mediainfo", ["--Output=JSON", path])
        let json = try JSONSerialization.jsonObject(with: r.stdoutData) as? [String: Any]
        let tracks = ((json?["media"] as? [String: Any])?["track"] as? [[String: Any]]) ?? []
        let general = tracks.first { $0["@type"] as? String == "General" }
        let video = tracks.first { $0["@type"] as? String == "Video" }
        let audio = tracks.first { $0["@type"] as? String == "Audio" }
        #expect(general?["Format"] as? String == "MPEG-4")
        #expect(general?["Format_Profile"] as? String == "QuickTime")
        #expect(video?["Format"] as? String == "AVC")
        #expect(video?["FrameCount"] as? String == "60")
        #expect(audio?["Format"] as? String == "PCM")
    }

    @Test func rejectsBadInputWithClearErrors() throws {
        let s = try Fixture.h264()
        let path = Fixture.directory.file("bad.mov")
        let writer = try MovieWriter(path: path, description: Fixture.description(s))
        let gops = s.gops(count: 60) { Timestamp(nanoseconds: 100 + Int64($0)) }
        try writer.append(gops[1])
        #expect(throws: MovieWriterError.timestampNotIncreasing(previous: gops[1].lastTime, got: gops[0].start)) {
            try writer.append(gops[0])
        }
        #expect(throws: MovieWriterError.noAudioTrack) { try writer.appendAudio([0, 0], time: .zero) }
        writer.abandon()

        #expect(throws: MovieWriterError.unsupportedAudio("a sample rate of 96000 Hz (1000 to 65535 Hz)")) {
            _ = try MovieWriter(
                path: path, description: Fixture.description(s, audio: AudioTrackFormat(sampleRate: 96000, channels: 2))
            )
        }
        let missing = Fixture.directory.file("no/such/dir/x.mov")
        do {
            _ = try MovieWriter(path: missing, description: Fixture.description(s))
            Issue.record("creating a movie in a missing directory succeeded")
        } catch {
            #expect(error.description.contains("does not exist"), "\(error)")
        }
        let empty = try MovieWriter(path: Fixture.directory.file("empty.mov"), description: Fixture.description(s))
        #expect(throws: MovieWriterError.noVideoSamples(path: Fixture.directory.file("empty.mov"))) {
            try empty.close()
        }
    }
}

/// A sine tone as interleaved 16-bit little-endian PCM.
func sine(frames: Int, channels: Int, rate: Int, startFrame: Int, frequency: Double = 440) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(frames * channels * 2)
    for i in 0..<frames {
        let v = Int16(8000 * sin(2 * Double.pi * frequency * Double(startFrame + i) / Double(rate)))
        for _ in 0..<channels {
            out.append(UInt8(truncatingIfNeeded: v))
            out.append(UInt8(truncatingIfNeeded: v >> 8))
        }
    }
    return out
}

@Suite struct FileMovieOutputTests {
    @Test func aFullDiskIsReportedAsOutOfSpace() throws {
        // /dev/full answers every write with ENOSPC; `creating` opens it as it is (`updating`,
        // repair's way in, refuses anything but a regular file).
        let output = try FileMovieOutput(creating: "/dev/full")
        #expect(
            throws: FileError(
                path: "/dev/full", operation: "write", reason: "no space left on the device", isOutOfSpace: true)
        ) {
            try output.append([1, 2, 3])
        }
        #expect(output.length == 0)
        try output.close()
    }

    @Test func otherErrorsGiveTheCLibrarysWords() throws {
        #expect(
            throws: FileError(
                path: "/nonexistent.mov", operation: "open", reason: "No such file or directory", isMissing: true)
        ) {
            _ = try FileMovieOutput(updating: "/nonexistent.mov")
        }
    }

    /// Repair opens nothing but a regular file: a named pipe would block it for ever, and a
    /// directory or a device is not a movie. The error says what the thing is and what to do.
    @Test func repairOpensOnlyARegularFile() throws {
        let dir = try TemporaryDirectory("vigil-file")
        defer { dir.remove() }
        let fifo = dir.file("clip.mov")
        #expect(mkfifo(fifo, 0o600) == 0)
        for (path, kind) in [(dir.path, "a directory"), ("/dev/full", "a device"), (fifo, "a named pipe (FIFO)")] {
            let reason = "it is \(kind), not a regular file; refusing — move it out of the storage directory"
            #expect(throws: FileError(path: path, operation: "open", reason: reason, isNotRegularFile: true)) {
                _ = try FileMovieOutput(updating: path)
            }
        }
    }

    @Test func readsWhatItWroteAndCutsTheTail() throws {
        let dir = try TemporaryDirectory("vigil-file")
        defer { dir.remove() }
        let path = dir.file("x.mov")
        let output = try FileMovieOutput(creating: path)
        try output.append(Array(0..<100))
        try output.overwrite(at: 10, with: [255, 255])
        try output.synchronize()
        #expect(try output.read(at: 8, count: 5) == [8, 9, 255, 255, 12])
        #expect(try output.read(at: 98, count: 10) == [98, 99])
        try output.truncate(to: 50)
        try output.close()
        let reopened = try FileMovieOutput(updating: path)
        #expect(reopened.length == 50)
        #expect(try reopened.read(at: 45, count: 10) == [45, 46, 47, 48, 49])
        try reopened.close()
    }
}
