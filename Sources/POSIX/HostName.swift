internal import Glibc

/// This machine's name (`gethostname`), as `hostname` prints it; "" when the system gives none.
public enum HostName {
    public static var current: String {
        var bytes = [CChar](repeating: 0, count: 256)
        guard gethostname(&bytes, bytes.count - 1) == 0 else { return "" }
        return String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// What names this machine for good: systemd's machine id (`/etc/machine-id`, the same at
    /// every boot and under every host name), or its host name when it has none.
    public static var machineID: String {
        if let file = try? FileDescriptor(opening: "/etc/machine-id", .readOnly, options: [.nonBlocking]),
            let bytes = try? file.read(count: 64)
        {
            let id = String(decoding: bytes.prefix { $0 != 0x0A }, as: UTF8.self)
            if !id.isEmpty { return id }
        }
        return current
    }

    /// The machine's kind (`uname`'s machine: `x86_64`, `aarch64`); "" when the system says none.
    public static var hardware: String {
        var names = utsname()
        guard uname(&names) == 0 else { return "" }
        return withUnsafeBytes(of: &names.machine) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// The C library's words for a failed name lookup (`getaddrinfo`'s `EAI_` code, through
    /// `gai_strerror`): "Name or service not known".
    public static func lookupErrorText(_ code: Int32) -> String { String(cString: gai_strerror(code)) }
}
