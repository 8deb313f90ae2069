/// Who a file belongs to: a user and a group, by number.
public typealias FileOwner = (user: UInt32, group: UInt32)

extension FileDescriptor {
    /// Replaces the file `name` in this directory with `bytes`, whole or not at all — the one
    /// durable replace (the journal, `latest.jpg`, the upload queue, the password file, what
    /// `vigil analyze` writes): the bytes go to `temporary` beside it (made new, never through a
    /// symbolic link, with `permissions` and, given, `owner`; one a crash left there is removed
    /// first), are synced, renamed over `name`, and the rename synced. A crash or a power cut
    /// leaves the old file or the new one, never a mix; a failure leaves the old file as it was
    /// and no temporary file, and throws the error of the step that failed.
    public func replaceFile(
        named name: String, with bytes: [UInt8], temporary: String, permissions: UInt32 = 0o666,
        owner: FileOwner? = nil
    ) throws(SystemError) {
        try? removeFile(named: temporary)
        do throws(SystemError) {
            let file = try openFile(
                named: temporary, .writeOnly, options: [.create, .exclusive], permissions: permissions)
            if let owner { try file.changeOwner(to: owner.user, group: owner.group) }
            try file.writeAll(bytes)
            try file.synchronize()
            try file.close()
            try rename(named: temporary, to: name)
            try synchronize()
        } catch {
            try? removeFile(named: temporary)
            throw error
        }
    }
}

extension Paths {
    /// Replaces the file at `path` with `bytes`, whole or not at all, as
    /// `FileDescriptor.replaceFile(named:with:temporary:permissions:owner:)` does in the
    /// directory `path` names: the bytes are written to `path` + `temporarySuffix` first.
    public static func replaceFile(
        _ path: String, with bytes: [UInt8], temporarySuffix: String = ".new", permissions: UInt32 = 0o666,
        owner: FileOwner? = nil
    ) throws(SystemError) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        try FileDescriptor(openingDirectory: directory).replaceFile(
            named: name, with: bytes, temporary: name + temporarySuffix, permissions: permissions, owner: owner)
    }
}
