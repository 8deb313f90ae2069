internal import POSIX

/// Writes `text` to `fd` in one piece (one line from one thread never interleaves with
/// another's), giving up quietly on an error: for standard output and standard error, where
/// a closed pipe (`vigil clips | head`) must not stop the program. `fd` stays open.
public func writeAll(_ text: String, to fd: Int32) {
    _ = try? FileDescriptor(unowned: fd).writeAll(text)
}
