internal import Glibc

/// Calls relative to an open directory (`openat`, `mkdirat`, `unlinkat`, `fstatat`,
/// `renameat`): what lives under a directory is reached through the directory itself, so a
/// name can never lead through a symbolic link planted in it, and a directory renamed or
/// replaced meanwhile is not followed to its new place. `name` is a single path component.
extension FileDescriptor {
    /// Opens the directory at `path` (a symbolic link to a directory is followed: this is the
    /// place everything else is relative to).
    public init(openingDirectory path: String) throws(SystemError) {
        self.init(adopting: try retryOnInterrupt { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) })
    }

    /// Opens the directory `name` in this one; a symbolic link is refused (ELOOP or ENOTDIR).
    public func openDirectory(named name: String) throws(SystemError) -> FileDescriptor {
        FileDescriptor(
            adopting: try retryOnInterrupt { openat(rawValue, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) })
    }

    /// Opens the regular file `name` in this directory, never through a symbolic link (ELOOP),
    /// always close-on-exec; `.create` with `.exclusive` makes a new file or fails (EEXIST).
    ///
    /// Anything that is not a regular file — a named pipe, a device, a socket, a directory —
    /// is refused (`notARegularFile`) without waiting and without being opened when it can be
    /// seen first: opening a named pipe that nobody writes waits for ever (and a signal does
    /// not end the wait), and opening a device may act on it. What was there is looked at
    /// first (`fstatat`); the open itself does not wait (`O_NONBLOCK`) in case something else
    /// took the name meanwhile, and what it opened is checked again before it is used, in
    /// the usual blocking mode.
    public func openFile(
        named name: String, _ access: AccessMode, options: OpenOptions = [], permissions: UInt32 = 0o666
    ) throws(SystemError) -> FileDescriptor {
        do throws(SystemError) {
            let kind = try status(ofEntry: name).kind
            if kind != .regular && kind != .symbolicLink { throw SystemError.notARegularFile }
        } catch {
            if !error.isMissing { throw error }
        }
        let flags = access.rawValue | options.rawValue | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK
        let opened: Int32
        do throws(SystemError) {
            opened = try retryOnInterrupt { openat(rawValue, name, flags, permissions) }
        } catch {
            // A named pipe with no reader, opened to write without waiting, says ENXIO.
            if error.code == ENXIO { throw SystemError.notARegularFile }
            throw error
        }
        let file = FileDescriptor(adopting: opened)
        guard try file.status().kind == .regular else { throw SystemError.notARegularFile }
        let mode = try retryOnInterrupt { fcntl(file.rawValue, F_GETFL) }
        try retryOnInterrupt { fcntl(file.rawValue, F_SETFL, mode & ~O_NONBLOCK) }
        return file
    }

    /// Makes the directory `name` in this one; EEXIST when something has the name.
    public func makeDirectory(named name: String, permissions: UInt32 = 0o777) throws(SystemError) {
        try retryOnInterrupt { mkdirat(rawValue, name, permissions) }
    }

    /// What `name` in this directory is, not following a symbolic link (`fstatat`).
    public func status(ofEntry name: String) throws(SystemError) -> FileStatus {
        var info = stat()
        try retryOnInterrupt { fstatat(rawValue, name, &info, AT_SYMLINK_NOFOLLOW) }
        return FileStatus(info)
    }

    /// Removes the name `name` (a file or a link) from this directory.
    public func removeFile(named name: String) throws(SystemError) {
        try retryOnInterrupt { unlinkat(rawValue, name, 0) }
    }

    /// Removes the empty directory `name` from this one (ENOTEMPTY when it is not empty).
    public func removeDirectory(named name: String) throws(SystemError) {
        try retryOnInterrupt { unlinkat(rawValue, name, AT_REMOVEDIR) }
    }

    /// Renames `name` to `newName`, both in this directory, replacing what was there at once.
    public func rename(named name: String, to newName: String) throws(SystemError) {
        try retryOnInterrupt { renameat(rawValue, name, rawValue, newName) }
    }

    /// The names in this directory (without `.` and `..`), in the order the file system gives them.
    public func entries() throws(SystemError) -> [String] {
        // fdopendir takes the descriptor it is given: hand it a duplicate, closed with the stream.
        let copy = try retryOnInterrupt { fcntl(rawValue, F_DUPFD_CLOEXEC, 0) }
        guard let directory = fdopendir(copy) else {
            let failure = SystemError.current
            _ = Glibc.close(copy)
            throw failure
        }
        defer { closedir(directory) }
        rewinddir(directory)
        return try Paths.names(in: directory)
    }

    /// Bytes an unprivileged user may still write on this file's file system (`fstatvfs`).
    public func availableBytes() throws(SystemError) -> Int64 {
        var info = statvfs()
        try retryOnInterrupt { fstatvfs(rawValue, &info) }
        return Int64(clamping: UInt64(info.f_bavail) &* UInt64(info.f_frsize))
    }

    /// Takes the exclusive lock on the open file (`flock`), without waiting: EWOULDBLOCK when
    /// another open file description holds it. Released when the last descriptor of this open
    /// goes, so a process that dies — however — lets go of it.
    public func lockExclusively() throws(SystemError) {
        try retryOnInterrupt { flock(rawValue, LOCK_EX | LOCK_NB) }
    }

    /// How many names the open file still has (0 once it was removed while open).
    public func linkCount() throws(SystemError) -> Int {
        var info = stat()
        try retryOnInterrupt { fstat(rawValue, &info) }
        return Int(info.st_nlink)
    }
}

extension SystemError {
    /// Another process holds the lock (EWOULDBLOCK).
    public var isLocked: Bool { code == EWOULDBLOCK }
    /// A symbolic link was met where none may be (ELOOP, or ENOTDIR for a link to a file).
    public var isLink: Bool { code == ELOOP }
}
