/// One encoded H.264 access unit, ready to be a MOV sample.
public struct EncodedSample: Hashable, Sendable {
    /// The frame's NAL units, each preceded by its length as a 4-byte big-endian integer
    /// (the `avcC` form; no start codes, no SPS/PPS).
    public var data: [UInt8]
    /// Presentation time: the capture timestamp of the frame this sample shows.
    public var pts: Timestamp
    /// Decode time. Equal to `pts` for the streams Vigil makes (no B-frames).
    public var dts: Timestamp
    /// An IDR picture: decoding can start here (a MOV sync sample).
    public var isKeyframe: Bool

    public init(data: [UInt8], pts: Timestamp, dts: Timestamp, isKeyframe: Bool) {
        self.data = data
        self.pts = pts
        self.dts = dts
        self.isKeyframe = isKeyframe
    }

    /// The NAL units of `data` (without their length prefixes), or nil when the length
    /// prefixes do not add up to the sample's size exactly.
    public var nalUnits: [ArraySlice<UInt8>]? {
        var units: [ArraySlice<UInt8>] = []
        var i = 0
        while i < data.count {
            guard data.count - i >= 4 else { return nil }
            let length = Int(data[i]) << 24 | Int(data[i + 1]) << 16 | Int(data[i + 2]) << 8 | Int(data[i + 3])
            i += 4
            guard length > 0, length <= data.count - i else { return nil }
            units.append(data[i..<(i + length)])
            i += length
        }
        return units
    }
}

/// A group of pictures: a keyframe and the samples that depend on it, in decode order.
/// The unit the pre-roll ring keeps and drops, the unit that travels from the ring to the
/// clip writer, and the unit of a movie fragment.
public struct GOP: Hashable, Sendable {
    public private(set) var samples: [EncodedSample]
    /// Sum of the samples' sizes in bytes.
    public private(set) var byteCount: Int
    /// When the last sample stops showing: the capture time of the frame after it (the next
    /// keyframe, or the first frame left out of a clip), once known. Nil while the GOP is being
    /// recorded, or when the stream ended without a next frame.
    public private(set) var end: Timestamp?

    /// A GOP starting with `keyframe`; nil when it is not a keyframe.
    public init?(keyframe: EncodedSample) {
        guard keyframe.isKeyframe else { return nil }
        samples = [keyframe]
        byteCount = keyframe.data.count
    }

    /// Adds a sample that depends on this GOP's keyframe. Returns false (and adds nothing)
    /// for a keyframe, which starts a new GOP, a sample not later than the last one, or a
    /// GOP already ended.
    @discardableResult
    public mutating func append(_ sample: EncodedSample) -> Bool {
        guard end == nil, !sample.isKeyframe, let last = samples.last, sample.dts > last.dts else { return false }
        samples.append(sample)
        byteCount += sample.data.count
        return true
    }

    /// The GOP ended at `time` (the capture time of the frame after its last); nil keeps it
    /// open-ended (the last frame then lasts as long as the one before it).
    public func ended(at time: Timestamp?) -> GOP {
        var copy = self
        copy.end = time.map { max($0, lastTime) }
        return copy
    }

    /// Presentation time of the keyframe.
    public var start: Timestamp { samples[0].pts }
    /// Presentation time of the last sample.
    public var lastTime: Timestamp { samples[samples.count - 1].pts }
    public var count: Int { samples.count }
}

extension GOP {
    /// `samples` (in decode order) cut into GOPs at their keyframes, each ended at the next
    /// one's start and the last at `end` (open-ended when nil); samples before the first
    /// keyframe, or not after the one before, are left out.
    public static func grouped(_ samples: [EncodedSample], end: Timestamp? = nil) -> [GOP] {
        var gops: [GOP] = []
        for sample in samples {
            if sample.isKeyframe, let gop = GOP(keyframe: sample) {
                if let last = gops.indices.last { gops[last] = gops[last].ended(at: sample.pts) }
                gops.append(gop)
            } else if let last = gops.indices.last {
                gops[last].append(sample)
            }
        }
        if let last = gops.indices.last { gops[last] = gops[last].ended(at: end) }
        return gops
    }
}
