import Media
import Testing

/// The Annex B byte stream read into movie samples, on hand-made streams: each edge a
/// hardware encoder's output can have.
@Suite struct NALUnitTests {
    static let sps: [UInt8] = [0x67, 0x42, 0xC0, 0x1E, 0xDA, 0x02]
    static let pps: [UInt8] = [0x68, 0xCE, 0x3C, 0x80]
    static let idr: [UInt8] = [0x65, 0x88, 0x84, 0x00, 0x00, 0x03, 0x01, 0x7F]  // emulation prevention inside
    static let slice: [UInt8] = [0x41, 0x9A, 0x21, 0x6C]
    static let sei: [UInt8] = [0x06, 0x05, 0x01, 0x80]
    static let aud: [UInt8] = [0x09, 0xF0]
    static let filler: [UInt8] = [0x0C, 0xFF, 0xFF, 0x80]

    static func avcc(_ units: [[UInt8]]) -> [UInt8] {
        var sample: [UInt8] = []
        for u in units { AVCC.append(u[...], to: &sample) }
        return sample
    }

    @Test func longAndShortStartCodesLeadingAndTrailingZeros() throws {
        let stream = Array(
            [
                [0, 0], [0, 0, 0, 1], Self.aud, [0, 0, 0, 1], Self.sps, [0, 0, 1], Self.pps, [0, 0, 1], Self.sei,
                [0, 0, 0, 1], Self.idr, [0, 0],
            ].joined())
        let units = try AnnexB.units(stream[...]).map(Array.init)
        #expect(units == [Self.aud, Self.sps, Self.pps, Self.sei, Self.idr])
        let unit = try AnnexB.accessUnit(stream[...])
        #expect(unit.sample == Self.avcc([Self.sei, Self.idr]))
        #expect(unit.sequenceParameterSets == [Self.sps] && unit.pictureParameterSets == [Self.pps])
        #expect(unit.isIDR)
        #expect(AVCC.isWhole(unit.sample[...]))
    }

    /// `00 00 03` inside a unit is part of it: the unit is copied as it is, never unescaped.
    @Test func emulationPreventionBytesStay() throws {
        let unit = try AnnexB.accessUnit(([0, 0, 1] + Self.idr)[...])
        #expect(unit.sample == [0, 0, 0, UInt8(Self.idr.count)] + Self.idr)
    }

    @Test func delimitersFillerAndEndsAreDropped() throws {
        let stream = Array(
            [
                [0, 0, 0, 1], Self.aud, [0, 0, 1], Self.slice, [0, 0, 1], Self.filler, [0, 0, 1, 0x0A],
                [0, 0, 1, 0x0B],
            ].joined())
        let unit = try AnnexB.accessUnit(stream[...])
        #expect(unit.sample == Self.avcc([Self.slice]))
        #expect(!unit.isIDR && unit.sequenceParameterSets.isEmpty)
    }

    /// Parameter sets that change between IDRs (a new stream) come back as they are.
    @Test func changedParameterSetsAreReported() throws {
        var other = Self.sps
        other[3] = 0x28  // another level
        let first = try AnnexB.accessUnit(
            Array([[0, 0, 0, 1], Self.sps, [0, 0, 0, 1], Self.pps, [0, 0, 1], Self.idr].joined())[...])
        let second = try AnnexB.accessUnit(
            Array([[0, 0, 0, 1], other, [0, 0, 0, 1], Self.pps, [0, 0, 1], Self.idr].joined())[...])
        #expect(first.sequenceParameterSets == [Self.sps] && second.sequenceParameterSets == [other])
        #expect(first.sample == second.sample)
    }

    @Test func whatIsNotAByteStreamIsRefused() throws {
        #expect(throws: AnnexBError.self) { try AnnexB.units([0x65, 0x88, 0x84][...]) }
        #expect(throws: AnnexBError.self) { try AnnexB.units(([7, 0, 0, 1] + Self.idr)[...]) }
        // A unit whose header has the forbidden bit, or an unspecified type.
        #expect(throws: AnnexBError.self) { try AnnexB.accessUnit([0, 0, 1, 0x85, 1][...]) }
        #expect(throws: AnnexBError.self) { try AnnexB.accessUnit([0, 0, 1, 0x1F, 1][...]) }
        #expect(try AnnexB.units([0, 0, 0, 0][...]).isEmpty)
        #expect(try AnnexB.units([][...]).isEmpty)
    }

    /// What repair checks a sample by: every walk must land exactly on the end.
    @Test func wholeSamples() {
        #expect(AVCC.isWhole(Self.avcc([Self.sei, Self.idr])[...]))
        #expect(!AVCC.isWhole(Self.avcc([Self.sei])[...]))  // no slice
        #expect(!AVCC.isWhole([UInt8](repeating: 0, count: 64)[...]))
        var short = Self.avcc([Self.idr])
        short.removeLast()
        #expect(!AVCC.isWhole(short[...]))
        #expect(!AVCC.isWhole((Self.avcc([Self.idr]) + [0])[...]))
        #expect(!AVCC.isWhole([][...]))
    }
}
