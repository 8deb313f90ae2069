import Media
import QuickTime
import Synchronization

/// The encoded stream as it happens, for live viewers: each GOP when it is complete (the next
/// keyframe came), with the stream's format; viewers (the web server's `/live.mp4`, its HLS
/// playlist) take them from here, on their own threads. What goes in is a pipeline step's
/// output (`Update`, `PipelineOutput.live`), which the pipeline thread hands over.
///
/// Publishing never waits and costs a lock and an append: the pipeline does not know how many
/// viewers there are or how fast they read. The feed keeps the last `window` GOPs (shared with
/// the pre-roll ring, not copied); a viewer that falls behind takes the newest, one that has
/// nothing new to read leaves a wake-up to be called at the next publish.
///
/// The sound captured meanwhile comes with each GOP, as it was captured (PCM, `HeardSound`):
/// the feed never encodes it; viewers encode it for themselves, only while there are any.
///
/// Off until `open()` (the web server opens it): an agent without viewers keeps nothing here.
public final class LiveFeed: Sendable {
    /// One complete GOP, numbered in publishing order from 1, with the format of the stream
    /// it is part of. The stream changes (`stream`) when the source was interrupted and the
    /// encoder made again: a viewer of one stream cannot go on into the next.
    public struct Item: Sendable {
        public var sequence: UInt64
        public var stream: Int
        public var movie: LiveMovie
        public var gop: GOP
        /// The start of the stream's first published GOP: the zero of one timeline every
        /// GOP of the stream is placed on (HLS segments follow each other on it).
        public var origin: Timestamp
        /// The microphone's format when the stream has sound (the same for every GOP of it).
        public var sound: AudioTrackFormat?
        /// The sound captured since the GOP before was published, in capture order (it lags
        /// the video by the capture's latency: each GOP's sound ends a little before it does).
        public var audio: [AudioChunk] = []
    }

    /// What a viewer can take now.
    public enum Next: Sendable {
        case item(Item)
        /// Nothing yet: `wake` is kept and called at the next publish (or when the feed closes).
        case waiting
        /// The feed is closed (the agent stops).
        case closed
    }

    /// What the pipeline tells the feed, as a step's output.
    public enum Update: Sendable {
        /// A new stream begins, in this format (its SPS and PPS).
        case begin(LiveMovie)
        /// A GOP of the stream is complete; `sound`: what was captured since the GOP before
        /// (`HeardSound`).
        case gop(GOP, sound: [AudioChunk])
        /// The stream was interrupted: what follows is another stream (`begin`).
        case interrupt
    }

    struct State {
        var open = false
        var closed = false
        var movie: LiveMovie?
        var origin: Timestamp?
        var stream = 0
        var items: [Item] = []
        var nextSequence: UInt64 = 1
        var wakes: [@Sendable () -> Void] = []
        /// The stream's sound format, once sound came with a GOP.
        var sound: AudioTrackFormat?
    }

    /// How many GOPs are kept (HLS lists them; a viewer starts at the newest).
    public let window: Int
    private let state = Mutex(State())

    public init(window: Int = 6) {
        self.window = max(2, window)
    }

    /// Starts keeping what is published.
    public func open() { state.withLock { $0.open = true } }

    /// Takes what a pipeline step said.
    package func take(_ update: Update) {
        switch update {
        case .begin(let movie): begin(movie)
        case .gop(let gop, let sound): publish(gop, sound: sound)
        case .interrupt: interrupt()
        }
    }

    /// A new stream begins, in `movie`'s format (its SPS and PPS); GOPs published from now on
    /// are of it.
    package func begin(_ movie: LiveMovie) {
        state.withLock {
            guard $0.open else { return }
            $0.movie = movie
            $0.origin = nil
            $0.stream += 1
            $0.sound = nil
        }
    }

    /// The stream was interrupted: what follows is another stream (`begin`).
    package func interrupt() {
        state.withLock { $0.movie = nil }
    }

    /// A complete GOP of the current stream, with the sound captured since the GOP before, in
    /// capture order. The stream's first sound says its format; sound that comes only after a
    /// GOP of the stream went out without it (a microphone slower to start than the camera),
    /// or in another format, begins a new stream with it — a viewer of the old one asks again
    /// and hears it.
    package func publish(_ gop: GOP, sound: [AudioChunk] = []) {
        let wakes = state.withLock { s -> [@Sendable () -> Void] in
            guard s.open, !s.closed, let movie = s.movie else { return [] }
            if let last = sound.last {
                let format = AudioTrackFormat(sampleRate: last.sampleRate, channels: last.channels)
                if s.sound != format {
                    if s.origin != nil {
                        s.origin = nil
                        s.stream += 1
                    }
                    s.sound = format
                }
            }
            let origin = s.origin ?? gop.start
            s.origin = origin
            s.items.append(
                Item(
                    sequence: s.nextSequence, stream: s.stream, movie: movie, gop: gop, origin: origin,
                    sound: s.sound, audio: sound))
            s.nextSequence += 1
            if s.items.count > window { s.items.removeFirst(s.items.count - window) }
            defer { s.wakes = [] }
            return s.wakes
        }
        for wake in wakes { wake() }
    }

    /// No more GOPs: every waiting viewer is woken and finds the feed closed.
    public func close() {
        let wakes = state.withLock { s -> [@Sendable () -> Void] in
            s.closed = true
            defer { s.wakes = [] }
            return s.wakes
        }
        for wake in wakes { wake() }
    }

    /// The GOP a viewer that has `sequence` (nil: nothing yet) takes next: the newest, when it
    /// is newer — a viewer that fell a GOP behind skips to it, so it lags by a GOP at most. When there is none yet,
    /// `sleep` is called — under the feed's lock, so no publish comes between the look and the
    /// sleep — and `wake` kept for the next publish.
    public func next(after sequence: UInt64?, sleep: () -> Void, wake: @escaping @Sendable () -> Void) -> Next {
        state.withLock { s in
            if s.closed { return .closed }
            if let newest = s.items.last, newest.sequence > sequence ?? 0 { return .item(newest) }
            sleep()
            s.wakes.append(wake)
            return .waiting
        }
    }

    /// The GOPs kept, oldest first.
    public var items: [Item] { state.withLock { $0.items } }
}

/// The sound captured since the last complete GOP, for the live view: it goes out with the
/// next one (`LiveFeed.Update.gop`). Kept by the pipeline while a stream goes on, as it comes
/// (shared with the pre-roll ring, not copied); at most `keptSeconds` of it, and only of the
/// newest format (sound in another format drops what came before).
struct HeardSound {
    private(set) var chunks: [AudioChunk] = []
    private var bytes = 0

    /// A GOP lasts a second or two, so more means GOPs stopped coming while sound did (the
    /// oldest goes).
    static let keptSeconds = 4

    mutating func hear(_ chunk: AudioChunk) {
        if let last = chunks.last, last.sampleRate != chunk.sampleRate || last.channels != chunk.channels {
            chunks = []
            bytes = 0
        }
        chunks.append(chunk)
        bytes += chunk.data.count
        let most = Self.keptSeconds * chunk.sampleRate * chunk.bytesPerFrame
        while bytes > most, chunks.count > 1 {
            bytes -= chunks.removeFirst().data.count
        }
    }

    /// What was heard, for the GOP completed now; nothing is kept.
    mutating func take() -> [AudioChunk] {
        defer { self = HeardSound() }
        return chunks
    }
}
