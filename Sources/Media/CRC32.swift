/// CRC-32 (the IEEE 802.3 polynomial, reflected, as zlib and PNG compute it): what a fragment
/// carries of its own payload, so that repair can tell a payload that reached the disk whole
/// from one a power cut left partly zeros or stale blocks.
public struct CRC32: Sendable {
    public private(set) var value: UInt32 = 0

    public init() {}

    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    public mutating func update(_ bytes: some Collection<UInt8>) {
        var c = ~value
        let table = Self.table
        table.withUnsafeBufferPointer { t in
            for byte in bytes { c = t[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        }
        value = ~c
    }

    public static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        var crc = CRC32()
        crc.update(bytes)
        return crc.value
    }
}
