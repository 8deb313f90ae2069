internal import CZlib
internal import Glibc

/// Whole small files through zlib's gzip reader, which reads a plain file as it is and a
/// gzip'd one uncompressed.
enum GzipFile {
    /// The uncompressed bytes of `path`, at most `limit` of them.
    ///
    /// A missing file is `.fontMissing`; a read error, a damaged or cut-short gzip stream and
    /// a file larger than `limit` are `.fontUnreadable` or `.fontInvalid` with the reason.
    static func read(path: String, limit: Int) throws(OverlayError) -> [UInt8] {
        // "e": close-on-exec, so a hook the agent starts meanwhile does not inherit it.
        guard let file = gzopen(path, "rbe") else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { throw .fontMissing(path: path) }
            // zlib's own failure (an allocation) leaves errno 0.
            throw .fontUnreadable(path: path, reason: code == 0 ? "zlib could not open it" : systemMessage(code))
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        var failure: OverlayError?
        while true {
            let got = chunk.withUnsafeMutableBytes { gzread(file, $0.baseAddress, UInt32($0.count)) }
            if got < 0 {
                failure = .fontUnreadable(path: path, reason: zlibMessage(file, path: path))
                break
            }
            if got == 0 { break }
            guard bytes.count + Int(got) <= limit else {
                failure = .fontInvalid(
                    path: path,
                    problem: "more than \(limit) bytes uncompressed, over the limit (a console font takes a few KiB)")
                break
            }
            bytes += chunk[0..<Int(got)]
        }
        if failure == nil {
            // A gzip stream cut short reads as its bytes so far and an end of file; zlib says so
            // in the last error, and again from gzclose_r.
            var code: Int32 = 0
            _ = gzerror(file, &code)
            if code != Z_OK {
                failure = .fontUnreadable(path: path, reason: zlibMessage(file, path: path))
            }
        }
        let closed = gzclose_r(file)
        if let failure { throw failure }
        guard closed == Z_OK else {
            throw .fontUnreadable(
                path: path,
                reason: closed == Z_BUF_ERROR ? "the gzip stream is cut short" : "zlib error \(closed) on closing it")
        }
        return bytes
    }

    /// zlib's description of the last error on `file` (without the path zlib puts first), or
    /// the system's for an I/O error.
    private static func zlibMessage(_ file: gzFile, path: String) -> String {
        var code: Int32 = 0
        var text = gzerror(file, &code).map { String(cString: $0) } ?? ""
        if text.hasPrefix(path + ": ") { text.removeFirst(path.count + 2) }
        if code == Z_ERRNO { return systemMessage(errno) }
        if code == Z_BUF_ERROR { return "the gzip stream is cut short (\(text))" }
        if code == Z_DATA_ERROR { return "the gzip data is damaged (\(text))" }
        return text.isEmpty ? "zlib error \(code)" : text
    }

    private static func systemMessage(_ code: Int32) -> String {
        strerror(code).map { String(cString: $0).lowercased() } ?? "error \(code)"
    }
}
