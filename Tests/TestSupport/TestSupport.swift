import Foundation

/// Helpers shared by the test targets: temporary directories, running tools, and the
/// independent readers (ffprobe, ffmpeg, mediainfo) that check every movie a test writes.

/// A fresh directory under the system's temporary directory, removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = "vigil-test") throws {
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? NSTemporaryDirectory()
        path = (base as NSString).appendingPathComponent("\(label)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// The result of running a program to completion.
public struct ToolResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
    public var stdoutData: Data
}

public enum ToolError: Error, CustomStringConvertible {
    case notFound(String)
    case failed(String, ToolResult)
    public var description: String {
        switch self {
        case .notFound(let name): "\(name) is not installed (run `make deps`)"
        case .failed(let cmd, let r): "\(cmd) exited \(r.status): \(r.stderr)"
        }
    }
}

/// The environment for a `vigil run` a test starts itself: this one's, with a runtime
/// directory (`VIGIL_RUNTIME_DIR`: the trigger socket and the camera name's lock) of its own in
/// `directory`, so that an agent already running on the machine with the same camera name is
/// not the test's business; plus `extra`.
public func isolatedVigilEnvironment(
    in directory: TemporaryDirectory, _ extra: [String: String] = [:]
)
    -> [String: String]
{
    var environment = ProcessInfo.processInfo.environment
    environment["VIGIL_RUNTIME_DIR"] = directory.file("run")
    environment.merge(extra) { $1 }
    return environment
}

/// Finds `name` on PATH.
public func which(_ name: String) -> String? {
    if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for dir in path.split(separator: ":") {
        let candidate = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

/// Runs `executable` with `arguments` and waits for it; stdin is /dev/null unless `input` is given.
@discardableResult
public func runTool(
    _ executable: String, _ arguments: [String], input: Data? = nil,
    environment: [String: String]? = nil
) throws -> ToolResult {
    guard let exe = which(executable) else { throw ToolError.notFound(executable) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: exe)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let inPipe = Pipe()
    process.standardInput = input == nil ? FileHandle.nullDevice : inPipe
    try process.run()
    if let input {
        try inPipe.fileHandleForWriting.write(contentsOf: input)
        try inPipe.fileHandleForWriting.close()
    }
    // Read both pipes to the end concurrently so neither can fill up and block the child.
    nonisolated(unsafe) var errData = Data()
    let group = DispatchGroup()
    group.enter()
    DispatchQueue.global().async {
        errData = err.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return ToolResult(
        status: process.terminationStatus,
        stdout: String(decoding: outData, as: UTF8.self),
        stderr: String(decoding: errData, as: UTF8.self),
        stdoutData: outData)
}

/// What ffprobe reports about a movie.
public struct ProbeReport: Sendable {
    public var streams: [[String: String]]
    public var format: [String: String]
    /// The format's tags (creation_time and the like).
    public var formatTags: [String: String]
    /// Side data of each stream, e.g. the display matrix rotation.
    public var sideData: [[[String: String]]]

    public var video: [String: String]? { streams.first { $0["codec_type"] == "video" } }
    public var audio: [String: String]? { streams.first { $0["codec_type"] == "audio" } }

    /// The display-matrix rotation ffprobe reports for the video stream (counter-clockwise degrees), or nil.
    public var videoRotation: Double? {
        guard let index = streams.firstIndex(where: { $0["codec_type"] == "video" }) else { return nil }
        for entry in sideData[index] where entry["side_data_type"] == "Display Matrix" {
            if let r = entry["rotation"], let v = Double(r) { return v }
        }
        return nil
    }
}

public enum FFprobe {
    /// Streams and format of `path`, with every packet counted (`nb_read_packets`).
    public static func probe(_ path: String, countPackets: Bool = true) throws -> ProbeReport {
        var args = ["-v", "error", "-show_streams", "-show_format", "-of", "json"]
        if countPackets { args.append("-count_packets") }
        args.append(path)
        let r = try runTool("ffprobe", args)
        guard r.status == 0 else { throw ToolError.failed("ffprobe \(path)", r) }
        let json = try JSONSerialization.jsonObject(with: r.stdoutData) as? [String: Any] ?? [:]
        let streams = (json["streams"] as? [[String: Any]]) ?? []
        return ProbeReport(
            streams: streams.map(stringify),
            format: stringify((json["format"] as? [String: Any]) ?? [:]),
            formatTags: stringify(((json["format"] as? [String: Any])?["tags"] as? [String: Any]) ?? [:]),
            sideData: streams.map { (($0["side_data_list"] as? [[String: Any]]) ?? []).map(stringify) })
    }

    /// Presentation time and keyframe flag of every video packet, in order.
    public static func videoPackets(_ path: String) throws -> [(time: Double, duration: Double, isKey: Bool, size: Int)]
    {
        let r = try runTool(
            "ffprobe",
            [
                "-v", "error", "-select_streams", "v:0", "-show_entries",
                "packet=pts_time,duration_time,flags,size", "-of", "csv=p=0", path,
            ])
        guard r.status == 0 else { throw ToolError.failed("ffprobe \(path)", r) }
        return r.stdout.split(separator: "\n").compactMap { line in
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard f.count >= 4, let t = Double(f[0]) else { return nil }
            return (t, Double(f[1]) ?? 0, f[3].contains("K"), Int(f[2]) ?? 0)
        }
    }

    private static func stringify(_ d: [String: Any]) -> [String: String] {
        var out: [String: String] = [:]
        for (k, v) in d {
            switch v {
            case let s as String: out[k] = s
            case let n as NSNumber: out[k] = n.stringValue
            default: break
            }
        }
        return out
    }
}

public enum FFmpeg {
    /// Decodes every stream of `path` fully; returns what ffmpeg printed at error level
    /// (empty for a clean file).
    ///
    /// `-enc_time_base -1` hands the decoded frames to the null muxer in the movie's own time
    /// base (1/90000 for ours). By default ffmpeg 5.1 re-times them to the frame rate it guesses
    /// (`r_frame_rate`), and when two frames of a camera whose timestamps wobble (a late frame,
    /// a busy machine) round to the same tick of that rate it prints "Application provided
    /// invalid, non monotonically increasing dts to muxer in stream 0: N >= N" — at error
    /// level, about its own rounding, not the movie. Timestamps that do not increase in the
    /// movie itself still collide in its time base and are still reported.
    public static func decodeErrors(_ path: String) throws -> String {
        let r = try runTool(
            "ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-enc_time_base", "-1", "-f", "null", "-"])
        let text = r.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
        if r.status != 0 && text.isEmpty { return "ffmpeg exited \(r.status)" }
        return text
    }
}

/// The MD5 of every decoded video frame of `path`, in order (ffmpeg's framemd5): to compare
/// movies frame by frame.
public func frameHashes(_ path: String) throws -> [String] {
    let r = try runTool("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0:v", "-f", "framemd5", "-"])
    return r.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }
        .compactMap { $0.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) } }
}

/// The directory holding the built products (the test bundle's own directory), where
/// executables such as `vigil` and the test fixtures are.
public func builtProductsDirectory() -> String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return (exe as NSString).deletingLastPathComponent
}

/// The path of a built executable of this package.
public func builtExecutable(_ name: String) -> String {
    (builtProductsDirectory() as NSString).appendingPathComponent(name)
}

/// A real, small file system for tests that fill a disk: a tmpfs of `megabytes` mounted on a
/// fresh directory (this needs root, as `make test` has in CI). `unmount()` removes it.
public struct SmallFileSystem: Sendable {
    public let path: String

    public init(megabytes: Int) throws {
        let dir = try TemporaryDirectory("vigil-fs")
        let r = try runTool("mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0755", "tmpfs", dir.path])
        guard r.status == 0 else {
            dir.remove()
            throw ToolError.failed("mount -t tmpfs (tests that fill a small file system need root)", r)
        }
        path = dir.path
    }

    public func unmount() {
        _ = try? runTool("umount", [path])
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Remounts it read-only (as the kernel does to a card after an error) or writable again.
    /// Read-only fails (EBUSY) while a file on it is open to write.
    public func remount(readOnly: Bool) throws {
        let r = try runTool("mount", ["-o", readOnly ? "remount,ro" : "remount,rw", path])
        guard r.status == 0 else { throw ToolError.failed("mount -o remount \(path)", r) }
    }
}

/// Whether `path` itself (not followed) is a named pipe.
public func isNamedPipe(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO
}
