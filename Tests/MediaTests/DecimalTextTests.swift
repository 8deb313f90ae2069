import Foundation
import Media
import Testing

@Suite struct DecimalTextTests {
    @Test(arguments: [
        (8.03, 2, "8.03"), (12.4, 2, "12.40"), (0, 2, "0.00"), (-0.004, 2, "0.00"), (-1.5, 1, "-1.5"), (2.675, 0, "3"),
        (2.25, 1, "2.3"), (-0.04, 1, "0.0"), (7, 0, "7"), (0.0615, 3, "0.062"),
    ])
    func fixedDecimals(value: Double, decimals: Int, expected: String) {
        #expect(DecimalText.fixed(value, decimals) == expected)
    }

    @Test func notFiniteIsSaidSo() {
        #expect(DecimalText.fixed(.nan, 2) == "nan")
        #expect(DecimalText.fixed(.infinity, 2) == "inf")
        #expect(DecimalText.fixed(-.infinity, 0) == "-inf")
        #expect(DecimalText.fixed(1e300, 2) == String(1e300))
    }

    @Test(arguments: [
        (0.061, "0.061"), (0.06123, "0.0612"), (1, "1"), (0, "0"), (0.00099951, "0.001"), (123.456, "123"),
    ])
    func significantDigits(value: Double, expected: String) {
        #expect(DecimalText.significant(value, 3) == expected)
    }

    @Test func shortAndRates() {
        #expect(DecimalText.short(0.5, 3) == "0.5")
        #expect(DecimalText.short(-0.0001, 2) == "0")
        #expect(DecimalText.rate(Rational(25, 1)) == "25")
        #expect(DecimalText.rate(Rational(25, 2)) == "12.5")
        #expect(DecimalText.rate(Rational(30000, 1001)) == "29.97")
        #expect(DecimalText.zeroPadded(7, 3) == "007")
        #expect(DecimalText.zeroPadded(-7, 3) == "-07")
        #expect(1.23456.rounded(toPlaces: 3) == 1.235)
    }
}

@Suite struct NumericsTests {
    @Test(arguments: [-700.0, -20, -1, -0.0133, 0, 1e-9, 0.5, 1, 10, 300])
    func exponential(x: Double) {
        let expected = Foundation.exp(x)
        #expect(abs(Numerics.exp(x) - expected) <= expected * 1e-13)
    }

    @Test(arguments: [1e-300, 1e-4, 0.005, 0.5, 1, 2, 10, 12345.678, 1e300])
    func logarithm(x: Double) {
        #expect(abs(Numerics.ln(x) - Foundation.log(x)) <= 1e-12 * max(1, abs(Foundation.log(x))))
        #expect(abs(Numerics.log10(x) - Foundation.log10(x)) <= 1e-12 * max(1, abs(Foundation.log10(x))))
    }

    @Test func niceSteps() {
        #expect(Numerics.niceStep(0.7) == 0.5)
        #expect(Numerics.niceStep(1.3) == 1)
        #expect(Numerics.niceStep(2.9) == 2)
        #expect(Numerics.niceStep(42) == 50)
        #expect(Numerics.niceStep(8) == 10)
    }
}
