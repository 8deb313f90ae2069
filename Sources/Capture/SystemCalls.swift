internal import Glibc

/// An `errno` value from a failed call (or the negated value an ALSA call returns).
struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
    let code: Int32

    init(_ code: Int32) { self.code = code }

    /// The C library's text for it, with the symbolic name when it is a common one:
    /// "No such device (ENODEV)".
    var description: String {
        let text = String(cString: strerror(code))
        return SystemError.names[code].map { "\(text) (\($0))" } ?? text
    }

    static let names: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", ENXIO: "ENXIO", EBADF: "EBADF",
        EAGAIN: "EAGAIN", ENOMEM: "ENOMEM", EACCES: "EACCES", EFAULT: "EFAULT", EBUSY: "EBUSY",
        ENODEV: "ENODEV", ENOTDIR: "ENOTDIR", EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE",
        ENOTTY: "ENOTTY", ENOSPC: "ENOSPC", EPIPE: "EPIPE", ERANGE: "ERANGE", ESTRPIPE: "ESTRPIPE",
        ENOLINK: "ENOLINK", ETIMEDOUT: "ETIMEDOUT", ELOOP: "ELOOP", ENAMETOOLONG: "ENAMETOOLONG",
        EOPNOTSUPP: "EOPNOTSUPP", ESHUTDOWN: "ESHUTDOWN",
    ]
}

/// Runs a system call that returns -1 and sets `errno` on failure, again as long as it fails
/// with EINTR (a signal arrived). The one place where Capture retries interrupted calls.
@discardableResult
func systemCall(_ call: () -> Int32) throws(SystemError) -> Int32 {
    while true {
        let result = call()
        if result != -1 { return result }
        let code = errno
        if code != EINTR { throw SystemError(code) }
    }
}

/// Runs an ALSA call that returns a negative error number on failure, again as long as it
/// fails with -EINTR.
@discardableResult
func alsaCall<Result: BinaryInteger>(_ call: () -> Result) throws(SystemError) -> Result {
    while true {
        let result = call()
        if result >= 0 { return result }
        let code = Int32(truncatingIfNeeded: -Int64(result))
        if code != EINTR { throw SystemError(code) }
    }
}

/// A C character array (a fixed-size tuple such as `v4l2_capability.card`) as a String,
/// up to its first NUL.
func string<Tuple>(fromCharacters tuple: Tuple) -> String {
    withUnsafeBytes(of: tuple) { bytes in
        String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
    }
}
