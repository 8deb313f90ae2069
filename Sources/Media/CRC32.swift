/// CRC-32 (the IEEE 802.3 polynomial, reflected, as zlib and PNG compute it): what a fragment
/// carries of its own payload, so that repair can tell a payload that reached the disk whole
/// from one a power cut left partly zeros or stale blocks. Eight bytes a step ("slicing by
/// 8"): about a millisecond per megabyte, a second of 1080p video.
public struct CRC32: Sendable {
    public private(set) var value: UInt32 = 0

    public init() {}

    /// Eight tables of 256: the first the classic byte table, each next one a byte further.
    private static let tables: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            t[n] = c
        }
        for k in 1..<8 {
            for n in 0..<256 {
                let previous = t[(k - 1) * 256 + n]
                t[k * 256 + n] = (previous >> 8) ^ t[Int(previous & 0xFF)]
            }
        }
        return t
    }()

    /// Table `table`'s entry for the low byte of `word`.
    @inline(__always)
    private static func entry(_ t: UnsafeBufferPointer<UInt32>, _ table: Int, _ word: UInt32) -> UInt32 {
        t[table &* 256 &+ Int(word & 0xFF)]
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        let start = ~value
        let result: UInt32 = Self.tables.withUnsafeBufferPointer { t in
            var c = start
            var p = 0
            let n = bytes.count
            while n - p >= 8 {
                let one = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: p, as: UInt32.self)) ^ c
                let two = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: p + 4, as: UInt32.self))
                // Two sums of four: one chain of eight is more than Swift 6.0's type checker takes.
                let first: UInt32 =
                    Self.entry(t, 7, one) ^ Self.entry(t, 6, one >> 8) ^ Self.entry(t, 5, one >> 16)
                    ^ Self.entry(t, 4, one >> 24)
                let second: UInt32 =
                    Self.entry(t, 3, two) ^ Self.entry(t, 2, two >> 8) ^ Self.entry(t, 1, two >> 16)
                    ^ Self.entry(t, 0, two >> 24)
                c = first ^ second
                p += 8
            }
            while p < n {
                c = t[Int((c ^ UInt32(bytes[p])) & 0xFF)] ^ (c >> 8)
                p += 1
            }
            return c
        }
        value = ~result
    }

    public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }
    public mutating func update(_ bytes: ArraySlice<UInt8>) { bytes.withUnsafeBytes { update($0) } }

    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc = CRC32()
        crc.update(bytes)
        return crc.value
    }
}
