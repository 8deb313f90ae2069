import Media
import QuickTime
import Recorder
import Synchronization

/// A `MemoryStorage` that runs `beforeRead` with the count of the journal's reads (from 1)
/// before each of them: to append a line as the agent would, to fail, or to hold the reader
/// (a slow disk, made deterministic).
public final class JournalReadHook: ClipStorage {
    public let inner: MemoryStorage
    let beforeRead: @Sendable (Int) throws(FileError) -> Void
    let reads = Mutex(0)

    public init(_ inner: MemoryStorage, beforeRead: @escaping @Sendable (Int) throws(FileError) -> Void) {
        self.inner = inner
        self.beforeRead = beforeRead
    }

    public var root: String { inner.root }
    public func createRoot() throws(FileError) {}
    public func openCatalogue() throws(CatalogueError) -> any ClipCatalogue { try inner.openCatalogue() }
    public func walk() throws(FileError) -> [StoredFile] { try inner.walk() }
    public func freeBytes() throws(FileError) -> Int64 { try inner.freeBytes() }
    public func exists(_ relativePath: String) -> Bool { inner.exists(relativePath) }
    public func delete(_ relativePath: String) throws(FileError) { try inner.delete(relativePath) }
    public func createMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        try inner.createMovie(relativePath)
    }
    public func openMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        try inner.openMovie(relativePath)
    }
    public func readMovie(_ relativePath: String) throws(FileError) -> any MovieFile {
        try inner.readMovie(relativePath)
    }
    public func read(_ relativePath: String) throws(FileError) -> [UInt8]? {
        if relativePath == EventsJournal.name {
            try beforeRead(
                reads.withLock {
                    $0 += 1
                    return $0
                })
        }
        return try inner.read(relativePath)
    }
    public func readTail(_ relativePath: String, maxBytes: Int) throws(FileError) -> FileTail? {
        try inner.readTail(relativePath, maxBytes: maxBytes)
    }
    public func append(_ bytes: [UInt8], to relativePath: String) throws(FileError) {
        try inner.append(bytes, to: relativePath)
    }
    public func replace(_ relativePath: String, with bytes: [UInt8]) throws(FileError) {
        try inner.replace(relativePath, with: bytes)
    }
    public func rename(_ relativePath: String, to newRelativePath: String) throws(FileError) {
        try inner.rename(relativePath, to: newRelativePath)
    }
    public func claim() throws(ClaimError) -> any StorageClaim { try inner.claim() }
    public func probe() throws(FileError) { try inner.probe() }
}
