import Foundation
import Logging
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

    /// A feed the web server opened, on a stream of `movie`.
    static func openFeed(_ movie: LiveMovie) -> LiveFeed {
        let feed = LiveFeed()
        feed.open()
        feed.begin(movie)
        return feed
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
        let feed = Self.openFeed(movie)
        feed.publish(gops[0])
        feed.publish(gops[1])
        let closed = Atomic(false)
        let viewer = LiveViewer(feed: feed, sound: nil, limit: nil) { closed.store(true, ordering: .relaxed) }
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
        let feed = Self.openFeed(movie)
        feed.publish(gops[0])
        let limited = LiveViewer(feed: feed, sound: nil, limit: 2) {}
        let following = LiveViewer(feed: feed, sound: nil, limit: nil) {}
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
        // Six GOPs of 0.4 s: all kept (a window of 4 is the least kept) and all listed (three
        // target durations of 1 s make 8 of them).
        let playlist = try #require(LivePlaylist.playlist(feed.items))
        #expect(
            playlist == """
                #EXTM3U
                #EXT-X-VERSION:7
                #EXT-X-TARGETDURATION:1
                #EXT-X-MEDIA-SEQUENCE:1
                #EXT-X-DISCONTINUITY-SEQUENCE:0
                #EXT-X-INDEPENDENT-SEGMENTS
                #EXT-X-MAP:URI="live/init-1.mp4"
                #EXTINF:0.400,
                live/1.m4s
                #EXTINF:0.400,
                live/2.m4s
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

    // MARK: Sound

    /// A 440 Hz tone (8000 at its peak) captured in 10 ms chunks at 48 kHz, mono, from `from`
    /// until `until`.
    static func tone(from: Timestamp, until: Timestamp) -> [AudioChunk] {
        var chunks: [AudioChunk] = []
        var t = from
        while t < until {
            let first = chunks.count * 480
            var data: [UInt8] = []
            for i in 0..<480 {
                let v = Int16(8000 * sin(2 * Double.pi * 440 * Double(first + i) / 48000))
                data += [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)]
            }
            chunks.append(AudioChunk(data: data, time: t, sampleRate: 48000, channels: 1))
            t = t + Timestamp.Duration(nanoseconds: 10_000_000)
        }
        return chunks
    }

    /// Publishes `gops` into `feed` with the tone heard before each up to `lag` before its end
    /// (the capture's latency) — for the first `soundUntil` of them (all by default) — calling
    /// `each` after each publish.
    static func publish(
        _ gops: [GOP], into feed: LiveFeed, soundUntil: Int? = nil,
        lag: Timestamp.Duration = Timestamp.Duration(nanoseconds: 30_000_000), each: (Int) -> Void = { _ in }
    ) {
        let tone = Self.tone(from: gops[0].start, until: gops[gops.count - 1].end!)
        var heard = 0
        for (i, gop) in gops.enumerated() {
            var sound: [AudioChunk] = []
            if i < soundUntil ?? gops.count {
                while heard < tone.count, tone[heard].end <= gop.end! - lag {
                    sound.append(tone[heard])
                    heard += 1
                }
            }
            feed.publish(gop, sound: sound)
            each(i)
        }
    }

    /// The sound track's packets, (time in seconds, bytes) in order, as ffprobe lists them.
    static func soundPackets(_ path: String) throws -> [(time: Double, size: Int)] {
        let r = try runTool(
            "ffprobe",
            ["-v", "error", "-select_streams", "a", "-show_entries", "packet=pts_time,size", "-of", "csv=p=0", path])
        return r.stdout.split(separator: "\n").compactMap { line in
            let f = line.split(separator: ",")
            guard f.count == 2, let t = Double(f[0]), let n = Int(f[1]) else { return nil }
            return (t, n)
        }
    }

    /// Checks that `packets` follow each other 20 ms apart.
    static func expectContiguous(
        _ packets: [(time: Double, size: Int)], sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if let (a, b) = zip(packets, packets.dropFirst()).first(where: { abs($1.time - $0.time - 0.02) > 0.0001 }) {
            Issue.record(
                "sound packets at \(a.time) s and \(b.time) s are not 20 ms apart", sourceLocation: sourceLocation)
        }
    }

    @Test func aViewerHearsTheMicrophoneInEveryReader() throws {
        let (movie, gops) = try Self.stream()
        let feed = Self.openFeed(movie)
        let sound = LiveSound(feed: feed, log: nil)
        var viewer: LiveViewer?
        var bytes: [UInt8] = []
        // A viewer from the second GOP on, for six, reading each as it comes.
        Self.publish(gops, into: feed) { i in
            if i == 1 { viewer = LiveViewer(feed: feed, sound: sound, limit: 6) {} }
            if let viewer { bytes += Self.drain(viewer).bytes }
        }
        let item = try #require(feed.items.last)
        #expect(item.sound == AudioTrackFormat(sampleRate: 48000, channels: 1) && !item.audio.isEmpty)

        let path = try Self.directory.get().file("sound.mp4")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let probe = try #require(try expectPlayable(path))
        #expect(probe.video?["nb_read_packets"] == "60", "six GOPs of ten frames: \(probe.streams)")
        #expect(probe.audio?["codec_name"] == "opus" && probe.audio?["channels"] == "1", "\(probe.streams)")
        #expect(probe.audio?["sample_rate"] == "48000")
        // Every packet 20 ms after the one before, from the start of the picture on, for its
        // 2.4 s less the capture's lag (30 ms) and the samples short of a frame.
        let packets = try Self.soundPackets(path)
        #expect((117...119).contains(packets.count), "\(packets.count) packets")
        #expect((packets.first?.time ?? -1) >= 0 && (packets.first?.time ?? 1) < 0.02, "\(packets.first ?? (-1, 0))")
        Self.expectContiguous(packets)
        // GStreamer decodes every packet too.
        let gst = try GStreamer.decode(path, track: .opusSound)
        #expect(gst.problems.isEmpty && gst.frames.count == packets.count, "\(gst.problems), \(gst.frames.count)")
        // What plays is the tone: 440 Hz at the level it was captured (5657 RMS).
        let samples = try decodedSound(path)
        let middle = soundLevel(samples[samples.count / 4..<samples.count * 3 / 4])
        #expect(abs(middle.hertz - 440) < 5 && abs(middle.rms - 5657) < 400, "\(middle)")
    }

    @Test func aMicrophoneThatFallsSilentIsHeardAsSilenceNotWaitedFor() throws {
        let (movie, gops) = try Self.stream()
        let feed = Self.openFeed(movie)
        let sound = LiveSound(feed: feed, log: nil)
        let viewer = LiveViewer(feed: feed, sound: sound, limit: nil) {}
        var bytes: [UInt8] = []
        // Sound with the first three GOPs only.
        Self.publish(gops, into: feed, soundUntil: 3) { _ in bytes += Self.drain(viewer).bytes }
        let path = try Self.directory.get().file("silent.mp4")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let probe = try #require(try expectPlayable(path))
        #expect(probe.video?["nb_read_packets"] == "80")
        // The sound goes on to half a second before the picture's end (3.2 s), as silence.
        let packets = try Self.soundPackets(path)
        Self.expectContiguous(packets)
        let end = (packets.last?.time ?? 0) + 0.02
        #expect(end > 2.68 && end <= 2.7 + 0.0001, "the sound ends at \(end) s")
        let samples = try decodedSound(path)
        #expect(soundLevel(samples[24000..<48000]).rms > 5000, "the tone while the microphone gave it")
        #expect(soundLevel(samples[72000..<120000]).rms < 50, "silence after")
        #expect(try GStreamer.decode(path, track: .opusSound).problems.isEmpty)
    }

    @Test func soundThatComesAfterTheFirstGOPBeginsAStreamWithIt() throws {
        let (movie, gops) = try Self.stream()
        let feed = Self.openFeed(movie)
        feed.publish(gops[0])
        let viewer = LiveViewer(feed: feed, sound: LiveSound(feed: feed, log: nil), limit: nil) {}
        #expect(Self.drain(viewer).last == .waiting)
        feed.publish(gops[1], sound: Self.tone(from: gops[1].start, until: gops[1].end!))
        let items = feed.items
        #expect(
            items.map(\.stream) == [1, 2]
                && items.map(\.sound) == [nil, AudioTrackFormat(sampleRate: 48000, channels: 1)])
        #expect(Self.drain(viewer).last == .end, "the picture-only stream ends: the player asks again")
        // Sound of another format is another stream too; the same format goes on in it.
        feed.publish(gops[2], sound: Self.tone(from: gops[2].start, until: gops[2].end!))
        feed.publish(
            gops[3], sound: [AudioChunk(data: [0, 0, 0, 0], time: gops[3].start, sampleRate: 16000, channels: 2)])
        #expect(feed.items.map(\.stream) == [1, 2, 2, 3])
    }

    @Test func viewersShareOneEncodeAndAnOlderGOPIsEncodedApart() throws {
        let (movie, gops) = try Self.stream()
        let feed = Self.openFeed(movie)
        Self.publish(Array(gops[0..<6]), into: feed)
        let sound = LiveSound(feed: feed, log: nil)
        let items = feed.items
        // The newest first (a viewer starts there), then the one before it (an HLS player).
        let newest = try #require(sound.run(for: items[5]))
        let again = try #require(sound.run(for: items[5]))
        #expect(newest.packets == again.packets && newest.start == again.start)
        let older = try #require(sound.run(for: items[4]))
        #expect(!older.packets.isEmpty && older.start < newest.start)
        // The encoder went on from the newest: the next GOP's sound follows it without a gap.
        Self.publish(Array(gops[6..<8]), into: feed)
        let seventh = try #require(feed.items.last { $0.sequence == 7 })
        let next = try #require(sound.run(for: seventh))
        let step = Timestamp.Duration(nanoseconds: 20_000_000 * Int64(newest.packets.count))
        #expect(next.start == newest.start + step)
        // The stream is sent with an Opus track whose PreSkip is the encoder's lookahead (6.5 ms).
        #expect(sound.movie(for: items[0]).sound == LiveMovie.Sound(channels: 1, inputSampleRate: 48000, preSkip: 312))
    }

    @Test func aRateOpusDoesNotTakeLeavesThePicturePlayingAndIsSaidOnce() throws {
        let (movie, gops) = try Self.stream()
        let feed = Self.openFeed(movie)
        let logs = MemoryLogSink()
        let sound = LiveSound(feed: feed, log: Logger(level: .info, sink: logs))
        let viewer = LiveViewer(feed: feed, sound: sound, limit: 3) {}
        var bytes: [UInt8] = []
        for gop in gops[0..<3] {
            feed.publish(
                gop,
                sound: [
                    AudioChunk(
                        data: [UInt8](repeating: 0, count: 882 * 2), time: gop.start, sampleRate: 44100, channels: 1)
                ])
            bytes += Self.drain(viewer).bytes
        }
        let path = try Self.directory.get().file("no-sound.mp4")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let probe = try #require(try expectPlayable(path))
        #expect(probe.video?["nb_read_packets"] == "30" && probe.audio == nil, "\(probe.streams)")
        let said = logs.written(at: .warning)
        #expect(said.count == 1, "\(said)")
        #expect(said.first?.contains("live view without sound") == true && said.first?.contains("44100 Hz") == true)
        #expect(said.first?.contains("audio.rate") == true, "the fix: \(said)")
    }
}
