import Foundation
import Media
import QuickTime
import Synchronization
import TestSupport
import Testing

@testable import Agent
@testable import Web

/// `/live.mp4` and `/live.m3u8` from the feed the pipeline publishes into, read by a viewer as
/// the server would read it, then by every independent reader.
@Suite struct LiveViewTests {
    static let directory = Result { try TemporaryDirectory("vigil-live-view") }
    static func time(_ i: Int) -> Timestamp { Timestamp(nanoseconds: 3_000_000_000 + Int64(i) * 40_000_000) }

    static func stream() throws -> (movie: LiveMovie, gops: [GOP]) {
        let s = try H264TestStream.make(width: 160, height: 120, frames: 80, gop: 10, in: try directory.get())
        let movie = try LiveMovie(
            video: VideoTrackFormat(
                width: s.width, height: s.height, sequenceParameterSet: s.sps, pictureParameterSet: s.pps))
        return (movie, s.gops(end: time(80), time: time))
    }

    /// Reads `viewer` as the server does, 5000 bytes at a time, until it waits or ends; the
    /// bytes, how it stopped, and whether it slept.
    static func drain(
        _ viewer: LiveViewer, wake: @escaping @Sendable () -> Void = {}
    ) -> (bytes: [UInt8], last: HTTPStreamRead, slept: Bool) {
        var bytes: [UInt8] = []
        var slept = false
        var buffer = [UInt8](repeating: 0, count: 5000)
        while true {
            let read = buffer.withUnsafeMutableBytes { viewer.read(into: $0, sleep: { slept = true }, wake: wake) }
            guard case .bytes(let n) = read else { return (bytes, read, slept) }
            bytes += buffer[..<n]
        }
    }

    @Test func aViewerStartsAtTheNewestGOPAndSkipsWhatItFellBehindOnWithoutAGap() throws {
        let (movie, gops) = try Self.stream()
        let feed = LiveFeed()
        feed.open()
        feed.begin(movie)
        feed.publish(gops[0])
        feed.publish(gops[1])
        let closed = Atomic(false)
        let viewer = LiveViewer(feed: feed, limit: nil) { closed.store(true, ordering: .relaxed) }
        // The newest GOP, then nothing: it sleeps, leaving a wake-up for the next publish.
        let woken = Atomic(0)
        let first = Self.drain(viewer) { woken.add(1, ordering: .relaxed) }
        #expect(first.last == .waiting && first.slept)
        feed.publish(gops[2])
        let wakes = woken.load(ordering: .relaxed)
        #expect(wakes == 1)
        // It read nothing while three more came: it skips to the newest of them.
        feed.publish(gops[3])
        feed.publish(gops[4])
        feed.publish(gops[5])
        let second = Self.drain(viewer)
        #expect(second.last == .waiting)
        feed.close()
        let third = Self.drain(viewer)
        #expect(third.last == .end && third.bytes.isEmpty)
        viewer.close()
        let closedNow = closed.load(ordering: .relaxed)
        #expect(closedNow)

        let path = try Self.directory.get().file("viewer.mp4")
        try Data(first.bytes + second.bytes).write(to: URL(fileURLWithPath: path))
        try expectPlayable(path)
        let packets = try FFprobe.videoPackets(path)
        // GOP 2 (the newest when it came), then GOP 6: 20 frames, 40 ms apart, from zero.
        #expect(packets.count == 20)
        for (i, packet) in packets.enumerated() {
            #expect(abs(packet.time - Double(i) * 0.04) < 0.0001, "frame \(i) at \(packet.time) s")
        }
        #expect(try frameHashes(path).count == 20)
    }

    @Test func aViewerEndsWithItsStreamAndAfterTheGOPsAskedFor() throws {
        let (movie, gops) = try Self.stream()
        let feed = LiveFeed()
        feed.open()
        feed.begin(movie)
        feed.publish(gops[0])
        let limited = LiveViewer(feed: feed, limit: 2) {}
        let following = LiveViewer(feed: feed, limit: nil) {}
        #expect(Self.drain(limited).last == .waiting)
        #expect(Self.drain(following).last == .waiting)
        feed.publish(gops[1])
        #expect(Self.drain(limited).last == .end, "two GOPs asked, two sent")
        // The camera's stream was interrupted and began again: another stream, which a viewer
        // of the first cannot go on into.
        feed.interrupt()
        feed.begin(movie)
        feed.publish(gops[2])
        let drained = Self.drain(following)
        #expect(drained.last == .end)
    }

    @Test func thePlaylistListsTheKeptGOPsWithADiscontinuityBetweenStreams() throws {
        let (movie, gops) = try Self.stream()
        let feed = LiveFeed(window: 4)
        #expect(LivePlaylist.playlist(feed.items) == nil)
        feed.begin(movie)
        feed.publish(gops[0])
        #expect(feed.items.isEmpty, "nothing is kept before the web server opens the feed")
        feed.open()
        feed.begin(movie)
        for gop in gops[0..<3] { feed.publish(gop) }
        feed.interrupt()
        feed.begin(movie)
        for gop in gops[3..<6] { feed.publish(gop) }
        let playlist = try #require(LivePlaylist.playlist(feed.items))
        #expect(
            playlist == """
                #EXTM3U
                #EXT-X-VERSION:7
                #EXT-X-TARGETDURATION:1
                #EXT-X-MEDIA-SEQUENCE:3
                #EXT-X-DISCONTINUITY-SEQUENCE:0
                #EXT-X-INDEPENDENT-SEGMENTS
                #EXT-X-MAP:URI="live/init-1.mp4"
                #EXTINF:0.400,
                live/3.m4s
                #EXT-X-DISCONTINUITY
                #EXT-X-MAP:URI="live/init-2.mp4"
                #EXTINF:0.400,
                live/4.m4s
                #EXTINF:0.400,
                live/5.m4s
                #EXTINF:0.400,
                live/6.m4s

                """)
        // Segments 5 and 6 follow segment 4 on the second stream's timeline.
        let dir = try Self.directory.get()
        let path = dir.file("hls.mp4")
        let items = feed.items.filter { $0.stream == 2 }
        try Data(movie.initialization() + items.flatMap { LivePlaylist.segment($0).bytes })
            .write(to: URL(fileURLWithPath: path))
        try expectPlayable(path)
        let packets = try FFprobe.videoPackets(path)
        #expect(packets.count == 30 && abs((packets.first?.time ?? -1) - 0) < 0.0001)
        #expect(abs((packets.last?.time ?? 0) - 29 * 0.04) < 0.0001)
    }
}
