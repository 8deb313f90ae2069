import Media
import Testing

@Suite struct FourCCTests {
    @Test func oneCodeTwoByteOrders() {
        // QuickTime stores "moov" as the bytes 6D 6F 6F 76; V4L2 packs "YUYV" first character lowest.
        let moov: FourCC = "moov"
        #expect(moov.bigEndianValue == 0x6D6F_6F76)
        #expect(FourCC(bigEndian: 0x6D6F_6F76) == moov)
        #expect(moov.bytes == [0x6D, 0x6F, 0x6F, 0x76])
        #expect(FourCC("YUYV").littleEndianValue == 0x5659_5559)
        #expect(FourCC(littleEndian: 0x5659_5559) == FourCC("YUYV"))
        #expect(FourCC(littleEndian: 0x5659_5559).bigEndianValue == 0x5955_5956)
    }

    @Test func descriptions() {
        #expect(FourCC("qt").description == "qt")  // "qt  " with the spaces trimmed
        #expect(FourCC(littleEndian: 0x2033_4752).description == "RG3")
        #expect(FourCC(littleEndian: 0x0102_0304).description == "????")
        #expect(FourCC(littleEndian: 0x2036_3159 | 0x8000_0000).description == "Y16-BE")
        #expect(FourCC("free").isPrintable && !FourCC(bigEndian: 0x0000_0001).isPrintable)
    }
}
