import Foundation
import POSIX

#if canImport(Glibc)
import Glibc
#endif

/// A program the bench runs and measures (POSIX's `ChildProcess`, in the bench's own process
/// group): its CPU time from the kernel's accounting of the child and every thread it ran, its
/// peak memory sampled from /proc while it runs.
struct MeasuredProcess {
    struct Result {
        var status: Int32
        /// True when it ended by a signal (`status` is then the signal number).
        var signalled: Bool
        /// User plus system CPU seconds of the child (all its threads).
        var cpuSeconds: Double
        var userSeconds: Double
        var systemSeconds: Double
        /// Peak resident set size in bytes: the child's VmHWM, read from /proc while it runs
        /// (`ru_maxrss` will not do: a spawned child inherits its parent's peak at exec).
        var peakRSS: Int
        /// The most of it that was file pages (RssFile): code and read-only data of the program
        /// and its libraries, clean and shared, which the kernel may drop and read again.
        var peakFileRSS: Int
        var wallSeconds: Double
        /// What it wrote to stderr (and stdout, which goes to the same file).
        var output: String
    }

    let child: ChildProcess
    private let outputPath: String
    private let started: Date
    private let peak: PeakMemory

    /// Starts `executable` with `arguments`; its stdout and stderr go to `outputPath`,
    /// stdin is /dev/null. `environment` entries are added to (or replace) ours.
    init(
        _ executable: String, _ arguments: [String], outputPath: String, environment extra: [String: String] = [:]
    ) throws {
        var environment = ProcessInfo.processInfo.environment
        for key in ["JOURNAL_STREAM", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            environment.removeValue(forKey: key)
        }
        environment.merge(extra) { $1 }
        child = try ChildProcess.spawn(
            executable, arguments: [executable] + arguments, environment: environment.map { "\($0.key)=\($0.value)" },
            output: .file(outputPath), group: .inherited)
        self.outputPath = outputPath
        self.started = Date()
        self.peak = PeakMemory(pid: child.pid)
    }

    /// The output so far.
    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Waits until a line of the output contains `text`, up to `timeout` seconds; false if not.
    func waitFor(_ text: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if output.contains(text) { return true }
            usleep(100_000)
        }
        return false
    }

    /// Waits for the child to end and collects its accounting.
    func wait() -> Result {
        // Until the child is a zombie its memory can still grow; once it is, VmHWM is gone.
        child.waitUntilEnded()
        let (peakRSS, peakFileRSS) = peak.stop()
        let (ending, cpu) = child.reapMeasured()
        let wall = Date().timeIntervalSince(started)
        let (status, signalled) =
            switch ending {
            case .exited(let status): (status, false)
            case .signalled(let signal): (signal, true)
            }
        return Result(
            status: status, signalled: signalled, cpuSeconds: cpu.userSeconds + cpu.systemSeconds,
            userSeconds: cpu.userSeconds, systemSeconds: cpu.systemSeconds, peakRSS: peakRSS,
            peakFileRSS: peakFileRSS, wallSeconds: wall, output: output)
    }

    /// Runs to completion.
    static func run(
        _ executable: String, _ arguments: [String], outputPath: String, environment: [String: String] = [:]
    ) throws -> Result {
        try MeasuredProcess(executable, arguments, outputPath: outputPath, environment: environment).wait()
    }
}

/// A size in /proc/PID/status (`VmHWM`, `VmRSS`), in bytes; nil when it cannot be read.
func processStatus(_ field: String, of pid: String = "self") -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
        let kb = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    else { return nil }
    return kb * 1024
}

/// Samples a process's peak resident set (VmHWM in /proc/PID/status), and the most of its
/// resident set that was file pages (RssFile), every 20 ms on a thread of its own, until `stop()`.
final class PeakMemory: @unchecked Sendable {
    // `@unchecked Sendable`: `peak` and `running` are only touched while holding `lock`.
    private let lock = NSLock()
    private var peak = 0
    private var peakFile = 0
    private var running = true
    private let done = DispatchSemaphore(value: 0)

    init(pid: pid_t) {
        Thread.detachNewThread { [self] in
            while lock.withLock({ running }) {
                let bytes = processStatus("VmHWM", of: String(pid))
                let file = processStatus("RssFile", of: String(pid))
                lock.withLock {
                    peak = max(peak, bytes ?? 0)
                    peakFile = max(peakFile, file ?? 0)
                }
                usleep(20_000)
            }
            done.signal()
        }
    }

    /// Stops sampling; the highest peak seen and the most file pages, in bytes.
    func stop() -> (peak: Int, file: Int) {
        lock.withLock { running = false }
        done.wait()
        return lock.withLock { (peak, peakFile) }
    }
}

/// CPU seconds this process has used so far, all threads (encoder threads included).
func processCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Finds `name` on PATH.
func which(_ name: String) -> String? {
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let candidate = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

/// An executable built beside this one (`vigil` next to `vigil-bench`).
func siblingExecutable(_ name: String) -> String {
    let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return ((me as NSString).deletingLastPathComponent as NSString).appendingPathComponent(name)
}

/// The value of `key=` in a logfmt line: a bare word, or a quoted string without its quotes.
func logValue(_ line: Substring, _ key: String) -> String? {
    guard let range = line.range(of: " \(key)=") ?? (line.hasPrefix("\(key)=") ? line.range(of: "\(key)=") : nil) else {
        return nil
    }
    let rest = line[range.upperBound...]
    if rest.first == "\"" {
        return String(rest.dropFirst().prefix { $0 != "\"" })
    }
    return String(rest.prefix { $0 != " " })
}

extension timeval {
    /// The time as seconds (`getrusage` reports CPU time this way).
    var seconds: Double { Double(tv_sec) + Double(tv_usec) / 1e6 }
}
