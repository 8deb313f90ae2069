import Foundation
import TestSupport

/// The host's half: every clip the VM wrote, through ffprobe and full decodes by ffmpeg and
/// GStreamer, then its size, rate, timestamps, keyframes, sound, and how well sound and picture
/// line up.
///
/// The VM may have been starved of CPU (a busy host, `DEVICE_TESTS_STRESS=1`): frames then come
/// late, are dropped or lost, and whole GOPs may be dropped before the disk. So these checks
/// judge what the file promises, whatever the load was — never how fast anything ran.
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
            let packets = try FFprobe.videoPackets(clip.file)

            // GStreamer: every frame, in increasing time, nothing warned of but the artefacts
            // `GStreamer.tolerated` documents (listed among the figures).
            let gst = try GStreamer.decode(clip.file)
            for line in gst.tolerated { r.figure("\(name): GStreamer, tolerated: \(line)") }
            let gstProblems = GStreamer.problems(of: gst, packets: frames)
            r.check(
                gstProblems.isEmpty, "\(name): a full GStreamer decode gives every frame and warns of nothing",
                gstProblems.joined(separator: " | "))
            // Two demuxers, one timeline: GStreamer's qtdemux puts each frame where libavformat does.
            let disagreeing = zip(gst.frames, packets).filter { gst, ff in
                gst.map { abs($0 - ff.time) > 0.0001 } ?? true
            }
            r.check(
                gst.frames.count == packets.count && disagreeing.isEmpty,
                "\(name): GStreamer and ffprobe give every frame the same time",
                disagreeing.prefix(3).map { "\($0.0.map { fixed($0, 6) } ?? "none") vs \(fixed($0.1.time, 6))" }
                    .joined(separator: ", "))
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

            let rate = clip.frameRate.split(separator: "/").compactMap { Double($0) }
            let period = rate.count == 2 && rate[0] > 0 ? rate[1] / rate[0] : 0.04
            let times = packets.map(\.time)
            let backwards = zip(times, times.dropFirst()).first { $1 <= $0 }
            r.check(
                backwards == nil, "\(name): presentation times strictly increase",
                backwards.map { "\(fixed($0.0, 6)) s, then \(fixed($0.1, 6)) s" } ?? "")
            // The rate comes from the camera's timestamps, put on the grid of its period by the
            // camera's timeline (`FrameTimeline`), which never puts two frames closer than half a
            // period: so no frame comes faster than the camera's rate, and most intervals are a
            // period or longer (frames dropped or lost). How many are a period, or off the grid,
            // is a figure, not a check: a starved agent drops frames, and a starved vivid stamps
            // frames late and unevenly, which restarts the grid (seen: not one interval of a
            // period in a short clip). (ffprobe's r_frame_rate, printed above, is a guess such
            // frames throw off.)
            let intervals = zip(times, times.dropFirst()).map { $1 - $0 }.sorted()
            let median = intervals.isEmpty ? 0 : intervals[intervals.count / 2]
            let onePeriod = intervals.filter { abs($0 - period) < 0.0005 }.count
            let offGrid = intervals.filter { abs($0 / period - ($0 / period).rounded()) * period > 0.002 }.count
            r.check(
                !intervals.isEmpty && median >= 0.9 * period && intervals[0] >= period / 2 - 0.0005,
                "\(name): frames no faster than the camera's \(clip.frameRate): the median interval at least its period, none under half",
                "median \(fixed(median * 1000, 1)) ms, shortest \(fixed((intervals.first ?? 0) * 1000, 1)) ms"
            )
            let lost = packets.map { Int(($0.duration / period).rounded()) - 1 }.reduce(0, +)
            r.figure(
                "\(name): \(onePeriod) intervals of a period, \(offGrid) of \(intervals.count) intervals off the \(fixed(period * 1000, 1)) ms grid; \(lost) frame interval(s) missing"
            )
            keyframes(packets, name: name, r)

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

    /// Keyframes as the encoder places them (`KeyframeSchedule`): on the first frame at or after
    /// each second of capture time, the seconds counted from the stream's first frame. Frames
    /// that come late, are dropped or lost, and GOPs dropped before the disk move keyframes off
    /// whole seconds, and the file cannot tell where the seconds fell; what it must show anyway:
    /// - every frame is less than a second after the latest keyframe (the frame before a
    ///   keyframe came before the boundary the keyframe crossed): two keyframes are at most a
    ///   second apart plus the interval of the frame that crossed the boundary — one frame
    ///   period normally, more after lost frames or a dropped GOP (the movie keeps the gap);
    /// - a keyframe comes no sooner than a second after the boundary the keyframe before it
    ///   crossed, and that boundary lies after the frame before that keyframe: so two keyframes
    ///   are more than a second apart minus the earlier keyframe's own interval. The clip's
    ///   first keyframe has no frame before it in the clip (a clip starts at a keyframe of the
    ///   ring, which may have come late), so its GOP may be short: this bound holds from the
    ///   first full GOP on.
    static func keyframes(
        _ packets: [(time: Double, duration: Double, isKey: Bool, size: Int)], name: String, _ r: Report
    ) {
        let rounding = 0.001  // timestamps are in 1/90000 s; capture times in ns
        let keys = packets.indices.filter { packets[$0].isKey }
        r.figure("\(name): keyframes at \(keys.map { fixed(packets[$0].time, 2) }.joined(separator: ", ")) s")
        r.check(packets.first?.isKey == true, "\(name): starts with a keyframe")
        var late: [String] = [], early: [String] = []
        for (a, b) in zip(keys, keys.dropFirst()) {
            let gap = packets[b].time - packets[a].time
            let crossing = packets[b].time - packets[b - 1].time
            if gap > 1 + crossing + rounding {
                late.append(
                    "\(fixed(gap, 3)) s to \(fixed(packets[b].time, 2)) s (its frame interval \(fixed(crossing, 3)) s)")
            }
            if a > 0 {
                let own = packets[a].time - packets[a - 1].time
                if gap < 1 - own - rounding {
                    early.append(
                        "\(fixed(gap, 3)) s to \(fixed(packets[b].time, 2)) s (the earlier keyframe's interval \(fixed(own, 3)) s)"
                    )
                }
            }
        }
        if let last = keys.last, let end = packets.last?.time, end - packets[last].time >= 1 + rounding {
            late.append("the last frame \(fixed(end - packets[last].time, 3)) s after the last keyframe")
        }
        let gaps = zip(keys, keys.dropFirst()).map { fixed(packets[$1].time - packets[$0].time, 3) }
        r.check(
            !keys.isEmpty && late.isEmpty,
            "\(name): a keyframe every second: every frame less than a second after the latest keyframe",
            late.isEmpty ? gaps.joined(separator: " ") : late.joined(separator: "; "))
        r.check(
            early.isEmpty, "\(name): and no more often (from the first full GOP on)",
            early.joined(separator: "; "))
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
        // vivid shows a change at its next frame: `latency` spans one frame period (the rounds
        // of the latency scenario change the pattern at points spread over a period, so their
        // spread is at most a period, a little less for eight samples; wider when the VM is
        // starved). So the change shows between the largest latency less a period and the
        // smallest plus a period (and never outside what was measured), 15 ms more either way
        // for the stamps' wobble: the microphone's chunks carry snd-aloop's timer jitter (up to
        // 10 ms) and vivid's frames a few ms of their own when the VM is starved (a CI run on a
        // loaded host saw the picture 7.8 ms before a 5 ms allowance). Still well inside a frame
        // period, so a clip off by a frame or an audio period fails. Where the clip has every
        // frame around the change, the first white frame must come in that window; where frames
        // before it were dropped or lost (a starved agent), the change lies between the frame
        // before it and it, and that interval must meet the window.
        let previousAt = white > 0 ? packets[white - 1].time : -Double.infinity
        let shortest = min(latency.min() ?? 0, (latency.max() ?? 0) - period)
        let longest = max(latency.max() ?? 0, (latency.min() ?? 0) + period)
        let wobble = 0.015
        let earliest = soundAt + changeAfterOnset + shortest - wobble
        let latest = soundAt + changeAfterOnset + longest + wobble
        let gapBefore = pictureAt - previousAt > 1.5 * period
        r.check(
            !latency.isEmpty && pictureAt >= earliest && (gapBefore ? previousAt < latest : pictureAt <= latest),
            "\(name): sound and picture line up: the picture changes as long after the sound as vivid's latency allows",
            "first white frame \(fixed((pictureAt - soundAt - changeAfterOnset) * 1000, 1)) ms after the change"
                + (gapBefore
                    ? ", the frame before it \(fixed((previousAt - soundAt - changeAfterOnset) * 1000, 1)) ms" : "")
                + "; vivid's latency \(fixed((latency.min() ?? 0) * 1000, 1))...\(fixed((latency.max() ?? 0) * 1000, 1)) ms measured, "
                + "\(fixed(shortest * 1000, 1))...\(fixed(longest * 1000, 1)) ms allowed, ± \(fixed(wobble * 1000, 0)) ms"
        )
    }
}
