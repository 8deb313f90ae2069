// The whole agent against the encoder alone: `vigil run` (a release build, as a child
// process) on a Y4M file of synthetic frames with events in them, its CPU time from wait4,
// against an in-process x264 loop over the same frames with the same settings, and against
// ffmpeg encoding the same file into a .mov. Then the agent in real time on its synthetic
// camera: peak memory with 10 s of pre-roll, frames dropped, and how soon after a trigger
// the clip is on disk.

import Capture
import Configuration
import Foundation
import H264
import Media
import MotionDetection

/// The scene the pipeline measurements run on: the textured background with sensor noise,
/// and in every 10 s something crossing (2–5 s) and a parcel appearing (6.5–8.5 s), so that
/// the agent records clips as it would in a yard.
func eventScene(width: Int, height: Int, seconds: Double) -> SyntheticScene {
    let s = { (x: Double) in Timestamp.Duration(seconds: x) }
    let schedule = SceneSchedule(
        objects: [
            SceneObject(
                enter: s(2), leave: s(5), path: .leftToRight(y: 0.6), width: 0.12, height: 0.3, brightness: 215),
            SceneObject(
                enter: s(6.5), leave: s(8.5), path: .still(x: 0.3, y: 0.7), width: 0.1, height: 0.12, brightness: 190),
        ], period: s(10))
    return SyntheticScene(
        width: width, height: height, frameRate: Rational(30, 1), pixelFormat: .i420, seed: 2024,
        noiseSigma: 3, schedule: schedule, duration: s(seconds))
}

/// Writes every frame of `scene` (I420) to a YUV4MPEG2 file; returns the number of frames.
func writeY4M(_ scene: SyntheticScene, to path: String) throws -> Int {
    let source = try SyntheticSource(scene: scene)
    guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path)
    else {
        throw UsageError("cannot create \(path)")
    }
    defer { try? handle.close() }
    let rate = scene.frameRate
    try handle.write(contentsOf: Y4MHeader.line(width: scene.width, height: scene.height, rate: rate))
    var bytes: [UInt8] = []
    var frames = 0
    while let frame = try source.nextFrame() {
        bytes.removeAll(keepingCapacity: true)
        Y4MHeader.appendFrame(frame, to: &bytes)
        try handle.write(contentsOf: bytes)
        frames += 1
    }
    return frames
}

/// The default motion settings, with the dynamic background on or off.
func motionSettings(dynamicBackground: Bool) throws -> MotionSettings {
    var settings = try Settings.defaults().motion
    settings.dynamicBackground = dynamicBackground
    return settings
}

/// CPU seconds of the in-process x264 loop over the file's frames (opening, every frame,
/// flushing), of the motion detector over the same frames before the encoder sees them, as in
/// the agent (with the dynamic background on, and off as by default), and of reading them
/// from the file (as the agent's file source does), each counted apart.
func encodeAlone(
    _ path: String, settings: Settings.Encoder
) throws -> (encode: Double, detect: Double, detectPlain: Double, read: Double, frames: Int) {
    let source = try Y4MSource(path: path)
    var encode = 0.0, detect = 0.0, detectPlain = 0.0, read = 0.0, frames = 0
    var t = processCPUSeconds()
    let encoder = try X264Encoder(format: source.format, settings: settings.x264)
    var keyframes = KeyframeSchedule(interval: .init(seconds: settings.keyframeInterval))
    encode += processCPUSeconds() - t
    var detector = MotionDetector(settings: try motionSettings(dynamicBackground: true))
    var plain = MotionDetector(settings: try motionSettings(dynamicBackground: false))
    while true {
        t = processCPUSeconds()
        guard let frame = try source.nextFrame() else { break }
        read += processCPUSeconds() - t
        // In the agent's order (Pipeline.process): detection, then the encoder. The two
        // detectors take turns going first (the first reads the frame from memory).
        func timed(_ d: inout MotionDetector) -> Double {
            let start = processCPUSeconds()
            _ = d.process(frame.luma, at: frame.timestamp)
            return processCPUSeconds() - start
        }
        if frames % 2 == 0 {
            detect += timed(&detector)
            detectPlain += timed(&plain)
        } else {
            detectPlain += timed(&plain)
            detect += timed(&detector)
        }
        t = processCPUSeconds()
        _ = try encoder.encode(frame, keyframe: keyframes.keyframeDue(at: frame.timestamp))
        encode += processCPUSeconds() - t
        frames += 1
    }
    t = processCPUSeconds()
    _ = try encoder.flush()
    encode += processCPUSeconds() - t
    return (encode, detect, detectPlain, read, frames)
}

struct AgentRunError: Error, CustomStringConvertible {
    var description: String
}

/// The camera name of every agent the bench starts: its own, so that a second bench or the
/// instruction gate running at the same time on this machine is not refused as another agent
/// recording a camera of the same name.
let benchCameraName = "bench-\(getpid())"

/// A configuration at the shipped defaults reading `footage` as fast as it goes into `storage`,
/// logging at info without stats lines, written to `path`.
func writeFileSourceConfig(_ path: String, footage: String, storage: String) throws {
    try """
    camera = { device = "file:\(footage)"; name = "\(benchCameraName)"; realtime = false; };
    storage = { path = "\(storage)"; min_free_mb = 1; };
    log = { level = "info"; stats_interval = 0; };
    """.write(toFile: path, atomically: true, encoding: .utf8)
}

/// `vigil run` on the file, as fast as it goes, with the shipped defaults but for storage and
/// logging; its CPU seconds (all threads, from wait4) and the clips it wrote.
func agentOnFile(
    _ vigil: String, footage: String, in dir: String, label: String
) throws -> (cpu: Double, clips: Int, peakRSS: Int) {
    let storage = dir + "/clips-\(label)"
    try? FileManager.default.removeItem(atPath: storage)
    let config = dir + "/file-\(label).conf"
    try writeFileSourceConfig(config, footage: footage, storage: storage)
    let r = try MeasuredProcess.run(vigil, ["run", "--config", config], outputPath: dir + "/file-\(label).log")
    guard !r.signalled, r.status == 0 else {
        throw AgentRunError(
            description: "vigil run on \(footage) exited \(r.signalled ? "on signal " : "")\(r.status):\n\(r.output)")
    }
    let clips = r.output.split(separator: "\n").filter { $0.contains("msg=\"clip saved\"") }.count
    try? FileManager.default.removeItem(atPath: storage)
    return (r.cpuSeconds, clips, r.peakRSS)
}

/// ffmpeg's libx264 on the same file into a .mov, with the settings a user would pick for a
/// camera (`-preset ultrafast -tune zerolatency -g 30`, CRF 23 by default); its CPU seconds.
func ffmpegOnFile(_ ffmpeg: String, footage: String, in dir: String) throws -> Double {
    let output = dir + "/ffmpeg.mov"
    let r = try MeasuredProcess.run(
        ffmpeg, ffmpegArguments(footage: footage, output: output), outputPath: dir + "/ffmpeg.log")
    try? FileManager.default.removeItem(atPath: output)
    guard !r.signalled, r.status == 0 else {
        throw AgentRunError(description: "ffmpeg exited \(r.status): \(r.output)")
    }
    return r.cpuSeconds
}

/// ffmpeg's command line for the file into a .mov (see `ffmpegOnFile`).
func ffmpegArguments(footage: String, output: String) -> [String] {
    [
        "-nostdin", "-v", "error", "-y", "-i", footage, "-c:v", "libx264", "-preset", "ultrafast",
        "-tune", "zerolatency", "-g", "30", output,
    ]
}

/// What the agent did in real time on its synthetic camera.
struct RealtimeFigures {
    var peakRSS: Int
    var peakFileRSS: Int
    /// The most the pre-roll ring held (from the stats lines, every second).
    var peakRingBytes: Int
    /// The seconds of video it held then (from the oldest keyframe to the newest frame).
    var peakRingSeconds: Double
    var framesIn: Int
    /// Frames lost at the source, dropped at capture, and samples dropped at the writer.
    var dropped: Int
    /// For each event: seconds from the trigger to the clip's first fragment being synced,
    /// and to the fragment holding the triggering frame being synced.
    var firstFragment: [Double]
    var triggerFragment: [Double]
    var clips: Int
}

/// `vigil run` on the synthetic camera at `width`×`height`, 30 fps, with `pre_roll` 10 s, for
/// `seconds` of real time (the demo scene has events 5 s and 25 s in), then SIGTERM.
func agentRealtime(_ vigil: String, width: Int, height: Int, seconds: Double, in dir: String) throws -> RealtimeFigures
{
    let label = "\(width)x\(height)"
    let storage = dir + "/clips-rt-\(label)"
    try? FileManager.default.removeItem(atPath: storage)
    let config = dir + "/rt-\(label).conf"
    try """
    camera = { device = "synthetic"; name = "\(benchCameraName)"; width = \(width); height = \(height); fps = 30.0; };
    recording = { pre_roll = 10.0; post_roll = 2.0; };
    storage = { path = "\(storage)"; min_free_mb = 1; };
    log = { level = "debug"; stats_interval = 1; };
    """.write(toFile: config, atomically: true, encoding: .utf8)
    let agent = try MeasuredProcess(vigil, ["run", "--config", config], outputPath: dir + "/rt-\(label).log")
    usleep(UInt32(seconds * 1_000_000))
    agent.child.signal(.terminate)
    let r = agent.wait()
    defer { try? FileManager.default.removeItem(atPath: storage) }
    guard !r.signalled, r.status == 0 else {
        throw AgentRunError(
            description:
                "vigil run (synthetic \(label)) exited \(r.signalled ? "on signal " : "")\(r.status):\n\(r.output)")
    }
    let lines = r.output.split(separator: "\n")
    guard let stopped = lines.last(where: { $0.contains("msg=\"vigil stopped\"") }) else {
        throw AgentRunError(description: "vigil run (synthetic \(label)) did not log its stop:\n\(r.output)")
    }
    let number = { (key: String) in Int(logValue(stopped, key) ?? "") ?? 0 }
    var first: [Double] = [], trigger: [Double] = []
    var seenFirst = Set<String>(), seenTrigger = Set<String>()
    for line in lines where line.contains("msg=\"fragment on disk\"") && logValue(line, "part") == "1" {
        guard let file = logValue(line, "file"), let since = logValue(line, "since_trigger").flatMap(Double.init),
            let through = logValue(line, "through").flatMap(Double.init)
        else { continue }
        if seenFirst.insert(file).inserted { first.append(since) }
        if through > 0, seenTrigger.insert(file).inserted { trigger.append(since) }
    }
    // The stats line where the ring held the most bytes, and how many seconds those were.
    let ring = lines.compactMap { line -> (bytes: Int, seconds: Double)? in
        guard let bytes = logValue(line, "ring_bytes").flatMap(Int.init),
            let seconds = logValue(line, "ring_s").flatMap(Double.init)
        else { return nil }
        return (bytes, seconds)
    }.max { $0.bytes < $1.bytes }
    return RealtimeFigures(
        peakRSS: r.peakRSS, peakFileRSS: r.peakFileRSS, peakRingBytes: ring?.bytes ?? 0,
        peakRingSeconds: ring?.seconds ?? 0, framesIn: number("frames_total"),
        dropped: number("lost_at_source_total") + number("dropped_at_capture_total")
            + number("dropped_at_writer_total"),
        firstFragment: first, triggerFragment: trigger, clips: number("clips_total"))
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// Measures the whole agent at one size and records it in `table`; returns the raw figures for the JSON.
func measureAgent(
    width: Int, height: Int, column: String, options: Options, table: inout BenchTable
) throws -> [String: Any] {
    let vigil = siblingExecutable("vigil")
    guard FileManager.default.isExecutableFile(atPath: vigil) else {
        throw UsageError("\(vigil) is not built; run `make bench` (it builds vigil and vigil-bench in release mode)")
    }
    let dir = NSTemporaryDirectory() + "vigil-bench-\(getpid())-\(width)x\(height)"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    // The same number of pixels at every size (`seconds` of 1080p), so that each run is long
    // enough for the agent's start-up (about 20 ms of CPU) not to count.
    let footage = dir + "/events.y4m"
    let seconds = (options.seconds * Double(1920 * 1080) / Double(width * height) * 30).rounded() / 30
    let frames = try writeY4M(eventScene(width: width, height: height, seconds: seconds), to: footage)

    // Interleaved, so that whatever else the machine does falls on all three alike; medians.
    var alone: [Double] = [], detect: [Double] = [], detectPlain: [Double] = [], read: [Double] = []
    var agent: [Double] = [], peer: [Double] = []
    var clips = 0
    let ffmpeg = which("ffmpeg")
    for round in 0..<options.repeats {
        let e = try encodeAlone(footage, settings: defaultEncoderSettings())
        precondition(e.frames == frames, "read \(e.frames) of \(frames) frames")
        alone.append(e.encode)
        detect.append(e.detect)
        detectPlain.append(e.detectPlain)
        read.append(e.read)
        let a = try agentOnFile(vigil, footage: footage, in: dir, label: "\(round)")
        agent.append(a.cpu)
        clips = a.clips
        if let ffmpeg { peer.append(try ffmpegOnFile(ffmpeg, footage: footage, in: dir)) }
    }
    try? FileManager.default.removeItem(atPath: footage)
    let perFrame = { (seconds: Double) in seconds * 1000 / Double(frames) }
    let x264 = median(alone), whole = median(agent), detection = median(detect)
    table.record("x264 alone, same frames and settings, CPU", unit: "ms/frame", column: column, value: perFrame(x264))
    table.record("vigil run, whole pipeline, CPU", unit: "ms/frame", column: column, value: perFrame(whole))
    table.record("vigil run / x264 alone (goal ≤ 1.05)", unit: "ratio", column: column, value: whole / x264)
    if ffmpeg != nil {
        table.record("ffmpeg libx264 → .mov, CPU", unit: "ms/frame", column: column, value: perFrame(median(peer)))
        table.record("ffmpeg / x264 alone", unit: "ratio", column: column, value: median(peer) / x264)
        // Each round's two runs side by side, then the median of those ratios.
        table.record(
            "vigil run / ffmpeg, whole process, median of pairs (goal ≤ 1.00)", unit: "ratio", column: column,
            value: median(zip(agent, peer).map { $0 / $1 }))
    }
    table.record(
        "motion detection with dynamic background, CPU", unit: "ms/frame", column: column, value: perFrame(detection))
    table.record(
        "motion detection with dynamic background / x264 (goal < 3 %)", unit: "%", column: column,
        value: 100 * detection / x264)
    table.record(
        "motion detection without dynamic background, CPU", unit: "ms/frame", column: column,
        value: perFrame(median(detectPlain)))
    table.record(
        "motion detection without dynamic background / x264", unit: "%", column: column,
        value: 100 * median(detectPlain) / x264)
    table.record(
        "dynamic background's share of detection", unit: "%", column: column,
        value: 100 * (detection - median(detectPlain)) / detection)
    table.record(
        "reading the Y4M file (the file source), CPU", unit: "ms/frame", column: column, value: perFrame(median(read)))
    table.record("reading the Y4M file / x264 encode", unit: "%", column: column, value: 100 * median(read) / x264)
    // The same run counted in instructions (callgrind): the same from run to run; ffmpeg on
    // the same frames, counted the same way.
    let counted =
        which("valgrind") != nil
        ? try countInstructions(vigil: vigil, ffmpeg: ffmpeg, width: width, height: height, in: dir) : nil
    let instructions = counted?.vigil, peerInstructions = counted?.ffmpeg
    if let instructions {
        record(instructions, column: column, table: &table)
        table.record(
            "vigil run / x264, instructions (goal ≤ 1.05)", unit: "ratio", column: column,
            value: instructions.whole / instructions.x264)
    }
    if let instructions, let peerInstructions {
        table.record(
            "instructions: ffmpeg libx264 → .mov, whole process", unit: "k instr/frame", column: column,
            value: peerInstructions.whole / 1000)
        table.record(
            "  of which x264 (libx264 and what it calls)", unit: "k instr/frame", column: column,
            value: peerInstructions.x264 / 1000)
        table.record(
            "vigil run / ffmpeg, instructions (goal ≤ 1.00)", unit: "ratio", column: column,
            value: instructions.whole / peerInstructions.whole)
    }

    let rt = try agentRealtime(vigil, width: width, height: height, seconds: options.realtimeSeconds, in: dir)
    let x264Memory = try encoderMemory(width: width, height: height, in: dir)
    let mb = { (bytes: Int) in Double(bytes) / 1_048_576 }
    table.record("real time 30 fps, pre_roll 10 s: peak RSS", unit: "MB", column: column, value: mb(rt.peakRSS))
    table.record("  of which libx264's own buffers (measured alone)", unit: "MB", column: column, value: mb(x264Memory))
    table.record("  of which the pre-roll ring at its fullest", unit: "MB", column: column, value: mb(rt.peakRingBytes))
    table.record(
        "    the seconds it held then (goal ≤ pre-roll + 1 GOP = 11)", unit: "s", column: column,
        value: rt.peakRingSeconds)
    table.record(
        "  the rest: Vigil, frames in flight, runtime, code", unit: "MB", column: column,
        value: mb(rt.peakRSS - x264Memory - rt.peakRingBytes))
    table.record(
        "    of which code and data of files (shared, clean)", unit: "MB", column: column, value: mb(rt.peakFileRSS))
    table.record(
        "    the rest's own memory: heap, frames (goal ≤ 12 at 1080p)", unit: "MB", column: column,
        value: mb(rt.peakRSS - x264Memory - rt.peakRingBytes - rt.peakFileRSS))
    table.record("real time 30 fps: frames dropped", unit: "frames", column: column, value: Double(rt.dropped))
    if let worst = rt.firstFragment.max() {
        table.record("trigger → clip's first fragment on disk (worst)", unit: "ms", column: column, value: worst * 1000)
    }
    if let worst = rt.triggerFragment.max() {
        table.record("trigger → triggering frame on disk (worst)", unit: "ms", column: column, value: worst * 1000)
    }
    return [
        "size": column, "frames": frames, "clips_per_run": clips,
        "x264_alone_cpu_s": alone, "vigil_run_cpu_s": agent, "ffmpeg_cpu_s": peer, "detection_cpu_s": detect,
        "detection_plain_cpu_s": detectPlain,
        "y4m_read_cpu_s": read,
        "x264_own_memory_bytes": x264Memory,
        "instructions_per_frame": instructions.map {
            ["whole": $0.whole, "x264": $0.x264, "beyond_x264": $0.beyondX264, "detection": $0.detection]
        } as Any,
        "ffmpeg_instructions_per_frame": peerInstructions.map { ["whole": $0.whole, "x264": $0.x264] } as Any,
        "realtime": [
            "seconds": options.realtimeSeconds, "frames_in": rt.framesIn, "dropped": rt.dropped,
            "peak_rss_bytes": rt.peakRSS, "peak_file_rss_bytes": rt.peakFileRSS,
            "peak_ring_bytes": rt.peakRingBytes, "peak_ring_seconds": rt.peakRingSeconds,
            "clips": rt.clips, "trigger_to_first_fragment_s": rt.firstFragment,
            "trigger_to_trigger_fragment_s": rt.triggerFragment,
        ],
    ]
}
