import Media
internal import POSIX

/// Writes `text` to `fd` in one piece (one line from one thread never interleaves with
/// another's), giving up quietly on an error: for standard output and standard error, where
/// a closed pipe (`vigil clips | head`) must not stop the program. `fd` stays open.
public func writeAll(_ text: String, to fd: Int32) {
    _ = try? FileDescriptor(unowned: fd).writeAll(text)
}

/// Writes `text` to the file at `path` at once: written beside it, synced, renamed over it
/// (what `vigil analyze --csv` and `--plot` write).
public func writeFile(_ text: String, to path: String) throws(FileError) {
    try replaceFile(at: path, with: Array(text.utf8), operation: "write")
}

/// Writes `bytes` to the file at `path` at once, as `writeFile(_:to:)` writes text (what
/// `vigil analyze --mask-image` writes).
public func writeFile(bytes: [UInt8], to path: String) throws(FileError) {
    try replaceFile(at: path, with: bytes, operation: "write")
}

/// Replaces the file at `path` with `bytes` at once (POSIX's durable replace): written beside
/// it (`PATH.new`), synced, renamed over it, so that a crash leaves the old file or the new
/// one, never a mix.
func replaceFile(at path: String, with bytes: [UInt8], operation: String) throws(FileError) {
    do { try Paths.replaceFile(path, with: bytes) } catch {
        throw FileError(path: path, operation: operation, error)
    }
}
