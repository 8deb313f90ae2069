// A child process for the kill test: writes a long clip slowly enough that a SIGKILL can land
// anywhere — inside a fragment's write, between fragments, or inside the close — and reports
// its progress on stdout, one line per step, flushed as it goes:
//   fragment N   N fragments are complete on disk
//   closing      close() has begun
//   closed       the movie is finished
//
// usage: movie-writer-child OUTPUT.mov STREAM.h264 WIDTH HEIGHT REPEATS
import Foundation
import Media
import QuickTime
import Recorder
import TestSupport

/// A movie file written in small pieces with a pause between them, and a pause before each
/// in-place update, so that the kill has time to land inside them. Each piece is its own
/// write, so a kill between pieces leaves a partly written box, as a power cut would.
final class SlowOutput: MovieOutput {
    let path: String
    let handle: FileHandle
    private(set) var length: UInt64 = 0

    init(path: String) throws {
        _ = FileManager.default.createFile(atPath: path, contents: nil)  // the open below says when it failed
        handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        self.path = path
    }

    private func fail(_ operation: String, _ error: any Error) -> FileError {
        FileError(path: path, operation: operation, reason: "\(error)")
    }

    func append(_ bytes: [UInt8]) throws(FileError) {
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + 512)
            do {
                try handle.seek(toOffset: length + UInt64(offset))
                try handle.write(contentsOf: bytes[offset..<end])
            } catch { throw fail("write", error) }
            offset = end
            usleep(300)
        }
        length += UInt64(bytes.count)
    }

    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(FileError) {
        usleep(1000)
        do {
            try handle.seek(toOffset: offset)
            try handle.write(contentsOf: bytes)
        } catch { throw fail("update", error) }
    }

    func synchronize() throws(FileError) {
        do { try handle.synchronize() } catch { throw fail("sync", error) }
    }

    func close() throws(FileError) {
        do { try handle.close() } catch { throw fail("close", error) }
    }
}

/// One unbuffered line on stdout, so the parent sees it before any kill.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let args = CommandLine.arguments
guard args.count == 6, let width = Int(args[3]), let height = Int(args[4]), let repeats = Int(args[5]) else {
    FileHandle.standardError.write(Data("usage: movie-writer-child OUTPUT.mov STREAM.h264 WIDTH HEIGHT REPEATS\n".utf8))
    exit(64)
}
do {
    let data = try Data(contentsOf: URL(fileURLWithPath: args[2]))
    let stream = try H264TestStream.parse(annexB: [UInt8](data), width: width, height: height)
    let description = MovieDescription(
        creationTime: Date(timeIntervalSince1970: 1_790_000_000),
        video: VideoTrackFormat(
            width: width, height: height, sequenceParameterSet: stream.sps,
            pictureParameterSet: stream.pps, rotation: .clockwise90),
        audio: AudioTrackFormat(sampleRate: 8000, channels: 1))
    let writer = try MovieWriter(output: try SlowOutput(path: args[1]), path: args[1], description: description)
    // GOPs reach the writer as they do in the agent: from the pre-roll ring, each when the
    // keyframe after it arrives.
    var ring = PreRollBuffer(preRoll: .zero, maxBytes: 1 << 30)
    var frame = 0
    var reported = 0
    for _ in 0..<repeats {
        for sample in stream.samples {
            let time = Timestamp(nanoseconds: 1_000_000_000 + Int64(frame) * 40_000_000)
            if let gop = ring.append(
                EncodedSample(data: sample.data, pts: time, dts: time, isKeyframe: sample.isKeyframe))
            {
                // As the agent does: each fragment synced (which reveals it) once written.
                try writer.append(gop)
                try writer.synchronize()
            }
            try writer.appendAudio([UInt8](repeating: 0x10, count: 640), time: time)
            if writer.fragmentsWritten > reported {
                reported = writer.fragmentsWritten
                say("fragment \(reported)")
            }
            frame += 1
            usleep(2000)
        }
    }
    if let last = ring.newestGOP {
        try writer.append(last.ended(at: Timestamp(nanoseconds: 1_000_000_000 + Int64(frame) * 40_000_000)))
        try writer.synchronize()
        say("fragment \(writer.fragmentsWritten)")
    }
    say("closing")
    try writer.close()
    say("closed")
} catch {
    FileHandle.standardError.write(Data("movie-writer-child: \(error)\n".utf8))
    exit(1)
}
