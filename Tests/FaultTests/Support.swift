import Capture
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Media
import QuickTime
import Recorder
import Synchronization
import Testing
import TestSupport

/// Helpers of the fault suite: the agent as a child process, footage, configurations, and the
/// checks every clip must pass.

/// A scene at 320×240 with the given objects, I420 (what a Y4M file holds).
func scene(seconds: Double, rate: Rational = Rational(15, 1), width: Int = 320, height: Int = 240,
           objects: [SceneObject], period: Double? = nil) -> SyntheticScene {
    SyntheticScene(width: width, height: height, frameRate: rate, pixelFormat: .i420, seed: 11, noiseSigma: 3,
                   schedule: SceneSchedule(objects: objects, period: period.map { .init(seconds: $0) }),
                   duration: .init(seconds: seconds))
}

/// Something crossing the picture from `enter` to `leave` seconds.
func crossing(_ enter: Double, _ leave: Double) -> SceneObject {
    SceneObject(enter: .init(seconds: enter), leave: .init(seconds: leave), path: .leftToRight(y: 0.5), width: 0.15, height: 0.25, brightness: 210)
}

/// Writes `scene` to a Y4M file at `path`.
@discardableResult
func writeFootage(_ scene: SyntheticScene, to path: String) throws -> String {
    let source = try SyntheticSource(scene: scene)
    let writer = try Y4MFileWriter(path: path, width: scene.width, height: scene.height, rate: scene.frameRate)
    while let frame = try source.nextFrame() { try writer.write(frame) }
    try writer.close()
    return path
}

/// A configuration file for `vigil run` reading `footage`, recording into `storage`.
@discardableResult
func writeConfig(_ path: String, footage: String, storage: String, realtime: Bool = false, level: String = "info",
                 recording: String = "pre_roll = 1.0; post_roll = 1.0;", storageExtra: String = "min_free_mb = 1;", extra: String = "") throws -> String {
    try """
        camera = { device = "file:\(footage)"; name = "yard"; realtime = \(realtime); };
        recording = { \(recording) };
        storage = { path = "\(storage)"; \(storageExtra) };
        log = { level = "\(level)"; stats_interval = 0; };
        \(extra)
        """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// `vigil run` (or another subcommand) as a child process, its stderr collected line by line.
final class Agent: Sendable {
    private let process: Process
    private let lines = Mutex<[String]>([])
    private let finishedReading = Mutex(false)

    init(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtExecutable("vigil"))
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["TZ"] = "UTC"
        for key in ["JOURNAL_STREAM", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] { environment.removeValue(forKey: key) }
        process.environment = environment
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        self.process = process
        try process.run()
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            var pending = ""
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending += String(decoding: data, as: UTF8.self)
                while let newline = pending.firstIndex(of: "\n") {
                    let line = String(pending[..<newline])
                    pending = String(pending[pending.index(after: newline)...])
                    lines.withLock { $0.append(line) }
                }
            }
            if !pending.isEmpty { lines.withLock { $0.append(pending) } }
            finishedReading.withLock { $0 = true }
        }
    }

    convenience init(config: String) throws { try self.init(["run", "--config", config]) }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    var output: String { lines.withLock { $0.joined(separator: "\n") } }
    var outputLines: [String] { lines.withLock { $0 } }

    /// The first line containing `text` (after the first `skip` such lines), waiting up to
    /// `timeout` seconds for it; nil if it did not come, or the agent ended without it.
    func waitFor(_ text: String, skip: Int = 0, timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        func find() -> String? { lines.withLock { $0.filter { $0.contains(text) }.dropFirst(skip).first } }
        while Date() < deadline {
            if let line = find() { return line }
            if !process.isRunning {
                while !finishedReading.withLock({ $0 }) { usleep(10_000) }
                return find()
            }
            usleep(5_000)
        }
        return nil
    }

    func kill(_ signal: Int32) { Foundation.kill(process.processIdentifier, signal) }

    /// The exit status (128 + the signal for a signal), or nil when it had not exited within
    /// `timeout` seconds (it is then killed).
    func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        while !finishedReading.withLock({ $0 }) { usleep(10_000) }
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }
}

/// The value of `key=` in a logfmt line: a bare word, or a quoted string without its quotes.
func logValue(_ line: String, _ key: String) -> String? {
    let prefix = line.hasPrefix(key + "=") ? line.startIndex : nil
    guard let start = prefix ?? line.range(of: " \(key)=")?.upperBound else { return nil }
    let rest = line[(prefix == nil ? start : line.index(start, offsetBy: key.count + 1))...]
    if rest.first == "\"" {
        var value = ""
        var escaped = false
        for c in rest.dropFirst() {
            if escaped { value.append(c); escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { break } else { value.append(c) }
        }
        return value
    }
    return String(rest.prefix { $0 != " " })
}

/// Lines of `output` with `msg="message"` (or `msg=message`).
func logLines(_ output: String, _ message: String) -> [String] {
    output.split(separator: "\n").map(String.init).filter { logValue($0, "msg") == message }
}

/// The clip files (`.mov`) under `directory`, relative to it, sorted.
func movieFiles(in directory: String) -> [String] {
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return [] }
    return walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".mov") }.sorted()
}

/// Every movie a test writes goes through the independent readers: ffprobe reads it, and a
/// full decode by ffmpeg prints nothing. Returns ffprobe's report.
@discardableResult
func expectPlayable(_ path: String, _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws -> ProbeReport? {
    let decode = try FFmpeg.decodeErrors(path)
    #expect(decode.isEmpty, "\(comment) \(path) does not decode cleanly: \(decode)", sourceLocation: sourceLocation)
    do {
        let probe = try FFprobe.probe(path)
        #expect(probe.video != nil, "\(comment) \(path) has no video stream", sourceLocation: sourceLocation)
        return probe
    } catch {
        Issue.record("\(comment) ffprobe cannot read \(path): \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The MD5 of every decoded video frame, in order.
func frameHashes(_ path: String) throws -> [String] {
    let r = try runTool("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0:v", "-f", "framemd5", "-"])
    return r.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) } }
}

/// The resident memory (kB) and open file descriptors of a running process.
func processResources(_ pid: Int32) -> (rssKB: Int, fds: Int)? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kb = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }),
          let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return nil }
    return (kb, fds.count)
}

/// Bytes of the regular files under `directory`.
func directorySize(_ directory: String) -> Int64 {
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return 0 }
    var total: Int64 = 0
    for case let name as String in walker {
        if let attributes = try? FileManager.default.attributesOfItem(atPath: directory + "/" + name),
           attributes[.type] as? FileAttributeType == .typeRegular {
            total += (attributes[.size] as? NSNumber)?.int64Value ?? 0
        }
    }
    return total
}

/// A named pipe the agent reads as its `file:` source, fed frame by frame by the test — so a
/// test decides when frames come, when they stop, and what broken bytes come instead.
final class FifoFeeder {
    let path: String
    let scene: SyntheticScene
    private let source: SyntheticSource
    private var handle: FileHandle?
    private(set) var framesWritten = 0

    init(path: String, scene: SyntheticScene) throws {
        // A reader that goes away must not kill the test with SIGPIPE: writes fail instead.
        signal(SIGPIPE, SIG_IGN)
        guard mkfifo(path, 0o644) == 0 else { throw ToolError.notFound("mkfifo \(path): \(String(cString: strerror(errno)))") }
        self.path = path
        self.scene = scene
        source = try SyntheticSource(scene: scene)
    }

    /// Opens the pipe for writing (waits for the reader) and writes the stream header.
    func open() throws {
        let fd = Glibc.open(path, O_WRONLY)
        guard fd >= 0 else { throw ToolError.notFound("open \(path): \(String(cString: strerror(errno)))") }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        self.handle = handle
        let rate = scene.frameRate
        try handle.write(contentsOf: Data("YUV4MPEG2 W\(scene.width) H\(scene.height) F\(rate.numerator):\(rate.denominator) Ip A1:1 C420jpeg\n".utf8))
    }

    /// Writes frames until the one at `seconds` (exclusive), or the end of the scene.
    func feed(until seconds: Double) throws {
        guard let handle else { throw ToolError.notFound("\(path) is not open") }
        while source.nextIndex < (scene.frameCount ?? .max), scene.timestamp(ofFrame: source.nextIndex) - scene.startTime < .init(seconds: seconds) {
            guard let frame = try source.nextFrame() else { break }
            var bytes = Array("FRAME\n".utf8)
            for p in 0..<3 {
                let plane = frame.plane(p)
                for y in 0..<plane.height { bytes.append(contentsOf: plane.row(y)) }
            }
            try handle.write(contentsOf: bytes)
            framesWritten += 1
        }
    }

    /// Writes `bytes` as they are (a cut-off frame, a broken marker).
    func writeRaw(_ bytes: [UInt8]) throws {
        guard let handle else { throw ToolError.notFound("\(path) is not open") }
        try handle.write(contentsOf: bytes)
    }

    /// Closes the writing end: the reader sees the end of the file.
    func close() {
        try? handle?.close()
        handle = nil
    }

    /// The bytes of one frame.
    var frameBytes: Int { scene.width * scene.height * 3 / 2 }
}
