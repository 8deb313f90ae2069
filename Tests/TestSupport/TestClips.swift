import Foundation
import Media
import QuickTime
import Recorder

/// Complete clips written into a storage directory the way the agent's writer writes them
/// (`ClipStorage.createMovie`, `MovieWriter`), from an H.264 stream ffmpeg made: for tests
/// of what reads clips back (the journal's rebuild, retention).
public enum TestClips {
    private static let directory = Result { try TemporaryDirectory("vigil-test-clips") }
    /// 64×48, a keyframe every 10 frames.
    private static let stream = Result {
        try H264TestStream.make(width: 64, height: 48, frames: 40, gop: 10, in: try directory.get())
    }

    /// Writes a clip of `gops` GOPs of 10 frames at 25 fps (0.4 s each), with 8 kHz mono
    /// sound when `audio`, whose movie says it was created at `created`; returns what its
    /// writer said on closing it.
    @discardableResult
    public static func write(
        _ relativePath: String, into storage: any ClipStorage, created: Date, gops: Int = 2, audio: Bool = true
    ) throws -> MovieSummary {
        let s = try stream.get()
        let description = MovieDescription(
            creationTime: created,
            video: VideoTrackFormat(
                width: s.width, height: s.height, sequenceParameterSet: s.sps, pictureParameterSet: s.pps),
            audio: audio ? AudioTrackFormat(sampleRate: 8000, channels: 1) : nil)
        let writer = try MovieWriter(
            output: try storage.createMovie(relativePath), path: storage.path(relativePath), description: description)
        let time = { (i: Int) in Timestamp(nanoseconds: 1_000_000_000 + Int64(i) * 40_000_000) }
        for (i, gop) in s.gops(count: gops * 10, end: time(gops * 10), time: time).enumerated() {
            if audio { try writer.appendAudio([UInt8](repeating: 0, count: 3200 * 2), time: time(i * 10)) }
            try writer.append(gop)
        }
        return try writer.close()
    }

    /// The same clip, its recording interrupted: the first GOPs on disk, never closed.
    public static func writeInterrupted(
        _ relativePath: String, into storage: any ClipStorage, created: Date, gops: Int = 2
    ) throws {
        let s = try stream.get()
        let description = MovieDescription(
            creationTime: created,
            video: VideoTrackFormat(
                width: s.width, height: s.height, sequenceParameterSet: s.sps, pictureParameterSet: s.pps))
        let writer = try MovieWriter(
            output: try storage.createMovie(relativePath), path: storage.path(relativePath), description: description)
        let time = { (i: Int) in Timestamp(nanoseconds: 1_000_000_000 + Int64(i) * 40_000_000) }
        for gop in s.gops(count: gops * 10 + 10, time: time).dropLast() { try writer.append(gop) }
        writer.abandon()
    }
}
