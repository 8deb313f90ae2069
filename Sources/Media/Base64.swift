/// Base64 (RFC 4648, with padding): WS-Security's nonces and digests (ONVIF), SDP's parameter
/// sets (RTSP).
public enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = bytes[index]
            let b1 = index + 1 < bytes.count ? bytes[index + 1] : 0
            let b2 = index + 2 < bytes.count ? bytes[index + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(index + 1 < bytes.count ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(index + 2 < bytes.count ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of `text` (whitespace skipped, padding optional); nil when it is not Base64,
    /// or longer than 4 KB.
    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        var padding = 0
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(byte - UInt8(ascii: "a") + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(byte - UInt8(ascii: "0") + 52)
            case UInt8(ascii: "+"): values.append(62)
            case UInt8(ascii: "/"): values.append(63)
            case UInt8(ascii: "="): padding += 1
            case 0x20, 0x09, 0x0A, 0x0D: continue
            default: return nil
            }
            if byte != UInt8(ascii: "="), padding > 0 { return nil }
            if values.count > 4096 || padding > 2 { return nil }
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var index = 0
        while index < values.count {
            let v = values[index..<min(index + 4, values.count)].map { UInt32($0) } + [0, 0, 0]
            let word = v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]
            let count = min(values.count - index, 4) - 1
            for shift in [16, 8, 0].prefix(count) { out.append(UInt8(truncatingIfNeeded: word >> UInt32(shift))) }
            index += 4
        }
        return out
    }
}
