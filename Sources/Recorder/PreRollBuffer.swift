import Media

/// The pre-roll ring: the last few seconds of encoded video, as whole GOPs, and the sound
/// captured beside it, so that a clip can start before the motion that triggered it.
///
/// It keeps the fewest GOPs that still hold a keyframe at least `preRoll` before the newest
/// sample, and never more than `maxBytes` (the oldest GOPs go first; the GOP being recorded
/// always stays). Memory is bounded by both, so it stays flat however long the agent runs.
public struct PreRollBuffer: Sendable {
    public let preRoll: Timestamp.Duration
    public let maxBytes: Int

    private var gops: [GOP] = []
    private var audio: [AudioChunk] = []
    public private(set) var videoBytes = 0
    public private(set) var audioBytes = 0
    /// GOPs dropped to stay within `maxBytes` while pre-roll still wanted them.
    public private(set) var gopsDroppedForBytes = 0
    /// Samples that arrived before any keyframe (undecodable) and were dropped.
    public private(set) var samplesWithoutKeyframe = 0
    /// The start of a run of motion that may yet become an event (nil when there is none): the
    /// ring keeps its pre-roll too, and the byte bound never drops the GOP that holds it — so
    /// a clip always starts at or before its trigger, even when the run's frames straddle a
    /// gap (frames dropped on a busy host, a process stopped and continued).
    public var keepFrom: Timestamp? {
        didSet { if keepFrom != oldValue { trim() } }
    }

    public init(preRoll: Timestamp.Duration, maxBytes: Int) {
        self.preRoll = preRoll
        self.maxBytes = maxBytes
    }

    public var byteCount: Int { videoBytes + audioBytes }
    public var gopCount: Int { gops.count }
    /// The keyframe times held, oldest first.
    public var keyframeTimes: [Timestamp] { gops.map(\.start) }
    /// From the oldest keyframe held to the newest sample.
    public var span: Timestamp.Duration {
        guard let first = gops.first, let last = gops.last else { return .zero }
        return last.lastTime - first.start
    }

    /// The GOP being recorded: the newest, which the next keyframe completes.
    public var newestGOP: GOP? { gops.last }

    /// Adds the next encoded video sample (in decode order). A keyframe completes the GOP
    /// before it, which is returned, ended at the keyframe's time.
    @discardableResult
    public mutating func append(_ sample: EncodedSample) -> GOP? {
        var completed: GOP?
        if sample.isKeyframe, let gop = GOP(keyframe: sample) {
            if let last = gops.indices.last {
                gops[last] = gops[last].ended(at: sample.pts)
                completed = gops[last]
            }
            gops.append(gop)
        } else if gops.isEmpty || !gops[gops.count - 1].append(sample) {
            samplesWithoutKeyframe += 1
            return nil
        }
        videoBytes += sample.data.count
        trim()
        return completed
    }

    /// Adds captured sound (in capture order).
    public mutating func append(_ chunk: AudioChunk) {
        audio.append(chunk)
        audioBytes += chunk.data.count
        trim()
    }

    private mutating func trim() {
        guard let newest = gops.last?.lastTime else { return }
        // The second GOP alone already reaches back far enough: the first is not needed.
        let reach = min(newest, keepFrom ?? newest) - preRoll
        while gops.count >= 2, gops[1].start <= reach { dropOldestGOP() }
        // Over the bound the oldest go, but not the one holding a pending run's start.
        while gops.count >= 2, byteCount > maxBytes, keepFrom.map({ gops[1].start <= $0 }) ?? true {
            dropOldestGOP()
            gopsDroppedForBytes += 1
        }
        // Sound from before the oldest keyframe can never be in a clip.
        let oldest = gops[0].start
        while let first = audio.first, first.end <= oldest {
            audio.removeFirst()
            audioBytes -= first.data.count
        }
        while audioBytes > maxBytes, let first = audio.first {
            audio.removeFirst()
            audioBytes -= first.data.count
        }
    }

    private mutating func dropOldestGOP() {
        videoBytes -= gops.removeFirst().byteCount
    }

    /// Where a clip triggered at `trigger` starts: the newest keyframe held at least
    /// `preRoll` before it, or the oldest held when none is that old. Nil when empty.
    public func clipStart(forTrigger trigger: Timestamp) -> Timestamp? {
        guard !gops.isEmpty else { return nil }
        let latest = trigger - preRoll
        return (gops.last { $0.start <= latest } ?? gops[0]).start
    }

    /// Everything held from the clip start for `trigger` on: the GOPs in order (all ended but
    /// the last, the one being recorded), and the sound from that keyframe's time on (the
    /// first chunk cut at it).
    public func clipContents(forTrigger trigger: Timestamp) -> (gops: ArraySlice<GOP>, audio: [AudioChunk])? {
        guard let start = clipStart(forTrigger: trigger), let first = gops.firstIndex(where: { $0.start == start })
        else { return nil }
        var sound: [AudioChunk] = []
        for chunk in audio where chunk.end > start {
            if let after = chunk.split(at: start).after { sound.append(after) }
        }
        return (gops[first...], sound)
    }
}
