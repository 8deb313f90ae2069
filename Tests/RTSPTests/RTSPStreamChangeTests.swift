import Agent
import Configuration
import Foundation
import Logging
import Media
import QuickTime
import TestSupport
import Testing

@testable import RTSP

/// A camera that comes back under RTSP players: in the same format the stream goes on, in
/// another it ends and a player that asks again gets the new one — the server in process, fed
/// by a live feed the test publishes to as the pipeline does, read by ffprobe.
@Suite(.serialized) struct RTSPStreamChangeTests {
    static let directory = Result { try TemporaryDirectory("vigil-rtsp-change") }
    static let frameTime: Int64 = 40_000_000

    /// `frames` frames of `width`×`height` in GOPs of 10, from capture time `start` on.
    static func stream(width: Int, height: Int, frames: Int, from start: Int) throws -> (LiveMovie, [GOP]) {
        let s = try H264TestStream.make(width: width, height: height, frames: frames, gop: 10, in: try directory.get())
        let movie = try LiveMovie(
            video: VideoTrackFormat(
                width: s.width, height: s.height, sequenceParameterSet: s.sps, pictureParameterSet: s.pps))
        let time = { (i: Int) in Timestamp(nanoseconds: 1_000_000_000 + Int64(start + i) * frameTime) }
        return (movie, s.gops(end: time(frames), time: time))
    }

    /// A server on a free loopback port fed from `feed`, and its stream's URL.
    static func serve(_ feed: LiveFeed) throws -> (RTSPSink, String) {
        let sink = try RTSPSink(
            settings: Settings.RTSP(listen: "127.0.0.1", port: 0), camera: "yard",
            log: Logger(level: .info, sink: MemoryLogSink()))
        sink.start(SinkContext(live: feed))
        return (sink, "rtsp://127.0.0.1:\(sink.port)/yard")
    }

    /// Publishes each GOP once its frames' time has passed, as the pipeline does.
    static func publish(_ gops: [GOP], to feed: LiveFeed) {
        for gop in gops {
            Thread.sleep(forTimeInterval: Double(gop.count) * Double(frameTime) / 1e9)
            feed.publish(gop)
        }
    }

    /// ffprobe reading the frames' sizes over TCP (at most `frames` of them, or until the
    /// stream ends), started now.
    static func player(_ url: String, frames: Int) throws -> (Process, Pipe, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(which("ffprobe")))
        process.arguments = [
            "-v", "error", "-rtsp_transport", "tcp", "-read_intervals", "%+#\(frames)", "-select_streams", "v:0",
            "-show_entries", "frame=width,height", "-of", "csv=p=0", url,
        ]
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return (process, out, err)
    }

    static func finished(_ player: (Process, Pipe, Pipe), within seconds: Double) -> (sizes: [String], errors: String)?
    {
        let (process, out, err) = player
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        guard !process.isRunning else {
            process.terminate()
            return nil
        }
        let sizes = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(separator: "\n").map { $0.trimmingCharacters(in: .init(charactersIn: ",")) }
        return (sizes, String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    @Test func aCameraBackInTheSameFormatGoesOnUnderItsPlayers() throws {
        let (movie, gops) = try Self.stream(width: 160, height: 120, frames: 40, from: 0)
        let (_, after) = try Self.stream(width: 160, height: 120, frames: 60, from: 50)
        let feed = LiveFeed()
        feed.open()
        let (sink, url) = try Self.serve(feed)
        defer { sink.finish() }
        feed.begin(movie)
        feed.publish(gops[0])
        let player = try Self.player(url, frames: 70)
        Self.publish(Array(gops.dropFirst()), to: feed)
        // The camera went away and came back: the same format, another stream.
        feed.interrupt()
        feed.begin(movie)
        Self.publish(after, to: feed)
        let result = try #require(Self.finished(player, within: 60), "ffprobe did not read 70 frames")
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(result.sizes.count == 70 && Set(result.sizes) == ["160,120"], "\(result.sizes)")
    }

    @Test func aCameraBackInAnotherFormatEndsItsPlayersStreamsAndTheyAskAgain() throws {
        let (small, gops) = try Self.stream(width: 160, height: 120, frames: 40, from: 0)
        let (large, after) = try Self.stream(width: 320, height: 240, frames: 40, from: 50)
        let feed = LiveFeed()
        feed.open()
        let (sink, url) = try Self.serve(feed)
        defer { sink.finish() }
        feed.begin(small)
        feed.publish(gops[0])
        let player = try Self.player(url, frames: 1000)
        Self.publish(Array(gops.dropFirst()), to: feed)
        feed.interrupt()
        feed.begin(large)
        Self.publish(Array(after.prefix(2)), to: feed)
        // The player's stream ended by itself, in the format it was told…
        let result = try #require(Self.finished(player, within: 30), "ffprobe still reads the old stream")
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(result.sizes.count >= 30 && Set(result.sizes) == ["160,120"], "\(result.sizes)")
        // …and asked again, it plays the new one.
        let again = try Self.player(url, frames: 10)
        Self.publish(Array(after.dropFirst(2)), to: feed)
        let second = try #require(Self.finished(again, within: 30), "ffprobe did not read the new stream")
        #expect(second.sizes.count == 10 && Set(second.sizes) == ["320,240"], "\(second.sizes) \(second.errors)")
    }
}
