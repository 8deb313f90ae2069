internal import Glibc

/// An `errno` value from a failed call (or the error number a call returned instead, such as
/// ALSA's negated codes or `clock_nanosleep`'s result).
///
/// `description` gives the C library's words with the symbolic name when it is a common one:
/// "No such device (ENODEV)"; `text` the words alone: "Is a directory".
public struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: Int32

    public init(_ code: Int32) { self.code = code }

    /// The error the last failed call on this thread left in `errno` — a C library's own calls
    /// (libmosquitto's) too; code 0 when none failed since `clearCurrent()`.
    public static var current: SystemError { SystemError(errno) }

    /// Sets `errno` to 0, so that `current` after a call tells whether that call set one.
    public static func clearCurrent() { errno = 0 }

    /// The C library's words for it (`strerror`): "No space left on device".
    public var text: String { String(cString: strerror(code)) }

    /// The symbolic name ("ENODEV") when it is a common one, else nil.
    public var name: String? { SystemError.names[code] }

    public var description: String {
        name.map { "\(text) (\($0))" } ?? text
    }

    /// ENOSPC or EDQUOT: the disk (or the user's quota) is full.
    public var isOutOfSpace: Bool { code == ENOSPC || code == EDQUOT }
    /// No such file or directory (ENOENT).
    public var isMissing: Bool { code == ENOENT }
    /// The file system is mounted read-only (EROFS): a card the kernel remounted after an
    /// error, or a disk mounted so.
    public var isReadOnly: Bool { code == EROFS }
    /// The device failed (EIO): a disk going bad, or one pulled out while mounted.
    public var isInputOutput: Bool { code == EIO }
    /// The user may not do it (EACCES or EPERM).
    public var isPermissionDenied: Bool { code == EACCES || code == EPERM }
    /// A path component is not a directory (ENOTDIR), as a link to a file is when opened as one.
    public static let notADirectory = SystemError(ENOTDIR)
    /// What a caller throws when an entry is not the regular file it must be (EFTYPE has no
    /// Linux number; EISDIR stands in, and callers give their own words).
    public static let notARegularFile = SystemError(EISDIR)
    /// Another socket is bound to the address and port (EADDRINUSE).
    public var isAddressInUse: Bool { code == EADDRINUSE }
    /// The address is not one of this machine's (EADDRNOTAVAIL).
    public var isAddressNotAvailable: Bool { code == EADDRNOTAVAIL }
    /// Something already has the name (EEXIST).
    public var alreadyExists: Bool { code == EEXIST }
    /// What a caller throws when a name it must not replace is taken (EEXIST).
    public static let alreadyThere = SystemError(EEXIST)

    private static let names: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", ENXIO: "ENXIO", EBADF: "EBADF",
        EAGAIN: "EAGAIN", ENOMEM: "ENOMEM", EACCES: "EACCES", EFAULT: "EFAULT", EBUSY: "EBUSY",
        ENODEV: "ENODEV", ENOTDIR: "ENOTDIR", EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE",
        ENOTTY: "ENOTTY", ENOSPC: "ENOSPC", EPIPE: "EPIPE", ERANGE: "ERANGE", ESTRPIPE: "ESTRPIPE",
        ENOLINK: "ENOLINK", ETIMEDOUT: "ETIMEDOUT", ELOOP: "ELOOP", ENAMETOOLONG: "ENAMETOOLONG",
        EOPNOTSUPP: "EOPNOTSUPP", ESHUTDOWN: "ESHUTDOWN", ECONNREFUSED: "ECONNREFUSED", EADDRINUSE: "EADDRINUSE",
        EADDRNOTAVAIL: "EADDRNOTAVAIL", EROFS: "EROFS",
    ]
}

/// The process itself: its id, the user it runs as, its open-file limit, its end.
public enum ProcessID {
    public static var current: Int32 { getpid() }
    /// True when the process runs as root (its effective user).
    public static var isRoot: Bool { geteuid() == 0 }
    /// The user the process runs as (its effective user id).
    public static var userID: UInt32 { geteuid() }
    /// How many descriptors the process may have open (RLIMIT_NOFILE's soft limit); nil when
    /// there is no limit or it cannot be read.
    public static var openFileLimit: Int? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max
        else { return nil }
        return Int(clamping: limit.rlim_cur)
    }

    /// Ends the process with `status` (`exit`: standard output is flushed, as at the end of
    /// `main`).
    public static func exit(_ status: Int32) -> Never { Glibc.exit(status) }
}
