import Configuration
import POSIX
import Storage

/// `vigil passwd [--onvif] [--user NAME | NAME] [--config FILE]`: sets a password for the web
/// server (and with `--onvif`, the same one in `onvif.password_file`).
enum PasswdCommand: Command {
    static let name = "passwd"
    static let abstract = "Set a user's password for the web server (web.password_file)."
    static let synopsis = "[--onvif] [--user NAME | NAME] [--config FILE]"
    static let discussion = """
        Asks for the password (twice on a terminal; otherwise it reads the first line of
        standard input) and writes it to the file web.password_file names, adding the user
        (admin unless given) or changing its password; other users are kept. The file holds
        MD5(user:realm:password) per user, as HTTP Digest authentication checks it (htdigest's
        format), never the password; its realm has a random part, so the same password hashes
        differently on every camera. It is written whole or not at all, mode 0600, owned by the
        vigil user when there is one (the agent reads it as that user). Restart the agent for
        it to take effect.

        With --onvif it also writes the password itself to the file onvif.password_file
        names (USER:PASSWORD lines, other users kept): ONVIF clients (Home Assistant, NVRs)
        sign their calls with a WS-Security PasswordDigest, which only the password itself
        checks, while they fetch the picture with HTTP Digest and play the stream with RTSP
        Digest, which web.password_file checks — so the user is set in both. That file is
        made mode 0640 owned by root, group vigil, when run as root (sudo), else mode 0600;
        use a password used nowhere else.

        A password is at most 1024 bytes: a longer one is refused, never cut.

        Exit 0 when written; 78 when web.password_file (or with --onvif, onvif.password_file)
        is not set or is not a password file; 65
        for a password or user name that cannot be used (empty, or too long); 73 when the file
        cannot be written.
        """
    static let options = [
        configOption,
        OptionSpec(name: "user", valueName: "NAME", help: "whose password (admin unless given; or NAME alone)"),
        OptionSpec(
            name: "onvif", valueName: nil,
            help: "set it in onvif.password_file too (ONVIF's PasswordDigest: Home Assistant)"),
    ]
    static let positionalLimit = 1

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        let named = arguments.positionals.first
        if let named, let given = arguments.value("user"), named != given {
            throw UsageError(message: "the user is given twice (--user \(given) and \(named)): give it once")
        }
        let user = named ?? arguments.value("user") ?? "admin"
        if let problem = WebPasswords.nameProblem(user) {
            printError("vigil passwd: --user \(user): give \(problem)")
            return .dataError
        }
        let onvif = arguments.flag("onvif")
        guard let (path, settings) = loadSettings(arguments, onvifFileMayBeBad: true) else { return .config }
        guard let file = settings.web.passwordFile else {
            printError(
                "vigil passwd: \(path): web.password_file is not set — set it (for example web = { password_file = \"/etc/vigil/web-passwords\"; };), then run vigil passwd again"
            )
            return .config
        }
        var passwords: WebPasswords
        if (try? Paths.status(file)) != nil {
            do { passwords = try WebPasswords.read(file) } catch {
                printError("vigil passwd: \(error.description); remove it to start a new one")
                return .config
            }
        } else {
            var generator = SystemRandomNumberGenerator()
            let random = (0..<4).map { _ in generator.next() as UInt8 }
            passwords = WebPasswords(realm: WebPasswords.newRealm(random: random))
        }
        var clear: (path: String, passwords: ONVIFPasswords)?
        if onvif {
            guard let onvifFile = settings.onvif.passwordFile else {
                printError(
                    "vigil passwd: \(path): onvif.password_file is not set — set it (for example onvif = { password_file = \"/etc/vigil/onvif-passwords\"; };), then run sudo vigil passwd --onvif \(user) again"
                )
                return .config
            }
            var existing = ONVIFPasswords()
            if (try? Paths.status(onvifFile)) != nil {
                do { existing = try ONVIFPasswords.read(onvifFile) } catch {
                    printError("vigil passwd: \(error.description); remove it to start a new one")
                    return .config
                }
            }
            clear = (onvifFile, existing)
        }
        guard let password = readPassword(for: user) else { return .dataError }
        passwords.set(user: user, password: password)
        if let error = write(passwords.text, to: file) {
            printError(
                "vigil passwd: \(file) cannot be written: \(error) — is the directory there and writable by this user?")
            return .cannotCreate
        }
        if var clear {
            clear.passwords.users[user] = password
            // root:vigil 0640 (the agent reads it as vigil; only root changes it), else this
            // user's, 0600.
            let vigil = ProcessID.isRoot ? UserAccounts.owner(named: "vigil") : nil
            let owner = vigil.map { (user: UInt32(0), group: $0.group) }
            do {
                try Paths.replaceFile(
                    clear.path, with: Array(clear.passwords.text.utf8),
                    temporarySuffix: ".new-\(ProcessID.current)", permissions: owner == nil ? 0o600 : 0o640,
                    owner: owner)
            } catch {
                printError(
                    "vigil passwd: \(clear.path) cannot be written: \(error.description) — is the directory there and writable by this user? \(file) has the new password already; run this again once it can be"
                )
                return .cannotCreate
            }
        }
        let both = clear.map { " and in \($0.path) (ONVIF)" } ?? ""
        printOut(
            "vigil passwd: \(user)'s password is set in \(file) (realm \"\(passwords.realm)\")\(both); restart the agent to use it (sudo systemctl restart vigil)"
        )
        return .success
    }

    /// The longest password taken, in bytes: well below what a terminal holds of one line
    /// (4095 characters), so that a password is never cut on its way in, and longer than any
    /// password a person types or a manager makes.
    static let passwordLimit = 1024

    /// The password: asked twice with the echo off on a terminal, else the first line of
    /// standard input. nil (said) when it is empty, longer than `passwordLimit`, or the two
    /// differ.
    static func readPassword(for user: String) -> String? {
        let terminal = Terminal.isTerminal(0)
        func line(_ prompt: String) -> String? {
            if terminal { writeAll(prompt, to: 2) }
            return Terminal.withoutEcho(0) { quiet in
                defer { if quiet { writeAll("\n", to: 2) } }
                let input = FileDescriptor(unowned: 0)
                var bytes: [UInt8] = []
                // One byte past the limit is enough to refuse the line (nothing more is read).
                while bytes.count <= passwordLimit, let byte = try? input.read(count: 1).first,
                    byte != UInt8(ascii: "\n")
                {
                    bytes.append(byte)
                }
                if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
                return String(validating: bytes, as: UTF8.self)
            }
        }
        guard let first = line("password for \(user): "), !first.isEmpty else {
            printError("vigil passwd: no password given (an empty one is not taken)")
            return nil
        }
        guard first.utf8.count <= passwordLimit else {
            printError(
                "vigil passwd: the password is longer than \(passwordLimit) bytes, which is not taken (it would be cut) — give a shorter one; nothing was changed"
            )
            return nil
        }
        if terminal {
            guard line("again: ") == first else {
                printError("vigil passwd: the two passwords differ; nothing was changed")
                return nil
            }
        }
        return first
    }

    /// Writes `text` to `path` whole or not at all (POSIX's durable replace): a new file beside
    /// it (`NAME.new-PID`), mode 0600, owned by the vigil user when run as root and there is
    /// one, synced, renamed over it. The error, or nil.
    static func write(_ text: String, to path: String) -> String? {
        let owner = ProcessID.isRoot ? UserAccounts.owner(named: "vigil") : nil
        do {
            try Paths.replaceFile(
                path, with: Array(text.utf8), temporarySuffix: ".new-\(ProcessID.current)", permissions: 0o600,
                owner: owner)
        } catch { return error.description }
        return nil
    }
}
