internal import POSIX

/// `onvif.password_file`: a line per user, `USER:PASSWORD`, the password itself (it may hold
/// colons: the user ends at the first). ONVIF clients sign their SOAP calls with a WS-Security
/// PasswordDigest, `Base64(SHA-1(nonce + created + password))`, which only a holder of the
/// password can check — so this file holds it in the clear, and is kept like the metrics
/// token: only root, the agent's user or vigil may own it, nobody else read it (0640
/// root:vigil, or 0600). `vigil passwd --onvif USER` writes a user here and its Digest hash in
/// `web.password_file`, so the same user signs in to ONVIF, the pictures (HTTP Digest) and
/// the stream (RTSP Digest).
public struct ONVIFPasswords: Equatable, Sendable {
    /// User → password.
    public var users: [String: String]

    public init(users: [String: String] = [:]) { self.users = users }

    /// The largest file read.
    static let sizeLimit = 65536

    /// The file's text: a line per user, sorted.
    public var text: String {
        users.keys.sorted().map { "\($0):\(users[$0]!)\n" }.joined()
    }

    /// The users of `text`; what is wrong with it, said for a person, when it is not such a
    /// file (a line without a colon, a user twice, a bad name, an empty password, a NUL).
    public static func parse(_ text: String) throws(WebPasswordsError) -> ONVIFPasswords {
        var users: [String: String] = [:]
        guard !text.utf8.contains(0) else {
            throw WebPasswordsError("it holds a NUL byte — it is not a file of USER:PASSWORD lines")
        }
        for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            if line.isEmpty { continue }
            guard let colon = line.firstIndex(of: ":") else {
                throw WebPasswordsError(
                    "line \(index + 1) is not USER:PASSWORD — make the file with `sudo vigil passwd --onvif USER`")
            }
            let user = String(line[..<colon])
            let password = String(line[line.index(after: colon)...])
            if let problem = WebPasswords.nameProblem(user) {
                throw WebPasswordsError(
                    "line \(index + 1)'s user is not one a password file takes — give \(problem) (`sudo vigil passwd --onvif USER`)"
                )
            }
            guard !password.isEmpty else {
                throw WebPasswordsError(
                    "line \(index + 1) gives \(user) an empty password — set one with `sudo vigil passwd --onvif \(user)`"
                )
            }
            guard users[user] == nil else {
                throw WebPasswordsError(
                    "line \(index + 1) gives \(user) a second password — one line a user: set it again with `sudo vigil passwd --onvif \(user)`"
                )
            }
            users[user] = password
        }
        guard !users.isEmpty else {
            throw WebPasswordsError("it holds no user — add one with `sudo vigil passwd --onvif USER`")
        }
        return ONVIFPasswords(users: users)
    }

    /// The users of the file at `path` (a regular file of at most 64 KB), and what `fstat` said
    /// of it (its mode and owner).
    public static func read(_ path: String) throws(WebPasswordsError) -> ONVIFPasswords {
        try readWithStatus(path).passwords
    }

    static func readWithStatus(
        _ path: String
    ) throws(WebPasswordsError) -> (passwords: ONVIFPasswords, status: FileStatus) {
        let bytes: [UInt8]
        let status: FileStatus
        do throws(SmallFile.Problem) {
            (bytes, status) = try SmallFile.readWithStatus(path, limit: sizeLimit)
        } catch {
            switch error {
            case .notRegular:
                throw WebPasswordsError(
                    "\(path) is not a regular file — give the file `sudo vigil passwd --onvif USER` writes")
            case .tooLarge(let size):
                throw WebPasswordsError(
                    "\(path) is \(size) bytes, more than a password file holds (\(sizeLimit)) — is it the right file?")
            case .unreadable(let error):
                throw WebPasswordsError(
                    "\(path) cannot be read: \(error) — make it with `sudo vigil passwd --onvif USER` (0640 root:vigil), readable by the agent's user"
                )
            }
        }
        guard bytes.count <= sizeLimit, let text = String(validating: bytes, as: UTF8.self) else {
            throw WebPasswordsError("\(path) is not UTF-8 text — make it with `sudo vigil passwd --onvif USER`")
        }
        do { return (try parse(text), status) } catch { throw WebPasswordsError("\(path): \(error.description)") }
    }
}
