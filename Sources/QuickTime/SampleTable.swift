/// The sample table of one track, as a normal movie's `stbl` describes it: sample sizes,
/// durations (run-length), sync samples and chunks of contiguous samples in the file.
///
/// Video has one entry per frame. 16-bit PCM audio follows QuickTime's convention for
/// uncompressed sound: one sample per sample frame, every sample `channels × 2` bytes and one
/// tick long, grouped into chunks of at most about a second.
struct SampleTable: Equatable {
    enum Sizes: Equatable {
        case constant(size: UInt32, count: UInt32)
        case variable([UInt32])

        var count: Int {
            switch self {
            case .constant(_, let count): Int(count)
            case .variable(let sizes): sizes.count
            }
        }
    }

    struct TimeToSample: Equatable {
        var count: UInt32
        var duration: UInt32
    }

    struct Chunk: Equatable {
        var offset: UInt64
        var sampleCount: UInt32
    }

    var sizes: Sizes
    var timeToSample: [TimeToSample] = []
    /// 1-based numbers of the sync samples; nil when every sample is a sync sample.
    var syncSamples: [UInt32]?
    var chunks: [Chunk] = []

    var sampleCount: Int { sizes.count }

    /// The sum of all sample durations, in the media time scale.
    var mediaDuration: UInt64 {
        timeToSample.reduce(0) { $0 + UInt64($1.count) * UInt64($1.duration) }
    }

    static func emptyVideo() -> SampleTable { SampleTable(sizes: .variable([]), syncSamples: []) }
    static func emptyAudio(bytesPerFrame: Int) -> SampleTable {
        SampleTable(sizes: .constant(size: UInt32(bytesPerFrame), count: 0), syncSamples: nil)
    }

    /// Appends a chunk of video samples (one fragment's worth) stored contiguously at `offset`.
    mutating func appendVideoChunk(offset: UInt64, samples: [(size: UInt32, duration: UInt32, isSync: Bool)]) {
        guard !samples.isEmpty else { return }
        guard case .variable(var sizes) = self.sizes else { preconditionFailure("video sample sizes are variable") }
        self.sizes = .variable([])  // release the array so the append below does not copy it
        var sync = syncSamples ?? []
        for sample in samples {
            sizes.append(sample.size)
            appendDuration(sample.duration, count: 1)
            if sample.isSync { sync.append(UInt32(sizes.count)) }
        }
        self.sizes = .variable(sizes)
        syncSamples = sync
        chunks.append(Chunk(offset: offset, sampleCount: UInt32(samples.count)))
    }

    /// Appends `frames` PCM sample frames stored contiguously at `offset`, as chunks of at most
    /// one second (`sampleRate` frames): what the writer and repair both index a fragment's sound as.
    mutating func appendAudio(offset: UInt64, frames: Int, sampleRate: Int) {
        guard case .constant(let size, _) = sizes else { preconditionFailure("PCM sample sizes are constant") }
        var first = 0
        while first < frames {
            let n = min(max(1, sampleRate), frames - first)
            appendAudioChunk(offset: offset + UInt64(first) * UInt64(size), frames: UInt32(n))
            first += n
        }
    }

    /// Appends a chunk of `frames` PCM sample frames stored contiguously at `offset`.
    private mutating func appendAudioChunk(offset: UInt64, frames: UInt32) {
        guard frames > 0 else { return }
        guard case .constant(let size, let count) = sizes else { preconditionFailure("PCM sample sizes are constant") }
        sizes = .constant(size: size, count: count + frames)
        appendDuration(1, count: frames)
        chunks.append(Chunk(offset: offset, sampleCount: frames))
    }

    /// Lengthens the last sample by `ticks`: the frame before a gap stays on screen through it.
    mutating func extendLastDuration(by ticks: UInt32) {
        guard ticks > 0, let last = timeToSample.last else { return }
        if last.count == 1 {
            timeToSample[timeToSample.count - 1].duration += ticks
        } else {
            timeToSample[timeToSample.count - 1].count -= 1
            timeToSample.append(TimeToSample(count: 1, duration: last.duration + ticks))
        }
    }

    private mutating func appendDuration(_ duration: UInt32, count: UInt32) {
        if let last = timeToSample.last, last.duration == duration {
            timeToSample[timeToSample.count - 1].count += count
        } else {
            timeToSample.append(TimeToSample(count: count, duration: duration))
        }
    }

    /// True when every sync-sample flag is set, so `stss` is left out.
    var allSamplesAreSync: Bool {
        guard let sync = syncSamples else { return true }
        return sync.count == sampleCount
    }

    /// `stsc` entries: runs of chunks that hold the same number of samples.
    var sampleToChunkRuns: [(firstChunk: UInt32, samplesPerChunk: UInt32)] {
        var runs: [(firstChunk: UInt32, samplesPerChunk: UInt32)] = []
        for (i, chunk) in chunks.enumerated() where runs.last?.samplesPerChunk != chunk.sampleCount {
            runs.append((UInt32(i + 1), chunk.sampleCount))
        }
        return runs
    }

    /// True when a chunk offset does not fit in 32 bits, so `co64` replaces `stco`.
    var needs64BitOffsets: Bool { chunks.contains { $0.offset > UInt64(UInt32.max) } }
}
