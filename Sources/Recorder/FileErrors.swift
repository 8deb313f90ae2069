import FoundationEssentials

/// What the events journal needs from the file system that FoundationEssentials does not
/// offer: appending to a file and syncing it. `Storage` provides the POSIX one.
public protocol JournalFiles: Sendable {
    /// Appends `bytes` at the end of the file at `path`, creating the file when missing, and
    /// makes them durable (fsync).
    func appendAndSync(_ bytes: [UInt8], to path: String) throws(JournalAppendError)
}

public enum JournalAppendError: Error, Sendable {
    /// The file could not be opened (or created) for writing.
    case cannotOpen
    /// A write or the sync failed; the error says why, in Foundation's terms.
    case failed(CocoaError)
}

/// Words for a file error from FoundationEssentials (or one made like them), the way
/// Foundation's `localizedDescription` put them — FoundationEssentials has none of its own.
public func describeFileError(_ error: any Error) -> String {
    let prefix = "The operation could not be completed."
    guard let cocoa = error as? CocoaError else { return "\(prefix) (\(error._domain) error \(error._code).)" }
    let reason: String? = switch cocoa.code {
    case .fileNoSuchFile, .fileReadNoSuchFile: "The file doesn’t exist."
    case .fileLocking: "The file couldn’t be locked."
    case .fileReadNoPermission, .fileWriteNoPermission: "You don’t have permission."
    case .fileReadInvalidFileName, .fileWriteInvalidFileName: "The file name is invalid."
    case .fileReadCorruptFile: "The file isn’t in the correct format."
    case .fileReadInapplicableStringEncoding, .fileWriteInapplicableStringEncoding: "The specified text encoding isn’t applicable."
    case .fileReadUnsupportedScheme, .fileWriteUnsupportedScheme: "The specified URL type isn’t supported."
    case .fileReadTooLarge: "The item is too large."
    case .fileReadUnknownStringEncoding: "The text encoding of the contents couldn’t be determined."
    case .fileWriteFileExists: "A file with the same name already exists."
    case .fileWriteOutOfSpace: "There isn’t enough space."
    case .fileWriteVolumeReadOnly: "The volume is read only."
    case .userCancelled: "The operation was cancelled."
    case .featureUnsupported: "The requested operation is not supported."
    default: nil
    }
    return "\(prefix) \(reason ?? "(NSCocoaErrorDomain error \(cocoa.code.rawValue).)")"
}
