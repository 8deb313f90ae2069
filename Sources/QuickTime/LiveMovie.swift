import Media

/// A live stream as fragmented MP4 in its ISO form, the one browsers' Media Source Extensions,
/// HLS (fMP4 segments) and progressive players take: an initialization segment (`ftyp` and a
/// `moov` with `mvex`, no samples) once per stream format, then a media segment (`moof` +
/// `mdat`) per GOP — the GOPs the pre-roll ring already holds, never encoded again.
///
/// Values only: the same GOP and origin make the same bytes, so any thread builds them.
public struct LiveMovie: Hashable, Sendable {
    public let video: VideoTrackFormat
    /// The sound track, when there is a microphone: Opus (track 2).
    public let sound: Sound?

    public init(video: VideoTrackFormat, sound: Sound? = nil) throws(MovieWriterError) {
        try video.check()
        self.video = video
        self.sound = sound
    }

    /// An Opus sound track as ISO/IEC 14496-12 and the Opus-in-ISOBMFF mapping write it: an
    /// `Opus` sample entry with its `dOps`, on a 48 kHz timeline (Opus always decodes at
    /// 48 kHz), every packet a 20 ms frame.
    public struct Sound: Hashable, Sendable {
        public var channels: Int
        /// The rate the microphone's samples were encoded at (informative: a decoder plays 48 kHz).
        public var inputSampleRate: Int
        /// Samples at 48 kHz a decoder drops at the start: the encoder's lookahead.
        public var preSkip: Int

        public init(channels: Int, inputSampleRate: Int, preSkip: Int) {
            self.channels = channels
            self.inputSampleRate = inputSampleRate
            self.preSkip = preSkip
        }

        /// Ticks a second on the sound's timeline.
        public static let timescale: UInt32 = 48000
        /// How long each packet plays: 20 ms.
        public static let packetTicks: UInt32 = 960
    }

    /// Encoded sound for one media segment: packets of `Sound.packetTicks` each, one after the
    /// other from `start` (a capture time, on the clock of the video's).
    public struct SoundRun: Sendable {
        public var start: Timestamp
        public var packets: [[UInt8]]

        public init(start: Timestamp, packets: [[UInt8]]) {
            self.start = start
            self.packets = packets
        }
    }

    /// Ticks a second on the media timeline (`tfdt`, sample durations).
    public static let timescale = TimeScale.video

    /// The initialization segment: `ftyp` (ISO brands) and the `moov` of one video track with
    /// its rotation, no samples, announcing fragments.
    public func initialization() -> [UInt8] {
        var w = ByteWriter()
        w.box("ftyp") { w in
            w.writeFourCC("isom")  // major brand
            w.writeUInt32(0x0000_0200)  // minor version
            for brand: FourCC in ["isom", "iso6", "avc1", "mp41"] { w.writeFourCC(brand) }
        }
        var tracks = [(header: TrackHeader.video(video), table: SampleTable.emptyVideo())]
        if let sound {
            var entry = ByteWriter()
            entry.writeOpus(sound)
            tracks.append(
                (
                    TrackHeader(
                        trackID: 2, kind: .audio, timescale: Sound.timescale, width: 0, height: 0,
                        matrix: TrackHeader.identityMatrix, sampleEntry: entry.bytes),
                    SampleTable(sizes: .variable([]), syncSamples: nil)
                ))
        }
        w.writeMOOV(tracks: tracks, creationTime: 0, fragmented: true)
        return w.bytes
    }

    /// One GOP as a media segment: the `moof` and the `mdat` header, then each sample's bytes
    /// as the GOP holds them (shared, not copied: a sender writes them in turn).
    public struct Segment: Sendable {
        public var header: [UInt8]
        public var payload: [[UInt8]]
        /// How long its video plays, in `LiveMovie.timescale` ticks.
        public var duration: UInt64
        /// Video frames in it.
        public var frames: Int
        /// Where its sound ends on the timeline, in `Sound.timescale` ticks (nil without sound).
        public var soundEnd: UInt64?
        public var byteCount: Int { header.count + payload.reduce(0) { $0 + $1.count } }

        /// The whole segment in one array (for a response of bytes).
        public var bytes: [UInt8] {
            var all = header
            all.reserveCapacity(byteCount)
            for part in payload { all.append(contentsOf: part) }
            return all
        }
    }

    /// The media segment of `gop`, numbered `sequence` (from 1), on a timeline whose zero is
    /// `origin` (at or before the GOP's start): each sample lasts until the next one's capture
    /// time, the last until the GOP's `end` (as long as the one before when the end is not
    /// known). GOPs made on one origin follow each other without a gap or an overlap.
    ///
    /// `sound`, when given, goes into the same segment as track 2, placed on the same timeline
    /// by its capture time; packets that would start before the timeline's zero or before
    /// `soundFrom` (where the sound sent before ends, in `Sound.timescale` ticks) are left out,
    /// so sound never overlaps itself.
    public static func segment(
        _ gop: GOP, sound: SoundRun? = nil, soundFrom: UInt64 = 0, sequence: UInt32, origin: Timestamp
    ) -> Segment {
        fragment(gop.samples, end: gop.end, sound: sound, soundFrom: soundFrom, sequence: sequence, origin: origin)
    }

    /// The media segment of `samples` (at least one; in decode order, each decodable after the
    /// ones sent before it: a GOP, or the next frames of one — a single access unit makes the
    /// live view's one-frame fragment), as `segment` makes a GOP's: the last sample lasts until
    /// `end` (as long as the one before when nil or not later).
    public static func fragment(
        _ samples: [EncodedSample], end: Timestamp?, sound: SoundRun? = nil, soundFrom: UInt64 = 0,
        sequence: UInt32, origin: Timestamp
    ) -> Segment {
        precondition(!samples.isEmpty, "a media segment has a sample at least")
        func ticks(_ t: Timestamp) -> UInt64 {
            UInt64(max(0, Timestamp(nanoseconds: (t - origin).nanoseconds).ticks(timescale: timescale)))
        }
        // The sound's packets from the first that starts at or after both zero and `soundFrom`.
        var soundStart: UInt64 = 0
        var soundPackets: ArraySlice<[UInt8]> = []
        if let sound, !sound.packets.isEmpty {
            let start = Timestamp(nanoseconds: (sound.start - origin).nanoseconds).ticks(
                timescale: Int64(Sound.timescale))
            let step = Int64(Sound.packetTicks)
            let floor = Int64(clamping: soundFrom)
            // How many packets start too early: ceil((floor - start) / step), at least none.
            let skip = start >= floor ? 0 : Int((floor - start + step - 1) / step)
            if skip < sound.packets.count {
                soundPackets = sound.packets[skip...]
                soundStart = UInt64(start + Int64(skip) * step)
            }
        }
        let video = samples
        let starts = video.map { ticks($0.pts) }
        var samples: [FragmentSample] = []
        samples.reserveCapacity(starts.count)
        for (i, sample) in video.enumerated() {
            let duration: UInt64
            if i + 1 < starts.count {
                duration = starts[i + 1] > starts[i] ? starts[i + 1] - starts[i] : 1
            } else if let end = end.map(ticks), end > starts[i] {
                duration = end - starts[i]
            } else {
                duration = samples.last.map { UInt64($0.duration) } ?? UInt64(timescale / 30)
            }
            samples.append(
                FragmentSample(
                    duration: UInt32(clamping: duration), size: UInt32(sample.data.count), isSync: sample.isKeyframe))
        }
        let soundSamples = soundPackets.map {
            FragmentSample(duration: Sound.packetTicks, size: UInt32($0.count), isSync: true)
        }
        // The video's samples, then the sound's (every Opus packet a sync sample).
        let header = MovieFragment(
            sequenceNumber: sequence,
            runs: [
                .init(trackID: 1, decodeTime: starts[0], samples: samples, flagsEachSample: true),
                .init(trackID: 2, decodeTime: soundStart, samples: soundSamples, flagsEachSample: false),
            ]
        ).header().bytes
        var segment = Segment(
            header: header, payload: video.map(\.data) + soundPackets,
            duration: samples.reduce(0) { $0 + UInt64($1.duration) }, frames: samples.count)
        if sound != nil {
            segment.soundEnd =
                soundSamples.isEmpty ? soundFrom : soundStart + UInt64(soundSamples.count) * UInt64(Sound.packetTicks)
        }
        return segment
    }
}
