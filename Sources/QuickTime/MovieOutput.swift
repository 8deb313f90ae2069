import Media

/// Where a movie's bytes go. The writer appends fragments, patches box types in place when it
/// closes the movie, and syncs at the points that make closing crash-safe.
///
/// `FileMovieOutput` (in `Storage`) is the real one; tests wrap it to slow writes down or make them fail.
public protocol MovieOutput: AnyObject {
    /// The current length of the output, where the next `append` lands.
    var length: UInt64 { get }
    func append(_ bytes: [UInt8]) throws(FileError)
    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(FileError)
    /// Makes everything written so far durable (fsync).
    func synchronize() throws(FileError)
    func close() throws(FileError)
}

/// A movie file that can also be read back and cut short: what repair needs.
public protocol MovieFile: MovieOutput {
    /// Reads `count` bytes at `offset` (fewer at the end of the file).
    func read(at offset: UInt64, count: Int) throws(FileError) -> [UInt8]
    /// Cuts the file to `newLength` bytes (repair drops a partial tail this way).
    func truncate(to newLength: UInt64) throws(FileError)
}
