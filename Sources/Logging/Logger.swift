import Media
import Synchronization

/// How important a message is, with the syslog priority journald files it under.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable, CustomStringConvertible {
    /// Needs a person.
    case error
    /// Degraded, recovering by itself.
    case warning
    /// Events, clips, deletions, start and stop.
    case info
    /// Details for finding a problem.
    case debug
    /// Every frame.
    case trace

    public init?(name: String) {
        guard let level = LogLevel.allCases.first(where: { $0.description == name }) else { return nil }
        self = level
    }

    public var description: String {
        switch self {
        case .error: "error"
        case .warning: "warning"
        case .info: "info"
        case .debug: "debug"
        case .trace: "trace"
        }
    }

    /// The syslog priority (sd-daemon.h): err 3, warning 4, info 6, debug 7.
    public var syslogPriority: Int {
        switch self {
        case .error: 3
        case .warning: 4
        case .info: 6
        case .debug, .trace: 7
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// A value in a log line's metadata.
public enum LogValue: Sendable, CustomStringConvertible, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    case string(String)
    case integer(Int64)
    case number(Double, decimals: Int)
    case bool(Bool)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .integer(Int64(value)) }

    public static func int<I: BinaryInteger>(_ v: I) -> LogValue { .integer(Int64(clamping: v)) }
    public static func seconds(_ v: Double) -> LogValue { .number(v, decimals: 3) }
    public static func fixed(_ v: Double, _ decimals: Int) -> LogValue { .number(v, decimals: decimals) }

    public var description: String {
        switch self {
        case .string(let s): s
        case .integer(let v): String(v)
        case .number(let v, let decimals): DecimalText.fixed(v, decimals)
        case .bool(let v): v ? "true" : "false"
        }
    }
}

/// Where formatted lines go.
public protocol LogSink: Sendable {
    func write(_ line: String, level: LogLevel)
}

/// Structured logging in the shape of swift-log: a constant message, the data in metadata,
/// rendered as logfmt (`level=info msg="clip saved" file=... duration_s=12.000`). Messages and
/// metadata are built only when the level is enabled, so a per-frame trace costs nothing
/// when off. Libraries take a `Logger`; only the executable decides where lines go.
public struct Logger: Sendable {
    /// Shared by every copy, so a reload changes the level everywhere at once.
    private let threshold: LevelBox
    private let sink: any LogSink
    /// Metadata added to every line of this logger (e.g. `component=writer`).
    public var metadata: [(String, LogValue)]

    public init(level: LogLevel, sink: any LogSink, metadata: [(String, LogValue)] = []) {
        self.threshold = LevelBox(level)
        self.sink = sink
        self.metadata = metadata
    }

    public var level: LogLevel {
        get { threshold.value }
        nonmutating set { threshold.value = newValue }
    }

    /// A logger that writes to the same place with `extra` metadata on every line.
    public func with(_ extra: (String, LogValue)...) -> Logger {
        var copy = self
        copy.metadata += extra
        return copy
    }

    public func isEnabled(_ level: LogLevel) -> Bool { level <= threshold.value }

    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> String, _ data: @autoclosure () -> [(String, LogValue)] = []
    ) {
        guard isEnabled(level) else { return }
        sink.write(Logger.format(level: level, message: message(), metadata: data() + metadata), level: level)
    }

    public func error(_ message: @autoclosure () -> String, _ data: @autoclosure () -> [(String, LogValue)] = []) {
        log(.error, message(), data())
    }
    public func warning(_ message: @autoclosure () -> String, _ data: @autoclosure () -> [(String, LogValue)] = []) {
        log(.warning, message(), data())
    }
    public func info(_ message: @autoclosure () -> String, _ data: @autoclosure () -> [(String, LogValue)] = []) {
        log(.info, message(), data())
    }
    public func debug(_ message: @autoclosure () -> String, _ data: @autoclosure () -> [(String, LogValue)] = []) {
        log(.debug, message(), data())
    }
    public func trace(_ message: @autoclosure () -> String, _ data: @autoclosure () -> [(String, LogValue)] = []) {
        log(.trace, message(), data())
    }

    /// One logfmt line (without timestamp or priority prefix; the sink adds those).
    public static func format(level: LogLevel, message: String, metadata: [(String, LogValue)]) -> String {
        var line = "level=\(level) msg=\(quote(message))"
        for (key, value) in metadata { line += " \(key)=\(quote(value.description))" }
        return line
    }

    /// A logfmt value: bare when it has no space, quote, `=` or control character; quoted
    /// and escaped otherwise.
    static func quote(_ s: String) -> String {
        let needsQuotes =
            s.isEmpty
            || s.unicodeScalars.contains {
                $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\\" || $0.value < 0x20 || $0.value == 0x7F
            }
        guard needsQuotes else { return s }
        let escaped = s.replacingScalars { scalar in
            escapes[scalar]
                ?? (scalar.value < 0x20 || scalar.value == 0x7F ? "\\u{" + String(scalar.value, radix: 16) + "}" : nil)
        }
        return "\"" + escaped + "\""
    }

    private static let escapes: [Unicode.Scalar: String] = [
        "\"": "\\\"", "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
    ]
}

/// The level, shared and changeable at runtime.
final class LevelBox: Sendable {
    private let storage: Mutex<LogLevel>
    init(_ level: LogLevel) { storage = Mutex(level) }
    var value: LogLevel {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}

/// Collects lines in memory (tests).
public final class MemoryLogSink: LogSink {
    private let lines = Mutex<[(level: LogLevel, line: String)]>([])
    public init() {}
    public func write(_ line: String, level: LogLevel) { lines.withLock { $0.append((level, line)) } }
    public var written: [String] { lines.withLock { $0.map(\.line) } }
    /// The lines written at `level`, by the level the logger gave them (not read from the text).
    public func written(at level: LogLevel) -> [String] {
        lines.withLock { $0.filter { $0.level == level }.map(\.line) }
    }
}
