import FoundationEssentials
import Media
internal import POSIX
import QuickTime
import Recorder

/// The storage directory on disk: `ClipStorage` with POSIX calls.
///
/// The storage directory itself may be reached through a symbolic link (`/var/lib/vigil/clips`
/// → a USB disk). Below it everything is reached through the directory's own descriptor
/// (`openat`, `mkdirat`, `unlinkat`, `fstatat`, `renameat`), one component at a time, never
/// through a symbolic link: a link planted with a clip's name, or a dated directory that is a
/// link, is refused, not followed. A new file is made with `O_EXCL` (never over an old one);
/// relative paths with `..` are refused; a walk never enters a link; only regular files are
/// deleted. A clip being written holds its file's lock, so repair (here or `vigil repair`)
/// leaves it alone; the agent holds the directory's lock (`claim`).
public final class DiskStorage: ClipStorage {
    public let root: String
    /// How deep a walk goes below the root, in path components (a clip's name included): as
    /// deep as a valid `file_pattern` can go.
    public static let walkDepth = ClipPathLimits.maximumComponents
    /// The file whose lock says an agent records into this directory, and its pid.
    public static let lockName = ".vigil.lock"

    public init(root: String) {
        self.root = root
    }

    /// Makes the storage directory when it is not there yet. Its parent must exist: a missing
    /// parent (a disk not mounted yet) is `isMissing`, waited for rather than made — the
    /// recording must not go to the disk the mount point sits on.
    public func createRoot() throws(FileError) {
        if (try? Paths.status(root))?.isDirectory == true { return }
        let parent = root.withoutLastPathComponent.isEmpty ? "." : root.withoutLastPathComponent
        guard (try? Paths.status(parent))?.isDirectory == true else {
            throw FileError(
                path: root, operation: "create the directory", reason: "the directory \(parent) does not exist",
                isMissing: true)
        }
        do { try Paths.makeDirectory(root) } catch {
            guard error.alreadyExists else { throw FileError(path: root, operation: "create the directory", error) }
            if (try? Paths.status(root))?.isDirectory == true { return }
            throw FileError(path: root, operation: "create the directory", reason: "it exists and is not a directory")
        }
    }

    public func walk() throws(FileError) -> [StoredFile] {
        let directory: FileDescriptor
        do { directory = try FileDescriptor(openingDirectory: root) } catch {
            throw FileError(path: root, operation: "read the storage directory", error)
        }
        var found: [StoredFile] = []
        func walk(_ directory: borrowing FileDescriptor, _ prefix: String, depth: Int) {
            guard let names = try? directory.entries() else { return }
            for name in names.sorted() {
                let relative = prefix + name
                guard let status = try? directory.status(ofEntry: name) else { continue }
                switch status.kind {
                case .directory:
                    guard depth + 1 < DiskStorage.walkDepth, let sub = try? directory.openDirectory(named: name) else {
                        continue
                    }
                    walk(sub, relative + "/", depth: depth + 1)
                case .regular:
                    found.append(
                        StoredFile(
                            relativePath: relative, size: Int64(clamping: status.size),
                            modified: Date(timeIntervalSince1970: status.modified)))
                case .symbolicLink, .namedPipe, .socket, .device, .other:
                    continue
                }
            }
        }
        walk(directory, "", depth: 0)
        return found
    }

    public func freeBytes() throws(FileError) -> Int64 {
        do { return try FileDescriptor(openingDirectory: root).availableBytes() } catch {
            throw FileError(path: root, operation: "read the free space of", error)
        }
    }

    public func exists(_ relativePath: String) -> Bool {
        (try? inParent(of: relativePath, "look up") { directory, name throws(SystemError) in
            _ = try directory.status(ofEntry: name)
        }) != nil
    }

    public func delete(_ relativePath: String) throws(FileError) {
        try inParent(of: relativePath, "delete") { directory, name throws(SystemError) in
            guard try directory.status(ofEntry: name).kind == .regular else { throw SystemError.notARegularFile }
            try directory.removeFile(named: name)
            // The deletion made durable (a failure here does not undo it: a power cut would
            // bring the file back, and retention deletes it again).
            try? directory.synchronize()
        }
        // The directories the pattern made for it go when they are left empty (rmdir refuses
        // anything else), each removal made durable in turn.
        var parts = relativePath.split(separator: "/").map(String.init).dropLast()
        while let last = parts.popLast() {
            let removed: Void? = try? inParent(of: (parts + [last]).joined(separator: "/"), "delete") {
                directory, name throws(SystemError) in
                try directory.removeDirectory(named: name)
                try? directory.synchronize()
            }
            if removed == nil { break }
        }
    }

    public func createMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        let path = self.path(relativePath)
        return try inParent(of: relativePath, "create", creatingDirectories: true) {
            directory, name throws(SystemError) in
            let file = try directory.openFile(named: name, .readWrite, options: [.create, .exclusive])
            try file.lockExclusively()
            // The new name is durable before the clip counts as started.
            try directory.synchronize()
            return FileMovieOutput(adopting: file, path: path, length: 0)
        }
    }

    public func readMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        let path = self.path(relativePath)
        return try inParent(of: relativePath, "open") { directory, name throws(SystemError) in
            let file = try directory.openFile(named: name, .readOnly)
            let length = try file.status().size
            return FileMovieOutput(adopting: file, path: path, length: length)
        }
    }

    public func openMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        let path = self.path(relativePath)
        let result: Result<FileMovieOutput, FileError> = try inParent(of: relativePath, "open") {
            directory, name throws(SystemError) in
            let file = try directory.openFile(named: name, .readWrite)
            do throws(FileError) { try FileMovieOutput.lock(file, path) } catch { return .failure(error) }
            let length = try file.status().size
            return .success(FileMovieOutput(adopting: file, path: path, length: length))
        }
        return try result.get()
    }

    public func read(_ relativePath: String) throws(FileError) -> [UInt8]? {
        do {
            return try inParent(of: relativePath, "read") { directory, name throws(SystemError) in
                let file = try directory.openFile(named: name, .readOnly)
                return try file.read(count: Int(try file.status().size))
            }
        } catch {
            if error.isMissing { return nil }
            throw error
        }
    }

    public func readTail(_ relativePath: String, maxBytes: Int) throws(FileError) -> FileTail? {
        do {
            return try inParent(of: relativePath, "read") { directory, name throws(SystemError) in
                let file = try directory.openFile(named: name, .readOnly)
                let status = try file.status()
                let size = status.size
                let count = Int(min(UInt64(max(0, maxBytes)), size))
                return FileTail(
                    bytes: try file.read(count: count, at: size - UInt64(count)), size: Int64(size),
                    modified: Date(timeIntervalSince1970: status.modified))
            }
        } catch {
            if error.isMissing { return nil }
            throw error
        }
    }

    /// Appends `bytes` whole or not at all, and syncs them. When the file does not end in a
    /// newline (a write a crash cut short), a newline goes first, so the new line is never
    /// glued to a torn one.
    public func append(_ bytes: [UInt8], to relativePath: String) throws(FileError) {
        try inParent(of: relativePath, "append to") { directory, name throws(SystemError) in
            let file: FileDescriptor
            do throws(SystemError) { file = try directory.openFile(named: name, .readWrite, options: [.append]) } catch
            {
                guard error.isMissing else { throw error }
                // A new file: its name is durable before its first line counts as written.
                file = try directory.openFile(named: name, .readWrite, options: [.create, .append])
                try directory.synchronize()
            }
            let length = try file.status().size
            var record = bytes
            if length > 0, try file.read(count: 1, at: length - 1) != [UInt8(ascii: "\n")] {
                record.insert(UInt8(ascii: "\n"), at: 0)
            }
            do throws(SystemError) {
                try file.writeAll(record)
                try file.synchronize()
            } catch {
                try? file.truncate(to: length)  // a short write is cut back: nothing, not half a line
                throw error
            }
        }
    }

    /// Replaces the file at once (POSIX's durable replace): written beside it (`NAME.new`,
    /// `replacementSuffix`), synced, renamed over it, the rename synced — a crash leaves the old
    /// file or the new one, never a mix.
    public func replace(_ relativePath: String, with bytes: [UInt8]) throws(FileError) {
        try inParent(of: relativePath, "replace") { directory, name throws(SystemError) in
            // The new file keeps the old one's owner: rewritten by root (`sudo vigil clips
            // --rescan`), the journal must stay the agent's to append to.
            let old = try? directory.status(ofEntry: name)
            let owner = old.flatMap {
                $0.kind == .regular && ProcessID.isRoot ? (user: $0.owner, group: $0.group) : nil
            }
            try directory.replaceFile(named: name, with: bytes, temporary: name + replacementSuffix, owner: owner)
        }
    }

    public func rename(_ relativePath: String, to newRelativePath: String) throws(FileError) {
        let newName = String(newRelativePath.split(separator: "/").last ?? "")
        guard newRelativePath.withoutLastPathComponent == relativePath.withoutLastPathComponent, !newName.isEmpty,
            newName != ".", newName != ".."
        else {
            throw FileError(
                path: path(relativePath), operation: "rename",
                reason: "\(newRelativePath) is not a name in the same directory; refusing")
        }
        try inParent(of: relativePath, "rename") { directory, name throws(SystemError) in
            _ = try directory.status(ofEntry: name)
            // Never over something else: what has the new name stays as it is.
            do throws(SystemError) {
                _ = try directory.status(ofEntry: newName)
                throw SystemError.alreadyThere
            } catch {
                guard error.isMissing else { throw error }
            }
            try directory.rename(named: name, to: newName)
            try directory.synchronize()
        }
    }

    /// Claims the directory for this agent: its lock file (`.vigil.lock`) holds the lock and
    /// the pid for as long as the returned claim lives. A directory another agent records into
    /// is refused, naming that agent's pid.
    public func claim() throws(ClaimError) -> any StorageClaim {
        let path = self.path(DiskStorage.lockName)
        do {
            switch try LockFile.claim(
                DiskStorage.lockName, in: root, writing: "\(ProcessID.current)\n", permissions: 0o666)
            {
            case .held(let lock): return DiskClaim(lock: lock)
            case .heldElsewhere(let contents):
                throw ClaimError(
                    path: path, heldBy: Int32(contents.trimmingNewline), reason: "another agent records into \(root)")
            }
        } catch let error as ClaimError {
            throw error
        } catch let error as SystemError {
            let problem =
                error.code == SystemError.notARegularFile.code
                ? FileError(path: path, notARegularFile: "open").reason : error.description
            let cause: ClaimError.Cause =
                error.isReadOnly || error.isMissing || error.isOutOfSpace || error.isInputOutput
                ? .unavailable : .refused
            throw ClaimError(path: path, heldBy: nil, reason: "cannot take its lock: \(problem)", cause: cause)
        } catch {
            throw ClaimError(path: path, heldBy: nil, reason: "cannot take its lock: \(error)", cause: .refused)
        }
    }

    /// The probe's test file. One name, not one per process: a probe a kill interrupted is
    /// removed by the next (the directory's claim keeps two agents from probing at once).
    public static let probeName = ".vigil-probe"

    /// Proves the directory can be written: a test file made, written, synced and removed.
    public func probe() throws(FileError) {
        let name = DiskStorage.probeName
        let path = self.path(name)
        var step = "open the storage directory"
        do {
            let directory = try FileDescriptor(openingDirectory: root)
            try? directory.removeFile(named: name)
            step = "create a test file in the storage directory"
            let file = try directory.openFile(named: name, .writeOnly, options: [.create, .exclusive])
            step = "write a test file in the storage directory"
            try file.writeAll(Array("vigil storage probe\n".utf8))
            try file.synchronize()
            try file.close()
            step = "remove a test file from the storage directory"
            try directory.removeFile(named: name)
        } catch {
            throw FileError(path: path, operation: step, error)
        }
    }

    /// The catalogue in SQLite beside the clips (`catalogue.sqlite`), a new connection.
    public func openCatalogue() throws(CatalogueError) -> any ClipCatalogue {
        try SQLiteCatalogue(path: path(CatalogueFile.name))
    }

    /// Runs `body` on the directory that holds the last component of `relativePath`, reached
    /// from the storage directory one component at a time without following a link (made when
    /// missing with `creatingDirectories`), and that component's name.
    private func inParent<Result>(
        of relativePath: String, _ operation: String, creatingDirectories: Bool = false,
        _ body: (borrowing FileDescriptor, String) throws(SystemError) -> Result
    ) throws(FileError) -> Result {
        let parts = relativePath.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard !relativePath.hasPrefix("/"), !parts.contains(".."), !parts.contains(""), !parts.contains("."),
            let name = parts.last
        else {
            throw FileError(
                path: path(relativePath), operation: operation, reason: "the name leads out of \(root); refusing")
        }
        var reached = root
        do throws(SystemError) {
            var directory = try FileDescriptor(openingDirectory: root)
            for component in parts.dropLast() {
                reached += "/" + component
                if creatingDirectories {
                    do throws(SystemError) {
                        try directory.makeDirectory(named: component)
                        try directory.synchronize()  // the new directory's name is durable
                    } catch {
                        if !error.alreadyExists { throw error }
                    }
                }
                directory = try directory.openDirectory(named: component)
            }
            reached = path(relativePath)
            return try body(directory, name)
        } catch {
            if error.isLink {
                // The name itself a link is something other than a regular file, refused unopened.
                throw FileError(
                    path: reached, operation: operation, reason: "it is a symbolic link; refusing to follow it",
                    isNotRegularFile: reached == path(relativePath))
            }
            if error.code == SystemError.notADirectory.code {
                throw FileError(
                    path: reached, operation: operation,
                    reason: "it is not a directory (or a symbolic link to a file); refusing to follow it")
            }
            if error.code == SystemError.notARegularFile.code {
                throw FileError(path: reached, notARegularFile: operation)
            }
            if error.alreadyExists {
                throw FileError(
                    path: reached, operation: operation, reason: "a file has that name already", isAlreadyThere: true)
            }
            throw FileError(path: reached, operation: operation, error)
        }
    }
}

/// The agent's hold on a storage directory: the lock file, open and locked, until this goes.
final class DiskClaim: StorageClaim {
    let lock: LockFile
    init(lock: LockFile) { self.lock = lock }
}

private extension String {
    var trimmingNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}

extension FileError {
    /// The error of a failed POSIX call: "no space left on the device" (and `isOutOfSpace`)
    /// for ENOSPC and EDQUOT, the C library's words for any other error.
    init(path: String, operation: String, _ error: SystemError) {
        let reason = error.isOutOfSpace ? "no space left on the device" : error.text
        self.init(
            path: path, operation: operation, reason: reason, isOutOfSpace: error.isOutOfSpace,
            isMissing: error.isMissing, isInUse: error.isLocked, isReadOnly: error.isReadOnly)
    }

    /// `path` is not a regular file (`openFile` refused it, unopened): what it is, and the fix.
    init(path: String, notARegularFile operation: String) {
        let what =
            switch (try? Paths.status(ofLink: path))?.kind {
            case let kind? where kind != .regular && kind != .other: "it is \(kind.description), not a regular file"
            default: "it is not a regular file"
            }
        self.init(
            path: path, operation: operation, reason: what + "; refusing — move it out of the storage directory",
            isNotRegularFile: true)
    }
}

extension EventsJournal {
    /// The journal in the storage directory `directory` on disk.
    public init(directory: String) {
        self.init(storage: DiskStorage(root: directory))
    }
}
