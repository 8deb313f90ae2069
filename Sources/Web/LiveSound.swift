import Agent
import Logging
import Media
import QuickTime
import Synchronization

/// The live stream's sound: the PCM each GOP of the feed carries, encoded as Opus when a viewer
/// first asks for it, and kept while the feed keeps the GOP — so ten viewers, or a viewer and
/// an HLS player, cost one encode, and an agent nobody watches encodes nothing.
///
/// One encoder goes on from GOP to GOP of a stream (sound across a GOP's edge is not cut: the
/// samples short of a 20 ms frame wait for the next GOP's). Its timeline is the capture clock:
/// a gap in the capture is filled with silence, an overlap dropped, and a microphone that stops
/// giving sound is heard as silence up to half a second behind the picture — a player never
/// waits for sound that will not come.
package final class LiveSound: Sendable {
    /// Sound may lag the GOP it comes with by this much before silence stands in for it.
    static let lagAllowed = Timestamp.Duration(nanoseconds: 500_000_000)
    /// A jump in the capture times smaller than this is the capture's jitter: the samples go on
    /// as if there were none.
    static let jitter = Timestamp.Duration(nanoseconds: 20_000_000)
    /// The longest gap filled with silence; sound after a longer one starts a timeline anew.
    static let longestGap = Timestamp.Duration(nanoseconds: 10_000_000_000)

    /// One stream's encoding, as far as it has gone.
    struct Encoding {
        var stream: Int
        var encoder: OpusEncoder
        /// The capture time of the first sample encoded, and how many sample frames were
        /// encoded since (a whole number of 20 ms frames).
        var anchor: Timestamp?
        var encoded: Int64 = 0
        /// Interleaved samples after those, short of a frame.
        var pending: [Int16] = []
        /// The GOP whose sound was encoded last.
        var sequence: UInt64 = 0

        /// When the sample after the pending ones was captured.
        var next: Timestamp? {
            anchor.map { $0 + duration(frames: encoded + Int64(pending.count / encoder.channels)) }
        }

        func duration(frames: Int64) -> Timestamp.Duration {
            Timestamp.Duration(frames: frames, rate: Rational(Int64(encoder.sampleRate), 1))
        }

        func frames(in span: Timestamp.Duration) -> Int { span.frames(sampleRate: encoder.sampleRate) }
    }

    struct State {
        var encoding: Encoding?
        /// Each kept GOP's packets, by sequence number.
        var runs: [UInt64: LiveMovie.SoundRun] = [:]
        /// Frame by frame: the encoding (its `sequence` the last frame encoded) and each kept
        /// frame's packets, by frame number.
        var frameEncoding: Encoding?
        var frameRuns: [UInt64: LiveMovie.SoundRun] = [:]
        /// The track each microphone format makes (nil: none; said once).
        var tracks: [AudioTrackFormat: LiveMovie.Sound?] = [:]
        var failureSaid = false
    }

    let feed: LiveFeed
    let log: Logger?
    private let state = Mutex(State())

    package init(feed: LiveFeed, log: Logger?) {
        self.feed = feed
        self.log = log
    }

    /// The movie `item`'s stream is sent as: its video, and an Opus track when it has sound
    /// that Opus takes.
    package func movie(for item: LiveFeed.Item) -> LiveMovie {
        guard let format = item.sound, let sound = state.withLock({ track(for: format, &$0) }),
            let movie = try? LiveMovie(video: item.movie.video, sound: sound)
        else { return item.movie }
        return movie
    }

    /// The Opus track sound in `format` makes (nil when Opus cannot take it: said once).
    package func track(for format: AudioTrackFormat) -> LiveMovie.Sound? {
        state.withLock { track(for: format, &$0) }
    }

    /// `item`'s sound as Opus packets (nil when its stream has none). Encodes what the feed
    /// keeps from the GOP after the last encoded up to `item`, in order, unless that was
    /// already done.
    package func run(for item: LiveFeed.Item) -> LiveMovie.SoundRun? {
        guard let format = item.sound else { return nil }
        return state.withLock { s in
            if let run = s.runs[item.sequence] { return run }
            guard track(for: format, &s) != nil else { return nil }
            let kept = feed.items
            var todo = [item]
            var encoding = s.encoding
            if let e = encoding, e.stream == item.stream, e.sequence > item.sequence {
                // An older GOP than the encoder has reached (a viewer skipped it, then a player
                // asks for it): encoded apart, leaving the stream's encoder where it is.
                var apart: Encoding?
                return keep(encode(item, format, &apart), of: item, &s)
            }
            if let e = encoding, e.stream == item.stream,
                let from = kept.firstIndex(where: { $0.sequence == e.sequence + 1 }),
                let to = kept.firstIndex(where: { $0.sequence == item.sequence }), from <= to,
                kept[from...to].allSatisfy({ $0.stream == item.stream })
            {
                todo = Array(kept[from...to])
            } else {
                encoding = nil
            }
            var last: LiveMovie.SoundRun?
            for gop in todo {
                last = keep(encode(gop, format, &encoding), of: gop, &s)
                if last == nil { break }
            }
            s.encoding = encoding
            // Packets of GOPs the feed no longer keeps are never asked for again.
            let oldest = kept.first?.sequence ?? item.sequence
            s.runs = s.runs.filter { $0.key >= oldest }
            return last
        }
    }

    /// `frame`'s sound as Opus packets (nil when its stream has none), for the one-frame
    /// fragments: one encoding goes on from frame to frame of a stream, for every viewer —
    /// it encodes the frames the feed keeps from the one after the last encoded up to `frame`,
    /// in order, unless that was done. A frame older than the encoding reached and no longer
    /// kept is encoded apart.
    package func run(for frame: LiveFeed.Frame) -> LiveMovie.SoundRun? {
        guard let format = frame.sound else { return nil }
        return state.withLock { s in
            if let run = s.frameRuns[frame.number] { return run }
            guard track(for: format, &s) != nil else { return nil }
            var todo = [frame]
            var encoding = s.frameEncoding
            if let e = encoding, e.stream == frame.stream, e.sequence >= frame.number {
                var apart: Encoding?
                return keep(encode(frame, format, &apart), of: frame, &s)
            }
            let kept: [LiveFeed.Frame]
            if case .frames(let frames) = feed.frames(after: nil) { kept = frames } else { kept = [] }
            if let e = encoding, e.stream == frame.stream,
                let from = kept.firstIndex(where: { $0.number > e.sequence }),
                let to = kept.firstIndex(where: { $0.number == frame.number }), from <= to
            {
                todo = Array(kept[from...to])
            } else if encoding?.stream != frame.stream {
                encoding = nil
            }
            var last: LiveMovie.SoundRun?
            for each in todo where each.stream == frame.stream {
                last = keep(encode(each, format, &encoding), of: each, &s)
                if last == nil { break }
            }
            s.frameEncoding = encoding
            // Packets of frames the feed no longer keeps are never asked for again.
            let oldest = kept.first?.number ?? frame.number
            s.frameRuns = s.frameRuns.filter { $0.key >= oldest }
            return last
        }
    }

    /// Encodes `frame`'s sound with `encoding` (made for it when there is none; dropped when
    /// libopus fails).
    private func encode(_ frame: LiveFeed.Frame, _ format: AudioTrackFormat, _ encoding: inout Encoding?) -> Encoded {
        do throws(OpusEncoder.Failure) {
            var e: Encoding
            if let going = encoding {
                e = going
            } else {
                e = Encoding(
                    stream: frame.stream,
                    encoder: try OpusEncoder(sampleRate: format.sampleRate, channels: format.channels))
            }
            let run = try Self.encode(frame.audio, start: frame.sample.pts, end: frame.sample.pts, with: &e)
            e.sequence = frame.number
            encoding = e
            return .success(run)
        } catch {
            encoding = nil
            return .failure(error)
        }
    }

    /// Keeps `result`'s packets as `frame`'s; a failure is said once.
    private func keep(_ result: Encoded, of frame: LiveFeed.Frame, _ s: inout State) -> LiveMovie.SoundRun? {
        switch result {
        case .success(let run):
            s.frameRuns[frame.number] = run
            return run
        case .failure(let error):
            if !s.failureSaid {
                s.failureSaid = true
                log?.warning(
                    "live view without sound: the sound cannot be encoded", [("error", .string(error.description))])
            }
            return nil
        }
    }

    /// What encoding a GOP's sound gives.
    typealias Encoded = Result<LiveMovie.SoundRun, OpusEncoder.Failure>

    /// Encodes `item`'s sound (in `format`) with `encoding` (made for it when there is none;
    /// dropped when libopus fails).
    private func encode(_ item: LiveFeed.Item, _ format: AudioTrackFormat, _ encoding: inout Encoding?) -> Encoded {
        do throws(OpusEncoder.Failure) {
            var e: Encoding
            if let going = encoding {
                e = going
            } else {
                e = Encoding(
                    stream: item.stream,
                    encoder: try OpusEncoder(sampleRate: format.sampleRate, channels: format.channels))
            }
            let run = try Self.encode(item, with: &e)
            encoding = e
            return .success(run)
        } catch {
            encoding = nil
            return .failure(error)
        }
    }

    /// Keeps `result`'s packets as `item`'s; a failure is said once.
    private func keep(_ result: Encoded, of item: LiveFeed.Item, _ s: inout State) -> LiveMovie.SoundRun? {
        switch result {
        case .success(let run):
            s.runs[item.sequence] = run
            return run
        case .failure(let error):
            if !s.failureSaid {
                s.failureSaid = true
                log?.warning(
                    "live view without sound: the sound cannot be encoded", [("error", .string(error.description))])
            }
            return nil
        }
    }

    /// `item`'s sound on the encoding's timeline, and the packets of every whole frame.
    static func encode(
        _ item: LiveFeed.Item, with e: inout Encoding
    ) throws(OpusEncoder.Failure)
        -> LiveMovie.SoundRun
    {
        let run = try encode(item.audio, start: item.gop.start, end: item.gop.end ?? item.gop.lastTime, with: &e)
        e.sequence = item.sequence
        return run
    }

    /// `audio` (what came with pictures from `start` to `end`) on the encoding's timeline, and
    /// the packets of every whole frame: a GOP's sound, or a single frame's (the live view's
    /// one-frame fragments, each viewer with an encoding of its own).
    static func encode(
        _ audio: [AudioChunk], start: Timestamp, end: Timestamp, with e: inout Encoding
    ) throws(OpusEncoder.Failure)
        -> LiveMovie.SoundRun
    {
        let channels = e.encoder.channels
        for chunk in audio where chunk.channels == channels && chunk.sampleRate == e.encoder.sampleRate {
            var skip = 0
            if let next = e.next {
                let gap = chunk.time - next
                if gap > longestGap {
                    // Too long to fill: the packets waiting are dropped, and the timeline
                    // starts again at this chunk.
                    e.anchor = chunk.time
                    e.encoded = 0
                    e.pending = []
                } else if gap > jitter {
                    e.pending += repeatElement(0, count: e.frames(in: gap) * channels)
                } else if gap < .zero - jitter {
                    skip = min(chunk.frames, e.frames(in: .zero - gap))
                }
            } else {
                e.anchor = chunk.time
            }
            e.pending.reserveCapacity(e.pending.count + (chunk.frames - skip) * channels)
            chunk.data.withUnsafeBytes { bytes in
                for i in (skip * channels)..<(chunk.frames * channels) {
                    e.pending.append(Int16(littleEndian: bytes.loadUnaligned(fromByteOffset: i * 2, as: Int16.self)))
                }
            }
        }
        // A microphone that fell silent, or sound that never came: silence up to where the
        // sound may lag the picture.
        let due = end - lagAllowed
        if e.anchor == nil { e.anchor = min(start, due) }
        if let next = e.next, due - next > .zero {
            e.pending += repeatElement(0, count: e.frames(in: due - next) * channels)
        }
        let start = e.anchor! + e.duration(frames: e.encoded)
        let frame = e.encoder.frameSamples * channels
        var packets: [[UInt8]] = []
        var used = 0
        while e.pending.count - used >= frame {
            packets.append(try e.encoder.encode(e.pending[used..<(used + frame)]))
            used += frame
        }
        e.pending.removeFirst(used)
        e.encoded += Int64(used / channels)
        return LiveMovie.SoundRun(start: start, packets: packets)
    }

    /// The track `format` makes, found once (an encoder made and asked its lookahead).
    private func track(for format: AudioTrackFormat, _ s: inout State) -> LiveMovie.Sound? {
        if let known = s.tracks[format] { return known }
        var track: LiveMovie.Sound?
        do throws(OpusEncoder.Failure) {
            let encoder = try OpusEncoder(sampleRate: format.sampleRate, channels: format.channels)
            track = LiveMovie.Sound(
                channels: format.channels, inputSampleRate: format.sampleRate, preSkip: encoder.preSkip)
        } catch {
            log?.warning(
                "live view without sound",
                [
                    ("error", .string(error.description)),
                    ("fix", .string("set audio.rate to 48000 or 16000 (or use a plughw: device, which converts)")),
                ])
        }
        s.tracks[format] = track
        return track
    }
}
