import FoundationEssentials
import Media
internal import POSIX
import QuickTime
import Recorder

/// The storage directory on disk: `ClipStorage` with POSIX calls. The storage directory itself
/// may be reached through a symbolic link (`/var/lib/vigil/clips` → a USB disk); below it,
/// relative paths with `..` in them are refused, a walk never enters a symbolic link, and only
/// regular files are deleted.
public final class DiskStorage: ClipStorage {
    public let root: String
    /// How deep a walk goes below the root (the default pattern uses one level).
    public static let walkDepth = 8

    public init(root: String) {
        self.root = root
    }

    /// Makes the storage directory (and the directories above it) when it is not there yet.
    public func createRoot() throws(FileError) {
        try makeDirectories(root, operation: "create the directory")
    }

    public func walk() throws(FileError) -> [StoredFile] {
        let status: FileStatus
        do { status = try Paths.status(root) } catch {
            throw FileError(path: root, operation: "read the storage directory", error)
        }
        guard status.isDirectory else {
            throw FileError(path: root, operation: "read the storage directory", reason: "it is not a directory")
        }
        var found: [StoredFile] = []
        func walk(_ relative: String, depth: Int) {
            guard depth < DiskStorage.walkDepth,
                let names = try? Paths.contents(ofDirectory: relative.isEmpty ? root : path(relative))
            else { return }
            for name in names.sorted() {
                let child = relative.isEmpty ? name : relative + "/" + name
                guard let status = try? Paths.status(ofLink: path(child)) else { continue }
                switch status.kind {
                case .directory: walk(child, depth: depth + 1)
                case .regular:
                    found.append(
                        StoredFile(
                            relativePath: child, size: Int64(clamping: status.size),
                            modified: Date(timeIntervalSince1970: status.modified)))
                case .symbolicLink, .other: continue
                }
            }
        }
        walk("", depth: 0)
        return found
    }

    public func freeBytes() throws(FileError) -> Int64 {
        do { return try Paths.availableBytes(onFileSystemOf: root) } catch {
            throw FileError(path: root, operation: "read the free space of", error)
        }
    }

    public func exists(_ relativePath: String) -> Bool {
        guard let path = try? checked(relativePath, "look up") else { return false }
        return (try? Paths.status(ofLink: path)) != nil
    }

    public func delete(_ relativePath: String) throws(FileError) {
        let path = try checked(relativePath, "delete")
        let status: FileStatus
        do { status = try Paths.status(ofLink: path) } catch { throw FileError(path: path, operation: "delete", error) }
        guard status.kind == .regular else {
            throw FileError(path: path, operation: "delete", reason: "it is not a regular file; refusing")
        }
        do { try Paths.removeFile(path) } catch { throw FileError(path: path, operation: "delete", error) }
        // The directories the pattern made for it go when they are left empty (rmdir refuses
        // anything else).
        var parts = relativePath.split(separator: "/").dropLast()
        while !parts.isEmpty, (try? Paths.removeDirectory(self.path(parts.joined(separator: "/")))) != nil {
            parts = parts.dropLast()
        }
    }

    public func createMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        let path = try checked(relativePath, "create")
        try makeDirectories(path.withoutLastPathComponent, operation: "create")
        return try FileMovieOutput(creating: path)
    }

    public func openMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        try FileMovieOutput(updating: try checked(relativePath, "open"))
    }

    public func read(_ relativePath: String) throws(FileError) -> [UInt8]? {
        let path = try checked(relativePath, "read")
        do {
            let file = try FileDescriptor(opening: path, .readOnly)
            return try file.read(count: Int(try file.status().size))
        } catch {
            if error.isMissing { return nil }
            throw FileError(path: path, operation: "read", error)
        }
    }

    public func append(_ bytes: [UInt8], to relativePath: String) throws(FileError) {
        let path = try checked(relativePath, "append to")
        do {
            let file = try FileDescriptor(opening: path, .writeOnly, options: [.create, .append])
            try file.writeAll(bytes)
            try file.synchronize()
        } catch {
            throw FileError(path: path, operation: "append to", error)
        }
    }

    public func replace(_ relativePath: String, with bytes: [UInt8]) throws(FileError) {
        try replaceFile(at: try checked(relativePath, "replace"), with: bytes, operation: "replace")
    }

    /// The absolute path of `relativePath`, refused when it could lead out of the directory.
    private func checked(_ relativePath: String, _ operation: String) throws(FileError) -> String {
        let parts = relativePath.split(separator: "/", omittingEmptySubsequences: false)
        guard !relativePath.hasPrefix("/"), !parts.contains(".."), !parts.contains("") else {
            throw FileError(
                path: path(relativePath), operation: operation, reason: "the name leads out of \(root); refusing")
        }
        return path(relativePath)
    }

    /// `mkdir -p`: makes `directory` and any directory above it that is missing. An existing
    /// directory may be reached through a symbolic link, as `mkdir -p` allows.
    private func makeDirectories(_ directory: String, operation: String) throws(FileError) {
        guard !directory.isEmpty, (try? Paths.status(directory))?.isDirectory != true else { return }
        try makeDirectories(directory.withoutLastPathComponent, operation: operation)
        do { try Paths.makeDirectory(directory) } catch {
            guard error.alreadyExists else { throw FileError(path: directory, operation: operation, error) }
            if (try? Paths.status(directory))?.isDirectory == true { return }
            throw FileError(path: directory, operation: operation, reason: "it exists and is not a directory")
        }
    }
}

extension FileError {
    /// The error of a failed POSIX call: "no space left on the device" (and `isOutOfSpace`)
    /// for ENOSPC and EDQUOT, the C library's words for any other error.
    init(path: String, operation: String, _ error: SystemError) {
        let reason = error.isOutOfSpace ? "no space left on the device" : error.text
        self.init(
            path: path, operation: operation, reason: reason, isOutOfSpace: error.isOutOfSpace,
            isMissing: error.isMissing)
    }
}

extension EventsJournal {
    /// The journal in the storage directory `directory` on disk.
    public init(directory: String) {
        self.init(storage: DiskStorage(root: directory))
    }
}
