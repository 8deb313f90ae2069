/// H.264 NAL units in the two forms Vigil meets: the byte stream hardware encoders give
/// (Annex B: each unit after a 3- or 4-byte start code) and the length-prefixed form a movie
/// holds (`avcC`: each unit after its 4-byte big-endian length). One home for both, and for
/// the few unit types that matter (ITU-T H.264, table 7-1).
public enum NALUnitType {
    public static let slice: UInt8 = 1
    public static let idrSlice: UInt8 = 5
    public static let supplementalEnhancement: UInt8 = 6
    public static let sequenceParameterSet: UInt8 = 7
    public static let pictureParameterSet: UInt8 = 8
    public static let accessUnitDelimiter: UInt8 = 9
    public static let endOfSequence: UInt8 = 10
    public static let endOfStream: UInt8 = 11
    public static let filler: UInt8 = 12

    /// The type of a unit from its first (header) byte; nil when the header is not valid:
    /// the forbidden bit set, or a type H.264 leaves unspecified (0, or 24 to 31).
    public static func of(header: UInt8) -> UInt8? {
        let type = header & 0x1F
        return header & 0x80 == 0 && (1...23).contains(type) ? type : nil
    }
}

/// Access units in the `avcC` form: NAL units with 4-byte big-endian length prefixes.
public enum AVCC {
    /// True when `bytes` walks exactly as NAL units with 4-byte length prefixes, each at least
    /// its header long, each header valid, and at least one a coded slice (type 1, or 5 for an
    /// IDR picture): an access unit, not the zeros or stale blocks a power cut leaves where a
    /// payload never reached the disk.
    public static func isWhole(_ bytes: ArraySlice<UInt8>) -> Bool {
        var position = bytes.startIndex
        var hasSlice = false
        while position < bytes.endIndex {
            guard bytes.endIndex - position >= 5 else { return false }
            let length =
                Int(bytes[position]) << 24 | Int(bytes[position + 1]) << 16 | Int(bytes[position + 2]) << 8
                | Int(bytes[position + 3])
            guard length >= 1, length <= bytes.endIndex - position - 4,
                let type = NALUnitType.of(header: bytes[position + 4])
            else { return false }
            if type == NALUnitType.slice || type == NALUnitType.idrSlice { hasSlice = true }
            position += 4 + length
        }
        return hasSlice
    }

    /// Where each NAL unit of `bytes` lies (after its 4-byte length); nil when the lengths do
    /// not walk to the end exactly, or one is 0.
    public static func units(_ bytes: [UInt8]) -> [Range<Int>]? {
        var units: [Range<Int>] = []
        var at = 0
        while at < bytes.count {
            guard bytes.count - at >= 4 else { return nil }
            let length = Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            at += 4
            guard length > 0, length <= bytes.count - at else { return nil }
            units.append(at..<at + length)
            at += length
        }
        return units
    }

    /// Appends `unit` (a NAL unit without start code or prefix) with its 4-byte length.
    public static func append(_ unit: ArraySlice<UInt8>, to sample: inout [UInt8]) {
        let n = UInt32(unit.count)
        sample.append(contentsOf: [
            UInt8(n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8),
            UInt8(truncatingIfNeeded: n),
        ])
        sample.append(contentsOf: unit)
    }
}

/// Why a byte stream could not be read as H.264.
public struct AnnexBError: Error, Equatable, Sendable, CustomStringConvertible {
    public var problem: String
    public var description: String { "not an H.264 byte stream: \(problem)" }
}

/// One encoded picture from an Annex B byte stream, in the form a movie holds.
public struct AnnexBAccessUnit: Equatable, Sendable {
    /// The picture's units in `avcC` form: slices and SEI, without parameter sets, access unit
    /// delimiters, filler, or end-of-sequence/stream units (a movie keeps parameter sets in
    /// its `avcC` and needs none of the others). Empty when the buffer held only those.
    public var sample: [UInt8]
    /// The parameter sets the buffer carried (an encoder repeats them before each IDR; a
    /// change means a new stream), without start codes.
    public var sequenceParameterSets: [[UInt8]]
    public var pictureParameterSets: [[UInt8]]
    /// An IDR picture: a keyframe a clip can start at.
    public var isIDR: Bool
}

/// The Annex B byte stream (ITU-T H.264 annex B): what V4L2 memory-to-memory encoders write.
public enum AnnexB {
    /// The NAL units of `bytes`, each without its start code and without the zero bytes that
    /// may follow it (`trailing_zero_8bits`, or the first byte of a 4-byte start code).
    /// Emulation-prevention bytes (`00 00 03`) stay as they are: they belong to the unit.
    /// Throws when the stream does not begin with a start code (after leading zeros).
    public static func units(_ bytes: ArraySlice<UInt8>) throws(AnnexBError) -> [ArraySlice<UInt8>] {
        var starts: [(codeAt: Int, unitAt: Int)] = []
        var i = bytes.startIndex
        while i + 2 < bytes.endIndex {
            if bytes[i + 2] > 1 {
                i += 3  // no start code can begin at i, i+1 or i+2's zero run
            } else if bytes[i] == 0 && bytes[i + 1] == 0 && bytes[i + 2] == 1 {
                starts.append((i, i + 3))
                i += 3
            } else {
                i += 1
            }
        }
        guard let first = starts.first else {
            if bytes.allSatisfy({ $0 == 0 }) { return [] }
            throw AnnexBError(problem: "no start code in \(bytes.count) bytes")
        }
        guard bytes[bytes.startIndex..<first.codeAt].allSatisfy({ $0 == 0 }) else {
            throw AnnexBError(problem: "\(first.codeAt - bytes.startIndex) bytes before the first start code")
        }
        var units: [ArraySlice<UInt8>] = []
        for (n, start) in starts.enumerated() {
            var end = n + 1 < starts.count ? starts[n + 1].codeAt : bytes.endIndex
            while end > start.unitAt && bytes[end - 1] == 0 { end -= 1 }
            if end > start.unitAt { units.append(bytes[start.unitAt..<end]) }
        }
        return units
    }

    /// One access unit (one encoder output buffer) in the form a movie holds.
    public static func accessUnit(_ bytes: ArraySlice<UInt8>) throws(AnnexBError) -> AnnexBAccessUnit {
        var unit = AnnexBAccessUnit(sample: [], sequenceParameterSets: [], pictureParameterSets: [], isIDR: false)
        unit.sample.reserveCapacity(bytes.count + 16)
        for nal in try units(bytes) {
            guard let type = NALUnitType.of(header: nal[nal.startIndex]) else {
                throw AnnexBError(
                    problem: "a NAL unit with the invalid header 0x\(String(nal[nal.startIndex], radix: 16))")
            }
            switch type {
            case NALUnitType.sequenceParameterSet: unit.sequenceParameterSets.append(Array(nal))
            case NALUnitType.pictureParameterSet: unit.pictureParameterSets.append(Array(nal))
            case NALUnitType.accessUnitDelimiter, NALUnitType.filler, NALUnitType.endOfSequence,
                NALUnitType.endOfStream:
                continue
            default:
                if type == NALUnitType.idrSlice { unit.isIDR = true }
                AVCC.append(nal, to: &unit.sample)
            }
        }
        return unit
    }
}
