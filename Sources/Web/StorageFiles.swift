import POSIX

/// The files the web server may send from the storage directory: clips (`.mov`) and their
/// pictures (`.jpg`, `latest.jpg` among them), reached from the directory itself one
/// component at a time, never through a symbolic link, never a hidden name (the lock, the
/// journal's replacements, a fragment being hidden), never above the directory.
struct StorageFiles: Sendable {
    /// The storage directory (`storage.path`).
    let root: String

    enum Refusal: Error, Equatable {
        /// Not a path this server gives out (a bad name, `..`, a hidden or other file): 404.
        case notServed
        /// It may be served, but it is not there (deleted by retention, say): 404.
        case missing
        /// It is there but cannot be read now (permissions, an I/O error): 503.
        case unreadable(String)
    }

    /// The content type of what may be served at `relativePath`, or nil for a name that is not.
    static func contentType(_ relativePath: String) -> String? {
        // A browser plays a QuickTime movie of H.264 and AAC when it is called an MP4.
        if relativePath.hasSuffix(".mov") { return "video/mp4" }
        if relativePath.hasSuffix(".jpg") { return "image/jpeg" }
        return nil
    }

    /// The path components of `relativePath`, or nil when it is not a plain relative path of
    /// at most 8 visible names (no empty, `.`, `..` or hidden component, no backslash or NUL).
    static func components(_ relativePath: String) -> [String]? {
        let parts = relativePath.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard !parts.isEmpty, parts.count <= 8 else { return nil }
        for part in parts {
            guard !part.isEmpty, !part.hasPrefix("."), part.utf8.count <= 255,
                !part.contains("\\"), !part.utf8.contains(0)
            else { return nil }
        }
        return parts
    }

    /// Opens `relativePath` for sending.
    func open(_ relativePath: String) throws(Refusal) -> SharedFile {
        guard Self.contentType(relativePath) != nil, let parts = Self.components(relativePath) else {
            throw .notServed
        }
        do throws(SystemError) {
            var directory = try FileDescriptor(openingDirectory: root)
            for name in parts.dropLast() {
                directory = try directory.openDirectory(named: name)
            }
            return try SharedFile(directory.openFile(named: parts[parts.count - 1], .readOnly))
        } catch {
            if error.isMissing { throw .missing }
            // A symbolic link (ELOOP), a file where a directory was asked (ENOTDIR), something
            // that is not a regular file: not ours to give out.
            if error == .notADirectory || error == .notARegularFile || error.name == "ELOOP" { throw .notServed }
            throw .unreadable(error.description)
        }
    }
}
