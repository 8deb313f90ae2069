internal import Glibc

/// An open file descriptor, owned: closed exactly once — by `close()`, which reports the
/// error, or else when the value goes away.
///
/// A `~Copyable` struct rather than a class: ownership is what it is about, and the compiler
/// then proves that nothing reads, writes or closes a descriptor after it was closed, or
/// closes it twice (`close()` consumes the value). It costs no allocation, and most uses are
/// a local that opens, writes and closes at the end of its scope (the journal's appends,
/// naming a thread, the sd_notify socket). Sharing is the owner's business: a descriptor
/// that several threads use lives in one object they share — `V4L2Device`, a `final class`,
/// holds its camera's descriptor and is itself `Sendable`. An owner with an explicit close
/// (a movie file) holds an `Optional` and `take()`s the descriptor out to close it.
///
/// Every call but `close` is retried when a signal interrupts it (`retryOnInterrupt`), and
/// each throws the `SystemError` of any other failure.
public struct FileDescriptor: ~Copyable, Sendable {
    /// The C descriptor, for calls this type does not wrap (poll, mmap, ioctl, sendto).
    public let rawValue: Int32
    /// The function that closes it (`close`, or a library's own such as `v4l2_close`); nil
    /// for a descriptor the process owns rather than this value (standard output and error).
    private let closing: (@convention(c) (Int32) -> Int32)?

    /// Takes ownership of `rawValue` (an open descriptor), to be closed with `close`.
    public init(adopting rawValue: Int32) {
        self.init(adopting: rawValue, closingWith: { Glibc.close($0) })
    }

    /// Takes ownership of `rawValue`, which must be closed with `closing`: a library's
    /// descriptor, such as libv4l2's from `v4l2_open`, which only `v4l2_close` may close.
    public init(adopting rawValue: Int32, closingWith closing: @convention(c) (Int32) -> Int32) {
        precondition(rawValue >= 0, "FileDescriptor adopts an open descriptor, not \(rawValue)")
        self.rawValue = rawValue
        self.closing = closing
    }

    /// A descriptor the process owns rather than this value, never closed through it:
    /// standard input (0), output (1) and error (2), or a socket a library holds (a
    /// connection of libmicrohttpd's or libmosquitto's).
    public init(unowned rawValue: Int32) {
        self.rawValue = rawValue
        self.closing = nil
    }

    /// Opens `path`, always close-on-exec (the hooks the agent starts inherit nothing).
    /// `permissions` are those of a file that `.create` makes, before the umask.
    public init(
        opening path: String, _ access: AccessMode, options: OpenOptions = [],
        permissions: UInt32 = 0o666
    ) throws(SystemError) {
        let flags = access.rawValue | options.rawValue | O_CLOEXEC
        self.init(adopting: try retryOnInterrupt { open(path, flags, permissions) })
    }

    deinit {
        // Linux releases the descriptor even when close reports an error: never retried.
        if let closing, closing(rawValue) != 0 { return }
    }

    /// Closes it, reporting what `close` says (a deferred write error, on some file systems).
    /// The descriptor is released either way.
    public consuming func close() throws(SystemError) {
        let rawValue = self.rawValue, closing = self.closing
        discard self
        guard let closing, closing(rawValue) != 0 else { return }
        throw .current
    }

    /// Hands the descriptor over to whoever closes it from now on (a library that takes it,
    /// such as libmicrohttpd its listening socket or a file it sends): it is not closed here.
    public consuming func release() -> Int32 {
        let rawValue = self.rawValue
        discard self
        return rawValue
    }

    /// A second descriptor for the same open file (`F_DUPFD_CLOEXEC`), owned and closed on its
    /// own: for a library that closes what it is given while this one stays open.
    public func duplicate() throws(SystemError) -> FileDescriptor {
        FileDescriptor(adopting: try retryOnInterrupt { fcntl(rawValue, F_DUPFD_CLOEXEC, 0) })
    }

    /// How it is opened for reading and writing.
    public enum AccessMode: Sendable {
        case readOnly, writeOnly, readWrite

        var rawValue: Int32 {
            switch self {
            case .readOnly: O_RDONLY
            case .writeOnly: O_WRONLY
            case .readWrite: O_RDWR
            }
        }
    }

    /// What else `open` does.
    public struct OpenOptions: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// Create the file if it does not exist.
        public static let create = OpenOptions(rawValue: O_CREAT)
        /// With `create`: fail (EEXIST) if it exists.
        public static let exclusive = OpenOptions(rawValue: O_EXCL)
        /// Cut an existing file to nothing.
        public static let truncate = OpenOptions(rawValue: O_TRUNC)
        /// Every write goes to the end of the file.
        public static let append = OpenOptions(rawValue: O_APPEND)
        /// Never wait in `open` or a read: a FIFO with no writer opens at once (and reads
        /// nothing) instead of blocking until one comes.
        public static let nonBlocking = OpenOptions(rawValue: O_NONBLOCK)
    }
}

extension FileDescriptor {
    /// Reads what is there, up to `buffer.count` bytes — at `offset` (pread) or at the
    /// descriptor's position (read). Fewer is not the end of the file; 0 is (or an empty
    /// `buffer`).
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64? = nil) throws(SystemError) -> Int {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return 0 }
        return try retryOnInterrupt {
            if let offset {
                pread(rawValue, base, buffer.count, off_t(offset))
            } else {
                Glibc.read(rawValue, base, buffer.count)
            }
        }
    }

    /// Fills `buffer`, reading again after a short read, unless the file ends first. Returns
    /// the number of bytes read: less than `buffer.count` only at the end of the file.
    public func readFully(
        into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64? = nil
    ) throws(SystemError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try read(
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset.map { $0 + UInt64(done) })
            if n == 0 { break }  // the end of the file
            done += n
        }
        return done
    }

    /// Up to `count` bytes, read fully: fewer only at the end of the file.
    public func read(count: Int, at offset: UInt64? = nil) throws(SystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(count, 0))
        // Result carries the typed error through withUnsafeMutableBytes, which rethrows any Error.
        let got = try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemError) in try readFully(into: buffer, at: offset) }
        }.get()
        bytes.removeLast(bytes.count - got)
        return bytes
    }

    /// Writes all of `buffer` — at `offset` (pwrite) or at the descriptor's position (write) —
    /// going on after a short write. A write that takes nothing counts as EIO.
    public func writeAll(_ buffer: UnsafeRawBufferPointer, at offset: UInt64? = nil) throws(SystemError) {
        guard let base = buffer.baseAddress else { return }
        var done = 0
        while done < buffer.count {
            let n = try retryOnInterrupt {
                if let offset {
                    pwrite(rawValue, base + done, buffer.count - done, off_t(offset) + off_t(done))
                } else {
                    write(rawValue, base + done, buffer.count - done)
                }
            }
            if n == 0 { throw SystemError(EIO) }
            done += n
        }
    }

    /// Writes all of `bytes`, as `writeAll(_:at:)` does.
    public func writeAll(_ bytes: [UInt8], at offset: UInt64? = nil) throws(SystemError) {
        try bytes.withUnsafeBytes { buffer in Result { () throws(SystemError) in try writeAll(buffer, at: offset) } }
            .get()
    }

    /// Writes `text` as UTF-8 in one piece where the system allows (one line from one thread
    /// never interleaves with another's on a pipe).
    public func writeAll(_ text: String) throws(SystemError) {
        var text = text
        try text.withUTF8 { bytes in Result { () throws(SystemError) in try writeAll(UnsafeRawBufferPointer(bytes)) } }
            .get()
    }

    /// Waits until what was written is on the disk (fsync).
    public func synchronize() throws(SystemError) {
        try retryOnInterrupt { fsync(rawValue) }
    }

    /// Cuts (or extends with zeros) the file to `length` bytes (ftruncate).
    public func truncate(to length: UInt64) throws(SystemError) {
        try retryOnInterrupt { ftruncate(rawValue, off_t(length)) }
    }

    /// Gives the file to `owner` and `group` (fchown; only root may give it away).
    public func changeOwner(to owner: UInt32, group: UInt32) throws(SystemError) {
        try retryOnInterrupt { fchown(rawValue, owner, group) }
    }

    /// What `fstat` says about the file.
    public func status() throws(SystemError) -> FileStatus {
        var info = stat()
        try retryOnInterrupt { fstat(rawValue, &info) }
        return FileStatus(info)
    }
}

/// What `fstat` or `lstat` reports of a file.
public struct FileStatus: Hashable, Sendable {
    public enum Kind: Hashable, Sendable {
        case regular, directory, symbolicLink, namedPipe, socket, device, other

        /// What it is, in words for a message: "a named pipe (FIFO)".
        public var description: String {
            switch self {
            case .regular: "a regular file"
            case .directory: "a directory"
            case .symbolicLink: "a symbolic link"
            case .namedPipe: "a named pipe (FIFO)"
            case .socket: "a socket"
            case .device: "a device"
            case .other: "something other than a file"
            }
        }
    }

    public var kind: Kind
    /// The length in bytes (0 for most devices).
    public var size: UInt64
    /// When its contents last changed, in seconds since 1970 (with the nanoseconds).
    public var modified: Double
    /// Its owner and group.
    public var owner: UInt32
    public var group: UInt32
    /// Its permission bits (`0o750`), with set-id and sticky bits.
    public var permissions: UInt32

    public var isDirectory: Bool { kind == .directory }

    init(_ info: stat) {
        kind =
            switch info.st_mode & S_IFMT {
            case S_IFREG: .regular
            case S_IFDIR: .directory
            case S_IFLNK: .symbolicLink
            case S_IFIFO: .namedPipe
            case S_IFSOCK: .socket
            case S_IFCHR, S_IFBLK: .device
            default: .other
            }
        size = UInt64(max(info.st_size, 0))
        modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        owner = info.st_uid
        group = info.st_gid
        permissions = UInt32(info.st_mode) & 0o7777
    }
}
