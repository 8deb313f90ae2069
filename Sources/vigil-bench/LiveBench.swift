import Agent
import Media
import QuickTime
import Web

/// What the live view costs: ten viewers served from the GOPs the encoder made (`samples`),
/// through the same feed and viewer code the web server runs — frame by frame as `/live.mp4`
/// and the page's view are served now (each access unit published, framed as a one-frame
/// fragment for each viewer), and per GOP as they were before issue 44 (`LiveViewer`) — and
/// copied out in the server's 16 KB blocks, in
/// milliseconds per frame, and as a share of the x264 encode of the same frames
/// (`encodePerFrame`, 1 thread). The kernel's part (the sockets) is not in it.
func measureLiveView(
    samples: [EncodedSample], video: VideoTrackFormat, encodePerFrame: Double, column: String,
    table: inout BenchTable
) throws {
    var gops = GOP.grouped(samples)
    guard gops.count > 1 else { return }
    gops.removeLast()  // not ended: the feed only ever gets complete GOPs
    let frames = gops.reduce(0) { $0 + $1.count }
    let movie = try LiveMovie(video: video)
    // The sound a microphone gives over the same span: 48 kHz mono in 10 ms chunks, a tone.
    let heard = gops.map { gop in microphone(from: gop.start, until: gop.end ?? gop.lastTime) }
    let seconds = Double((gops.last!.end! - gops[0].start).nanoseconds) / 1e9

    /// Milliseconds per frame for ten viewers, and the bytes they read.
    func serve(withSound: Bool) -> Double {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var bytes = 0
        var elapsed = 0.0
        var served = 0
        while elapsed < 0.3 || served < 2 * frames {
            let feed = openedFeed(movie)
            let sound = withSound ? LiveSound(feed: feed, log: nil) : nil
            let watching = (0..<10).map { _ in LiveViewer(feed: feed, sound: sound, limit: nil) {} }
            elapsed += time {
                for (gop, chunks) in zip(gops, heard) {
                    feed.publish(gop, sound: withSound ? chunks : [])
                    for viewer in watching {
                        while case .bytes(let n) = buffer.withUnsafeMutableBytes({
                            viewer.read(into: $0, sleep: {}, wake: {})
                        }) {
                            bytes += n
                        }
                    }
                }
            }
            served += frames
        }
        precondition(bytes > 0)
        return elapsed * 1000 / Double(served)
    }

    /// The same frame by frame, as `/live.mp4` and the page's `/live/edge.mp4` serve it now:
    /// each access unit published with the sound heard since the one before, a one-frame
    /// fragment for each viewer (`LiveFrameViewer`), its sound encoded once for all of them.
    func serveFrames(withSound: Bool) -> Double {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var bytes = 0
        var elapsed = 0.0
        var served = 0
        let samples = gops.flatMap(\.samples)
        let chunks = heard.flatMap { $0 }
        while elapsed < 0.3 || served < 2 * frames {
            let feed = openedFeed(movie)
            let sound = withSound ? LiveSound(feed: feed, log: nil) : nil
            let watching = (0..<10).map { _ in LiveFrameViewer(feed: feed, sound: sound) {} }
            var next = 0
            elapsed += time {
                for sample in samples {
                    var with: [AudioChunk] = []
                    while withSound, next < chunks.count, chunks[next].time <= sample.pts {
                        with.append(chunks[next])
                        next += 1
                    }
                    feed.publish(frame: sample, sound: with)
                    for viewer in watching {
                        while case .bytes(let n) = buffer.withUnsafeMutableBytes({
                            viewer.read(into: $0, sleep: {}, wake: {})
                        }) {
                            bytes += n
                        }
                    }
                }
            }
            served += frames
        }
        precondition(bytes > 0)
        return elapsed * 1000 / Double(served)
    }

    let byFrame = serveFrames(withSound: false)
    table.record(
        "live view frame by frame, 10 viewers (/live.mp4, the page's)", unit: "ms/frame", column: column,
        value: byFrame)
    table.record(
        "live view frame by frame, 10 viewers / x264, 1 thread", unit: "%", column: column,
        value: 100 * byFrame / encodePerFrame)
    let byFrameWithSound = serveFrames(withSound: true)
    table.record(
        "live view frame by frame with sound, 10 viewers", unit: "ms/frame", column: column, value: byFrameWithSound)
    table.record(
        "live view frame by frame with sound / x264, 1 thread", unit: "%", column: column,
        value: 100 * byFrameWithSound / encodePerFrame)

    let perFrame = serve(withSound: false)
    table.record("live view per GOP (before issue 44), 10 viewers", unit: "ms/frame", column: column, value: perFrame)
    table.record(
        "live view, 10 viewers / x264, 1 thread", unit: "%", column: column, value: 100 * perFrame / encodePerFrame)
    // With a microphone: its sound encoded once (Opus), then framed for each viewer.
    let withSound = serve(withSound: true)
    table.record("live view with sound, 10 viewers", unit: "ms/frame", column: column, value: withSound)
    table.record(
        "live view with sound, 10 viewers / x264, 1 thread", unit: "%", column: column,
        value: 100 * withSound / encodePerFrame)
    // The encode alone, once for all viewers: per second of sound.
    var encoding = 0.0
    var encoded = 0.0
    while encoding < 0.2 || encoded < 2 * seconds {
        let feed = openedFeed(movie)
        let sound = LiveSound(feed: feed, log: nil)
        for (gop, chunks) in zip(gops, heard) {
            feed.publish(gop, sound: chunks)
            let item = feed.items.last!
            encoding += time { precondition(sound.run(for: item) != nil) }
        }
        encoded += seconds
    }
    table.record(
        "live sound: Opus encode, 48 kHz mono", unit: "ms/s of sound", column: column,
        value: encoding * 1000 / encoded)
}

/// A 440 Hz tone as a microphone captures it (48 kHz, mono, 10 ms chunks) from `from` to `until`.
func microphone(from: Timestamp, until: Timestamp) -> [AudioChunk] {
    var chunks: [AudioChunk] = []
    var t = from
    var n = 0
    while t < until {
        var data = [UInt8](repeating: 0, count: 960)
        for i in 0..<480 {
            // A triangle wave: a tone without sin() (no Foundation here).
            let phase = (n + i) % 109
            let v = Int16((phase < 55 ? phase : 109 - phase) * 240 - 6600)
            data[2 * i] = UInt8(truncatingIfNeeded: v)
            data[2 * i + 1] = UInt8(truncatingIfNeeded: v >> 8)
        }
        chunks.append(AudioChunk(data: data, time: t, sampleRate: 48000, channels: 1))
        n += 480
        t = t + Timestamp.Duration(nanoseconds: 10_000_000)
    }
    return chunks
}

/// A feed as the web server opens it, on a stream of `movie`.
func openedFeed(_ movie: LiveMovie) -> LiveFeed {
    let feed = LiveFeed()
    feed.open()
    feed.begin(movie)
    return feed
}
