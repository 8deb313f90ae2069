internal import Glibc

/// `sd_notify`: tells systemd the service is ready, alive (watchdog) or stopping, through the
/// datagram socket named in `NOTIFY_SOCKET`. Does nothing when not started by systemd.
public final class SystemdNotifier: Sendable {
    private let socketPath: String?
    /// Half the watchdog period systemd asked for (`WATCHDOG_USEC`), or nil.
    public let watchdogInterval: Double?

    /// `environment`: the process's (`NOTIFY_SOCKET`, `WATCHDOG_USEC`, `WATCHDOG_PID`).
    public init(environment: [String: String]) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        if let usec = environment["WATCHDOG_USEC"].flatMap(Double.init), usec > 0,
            environment["WATCHDOG_PID"].map({ Int32($0) == getpid() }) ?? true
        {
            watchdogInterval = usec / 2_000_000
        } else {
            watchdogInterval = nil
        }
    }

    public var isActive: Bool { socketPath != nil }

    public func ready(status: String) { send("READY=1\nSTATUS=\(status)") }
    public func watchdog() { send("WATCHDOG=1") }
    public func stopping() { send("STOPPING=1") }
    public func reloading() { send("RELOADING=1") }
    public func status(_ text: String) { send("STATUS=\(text)") }

    private func send(_ message: String) {
        guard let socketPath else { return }
        try? LocalSocket.sendDatagram(message, to: socketPath)
    }
}

extension LocalSocket {
    /// Sends `message` as one datagram to the Unix datagram socket at `path`; a leading "@"
    /// names an abstract socket (it stands for a zero byte), as `NOTIFY_SOCKET` may.
    public static func sendDatagram(_ message: String, to path: String) throws(SystemError) {
        let fd = FileDescriptor(
            adopting: try retryOnInterrupt {
                socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            })  // closed when `sendDatagram` returns
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { throw SystemError(ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let text = Array(message.utf8)
        let failure: SystemError? = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                text.withUnsafeBytes { raw -> SystemError? in
                    do throws(SystemError) {
                        try retryOnInterrupt {
                            sendto(fd.rawValue, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL), address, length)
                        }
                        return nil
                    } catch { return error }
                }
            }
        }
        if let failure { throw failure }
    }
}
