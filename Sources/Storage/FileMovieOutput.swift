import FoundationEssentials
internal import Glibc
import Media
internal import POSIX
import QuickTime

/// A movie file on disk, written and read with POSIX calls.
public final class FileMovieOutput: MovieFile {
    public let path: String
    /// Nil once closed (`close()` takes it).
    private var file: FileDescriptor?
    public private(set) var length: UInt64

    /// Creates (or truncates) the file at `path`.
    public init(creating path: String) throws(FileError) {
        self.path = path
        do { file = try FileDescriptor(opening: path, .readWrite, options: [.create, .truncate]) } catch {
            let directory = path.withoutLastPathComponent
            if error.isMissing {
                throw FileError(
                    path: path, operation: "create", reason: "the directory \(directory) does not exist",
                    isMissing: true)
            }
            if error.isPermissionDenied {
                throw FileError(
                    path: path, operation: "create", reason: "permission denied — can this user write to \(directory)?")
            }
            throw FileError(path: path, operation: "create", error)
        }
        length = 0
    }

    /// Opens an existing file for reading and patching (repair), taking its lock: a clip a
    /// running agent is writing is refused (`isInUse`).
    public init(updating path: String) throws(FileError) {
        self.path = path
        // A named pipe would block the open (or the first read) for ever; a device is not a movie.
        if let kind = try? Paths.status(path).kind, kind != .regular {
            throw FileError(path: path, notARegularFile: "open")
        }
        do {
            let file = try FileDescriptor(opening: path, .readWrite)
            try FileMovieOutput.lock(file, path)
            length = try file.status().size
            self.file = consume file
        } catch let error as FileError {
            throw error
        } catch {
            throw FileError(path: path, operation: "open", error as! SystemError)
        }
    }

    /// A movie file already open (made or opened by `DiskStorage`), `length` bytes long.
    init(adopting file: consuming FileDescriptor, path: String, length: UInt64) {
        self.path = path
        self.length = length
        self.file = consume file
    }

    /// Takes the file's lock, which its writer holds while it records: repair never touches a
    /// clip an agent is writing.
    static func lock(_ file: borrowing FileDescriptor, _ path: String) throws(FileError) {
        // A child process another thread is starting holds a copy of every descriptor until it
        // runs its program (close-on-exec): a lock can look taken for that instant. A writer
        // holds it for the whole clip; a few tries over 50 ms tell the two apart.
        for attempt in 1...6 {
            do {
                try file.lockExclusively()
                return
            } catch {
                guard error.isLocked else { throw FileError(path: path, operation: "lock", error) }
                if attempt < 6 { usleep(10_000) }
            }
        }
        throw FileError(path: path, operation: "open", reason: "a running agent is writing it", isInUse: true)
    }

    /// False once the file has no name any more (its directory was removed while it was written).
    public var isStillOnDisk: Bool {
        ((try? withFile("look up") { file throws(SystemError) in try file.linkCount() }) ?? 1) > 0
    }

    /// Runs `body` on the open file; after `close()`, EBADF, as a closed descriptor would say.
    private func withFile<Result>(
        _ operation: String, _ body: (borrowing FileDescriptor) throws(SystemError) -> Result
    ) throws(FileError) -> Result {
        do throws(SystemError) {
            switch file {
            case .some(let file): return try body(file)
            case .none: throw SystemError(EBADF)
            }
        } catch {
            throw FileError(path: path, operation: operation, error)
        }
    }

    public func append(_ bytes: [UInt8]) throws(FileError) {
        let length = self.length
        try withFile("write") { file throws(SystemError) in
            do throws(SystemError) { try file.writeAll(bytes, at: length) } catch {
                // Whatever part of the write landed is cut off again, so the file ends with the
                // last complete box and the next append starts there.
                try? file.truncate(to: length)
                throw error
            }
        }
        self.length += UInt64(bytes.count)
    }

    public func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(FileError) {
        precondition(offset + UInt64(bytes.count) <= length, "overwrite stays inside the file")
        try withFile("update") { file throws(SystemError) in try file.writeAll(bytes, at: offset) }
    }

    public func synchronize() throws(FileError) {
        try withFile("sync") { file throws(SystemError) in try file.synchronize() }
    }

    /// Cuts the file to `newLength` bytes (repair drops a partial tail this way).
    public func truncate(to newLength: UInt64) throws(FileError) {
        try withFile("truncate") { file throws(SystemError) in try file.truncate(to: newLength) }
        length = newLength
    }

    /// Reads `count` bytes at `offset` (fewer at the end of the file).
    public func read(at offset: UInt64, count: Int) throws(FileError) -> [UInt8] {
        try withFile("read") { file throws(SystemError) in try file.read(count: count, at: offset) }
    }

    public func close() throws(FileError) {
        guard let file = file.take() else { return }
        do { try file.close() } catch { throw FileError(path: path, operation: "close", error) }
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

    private static func openForRepair(_ path: String) throws(FileError) -> any MovieFile {
        try FileMovieOutput(updating: path)
    }
}
