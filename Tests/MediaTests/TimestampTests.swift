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
