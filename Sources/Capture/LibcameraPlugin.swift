internal import CLibcameraPlugin
internal import Glibc
import Media
internal import POSIX
import V4L2

/// Why the libcamera plugin (libvigil-libcamera.so, package vigil-libcamera) cannot be used.
public enum LibcameraPluginError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Not installed: no file at any of `searched`.
    case missing(searched: [String])
    /// There, but the dynamic linker refused it (a libcamera it was built against is missing).
    case unloadable(path: String, reason: String)
    /// Built for another version of vigil: its table is not the one this binary calls.
    case mismatch(path: String, problem: String)

    public var description: String {
        switch self {
        case .missing(let searched):
            "camera.device = libcamera needs the vigil-libcamera package — apt install vigil-libcamera (no plugin at \(searched.joined(separator: ", ")))"
        case .unloadable(let path, let reason):
            "camera.device = libcamera needs the vigil-libcamera package built for this system's libcamera: \(path) cannot be loaded (\(reason)) — reinstall vigil-libcamera, or build it here with `make deb-libcamera`"
        case .mismatch(let path, let problem):
            "camera.device = libcamera needs the vigil-libcamera package of this vigil's version: \(path) \(problem) — install the vigil-libcamera of the same version as vigil"
        }
    }
}

/// The libcamera plugin, loaded with `dlopen` the first time a libcamera camera is listed or
/// opened, and kept for the life of the process.
///
/// The vigil binary does not link libcamera, whose ABI (and soname) changes with every
/// release: the plugin is built against the libcamera of the system it runs on, and called
/// through the versioned C table of `vigil_libcamera.h`.
///
/// `@unchecked Sendable`: constants of the plugin (C function pointers and a string).
final class LibcameraPlugin: @unchecked Sendable {
    static let fileName = "libvigil-libcamera.so"
    /// Names a plugin to use instead of the installed one (tests, a plugin built elsewhere).
    static let environmentVariable = "VIGIL_LIBCAMERA_PLUGIN"

    let path: String
    /// The libcamera version the plugin was built against ("0.0.3").
    let libcameraVersion: String
    // The table's functions (vigil_libcamera.h says what each does).
    typealias Error = UnsafeMutablePointer<vigil_lc_error>?
    let list:
        @convention(c) (UnsafeMutablePointer<vigil_lc_camera_info>?, UInt32, UnsafeMutablePointer<UInt32>?, Error) ->
            Int32
    let open: @convention(c) (UnsafePointer<CChar>?, Error) -> OpaquePointer?
    let cameraID: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let configure:
        @convention(c) (OpaquePointer?, UInt32, UInt32, UInt32, UnsafeMutablePointer<vigil_lc_stream>?, Error) -> Int32
    let start: @convention(c) (OpaquePointer?, Int64, UnsafeMutablePointer<vigil_lc_started>?, Error) -> Int32
    let dequeue: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<vigil_lc_frame>?, Error) -> Int32
    let requeue: @convention(c) (OpaquePointer?, UInt32, Error) -> Int32
    let stop: @convention(c) (OpaquePointer?) -> Void
    let close: @convention(c) (OpaquePointer?) -> Void

    /// Nil when the table lacks a function.
    private init?(path: String, table: vigil_lc_plugin) {
        guard let list = table.list, let open = table.open, let cameraID = table.camera_id,
            let configure = table.configure, let start = table.start, let dequeue = table.dequeue,
            let requeue = table.requeue, let stop = table.stop, let close = table.close
        else { return nil }
        self.path = path
        libcameraVersion = table.libcamera_version.map { String(cString: $0) } ?? "?"
        self.list = list
        self.open = open
        self.cameraID = cameraID
        self.configure = configure
        self.start = start
        self.dequeue = dequeue
        self.requeue = requeue
        self.stop = stop
        self.close = close
    }

    /// The plugin, loaded once.
    static let shared: Result<LibcameraPlugin, LibcameraPluginError> = Result { () throws(LibcameraPluginError) in
        try load(candidates: candidates(override: environmentValue(environmentVariable), executable: executablePath()))
    }

    /// Where the plugin is looked for, in order: the override, next to the executable (a
    /// `swift build` tree), then where the vigil-libcamera package installs it.
    static func candidates(override: String?, executable: String?) -> [String] {
        if let override, !override.isEmpty { return [override] }
        var paths: [String] = []
        if let executable, let slash = executable.lastIndex(of: "/") {
            paths.append(String(executable[..<slash]) + "/" + fileName)
        }
        #if arch(x86_64)
        paths.append("/usr/lib/x86_64-linux-gnu/vigil/" + fileName)
        #elseif arch(arm64)
        paths.append("/usr/lib/aarch64-linux-gnu/vigil/" + fileName)
        #endif
        paths.append("/usr/lib/vigil/" + fileName)
        return paths
    }

    /// What a binary built with ABI `expected` (its table `expectedSize` bytes) makes of a
    /// plugin's `abi` and `tableSize`: nil when it may call it, else the problem.
    static func check(abi: UInt32, tableSize: UInt32, expected: UInt32, expectedSize: Int) -> String? {
        if abi != expected {
            return "speaks plugin ABI \(abi), this vigil speaks \(expected)"
        }
        if Int(tableSize) < expectedSize {
            return "has a table of \(tableSize) bytes, this vigil needs \(expectedSize)"
        }
        return nil
    }

    static func load(candidates: [String]) throws(LibcameraPluginError) -> LibcameraPlugin {
        guard let path = candidates.first(where: { fileExists(atPath: $0) }) else {
            throw .missing(searched: candidates)
        }
        let library: SharedLibrary
        let entryAddress: UnsafeRawPointer
        do {
            library = try SharedLibrary(path: path)
            entryAddress = try library.symbol(VIGIL_LIBCAMERA_ENTRY)
        } catch {
            throw .unloadable(path: path, reason: error.reason)
        }
        let entry = unsafeBitCast(entryAddress, to: vigil_libcamera_entry.self)
        guard let table = entry() else {
            throw .mismatch(path: path, problem: "returned no table")
        }
        // The first two fields are read before the rest is trusted: they say how the rest is laid out.
        if let problem = check(
            abi: table.pointee.abi, tableSize: table.pointee.table_size, expected: UInt32(VIGIL_LIBCAMERA_ABI),
            expectedSize: MemoryLayout<vigil_lc_plugin>.size)
        {
            throw .mismatch(path: path, problem: problem)
        }
        guard let plugin = LibcameraPlugin(path: path, table: table.pointee) else {
            throw .mismatch(path: path, problem: "has a table with a function missing")
        }
        return plugin
    }
}

/// Whether the libcamera plugin can be used: nil when it loads, else why not (for `vigil run`
/// and `vigil check` when `camera.device` names a libcamera camera).
public enum LibcameraAvailability {
    public static func problem() -> LibcameraPluginError? {
        if case .failure(let error) = LibcameraPlugin.shared { return error }
        return nil
    }
}

/// A plugin call's error: its code (an errno value) and its sentence.
struct LibcameraCallError: Error, Sendable {
    let code: Int32
    let message: String

    init(_ error: vigil_lc_error) {
        code = error.code
        message = withUnsafeBytes(of: error.message) { bytes in
            String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }

    /// ENODEV, ENXIO, EIO, ESHUTDOWN, as for V4L2: the camera went away or broke.
    var meansCameraLost: Bool { V4L2Call.deviceGone(code) }
    /// ENOTRECOVERABLE: libcamera cannot be used again in this process (a camera vanished
    /// without libcamera noticing); only a new process can open the camera.
    var needsRestart: Bool { code == ENOTRECOVERABLE }
}

/// The `count` first elements of a C array imported as a tuple.
func elements<Tuple, Element>(of tuple: Tuple, as: Element.Type, count: Int) -> [Element] {
    withUnsafeBytes(of: tuple) { raw in
        let capacity = raw.count / MemoryLayout<Element>.stride
        return (0..<min(count, capacity)).map {
            raw.load(fromByteOffset: $0 * MemoryLayout<Element>.stride, as: Element.self)
        }
    }
}

/// A NUL-terminated C character array imported as a tuple, as a String.
func text<Tuple>(of tuple: Tuple) -> String { string(fromCharacters: tuple) }
