internal import POSIX

/// A small file the settings name (a password file, a certificate, a key), read whole when
/// the settings are loaded: only a regular file (a device or a pipe is refused without being
/// read, so the agent never waits on one) of at most `limit` bytes. Each caller says what the
/// problem means for its own setting.
enum SmallFile {
    enum Problem: Error {
        /// A device, a pipe or a directory.
        case notRegular
        /// Larger than the limit: its size.
        case tooLarge(UInt64)
        /// It could not be opened or read: the system's error.
        case unreadable(any Error)
    }

    /// The bytes of `path`: at most `limit + 1` of them (the file may grow after its size was
    /// read; a caller that must refuse a file past the limit checks the count).
    static func read(_ path: String, limit: Int) throws(Problem) -> [UInt8] {
        try readWithStatus(path, limit: limit).bytes
    }

    /// `read`'s bytes, and what `fstat` said of the file they were read from (its mode and
    /// owner, for a secret file).
    static func readWithStatus(_ path: String, limit: Int) throws(Problem) -> (bytes: [UInt8], status: FileStatus) {
        do {
            let file = try FileDescriptor(opening: path, .readOnly, options: [.nonBlocking])
            let status = try file.status()
            guard status.kind == .regular else { throw Problem.notRegular }
            guard status.size <= UInt64(limit) else { throw Problem.tooLarge(status.size) }
            return (try file.read(count: limit + 1), status)
        } catch let problem as Problem {
            throw problem
        } catch {
            throw .unreadable(error)
        }
    }
}
