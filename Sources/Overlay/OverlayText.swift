import FoundationEssentials
internal import Glibc

/// The text of the overlay at a given time, from a pattern: `{camera}` stands for the camera's
/// name, and strftime fields (`%Y-%m-%d %H:%M:%S`, `%a`, `%Z`, …) for the local time, as the C
/// library has it (`localtime_r`, which follows `TZ` and /etc/localtime, in the C locale).
///
/// The camera's name is taken as it is: a `%` in it stays a `%`. The result has at most
/// `maximumLength` characters (Unicode scalars, one glyph each); a pattern is cut to
/// `maximumPatternLength` scalars, and one whose expansion would take more than 4 KiB (a field
/// width such as `%5000Y`) gives an empty text.
public struct OverlayText: Sendable {
    /// Most characters of text `text(at:)` returns: more than fit across a 1920-pixel picture
    /// in an 8-pixel font.
    public static let maximumLength = 256
    /// Most characters of the pattern (with `{camera}` expanded) that are kept.
    public static let maximumPatternLength = 512

    public let pattern: String
    public let camera: String
    /// The strftime format: the pattern with `{camera}` expanded (its `%` doubled), without NUL.
    private let format: [CChar]

    public init(pattern: String, camera: String) {
        self.pattern = pattern
        self.camera = camera
        let escaped = camera.replacing("%", with: "%%")
        var scalars = Array(pattern.replacing("{camera}", with: escaped).unicodeScalars.filter { $0 != "\0" })
        if scalars.count > OverlayText.maximumPatternLength {
            scalars.removeLast(scalars.count - OverlayText.maximumPatternLength)
            // Not a lone `%` at the end that would take the cut for a field.
            let percents = scalars.reversed().prefix { $0 == "%" }.count
            if percents % 2 == 1 { scalars.removeLast() }
        }
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        self.format = String(view).utf8CString.map { $0 }
    }

    /// The text for `date` in at most `characters` characters, keeping the time: when the
    /// whole text is longer, the camera's name is cut short to make room, then left out (with
    /// the spaces around it), and when even that is too long only the time (`%H:%M:%S`) is
    /// kept, cut at the end if it must be. `shortened` says whether it had to be.
    public func text(at date: Date, fitting characters: Int) -> (text: String, shortened: Bool) {
        let whole = text(at: date)
        let overflow = whole.unicodeScalars.count - characters
        guard overflow > 0 else { return (whole, false) }
        let names = pattern.components(separatedBy: "{camera}").count - 1
        if names > 0 {
            let kept = camera.count - (overflow + names - 1) / names
            if kept >= 1 {
                let shorter = OverlayText(pattern: pattern, camera: String(camera.prefix(kept))).text(at: date)
                if shorter.unicodeScalars.count <= characters { return (shorter, true) }
            }
            let nameless = pattern.replacing("{camera}", with: "").split(separator: " ").joined(separator: " ")
            let without = OverlayText(pattern: nameless, camera: "").text(at: date)
            if !without.isEmpty, without.unicodeScalars.count <= characters { return (without, true) }
        }
        let time = OverlayText(pattern: "%H:%M:%S", camera: "").text(at: date)
        var view = String.UnicodeScalarView()
        view.append(contentsOf: time.unicodeScalars.prefix(max(characters, 0)))
        return (String(view), true)
    }

    /// The text for the local time of the second `date` falls in.
    public func text(at date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var fields = tm()
        guard localtime_r(&seconds, &fields) != nil else { return "" }
        let capacity = 4096
        var output = [CChar](repeating: 0, count: capacity)
        // The arrays are passed as pointers: glibc 2.41 declares them non-null, older ones do not.
        let written = strftime(&output, capacity, format, &fields)
        let bytes = output[0..<written].map { UInt8(bitPattern: $0) }
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.unicodeScalars.count > OverlayText.maximumLength else { return text }
        var view = String.UnicodeScalarView()
        view.append(contentsOf: text.unicodeScalars.prefix(OverlayText.maximumLength))
        return String(view)
    }
}
