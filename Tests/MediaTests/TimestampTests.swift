import Media
import Testing

@Suite struct TimestampTests {
    @Test func frameIndexAtNonIntegerRates() {
        #expect(Timestamp(frameIndex: 1, rate: Rational(30000, 1001)).nanoseconds == 33_366_667)
        #expect(Timestamp(frameIndex: 30000, rate: Rational(30000, 1001)).nanoseconds == 1_001_000_000_000)
        #expect(Timestamp(frameIndex: 10, rate: Rational(247, 10)).nanoseconds == 404_858_300)
        // A day of 30 fps frames lands exactly.
        #expect(Timestamp(frameIndex: 2_592_000, rate: Rational(30, 1)) == Timestamp(seconds: 86_400))
    }

    /// Frames to time and back, one conversion for video frames and sound's sample frames.
    @Test func framesLastExactlyAndAreCountedBack() {
        #expect(Timestamp.Duration(frames: 5, rate: Rational(30000, 1001)).nanoseconds == 166_833_333)
        #expect(Timestamp.Duration(frames: 480, sampleRate: 48000) == Timestamp.Duration(seconds: 0.01))
        #expect(Timestamp.Duration(frames: 1, sampleRate: 44100).nanoseconds == 22_676)
        #expect(Timestamp.Duration(seconds: 0.01).frames(sampleRate: 48000) == 480)
        #expect(Timestamp.Duration(nanoseconds: 50_000_000).frames(at: Rational(30000, 1001)) == 1)
        for n in [0, 1, 29, 30, 1001, 86_400 * 30] as [Int64] {
            let rate = Rational(30000, 1001)
            #expect(Timestamp.Duration(frames: n, rate: rate).frames(at: rate) == n)
            #expect(Timestamp(frameIndex: n, rate: rate) == Timestamp.zero + Timestamp.Duration(frames: n, rate: rate))
        }
        // A chunk of sound ends where its sample frames say, and splits on a sample frame.
        let chunk = AudioChunk(
            data: [UInt8](repeating: 0, count: 960), time: Timestamp(seconds: 2), sampleRate: 48000, channels: 1)
        #expect(chunk.end == Timestamp(seconds: 2.01))
        let (before, after) = chunk.split(at: Timestamp(seconds: 2.005))
        #expect(before?.frames == 240 && after?.time == Timestamp(seconds: 2.005))
    }

    @Test func ticksRoundEachInstant() {
        let t = Timestamp(frameIndex: 1, rate: Rational(30000, 1001))
        #expect(t.ticks(timescale: 90_000) == 3003)
        #expect(Timestamp(nanoseconds: 5_555).ticks(timescale: 90_000) == 0)
        #expect(Timestamp(nanoseconds: 5_556).ticks(timescale: 90_000) == 1)
        #expect(Timestamp(nanoseconds: -5_556).ticks(timescale: 90_000) == -1)
    }

    @Test func rationalsReduceAndScaleWithoutOverflow() {
        #expect(Rational(60000, 2002) == Rational(30000, 1001))
        #expect(Rational(3, -4).numerator == -3 && Rational(3, -4).denominator == 4)
        #expect(Rational.scale(Int64.max / 2, by: 4, over: 4) == Int64.max / 2)
        #expect(Rational.scale(7, by: 1, over: 2) == 4)
    }

    @Test func arithmeticAndDescription() {
        let a = Timestamp(seconds: 1.5)
        #expect((a + Timestamp.Duration(seconds: 0.25)).seconds == 1.75)
        #expect((a - Timestamp(seconds: 0.5)) == Timestamp.Duration(seconds: 1))
        #expect(a.description == "1.500s")
        #expect(Timestamp(nanoseconds: -1_500_000).description == "-0.002s")
    }
}
