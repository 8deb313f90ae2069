internal import Glibc

/// Users and groups of this machine, by name and by number (`getpwnam_r`, `getpwuid_r`,
/// `getgrgid_r`: the C library's own reading of /etc/passwd, /etc/group and NSS).
public enum UserAccounts {
    /// The number of the user `name`; nil when there is no such user.
    public static func userID(named name: String) -> UInt32? {
        lookUpUser { getpwnam_r(name, &$0, $1, $2, &$3) }.map(\.id)
    }

    /// The user `name` and its primary group, as a file's owner; nil when there is no such user.
    public static func owner(named name: String) -> FileOwner? {
        lookUpUser { getpwnam_r(name, &$0, $1, $2, &$3) }.map { (user: $0.id, group: $0.group) }
    }

    /// The name of user `id`; nil when it has none.
    public static func userName(of id: UInt32) -> String? {
        lookUpUser { getpwuid_r(id, &$0, $1, $2, &$3) }.map(\.name)
    }

    /// The name of group `id`; nil when it has none.
    public static func groupName(of id: UInt32) -> String? {
        var entry = group()
        var found: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: bufferSize)
        guard getgrgid_r(id, &entry, &buffer, buffer.count, &found) == 0, found != nil, let name = entry.gr_name
        else { return nil }
        return String(cString: name)
    }

    /// Room for one entry's strings: more than any account of a small board has.
    private static let bufferSize = 16 * 1024

    private static func lookUpUser(
        _ call: (inout passwd, UnsafeMutablePointer<CChar>, Int, inout UnsafeMutablePointer<passwd>?) -> Int32
    ) -> (id: UInt32, group: UInt32, name: String)? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: bufferSize)
        let result = buffer.withUnsafeMutableBufferPointer { b -> Int32 in
            guard let base = b.baseAddress else { return ENOMEM }
            return call(&entry, base, b.count, &found)
        }
        guard result == 0, found != nil, let name = entry.pw_name else { return nil }
        return (entry.pw_uid, entry.pw_gid, String(cString: name))
    }
}
