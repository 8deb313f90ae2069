import FoundationEssentials
internal import Glibc
import Recorder

/// The events journal's appends, with POSIX calls.
public struct PosixJournalFiles: JournalFiles {
    public init() {}

    public func appendAndSync(_ bytes: [UInt8], to path: String) throws(JournalAppendError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw .cannotOpen }
        defer { close(fd) }
        let failure = bytes.withUnsafeBytes { writeAll($0, to: fd) } ?? (fsync(fd) == 0 ? nil : errno)
        if let failure { throw .failed(CocoaError(writeErrorCode(failure))) }
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
