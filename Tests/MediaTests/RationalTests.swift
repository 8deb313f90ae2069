import Media
import Testing

@Suite struct RationalTests {
    @Test(
        arguments: [
            (30.0, 30, 1), (25, 25, 1), (29.97, 30000, 1001), (59.94, 60000, 1001), (23.976, 24000, 1001),
            (12.5, 25, 2), (24.7, 247, 10), (7.5, 15, 2),
        ] as [(Double, Int64, Int64)])
    func frameRatesFromDecimals(fps: Double, numerator: Int64, denominator: Int64) {
        #expect(Rational(framesPerSecond: fps) == Rational(numerator, denominator))
    }
}
