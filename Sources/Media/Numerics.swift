/// Mathematics the standard library lacks, for the pure modules that may import neither
/// Foundation nor the C math library: the detector's learning rates (`exp`), the plot's axes
/// (`ln`, `log10`, `niceStep`), decimal text (`pow10`, `decimalExponent`).
public enum Numerics {
    public static let ln2 = 0.693_147_180_559_945_309_417_232_121_458
    public static let ln10 = 2.302_585_092_994_045_684_017_991_454_684

    /// e^x, accurate to a few units in the last place.
    public static func exp(_ x: Double) -> Double {
        if x.isNaN { return .nan }
        if x > 709 { return .infinity }
        if x < -745 { return 0 }
        let n = (x / ln2).rounded()
        let f = x - n * ln2  // |f| ≤ ln2 / 2
        var term = 1.0
        var sum = 1.0
        for k in 1...18 {
            term *= f / Double(k)
            sum += term
        }
        // Scale by 2^n in two steps so that neither factor overflows or underflows early.
        let half = Int(n) / 2
        return sum * Double(sign: .plus, exponent: half, significand: 1)
            * Double(sign: .plus, exponent: Int(n) - half, significand: 1)
    }

    /// The natural logarithm of a positive finite x.
    public static func ln(_ x: Double) -> Double {
        if x.isNaN || x < 0 { return .nan }
        if x == 0 { return -.infinity }
        if x.isInfinite { return .infinity }
        let e = Double(x.exponent)
        let m = x.significand  // in [1, 2)
        // ln m = 2 atanh(z), z = (m − 1)/(m + 1) in [0, 1/3).
        let z = (m - 1) / (m + 1)
        let z2 = z * z
        var power = z
        var sum = 0.0
        var k = 1.0
        for _ in 0..<24 {
            sum += power / k
            power *= z2
            k += 2
        }
        return 2 * sum + e * ln2
    }

    public static func log10(_ x: Double) -> Double { ln(x) / ln10 }

    /// 10^n for a small integer n.
    public static func pow10(_ n: Int) -> Double {
        var r = 1.0
        if n >= 0 { for _ in 0..<n { r *= 10 } } else { for _ in 0..<(-n) { r /= 10 } }
        return r
    }

    /// The decimal exponent of |x|: floor(log10(|x|)), for a non-zero finite x.
    public static func decimalExponent(_ x: Double) -> Int {
        var a = abs(x)
        var e = 0
        while a >= 10 {
            a /= 10
            e += 1
        }
        while a < 1 {
            a *= 10
            e -= 1
        }
        return e
    }

    /// A value from the 1–2–5 sequence near `x` (x > 0), for axis tick steps.
    public static func niceStep(_ x: Double) -> Double {
        guard x > 0, x.isFinite else { return 1 }
        let e = decimalExponent(x)
        let unit = pow10(e)
        let f = x / unit
        let nice: Double = f < 1.5 ? 1 : (f < 3.5 ? 2 : (f < 7.5 ? 5 : 10))
        return nice * unit
    }
}
