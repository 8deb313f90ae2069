internal import Glibc

/// A shared object loaded at run time (`dlopen`): a plugin the binary does not link, such as
/// libvigil-libcamera.so. It stays loaded for the life of the process (plugins keep threads and
/// static state that must not be unmapped under them).
public struct SharedLibrary: Sendable {
    /// Where it was found.
    public let path: String
    private let handle: UInt

    /// Why a library or one of its symbols could not be loaded: the dynamic linker's words.
    public struct LoadError: Error, Hashable, Sendable, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { reason }
    }

    /// Loads `path` with every symbol resolved now (RTLD_NOW: a library missing one of its own
    /// dependencies fails here, with the linker's words, not at the first call).
    public init(path: String) throws(LoadError) {
        _ = dlerror()
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw LoadError(path: path, reason: SharedLibrary.lastError() ?? "dlopen failed")
        }
        self.path = path
        self.handle = UInt(bitPattern: handle)
    }

    /// The address of `name`, or a `LoadError` when the library does not define it.
    public func symbol(_ name: String) throws(LoadError) -> UnsafeRawPointer {
        _ = dlerror()
        guard let pointer = dlsym(UnsafeMutableRawPointer(bitPattern: handle), name) else {
            throw LoadError(path: path, reason: SharedLibrary.lastError() ?? "\(path) does not define \(name)")
        }
        return UnsafeRawPointer(pointer)
    }

    private static func lastError() -> String? {
        dlerror().map { String(cString: $0) }
    }
}

/// Whether a regular file is at `path` (following links).
public func fileExists(atPath path: String) -> Bool {
    var status = stat()
    return stat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
}

/// The path of the running executable (`/proc/self/exe`), or nil when it cannot be read.
public func executablePath() -> String? {
    guard let resolved = realpath("/proc/self/exe", nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}

/// The value of environment variable `name`, or nil when it is not set.
public func environmentValue(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}
