import Media
import QuickTime

/// The file of a clip recorded while its storage directory is not there (a USB disk
/// re-mounting, a card remounted read-only): until the directory is back, every write fails
/// and nothing is written, so the `MovieWriter` keeps the clip's GOPs and sound in memory,
/// exactly as it does on a full disk; `attach` then gives it the file made on the disk, and
/// the writer's next flush writes what waited.
///
/// Not thread-safe: it belongs to the writer thread, as its movie writer does.
final class HeldMovieFile: MovieFile {
    /// Where the clip is meant to go (for messages).
    let path: String
    private var file: (any MovieFile)?

    init(path: String) {
        self.path = path
    }

    /// True until `attach`.
    var isHeld: Bool { file == nil }

    /// The storage directory is back: from now on everything goes to `file` (new, empty).
    func attach(_ file: any MovieFile) {
        self.file = file
    }

    private func target(_ operation: String) throws(FileError) -> any MovieFile {
        guard let file else {
            throw FileError(
                path: path, operation: operation,
                reason: "the storage directory is unavailable; the clip is kept in memory until it is back")
        }
        return file
    }

    var length: UInt64 { file?.length ?? 0 }
    func append(_ bytes: [UInt8]) throws(FileError) { try target("write").append(bytes) }
    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(FileError) {
        try target("update").overwrite(at: offset, with: bytes)
    }
    func synchronize() throws(FileError) { try target("sync").synchronize() }
    func close() throws(FileError) { try file?.close() }
    func read(at offset: UInt64, count: Int) throws(FileError) -> [UInt8] {
        try target("read").read(at: offset, count: count)
    }
    func truncate(to newLength: UInt64) throws(FileError) { try target("truncate").truncate(to: newLength) }
}
