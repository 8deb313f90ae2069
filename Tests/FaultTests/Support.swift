import Capture
import Foundation
import Media
import QuickTime
import Recorder
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Helpers of the fault suite: the agent as a child process, footage, configurations, and the
/// checks every clip must pass.

/// A configuration file for `vigil run` reading `footage`, recording into `storage`.
@discardableResult
func writeConfig(
    _ path: String, footage: String, storage: String, realtime: Bool = false, level: String = "info",
    recording: String = "pre_roll = 1.0; post_roll = 1.0;", storageExtra: String = "min_free_mb = 1;",
    extra: String = ""
) throws -> String {
    try """
    camera = { device = "file:\(footage)"; name = "yard"; realtime = \(realtime); };
    recording = { \(recording) };
    storage = { path = "\(storage)"; \(storageExtra) };
    log = { level = "\(level)"; stats_interval = 0; };
    \(extra)
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// `vigil run` reading `scene` from a pipe the test feeds (`camera.y4m` in `dir`), recording
/// into `storage`; the pipe is open and its header written when this returns.
func fedAgent(
    _ scene: SyntheticScene, in dir: TemporaryDirectory, storage: String,
    recording: String = "pre_roll = 1.0; post_roll = 1.0;", storageExtra: String = "min_free_mb = 1;"
) throws -> (feeder: FifoFeeder, agent: AgentProcess) {
    let feeder = try FifoFeeder(path: dir.file("camera.y4m"), scene: scene)
    let agent = try AgentProcess(
        config: writeConfig(
            dir.file("vigil.conf"), footage: feeder.path, storage: storage, recording: recording,
            storageExtra: storageExtra))
    try feeder.open()
    return (feeder, agent)
}

/// Uploads to an S3 server that never answers: the `upload` group for a configuration's
/// `extra`, its endpoint a port of the test's own — bound and never listening (connections
/// refused) or, `listening`, taking connections into the kernel's backlog and never reading
/// them — its key files written in `dir`; and that port's socket, to close.
func unansweredUpload(in dir: TemporaryDirectory, listening: Bool = false) throws -> (group: String, socket: Int32) {
    try "AKIDEXAMPLE\n".write(toFile: dir.file("access"), atomically: true, encoding: .utf8)
    try "not-a-real-secret\n".write(toFile: dir.file("secret"), atomically: true, encoding: .utf8)
    let (socket, port) = try #require(loopbackSocket(listening: listening))
    let group = """
        upload = {
          url = "s3://clips/fleet"; endpoint = "http://127.0.0.1:\(port)";
          access_key_file = "access"; secret_key_file = "secret";
        };
        """
    return (group, socket)
}

/// The resident memory (kB) and open file descriptors of a running process.
func processResources(_ pid: Int32) -> (rssKB: Int, fds: Int)? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kb = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }),
        let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
    else { return nil }
    return (kb, fds.count)
}

/// Bytes of the regular files under `directory`.
func directorySize(_ directory: String) -> Int64 {
    guard let walker = FileManager.default.enumerator(atPath: directory) else { return 0 }
    var total: Int64 = 0
    for case let name as String in walker {
        if let attributes = try? FileManager.default.attributesOfItem(atPath: directory + "/" + name),
            attributes[.type] as? FileAttributeType == .typeRegular
        {
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
        guard mkfifo(path, 0o644) == 0 else {
            throw ToolError.notFound("mkfifo \(path): \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.scene = scene
        source = try SyntheticSource(scene: scene)
    }

    /// Opens the pipe for writing (waits for the reader, at most `timeout` seconds: an agent
    /// that exits before it reads must fail the test, not hang it) and writes the stream header.
    func open(timeout: Double = 120) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var fd = Glibc.open(path, O_WRONLY | O_NONBLOCK)
        while fd < 0 && errno == ENXIO && Date() < deadline {
            usleep(10_000)
            fd = Glibc.open(path, O_WRONLY | O_NONBLOCK)
        }
        guard fd >= 0 else { throw ToolError.notFound("open \(path): \(String(cString: strerror(errno)))") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        self.handle = handle
        let rate = scene.frameRate
        try handle.write(contentsOf: Y4MHeader.line(width: scene.width, height: scene.height, rate: rate))
    }

    /// Writes frames until the one at `seconds` (exclusive), or the end of the scene.
    func feed(until seconds: Double) throws {
        guard let handle else { throw ToolError.notFound("\(path) is not open") }
        while source.nextIndex < (scene.frameCount ?? .max),
            scene.timestamp(ofFrame: source.nextIndex) - scene.startTime < .init(seconds: seconds)
        {
            guard let frame = try source.nextFrame() else { break }
            var bytes: [UInt8] = []
            Y4MHeader.appendFrame(frame, to: &bytes)
            try handle.write(contentsOf: bytes)
            framesWritten += 1
        }
    }

    /// Writes `bytes` as they are (a cut-off frame, a broken marker). A reader that stops
    /// reading part-way is not an error here: an agent that sees a broken marker gives up on the
    /// source at once and may close the pipe before the rest of the bytes are written (EPIPE);
    /// what it did with them is for the test to check in its output.
    func writeRaw(_ bytes: [UInt8]) throws {
        guard let handle else { throw ToolError.notFound("\(path) is not open") }
        do {
            try handle.write(contentsOf: bytes)
        } catch let error as NSError
            where (error.userInfo[NSUnderlyingErrorKey] as? NSError)?.code == Int(EPIPE) || error.code == Int(EPIPE)
        {
            self.close()
        }
    }

    /// Closes the writing end: the reader sees the end of the file.
    func close() {
        try? handle?.close()
        handle = nil
    }

    /// The bytes of one frame.
    var frameBytes: Int { scene.width * scene.height * 3 / 2 }
}
