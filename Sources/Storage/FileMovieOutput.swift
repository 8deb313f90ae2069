import FoundationEssentials
internal import Glibc
import Media
import QuickTime

/// A movie file on disk, written and read with POSIX calls.
public final class FileMovieOutput: MovieFile {
    public let path: String
    private var fd: Int32
    public private(set) var length: UInt64

    /// Creates (or truncates) the file at `path`.
    public init(creating path: String) throws(MovieFileError) {
        self.path = path
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard fd >= 0 else {
            throw MovieFileError(path: path, operation: "create", reason: FileMovieOutput.createFailureReason(path))
        }
        length = 0
    }

    /// Opens an existing file for reading and patching (repair).
    public init(updating path: String) throws(MovieFileError) {
        self.path = path
        fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw MovieFileError(path: path, operation: "open", errno: errno) }
        let end = lseek(fd, 0, SEEK_END)
        guard end >= 0 else {
            let error = MovieFileError(path: path, operation: "open", errno: errno)
            Glibc.close(fd)
            throw error
        }
        length = UInt64(end)
    }

    deinit {
        if fd >= 0 { Glibc.close(fd) }
    }

    private static func createFailureReason(_ path: String) -> String {
        let dir = path.withoutLastPathComponent
        var isDir = false
        if !FileManager.default.fileExists(atPath: dir.isEmpty ? "." : dir, isDirectory: &isDir) || !isDir {
            return "the directory \(dir) does not exist"
        }
        if !FileManager.default.isWritableFile(atPath: dir.isEmpty ? "." : dir) {
            return "permission denied — can this user write to \(dir)?"
        }
        return "the file could not be created (is the disk full or read-only?)"
    }

    public func append(_ bytes: [UInt8]) throws(MovieFileError) {
        if let failure = bytes.withUnsafeBytes({ writeAll($0, to: fd, at: length) }) {
            // Whatever part of the write landed is cut off again, so the file ends with the
            // last complete box and the next append starts there.
            _ = ftruncate(fd, off_t(length))
            throw MovieFileError(path: path, operation: "write", errno: failure)
        }
        length += UInt64(bytes.count)
    }

    public func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(MovieFileError) {
        precondition(offset + UInt64(bytes.count) <= length, "overwrite stays inside the file")
        if let failure = bytes.withUnsafeBytes({ writeAll($0, to: fd, at: offset) }) {
            throw MovieFileError(path: path, operation: "update", errno: failure)
        }
    }

    public func synchronize() throws(MovieFileError) {
        guard fsync(fd) == 0 else { throw MovieFileError(path: path, operation: "sync", errno: errno) }
    }

    /// Cuts the file to `newLength` bytes (repair drops a partial tail this way).
    public func truncate(to newLength: UInt64) throws(MovieFileError) {
        guard ftruncate(fd, off_t(newLength)) == 0 else {
            throw MovieFileError(path: path, operation: "truncate", errno: errno)
        }
        length = newLength
    }

    /// Reads `count` bytes at `offset` (fewer at the end of the file).
    public func read(at offset: UInt64, count: Int) throws(MovieFileError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(count, 0))
        var failure: Int32?
        let got = bytes.withUnsafeMutableBytes { buffer -> Int in
            var done = 0
            while done < buffer.count {
                let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    break
                }
                if n == 0 { break } // the end of the file
                done += n
            }
            return done
        }
        if let failure { throw MovieFileError(path: path, operation: "read", errno: failure) }
        if got < bytes.count { bytes.removeLast(bytes.count - got) }
        return bytes
    }

    public func close() throws(MovieFileError) {
        guard fd >= 0 else { return }
        let result = Glibc.close(fd)
        let failure = errno
        fd = -1
        guard result == 0 else { throw MovieFileError(path: path, operation: "close", errno: failure) }
    }
}

extension MovieFileError {
    /// The error for a failed POSIX call: "no space left on the device" (and `isOutOfSpace`)
    /// for ENOSPC and EDQUOT, the C library's text for any other errno.
    init(path: String, operation: String, errno code: Int32) {
        let outOfSpace = code == ENOSPC || code == EDQUOT
        let reason = outOfSpace ? "no space left on the device" : String(cString: strerror(code))
        self.init(path: path, operation: operation, reason: reason, isOutOfSpace: outOfSpace)
    }
}

extension MovieWriter {
    /// Creates the movie file at `path`.
    public convenience init(path: String, description: MovieDescription) throws(MovieWriterError) {
        let output: FileMovieOutput
        do { output = try FileMovieOutput(creating: path) } catch { throw .file(error) }
        try self.init(output: output, path: path, description: description)
    }
}

extension MovieRepair {
    /// Tells whether the movie at `path` is complete or needs repair, without changing it.
    public static func inspect(path: String) throws(MovieRepairError) -> MovieFileState {
        try inspect(path: path, opening: openForRepair)
    }

    /// Turns the interrupted movie at `path` into a normal one. Returns nil when it already was.
    @discardableResult
    public static func repair(path: String) throws(MovieRepairError) -> MovieRepairReport? {
        try repair(path: path, opening: openForRepair)
    }

    private static func openForRepair(_ path: String) throws(MovieFileError) -> any MovieFile {
        try FileMovieOutput(updating: path)
    }
}
