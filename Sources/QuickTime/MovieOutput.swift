import Foundation

/// Where a movie's bytes go. The writer appends fragments, patches box types in place when it
/// closes the movie, and syncs at the points that make closing crash-safe.
///
/// `FileMovieOutput` is the real one; tests wrap it to slow writes down or make them fail.
public protocol MovieOutput: AnyObject {
    /// The current length of the output, where the next `append` lands.
    var length: UInt64 { get }
    func append(_ bytes: [UInt8]) throws(MovieFileError)
    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(MovieFileError)
    /// Makes everything written so far durable (fsync).
    func synchronize() throws(MovieFileError)
    func close() throws(MovieFileError)
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

    init(path: String, operation: String, error: any Error) {
        let ns = error as NSError
        let posix = (ns.userInfo[NSUnderlyingErrorKey] as? NSError).flatMap { $0.domain == NSPOSIXErrorDomain ? $0.code : nil }
            ?? (ns.domain == NSPOSIXErrorDomain ? ns.code : nil)
        let outOfSpace = posix == Int(ENOSPC) || posix == Int(EDQUOT)
            || ns.code == CocoaError.fileWriteOutOfSpace.rawValue
        let reason = outOfSpace ? "no space left on the device" : (posix.map { String(cString: strerror(Int32($0))) } ?? ns.localizedDescription)
        self.init(path: path, operation: operation, reason: reason, isOutOfSpace: outOfSpace)
    }

    public var description: String { "cannot \(operation) \(path): \(reason)" }
}

/// A movie file on disk.
public final class FileMovieOutput: MovieOutput {
    public let path: String
    private let handle: FileHandle
    public private(set) var length: UInt64

    /// Creates (or truncates) the file at `path`.
    public init(creating path: String) throws(MovieFileError) {
        self.path = path
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw MovieFileError(path: path, operation: "create", reason: FileMovieOutput.createFailureReason(path))
        }
        do { handle = try FileHandle(forUpdating: URL(fileURLWithPath: path)) } catch {
            throw MovieFileError(path: path, operation: "open", error: error)
        }
        length = 0
    }

    /// Opens an existing file for reading and patching (repair).
    public init(updating path: String) throws(MovieFileError) {
        self.path = path
        do {
            handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
            length = try handle.seekToEnd()
        } catch {
            throw MovieFileError(path: path, operation: "open", error: error)
        }
    }

    private static func createFailureReason(_ path: String) -> String {
        let dir = (path as NSString).deletingLastPathComponent
        var isDir: ObjCBool = false
        if !FileManager.default.fileExists(atPath: dir.isEmpty ? "." : dir, isDirectory: &isDir) || !isDir.boolValue {
            return "the directory \(dir) does not exist"
        }
        if !FileManager.default.isWritableFile(atPath: dir.isEmpty ? "." : dir) {
            return "permission denied — can this user write to \(dir)?"
        }
        return "the file could not be created (is the disk full or read-only?)"
    }

    public func append(_ bytes: [UInt8]) throws(MovieFileError) {
        do {
            try handle.seek(toOffset: length)
            try handle.write(contentsOf: bytes)
        } catch {
            // Whatever part of the write landed is cut off again, so the file ends with the
            // last complete box and the next append starts there.
            try? handle.truncate(atOffset: length)
            throw MovieFileError(path: path, operation: "write", error: error)
        }
        length += UInt64(bytes.count)
    }

    public func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(MovieFileError) {
        precondition(offset + UInt64(bytes.count) <= length, "overwrite stays inside the file")
        do {
            try handle.seek(toOffset: offset)
            try handle.write(contentsOf: bytes)
        } catch {
            throw MovieFileError(path: path, operation: "update", error: error)
        }
    }

    public func synchronize() throws(MovieFileError) {
        do { try handle.synchronize() } catch {
            throw MovieFileError(path: path, operation: "sync", error: error)
        }
    }

    /// Cuts the file to `newLength` bytes (repair drops a partial tail this way).
    public func truncate(to newLength: UInt64) throws(MovieFileError) {
        do { try handle.truncate(atOffset: newLength) } catch {
            throw MovieFileError(path: path, operation: "truncate", error: error)
        }
        length = newLength
    }

    /// Reads `count` bytes at `offset` (fewer at the end of the file).
    public func read(at offset: UInt64, count: Int) throws(MovieFileError) -> [UInt8] {
        do {
            try handle.seek(toOffset: offset)
            return [UInt8](try handle.read(upToCount: count) ?? Data())
        } catch {
            throw MovieFileError(path: path, operation: "read", error: error)
        }
    }

    public func close() throws(MovieFileError) {
        do { try handle.close() } catch {
            throw MovieFileError(path: path, operation: "close", error: error)
        }
    }
}
