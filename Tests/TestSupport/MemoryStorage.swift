import Foundation
import Media
import QuickTime
import Recorder
import Storage
import Synchronization

/// A storage directory in memory, with a disk of `capacity` bytes: what the recorder and the
/// agent's writer are tested on, as any user and without a file system to fill. The disk is
/// full when the files (and `otherData`, someone else's files on the same disk) reach the
/// capacity: writes then fail as ENOSPC does, with nothing of the failed write kept.
///
/// Symbolic links can be planted (`link`): a walk does not list them and delete refuses them,
/// as on disk.
@dynamicMemberLookup
public final class MemoryStorage: ClipStorage, Sendable {
    public let root: String

    struct Entry {
        var bytes: [UInt8]
        var modified: Date
        var isLink = false
        /// What it is when it is neither a regular file nor a link ("a named pipe (FIFO)").
        var special: String?
        var isRegular: Bool { !isLink && special == nil }
    }

    /// The disk, as a test sets it: `storage.capacity = …` reads or sets one of these under
    /// the storage's lock.
    public struct Disk: Sendable {
        /// The disk's size; shrink it to make the disk full.
        public var capacity: Int64
        /// Bytes of other programs' files on the same disk.
        public var otherData: Int64 = 0
        /// The time files are stamped with when written.
        public var now: Date
        /// False makes the directory refuse every write, as a read-only or missing one does.
        public var writable = true
        /// Another program takes every free byte just before the first write to a movie file
        /// that this picks (given the file and the bytes to write); then it is cleared.
        public var fillBefore: (@Sendable (_ file: String, _ bytes: [UInt8]) -> Bool)?
    }

    struct State {
        var files: [String: Entry] = [:]
        var disk: Disk
        /// Movie files being written (refused to repair).
        var writing: Set<String> = []
        var claimed = false
        /// How many times each file was opened to be read (`read`, `readMovie`).
        var reads: [String: Int] = [:]
        var walks = 0
        var used: Int64 { files.values.reduce(disk.otherData) { $0 + Int64($1.bytes.count) } }
    }

    let state: Mutex<State>
    /// The directory's catalogue: SQLite in memory, made at the first ask, the same one after.
    let catalogue = Mutex<SQLiteCatalogue?>(nil)

    public init(
        root: String = "/memory/clips", capacity: Int64 = 1 << 40,
        now: Date = Date(timeIntervalSince1970: 1_796_000_000)
    ) {
        self.root = root
        state = Mutex(State(disk: Disk(capacity: capacity, now: now)))
    }

    // MARK: For tests

    /// One setting of the disk (`Disk`), read or set under the lock.
    public subscript<Value: Sendable>(dynamicMember setting: WritableKeyPath<Disk, Value>) -> Value {
        get { state.withLock { $0.disk[keyPath: setting] } }
        set { state.withLock { $0.disk[keyPath: setting] = newValue } }
    }

    /// Fills the disk: other data takes every free byte.
    public func fill() {
        state.withLock { $0.disk.otherData += max(0, $0.disk.capacity - $0.used) }
    }

    /// `Disk.fillBefore`'s cue, before `bytes` are written to the movie file `relativePath`.
    func cue(_ relativePath: String, _ bytes: [UInt8]) {
        state.withLock { s in
            guard let fill = s.disk.fillBefore, fill(relativePath, bytes) else { return }
            s.disk.fillBefore = nil
            s.disk.otherData += max(0, s.disk.capacity - s.used)
        }
    }

    /// Writes a file directly, as someone else (or an earlier run) left it.
    public func put(_ relativePath: String, _ bytes: [UInt8], modified: Date? = nil) {
        state.withLock { $0.files[relativePath] = Entry(bytes: bytes, modified: modified ?? $0.disk.now) }
    }

    /// Plants a symbolic link with this name.
    public func link(_ relativePath: String) {
        state.withLock { $0.files[relativePath] = Entry(bytes: [], modified: $0.disk.now, isLink: true) }
    }

    /// Plants something that is not a regular file (a named pipe, a directory) with this name:
    /// it is refused as on disk, never opened.
    public func plantSpecial(_ relativePath: String, _ what: String = "a named pipe (FIFO)") {
        state.withLock { $0.files[relativePath] = Entry(bytes: [], modified: $0.disk.now, special: what) }
    }

    /// What the name is when it is not a regular file nor a link ("a named pipe (FIFO)").
    public func special(_ relativePath: String) -> String? {
        state.withLock { $0.files[relativePath]?.special }
    }

    /// The bytes of a file, or nil.
    public func contents(_ relativePath: String) -> [UInt8]? {
        state.withLock { $0.files[relativePath].flatMap { $0.isRegular ? $0.bytes : nil } }
    }

    /// Every regular file's name, sorted.
    public var fileNames: [String] {
        state.withLock { $0.files.filter { $0.value.isRegular }.keys.sorted() }
    }

    /// How many times the whole directory was listed (`walk`).
    public var walks: Int { state.withLock { $0.walks } }

    /// How many times `relativePath` was opened to be read, whole (`read`) or piece by piece
    /// (`readMovie`).
    public func reads(of relativePath: String) -> Int {
        state.withLock { $0.reads[relativePath] ?? 0 }
    }

    /// What a kill leaves: a storage with every file as it is now (the files the storage has,
    /// not what a writer still holds), on a disk of the same size.
    public func copy() -> MemoryStorage {
        let copy = MemoryStorage(root: root, capacity: self.capacity, now: self.now)
        let files = state.withLock { $0.files }
        copy.state.withLock { $0.files = files }
        return copy
    }

    /// The time a file was last written.
    public func modified(_ relativePath: String) -> Date? {
        state.withLock { $0.files[relativePath]?.modified }
    }

    // MARK: ClipStorage

    public func openCatalogue() throws(CatalogueError) -> any ClipCatalogue {
        try catalogue.withLock { (made) throws(CatalogueError) -> SQLiteCatalogue in
            if let made { return made }
            let opened = try SQLiteCatalogue.inMemory()
            made = opened
            return opened
        }
    }

    public func createRoot() throws(FileError) {}

    public func walk() throws(FileError) -> [StoredFile] {
        state.withLock { s in
            s.walks += 1
            return s.files.filter { $0.value.isRegular }.map {
                StoredFile(relativePath: $0.key, size: Int64($0.value.bytes.count), modified: $0.value.modified)
            }
        }
    }

    public func freeBytes() throws(FileError) -> Int64 {
        state.withLock { max(0, $0.disk.capacity - $0.used) }
    }

    public func exists(_ relativePath: String) -> Bool {
        state.withLock { $0.files[relativePath] != nil }
    }

    public func delete(_ relativePath: String) throws(FileError) {
        let path = self.path(relativePath)
        try state.withLock { s throws(FileError) in
            guard let entry = s.files[relativePath] else {
                throw FileError(path: path, operation: "delete", reason: "No such file or directory", isMissing: true)
            }
            guard entry.isRegular else {
                throw FileError(
                    path: path, operation: "delete", reason: "it is not a regular file; refusing",
                    isNotRegularFile: entry.special != nil)
            }
            if !s.disk.writable { throw FileError(path: path, operation: "delete", reason: "Read-only file system") }
            s.files[relativePath] = nil
        }
    }

    public func rename(_ relativePath: String, to newRelativePath: String) throws(FileError) {
        let path = self.path(relativePath)
        try state.withLock { s throws(FileError) in
            guard let entry = s.files[relativePath] else {
                throw FileError(path: path, operation: "rename", reason: "No such file or directory", isMissing: true)
            }
            if !s.disk.writable { throw FileError(path: path, operation: "rename", reason: "Read-only file system") }
            guard s.files[newRelativePath] == nil else {
                throw FileError(
                    path: path, operation: "rename", reason: "a file has that name already", isAlreadyThere: true)
            }
            s.files[relativePath] = nil
            s.files[newRelativePath] = entry
        }
    }

    public func createMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        let path = self.path(relativePath)
        try state.withLock { s throws(FileError) in
            if s.files[relativePath] != nil {
                throw FileError(
                    path: path, operation: "create", reason: "a file has that name already", isAlreadyThere: true)
            }
        }
        try write(relativePath, operation: "create") { $0 = [] }
        state.withLock { _ = $0.writing.insert(relativePath) }
        return MemoryMovieFile(storage: self, relativePath: relativePath)
    }

    public func openMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        try refuseToOpenWhatIsNotAFile(relativePath)
        if state.withLock({ $0.writing.contains(relativePath) }) {
            throw FileError(
                path: path(relativePath), operation: "open", reason: "a running agent is writing it", isInUse: true)
        }
        return MemoryMovieFile(storage: self, relativePath: relativePath)
    }

    public func readMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        try refuseToOpenWhatIsNotAFile(relativePath)
        state.withLock { $0.reads[relativePath, default: 0] += 1 }
        return MemoryMovieFile(storage: self, relativePath: relativePath, readOnly: true)
    }

    /// Refuses to open a name that is missing or not a regular file, as `DiskStorage` does.
    private func refuseToOpenWhatIsNotAFile(_ relativePath: String) throws(FileError) {
        try refuseSpecial(relativePath, "open")
        guard contents(relativePath) != nil else {
            throw FileError(
                path: path(relativePath), operation: "open", reason: "No such file or directory", isMissing: true)
        }
    }

    /// The movie file is closed (or given up): repair may open it again.
    func finishedWriting(_ relativePath: String) {
        state.withLock { _ = $0.writing.remove(relativePath) }
    }

    public func claim() throws(ClaimError) -> any StorageClaim {
        // As on disk: the lock file cannot be made or opened to write on a read-only directory.
        if !self.writable {
            throw ClaimError(
                path: path(".vigil.lock"), heldBy: nil, reason: "cannot take its lock: Read-only file system",
                cause: .unavailable)
        }
        let taken = state.withLock { s -> Bool in
            defer { s.claimed = true }
            return s.claimed
        }
        if taken {
            throw ClaimError(path: path(".vigil.lock"), heldBy: nil, reason: "another agent records into \(root)")
        }
        return MemoryClaim(storage: self)
    }

    func release() { state.withLock { $0.claimed = false } }

    public func probe() throws(FileError) {
        if !self.writable {
            throw FileError(
                path: path(".vigil-probe"), operation: "create a test file in the storage directory",
                reason: "Read-only file system")
        }
        try write(".vigil-probe", operation: "write a test file in the storage directory") { $0 = Array("probe".utf8) }
        state.withLock { $0.files[".vigil-probe"] = nil }
    }

    public func read(_ relativePath: String) throws(FileError) -> [UInt8]? {
        try refuseSpecial(relativePath, "read")
        state.withLock { $0.reads[relativePath, default: 0] += 1 }
        return contents(relativePath)
    }

    public func readTail(_ relativePath: String, maxBytes: Int) throws(FileError) -> FileTail? {
        try refuseSpecial(relativePath, "read")
        guard let bytes = contents(relativePath), let modified = modified(relativePath) else { return nil }
        return FileTail(bytes: Array(bytes.suffix(max(0, maxBytes))), size: Int64(bytes.count), modified: modified)
    }

    /// A name that is not a regular file is refused, as `DiskStorage` refuses it (unopened).
    private func refuseSpecial(_ relativePath: String, _ operation: String) throws(FileError) {
        if state.withLock({ $0.files[relativePath]?.isLink == true }), operation == "read" || operation == "open" {
            throw FileError(
                path: path(relativePath), operation: operation, reason: "it is a symbolic link; refusing to follow it",
                isNotRegularFile: true)
        }
        if let what = special(relativePath) {
            throw FileError(
                path: path(relativePath), operation: operation,
                reason: "it is \(what), not a regular file; refusing — move it out of the storage directory",
                isNotRegularFile: true)
        }
    }

    public func append(_ bytes: [UInt8], to relativePath: String) throws(FileError) {
        try write(relativePath, operation: "append to") {
            if let last = $0.last, last != UInt8(ascii: "\n") { $0.append(UInt8(ascii: "\n")) }
            $0 += bytes
        }
    }

    public func replace(_ relativePath: String, with bytes: [UInt8]) throws(FileError) {
        try write(relativePath, operation: "replace") { $0 = bytes }
    }

    /// Changes a file's bytes unless that would take more than the disk has.
    func write(_ relativePath: String, operation: String, _ change: (inout [UInt8]) -> Void) throws(FileError) {
        let path = self.path(relativePath)
        try refuseSpecial(relativePath, operation)
        try state.withLock { s throws(FileError) in
            if !s.disk.writable { throw FileError(path: path, operation: operation, reason: "Read-only file system") }
            if s.files[relativePath]?.isLink == true {
                throw FileError(path: path, operation: operation, reason: "it is a symbolic link; refusing")
            }
            var bytes = s.files[relativePath]?.bytes ?? []
            let before = Int64(bytes.count)
            change(&bytes)
            guard s.used - before + Int64(bytes.count) <= s.disk.capacity || Int64(bytes.count) <= before else {
                throw FileError(
                    path: path, operation: operation, reason: "no space left on the device", isOutOfSpace: true)
            }
            s.files[relativePath] = Entry(bytes: bytes, modified: s.disk.now)
        }
    }
}

/// The agent's hold on a `MemoryStorage`, released when it goes.
final class MemoryClaim: StorageClaim {
    let storage: MemoryStorage
    init(storage: MemoryStorage) { self.storage = storage }
    deinit { storage.release() }
}

/// A movie file in a `MemoryStorage`: its bytes are the storage's, so a full disk stops it.
final class MemoryMovieFile: MovieFile {
    let storage: MemoryStorage
    let relativePath: String
    /// Opened only to read (`readMovie`): writes fail as on a read-only descriptor, and
    /// closing it does not end the writer's hold.
    let readOnly: Bool
    private var closed = false

    init(storage: MemoryStorage, relativePath: String, readOnly: Bool = false) {
        self.storage = storage
        self.relativePath = relativePath
        self.readOnly = readOnly
    }

    var length: UInt64 { UInt64(storage.contents(relativePath)?.count ?? 0) }

    private func check(_ operation: String) throws(FileError) {
        if closed || (readOnly && operation != "read" && operation != "sync") {
            throw FileError(path: storage.path(relativePath), operation: operation, reason: "Bad file descriptor")
        }
    }

    func append(_ bytes: [UInt8]) throws(FileError) {
        try check("write")
        storage.cue(relativePath, bytes)
        try storage.write(relativePath, operation: "write") { $0 += bytes }
    }

    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(FileError) {
        try check("update")
        try storage.write(relativePath, operation: "update") {
            $0.replaceSubrange(Int(offset)..<Int(offset) + bytes.count, with: bytes)
        }
    }

    func synchronize() throws(FileError) { try check("sync") }

    func close() throws(FileError) {
        closed = true
        if !readOnly { storage.finishedWriting(relativePath) }
    }

    func read(at offset: UInt64, count: Int) throws(FileError) -> [UInt8] {
        try check("read")
        let bytes = storage.contents(relativePath) ?? []
        let start = min(Int(offset), bytes.count)
        return Array(bytes[start..<min(bytes.count, start + count)])
    }

    func truncate(to newLength: UInt64) throws(FileError) {
        try check("truncate")
        try storage.write(relativePath, operation: "truncate") { $0.removeLast(max(0, $0.count - Int(newLength))) }
    }
}
