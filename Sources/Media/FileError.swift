/// A failed file operation: which file, what was attempted, and why — "cannot write
/// /var/lib/vigil/clips/…/shed-….mov: no space left on the device". The one error type of every
/// file effect (movie files, the events journal, the storage directory), whichever module
/// performs it, so that a full disk is recognised the same way everywhere.
public struct FileError: Error, CustomStringConvertible, Sendable, Equatable {
    public var path: String
    public var operation: String
    public var reason: String
    /// The file system is out of space (ENOSPC or EDQUOT): retention can make room.
    public var isOutOfSpace: Bool
    /// There is no such file (ENOENT).
    public var isMissing: Bool
    /// Something already has the name (a new file is never made over an old one).
    public var isAlreadyThere: Bool
    /// Another process holds the file (a running agent writing the clip, or the storage directory).
    public var isInUse: Bool
    /// The file system is mounted read-only (EROFS): waited for, like a disk not mounted yet.
    public var isReadOnly: Bool
    /// The name is something other than a regular file (a named pipe, a device, a directory, a
    /// symbolic link): refused without opening it.
    public var isNotRegularFile: Bool

    public init(
        path: String, operation: String, reason: String, isOutOfSpace: Bool = false, isMissing: Bool = false,
        isAlreadyThere: Bool = false, isInUse: Bool = false, isReadOnly: Bool = false, isNotRegularFile: Bool = false
    ) {
        self.path = path
        self.operation = operation
        self.reason = reason
        self.isOutOfSpace = isOutOfSpace
        self.isMissing = isMissing
        self.isAlreadyThere = isAlreadyThere
        self.isInUse = isInUse
        self.isReadOnly = isReadOnly
        self.isNotRegularFile = isNotRegularFile
    }

    public var description: String { "cannot \(operation) \(path): \(reason)" }
}
