import Capture
import Foundation
import H264
import Media
import QuickTime
import Storage
import TestSupport
import Testing

/// Small scenes keep the debug-build tests fast.
func scene(
    width: Int = 160, height: Int = 120, rate: Rational = Rational(30, 1), seconds: Double,
    schedule: SceneSchedule = .empty, bytesPerLine: Int? = nil, pixelFormat: PixelFormat = .nv12,
    startTime: Timestamp = .zero
) throws -> SyntheticSource {
    try SyntheticSource(
        scene: SyntheticScene(
            width: width, height: height, frameRate: rate, pixelFormat: pixelFormat, bytesPerLine: bytesPerLine,
            seed: 7, noiseSigma: 3, schedule: schedule, duration: Timestamp.Duration(seconds: seconds),
            startTime: startTime))
}

/// x264 settings as the shipped configuration has them (ultrafast, zerolatency, High, CRF 23,
/// no rate cap), but for what a test changes.
func x264Settings(
    preset: EncoderSettings.Preset = .ultrafast, tune: [EncoderSettings.Tune] = [.zerolatency],
    profile: EncoderSettings.Profile = .high, rateCap: EncoderSettings.RateCap = .uncapped, threads: Int
) -> EncoderSettings {
    EncoderSettings(preset: preset, tune: tune, profile: profile, crf: 23, rateCap: rateCap, threads: threads)
}

/// Settings that make x264's output a function of its input alone (one thread).
let deterministic = x264Settings(threads: 1)

/// The indices of `times` a keyframe schedule of `interval` seconds makes keyframes.
func scheduledKeyframes(_ times: [Timestamp], interval: Double = 1) -> [Int] {
    var schedule = KeyframeSchedule(interval: .init(seconds: interval))
    return times.indices.filter { schedule.keyframeDue(at: times[$0]) }
}

/// Encodes every frame, a keyframe where a schedule of `interval` seconds puts one (as the
/// agent does), then flushes the encoder; returns all samples in output order.
func encodeAll(_ frames: [VideoFrame], encoder: X264Encoder, interval: Double = 1) throws -> [EncodedSample] {
    let keys = Set(scheduledKeyframes(frames.map(\.timestamp), interval: interval))
    var samples: [EncodedSample] = []
    for (i, frame) in frames.enumerated() {
        samples += try encoder.encode(frame, keyframe: keys.contains(i))
    }
    samples += try encoder.flush()
    return samples
}

func allFrames(_ source: some FrameSource) throws -> [VideoFrame] {
    var frames: [VideoFrame] = []
    while let f = try source.nextFrame() { frames.append(f) }
    return frames
}

/// Writes `samples` as a QuickTime movie with the encoder's SPS/PPS.
func writeMovie(
    _ samples: [EncodedSample], encoder: X264Encoder, to path: String, endTime: Timestamp? = nil,
    pixelAspectRatio: PixelAspectRatio? = nil
) throws {
    let format = VideoTrackFormat(
        width: encoder.width, height: encoder.height,
        sequenceParameterSet: encoder.sequenceParameterSet,
        pictureParameterSet: encoder.pictureParameterSet,
        pixelAspectRatio: pixelAspectRatio)
    let writer = try MovieWriter(path: path, description: MovieDescription(creationTime: Date(), video: format))
    for gop in groupedIntoGOPs(samples, end: endTime) { try writer.append(gop) }
    try writer.close()
}

/// The independent check every written movie gets: ffprobe reads it, ffmpeg decodes it
/// without a word.
func checkPlays(_ path: String, frames: Int, width: Int, height: Int) throws -> ProbeReport {
    let report = try FFprobe.probe(path)
    let video = try #require(report.video)
    #expect(video["codec_name"] == "h264")
    #expect(video["width"] == String(width))
    #expect(video["height"] == String(height))
    #expect(video["nb_read_packets"] == String(frames))
    #expect(try FFmpeg.decodeErrors(path) == "")
    return report
}

/// The same picture as `frame` (NV12), laid out as I420 with the given luma stride.
func i420Copy(of frame: VideoFrame, bytesPerLine: Int? = nil) throws -> VideoFrame {
    let f = frame.format
    let format = try VideoFormat(
        width: f.width, height: f.height, pixelFormat: .i420, bytesPerLine: bytesPerLine ?? f.width)
    let buffer = FrameBuffer(capacity: format.bufferSize)
    PixelConversion.copy(frame.plane(0), into: buffer.mutablePlane(format.planes[0]))
    let uv = frame.plane(1)
    let u = buffer.mutablePlane(format.planes[1]), v = buffer.mutablePlane(format.planes[2])
    for y in 0..<uv.height {
        let row = uv.row(y)
        for x in 0..<u.width {
            u.base[y * u.stride + x] = row[2 * x]
            v.base[y * v.stride + x] = row[2 * x + 1]
        }
    }
    return VideoFrame(format: format, buffer: buffer, timestamp: frame.timestamp, sequence: frame.sequence)
}
