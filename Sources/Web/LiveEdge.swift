import Agent
import Media
import QuickTime
import Synchronization

/// `/live/edge.mp4` and `/live.mp4`: the live stream a frame at a time, for the page's live view
/// (its script appends the bytes to a Media Source Extensions buffer and holds the player at the
/// newest frame) and for any player of progressive fragmented MP4 (they differ in `Timeline`).
/// An initialization segment, then one media segment (`moof` + `mdat`) per access unit as the
/// encoder gave it — the samples the pre-roll ring holds, framed anew, never encoded again.
///
/// It starts at the newest keyframe with the GOP in progress (a picture at once), then sends
/// each frame as the agent publishes it (`LiveFeed.frames(after:)`). A viewer whose connection
/// took less than came — the frame after its last is no longer kept when it asks, a keyframe
/// came since — goes on from the newest keyframe: what it had not started is dropped, never
/// sent late.
///
/// With a microphone, each fragment carries the sound captured since the frame before as Opus
/// (the second track), encoded once for every viewer (`LiveSound.run(for:)`, frame by frame).
/// The stream ends when the camera's stream does (a new one may have another format: the
/// player asks again), after `limit` keyframes when asked, or when the server stops. A viewer
/// that comes before the first frame waits for it.
package final class LiveFrameViewer: HTTPStream {
    struct State {
        var chunks: [[UInt8]] = []
        var offset = 0
        /// The last frame taken and its stream.
        var number: UInt64?
        var stream: Int?
        /// The interval between the last two frames (the last frame of a batch lasts as long:
        /// the next one's time is not known yet).
        var interval = Timestamp.Duration(nanoseconds: 1_000_000_000 / 30)
        var previous: Timestamp?
        /// The zero of its timeline (`Timeline`).
        var origin = Timestamp.zero
        var fragments: UInt32 = 0
        var keyframes = 0
        var over = false
        /// Whether the stream was announced without sound, and where the sound sent so far ends.
        var soundFailed = false
        var soundEnd: UInt64 = 0
        /// How many times it went on from a newer keyframe than the frame after its last.
        var skips = 0
    }

    /// Where a fragment is placed in time.
    package enum Timeline: Sendable {
        /// At its capture time (media time = capture time): a skip is a gap, every viewer of a
        /// run on one timeline (`/live/edge.mp4`, the page's view, which jumps gaps; the wall
        /// clock at its zero is said in `X-Capture-Clock`, seconds since 1970).
        case capture
        /// From zero at the first frame, each skip's gap closed (`/live.mp4`: a player that
        /// plays on by the timestamps — VLC, a `<video src>` — shows the newest frame next
        /// instead of holding the last for as long as it missed).
        case continuous
    }

    let feed: LiveFeed
    let sound: LiveSound?
    let limit: Int?
    let timeline: Timeline
    let onClose: @Sendable () -> Void
    let state = Mutex(State())

    package init(
        feed: LiveFeed, sound: LiveSound?, limit: Int? = nil, timeline: Timeline = .capture,
        onClose: @escaping @Sendable () -> Void
    ) {
        self.feed = feed
        self.timeline = timeline
        self.sound = sound
        self.limit = limit
        self.onClose = onClose
    }

    /// How many times it skipped to a newer keyframe (tests).
    var skips: Int { state.withLock { $0.skips } }

    package func read(
        into buffer: UnsafeMutableRawBufferPointer, sleep: () -> Void, wake: @escaping @Sendable () -> Void
    ) -> HTTPStreamRead {
        state.withLock { s in
            var written = 0
            while written < buffer.count {
                if s.chunks.isEmpty {
                    if written > 0 || s.over { break }
                    switch feed.frames(after: s.number, sleep: sleep, wake: wake) {
                    case .closed:
                        s.over = true
                    case .waiting:
                        return .waiting
                    case .frames(let frames):
                        take(frames, into: &s)
                    }
                    continue
                }
                let chunk = s.chunks[0]
                let count = min(chunk.count - s.offset, buffer.count - written)
                chunk.withUnsafeBytes { source in
                    buffer.baseAddress!.advanced(by: written).copyMemory(
                        from: source.baseAddress!.advanced(by: s.offset), byteCount: count)
                }
                written += count
                s.offset += count
                if s.offset == chunk.count {
                    s.chunks.removeFirst()
                    s.offset = 0
                }
            }
            return written > 0 ? .bytes(written) : .end
        }
    }

    /// Queues the fragments of `frames` (after the initialization segment, for the first).
    private func take(_ frames: [LiveFeed.Frame], into s: inout State) {
        guard let first = frames.first else { return }
        if let stream = s.stream, stream != first.stream {
            s.over = true
            return
        }
        if s.stream == nil {
            s.stream = first.stream
            var movie = first.movie
            if let format = first.sound, let track = sound?.track(for: format),
                let withSound = try? LiveMovie(video: first.movie.video, sound: track)
            {
                movie = withSound
            }
            if movie.sound == nil { s.soundFailed = true }
            s.chunks.append(movie.initialization())
            if timeline == .continuous { s.origin = first.sample.pts }
        } else if let number = s.number, first.number != number + 1 {
            s.skips += 1
            if timeline == .continuous, let previous = s.previous, first.sample.pts > previous + s.interval {
                s.origin = s.origin + (first.sample.pts - (previous + s.interval))
            }
        }
        for (i, frame) in frames.enumerated() {
            let pts = frame.sample.pts
            if frame.sample.isKeyframe {
                if let limit, s.keyframes >= limit {
                    s.over = true
                    return
                }
                s.keyframes += 1
            }
            if let previous = s.previous, pts > previous, pts - previous < .init(nanoseconds: 1_000_000_000) {
                s.interval = pts - previous
            }
            s.previous = pts
            let end = i + 1 < frames.count ? frames[i + 1].sample.pts : pts + s.interval
            let run = soundRun(frame, &s)
            s.fragments += 1
            let segment = LiveMovie.fragment(
                [frame.sample], end: end, sound: run, soundFrom: s.soundEnd, sequence: s.fragments, origin: s.origin)
            if let soundEnd = segment.soundEnd { s.soundEnd = max(s.soundEnd, soundEnd) }
            s.chunks.append(segment.header)
            s.chunks += segment.payload.filter { !$0.isEmpty }
            s.number = frame.number
        }
    }

    /// `frame`'s sound as Opus packets (nil without sound), from the encoding every viewer
    /// shares (`LiveSound.run(for:)`).
    private func soundRun(_ frame: LiveFeed.Frame, _ s: inout State) -> LiveMovie.SoundRun? {
        guard !s.soundFailed, frame.sound != nil else { return nil }
        return sound?.run(for: frame)
    }

    package func close() { onClose() }
}
