/// Numbers as text for people and for the files Vigil writes (log lines, JSON, CSV, SVG, the
/// configuration's syntax): plain decimal notation, `.` as the separator, no locale, no
/// exponent. The one place numbers are rounded to a number of decimals for display.
public enum DecimalText {
    /// `value` with exactly `decimals` digits after the point ("12.40"), rounded half away
    /// from zero; "nan", "inf" or "-inf" for a value that is not finite.
    public static func fixed(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return value.isNaN ? "nan" : (value < 0 ? "-inf" : "inf") }
        let decimals = max(0, min(decimals, 12))
        let scale = Numerics.pow10(decimals)
        let scaled = (abs(value) * scale).rounded()
        // Past 2^53 the digits would be invented: the shortest exact form is all there is.
        guard scaled < 9.0e15 else { return String(value) }
        let digits = Int64(scaled)
        let whole = digits / Int64(scale)
        let negative = value < 0 && digits != 0
        var text = (negative ? "-" : "") + String(whole)
        if decimals > 0 {
            let fraction = String(digits % Int64(scale))
            text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
        }
        return text
    }

    /// `value` rounded to `digits` significant digits, trailing zeros removed ("0.061", "0.0612", "1").
    public static func significant(_ value: Double, _ digits: Int) -> String {
        guard value.isFinite, value != 0 else { return value.isFinite ? "0" : fixed(value, 0) }
        let exponent = Numerics.decimalExponent(value)
        return short(value, max(0, digits - 1 - exponent))
    }

    /// `value` with at most `decimals` decimals, trailing zeros removed ("0.5", "2", "0.005").
    public static func short(_ value: Double, _ decimals: Int) -> String {
        let text = fixed(value, decimals)
        guard value.isFinite, text.contains(".") else { return text }
        var trimmed = Substring(text)
        while trimmed.last == "0" { trimmed = trimmed.dropLast() }
        if trimmed.last == "." { trimmed = trimmed.dropLast() }
        return trimmed == "-0" ? "0" : String(trimmed)
    }

    /// A frame rate for people: `25`, `12.5`, `29.97`.
    public static func rate(_ rate: Rational) -> String {
        rate.denominator == 1 ? String(rate.numerator) : short(rate.doubleValue, 2)
    }

    /// `value` in decimal with at least `digits` digits, zeros in front (printf's `%0Nd`).
    public static func zeroPadded(_ value: Int, _ digits: Int) -> String {
        let text = String(value.magnitude)
        let padding = String(repeating: "0", count: max(0, digits - (value < 0 ? 1 : 0) - text.count))
        return (value < 0 ? "-" : "") + padding + text
    }
}

extension Double {
    /// The value rounded to `decimals` places, as a number (for JSON fields that carry
    /// milliseconds or four-digit scores, not seventeen digits of binary noise).
    public func rounded(toPlaces decimals: Int) -> Double {
        let scale = Numerics.pow10(max(0, decimals))
        return (self * scale).rounded() / scale
    }
}
