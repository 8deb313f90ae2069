import Media
import QuickTime
import Synchronization

/// The encoded stream as it happens, for live viewers, in two forms: each GOP when it is
/// complete (the next keyframe came: `Item`, `next(after:)`, `items` — HLS's segments, the RTSP
/// server), and each access unit as the encoder gives it (`Frame`, `frames(after:)` — the page's
/// live view and `/live.mp4`, a frame behind the camera instead of a GOP), with the stream's
/// format. Viewers take them from here, on their own threads. What goes in is a pipeline step's
/// output (`Update`, `PipelineOutput.live`), which the pipeline thread hands over.
///
/// Publishing never waits and costs a lock and an append: the pipeline does not know how many
/// viewers there are or how fast they read. The feed keeps the last `window` GOPs at least, more
/// while HLS must still serve them (`hlsKeeps`), `mostKept` at most (shared with the pre-roll
/// ring, not copied); a viewer that falls behind takes the newest, one that has nothing new to
/// read leaves a wake-up to be called at the next publish.
///
/// The sound captured meanwhile comes with each GOP, as it was captured (PCM, `HeardSound`):
/// the feed never encodes it; viewers encode it for themselves, only while there are any.
///
/// Frame by frame: the feed keeps the GOP in progress, from its keyframe (its samples shared with
/// the pre-roll ring; at most `framesKept` of them). A viewer starts at the newest keyframe — it
/// takes the GOP in progress at once, so its first picture needs no wait for the next keyframe —
/// then every frame after the last it took (`frames(after:)` with the last `Frame.number`). A
/// viewer that fell behind past a keyframe (the frame after its last is no longer kept) gets the
/// GOP in progress from its keyframe again: it drops what it had not started instead of being
/// fed an ever older backlog. Two ways to read, both costing the pipeline nothing:
/// - woken: `frames(after:sleep:wake:)` leaves `wake` to be called at the next publish when
///   there is nothing new (the web server's streams);
/// - pulled: `frames(after:)` answers at once, for a reader on a tick of its own (an RTSP
///   feeder's 20 ms loop), which may also leave a wake-up with the first form to shorten its
///   wait.
///
/// Off until `open()` (the web server opens it): an agent without viewers keeps nothing here.
public final class LiveFeed: Sendable {
    /// One complete GOP, numbered in publishing order (from the feed's `numberedFrom` + 1: the
    /// agent's from the wall clock, so the numbers never go back across a restart), with the
    /// format of the stream
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

    /// One access unit as the encoder gave it, numbered in publishing order from 1 (across
    /// streams), with its stream's format and the sound captured since the frame before.
    public struct Frame: Sendable {
        public var number: UInt64
        /// The stream it is part of (`Item.stream`'s numbering, but moved on by sound that comes
        /// in a new format: a viewer of one stream's frames cannot go on into the next).
        public var stream: Int
        public var movie: LiveMovie
        public var sample: EncodedSample
        /// The microphone's format when the stream has sound.
        public var sound: AudioTrackFormat?
        /// The sound captured since the frame before, in capture order.
        public var audio: [AudioChunk] = []
        /// The wall clock (seconds since 1970) at capture time zero, when the agent knows it:
        /// `wallAtZero + sample.pts.seconds` is when the frame was captured.
        public var wallAtZero: Double?
    }

    /// What a frame viewer can take now.
    public enum NextFrames: Sendable {
        /// The frames after the one asked about, in order — or, when that one is no longer kept
        /// (a keyframe came since, or it never took any), the GOP in progress from its keyframe.
        case frames([Frame])
        /// Nothing new: the woken form keeps `wake` for the next publish (or the close).
        case waiting
        case closed
    }

    /// What the pipeline tells the feed, as a step's output.
    public enum Update: Sendable {
        /// A new stream begins, in this format (its SPS and PPS).
        case begin(LiveMovie)
        /// The wall clock (seconds since 1970) at capture time zero, for what follows.
        case wallClock(Double)
        /// An access unit as the encoder gave it; `sound`: what was captured since the frame
        /// before (`HeardSound`).
        case frame(EncodedSample, sound: [AudioChunk])
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
        /// Frame by frame: the GOP in progress, its stream (moved on by sound in a new format),
        /// its sound format, the next frame's number.
        var current: [Frame] = []
        var frameStream = 0
        var frameSound: AudioTrackFormat?
        var nextFrame: UInt64 = 1
        var wallAtZero: Double?
    }

    /// The most frames of the GOP in progress kept (a GOP longer than this, a keyframe interval
    /// far above the usual, keeps its first frames only: a viewer that starts then waits for the
    /// next keyframe).
    public static let framesKept = 1024

    /// How many GOPs are kept at least; more while HLS needs them (`hlsKeeps`), `mostKept` at most.
    public let window: Int
    /// How many GOPs a feed keeps at least, unless told.
    public static let defaultWindow = 6
    /// The most GOPs kept, however short they are.
    public static let mostKept = 64

    /// The target duration of HLS's playlist of `items` (RFC 8216 §4.3.3.1): the longest GOP,
    /// in whole seconds rounded up, 1 at least.
    public static func targetDuration(_ items: some Collection<Item>) -> Int {
        let longest = items.map { (($0.gop.end ?? $0.gop.lastTime) - $0.gop.start).seconds }.max() ?? 1
        return max(1, Int(longest.rounded(.up)))
    }

    /// Whether `items` (the newer GOPs, without the oldest kept) are all HLS needs: a playlist
    /// lists the newest GOPs that last three target durations (T), which is less than 4T; a GOP
    /// that left it must be served for its own duration and the longest playlist that listed it
    /// (RFC 8216 §6.2.2: under T + 4T). GOPs that span 9T keep every segment that long.
    static func hlsKeeps(_ items: ArraySlice<Item>) -> Bool {
        guard let first = items.first, let last = items.last else { return false }
        let span = ((last.gop.end ?? last.gop.lastTime) - first.gop.start).seconds
        return span >= Double(9 * targetDuration(items))
    }
    private let state = Mutex(State())

    /// A feed keeping `window` GOPs, numbering them (`Item.sequence`) from `numberedFrom + 1`
    /// and its streams (`Item.stream`, `Frame.stream`) likewise: a number HLS's media sequence
    /// and discontinuity sequence take as they are.
    public init(window: Int = LiveFeed.defaultWindow, numberedFrom: UInt64 = 0) {
        self.window = max(2, window)
        state.withLock {
            $0.nextSequence = numberedFrom + 1
            $0.stream = Int(clamping: numberedFrom)
            $0.frameStream = Int(clamping: numberedFrom)
        }
    }

    /// Where an agent started at `wallSeconds` (since 1970) numbers its GOPs and streams from:
    /// the quarter-seconds since 2024 began (`numberingEpoch`). A GOP lasts a quarter of a second
    /// at least (`encoder.keyframe_interval`), so a run makes fewer GOPs (and streams) than
    /// quarter-seconds pass, and the next run's numbers start above the last run's — HLS's media
    /// sequence and discontinuity sequence never go back across a restart (RFC 8216 §6.2.1,
    /// §6.2.2), with nothing kept on disk — unless the wall clock was set back between the two.
    /// The numbers stay below 2³¹ until 2041: GStreamer's HLS client reads the media sequence as
    /// a 32-bit integer (the wall clock's milliseconds, 1.8 × 10¹², left it unread: it played the
    /// listed segments, then lost its place and stalled).
    public static func numbering(wallSeconds: Double) -> UInt64 {
        let since = wallSeconds - numberingEpoch
        return since.isFinite && since > 0 ? UInt64(since * 4) : 0
    }

    /// 2024-01-01T00:00:00Z, in seconds since 1970.
    static let numberingEpoch = 1_704_067_200.0

    /// Starts keeping what is published.
    public func open() { state.withLock { $0.open = true } }

    /// Takes what a pipeline step said.
    package func take(_ update: Update) {
        switch update {
        case .begin(let movie): begin(movie)
        case .gop(let gop, let sound): publish(gop, sound: sound)
        case .frame(let sample, let sound): publish(frame: sample, sound: sound)
        case .wallClock(let zero): state.withLock { $0.wallAtZero = zero }
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
            $0.frameStream += 1
            $0.frameSound = nil
            $0.current = []
        }
    }

    /// The stream was interrupted: what follows is another stream (`begin`).
    package func interrupt() {
        state.withLock {
            $0.movie = nil
            $0.current = []
        }
    }

    /// An access unit of the current stream as the encoder gave it, with the sound captured
    /// since the frame before. A keyframe starts the GOP in progress anew; frames before the
    /// stream's first keyframe are dropped. Sound in a new format begins a new stream of frames
    /// at the next keyframe (a viewer of the old one asks again and hears it).
    package func publish(frame sample: EncodedSample, sound: [AudioChunk] = []) {
        let wakes = state.withLock { s -> [@Sendable () -> Void] in
            guard s.open, !s.closed, let movie = s.movie else { return [] }
            if let last = sound.last {
                let format = AudioTrackFormat(sampleRate: last.sampleRate, channels: last.channels)
                if s.frameSound != format {
                    if !s.current.isEmpty { s.frameStream += 1 }
                    s.frameSound = format
                    s.current = []
                }
            }
            if sample.isKeyframe {
                s.current = []
            } else if s.current.isEmpty || s.current.count >= Self.framesKept {
                return []
            }
            s.current.append(
                Frame(
                    number: s.nextFrame, stream: s.frameStream, movie: movie, sample: sample, sound: s.frameSound,
                    audio: sound, wallAtZero: s.wallAtZero))
            s.nextFrame += 1
            defer { s.wakes = [] }
            return s.wakes
        }
        for wake in wakes { wake() }
    }

    /// What a viewer that has frame `number` (nil: none yet) takes now, without waiting: the
    /// frames after it, or the GOP in progress from its keyframe when the frame after it is no
    /// longer kept; `.waiting` when there is nothing new (nothing is kept for a wake-up).
    public func frames(after number: UInt64?) -> NextFrames {
        state.withLock { s in Self.frames(after: number, in: s) ?? .waiting }
    }

    /// The same, and when there is nothing new `sleep` is called — under the feed's lock, so no
    /// publish comes between the look and the sleep — and `wake` kept for the next publish.
    public func frames(
        after number: UInt64?, sleep: () -> Void, wake: @escaping @Sendable () -> Void
    ) -> NextFrames {
        state.withLock { s in
            if let next = Self.frames(after: number, in: s) { return next }
            sleep()
            s.wakes.append(wake)
            return .waiting
        }
    }

    private static func frames(after number: UInt64?, in s: State) -> NextFrames? {
        if s.closed { return .closed }
        guard let first = s.current.first, let last = s.current.last, last.number > number ?? 0 else { return nil }
        if let number, number >= first.number { return .frames(Array(s.current[Int(number - first.number + 1)...])) }
        return .frames(s.current)
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
            while s.items.count > window, s.items.count > Self.mostKept || Self.hlsKeeps(s.items.dropFirst()) {
                s.items.removeFirst()
            }
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

    /// The wall clock (seconds since 1970) at capture time zero, once the agent said it.
    public var wallAtZero: Double? { state.withLock { $0.wallAtZero } }
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
