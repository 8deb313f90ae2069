internal import POSIX

/// A file whose contents open the camera to whoever reads them (the web server's password
/// file, whose hashes sign in as well as the passwords; the certificate's private key; the
/// metrics token): only its owner may change it, and nobody but its owner and its group may
/// read it; its owner is root, the user the agent runs as, or the vigil account (another user
/// could rewrite it). `vigil passwd` makes the password file mode 0600, owned by vigil.
enum SecretFile {
    /// What is wrong with the file `key` names at `path`, of mode `permissions` owned by
    /// `owner` and `group`, for a person: the file, its mode and owner, why it matters (it holds
    /// `holding`) and the fix; nil when it is kept as a secret. `trusted`: the owners that may
    /// own it.
    static func problem(
        key: String, path: String, permissions: UInt32, owner: UInt32, group: UInt32, trusted: Set<UInt32>,
        holding: String
    ) -> String? {
        var wrong: [String] = []
        if permissions & 0o022 != 0 { wrong.append("others than its owner can change it") }
        if permissions & 0o004 != 0 { wrong.append("anyone on this machine can read it") }
        if !trusted.contains(owner) {
            wrong.append("its owner is neither root nor the user the agent runs as, and can change it")
        }
        guard !wrong.isEmpty else { return nil }
        var octal = String(permissions & 0o7777, radix: 8)
        while octal.count < 3 { octal = "0" + octal }
        let ownerName = UserAccounts.userName(of: owner) ?? String(owner)
        let groupName = UserAccounts.groupName(of: group) ?? String(group)
        return
            "\(key): \(path) is mode 0\(octal) (owner \(ownerName), group \(groupName)): \(wrong.joined(separator: "; ")), and it holds \(holding) — chmod 600 \(path) owned by the agent's user (chown vigil \(path)), or chown root:vigil \(path) and chmod 640 \(path)"
    }

    /// The owners a secret file may have: root, the user this process runs as, and the vigil
    /// account (`vigil check` runs as root, the agent as vigil).
    static var trustedOwners: Set<UInt32> {
        var owners: Set<UInt32> = [0, ProcessID.userID]
        if let vigil = UserAccounts.userID(named: "vigil") { owners.insert(vigil) }
        return owners
    }

    /// `problem` for the file whose status `status` is.
    static func problem(key: String, path: String, status: FileStatus, holding: String) -> String? {
        problem(
            key: key, path: path, permissions: status.permissions, owner: status.owner, group: status.group,
            trusted: trustedOwners, holding: holding)
    }
}
