internal import Glibc

/// An exclusive lock held for as long as the value lives: `flock` on a file that says who
/// holds it. A process that dies, however, lets go of it; the file stays.
public final class LockFile: Sendable {
    public let path: String
    private let file: FileDescriptor

    private init(path: String, file: consuming FileDescriptor) {
        self.path = path
        self.file = file
    }

    /// What `claim` found.
    public enum Claim: Sendable {
        /// The lock is this process's now.
        case held(LockFile)
        /// Another process holds it; what it wrote into the file (nothing if it had no time to).
        case heldElsewhere(contents: String)
    }

    /// Takes the lock on `name` in `directory`, never through a symbolic link, without waiting,
    /// and writes `contents` into it (replacing the last holder's words); a file it makes
    /// gets `permissions`.
    public static func claim(
        _ name: String, in directory: String, writing contents: String, permissions: UInt32 = 0o644
    ) throws(SystemError) -> Claim {
        let folder = try FileDescriptor(openingDirectory: directory)
        let file = try folder.openFile(named: name, .readWrite, options: [.create], permissions: permissions)
        do { try file.lockExclusively() } catch {
            guard error.isLocked else { throw error }
            let words = (try? file.read(count: 4096, at: 0)) ?? []
            return .heldElsewhere(contents: String(decoding: words, as: UTF8.self))
        }
        try file.truncate(to: 0)
        try file.writeAll(Array(contents.utf8), at: 0)
        return .held(LockFile(path: directory + "/" + name, file: file))
    }
}
