/// Where a movie's bytes go. The writer appends fragments, patches box types in place when it
/// closes the movie, and syncs at the points that make closing crash-safe.
///
/// `FileMovieOutput` (in `Storage`) is the real one; tests wrap it to slow writes down or make them fail.
public protocol MovieOutput: AnyObject {
    /// The current length of the output, where the next `append` lands.
    var length: UInt64 { get }
    func append(_ bytes: [UInt8]) throws(MovieFileError)
    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(MovieFileError)
    /// Makes everything written so far durable (fsync).
    func synchronize() throws(MovieFileError)
    func close() throws(MovieFileError)
}

/// A movie file that can also be read back and cut short: what repair needs.
public protocol MovieFile: MovieOutput {
    /// Reads `count` bytes at `offset` (fewer at the end of the file).
    func read(at offset: UInt64, count: Int) throws(MovieFileError) -> [UInt8]
    /// Cuts the file to `newLength` bytes (repair drops a partial tail this way).
    func truncate(to newLength: UInt64) throws(MovieFileError)
}

/// A failed file operation, naming the file, what was attempted and why.
public struct MovieFileError: Error, CustomStringConvertible, Sendable, Equatable {
    public var path: String
    public var operation: String
    public var reason: String
    /// True when the file system is out of space (ENOSPC or EDQUOT), so retention can act.
    public var isOutOfSpace: Bool

    public init(path: String, operation: String, reason: String, isOutOfSpace: Bool = false) {
        self.path = path
        self.operation = operation
        self.reason = reason
        self.isOutOfSpace = isOutOfSpace
    }

    public var description: String { "cannot \(operation) \(path): \(reason)" }
}
