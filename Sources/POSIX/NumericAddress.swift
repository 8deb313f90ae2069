internal import Glibc

/// An IP address written in numbers (`192.168.1.20`, `::1`), as `inet_pton` reads it and
/// `inet_ntop` writes it: 4 bytes for IPv4, 16 for IPv6, in network order.
public enum NumericAddress {
    /// The bytes of the address `text` writes; nil when it is not an IPv4 address in dotted
    /// quads or an IPv6 address (a name, or a number in another form).
    public static func parse(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// `bytes` (4 or 16, network order) as `inet_ntop` writes them; "" for another count.
    public static func text(_ bytes: [UInt8]) -> String {
        let family: Int32
        switch bytes.count {
        case 4: family = AF_INET
        case 16: family = AF_INET6
        default: return ""
        }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let written = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard written != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
