/// A four-character code: a QuickTime box type (`moov`, `avc1`) or a V4L2 pixel format
/// (`YUYV`, `NV12`). Both name the same four ASCII characters; they differ only in how the
/// characters are packed into a 32-bit number — QuickTime stores them big-endian in the file
/// (`bigEndianValue`), V4L2 packs them little-endian (`littleEndianValue`, `v4l2_fourcc`).
public struct FourCC: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The characters packed first character first, in the most significant byte: how a
    /// QuickTime file stores a box type.
    public let bigEndianValue: UInt32

    /// From a number that holds the first character in its most significant byte (a box type as read from a file).
    public init(bigEndian value: UInt32) { bigEndianValue = value }

    /// From a number that holds the first character in its least significant byte (a V4L2 pixel format).
    public init(littleEndian value: UInt32) { bigEndianValue = value.byteSwapped }

    /// From its characters, as in `FourCC("YUYV")`; shorter codes are padded with spaces,
    /// longer ones cut to four bytes.
    public init(_ characters: String) {
        let utf8 =
            Array(characters.utf8.prefix(4))
            + Array(repeating: UInt8(ascii: " "), count: max(0, 4 - characters.utf8.count))
        bigEndianValue = utf8.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// `"moov"`: the same as `FourCC("moov")`.
    public init(stringLiteral value: String) { self.init(value) }

    /// The characters packed first character first, in the least significant byte: a V4L2 pixel format code.
    public var littleEndianValue: UInt32 { bigEndianValue.byteSwapped }

    /// The four bytes, first character first (what a box header holds).
    public var bytes: [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: bigEndianValue >> (24 - 8 * UInt32($0))) } }

    /// True when all four bytes are printable ASCII, as every real box type is.
    public var isPrintable: Bool { bytes.allSatisfy { (0x20...0x7E).contains($0) } }

    /// The characters, with unprintable bytes as `?` and trailing spaces removed. V4L2 marks
    /// the big-endian variant of a pixel format with the top bit of its last character
    /// (`Y16 ` → `Y16-BE`); such a code says so.
    public var description: String {
        if bigEndianValue & 0x80 != 0 {
            return FourCC(bigEndian: bigEndianValue & ~0x80).description + "-BE"
        }
        var text = String(bytes.map { (0x20...0x7E).contains($0) ? Character(Unicode.Scalar($0)) : "?" })
        while text.hasSuffix(" ") { text.removeLast() }
        return text
    }
}
