internal import Glibc

/// Calls on paths rather than open descriptors: what a directory holds, a path's own status
/// (never through a symbolic link), making and removing directories, removing and renaming
/// files, and the free space of a file system. Each throws the `SystemError` of a failure.
public enum Paths {
    /// The names in the directory `path` (without `.` and `..`), in the order the file system
    /// gives them.
    public static func contents(ofDirectory path: String) throws(SystemError) -> [String] {
        guard let directory = opendir(path) else { throw .current }
        defer { closedir(directory) }
        return try names(in: directory)
    }

    /// The names an open directory stream holds from where it is (without `.` and `..`).
    static func names(in directory: OpaquePointer) throws(SystemError) -> [String] {
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw .current }
                return names
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    /// What `path` itself is (`lstat`): a symbolic link is reported as one, not followed.
    public static func status(ofLink path: String) throws(SystemError) -> FileStatus {
        var info = stat()
        try retryOnInterrupt { lstat(path, &info) }
        return FileStatus(info)
    }

    /// What `path` leads to (`stat`): a symbolic link is followed.
    public static func status(_ path: String) throws(SystemError) -> FileStatus {
        var info = stat()
        try retryOnInterrupt { stat(path, &info) }
        return FileStatus(info)
    }

    /// Makes the directory `path` (its parent must exist); EEXIST when something is there.
    public static func makeDirectory(_ path: String, permissions: UInt32 = 0o777) throws(SystemError) {
        try retryOnInterrupt { mkdir(path, permissions) }
    }

    /// Removes the empty directory `path`; ENOTEMPTY when it is not empty.
    public static func removeDirectory(_ path: String) throws(SystemError) {
        try retryOnInterrupt { rmdir(path) }
    }

    /// Removes the name `path` (a file or a link, never a directory).
    public static func removeFile(_ path: String) throws(SystemError) {
        try retryOnInterrupt { unlink(path) }
    }

    /// Renames `source` to `destination`, replacing what was there in one step.
    public static func rename(_ source: String, to destination: String) throws(SystemError) {
        try retryOnInterrupt { Glibc.rename(source, destination) }
    }

    /// Bytes an unprivileged user may still write on the file system holding `path`.
    public static func availableBytes(onFileSystemOf path: String) throws(SystemError) -> Int64 {
        var info = statvfs()
        try retryOnInterrupt { statvfs(path, &info) }
        return Int64(clamping: UInt64(info.f_bavail) &* UInt64(info.f_frsize))
    }
}
