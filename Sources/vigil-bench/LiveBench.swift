import Agent
import Media
import QuickTime
import Web

/// What the live view costs: ten viewers of `/live.mp4` served from the GOPs the encoder made
/// (`samples`), through the same feed and viewer code the web server runs — each GOP published,
/// framed as a fragment for each viewer and copied out in the server's 16 KB blocks — in
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
    let viewers = 10
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    var bytes = 0
    var elapsed = 0.0
    var served = 0
    while elapsed < 0.3 || served < 2 * frames {
        let feed = LiveFeed()
        feed.open()
        feed.begin(movie)
        let watching = (0..<viewers).map { _ in LiveViewer(feed: feed, sound: nil, limit: nil) {} }
        elapsed += time {
            for gop in gops {
                feed.publish(gop)
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
    let perFrame = elapsed * 1000 / Double(served)
    table.record("live view, 10 viewers (/live.mp4)", unit: "ms/frame", column: column, value: perFrame)
    table.record(
        "live view, 10 viewers / x264, 1 thread", unit: "%", column: column, value: 100 * perFrame / encodePerFrame)
    precondition(bytes > 0)
}
