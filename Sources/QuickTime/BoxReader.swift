import Media

/// Reads big-endian fields from bytes already in memory. Every read checks its bounds and
/// returns nil past the end, so a corrupt box cannot make the parser trap.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var position: Int
    let end: Int

    init(_ bytes: [UInt8], range: Range<Int>? = nil) {
        self.bytes = bytes
        self.position = range?.lowerBound ?? 0
        self.end = range?.upperBound ?? bytes.count
    }

    var remaining: Int { end - position }

    mutating func skip(_ n: Int) -> Bool {
        guard n >= 0, n <= remaining else { return false }
        position += n
        return true
    }

    mutating func readUInt16() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { position += 2 }
        return UInt16(bytes[position]) << 8 | UInt16(bytes[position + 1])
    }

    mutating func readUInt32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        defer { position += 4 }
        var v: UInt32 = 0
        for i in 0..<4 { v = v << 8 | UInt32(bytes[position + i]) }
        return v
    }

    mutating func readInt32() -> Int32? { readUInt32().map { Int32(bitPattern: $0) } }

    mutating func readUInt64() -> UInt64? {
        guard let hi = readUInt32(), let lo = readUInt32() else { return nil }
        return UInt64(hi) << 32 | UInt64(lo)
    }

    /// Version and flags of a full box.
    mutating func readVersionAndFlags() -> (version: UInt8, flags: UInt32)? {
        guard let v = readUInt32() else { return nil }
        return (UInt8(v >> 24), v & 0x00FF_FFFF)
    }
}

/// A box found inside bytes held in memory.
struct ChildBox {
    var type: FourCC
    /// Where the whole box (header included) lies in the enclosing byte array.
    var range: Range<Int>
    /// Where its body lies.
    var body: Range<Int>
}

/// The boxes directly inside `range` of `bytes`; nil when any of them is malformed
/// (a size that runs past its parent or is smaller than its header).
func childBoxes(of bytes: [UInt8], in range: Range<Int>) -> [ChildBox]? {
    var boxes: [ChildBox] = []
    var r = ByteReader(bytes, range: range)
    while r.remaining > 0 {
        let start = r.position
        guard let size32 = r.readUInt32(), let type = r.readUInt32() else { return nil }
        var size = UInt64(size32)
        var headerSize = 8
        if size32 == 1 {
            guard let large = r.readUInt64() else { return nil }
            size = large
            headerSize = 16
        } else if size32 == 0 {
            size = UInt64(range.upperBound - start)
        }
        guard size >= UInt64(headerSize), size <= UInt64(range.upperBound - start) else { return nil }
        let end = start + Int(size)
        boxes.append(ChildBox(type: FourCC(bigEndian: type), range: start..<end, body: (start + headerSize)..<end))
        guard r.skip(end - r.position) else { return nil }
    }
    return boxes
}

/// The first child of the given type, looked up along a path such as `["mdia", "minf", "stbl"]`.
func findBox(_ path: [FourCC], in bytes: [UInt8], range: Range<Int>) -> ChildBox? {
    guard let first = path.first, let children = childBoxes(of: bytes, in: range),
        let box = children.first(where: { $0.type == first })
    else { return nil }
    return path.count == 1 ? box : findBox(Array(path.dropFirst()), in: bytes, range: box.body)
}
