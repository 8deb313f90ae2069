import Foundation
import Media

/// An H.264 stream made by the `ffmpeg` command line (libx264), cut into MOV samples:
/// access units with 4-byte NAL lengths, plus the SPS and PPS for `avcC`.
///
/// Independent of Vigil's own encoder, so the movie writer is tested against someone else's
/// bitstream.
public struct H264TestStream: Sendable {
    public struct Sample: Sendable {
        public var data: [UInt8]
        public var isKeyframe: Bool
    }
    public var width: Int
    public var height: Int
    public var sps: [UInt8]
    public var pps: [UInt8]
    public var samples: [Sample]

    /// Encodes `frames` frames of ffmpeg's `testsrc2` pattern with a keyframe every `gop` frames.
    public static func make(
        width: Int = 320, height: Int = 240, frames: Int, gop: Int = 30,
        in directory: TemporaryDirectory
    ) throws -> H264TestStream {
        // Written under a name of its own, then renamed whole to the name tests read it by
        // (stream-WxH-FRAMES-GOP.h264): tests that run at once never read each other's
        // half-written stream (ffmpeg truncates a file it overwrites).
        let path = directory.file("stream-\(width)x\(height)-\(frames)-\(gop)-\(UUID().uuidString).h264")
        let r = try runTool(
            "ffmpeg",
            [
                "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=\(width)x\(height):rate=30",
                "-frames:v", "\(frames)", "-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "ultrafast", "-tune",
                "zerolatency",
                "-bf", "0", "-g", "\(gop)", "-x264-params", "aud=1:scenecut=0:keyint=\(gop):min-keyint=\(gop)",
                "-f", "h264", path,
            ])
        guard r.status == 0 else { throw ToolError.failed("ffmpeg (making a test stream)", r) }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard rename(path, directory.file("stream-\(width)x\(height)-\(frames)-\(gop).h264")) == 0 else {
            throw ParseError(description: "the test stream cannot be renamed: \(String(cString: strerror(errno)))")
        }
        return try parse(annexB: bytes, width: width, height: height)
    }

    public struct ParseError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Splits an Annex B byte stream (access units delimited by AUD NAL units) into samples.
    public static func parse(annexB bytes: [UInt8], width: Int, height: Int) throws -> H264TestStream {
        var nals: [ArraySlice<UInt8>] = []
        var i = 0
        var start: Int?
        while i + 3 <= bytes.count {
            if bytes[i] == 0 && bytes[i + 1] == 0 && bytes[i + 2] == 1 {
                if let s = start {
                    var end = i
                    while end > s && bytes[end - 1] == 0 { end -= 1 }  // trailing zero of a 4-byte start code
                    nals.append(bytes[s..<end])
                }
                i += 3
                start = i
            } else {
                i += 1
            }
        }
        if let s = start, s < bytes.count { nals.append(bytes[s...]) }

        var sps: [UInt8]?, pps: [UInt8]?
        var samples: [Sample] = []
        var current: [UInt8] = []
        var key = false
        func finish() {
            if !current.isEmpty { samples.append(Sample(data: current, isKeyframe: key)) }
            current = []
            key = false
        }
        for nal in nals where !nal.isEmpty {
            let type = nal.first! & 0x1F
            switch type {
            case 9: finish()  // access unit delimiter
            case 7: if sps == nil { sps = Array(nal) }
            case 8: if pps == nil { pps = Array(nal) }
            default:
                if type == 5 { key = true }
                let n = UInt32(nal.count)
                current += [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
                current += nal
            }
        }
        finish()
        guard let sps, let pps else { throw ParseError(description: "the stream has no SPS/PPS") }
        return H264TestStream(width: width, height: height, sps: sps, pps: pps, samples: samples)
    }
}

extension H264TestStream {
    /// The first `count` samples (all when nil) at capture times `time(i)`, cut into GOPs at
    /// their keyframes and ended as the pre-roll ring ends them: each at the next one's start,
    /// the last at `end` (open-ended when nil).
    public func gops(count: Int? = nil, end: Timestamp? = nil, time: (Int) -> Timestamp) -> [GOP] {
        let n = count ?? samples.count
        return groupedIntoGOPs(
            (0..<n).map { i in
                EncodedSample(data: samples[i].data, pts: time(i), dts: time(i), isKeyframe: samples[i].isKeyframe)
            }, end: end)
    }
}

/// `samples` (in decode order, the first a keyframe) cut into GOPs at their keyframes, each
/// ended at the next one's start and the last at `end`.
public func groupedIntoGOPs(_ samples: [EncodedSample], end: Timestamp? = nil) -> [GOP] {
    precondition(samples.first?.isKeyframe ?? true, "the first sample must be a keyframe")
    let gops = GOP.grouped(samples, end: end)
    precondition(gops.reduce(0) { $0 + $1.count } == samples.count, "samples must increase in time")
    return gops
}
