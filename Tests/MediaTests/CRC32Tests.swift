import Media
import Testing

@Suite struct CRC32Tests {
    /// The bit-by-bit definition, to check the table-driven one against.
    static func reference(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            c ^= UInt32(byte)
            for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        }
        return ~c
    }

    @Test func knownValues() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)  // the standard check value
        #expect(CRC32.checksum([]) == 0)
        #expect(CRC32.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
    }

    /// Every length around the eight-byte steps, and pieces fed one after another.
    @Test func matchesTheDefinitionAtEveryLengthAndInPieces() {
        var random = SplitMix64(seed: 32)
        let bytes = (0..<300).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        for n in 0...bytes.count {
            #expect(CRC32.checksum(Array(bytes[..<n])) == Self.reference(Array(bytes[..<n])), "length \(n)")
        }
        var pieces = CRC32()
        pieces.update(bytes[..<7])
        pieces.update(Array(bytes[7..<129]))
        pieces.update(bytes[129...])
        #expect(pieces.value == Self.reference(bytes))
    }
}
