import FoundationEssentials
internal import POSIX

extension Settings {
    /// The `upload` section: where finished clips are copied to (an S3-compatible bucket, an
    /// SFTP server, a WebDAV share), with what credentials, and what happens to them then.
    public struct Upload: Equatable, Sendable {
        /// Where, or nil when `upload.url` is "" (no uploads).
        public var destination: UploadDestination?
        /// The secrets, read from the files the section names when the settings are loaded.
        public var credentials: UploadCredentials
        /// Seconds after a verified upload when the clip is deleted on the board; nil: never.
        public var deleteLocalAfter: Double?
        /// The most the uploads may send, in kbit/s; nil: as fast as the network goes.
        public var bandwidthKbit: Int?
        /// Whether a clip's picture goes with it.
        public var snapshots: Bool
        /// Why uploads cannot run as configured although the file is valid (a key file not
        /// there yet): the agent records and queues clips, and says so.
        public var problem: ConfigurationError?

        public var enabled: Bool { destination != nil }

        /// What `vigil check` says of `problem`, as FILE:LINE.
        public var checkWarning: String? {
            guard enabled, let problem else { return nil }
            return problem.warning("clips are recorded and queued, and uploaded once it is put right")
        }
    }
}

/// Where clips go. Each clip is stored under `<prefix>/<camera.name>/<its path under
/// storage.path>`, so the cameras of a fleet share one bucket or directory without clashes.
public enum UploadDestination: Equatable, Sendable {
    /// An S3-compatible bucket: `endpoint` is `https://s3.<region>.amazonaws.com` for AWS, or the
    /// server's own address (MinIO, SeaweedFS, Garage, Backblaze B2, …).
    case s3(bucket: String, prefix: String, endpoint: String, region: String)
    /// An SFTP server (OpenSSH), with a key; `directory` is absolute, or relative to the user's
    /// home when it starts with `~/`.
    case sftp(user: String, host: String, port: Int, directory: String)
    /// A WebDAV share (Nextcloud, a NAS, Apache's mod_dav): `base` is its `http(s)://…` address
    /// without a user or a trailing `/`.
    case webdav(base: String, user: String?)

    /// The destination as `upload.url` gives it, with no secret: for messages.
    public var display: String {
        switch self {
        case .s3(let bucket, let prefix, _, _): "s3://\(bucket)" + (prefix.isEmpty ? "" : "/\(prefix)")
        case .sftp(let user, let host, let port, let directory):
            "sftp://\(user)@\(host)" + (port == 22 ? "" : ":\(port)") + "/" + directory
        case .webdav(let base, _): base
        }
    }
}

/// The secrets uploads use, each from a file (never in the configuration file itself).
public struct UploadCredentials: Equatable, Sendable {
    /// S3: the access key id and the secret key.
    public var accessKey: String?
    public var secretKey: String?
    /// SFTP: the private key (OpenSSH's format, no passphrase) and the server's known host key.
    public var sshKeyFile: String?
    public var knownHostsFile: String?
    /// WebDAV: the password of the URL's user.
    public var password: String?
    /// HTTPS (S3, WebDAV): the CA certificates (PEM) the server's must be signed by, instead of
    /// the machine's (`upload.tls_ca_file`).
    public var caFile: String?
}

extension Settings {
    static func upload(_ v: ConfigValues, directory: String) throws(ConfigurationError) -> Upload {
        let after = v.number("upload.delete_local_after")
        let bandwidth = v.integer("upload.bandwidth_kbit")
        var upload = Upload(
            destination: try uploadDestination(v), credentials: UploadCredentials(),
            deleteLocalAfter: after < 0 ? nil : after * 3600, bandwidthKbit: bandwidth == 0 ? nil : bandwidth,
            snapshots: v.boolean("upload.snapshots"), problem: nil)
        guard let destination = upload.destination else { return upload }
        // The keys each kind needs, checked whether their files can be read or not.
        let needs: [String] =
            switch destination {
            case .s3: ["upload.access_key_file", "upload.secret_key_file"]
            case .sftp: ["upload.ssh_key_file", "upload.known_hosts_file"]
            case .webdav(_, let user): user == nil ? [] : ["upload.password_file"]
            }
        for key in needs where v.text(key).isEmpty {
            throw v.error(
                key,
                "upload.url = \"\(v.text("upload.url"))\" needs \(key) — \(needs.joined(separator: " and ")) name the files that hold what it signs in with (one line each, readable by the vigil user only)"
            )
        }
        if case .sftp = destination, !v.text("upload.tls_ca_file").isEmpty {
            throw v.error(
                "upload.tls_ca_file",
                "upload.tls_ca_file is for HTTPS servers (S3, WebDAV); an SFTP server is known by upload.known_hosts_file — remove it"
            )
        }
        do throws(ConfigurationError) {
            if !v.text("upload.tls_ca_file").isEmpty {
                upload.credentials.caFile = try uploadFile(v, "upload.tls_ca_file", directory: directory)
            }
            switch destination {
            case .s3:
                upload.credentials.accessKey = try secretLine(v, "upload.access_key_file", directory: directory)
                upload.credentials.secretKey = try secretLine(v, "upload.secret_key_file", directory: directory)
            case .sftp:
                upload.credentials.sshKeyFile = try uploadFile(v, "upload.ssh_key_file", directory: directory)
                upload.credentials.knownHostsFile = try uploadFile(v, "upload.known_hosts_file", directory: directory)
            case .webdav(_, let user):
                if user != nil {
                    upload.credentials.password = try secretLine(v, "upload.password_file", directory: directory)
                }
            }
        } catch {
            upload.problem = error
        }
        return upload
    }

    /// `upload.url`, with `upload.endpoint` and `upload.region` for S3; nil for "".
    static func uploadDestination(_ v: ConfigValues) throws(ConfigurationError) -> UploadDestination? {
        let url = v.text("upload.url")
        guard !url.isEmpty else { return nil }
        func bad(_ why: String) -> ConfigurationError {
            v.error(
                "upload.url",
                "upload.url = \"\(url)\" \(why) — give s3://BUCKET/PREFIX, sftp://USER@HOST[:PORT]/DIRECTORY or https://HOST/PATH (WebDAV)"
            )
        }
        guard !url.contains(where: { $0 == " " || $0 == "\"" || $0.isNewline || $0 == "?" || $0 == "#" }),
            let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://")
        else { throw bad("is not an address") }
        let scheme = url[..<colon].lowercased()
        let rest = String(url[colon...].dropFirst(3))
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = String(rest[..<slash])
        let path = String(rest[slash...].drop { $0 == "/" }.reversed().drop { $0 == "/" }.reversed())
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        if !path.isEmpty, segments.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) {
            throw bad("has an empty, . or .. part in its path")
        }
        switch scheme {
        case "s3":
            let bucket = authority
            let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789.-")
            guard (3...63).contains(bucket.count), bucket.allSatisfy(allowed.contains),
                bucket.first != ".", bucket.first != "-"
            else {
                throw bad(
                    "does not name a bucket (3 to 63 lowercase letters, digits, dots and hyphens, after s3://)")
            }
            let region = v.text("upload.region")
            guard !region.isEmpty, region.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
                throw v.error(
                    "upload.region",
                    "upload.region = \"\(region)\" is not a region — give the bucket's (us-east-1, eu-central-1; the one your S3-compatible server expects, often us-east-1)"
                )
            }
            var endpoint = v.text("upload.endpoint")
            while endpoint.hasSuffix("/") { endpoint.removeLast() }
            if endpoint.isEmpty {
                endpoint = "https://s3.\(region).amazonaws.com"
            } else {
                let lower = endpoint.lowercased()
                guard lower.hasPrefix("http://") || lower.hasPrefix("https://"),
                    !endpoint.dropFirst(8).contains("/"),
                    !endpoint.contains(where: { $0 == " " || $0 == "?" || $0 == "#" || $0 == "@" })
                else {
                    throw v.error(
                        "upload.endpoint",
                        "upload.endpoint = \"\(v.text("upload.endpoint"))\" is not a server's address — give it as https://HOST[:PORT] (http:// on a trusted network only), or \"\" for AWS"
                    )
                }
            }
            return .s3(bucket: bucket, prefix: path, endpoint: endpoint, region: region)
        case "sftp":
            guard let at = authority.lastIndex(of: "@"), at != authority.startIndex else {
                throw bad("names no user (sftp://USER@HOST/DIRECTORY)")
            }
            let user = String(authority[..<at])
            var host = String(authority[authority.index(after: at)...])
            var port = 22
            if let colon = host.lastIndex(of: ":"), !host.hasSuffix("]") {
                guard let number = Int(host[host.index(after: colon)...]), (1...65535).contains(number) else {
                    throw bad("has a port that is not a number from 1 to 65535")
                }
                port = number
                host = String(host[..<colon])
            }
            guard !host.isEmpty, !user.contains(":"), !path.isEmpty else {
                throw bad(
                    "names no host or no directory (sftp://USER@HOST/DIRECTORY; no password in it: use upload.ssh_key_file)"
                )
            }
            return .sftp(user: user, host: host, port: port, directory: path)
        case "http", "https":
            var host = authority
            var user: String?
            if let at = authority.lastIndex(of: "@") {
                user = String(authority[..<at])
                host = String(authority[authority.index(after: at)...])
                guard let name = user, !name.isEmpty, !name.contains(":") else {
                    throw bad(
                        "has a password in it — put the user only in the URL, the password in upload.password_file")
                }
            }
            guard !host.isEmpty else { throw bad("names no server") }
            return .webdav(base: "\(scheme)://\(host)" + (path.isEmpty ? "" : "/\(path)"), user: user)
        default:
            throw bad("has a scheme Vigil does not upload to (\(scheme))")
        }
    }

    /// The largest key or password file read.
    static let secretFileLimit = 65536

    /// The first line of the file `key` names (a key, a secret, a password), made absolute
    /// against `directory`, spaces around it dropped: a regular file of at most `secretFileLimit` bytes.
    static func secretLine(_ v: ConfigValues, _ key: String, directory: String) throws(ConfigurationError) -> String {
        let path = try uploadFile(v, key, directory: directory)
        return try secretFileLine(
            v, key, path: path, limit: secretFileLimit, holding: "it", meanwhile: "clips are queued until then",
            trimmed: true)
    }

    /// The first line of the secret file `path` (setting `key`): a regular file (a device or a
    /// pipe is refused without reading it) of at most `limit` bytes whose first line is text.
    /// `holding`: what the line is, for the messages; `meanwhile`: what waits until it is put
    /// right. `trimmed`: spaces and a carriage return around the line dropped. `kept`: what the
    /// file opens, when only its owner (and group) may read it (`SecretFile`).
    static func secretFileLine(
        _ v: ConfigValues, _ key: String, path: String, limit: Int, holding what: String, meanwhile: String,
        trimmed: Bool = false, kept: String? = nil
    ) throws(ConfigurationError) -> String {
        let read: (bytes: [UInt8], status: FileStatus)
        do throws(SmallFile.Problem) {
            read = try SmallFile.readWithStatus(path, limit: limit)
        } catch {
            switch error {
            case .notRegular:
                throw v.error(
                    key,
                    "\(key): \(path) is not a regular file (a device, a pipe or a directory) — give a file that holds \(what) on its first line; \(meanwhile)"
                )
            case .tooLarge(let size):
                throw v.error(
                    key,
                    "\(key): \(path) is \(size) bytes, more than such a file holds (\(limit)) — is it the right file? Put \(what) on its first line; \(meanwhile)"
                )
            case .unreadable(let error):
                throw v.error(key, "\(key): \(path) cannot be read: \(error) — check its permissions; \(meanwhile)")
            }
        }
        if let kept, let problem = SecretFile.problem(key: key, path: path, status: read.status, holding: kept) {
            throw v.error(key, problem + "; \(meanwhile)")
        }
        let bytes = read.bytes
        var line = ArraySlice(bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).first ?? [])
        if trimmed {
            let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
            line = line.drop(while: blank)
            while let last = line.last, blank(last) { line = line.dropLast() }
        }
        guard bytes.count <= limit, !line.isEmpty, let text = String(validating: Array(line), as: UTF8.self) else {
            throw v.error(
                key,
                "\(key): \(path) is empty, or its first line is not text — put \(what) on its first line; \(meanwhile)")
        }
        return text
    }

    /// The file `key` names, made absolute, when this user can read it.
    static func uploadFile(_ v: ConfigValues, _ key: String, directory: String) throws(ConfigurationError) -> String {
        let path = resolve(v.text(key), against: directory)
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw v.error(
                key,
                "\(key): \(path) does not exist or cannot be read by this user — check the path and its permissions (clips are queued and uploaded once it can be read)"
            )
        }
        return path
    }
}
