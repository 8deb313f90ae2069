// What libx264 itself holds at a picture size, with the agent's encoder settings, measured in
// a process of its own (`vigil-bench --encoder-memory WxH`, spawned by the bench): the
// resident set before the encoder opens, then its peak after 90 frames. The difference is
// the floor any recorder that encodes with libx264 in-process pays, whatever it does around
// the encoder; the agent's peak less this and its pre-roll ring is what Vigil itself holds.

import Capture
import Foundation
import H264
import Media

/// In the child: encodes 90 frames of the noisy static scene and prints
/// `rss_before=BYTES hwm_after=BYTES`.
func encoderMemoryChild(width: Int, height: Int) throws {
    let scene = SyntheticScene(
        width: width, height: height, frameRate: Rational(30, 1), seed: 2024, noiseSigma: 3, schedule: .empty)
    let source = try SyntheticSource(scene: scene)
    // The source's tables and its frame buffer exist before the measurement starts.
    guard let first = try source.nextFrame() else { throw UsageError("the synthetic scene gave no frame") }
    var frame: VideoFrame? = first
    let settings = try defaultEncoderSettings()
    let before = processStatus("VmRSS") ?? 0
    let encoder = try X264Encoder(format: source.format, settings: settings.x264)
    var keyframes = KeyframeSchedule(interval: .init(seconds: settings.keyframeInterval))
    for _ in 0..<90 {
        guard let f = frame else { break }
        _ = try encoder.encode(f, keyframe: keyframes.keyframeDue(at: f.timestamp))
        frame = nil  // back to the source's pool before the next is rendered
        frame = try source.nextFrame()
    }
    _ = try encoder.flush()
    print("rss_before=\(before) hwm_after=\(processStatus("VmHWM") ?? 0)")
}

/// In the bench: libx264's own resident memory at `width × height`, in bytes.
func encoderMemory(width: Int, height: Int, in dir: String) throws -> Int {
    let r = try MeasuredProcess.run(
        siblingExecutable("vigil-bench"), ["--encoder-memory", "\(width)x\(height)"],
        outputPath: dir + "/encoder-memory.log")
    guard !r.signalled, r.status == 0,
        let line = r.output.split(separator: "\n").last(where: { $0.hasPrefix("rss_before=") }),
        let before = logValue(line, "rss_before").flatMap(Int.init),
        let after = logValue(line, "hwm_after").flatMap(Int.init)
    else {
        throw AgentRunError(description: "vigil-bench --encoder-memory \(width)x\(height) failed:\n\(r.output)")
    }
    return after - before
}
