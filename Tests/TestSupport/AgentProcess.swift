import Foundation
import Media

/// `vigil run` (or another subcommand) as a child process, its stderr collected line by line.
public final class AgentProcess: Sendable {
    private let process: Process
    private let reader: LineReader

    /// Where `vigil trigger`'s socket goes (`VIGIL_RUNTIME_DIR`), unless `environment` says.
    public let runtimeDirectory: String

    /// Starts `vigil ARGUMENTS` with TZ=UTC, without the variables systemd would set, with a
    /// runtime directory of its own (no two test agents share a trigger socket), plus `environment`.
    /// `launcher`: a program and its arguments that end by running (exec) the command given
    /// after them — `vigil ARGUMENTS` — in the same process (`unshare`, say).
    public init(_ arguments: [String], environment extra: [String: String] = [:], launcher: [String] = []) throws {
        let process = Process()
        let vigil = builtExecutable("vigil")
        process.executableURL = URL(fileURLWithPath: launcher.first ?? vigil)
        process.arguments = launcher.isEmpty ? arguments : Array(launcher.dropFirst()) + [vigil] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["TZ"] = "UTC"
        for key in ["JOURNAL_STREAM", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            environment.removeValue(forKey: key)
        }
        environment["VIGIL_RUNTIME_DIR"] = NSTemporaryDirectory() + "vigil-run-" + UUID().uuidString.prefix(8)
        environment.merge(extra) { $1 }
        runtimeDirectory = environment["VIGIL_RUNTIME_DIR"] ?? ""
        process.environment = environment
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        self.process = process
        try process.run()
        reader = LineReader(pipe.fileHandleForReading)
    }

    deinit {
        if runtimeDirectory.contains("/vigil-run-") { try? FileManager.default.removeItem(atPath: runtimeDirectory) }
    }

    /// `vigil run --config CONFIG`.
    public convenience init(config: String, environment: [String: String] = [:], launcher: [String] = []) throws {
        try self.init(["run", "--config", config], environment: environment, launcher: launcher)
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public var output: String { reader.lines.joined(separator: "\n") }
    public var outputLines: [String] { reader.lines }

    /// The first line containing `text` (after the first `skip` such lines), waiting up to
    /// `timeout` seconds for it; nil if it did not come, or the agent ended without it. For what
    /// only the log says (a warning that is the behaviour under test, the port the kernel chose):
    /// what a clip, a broker or the web server shows is waited for with `waitUntil`.
    public func waitFor(_ text: String, skip: Int = 0, timeout: Double) -> String? {
        func find() -> String? { reader.lines.filter { $0.contains(text) }.dropFirst(skip).first }
        var line: String?
        TestSupport.waitUntil(timeout: timeout) {
            line = find()
            return line != nil || !process.isRunning
        }
        if line == nil && !process.isRunning {
            reader.waitUntilClosed()
            line = find()
        }
        return line
    }

    public func kill(_ signal: Int32) { Foundation.kill(process.processIdentifier, signal) }

    /// The exit status (128 + the signal for a signal), or nil when it had not exited within
    /// `timeout` seconds (it is then killed).
    public func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        reader.waitUntilClosed()
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }
}

/// The value of `key=` in a logfmt line: a bare word, or a quoted string without its quotes.
public func logValue(_ line: String, _ key: String) -> String? {
    let prefix = line.hasPrefix(key + "=") ? line.startIndex : nil
    guard let start = prefix ?? line.range(of: " \(key)=")?.upperBound else { return nil }
    let rest = line[(prefix == nil ? start : line.index(start, offsetBy: key.count + 1))...]
    if rest.first == "\"" {
        // A quote that never closes (a line cut short): what there is of it.
        return rest.quotedString()?.value ?? String(rest.dropFirst())
    }
    return String(rest.prefix { $0 != " " })
}

/// Lines of `output` with `msg="message"` (or `msg=message`).
public func logLines(_ output: String, _ message: String) -> [String] {
    output.split(separator: "\n").map(String.init).filter { logValue($0, "msg") == message }
}
