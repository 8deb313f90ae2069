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
    let temporary = path + ".new"
    do {
        let file = try FileDescriptor(opening: temporary, .writeOnly, options: [.create, .truncate])
        try file.writeAll(text)
        try file.synchronize()
        try file.close()
        try Paths.rename(temporary, to: path)
    } catch {
        try? Paths.removeFile(temporary)
        throw FileError(path: path, operation: "write", error)
    }
}
