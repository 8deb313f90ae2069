import Media

/// Why the writer refused an input or could not go on.
public enum MovieWriterError: Error, CustomStringConvertible, Equatable {
    case timestampNotIncreasing(previous: Timestamp, got: Timestamp)
    case noAudioTrack
    case audioNotWholeFrames(bytes: Int, bytesPerFrame: Int)
    case unsupportedAudio(String)
    case unsupportedVideo(String)
    case closed
    case noVideoSamples(path: String)
    case file(FileError)

    public var description: String {
        switch self {
        case .timestampNotIncreasing(let previous, let got):
            "video timestamps must increase: got \(got) after \(previous)"
        case .noAudioTrack:
            "audio was given for a movie described without an audio track"
        case .audioNotWholeFrames(let bytes, let perFrame):
            "an audio buffer of \(bytes) bytes is not a whole number of \(perFrame)-byte sample frames"
        case .unsupportedAudio(let why): "unsupported audio format: \(why)"
        case .unsupportedVideo(let why): "unsupported video format: \(why)"
        case .closed: "the movie is already closed"
        case .noVideoSamples(let path): "\(path) has no video samples; nothing was recorded"
        case .file(let e): e.description
        }
    }
}

/// What a finished movie holds.
public struct MovieSummary: Equatable, Sendable {
    public var videoFrames: Int
    public var audioFrames: Int
    public var fragments: Int
    /// Capture time of the first video frame.
    public var start: Timestamp
    /// Duration of the video track.
    public var duration: Timestamp.Duration
    /// Size of the finished file in bytes.
    public var bytes: UInt64
}

/// Writes a QuickTime movie that survives being interrupted.
///
/// While open, the file is a fragmented movie: `ftyp`, a `moov` with `mvex`, then one
/// `moof`+`mdat` per GOP, each appended in one write as the GOP is given. A kill or power
/// cut loses at most the GOP being recorded. `close()` appends a complete `moov` indexing the
/// samples where they already lie, syncs, and then hides the first `moov` and every `moof`
/// as `free` boxes: the result is a normal movie. `MovieRepair` finishes the same job, by
/// the same routine (`MovieFinish`), for a file whose writer never got to close it.
///
/// The durability protocol (docs/ARCHITECTURE.md): a fragment is appended hidden (typed
/// `free`) and revealed as a `moof` only by `synchronize()`, after its payload is durable; the
/// reveal itself becomes durable with the next sync. Whatever a power cut leaves, a `moof`
/// never points at samples that did not reach the disk, and a hidden fragment is taken by
/// repair only when its samples check out.
///
/// Video comes as whole GOPs of H.264 access units with 4-byte NAL lengths; each sample's
/// duration is the gap to the next sample's capture timestamp, the last one's the gap to the
/// GOP's `end`. Audio is 16-bit PCM placed on the same clock: gaps are filled with silence
/// and overlaps dropped, so the tracks stay aligned.
///
/// Not thread-safe: one writer belongs to one thread (the recorder's writer thread).
public final class MovieWriter {
    public let path: String
    private let output: any MovieOutput
    private let description: MovieDescription
    private let creationTime: UInt32
    private var isClosed = false
    /// The finished movie's `moov` is in the file (a close that failed after it is tried again
    /// without a second one).
    private var indexAppended = false

    // Header and fragments written so far.
    private var headerMoov: HiddenBox?
    private var moofs: [HiddenBox] = []
    /// Fragments written hidden and not yet revealed (the newest ones, until the next sync).
    private var unrevealed: [UInt64] = []
    private var nextSequenceNumber: UInt32 = 1

    // Video: GOPs given but not yet on disk (after a failed write), and the index.
    private struct Run {
        var gop: GOP
        var durations: [UInt32]
    }
    private var videoStart: Timestamp?
    private var lastVideoTime: Timestamp?
    private var pendingRuns: [Run] = []
    private var lastDuration: UInt32?
    private var videoDecodeTime: UInt64 = 0
    private var videoTable = SampleTable.emptyVideo()

    // Audio: frames received (including silence inserted for gaps) not yet written.
    private var earlyAudio: [(bytes: [UInt8], time: Timestamp)] = []
    private var audioStartFrames: Int64?  // audio start, in audio frames after the video start
    private var audioFramesReceived: Int64 = 0
    private var audioFramesWritten: Int64 = 0
    private var pendingAudio: [UInt8] = []
    private var audioTable: SampleTable

    /// Audio up to this far off its expected position is taken as it comes (clock jitter).
    static let audioToleranceSeconds = 0.02
    /// Audio frames per fragment sample.
    static let audioFramesPerFragmentSample = 1024

    /// Writes the movie to `output`; `path` names it in errors and summaries. (`Storage` adds
    /// `init(path:description:)`, which creates the file.)
    public init(output: any MovieOutput, path: String, description: MovieDescription) throws(MovieWriterError) {
        try description.video.check()
        if let audio = description.audio {
            guard audio.channels == 1 || audio.channels == 2 else {
                throw .unsupportedAudio("\(audio.channels) channels (mono or stereo only)")
            }
            guard (1000...65535).contains(audio.sampleRate) else {
                throw .unsupportedAudio("a sample rate of \(audio.sampleRate) Hz (1000 to 65535 Hz)")
            }
        }
        self.path = path
        self.output = output
        self.description = description
        self.creationTime = quickTimeSeconds(description.creationTime)
        self.audioTable = .emptyAudio(bytesPerFrame: description.audio?.bytesPerFrame ?? 2)
    }

    /// Bytes accepted but not yet on disk (GOPs waiting after a failed write, and audio).
    public var bufferedBytes: Int {
        pendingRuns.reduce(0) { $0 + $1.gop.byteCount } + pendingAudio.count
    }

    /// Number of fragments on disk.
    public var fragmentsWritten: Int { moofs.count }

    /// Video frames in the fragments on disk.
    public var framesWritten: Int { videoTable.sampleCount }

    /// How much video the fragments on disk hold, from the first frame to the end of the last.
    public var durationWritten: Timestamp.Duration {
        Timestamp.Duration(
            nanoseconds: Rational.scale(Int64(videoDecodeTime), by: 1_000_000_000, over: TimeScale.video))
    }

    // MARK: Input

    /// Adds one GOP and writes it as a fragment, with the sound received since the last one.
    /// Its last frame lasts until `gop.end` (as long as the frame before it when nil).
    ///
    /// The GOP is accepted even when writing it fails; the write is tried again with the next
    /// GOP, on `flush()` and on `close()`.
    public func append(_ gop: GOP) throws(MovieWriterError) {
        guard !isClosed else { throw .closed }
        if let last = lastVideoTime, gop.start <= last {
            throw .timestampNotIncreasing(previous: last, got: gop.start)
        }
        let start = videoStart ?? gop.start
        let isFirst = videoStart == nil
        videoStart = start
        lastVideoTime = gop.lastTime
        func ticks(_ t: Timestamp) -> Int64 {
            Timestamp(nanoseconds: (t - start).nanoseconds).ticks(timescale: TimeScale.video)
        }
        let sampleTicks = gop.samples.map { ticks($0.pts) }
        var durations: [UInt32] = []
        durations.reserveCapacity(sampleTicks.count)
        for i in sampleTicks.indices.dropLast() {
            durations.append(UInt32(clamping: max(1, sampleTicks[i + 1] - sampleTicks[i])))
        }
        let fallback = Int64(durations.last ?? lastDuration ?? UInt32(TimeScale.video / 30))
        let last = sampleTicks[sampleTicks.count - 1]
        let endTicks = gop.end.map(ticks).flatMap { $0 > last ? $0 : nil } ?? last + fallback
        durations.append(UInt32(clamping: endTicks - last))
        lastDuration = durations.last
        // GOPs missing before this one (dropped while the disk fell behind): the frame before
        // the gap stays on screen through it, so the timeline — and the sound on it — keeps
        // the capture times.
        let videoEnd = videoDecodeTime + pendingRuns.reduce(0) { $0 + $1.durations.reduce(0) { $0 + UInt64($1) } }
        if sampleTicks[0] > Int64(videoEnd), !isFirst {
            let gap = UInt64(sampleTicks[0]) - videoEnd
            if let lastRun = pendingRuns.indices.last {
                pendingRuns[lastRun].durations[pendingRuns[lastRun].durations.count - 1] += UInt32(clamping: gap)
            } else {
                // The GOP before is on disk already: the next fragment starts at its capture
                // time (its tfdt says so), and the index stretches the frame before.
                videoTable.extendLastDuration(by: UInt32(clamping: gap))
                videoDecodeTime += gap
            }
        }
        pendingRuns.append(Run(gop: gop, durations: durations))
        if isFirst && !earlyAudio.isEmpty {
            let early = earlyAudio
            earlyAudio = []
            for a in early { try appendAudio(a.bytes, time: a.time) }
        }
        try writePendingRuns()
    }

    /// Adds interleaved 16-bit little-endian PCM whose first sample frame was captured at `time`.
    ///
    /// Audio from before the first video frame is dropped; a gap from the expected position
    /// is filled with silence, an overlap is dropped, so audio stays on the video's clock.
    public func appendAudio(_ bytes: [UInt8], time: Timestamp) throws(MovieWriterError) {
        guard !isClosed else { throw .closed }
        guard let audio = description.audio else { throw .noAudioTrack }
        let perFrame = audio.bytesPerFrame
        guard bytes.count % perFrame == 0 else {
            throw .audioNotWholeFrames(bytes: bytes.count, bytesPerFrame: perFrame)
        }
        guard let videoStart else {
            // Held until the first video sample fixes the movie's start; at most a few seconds.
            earlyAudio.append((bytes, time))
            let held = earlyAudio.reduce(0) { $0 + $1.bytes.count }
            if held > audio.sampleRate * perFrame * 5 { earlyAudio.removeFirst() }
            return
        }
        let rate = Int64(audio.sampleRate)
        // Position of this buffer's first frame, in frames after the video start.
        let position = Rational.scale((time - videoStart).nanoseconds, by: rate, over: 1_000_000_000)
        var frames = Int64(bytes.count / perFrame)
        var skip: Int64 = 0
        if let start = audioStartFrames {
            let expected = start + audioFramesReceived
            let tolerance = Int64(Double(rate) * MovieWriter.audioToleranceSeconds)
            let drift = position - expected
            if drift > tolerance {
                pendingAudio.append(contentsOf: repeatElement(0, count: Int(drift) * perFrame))
                audioFramesReceived += drift
            } else if drift < -tolerance {
                skip = min(-drift, frames)
            }
        } else {
            skip = max(0, -position)
            if skip < frames { audioStartFrames = position + skip }
        }
        frames -= skip
        guard frames > 0 else { return }
        pendingAudio.append(contentsOf: bytes[(Int(skip) * perFrame)...])
        audioFramesReceived += frames
    }

    /// Writes GOPs given but not yet on disk (after an earlier write failed).
    public func flush() throws(MovieWriterError) {
        guard !isClosed else { throw .closed }
        try writePendingRuns()
    }

    /// Makes every written fragment durable, then reveals the fragments written since the last
    /// sync as `moof` boxes (the reveal is durable after the next sync; until then a power cut
    /// leaves them hidden, and repair checks their samples before it takes them).
    public func synchronize() throws(MovieWriterError) {
        do {
            try output.synchronize()
            while let offset = unrevealed.first {
                try output.overwrite(at: offset + 4, with: FourCC.moof.bytes)
                unrevealed.removeFirst()
            }
        } catch {
            throw .file(error)
        }
    }

    // MARK: Closing

    /// Writes what is left, then turns the file into a normal movie with a complete index.
    /// A close that failed (a full disk) may be tried again: nothing is written twice.
    @discardableResult
    public func close() throws(MovieWriterError) -> MovieSummary {
        guard !isClosed else { throw .closed }
        guard let videoStart, lastVideoTime != nil else { throw .noVideoSamples(path: path) }
        try writePendingRuns()
        // Sound that came in after the last frame stops showing is not part of the movie.
        let bytesPerFrame = description.audio?.bytesPerFrame ?? 1
        pendingAudio.removeLast(
            pendingAudio.count - audioFramesCovered(untilVideoTicks: videoDecodeTime) * bytesPerFrame)
        if !pendingAudio.isEmpty { try writeFragment(nil) }
        do {
            try MovieFinish.finish(
                output, tracks: finalTracks(), creationTime: creationTime,
                fragmentBoxes: moofs, fragmentedHeader: headerMoov, indexAppended: &indexAppended)
            try output.close()
        } catch {
            throw .file(error)
        }
        isClosed = true
        return MovieSummary(
            videoFrames: videoTable.sampleCount,
            audioFrames: audioTable.sampleCount,
            fragments: moofs.count,
            start: videoStart,
            duration: durationWritten,
            bytes: output.length)
    }

    /// Closes the file without finishing it, leaving what is on disk for `MovieRepair`
    /// (used when the disk has failed and finishing cannot succeed).
    public func abandon() {
        guard !isClosed else { return }
        isClosed = true
        try? output.close()
    }

    // MARK: Fragments

    /// How many of the pending sound frames lie before the video's end once the video lasts
    /// `videoTicks` (video media time).
    private func audioFramesCovered(untilVideoTicks videoTicks: UInt64) -> Int {
        guard let audio = description.audio else { return 0 }
        let pending = Int64(pendingAudio.count / audio.bytesPerFrame)
        guard let start = audioStartFrames else { return Int(pending) }
        let end = Rational.scale(Int64(videoTicks), by: Int64(audio.sampleRate), over: TimeScale.video)
        return Int(max(0, min(pending, end - start - audioFramesWritten)))
    }

    private func writePendingRuns() throws(MovieWriterError) {
        while let run = pendingRuns.first {
            try writeFragment(run)
            pendingRuns.removeFirst()
        }
    }

    private func videoHeader() -> TrackHeader { TrackHeader.video(description.video) }

    private func audioHeader(_ audio: AudioTrackFormat) -> TrackHeader {
        var entry = ByteWriter()
        entry.writeSOWT(audio)
        var header = TrackHeader(
            trackID: 2, kind: .audio, timescale: UInt32(audio.sampleRate),
            width: 0, height: 0, matrix: TrackHeader.identityMatrix, sampleEntry: entry.bytes)
        let startFrames = audioStartFrames ?? 0
        header.startDelay = UInt64(
            max(0, Rational.scale(startFrames, by: TimeScale.movie, over: Int64(audio.sampleRate))))
        return header
    }

    /// The tracks of the finished movie: video, and audio when any was recorded.
    private func finalTracks() -> [(header: TrackHeader, table: SampleTable)] {
        var tracks = [(videoHeader(), videoTable)]
        if let audio = description.audio, audioTable.sampleCount > 0 {
            tracks.append((audioHeader(audio), audioTable))
        }
        return tracks
    }

    /// Writes one fragment: the GOP `run` (if any) and all pending audio, as one `moof`+`mdat`.
    /// Nothing changes unless the write succeeds.
    private func writeFragment(_ run: Run?) throws(MovieWriterError) {
        var prefix = ByteWriter()
        var headerMoovPosition: (inFile: UInt64, inPrefix: Int)?
        if headerMoov == nil {
            prefix.writeFTYP()
            headerMoovPosition = (output.length + UInt64(prefix.count), prefix.count)
            var tracks = [(header: videoHeader(), table: SampleTable.emptyVideo())]
            if let audio = description.audio {
                var header = audioHeader(audio)
                header.startDelay = 0  // while fragmented, the audio start is its first tfdt
                tracks.append((header, .emptyAudio(bytesPerFrame: audio.bytesPerFrame)))
            }
            prefix.writeMOOV(tracks: tracks, creationTime: creationTime, fragmented: true)
        }
        let moofOffset = output.length + UInt64(prefix.count)

        let videoSamples =
            run.map { r in
                zip(r.gop.samples, r.durations).map {
                    FragmentSample(duration: $1, size: UInt32($0.data.count), isSync: $0.isKeyframe)
                }
            } ?? []
        let videoBytes = videoSamples.reduce(0) { $0 + Int($1.size) }
        // The sound up to where the video ends once this fragment is written; sound beyond it
        // (a microphone runs ahead of the encoder) waits for the next fragment, so a fragment's
        // sound never outlasts its video.
        let audioFrames = audioFramesCovered(
            untilVideoTicks: videoDecodeTime + (run?.durations.reduce(0) { $0 + UInt64($1) } ?? 0))
        let audioBytes = audioFrames * (description.audio?.bytesPerFrame ?? 1)
        let audioSamples: [FragmentSample] = stride(
            from: 0, to: audioFrames, by: MovieWriter.audioFramesPerFragmentSample
        ).map { first in
            let n = min(MovieWriter.audioFramesPerFragmentSample, audioFrames - first)
            return FragmentSample(
                duration: UInt32(n), size: UInt32(n * (description.audio?.bytesPerFrame ?? 1)), isSync: true)
        }

        var crc = CRC32()
        for sample in run?.gop.samples ?? [] { crc.update(sample.data) }
        crc.update(pendingAudio[..<audioBytes])
        let (header, moofSize) = MovieFragment(
            sequenceNumber: nextSequenceNumber,
            runs: [
                .init(trackID: 1, decodeTime: videoDecodeTime, samples: videoSamples, flagsEachSample: true),
                .init(
                    trackID: 2, decodeTime: UInt64(max(0, (audioStartFrames ?? 0) + audioFramesWritten)),
                    samples: audioSamples, flagsEachSample: false),
            ],
            payloadCheck: crc.value
        ).header()
        let payload = UInt64(videoBytes + audioBytes)
        let dataStart = header.count

        // The fragment goes to disk with its moof typed `free`, and becomes a `moof` only once
        // all of it is durable (`synchronize`): a file cut off part-way through the write, or
        // by a power cut before the sync, shows a free box that nothing points into, never a
        // moof promising samples that are missing. (Repair takes a hidden fragment whose
        // samples are whole H.264, and drops one that is not as part of the tail.)
        var buffer = prefix.bytes
        buffer.reserveCapacity(prefix.count + dataStart + Int(payload))
        buffer.append(contentsOf: header)
        buffer.replaceSubrange((prefix.count + 4)..<(prefix.count + 8), with: FourCC.free.bytes)
        for sample in run?.gop.samples ?? [] { buffer.append(contentsOf: sample.data) }
        buffer.append(contentsOf: pendingAudio[..<audioBytes])
        do { try output.append(buffer) } catch { throw .file(error) }

        // The samples are in the file whatever happens next: record them, to be revealed by
        // the next sync (or hidden for good by close).
        if let position = headerMoovPosition {
            headerMoov = HiddenBox(
                offset: position.inFile, bytes: prefix.bytes[position.inPrefix...], headerSize: 8, whole: true)
        }
        moofs.append(HiddenBox(offset: moofOffset, bytes: header[..<moofSize], headerSize: 8)!)
        unrevealed.append(moofOffset)
        nextSequenceNumber += 1
        let absoluteData = moofOffset + UInt64(dataStart)
        if let run {
            videoTable.appendVideoChunk(
                offset: absoluteData,
                samples: zip(run.gop.samples, run.durations).map { (UInt32($0.data.count), $1, $0.isKeyframe) })
            videoDecodeTime += run.durations.reduce(0) { $0 + UInt64($1) }
        }
        if let audio = description.audio, audioFrames > 0 {
            audioTable.appendAudio(
                offset: absoluteData + UInt64(videoBytes), frames: audioFrames, sampleRate: audio.sampleRate)
            audioFramesWritten += Int64(audioFrames)
            pendingAudio.removeFirst(audioBytes)
        }
    }
}
