internal import Glibc

/// This machine's name (`gethostname`), as `hostname` prints it; "" when the system gives none.
public enum HostName {
    public static var current: String {
        var bytes = [CChar](repeating: 0, count: 256)
        guard gethostname(&bytes, bytes.count - 1) == 0 else { return "" }
        return String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The C library's words for a failed name lookup (`getaddrinfo`'s `EAI_` code, through
    /// `gai_strerror`): "Name or service not known".
    public static func lookupErrorText(_ code: Int32) -> String { String(cString: gai_strerror(code)) }
}
