import FoundationEssentials
import Media
import QuickTime

/// A regular file under the storage directory, as a walk finds it.
/// The end of a file (`ClipStorage.readTail`).
public struct FileTail: Equatable, Sendable {
    /// Its last bytes.
    public var bytes: [UInt8]
    /// Its size.
    public var size: Int64
    /// When it was last written.
    public var modified: Date

    public init(bytes: [UInt8], size: Int64, modified: Date) {
        self.bytes = bytes
        self.size = size
        self.modified = modified
    }

    /// Whether `bytes` are the whole file.
    public var isWhole: Bool { Int64(bytes.count) == size }
}

public struct StoredFile: Equatable, Sendable {
    /// Relative to the storage directory.
    public var relativePath: String
    public var size: Int64
    /// Last written: for a clip, the end of the recording (or of its repair).
    public var modified: Date
    /// For a clip (`ClipStore.clips()`), the bytes of its picture beside it, which retention
    /// counts and frees with it; 0 for other files, and a clip without one.
    public var pictureSize: Int64 = 0
    /// For a clip, when it was recorded as its journal line says (`start`); nil without a line.
    public var recorded: Date?
    /// For a clip, the date its journal line says it ages from (`aged_from`: its clock was
    /// wrong), if any.
    public var agedFrom: Date?

    public init(
        relativePath: String, size: Int64, modified: Date, pictureSize: Int64 = 0, recorded: Date? = nil,
        agedFrom: Date? = nil
    ) {
        self.relativePath = relativePath
        self.size = size
        self.modified = modified
        self.pictureSize = pictureSize
        self.recorded = recorded
        self.agedFrom = agedFrom
    }

    /// What it takes on the disk, with its picture.
    public var totalSize: Int64 { size + pictureSize }
}

/// `ClipStorage.replace` writes the new contents beside the file, under its name with this
/// appended, before it renames it over the file: what a crash can leave behind.
public let replacementSuffix = ".new"

/// The storage directory as the recorder and the agent use it: every effect they have on
/// files — walking them, creating and opening movie files, deleting, appending to the events
/// journal and rewriting it — and nothing else. Paths are relative to the directory and never
/// leave it: an implementation refuses `..`, and never follows a symbolic link.
///
/// `Storage.DiskStorage` is the directory on disk (POSIX calls); tests use TestSupport's
/// `MemoryStorage`, in which a full disk is a number, so the writer's handling of it is tested
/// as any user, without a file system to fill.
public protocol ClipStorage: AnyObject, Sendable {
    /// The directory as people know it: in messages and the paths given to hooks.
    var root: String { get }
    /// Makes the directory (and those above it) when it is not there yet.
    func createRoot() throws(FileError)
    /// Every regular file below the directory (not through a symbolic link, to any depth the
    /// implementation walks), in no particular order.
    func walk() throws(FileError) -> [StoredFile]
    /// Bytes free for this user on the directory's file system.
    func freeBytes() throws(FileError) -> Int64
    /// Whether anything (a file, a directory, a link) has this name.
    func exists(_ relativePath: String) -> Bool
    /// Deletes a regular file (never a link or a directory), then the directories above it
    /// that it leaves empty, up to the storage directory itself.
    func delete(_ relativePath: String) throws(FileError)
    /// Creates a new movie file, and the directories above it — never over an existing file
    /// (`isAlreadyThere`: take another name) — and holds it: repair leaves it alone while it is
    /// written.
    func createMovie(_ relativePath: String) throws(FileError) -> any MovieFile
    /// Opens an existing movie file to read and finish it (repair); one a running agent is
    /// writing is refused (`isInUse`).
    func openMovie(_ relativePath: String) throws(FileError) -> any MovieFile
    /// Opens an existing movie file only to read it (its summary, for the journal): no lock
    /// taken and no write allowed, so it needs no more than read permission, and a clip being
    /// written reads as what it is so far.
    func readMovie(_ relativePath: String) throws(FileError) -> any MovieFile
    /// The whole of a small file (the journal); nil when there is none.
    func read(_ relativePath: String) throws(FileError) -> [UInt8]?
    /// The last `maxBytes` bytes of a regular file (all of a smaller one) and its size; nil
    /// when there is none. A link or anything but a regular file is refused, as by `read`.
    func readTail(_ relativePath: String, maxBytes: Int) throws(FileError) -> FileTail?
    /// Appends to a file (creating it) whole or not at all, starting on a fresh line when the
    /// file does not end in a newline, and makes the bytes durable.
    func append(_ bytes: [UInt8], to relativePath: String) throws(FileError)
    /// Replaces a file's contents at once: written beside it (its name with
    /// `replacementSuffix`), made durable, renamed over it.
    func replace(_ relativePath: String, with bytes: [UInt8]) throws(FileError)
    /// Gives an entry (whatever it is; a link is renamed, not followed) another name in the same
    /// directory, never over an existing one (`isAlreadyThere`), and makes the rename durable.
    func rename(_ relativePath: String, to newRelativePath: String) throws(FileError)
    /// Claims the directory for this agent for as long as the claim lives: a second agent on
    /// the same directory is refused, naming the first.
    func claim() throws(ClaimError) -> any StorageClaim
    /// Proves the directory can be written: a test file made, written, synced and removed.
    func probe() throws(FileError)
    /// Opens the directory's clip catalogue (`CatalogueFile.name`), making it when there is
    /// none: a new connection at each call, for the thread that asks. One that cannot be read
    /// throws an error whose `isUnreadable` is true: move it aside (`CatalogueFile.names`) and
    /// open again.
    func openCatalogue() throws(CatalogueError) -> any ClipCatalogue
}

extension ClipStorage {
    /// The path of `relativePath` as people know it.
    public func path(_ relativePath: String) -> String { root + "/" + relativePath }

    /// Moves what has the name `relativePath` (a file the agent keeps that turned out not to be
    /// a regular file: a named pipe, a link, a directory) aside, in place and whole, to the
    /// first free name of `base`, `base-1`, … `base-99`; its new name.
    public func moveAside(_ relativePath: String, to base: String) throws(FileError) -> String {
        for suffix in 0..<100 {
            let name = base + (suffix == 0 ? "" : "-\(suffix)")
            do {
                try rename(relativePath, to: name)
                return name
            } catch {
                guard error.isAlreadyThere else { throw error }
            }
        }
        throw FileError(
            path: path(relativePath), operation: "move aside", reason: "\(base) to \(base)-99 are taken")
    }
}

/// An agent's hold on a storage directory, for as long as the value lives.
public protocol StorageClaim: AnyObject, Sendable {}

/// A storage directory another agent records into, or whose lock cannot be taken.
public struct ClaimError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The lock file.
    public var path: String
    /// The process holding it, when it said.
    public var heldBy: Int32?
    public var reason: String
    public var cause: Cause

    /// Why the directory cannot be claimed.
    public enum Cause: Sendable, Equatable {
        /// Another agent holds the lock: it records into the directory.
        case held
        /// The lock file cannot be made or opened for now: the file system is read-only (a
        /// card the kernel remounted after an error), the directory is gone (a disk pulled),
        /// or the disk fails or is full. Waited for, as a directory not there yet is.
        case unavailable
        /// The lock file cannot be used until a person acts: permission denied, or something
        /// other than a regular file has its name.
        case refused
    }

    public init(path: String, heldBy: Int32?, reason: String, cause: Cause = .held) {
        self.path = path
        self.heldBy = heldBy
        self.reason = reason
        self.cause = cause
    }

    public var description: String {
        "\(reason)" + (heldBy.map { " (pid \($0), holding \(path))" } ?? " (\(path))")
    }
}
