import Media
import QuickTime
import Recorder

/// A `MemoryStorage` whose catalogue runs `beforeRead` before each question it is asked (a
/// page, the days, the totals, one entry): to hold the web server's page builds at a gate (a
/// slow SD card, made deterministic). Writes go through untouched.
public final class CatalogueReadHook: ClipStorage {
    public let inner: MemoryStorage
    let beforeRead: @Sendable () -> Void

    public init(_ inner: MemoryStorage, beforeRead: @escaping @Sendable () -> Void) {
        self.inner = inner
        self.beforeRead = beforeRead
    }

    public var root: String { inner.root }
    public func createRoot() throws(FileError) {}
    public func openCatalogue() throws(CatalogueError) -> any ClipCatalogue {
        HeldCatalogue(try inner.openCatalogue(), beforeRead: beforeRead)
    }
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
    public func read(_ relativePath: String) throws(FileError) -> [UInt8]? { try inner.read(relativePath) }
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

/// A catalogue whose every question waits for `beforeRead` first.
final class HeldCatalogue: ClipCatalogue {
    let inner: any ClipCatalogue
    let beforeRead: @Sendable () -> Void

    init(_ inner: any ClipCatalogue, beforeRead: @escaping @Sendable () -> Void) {
        self.inner = inner
        self.beforeRead = beforeRead
    }

    func add(_ entry: CatalogueEntry) throws(CatalogueError) { try inner.add(entry) }
    func add(_ entries: [CatalogueEntry]) throws(CatalogueError) { try inner.add(entries) }
    func synchronize(with entries: [CatalogueEntry]) throws(CatalogueError) -> (written: Int, removed: Int) {
        try inner.synchronize(with: entries)
    }
    func remove(_ files: [String]) throws(CatalogueError) { try inner.remove(files) }
    func entry(_ file: String) throws(CatalogueError) -> CatalogueEntry? {
        beforeRead()
        return try inner.entry(file)
    }
    func page(_ query: ClipQuery) throws(CatalogueError) -> ClipPage {
        beforeRead()
        return try inner.page(query)
    }
    func days(_ query: ClipQuery, before: String?, limit: Int) throws(CatalogueError) -> [DayCount] {
        beforeRead()
        return try inner.days(query, before: before, limit: limit)
    }
    func totals() throws(CatalogueError) -> CatalogueTotals {
        beforeRead()
        return try inner.totals()
    }
    func oldest(after: AgeCursor?, limit: Int) throws(CatalogueError) -> [AgedEntry] {
        try inner.oldest(after: after, limit: limit)
    }
    func misdated(before: Int64, after: Int64, limit: Int) throws(CatalogueError) -> [AgedEntry] {
        try inner.misdated(before: before, after: after, limit: limit)
    }
    func shiftAges(from: Int64, to: Int64) throws(CatalogueError) { try inner.shiftAges(from: from, to: to) }
    func beginRecording(_ file: String) throws(CatalogueError) { try inner.beginRecording(file) }
    func endRecording(_ file: String) throws(CatalogueError) { try inner.endRecording(file) }
    func recording() throws(CatalogueError) -> [String] { try inner.recording() }
    func isSynchronized() throws(CatalogueError) -> Bool { try inner.isSynchronized() }
    func setUpload(_ state: UploadState?, of file: String) throws(CatalogueError) {
        try inner.setUpload(state, of: file)
    }
    func setUploads(_ states: [(file: String, state: UploadState?)]) throws(CatalogueError) {
        try inner.setUploads(states)
    }
    func uploads(after file: String?, limit: Int) throws(CatalogueError) -> [(file: String, state: UploadState?)] {
        try inner.uploads(after: file, limit: limit)
    }
}
