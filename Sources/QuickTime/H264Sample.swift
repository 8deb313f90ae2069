/// What repair asks of a video sample before it trusts a fragment it finds: that the bytes are
/// an H.264 access unit as Vigil writes it, not the zeros or stale blocks a power cut can leave
/// where a fragment's payload never reached the disk.
enum H264Sample {
    /// True when `bytes` walks exactly as NAL units with 4-byte big-endian length prefixes
    /// (the `avcC` Vigil writes says 4), each at least its one-byte header long, each header
    /// valid (forbidden bit clear, a type H.264 defines: 1 to 23), and at least one of them a
    /// coded slice (type 1, or 5 for an IDR picture).
    static func isWhole(_ bytes: ArraySlice<UInt8>) -> Bool {
        var position = bytes.startIndex
        var hasSlice = false
        while position < bytes.endIndex {
            guard bytes.endIndex - position >= 5 else { return false }
            let length =
                Int(bytes[position]) << 24 | Int(bytes[position + 1]) << 16 | Int(bytes[position + 2]) << 8
                | Int(bytes[position + 3])
            let header = bytes[position + 4]
            let type = header & 0x1F
            guard length >= 1, length <= bytes.endIndex - position - 4, header & 0x80 == 0, (1...23).contains(type)
            else { return false }
            if type == 1 || type == 5 { hasSlice = true }
            position += 4 + length
        }
        return hasSlice
    }
}
