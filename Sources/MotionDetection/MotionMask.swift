/// Which parts of the picture the detector watches, from a greyscale PGM image of any size:
/// black is ignored, white (at least half the image's maximum value) is watched.
///
/// The module does no file I/O: read the file's bytes and pass them to `init(pgm:source:)`.
public struct MotionMask: Sendable, Equatable {
    public let width: Int
    public let height: Int
    /// One flag per pixel, row by row: true where the picture is watched.
    public let watched: [Bool]

    /// A mask from flags (`width × height` of them, row by row).
    public init(width: Int, height: Int, watched: [Bool]) throws(MaskError) {
        guard width > 0, height > 0, watched.count == width * height else {
            throw MaskError(
                source: "mask", offset: nil,
                problem: "\(watched.count) flags do not make a \(width)×\(height) image",
                fix: "pass width × height flags")
        }
        guard watched.contains(true) else {
            throw MaskError(
                source: "mask", offset: nil, problem: "no pixel is watched",
                fix: "paint the parts of the picture to watch white")
        }
        self.width = width
        self.height = height
        self.watched = watched
    }

    /// Parses a binary (P5) or ASCII (P2) PGM image. `source` names it in errors (its path).
    public init(pgm bytes: [UInt8], source: String) throws(MaskError) {
        var parser = PGMParser(bytes: bytes, source: source)
        let image = try parser.parse()
        guard image.watched.contains(true) else {
            throw MaskError(
                source: source, offset: nil,
                problem: "the mask is black everywhere, so nothing would ever trigger",
                fix: "paint the parts of the picture to watch white, or remove motion.mask")
        }
        self.width = image.width
        self.height = image.height
        self.watched = image.watched
    }

    /// The fraction of the image that is watched.
    public var watchedFraction: Double {
        Double(watched.lazy.filter { $0 }.count) / Double(watched.count)
    }

    /// The mask scaled to `width × height` (the detector's reduced size) by area: a target
    /// pixel is watched (1) when at least half the mask pixels it covers are, otherwise 0.
    /// If that leaves nothing watched (a tiny white area), any watched mask pixel counts.
    public func scaled(toWidth tw: Int, height th: Int) -> [UInt8] {
        guard tw > 0, th > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: tw * th)
        var any = [UInt8](repeating: 0, count: tw * th)
        for ty in 0..<th {
            let y0 = ty * height / th
            let y1 = max(y0 + 1, (ty + 1) * height / th)
            for tx in 0..<tw {
                let x0 = tx * width / tw
                let x1 = max(x0 + 1, (tx + 1) * width / tw)
                var on = 0
                for y in y0..<y1 {
                    for x in x0..<x1 where watched[y * width + x] { on += 1 }
                }
                let total = (y1 - y0) * (x1 - x0)
                out[ty * tw + tx] = 2 * on >= total ? 1 : 0
                any[ty * tw + tx] = on > 0 ? 1 : 0
            }
        }
        return out.contains(1) ? out : any
    }
}

/// A mask file that cannot be used: which file, where, what is wrong, and what to do.
public struct MaskError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file (its path) or "mask".
    public var source: String
    /// Byte offset in the file where the problem was found, if it is about one place.
    public var offset: Int?
    public var problem: String
    public var fix: String
    public init(source: String, offset: Int?, problem: String, fix: String) {
        self.source = source
        self.offset = offset
        self.problem = problem
        self.fix = fix
    }
    public var description: String {
        let at = offset.map { " at byte \($0)" } ?? ""
        return "motion mask \(source)\(at): \(problem) — \(fix)"
    }
}

/// Netpbm PGM: "P5" or "P2", whitespace, width, height, maxval (ASCII decimal, `#` comments
/// to the end of a line between them), then for P5 a single whitespace byte and the samples
/// (1 byte each when maxval < 256, else 2 bytes big-endian), for P2 decimal samples.
struct PGMParser {
    let bytes: [UInt8]
    let source: String
    var position = 0

    static let maximumPixels = 1 << 26
    static let resave = "save the mask as a greyscale PGM (P5 or P2), e.g. `convert mask.png -colorspace gray mask.pgm`"

    init(bytes: [UInt8], source: String) {
        self.bytes = bytes
        self.source = source
    }

    struct Image {
        var width: Int
        var height: Int
        var watched: [Bool]
    }

    func error(_ problem: String, at offset: Int? = nil, fix: String = PGMParser.resave) -> MaskError {
        MaskError(source: source, offset: offset, problem: problem, fix: fix)
    }

    mutating func parse() throws(MaskError) -> Image {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "P"),
            bytes[1] == UInt8(ascii: "5") || bytes[1] == UInt8(ascii: "2")
        else {
            let what =
                bytes.count < 2
                ? "the file is too short to be a PGM image"
                : (bytes[0] == UInt8(ascii: "P") && (bytes[1] >= UInt8(ascii: "1") && bytes[1] <= UInt8(ascii: "7"))
                    ? "it is a P\(Character(Unicode.Scalar(bytes[1]))) Netpbm file, not a greyscale PGM (P5 or P2)"
                    : "it is not a PGM image (it does not start with P5 or P2)")
            throw error(what, at: 0)
        }
        let binary = bytes[1] == UInt8(ascii: "5")
        position = 2
        guard position < bytes.count, isSpace(bytes[position]) || bytes[position] == UInt8(ascii: "#") else {
            throw error(
                position < bytes.count
                    ? "no whitespace after the magic number" : "the file ends after the magic number", at: position)
        }
        let width = try headerNumber("width")
        let height = try headerNumber("height")
        let maxValue = try headerNumber("maximum value")
        guard width > 0, height > 0 else { throw error("the image is \(width)×\(height); it needs at least one pixel") }
        guard width <= Self.maximumPixels / height else {
            throw error(
                "the image is \(width)×\(height), larger than \(Self.maximumPixels) pixels",
                fix: "scale the mask down: any size works, it is scaled to the detection size")
        }
        guard (1...65535).contains(maxValue) else {
            throw error("the maximum value is \(maxValue); PGM allows 1 to 65535")
        }
        let count = width * height
        let half = (maxValue + 1) / 2  // "at least half of maxval" is watched
        var watched = [Bool](repeating: false, count: count)
        if binary {
            // Exactly one whitespace byte separates the header from the samples.
            guard position < bytes.count, isSpace(bytes[position]) else {
                throw error(
                    position < bytes.count
                        ? "no whitespace after the maximum value" : "the file ends before the pixel data", at: position)
            }
            position += 1
            let bytesPerSample = maxValue < 256 ? 1 : 2
            let needed = count * bytesPerSample
            let available = bytes.count - position
            guard available >= needed else {
                throw error(
                    "the file is truncated: \(width)×\(height) pixels need \(needed) bytes of pixel data, found \(available)",
                    at: bytes.count, fix: "save the mask again; the file was cut short")
            }
            for i in 0..<count {
                let value: Int
                if bytesPerSample == 1 {
                    value = Int(bytes[position + i])
                } else {
                    value = Int(bytes[position + 2 * i]) << 8 | Int(bytes[position + 2 * i + 1])
                }
                guard value <= maxValue else {
                    throw error(
                        "pixel \(i) is \(value), above the maximum value \(maxValue)", at: position + i * bytesPerSample
                    )
                }
                watched[i] = value >= half
            }
        } else {
            for i in 0..<count {
                skipSpaceAndComments()
                guard position < bytes.count else {
                    throw error(
                        "the file is truncated: it ends after \(i) of \(count) pixels", at: position,
                        fix: "save the mask again; the file was cut short")
                }
                let start = position
                guard let value = number(limit: maxValue) else {
                    throw error("pixel \(i) is not a number from 0 to \(maxValue)", at: start)
                }
                watched[i] = value >= half
            }
        }
        return Image(width: width, height: height, watched: watched)
    }

    private func isSpace(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0B || b == 0x0C || b == 0x0D
    }

    private mutating func skipSpaceAndComments() {
        while position < bytes.count {
            if isSpace(bytes[position]) {
                position += 1
            } else if bytes[position] == UInt8(ascii: "#") {
                while position < bytes.count, bytes[position] != 0x0A, bytes[position] != 0x0D { position += 1 }
            } else {
                return
            }
        }
    }

    private mutating func headerNumber(_ name: String) throws(MaskError) -> Int {
        skipSpaceAndComments()
        guard position < bytes.count else { throw error("the file ends before the \(name)", at: position) }
        let start = position
        guard let value = number(limit: 1 << 30) else { throw error("the \(name) is not a number", at: start) }
        return value
    }

    /// A run of decimal digits no larger than `limit`, followed by whitespace, `#` or the end
    /// of the file; nil (position unspecified) otherwise.
    private mutating func number(limit: Int) -> Int? {
        var value = 0
        var digits = 0
        while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
            value = value * 10 + Int(bytes[position] - UInt8(ascii: "0"))
            if value > limit { return nil }
            digits += 1
            position += 1
        }
        guard digits > 0 else { return nil }
        if position < bytes.count, !isSpace(bytes[position]), bytes[position] != UInt8(ascii: "#") { return nil }
        return value
    }
}
