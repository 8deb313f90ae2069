import Foundation
import TestSupport

/// The host's half: every clip the VM wrote, through ffprobe and a full ffmpeg decode, then
/// its size, rate, keyframes, sound, and how well sound and picture line up.
enum ClipChecks {
    static func run(out: String, _ r: Report) {
        r.section("clips the VM wrote, checked on the host")
        let expectations: Expectations
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: out + "/expectations.json"))
            expectations = try JSONDecoder().decode(Expectations.self, from: data)
        } catch {
            r.fail("cannot read \(out)/expectations.json (did the VM run?): \(error)")
            return
        }
        let scenarios = Set(expectations.clips.map(\.scenario))
        r.check(
            scenarios.isSuperset(of: ["record", "hd", "recover"]), "the VM left clips from every agent scenario",
            "\(expectations.clips.count) clips from \(scenarios.sorted().joined(separator: ", "))")
        for clip in expectations.clips { check(clip, latency: expectations.pictureLatency, r) }
    }

    static func check(_ clip: ClipExpectation, latency: [Double], _ r: Report) {
        let name = (clip.file as NSString).lastPathComponent + " (\(clip.scenario))"
        guard FileManager.default.fileExists(atPath: clip.file) else {
            r.fail("\(name): missing")
            return
        }
        do {
            let probe = try FFprobe.probe(clip.file)
            let errors = try FFmpeg.decodeErrors(clip.file)
            r.check(errors.isEmpty, "\(name): a full ffmpeg decode reports nothing", errors)
            guard let video = probe.video else {
                r.fail("\(name): no video stream")
                return
            }
            let duration = Double(video["duration"] ?? "") ?? 0
            let frames = Int(video["nb_read_packets"] ?? "") ?? 0
            r.figure(
                "\(name): \(video["codec_name"] ?? "?") \(video["width"] ?? "?")x\(video["height"] ?? "?") r_frame_rate \(video["r_frame_rate"] ?? "?") "
                    + "avg_frame_rate \(video["avg_frame_rate"] ?? "?"), \(frames) frames, \(fixed(duration, 3)) s"
                    + (probe.audio.map { a in
                        "; audio \(a["codec_name"] ?? "?") \(a["sample_rate"] ?? "?") Hz \(a["channels"] ?? "?") ch, start \(a["start_time"] ?? "?") s, \(a["duration"] ?? "?") s"
                    } ?? "; no audio"))
            r.check(
                video["codec_name"] == "h264" && video["width"] == String(clip.width)
                    && video["height"] == String(clip.height),
                "\(name): H.264 at the negotiated \(clip.width)x\(clip.height)")

            let packets = try FFprobe.videoPackets(clip.file)
            let rate = clip.frameRate.split(separator: "/").compactMap { Double($0) }
            let period = rate.count == 2 && rate[0] > 0 ? rate[1] / rate[0] : 0.04
            // The rate comes from the camera's timestamps: the typical interval is the camera's
            // period. (ffprobe's r_frame_rate, printed above, is a guess that a few late frames
            // throw off: vivid stamps frames when its thread gets to run, and a loaded host
            // delays it now and then.)
            let intervals = zip(packets, packets.dropFirst()).map { $1.time - $0.time }.sorted()
            let median = intervals.isEmpty ? 0 : intervals[intervals.count / 2]
            let offGrid = intervals.filter { abs($0 / period - ($0 / period).rounded()) * period > 0.002 }.count
            r.check(
                abs(median - period) < 0.0005 && offGrid * 10 <= intervals.count,
                "\(name): frame rate \(clip.frameRate) from the camera's timestamps",
                "median interval \(fixed(median * 1000, 1)) ms, \(offGrid) of \(intervals.count) off the \(fixed(period * 1000, 1)) ms grid"
            )
            let keys = packets.filter(\.isKey).map(\.time)
            let keyGaps = zip(keys, keys.dropFirst()).map { $1 - $0 }
            let lost = packets.map { Int(($0.duration / period).rounded()) - 1 }.reduce(0, +)
            r.figure(
                "\(name): keyframes at \(keys.map { fixed($0, 2) }.joined(separator: ", ")) s; \(lost) frame interval(s) missing"
            )
            r.check(packets.first?.isKey == true, "\(name): starts with a keyframe")
            // The encoder makes a keyframe of the first frame at or after each second of capture
            // time: keyframes are at most a second and a frame interval apart.
            let longest = 1.0 + (packets.map(\.duration).max() ?? period) + 0.002
            r.check(
                !keys.isEmpty && keyGaps.allSatisfy { $0 <= longest }
                    && (packets.last?.time ?? 0) - (keys.last ?? 0) < longest,
                "\(name): a keyframe every second (the first frame at or after each second)",
                keyGaps.map { fixed($0, 2) }.joined(separator: " "))
            r.check(keyGaps.allSatisfy { $0 >= 1.0 - period - 0.002 }, "\(name): and no more often")

            if clip.audio {
                guard let audio = probe.audio else {
                    r.fail("\(name): no audio stream")
                    return
                }
                r.check(
                    audio["codec_name"] == "pcm_s16le" && audio["sample_rate"] == "48000" && audio["channels"] == "1",
                    "\(name): 16-bit PCM, 48 kHz mono")
                let start = Double(audio["start_time"] ?? "") ?? -1, length = Double(audio["duration"] ?? "") ?? 0
                r.check(
                    start >= 0 && start + length <= duration + period, "\(name): sound lies within the picture's time",
                    "\(fixed(start, 3))+\(fixed(length, 3)) of \(fixed(duration, 3)) s")
                if let changeAfterOnset = clip.changeAfterOnset {
                    try alignment(
                        clip, name: name, packets: packets, audioStart: start, changeAfterOnset: changeAfterOnset,
                        latency: latency, period: period, r)
                }
            } else {
                r.check(probe.audio == nil, "\(name): no audio stream (no microphone)")
            }
        } catch {
            r.fail("\(name): \(error)")
        }
    }

    /// The picture turned white `changeAfterOnset` seconds after the tone began; vivid shows a
    /// change `latency` later. So in the clip the first white frame should come that much after
    /// the first sound — whatever is left over is the misalignment.
    static func alignment(
        _ clip: ClipExpectation, name: String, packets: [(time: Double, duration: Double, isKey: Bool, size: Int)],
        audioStart: Double,
        changeAfterOnset: Double, latency: [Double], period: Double, _ r: Report
    ) throws {
        let gray = try runTool(
            "ffmpeg",
            [
                "-nostdin", "-v", "error", "-i", clip.file, "-map", "0:v", "-fps_mode", "passthrough",
                "-vf", "scale=32:24,format=gray", "-f", "rawvideo", "-",
            ])
        let pcm = try runTool(
            "ffmpeg",
            ["-nostdin", "-v", "error", "-i", clip.file, "-map", "0:a", "-f", "s16le", "-acodec", "pcm_s16le", "-"])
        guard gray.status == 0, pcm.status == 0 else {
            r.fail("\(name): decoding for the alignment check failed: \(gray.stderr) \(pcm.stderr)")
            return
        }
        let pixels = [UInt8](gray.stdoutData)
        let perFrame = 32 * 24
        let means = stride(from: 0, to: pixels.count - perFrame + 1, by: perFrame).map { start in
            Double(pixels[start..<start + perFrame].reduce(0) { $0 + Int($1) }) / Double(perFrame)
        }
        let samples = [UInt8](pcm.stdoutData)
        var firstLoud: Int?
        for i in 0..<samples.count / 2 {
            let s = Int16(bitPattern: UInt16(samples[2 * i]) | UInt16(samples[2 * i + 1]) << 8)
            if abs(Int(s)) > 2000 {
                firstLoud = i
                break
            }
        }
        guard means.count == packets.count, let white = means.firstIndex(where: { $0 > 200 }), let firstLoud else {
            r.fail(
                "\(name): the white picture or the tone is not in the clip (\(means.count) frames decoded of \(packets.count))"
            )
            return
        }
        let pictureAt = packets[white].time
        let soundAt = audioStart + Double(firstLoud) / 48000
        let expected = changeAfterOnset + median(latency)
        let error = (pictureAt - soundAt) - expected
        r.figure(
            "\(name): tone begins at \(fixed(soundAt, 4)) s, first white frame at \(fixed(pictureAt, 4)) s in the clip; "
                + "expected the picture \(fixed(expected * 1000, 1)) ms after the sound (change \(fixed(changeAfterOnset * 1000, 1)) ms + vivid's latency "
                + "\(fixed(median(latency) * 1000, 1)) ms): audio/video offset \(fixed(error * 1000, 1)) ms")
        r.check(
            !latency.isEmpty && abs(error) <= period,
            "\(name): sound and picture line up within one frame (\(fixed(period * 1000, 0)) ms)",
            "\(fixed(error * 1000, 1)) ms")
    }
}
