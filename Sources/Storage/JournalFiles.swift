import FoundationEssentials
internal import Glibc
internal import POSIX
import Recorder

/// The events journal's appends, with POSIX calls.
public struct PosixJournalFiles: JournalFiles {
    public init() {}

    public func appendAndSync(_ bytes: [UInt8], to path: String) throws(JournalAppendError) {
        let file: FileDescriptor
        do { file = try FileDescriptor(opening: path, .writeOnly, options: [.create, .append]) } catch { throw .cannotOpen }
        // Closed when it goes, at the end of this call.
        do {
            try file.writeAll(bytes)
            try file.synchronize()
        } catch {
            throw .failed(CocoaError(writeErrorCode(error.code)))
        }
    }
}

/// The Foundation error code a failed write with `errno` was reported as.
func writeErrorCode(_ code: Int32) -> CocoaError.Code {
    switch code {
    case ENOENT: .fileNoSuchFile
    case EPERM, EACCES: .fileWriteNoPermission
    case ENAMETOOLONG: .fileWriteInvalidFileName
    case ENOSPC, EDQUOT: .fileWriteOutOfSpace
    case EROFS: .fileWriteVolumeReadOnly
    case EEXIST: .fileWriteFileExists
    default: .fileWriteUnknown
    }
}

extension EventsJournal {
    /// The journal in `directory`, appended to with POSIX calls.
    public init(directory: String) {
        self.init(directory: directory, files: PosixJournalFiles())
    }
}
