import FoundationEssentials
import Media
internal import POSIX

extension Settings {
    /// The `web` section: the agent's own web server (`/`, the live view, `/api/clips`, the
    /// clips, `/metrics`).
    public struct Web: Equatable, Sendable {
        public var enabled: Bool
        /// The numeric address it listens on: this machine's loopback only (127.0.0.1, ::1)
        /// unless a password file is set.
        public var listen: String
        /// Its port; 0 for any free one (the log says which).
        public var port: Int
        /// `web.url`: the address other machines reach the server at (no trailing /); nil when
        /// not set.
        public var url: String?
        /// `web.password_file`, made absolute; nil when none is set (then: loopback only).
        public var passwordFile: String?
        /// Who may sign in (read from `passwordFile` when the settings are loaded, with the
        /// server on); nil without a password file.
        public var passwords: WebPasswords?
        /// `web.tls_cert_file` and `web.tls_key_file`, made absolute; nil when not set (then:
        /// plain HTTP).
        public var tlsCertFile: String?
        public var tlsKeyFile: String?
        /// Their contents (read when the settings are loaded, with the server on): the server
        /// speaks HTTPS with them.
        public var tls: TLS?
        /// Why the server cannot run as configured (its password file, certificate or key cannot
        /// be read or is not one): the agent records without it, and says so.
        public var problem: ConfigurationError?
        /// `web.metrics_token_file`, made absolute; nil when none is set.
        public var metricsTokenFile: String?
        /// Its first line (read when the settings are loaded, with the server on): a request
        /// that sends it (`Authorization: Bearer TOKEN`, as Prometheus does) reads `/metrics`,
        /// and nothing else, without a user and password.
        public var metricsToken: String?
        /// When the certificate is valid, seconds since 1970 (read with it).
        public var certificateNotBefore: Int?
        public var certificateNotAfter: Int?
        /// What to say when the certificate has expired, is not valid yet, or ends within
        /// `certificateNotice`: a warning, at start and from `vigil check` — it is served all
        /// the same (it still encrypts; refusing it would lock the owner out).
        public var certificateWarning: ConfigurationError?

        /// A certificate (its chain may follow it) and its private key, PEM text.
        public struct TLS: Equatable, Sendable {
            public var certificate: String
            public var key: String
            public init(certificate: String, key: String) {
                self.certificate = certificate
                self.key = key
            }
        }

        /// `http` or `https`.
        public var scheme: String { tls == nil ? "http" : "https" }

        /// Where links in messages to other machines (MQTT's `last_clip`, the `saved` event) point:
        /// `url`, or when the server listens on other machines' addresses, this machine's name
        /// (`host`) and the port; nil when the server is off, or on loopback without `url`.
        public func linkBase(host: String) -> String? {
            guard enabled else { return nil }
            if let url { return url }
            guard !Self.isLoopback(listen), port != 0, !host.isEmpty else { return nil }
            return "\(scheme)://\(host):\(port)"
        }

        /// What `vigil check` says of `problem` (the server would stay off), as FILE:LINE.
        public var checkWarning: String? {
            guard enabled, let problem else { return nil }
            return problem.warning("the web server stays off until then; recording is not affected")
        }
    }

    static func web(_ v: ConfigValues, directory: String) throws(ConfigurationError) -> Web {
        let listen = v.text("web.listen")
        let file = v.text("web.password_file")
        if !Web.isLoopback(listen) && file.isEmpty {
            throw v.error(
                "web.listen",
                "web.listen = \"\(listen)\" serves other machines, and the web server has no password — set web.password_file and make a password with `vigil passwd`, or use 127.0.0.1 (or ::1) and reach it through SSH (ssh -L 8080:127.0.0.1:8080 the-camera, then http://localhost:8080/)"
            )
        }
        let certificate = v.text("web.tls_cert_file")
        let key = v.text("web.tls_key_file")
        if certificate.isEmpty != key.isEmpty {
            throw v.error(
                certificate.isEmpty ? "web.tls_key_file" : "web.tls_cert_file",
                "web.tls_cert_file and web.tls_key_file go together — give both (the certificate and its private key, PEM), or neither for plain HTTP"
            )
        }
        var url = v.text("web.url")
        while url.hasSuffix("/") { url.removeLast() }
        if !url.isEmpty {
            let lower = url.lowercased()
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), url.count > "https://".count,
                !url.contains(where: { $0 == " " || $0 == "\"" || $0 == "<" || $0 == ">" || $0.isNewline }),
                !url.contains("?"), !url.contains("#")
            else {
                throw v.error(
                    "web.url",
                    "web.url = \"\(v.text("web.url"))\" is not the address of the server — give it as http://NAME:PORT or https://NAME:PORT, the name other machines know this camera by (camera.local, 192.168.1.20)"
                )
            }
        }
        var web = Web(
            enabled: v.boolean("web.enabled"), listen: listen, port: v.integer("web.port"),
            url: url.isEmpty ? nil : url,
            passwordFile: file.isEmpty ? nil : resolve(file, against: directory), passwords: nil,
            tlsCertFile: certificate.isEmpty ? nil : resolve(certificate, against: directory),
            tlsKeyFile: key.isEmpty ? nil : resolve(key, against: directory), tls: nil, problem: nil)
        let token = v.text("web.metrics_token_file")
        web.metricsTokenFile = token.isEmpty ? nil : resolve(token, against: directory)
        // Only read when the server is on: a config that turns it off need not have the files.
        // Each is read even after another's problem (the first is the one said), so the
        // certificate's dates are said whatever else is wrong.
        guard web.enabled else { return web }
        if let certificatePath = web.tlsCertFile, let keyPath = web.tlsKeyFile {
            do throws(ConfigurationError) {
                let certificateText = try pemFile(v, "web.tls_cert_file", certificatePath, holding: .certificate)
                guard let dates = CertificateDates.read(certificateText) else {
                    throw v.error(
                        "web.tls_cert_file",
                        "web.tls_cert_file: \(certificatePath) holds no certificate GnuTLS can read — give the server's certificate in PEM, as openssl x509 -in FILE -noout -dates reads it"
                    )
                }
                web.certificateNotBefore = dates.notBefore
                web.certificateNotAfter = dates.notAfter
                web.certificateWarning = Web.certificateWarning(
                    dates, path: certificatePath, now: WallClock.now().seconds
                ).map { v.error("web.tls_cert_file", $0) }
                let keyText = try pemFile(v, "web.tls_key_file", keyPath, holding: .privateKey)
                web.tls = Web.TLS(certificate: certificateText, key: keyText)
            } catch {
                web.problem = error
            }
        }
        if let path = web.passwordFile {
            do {
                let (passwords, status) = try WebPasswords.readWithStatus(path)
                if let problem = SecretFile.problem(
                    key: "web.password_file", path: path, status: status,
                    holding: "hashes that sign in as well as the passwords")
                {
                    web.problem = web.problem ?? v.error("web.password_file", problem)
                } else {
                    web.passwords = passwords
                }
            } catch {
                web.problem = web.problem ?? v.error("web.password_file", "web.password_file: \(error)")
            }
        }
        if let path = web.metricsTokenFile {
            do throws(ConfigurationError) {
                web.metricsToken = try metricsToken(v, path: path)
            } catch {
                web.problem = web.problem ?? error
            }
        }
        return web
    }

    /// The shortest metrics token taken: one a person made up is guessed.
    static let metricsTokenMinimum = 16

    /// `web.metrics_token_file`'s first line (spaces around it dropped, as Prometheus drops
    /// them from its credentials_file): a file kept like the password file, of a token long
    /// enough not to be guessed.
    static func metricsToken(_ v: ConfigValues, path: String) throws(ConfigurationError) -> String {
        let key = "web.metrics_token_file"
        // What the web server's problem adds (`checkWarning`, the log) says the rest.
        let meanwhile = "or leave web.metrics_token_file unset"
        let token = try secretFileLine(
            v, key, path: path, limit: 4096, holding: "the token", meanwhile: meanwhile, trimmed: true,
            kept: "the token that reads /metrics")
        guard token.utf8.count >= metricsTokenMinimum, !token.contains(where: { $0 == " " || $0 == "\t" }) else {
            throw v.error(
                key,
                "\(key): \(path) holds a token of \(token.utf8.count) characters, or with spaces in it — give one of at least \(metricsTokenMinimum) that nobody guesses: openssl rand -hex 32 > \(path)"
            )
        }
        return token
    }

    /// What a PEM file given to the web server holds.
    enum PEMContent {
        case certificate, privateKey
    }

    /// The largest certificate chain or key file read.
    static let pemFileLimit = 1 << 20

    /// The PEM text of `path` (setting `key`), which must be a readable regular file holding
    /// `content` (a private key not encrypted: the agent has no one to ask for a passphrase).
    static func pemFile(
        _ v: ConfigValues, _ key: String, _ path: String, holding content: PEMContent
    )
        throws(ConfigurationError) -> String
    {
        let what = content == .certificate ? "a certificate" : "a private key"
        let bytes: [UInt8]
        let status: FileStatus
        do throws(SmallFile.Problem) {
            (bytes, status) = try SmallFile.readWithStatus(path, limit: pemFileLimit)
        } catch {
            switch error {
            case .notRegular:
                throw v.error(key, "\(key): \(path) is not a regular file — give the PEM file of \(what)")
            case .tooLarge(let size):
                throw v.error(key, "\(key): \(path) is \(size) bytes, more than \(what) in PEM — is it the right file?")
            case .unreadable(let error):
                throw v.error(
                    key,
                    "\(key): \(path) cannot be read: \(error) — the agent's user (vigil) must be able to read it: chgrp vigil \(path) && chmod g+r \(path)"
                )
            }
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let marker = content == .certificate ? "CERTIFICATE-----" : "PRIVATE KEY-----"
        guard text.contains("-----BEGIN "), text.contains(marker) else {
            throw v.error(
                key,
                "\(key): \(path) is not \(what) in PEM form (no -----BEGIN …\(marker) line) — give the .pem or .crt/.key file, not a DER one (openssl x509 -inform der converts it)"
            )
        }
        if content == .privateKey, text.contains("ENCRYPTED") {
            throw v.error(
                key,
                "\(key): \(path) is encrypted with a passphrase, which the agent has no one to ask for — decrypt a copy for it (openssl pkey -in \(path) -out KEY) and keep that one readable by vigil only"
            )
        }
        if content == .privateKey,
            let problem = SecretFile.problem(
                key: key, path: path, status: status,
                holding: "the private key, with which anyone can pose as this camera")
        {
            throw v.error(key, problem)
        }
        return text
    }
}

extension Settings.Web {
    /// Whether `address` is a numeric loopback address: 127.x.y.z or ::1.
    public static func isLoopback(_ address: String) -> Bool {
        if address == "::1" { return true }
        let parts = address.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber)
                && (Int(part) ?? 256) <= 255
        }
    }
}

/// The web server's password file: one line per user, `USER:REALM:HA1`, HA1 being the MD5 of
/// `USER:REALM:PASSWORD` in hexadecimal — the form `htdigest` writes and HTTP Digest
/// authentication checks against, so the password itself is never stored. Every line has the
/// same realm (the name the browser shows when it asks); `vigil passwd` makes it with a random
/// part, so the same password gives another hash on every camera.
public struct WebPasswords: Equatable, Sendable {
    public var realm: String
    /// Each user's HA1, 16 bytes.
    public var users: [String: [UInt8]]

    public init(realm: String, users: [String: [UInt8]] = [:]) {
        self.realm = realm
        self.users = users
    }

    /// The largest password file read.
    static let sizeLimit = 65536

    /// HA1 for `user` with `password` in `realm`.
    public static func hash(user: String, realm: String, password: String) -> [UInt8] {
        MD5.digest(Array("\(user):\(realm):\(password)".utf8))
    }

    /// Sets `user`'s password.
    public mutating func set(user: String, password: String) {
        users[user] = Self.hash(user: user, realm: realm, password: password)
    }

    /// What a user name may be: a colon would end it, and the browser sends it in a header.
    public static func nameProblem(_ user: String) -> String? {
        if user.isEmpty || user.utf8.count > 64 { return "a user name of 1 to 64 characters" }
        if user.contains(where: { $0 == ":" || $0 == "\"" || $0 == "\\" || !$0.isASCII || $0.isWhitespace }) {
            return "a user name of ASCII letters, digits and punctuation, without a colon, quote or backslash"
        }
        return nil
    }

    /// A realm with 8 random hexadecimal digits in it (from `random`, 4 bytes).
    public static func newRealm(random: [UInt8]) -> String {
        "Vigil " + random.prefix(4).lowercaseHex
    }

    /// The file's text: a line per user, sorted.
    public var text: String {
        users.keys.sorted().map { user in
            "\(user):\(realm):" + users[user]!.lowercaseHex + "\n"
        }.joined()
    }

    /// The passwords `text` holds; what is wrong with it, said for a person, when it is not a
    /// password file (or holds nobody).
    public static func parse(_ text: String) throws(WebPasswordsError) -> WebPasswords {
        var realm: String?
        var users: [String: [UInt8]] = [:]
        // Lines end in LF or CRLF (one Character in Swift: `isNewline` takes both).
        for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            if line.isEmpty { continue }
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count == 3, let ha1 = hexBytes(fields[2]), ha1.count == 16, !fields[0].isEmpty,
                !fields[1].isEmpty
            else {
                throw WebPasswordsError(
                    "line \(index + 1) is not USER:REALM:HASH (32 hexadecimal digits) — make the file with `vigil passwd`"
                )
            }
            if let realm, realm != String(fields[1]) {
                throw WebPasswordsError(
                    "line \(index + 1) has the realm \"\(fields[1])\", another than the first line's \"\(realm)\" — one file, one realm: make it again with `vigil passwd`"
                )
            }
            realm = String(fields[1])
            users[String(fields[0])] = ha1
        }
        guard let realm, !users.isEmpty else {
            throw WebPasswordsError("it holds no user — add one with `vigil passwd`")
        }
        return WebPasswords(realm: realm, users: users)
    }

    /// The passwords in the file at `path`: a regular file of at most 64 KB.
    public static func read(_ path: String) throws(WebPasswordsError) -> WebPasswords {
        try readWithStatus(path).passwords
    }

    /// `read`'s passwords, and what `fstat` said of their file (its mode and owner).
    static func readWithStatus(
        _ path: String
    ) throws(WebPasswordsError) -> (passwords: WebPasswords, status: FileStatus) {
        let bytes: [UInt8]
        let status: FileStatus
        do throws(SmallFile.Problem) {
            (bytes, status) = try SmallFile.readWithStatus(path, limit: sizeLimit)
        } catch {
            switch error {
            case .notRegular:
                throw WebPasswordsError("\(path) is not a regular file — give the file `vigil passwd` writes")
            case .tooLarge(let size):
                throw WebPasswordsError(
                    "\(path) is \(size) bytes, more than a password file holds — is it the right file?")
            case .unreadable(let error):
                throw WebPasswordsError(
                    "\(path) cannot be read: \(error) — make it with `vigil passwd`, readable by the agent's user")
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw WebPasswordsError("\(path) is not text — make it with `vigil passwd`")
        }
        do { return (try parse(text), status) } catch { throw WebPasswordsError("\(path): \(error.description)") }
    }

    private static func hexBytes(_ text: Substring) -> [UInt8]? {
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[i]), let low = nibble(digits[i + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }
}

/// Why a password file cannot be used.
public struct WebPasswordsError: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String
    init(_ description: String) { self.description = description }
}
