import FoundationEssentials
import Glibc
import Logging
import Media
internal import POSIX
import Storage

/// Log lines to stderr: under systemd (`JOURNAL_STREAM` set) with a `<priority>` prefix that
/// journald files them by, and without a timestamp (the journal has one); elsewhere with
/// a `ts=` timestamp first.
public final class StderrLogSink: LogSink {
    let journal: Bool

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        journal = environment["JOURNAL_STREAM"] != nil
    }

    public func write(_ line: String, level: LogLevel) {
        let text: String
        if journal {
            text = "<\(level.syslogPriority)>\(line)\n"
        } else {
            text = "ts=\(StderrLogSink.timestamp()) \(line)\n"
        }
        // One write per line: lines from different threads never interleave.
        writeAll(text, to: 2)
    }

    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var t = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &t)
        let pad = DecimalText.zeroPadded
        return "\(pad(Int(t.tm_year) + 1900, 4))-\(pad(Int(t.tm_mon) + 1, 2))-\(pad(Int(t.tm_mday), 2))T"
            + "\(pad(Int(t.tm_hour), 2)):\(pad(Int(t.tm_min), 2)):\(pad(Int(t.tm_sec), 2)).\(pad(now.tv_nsec / 1_000_000, 3))Z"
    }
}

/// `sd_notify`: tells systemd the service is ready, alive (watchdog) or stopping, through the
/// datagram socket named in `NOTIFY_SOCKET`. Does nothing when not started by systemd.
public final class SystemdNotifier: Sendable {
    private let socketPath: String?
    /// Half the watchdog period systemd asked for (`WATCHDOG_USEC`), or nil.
    public let watchdogInterval: Double?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
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
        guard
            let opened =
                (try? retryOnInterrupt { socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) })
        else { return }
        let fd = FileDescriptor(adopting: opened)  // closed when `send` returns
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        // An abstract socket is named with a leading "@", which stands for a zero byte.
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        _ = message.withCString { text in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    try? retryOnInterrupt {
                        sendto(fd.rawValue, text, strlen(text), Int32(MSG_NOSIGNAL), address, length)
                    }
                }
            }
        }
    }
}
