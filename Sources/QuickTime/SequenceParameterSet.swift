/// The fields of an H.264 sequence parameter set that `avcC` repeats for High profiles
/// (ISO/IEC 14496-15 §5.3.3.1): chroma format and bit depths.
struct HighProfileExtension: Equatable {
    var chromaFormat: UInt8
    var bitDepthLumaMinus8: UInt8
    var bitDepthChromaMinus8: UInt8

    /// Profiles whose SPS carries chroma format and bit depth (H.264 §7.3.2.1.1).
    static let profiles: Set<UInt8> = [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135]

    /// Reads the extension fields from an SPS NAL unit (with its one-byte NAL header);
    /// nil for other profiles or an SPS too short to hold them.
    init?(sps: [UInt8]) {
        guard sps.count > 4, HighProfileExtension.profiles.contains(sps[1]) else { return nil }
        var bits = ExpGolombReader(rbsp: removeEmulationPrevention(sps.dropFirst(4)))
        guard bits.readUE() != nil,  // seq_parameter_set_id
            let chroma = bits.readUE(), chroma <= 3
        else { return nil }
        if chroma == 3 { guard bits.readBit() != nil else { return nil } }  // separate_colour_plane_flag
        guard let luma = bits.readUE(), luma <= 6,
            let chromaDepth = bits.readUE(), chromaDepth <= 6
        else { return nil }
        chromaFormat = UInt8(chroma)
        bitDepthLumaMinus8 = UInt8(luma)
        bitDepthChromaMinus8 = UInt8(chromaDepth)
    }
}

/// Drops the `03` of every `00 00 03` sequence, turning NAL payload bytes into RBSP bytes.
func removeEmulationPrevention<C: Collection>(_ bytes: C) -> [UInt8] where C.Element == UInt8 {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var zeros = 0
    for b in bytes {
        if zeros >= 2 && b == 3 {
            zeros = 0
            continue
        }
        out.append(b)
        zeros = b == 0 ? zeros + 1 : 0
    }
    return out
}

/// Reads bits and unsigned Exp-Golomb codes, most significant bit first.
struct ExpGolombReader {
    private let bytes: [UInt8]
    private var position = 0

    init(rbsp: [UInt8]) { self.bytes = rbsp }

    mutating func readBit() -> UInt32? {
        guard position < bytes.count * 8 else { return nil }
        let bit = (bytes[position / 8] >> (7 - UInt8(position % 8))) & 1
        position += 1
        return UInt32(bit)
    }

    mutating func readUE() -> UInt32? {
        var leadingZeros = 0
        while true {
            guard let bit = readBit() else { return nil }
            if bit == 1 { break }
            leadingZeros += 1
            if leadingZeros > 31 { return nil }
        }
        var value: UInt32 = 0
        for _ in 0..<leadingZeros {
            guard let bit = readBit() else { return nil }
            value = value << 1 | bit
        }
        return (UInt32(1) << leadingZeros) - 1 + value
    }
}
