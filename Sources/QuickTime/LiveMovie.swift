import Media

/// A live stream as fragmented MP4 in its ISO form, the one browsers' Media Source Extensions,
/// HLS (fMP4 segments) and progressive players take: an initialization segment (`ftyp` and a
/// `moov` with `mvex`, no samples) once per stream format, then a media segment (`moof` +
/// `mdat`) per GOP — the GOPs the pre-roll ring already holds, never encoded again.
///
/// Values only: the same GOP and origin make the same bytes, so any thread builds them.
public struct LiveMovie: Hashable, Sendable {
    public let video: VideoTrackFormat

    public init(video: VideoTrackFormat) throws(MovieWriterError) {
        try video.check()
        self.video = video
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
        w.writeMOOV(
            tracks: [(TrackHeader.video(video), SampleTable.emptyVideo())], creationTime: 0, fragmented: true)
        return w.bytes
    }

    /// One GOP as a media segment: the `moof` and the `mdat` header, then each sample's bytes
    /// as the GOP holds them (shared, not copied: a sender writes them in turn).
    public struct Segment: Sendable {
        public var header: [UInt8]
        public var payload: [[UInt8]]
        /// How long it plays, in `LiveMovie.timescale` ticks.
        public var duration: UInt64
        public var frames: Int { payload.count }
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
    public static func segment(_ gop: GOP, sequence: UInt32, origin: Timestamp) -> Segment {
        func ticks(_ t: Timestamp) -> UInt64 {
            UInt64(max(0, Timestamp(nanoseconds: (t - origin).nanoseconds).ticks(timescale: timescale)))
        }
        let starts = gop.samples.map { ticks($0.pts) }
        var samples: [FragmentSample] = []
        samples.reserveCapacity(starts.count)
        for (i, sample) in gop.samples.enumerated() {
            let duration: UInt64
            if i + 1 < starts.count {
                duration = starts[i + 1] > starts[i] ? starts[i + 1] - starts[i] : 1
            } else if let end = gop.end.map(ticks), end > starts[i] {
                duration = end - starts[i]
            } else {
                duration = samples.last.map { UInt64($0.duration) } ?? UInt64(timescale / 30)
            }
            samples.append(
                FragmentSample(
                    duration: UInt32(clamping: duration), size: UInt32(sample.data.count), isSync: sample.isKeyframe))
        }
        var moof = ByteWriter(reservingCapacity: 128 + samples.count * 12)
        var dataOffset = 0
        moof.box("moof") { w in
            w.writeMFHD(sequenceNumber: sequence)
            w.box("traf") { w in
                w.writeTFHD(trackID: 1)
                w.writeTFDT(baseMediaDecodeTime: starts[0])
                dataOffset = w.writeTRUN(samples: samples, withFlags: true)
            }
        }
        var mdat = ByteWriter()
        mdat.writeMDATHeader(payloadSize: UInt64(gop.byteCount))
        moof.patchUInt32(at: dataOffset, UInt32(moof.count + mdat.count))
        return Segment(
            header: moof.bytes + mdat.bytes, payload: gop.samples.map(\.data),
            duration: samples.reduce(0) { $0 + UInt64($1.duration) })
    }
}
