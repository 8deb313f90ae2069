/// A relative path as it goes into a URL: each component percent-encoded but for the
/// unreserved characters (RFC 3986), the slashes between them kept.
public enum URLPath {
    public static func encoded(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { part in
            var out = ""
            for byte in part.utf8 {
                if isUnreserved(byte) {
                    out.append(Character(Unicode.Scalar(byte)))
                } else {
                    out += "%" + [byte].lowercaseHex.uppercased()
                }
            }
            return out
        }.joined(separator: "/")
    }

    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }
}
