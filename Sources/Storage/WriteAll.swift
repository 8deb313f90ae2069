internal import Glibc

/// Writes all of `bytes` to `fd` — at `offset` (pwrite) or at the descriptor's position
/// (write) — retrying on EINTR and going on after a short write. Nil when all were written,
/// else the errno (EIO when the system took nothing).
public func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32, at offset: UInt64? = nil) -> Int32? {
    guard let base = bytes.baseAddress else { return nil }
    var done = 0
    while done < bytes.count {
        let n = offset.map { pwrite(fd, base + done, bytes.count - done, off_t($0) + off_t(done)) } ?? write(fd, base + done, bytes.count - done)
        if n < 0 {
            if errno == EINTR { continue }
            return errno
        }
        if n == 0 { return EIO }
        done += n
    }
    return nil
}

/// Writes `text` to `fd` in one piece (one line from one thread never interleaves with
/// another's), giving up quietly on an error: for standard output and standard error, where
/// a closed pipe (`vigil clips | head`) must not stop the program.
public func writeAll(_ text: String, to fd: Int32) {
    var text = text
    _ = text.withUTF8 { writeAll(UnsafeRawBufferPointer($0), to: fd) }
}
