import Capture
import Media
import Testing

@testable import H264

/// The Annex B conversion against x264's own byte stream: the same frames encoded by x264 as
/// the agent runs it (length-prefixed) and as a hardware encoder writes (start codes, an
/// access unit delimiter, SPS and PPS before each IDR) must give byte-identical samples.
@Suite struct AnnexBTests {
    static func frames() throws -> [VideoFrame] {
        let moving = SceneObject(
            enter: .init(seconds: 0.5), leave: .init(seconds: 2.5), path: .rightToLeft(y: 0.5))
        return try allFrames(try scene(seconds: 3, schedule: SceneSchedule(objects: [moving])))
    }

    /// Byte for byte: x264's byte stream (start codes, a delimiter before each picture)
    /// converted gives exactly x264's length-prefixed samples.
    @Test func x264sByteStreamConvertsToItsOwnLengthPrefixedSamples() throws {
        let frames = try Self.frames()
        let expected = try encodeAll(
            frames, encoder: try X264Encoder(format: frames[0].format, settings: deterministic))
        let raw = try encodeAll(
            frames, encoder: try X264Encoder(format: frames[0].format, settings: deterministic, byteStream: true))
        #expect(expected.count == frames.count && raw.count == expected.count)
        for (n, (want, got)) in zip(expected, raw).enumerated() {
            // The raw stream really is the other form: start codes, and a delimiter first.
            #expect(got.data.starts(with: [0, 0, 0, 1, 0x09]), "frame \(n) does not start with a delimiter")
            let unit = try AnnexB.accessUnit(got.data[...])
            let differ = zip(unit.sample, want.data).enumerated().first { $1.0 != $1.1 }?.offset
            #expect(
                unit.sample == want.data,
                "frame \(n): the converted sample differs from x264's (\(unit.sample.count) vs \(want.data.count) bytes, first at \(differ ?? -1))"
            )
            #expect(unit.isIDR == want.isKeyframe, "frame \(n)")
        }
        #expect(expected.filter(\.isKeyframe).count == 3)  // one a second of capture time
    }

    /// As a hardware encoder repeats them: the SPS and PPS before each IDR are taken out of the
    /// sample and reported — the same ones x264 gives for the movie's avcC — and what remains is
    /// x264's sample (the first IDR also carries x264's own SEI, which it sends with its headers).
    @Test func repeatedParameterSetsAreTakenOutAndReported() throws {
        let frames = try Self.frames()
        let prefixed = try X264Encoder(format: frames[0].format, settings: deterministic)
        let expected = try encodeAll(frames, encoder: prefixed)
        let raw = try encodeAll(
            frames,
            encoder: try X264Encoder(
                format: frames[0].format, settings: deterministic, byteStream: true, repeatHeaders: true))
        var idrs = 0
        for (n, (want, got)) in zip(expected, raw).enumerated() {
            let unit = try AnnexB.accessUnit(got.data[...])
            #expect(unit.isIDR == want.isKeyframe, "frame \(n)")
            if unit.isIDR {
                idrs += 1
                #expect(unit.sequenceParameterSets == [prefixed.sequenceParameterSet], "frame \(n)")
                #expect(unit.pictureParameterSets == [prefixed.pictureParameterSet], "frame \(n)")
            } else {
                #expect(unit.sequenceParameterSets.isEmpty && unit.pictureParameterSets.isEmpty, "frame \(n)")
            }
            var sample = unit.sample[...]
            if n == 0, sample.count > 5, sample[sample.startIndex + 4] == NALUnitType.supplementalEnhancement {
                let length = sample.prefix(4).reduce(0) { $0 << 8 | Int($1) }
                sample = sample.dropFirst(4 + length)
            }
            #expect(Array(sample) == want.data, "frame \(n): the converted sample differs from x264's")
        }
        #expect(idrs == 3)
    }
}
