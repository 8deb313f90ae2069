import Media

/// One fragment of a fragmented movie (ISO/IEC 14496-12 §8.8): a `moof` — its `mfhd`, then a
/// `traf` (`tfhd`, `tfdt`, `trun`) for each track with samples in it — and the header of the
/// `mdat` after it, whose payload is those samples, track after track in the order given.
///
/// The one place fragments are assembled: a clip's (`MovieWriter`, one per GOP and the sound
/// up to its end) and a live view's media segment (`LiveMovie`, one per GOP with its Opus
/// packets). What is each one's own stays there: how sample durations are counted, the clip's
/// payload check (given here, written as the `moof`'s last child) and its hiding until the
/// payload is durable, the live view's timeline.
///
/// A value: the same runs make the same bytes.
struct MovieFragment {
    /// One track's samples in the fragment.
    struct Run {
        var trackID: UInt32
        /// Where the run starts on the track's media timeline (`tfdt`).
        var decodeTime: UInt64
        var samples: [FragmentSample]
        /// Whether each sample says whether it is a sync sample (video); without, every
        /// sample is one (the track's default flags, zero: sound).
        var flagsEachSample: Bool
    }

    /// From 1, one more for each fragment of a movie (`mfhd`).
    var sequenceNumber: UInt32
    var runs: [Run]
    /// The CRC-32 of the payload, which a clip's fragment carries in a `free` box at the end
    /// of its `moof` (`PayloadCheck`: repair's proof that the payload reached the disk whole);
    /// nil writes none (the live view's segments).
    var payloadCheck: UInt32?

    /// The bytes before the payload: the `moof` (its first `moofSize` bytes), its runs' data
    /// offsets pointing into the `mdat`, then the `mdat`'s header (the 64-bit form when the
    /// payload needs it). The payload follows it.
    func header() -> (bytes: [UInt8], moofSize: Int) {
        // moof and mfhd 24 bytes; traf, tfhd, tfdt and trun 64, and 8 or 12 a sample; the mdat's 16 at most.
        var capacity = 24 + (payloadCheck == nil ? 0 : PayloadCheck.boxSize) + 16
        for run in runs where !run.samples.isEmpty {
            capacity += 64 + run.samples.count * (run.flagsEachSample ? 12 : 8)
        }
        var w = ByteWriter(reservingCapacity: capacity)
        // Where each run's data offset is, and where its data starts in the payload.
        var offsets: [(position: Int, inPayload: Int)] = []
        offsets.reserveCapacity(runs.count)
        var payload = 0
        w.box("moof") { w in
            w.writeMFHD(sequenceNumber: sequenceNumber)
            for run in runs where !run.samples.isEmpty {
                w.box("traf") { w in
                    w.writeTFHD(trackID: run.trackID)
                    w.writeTFDT(baseMediaDecodeTime: run.decodeTime)
                    offsets.append((w.writeTRUN(samples: run.samples, withFlags: run.flagsEachSample), payload))
                }
                payload += run.samples.reduce(0) { $0 + Int($1.size) }
            }
            if let payloadCheck { w.writePayloadCheck(crc: payloadCheck) }
        }
        let moofSize = w.count
        w.writeMDATHeader(payloadSize: UInt64(payload))
        for offset in offsets { w.patchUInt32(at: offset.position, UInt32(w.count + offset.inPayload)) }
        return (w.bytes, moofSize)
    }
}
