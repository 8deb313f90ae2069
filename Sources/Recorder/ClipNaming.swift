import FoundationEssentials
import Media

extension TimeZone: LocalTimeZone {
    public func localTime(secondsSince1970: Double) -> LocalTime {
        let date = Date(timeIntervalSince1970: secondsSince1970)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = self
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return LocalTime(
            year: c.year ?? 0, month: c.month ?? 0, day: c.day ?? 0, hour: c.hour ?? 0, minute: c.minute ?? 0,
            second: c.second ?? 0, utcOffset: secondsFromGMT(for: date))
    }
}

/// Clip file names from `storage.file_pattern`: strftime fields `%Y %m %d %H %M %S %%` in the
/// local time of the clip's first frame, and `{camera}` for the camera's name, relative to
/// the storage directory. The same pattern recognises the agent's own files, so retention
/// never touches anything else.
public struct ClipNaming: Sendable {
    public let pattern: String
    public let camera: String
    public let timeZone: any LocalTimeZone

    /// `timeZone` gives the local time (the agent's asks the C library: POSIX's `SystemTimeZone`).
    public init(pattern: String, camera: String, timeZone: any LocalTimeZone) {
        self.pattern = pattern
        self.camera = camera
        self.timeZone = timeZone
    }

    /// The relative path for a clip whose first frame was at `date`. `suffix` (1, 2, ...)
    /// tells apart clips that would get the same name.
    public func relativePath(for date: Date, suffix: Int = 0) -> String {
        let c = timeZone.localTime(secondsSince1970: date.timeIntervalSince1970)
        var out = ""
        var chars = Array(pattern)[...]
        while let ch = chars.popFirst() {
            guard ch == "%", let field = chars.popFirst() else {
                out.append(ch)
                continue
            }
            switch field {
            case "Y": out += DecimalText.zeroPadded(c.year, 4)
            case "m": out += DecimalText.zeroPadded(c.month, 2)
            case "d": out += DecimalText.zeroPadded(c.day, 2)
            case "H": out += DecimalText.zeroPadded(c.hour, 2)
            case "M": out += DecimalText.zeroPadded(c.minute, 2)
            case "S": out += DecimalText.zeroPadded(c.second, 2)
            default: out.append(field)  // "%%" and anything the configuration check let through
            }
        }
        out = out.replacing("{camera}", with: camera)
        if suffix > 0 { out = String(out.dropLast(4)) + "-\(suffix).mov" }
        return out
    }

    /// True when `relativePath` is a name this pattern makes (with any suffix).
    public func matches(_ relativePath: String) -> Bool {
        var path = Array(relativePath)[...]
        var pat = Array(pattern.replacing("{camera}", with: "\u{0}"))[...]
        let cameraChars = Array(camera)
        while let p = pat.popFirst() {
            if p == "\u{0}" {
                guard path.starts(with: cameraChars) else { return false }
                path = path.dropFirst(cameraChars.count)
            } else if p == "%", let field = pat.popFirst() {
                let digits = field == "Y" ? 4 : (field == "%" ? 0 : 2)
                if digits == 0 {
                    guard path.popFirst() == "%" else { return false }
                } else {
                    guard path.count >= digits, path.prefix(digits).allSatisfy(\.isASCIIDigit) else { return false }
                    path = path.dropFirst(digits)
                }
            } else if p == "." && pat.elementsEqual("mov") {
                // An optional "-N" before the extension.
                if path.first == "-" {
                    path = path.dropFirst()
                    let n = path.prefix { $0.isASCIIDigit }
                    guard !n.isEmpty else { return false }
                    path = path.dropFirst(n.count)
                }
                guard path.popFirst() == "." else { return false }
            } else {
                guard path.popFirst() == p else { return false }
            }
        }
        return path.isEmpty
    }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

extension ClipNaming {
    /// A clip's picture (`snapshot.*`): beside it, its name with `.jpg` for `.mov` (for a
    /// damaged clip, its name before it was moved aside).
    public static func snapshotPath(of clip: String) -> String {
        let clip = undamagedPath(of: clip)
        return (clip.hasSuffix(".mov") ? String(clip.dropLast(4)) : clip) + ".jpg"
    }

    /// What is appended to the name of a clip start-up repair could not read, when it is moved
    /// aside: its bytes are kept, out of players' way.
    public static let damagedSuffix = ".damaged"

    /// The name a clip gets when it is moved aside as damaged (`NAME.mov.damaged`).
    public static func damagedPath(of clip: String) -> String { clip + damagedSuffix }

    /// Whether `path` is a clip moved aside as damaged.
    public static func isDamaged(_ path: String) -> Bool { path.hasSuffix(damagedSuffix) }

    /// The clip's name before it was moved aside (`path` itself for any other file).
    public static func undamagedPath(of path: String) -> String {
        isDamaged(path) ? String(path.dropLast(damagedSuffix.count)) : path
    }

    /// The live picture in the storage directory (`snapshot.live_interval`).
    public static let latestPicture = "latest.jpg"
}
