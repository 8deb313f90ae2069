import Agent
import FoundationEssentials
import Media
import QuickTime
import Synchronization

/// `/live.mp4` for one viewer: a progressive fragmented MP4 that starts with the newest
/// complete GOP and goes on with each new one as the agent publishes it — the GOPs it encoded
/// for its clips, framed anew, never encoded again. A viewer that falls a GOP behind skips to
/// the newest (its timeline closes the gap, so players play on); it holds a GOP at most, shared
/// with the pre-roll ring. With a microphone, each fragment carries the sound captured with its
/// GOP as a second track (Opus, encoded once for every viewer by `LiveSound`). The stream ends
/// when the camera's stream does (a new one may have another format: the player asks again),
/// after `limit` GOPs when asked, or when the server stops.
package final class LiveViewer: HTTPStream {
    struct State {
        /// What is to be sent, in order; the first is sent from `offset`.
        var chunks: [[UInt8]] = []
        var offset = 0
        /// The last GOP taken, its stream, and where it ended.
        var sequence: UInt64?
        var stream: Int?
        var previousEnd: Timestamp?
        /// The zero of this viewer's timeline: the first GOP's start, moved on by every gap
        /// skipped, so the fragments follow each other without one.
        var origin = Timestamp.zero
        var fragments: UInt32 = 0
        var over = false
        /// Whether the stream was announced with sound, and where the sound sent so far ends.
        var hasSound = false
        var soundEnd: UInt64 = 0
    }

    let feed: LiveFeed
    let sound: LiveSound?
    let limit: Int?
    let onClose: @Sendable () -> Void
    let state = Mutex(State())

    /// A viewer of `feed`, with its sound encoded by `sound` (picture only without).
    package init(feed: LiveFeed, sound: LiveSound?, limit: Int?, onClose: @escaping @Sendable () -> Void) {
        self.feed = feed
        self.sound = sound
        self.limit = limit
        self.onClose = onClose
    }

    package func read(
        into buffer: UnsafeMutableRawBufferPointer, sleep: () -> Void, wake: @escaping @Sendable () -> Void
    ) -> HTTPStreamRead {
        state.withLock { s in
            var written = 0
            while written < buffer.count {
                if s.chunks.isEmpty {
                    // Bytes already given go out before the viewer waits for more.
                    if written > 0 || s.over { break }
                    if let limit, s.fragments >= limit {
                        s.over = true
                        break
                    }
                    switch feed.next(after: s.sequence, sleep: sleep, wake: wake) {
                    case .closed:
                        s.over = true
                    case .waiting:
                        return .waiting
                    case .item(let item):
                        if let stream = s.stream, stream != item.stream {
                            s.over = true
                        } else {
                            take(item, into: &s)
                        }
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

    /// Queues `item`'s fragment (after the initialization segment, for the first).
    private func take(_ item: LiveFeed.Item, into s: inout State) {
        if s.stream == nil {
            s.stream = item.stream
            s.origin = item.gop.start
            let movie = sound?.movie(for: item) ?? item.movie
            s.hasSound = movie.sound != nil
            s.chunks.append(movie.initialization())
        } else if let end = s.previousEnd, item.gop.start > end {
            s.origin = s.origin + (item.gop.start - end)
        }
        s.fragments += 1
        let run = s.hasSound ? sound?.run(for: item) : nil
        let segment = LiveMovie.segment(
            item.gop, sound: run, soundFrom: s.soundEnd, sequence: s.fragments, origin: s.origin)
        if let end = segment.soundEnd { s.soundEnd = max(s.soundEnd, end) }
        s.chunks.append(segment.header)
        s.chunks += segment.payload.filter { !$0.isEmpty }
        s.sequence = item.sequence
        s.previousEnd = item.gop.end ?? item.gop.lastTime
    }

    package func close() { onClose() }
}

/// HLS: `/live.m3u8` lists the newest GOPs the feed keeps as fMP4 segments
/// (`/live/SEQUENCE.m4s`, each after the stream's initialization segment
/// `/live/init-STREAM.mp4`), on one timeline per camera stream; a new stream (after an
/// interruption) comes after a discontinuity. RFC 8216's rules, kept so:
/// - the playlist lists as few of the newest GOPs as last three target durations (§6.2.2 asks
///   no less); the feed keeps older ones as long as §6.2.2 asks a segment that left the list be
///   served — its duration and the longest playlist that listed it (`LiveFeed.hlsKeeps`) —
///   then it answers 404;
/// - the media sequence is the feed's GOP number and the discontinuity sequence its stream
///   number, both counted on from the wall clock's quarter-seconds since 2024 at the agent's start
///   (`LiveFeed.numbering`): neither goes back, across a restart too (§6.2.1), and a player
///   that reloads across one sees the new stream's segments as a new discontinuity.
enum LivePlaylist {
    static let type = "application/vnd.apple.mpegurl"

    /// The GOPs a playlist lists from `items` (oldest first, as the feed keeps them).
    static func listed(_ items: [LiveFeed.Item]) -> ArraySlice<LiveFeed.Item> {
        let least = Double(3 * LiveFeed.targetDuration(items))
        var from = items.count
        var seconds = 0.0
        while from > 0, seconds < least {
            from -= 1
            seconds += Double(duration(of: items[from])) / Double(LiveMovie.timescale)
        }
        return items[from...]
    }

    /// The playlist of `items` (the feed's, oldest first); nil when there are none.
    static func playlist(_ items: [LiveFeed.Item]) -> String? {
        let shown = listed(items)
        guard let first = shown.first else { return nil }
        let seconds = shown.map { Double(duration(of: $0)) / Double(LiveMovie.timescale) }
        var lines = [
            "#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:\(LiveFeed.targetDuration(items))",
            "#EXT-X-MEDIA-SEQUENCE:\(first.sequence)",
            // Each stream before the first listed ended with a discontinuity.
            "#EXT-X-DISCONTINUITY-SEQUENCE:\(first.stream - 1)", "#EXT-X-INDEPENDENT-SEGMENTS",
        ]
        var stream: Int?
        for (item, length) in zip(shown, seconds) {
            if item.stream != stream {
                if stream != nil { lines.append("#EXT-X-DISCONTINUITY") }
                stream = item.stream
                lines.append("#EXT-X-MAP:URI=\"live/init-\(item.stream).mp4\"")
            }
            lines += ["#EXTINF:\(DecimalText.fixed(length, 3)),", "live/\(item.sequence).m4s"]
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// How long `item`'s segment plays, in ticks.
    static func duration(of item: LiveFeed.Item) -> UInt64 {
        segment(item).duration
    }

    /// `item`'s media segment, on its stream's timeline.
    static func segment(_ item: LiveFeed.Item) -> LiveMovie.Segment {
        LiveMovie.segment(item.gop, sequence: UInt32(truncatingIfNeeded: item.sequence), origin: item.origin)
    }
}
