import FoundationEssentials
import Media

/// Repair's reading of the boxes a movie's header and fragments are made of: each fragment's
/// runs checked against the tracks, a track's header and sample table, a fragment's runs.
extension MovieRepair {
    /// The runs of `fragment` with the track each belongs to, once every check holds: the
    /// tracks exist, the samples lie inside the fragment's media data, no sample lasts over a
    /// minute, the sound is whole PCM frames, and every video sample is whole H.264.
    static func checkFragment(
        _ fragment: Fragment, tracks: [(header: TrackHeader, table: SampleTable, bytesPerFrame: Int)],
        file: any MovieFile
    ) throws(FragmentError) -> [(run: TrackRun, track: Int)] {
        let payloadStart = fragment.mdat.offset + UInt64(fragment.mdat.headerSize)
        let payloadLength = fragment.mdat.end - payloadStart
        guard payloadLength <= 256 << 20 else {
            throw FragmentError(problem: "has \(payloadLength) bytes of media data, more than Vigil writes")
        }
        let payload: [UInt8]
        do { payload = try file.read(at: payloadStart, count: Int(payloadLength)) } catch {
            throw FragmentError(problem: "cannot be read: \(error.reason)")
        }
        guard payload.count == Int(payloadLength) else { throw FragmentError(problem: "is cut short") }
        let runs = try parseFragment(fragment.bytes, box: fragment.moof)
        for run in runs {
            let length = run.samples.reduce(0) { $0 + UInt64($1.size) }
            guard run.dataOffset >= payloadStart, run.dataOffset + length <= fragment.mdat.end else {
                throw FragmentError(problem: "points outside its media data")
            }
        }
        // The writer's checksum of the payload (fragments written before it have none).
        if let check = childBoxes(of: fragment.bytes, in: fragment.moof.headerSize..<fragment.bytes.count)?.last,
            check.type == .free, check.body.count == 8
        {
            var r = ByteReader(fragment.bytes, range: check.body)
            if r.readUInt32() == PayloadCheck.tag.bigEndianValue, let expected = r.readUInt32(),
                CRC32.checksum(payload) != expected
            {
                throw FragmentError(
                    problem:
                        "holds media data that does not match its checksum (zeros or stale data: it did not reach the disk)",
                    payloadMissing: true)
            }
        }
        var result: [(run: TrackRun, track: Int)] = []
        for run in runs {
            guard let t = tracks.firstIndex(where: { $0.header.trackID == run.trackID }) else {
                throw FragmentError(problem: "names track \(run.trackID), which the header does not have")
            }
            // A sample longer than a minute is corruption, not a recording.
            let longest = UInt64(tracks[t].header.timescale) * 60
            guard run.samples.allSatisfy({ UInt64($0.duration) <= longest }) else {
                throw FragmentError(problem: "has a sample longer than a minute")
            }
            switch tracks[t].header.kind {
            case .video:
                var start = Int(run.dataOffset - payloadStart)
                for (n, sample) in run.samples.enumerated() {
                    let end = start + Int(sample.size)
                    guard AVCC.isWhole(payload[start..<end]) else {
                        throw FragmentError(
                            problem:
                                "holds no whole H.264 in its video sample \(n + 1) of \(run.samples.count) (zeros or stale data: it did not reach the disk)",
                            payloadMissing: true)
                    }
                    start = end
                }
            case .audio:
                let perFrame = tracks[t].bytesPerFrame
                guard run.samples.allSatisfy({ Int($0.size) == Int($0.duration) * perFrame }) else {
                    throw FragmentError(problem: "holds audio that is not 16-bit PCM as described")
                }
            }
            result.append((run, t))
        }
        return result
    }

    /// A track's header fields and sample description, from a `trak` of the header `moov`.
    static func parseTrack(
        _ bytes: [UInt8], _ trak: ChildBox
    ) -> (header: TrackHeader, table: SampleTable, bytesPerFrame: Int)? {
        guard let tkhd = findBox(["tkhd"], in: bytes, range: trak.body),
            let mdhd = findBox(["mdia", "mdhd"], in: bytes, range: trak.body),
            let hdlr = findBox(["mdia", "hdlr"], in: bytes, range: trak.body),
            let stsd = findBox(["mdia", "minf", "stbl", "stsd"], in: bytes, range: trak.body)
        else { return nil }
        var r = ByteReader(bytes, range: tkhd.body)
        guard let (version, _) = r.readVersionAndFlags(), version == 0, r.skip(8),
            let trackID = r.readUInt32(), r.skip(4 + 4 + 8 + 2 + 2 + 2 + 2)
        else { return nil }
        var matrix: [Int32] = []
        for _ in 0..<9 {
            guard let v = r.readInt32() else { return nil }
            matrix.append(v)
        }
        guard let width = r.readUInt32(), let height = r.readUInt32() else { return nil }

        var m = ByteReader(bytes, range: mdhd.body)
        guard let (mdhdVersion, _) = m.readVersionAndFlags(), mdhdVersion == 0, m.skip(8),
            let timescale = m.readUInt32(), timescale > 0
        else { return nil }

        var h = ByteReader(bytes, range: hdlr.body)
        guard h.readVersionAndFlags() != nil, h.skip(4), let subtype = h.readUInt32() else { return nil }

        var s = ByteReader(bytes, range: stsd.body)
        guard s.readVersionAndFlags() != nil, let count = s.readUInt32(), count == 1,
            let entries = childBoxes(of: bytes, in: s.position..<stsd.body.upperBound), entries.count == 1
        else { return nil }
        let entry = entries[0]
        let sampleEntry = Array(bytes[entry.range])

        let kind: TrackHeader.Kind
        var bytesPerFrame = 0
        switch FourCC(bigEndian: subtype) {
        case "vide":
            // The visual sample entry's 78 bytes of fields, then its boxes: the avcC must say
            // NAL units have 4-byte lengths (what Vigil writes, and what repair checks).
            guard entry.type == "avc1", entry.body.count > 78,
                let avcC = findBox(["avcC"], in: bytes, range: (entry.body.lowerBound + 78)..<entry.body.upperBound),
                avcC.body.count >= 5, bytes[avcC.body.lowerBound + 4] & 0x03 == 3
            else { return nil }
            kind = .video
        case "soun":
            guard entry.type == "sowt" else { return nil }
            var e = ByteReader(bytes, range: entry.body)
            guard e.skip(6 + 2 + 2 + 2 + 4), let channels = e.readUInt16(), let bits = e.readUInt16(),
                bits == 16, channels == 1 || channels == 2
            else { return nil }
            bytesPerFrame = Int(channels) * 2
            kind = .audio
        default:
            return nil
        }
        let header = TrackHeader(
            trackID: trackID, kind: kind, timescale: timescale,
            width: width, height: height,
            matrix: matrix, sampleEntry: sampleEntry)
        let table: SampleTable = kind == .video ? .emptyVideo() : .emptyAudio(bytesPerFrame: bytesPerFrame)
        return (header, table, bytesPerFrame)
    }

    struct TrackRun {
        var trackID: UInt32
        var baseMediaDecodeTime: UInt64
        /// Absolute file offset of the run's first sample.
        var dataOffset: UInt64
        var samples: [FragmentSample]
    }

    struct FragmentError: Error {
        var problem: String
        /// The fragment's boxes are sound but its samples are not there (zeros or stale data:
        /// the payload of a fragment never synced).
        var payloadMissing = false
    }

    /// The track runs of one `moof` (or of a `free` box that was one), with absolute offsets.
    static func parseFragment(_ bytes: [UInt8], box: TopLevelBox) throws(FragmentError) -> [TrackRun] {
        guard let children = childBoxes(of: bytes, in: box.headerSize..<bytes.count) else {
            throw FragmentError(problem: "its boxes do not nest")
        }
        var runs: [TrackRun] = []
        for traf in children where traf.type == "traf" {
            guard let trafChildren = childBoxes(of: bytes, in: traf.body),
                let tfhd = trafChildren.first(where: { $0.type == "tfhd" })
            else { throw FragmentError(problem: "a track fragment has no tfhd") }
            var h = ByteReader(bytes, range: tfhd.body)
            guard let (_, flags) = h.readVersionAndFlags(), let trackID = h.readUInt32() else {
                throw FragmentError(problem: "short tfhd")
            }
            var base = box.offset
            if flags & 0x01 != 0 {
                guard let b = h.readUInt64() else { throw FragmentError(problem: "short tfhd") }
                base = b
            }
            if flags & 0x02 != 0 { guard h.skip(4) else { throw FragmentError(problem: "short tfhd") } }
            var defaultDuration: UInt32 = 0, defaultSize: UInt32 = 0, defaultFlags: UInt32 = 0
            if flags & 0x08 != 0 {
                guard let v = h.readUInt32() else { throw FragmentError(problem: "short tfhd") }
                defaultDuration = v
            }
            if flags & 0x10 != 0 {
                guard let v = h.readUInt32() else { throw FragmentError(problem: "short tfhd") }
                defaultSize = v
            }
            if flags & 0x20 != 0 {
                guard let v = h.readUInt32() else { throw FragmentError(problem: "short tfhd") }
                defaultFlags = v
            }

            var decodeTime: UInt64 = 0
            if let tfdt = trafChildren.first(where: { $0.type == "tfdt" }) {
                var t = ByteReader(bytes, range: tfdt.body)
                guard let (version, _) = t.readVersionAndFlags() else { throw FragmentError(problem: "short tfdt") }
                guard let v = version == 1 ? t.readUInt64() : t.readUInt32().map(UInt64.init) else {
                    throw FragmentError(problem: "short tfdt")
                }
                decodeTime = v
            }
            var nextData = base
            for trun in trafChildren where trun.type == "trun" {
                var t = ByteReader(bytes, range: trun.body)
                guard let (_, runFlags) = t.readVersionAndFlags(), let count = t.readUInt32() else {
                    throw FragmentError(problem: "short trun")
                }
                var dataOffset = nextData
                if runFlags & TrackRunFlags.dataOffset != 0 {
                    guard let o = t.readInt32() else { throw FragmentError(problem: "short trun") }
                    guard base < 1 << 62 else { throw FragmentError(problem: "a base data offset past any file") }
                    let absolute = Int64(base) + Int64(o)
                    guard absolute >= 0 else { throw FragmentError(problem: "a negative data offset") }
                    dataOffset = UInt64(absolute)
                }
                var firstFlags: UInt32?
                if runFlags & TrackRunFlags.firstSampleFlags != 0 {
                    guard let f = t.readUInt32() else { throw FragmentError(problem: "short trun") }
                    firstFlags = f
                }
                let perSample =
                    [
                        TrackRunFlags.sampleDuration, TrackRunFlags.sampleSize, TrackRunFlags.sampleFlags,
                        TrackRunFlags.sampleCompositionOffset,
                    ]
                    .filter { runFlags & $0 != 0 }.count * 4
                // Bound the count by the bytes that describe the samples (or a sane maximum when
                // every sample takes the defaults), so a corrupt count cannot exhaust memory.
                guard perSample > 0 ? Int(count) <= t.remaining / perSample : count <= 1 << 20 else {
                    throw FragmentError(problem: "a track run claims \(count) samples")
                }
                var samples: [FragmentSample] = []
                samples.reserveCapacity(Int(count))
                for i in 0..<Int(count) {
                    var duration = defaultDuration, size = defaultSize,
                        sampleFlags = i == 0 ? (firstFlags ?? defaultFlags) : defaultFlags
                    if runFlags & TrackRunFlags.sampleDuration != 0 {
                        guard let v = t.readUInt32() else { throw FragmentError(problem: "short trun") }
                        duration = v
                    }
                    if runFlags & TrackRunFlags.sampleSize != 0 {
                        guard let v = t.readUInt32() else { throw FragmentError(problem: "short trun") }
                        size = v
                    }
                    if runFlags & TrackRunFlags.sampleFlags != 0 {
                        guard let v = t.readUInt32() else { throw FragmentError(problem: "short trun") }
                        sampleFlags = v
                    }
                    if runFlags & TrackRunFlags.sampleCompositionOffset != 0 {
                        throw FragmentError(problem: "composition offsets (B-frames), which Vigil never writes")
                    }
                    samples.append(
                        FragmentSample(
                            duration: duration, size: size, isSync: sampleFlags & SampleFlags.nonSyncBit == 0))
                }
                guard dataOffset < 1 << 62, decodeTime < 1 << 62 else {
                    throw FragmentError(problem: "offsets or times past any file")
                }
                runs.append(
                    TrackRun(
                        trackID: trackID, baseMediaDecodeTime: decodeTime, dataOffset: dataOffset, samples: samples))
                // Sizes and durations are 32-bit and a run has at most 2^20 samples: no overflow.
                nextData = dataOffset + samples.reduce(0) { $0 + UInt64($1.size) }
                decodeTime += samples.reduce(0) { $0 + UInt64($1.duration) }
            }
        }
        return runs
    }
}
