import FoundationEssentials
import Logging
import Media
import POSIX

/// Log lines to stderr: under systemd (`JOURNAL_STREAM` set) with a `<priority>` prefix that
/// journald files them by, and without a timestamp (the journal has one); elsewhere with
/// a `ts=` timestamp first.
final class StderrLogSink: LogSink {
    let journal: Bool

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        journal = environment["JOURNAL_STREAM"] != nil
    }

    func write(_ line: String, level: LogLevel) {
        let text: String
        if journal {
            text = "<\(level.syslogPriority)>\(line)\n"
        } else {
            text = "ts=\(StderrLogSink.timestamp()) \(line)\n"
        }
        // One write per line: lines from different threads never interleave.
        _ = try? FileDescriptor(unowned: 2).writeAll(text)
    }

    static func timestamp() -> String {
        let now = WallClock.now()
        let pad = DecimalText.zeroPadded
        let t = CalendarTime.utc(secondsSince1970: Double(now.seconds))
        return "\(pad(t.year, 4))-\(pad(t.month, 2))-\(pad(t.day, 2))T"
            + "\(pad(t.hour, 2)):\(pad(t.minute, 2)):\(pad(t.second, 2)).\(pad(now.nanoseconds / 1_000_000, 3))Z"
    }
}
