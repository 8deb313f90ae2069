import Foundation
import Media
import QuickTime
import TestSupport
import Testing

/// The live stream's fragmented MP4 — an initialization segment, then a media segment per GOP —
/// read by every independent reader, as a browser or HLS player gets it.
@Suite struct LiveMovieTests {
    static let directory = Result { try TemporaryDirectory("vigil-live-movie") }
    /// 25 fps capture times from 7 s (a live stream never starts at zero).
    static func time(_ i: Int) -> Timestamp { Timestamp(nanoseconds: 7_000_000_000 + Int64(i) * 40_000_000) }

    @Test func segmentsAfterTheInitializationSegmentPlayInEveryReader() throws {
        let dir = try Self.directory.get()
        let stream = try H264TestStream.make(width: 160, height: 120, frames: 60, gop: 10, in: dir)
        let movie = try LiveMovie(
            video: VideoTrackFormat(
                width: stream.width, height: stream.height, sequenceParameterSet: stream.sps,
                pictureParameterSet: stream.pps, rotation: .clockwise90))
        let gops = stream.gops(end: Self.time(60), time: Self.time)
        var bytes = movie.initialization()
        #expect(Array(bytes[4..<12]) == Array("ftypisom".utf8), "ISO brands, as browsers and HLS take them")
        var frames = 0
        for (i, gop) in gops.enumerated() {
            let segment = LiveMovie.segment(gop, sequence: UInt32(i + 1), origin: gops[0].start)
            #expect(segment.duration == 10 * 3600, "ten frames of 40 ms in 90 kHz ticks")
            #expect(segment.bytes.count == segment.byteCount)
            frames += segment.frames
            bytes += segment.bytes
        }
        let path = dir.file("live.mp4")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let probe = try expectPlayable(path)
        #expect(probe.video?["nb_read_packets"] == "60" && frames == 60)
        #expect(probe.videoRotation == -90, "the rotation is the track's matrix, as in clips")
        // One timeline from zero: every frame 40 ms after the one before, across the segments.
        let packets = try FFprobe.videoPackets(path)
        #expect(packets.count == 60)
        for (i, packet) in packets.enumerated() {
            #expect(abs(packet.time - Double(i) * 0.04) < 0.0001, "frame \(i) at \(packet.time) s")
        }
        #expect(packets.filter(\.isKey).count == 6)
    }

    @Test func aSegmentOnALaterOriginStartsWhereItsTimelineSays() throws {
        let dir = try Self.directory.get()
        let stream = try H264TestStream.make(width: 160, height: 120, frames: 60, gop: 10, in: dir)
        let gops = stream.gops(end: Self.time(60), time: Self.time)
        // The fourth GOP on the first one's timeline starts 1.2 s in (HLS: segment N's tfdt).
        let late = LiveMovie.segment(gops[3], sequence: 4, origin: gops[0].start)
        let movie = try LiveMovie(
            video: VideoTrackFormat(
                width: stream.width, height: stream.height, sequenceParameterSet: stream.sps,
                pictureParameterSet: stream.pps))
        let path = dir.file("late.mp4")
        try Data(movie.initialization() + late.bytes).write(to: URL(fileURLWithPath: path))
        _ = try expectPlayable(path)
        let packets = try FFprobe.videoPackets(path)
        #expect(packets.count == 10)
        #expect(abs((packets.first?.time ?? 0) - 1.2) < 0.0001, "\(packets.first?.time ?? -1)")
    }

    @Test func aFormatWithoutParameterSetsIsRefused() {
        #expect(throws: MovieWriterError.self) {
            try LiveMovie(
                video: VideoTrackFormat(width: 64, height: 48, sequenceParameterSet: [], pictureParameterSet: []))
        }
    }
}
