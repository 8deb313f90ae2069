import Configuration
import FoundationEssentials
import Media
import POSIX
import QuickTime
import Recorder

/// An upload that arrived whole: verified on the server after it was sent.
public struct UploadReceipt: Sendable, Equatable {
    /// Where it is (`s3://bucket/key`, `sftp://user@host/path`, `https://host/path`).
    public var url: String
    public var bytes: Int64
    /// How long sending and verifying took.
    public var seconds: Double
    /// The copy on the server was read back whole and its MD5 matched the clip's.
    public var readBack = false
}

/// Why an upload did not happen.
public enum UploadProblem: Error, CustomStringConvertible, Equatable {
    /// The file is not on the board (deleted since it was queued): nothing to upload.
    case fileGone(String)
    /// The server refused who we are (credentials, the host key) or where we write (no such
    /// bucket, permission denied): a person must act. Tried again, as the rest.
    case refused(String)
    /// The network, a timeout, the server's error, a check that failed: tried again.
    case failed(String)
    /// The agent stops.
    case stopped

    public var description: String {
        switch self {
        case .fileGone(let why), .refused(let why), .failed(let why): why
        case .stopped: "stopped"
        }
    }
}

/// The destination of `upload.url` with its credentials: sends one file there, under
/// `<prefix>/<camera>/<its path under storage.path>`, and checks it arrived whole. Nothing is
/// ever left under the final name but a whole file: S3 makes an object appear whole or not at
/// all; SFTP and WebDAV write `NAME.part` and rename it once it is all there.
final class RemoteStore {
    let destination: UploadDestination
    let credentials: UploadCredentials
    let camera: String
    let transfer: CurlTransfer
    /// What an upload's seconds are read on (the sink's clock).
    let clock: Clock
    /// WebDAV directories known to exist (made or found), so each is made once.
    private var collections: Set<String> = []

    init(
        destination: UploadDestination, credentials: UploadCredentials, camera: String, transfer: CurlTransfer,
        clock: Clock
    ) {
        self.destination = destination
        self.credentials = credentials
        self.camera = camera
        self.transfer = transfer
        self.clock = clock
    }

    /// The name of `relativePath` on the server, under the prefix or directory (no leading /).
    func remoteName(_ relativePath: String) -> String {
        let base: String =
            switch destination {
            case .s3(_, let prefix, _, _): prefix
            case .sftp(_, _, _, let directory): directory
            case .webdav: ""
            }
        return (base.isEmpty ? "" : base + "/") + camera + "/" + relativePath
    }

    /// Sends `relativePath` of `storage`, then checks it on the server: its size (and S3's ETag
    /// when it is an MD5), and with `readBack` the copy itself, downloaded through MD5 and
    /// compared with the clip's — the one check a server that lies cannot pass.
    func upload(
        _ relativePath: String, from storage: any ClipStorage, readBack: Bool = false
    ) throws(UploadProblem) -> UploadReceipt {
        let started = clock.now()
        let file: any MovieFile
        do { file = try storage.readMovie(relativePath) } catch {
            if !storage.exists(relativePath) { throw .fileGone("\(storage.path(relativePath)) is not there any more") }
            throw .failed("\(storage.path(relativePath)) cannot be read: \(error)")
        }
        defer { try? file.close() }
        let body = FileBody(file: file, size: Int64(file.length), path: storage.path(relativePath))
        let url: String
        switch destination {
        case .s3(let bucket, _, let endpoint, let region):
            url = try s3(
                body, bucket: bucket, key: remoteName(relativePath), endpoint: endpoint, region: region,
                readBack: readBack)
        case .sftp(let user, let host, let port, _):
            url = try sftp(body, user: user, host: host, port: port, name: remoteName(relativePath), readBack: readBack)
        case .webdav(let base, _):
            url = try webdav(body, base: base, name: remoteName(relativePath), readBack: readBack)
        }
        return UploadReceipt(url: url, bytes: body.size, seconds: (clock.now() - started).seconds, readBack: readBack)
    }

    /// Reads the copy on the server back (`request`, a download), through MD5 as it comes and
    /// never more than the clip's size, and compares it with the clip's digest.
    private func readBack(
        _ request: CurlRequest, url: String, md5: [UInt8], size: Int64
    ) throws(UploadProblem) {
        var request = request
        request.digestUpTo = size
        let response = try perform(request)
        guard response.status == 0 || response.status == 200 else {
            let code = response.s3ErrorCode.map { " \($0)" } ?? ""
            throw .failed("\(url) cannot be read back from the server after the upload: HTTP \(response.status)\(code)")
        }
        let (copy, bytes) = response.digest ?? ([], 0)
        guard copy == md5, bytes == size else {
            throw .failed(
                "\(url) read back from the server is not the clip: \(bytes) bytes with the MD5 \(copy.lowercaseHex), the clip \(size) bytes with the MD5 \(md5.lowercaseHex) — the server keeps a copy that differs"
            )
        }
    }

    // MARK: S3

    /// PUT with the body's MD5 (`Content-MD5`: the server refuses a body that differs), signed
    /// with SigV4 by libcurl (the payload unsigned: TLS and the MD5 protect it), then HEAD: the
    /// size, and the ETag when it is the MD5 (a single PUT's is, without KMS encryption).
    private func s3(
        _ body: FileBody, bucket: String, key: String, endpoint: String, region: String, readBack: Bool
    )
        throws(UploadProblem) -> String
    {
        let md5 = try digest(body)
        let encodedKey = URLPath.encoded(key)
        let url: String
        if endpoint == "https://s3.\(region).amazonaws.com", !bucket.contains(".") {
            url = "https://\(bucket).s3.\(region).amazonaws.com/\(encodedKey)"
        } else {
            url = "\(endpoint)/\(bucket)/\(encodedKey)"
        }
        let signature = (
            provider: "aws:amz:\(region):s3",
            credentials: "\(credentials.accessKey ?? ""):\(credentials.secretKey ?? "")"
        )
        let headers = [
            "Content-MD5: " + Data(md5).base64EncodedString(),
            "x-amz-content-sha256: UNSIGNED-PAYLOAD",
            "Content-Type: " + Self.contentType(key),
        ]
        let put = try perform(CurlRequest(url: url, method: .put(body), headers: headers, awsSignature: signature))
        guard (200..<300).contains(put.status) else { throw s3Problem(put, doing: "PUT", url: url) }
        let head = try perform(
            CurlRequest(
                url: url, method: .head, headers: ["x-amz-content-sha256: UNSIGNED-PAYLOAD"], awsSignature: signature))
        guard head.status == 200 else { throw s3Problem(head, doing: "HEAD after PUT", url: url) }
        guard head.contentLength == body.size else {
            throw .failed("\(url) is \(head.contentLength) bytes on the server after the upload, not \(body.size)")
        }
        let tag = (head.headers["etag"] ?? "").filter { $0 != "\"" }.lowercased()
        if tag.count == 32, tag.allSatisfy(\.isHexDigit), head.headers["x-amz-server-side-encryption"] != "aws:kms",
            tag != md5.lowercaseHex
        {
            throw .failed("\(url) has the MD5 \(tag) on the server after the upload, not \(md5.lowercaseHex)")
        }
        if readBack {
            try self.readBack(
                CurlRequest(
                    url: url, method: .other("GET"), headers: ["x-amz-content-sha256: UNSIGNED-PAYLOAD"],
                    awsSignature: signature), url: url, md5: md5, size: body.size)
        }
        return "s3://\(bucket)/\(key)"
    }

    private func s3Problem(_ response: CurlResponse, doing: String, url: String) -> UploadProblem {
        let code = response.s3ErrorCode ?? (response.status == 403 ? "Forbidden" : "HTTP \(response.status)")
        let what = "\(doing) \(url): \(response.status) \(code)"
        switch code {
        case "SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "Forbidden", "InvalidToken":
            return .refused(
                "\(what) — the server does not take these credentials: check upload.access_key_file, upload.secret_key_file and upload.region, and that the key may write to the bucket"
            )
        case "NoSuchBucket":
            return .refused("\(what) — the bucket does not exist: make it, or correct upload.url")
        default:
            return .failed(what)
        }
    }

    /// The MD5 of the whole body, read 256 KB at a time (given up as soon as the agent stops
    /// or the file is deleted: its room is freed only once it is closed).
    private func digest(_ body: FileBody) throws(UploadProblem) -> [UInt8] {
        var md5 = MD5()
        var offset: Int64 = 0
        while offset < body.size {
            if transfer.stop.isOn { throw .stopped }
            if transfer.abandon.isOn { throw .fileGone("it was deleted on the board while it was read") }
            let bytes: [UInt8]
            do { bytes = try body.file.read(at: UInt64(offset), count: Int(min(256 << 10, body.size - offset))) } catch
            {
                throw .failed("\(body.path) cannot be read: \(error)")
            }
            guard !bytes.isEmpty else { throw .failed("\(body.path) became shorter while it was read") }
            md5.update(bytes)
            offset += Int64(bytes.count)
        }
        return md5.finish()
    }

    // MARK: SFTP

    /// Sends `NAME.part` (the directories made as needed), then renames it over `NAME` (the old
    /// one removed first: OpenSSH does not rename over a file), then reads the size back.
    private func sftp(
        _ body: FileBody, user: String, host: String, port: Int, name: String, readBack: Bool
    )
        throws(UploadProblem) -> String
    {
        let server = "sftp://\(host.contains(":") ? "[\(host)]" : host):\(port)"
        // In URLs, /~/ is the home directory; in commands, a relative path is.
        let home = name.hasPrefix("~/")
        let path = home ? String(name.dropFirst(2)) : name
        let encoded = URLPath.encoded(path)
        let url = server + (home ? "/~/" : "/") + encoded
        let commandPath = home ? path : "/" + path
        let login = (user: user, keyFile: credentials.sshKeyFile ?? "", knownHosts: credentials.knownHostsFile ?? "")
        _ = try perform(
            CurlRequest(
                url: url + ".part", method: .put(body), ssh: login,
                afterTransfer: [
                    "*rm \(Self.quoted(commandPath))",
                    "rename \(Self.quoted(commandPath + ".part")) \(Self.quoted(commandPath))",
                ], createDirectories: true))
        let check = try perform(CurlRequest(url: url, method: .head, ssh: login))
        guard check.contentLength == body.size else {
            throw .failed("\(url) is \(check.contentLength) bytes on the server after the upload, not \(body.size)")
        }
        if readBack {
            try self.readBack(
                CurlRequest(url: url, method: .other("GET"), ssh: login), url: url, md5: try digest(body),
                size: body.size)
        }
        return "sftp://\(user)@\(host)" + (port == 22 ? "" : ":\(port)") + "/" + name
    }

    private static func quoted(_ path: String) -> String {
        "\"" + path.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
    }

    // MARK: WebDAV

    /// Makes the directories (MKCOL), PUTs `NAME.part`, MOVEs it to `NAME`, and reads the size
    /// back (PROPFIND).
    private func webdav(_ body: FileBody, base: String, name: String, readBack: Bool) throws(UploadProblem) -> String {
        let login = credentials.password.map { password in
            (user: Self.webdavUser(destination) ?? "", password: password)
        }
        let parts = URLPath.encoded(name).split(separator: "/").map(String.init)
        var collection = base
        for part in parts.dropLast() {
            collection += "/" + part
            guard !collections.contains(collection) else { continue }
            let made = try perform(CurlRequest(url: collection + "/", method: .other("MKCOL"), login: login))
            // 201: made; 405: already there.
            guard made.status == 201 || made.status == 405 else {
                throw webdavProblem(made, doing: "MKCOL", url: collection + "/")
            }
            collections.insert(collection)
        }
        let url = base + "/" + parts.joined(separator: "/")
        let put = try perform(
            CurlRequest(
                url: url + ".part", method: .put(body), headers: ["Content-Type: " + Self.contentType(name)],
                login: login))
        guard (200..<300).contains(put.status) else {
            // A directory removed on the server since it was made: made again next time.
            collections.removeAll()
            throw webdavProblem(put, doing: "PUT", url: url + ".part")
        }
        let move = try perform(
            CurlRequest(
                url: url + ".part", method: .other("MOVE"), headers: ["Destination: \(url)", "Overwrite: T"],
                login: login))
        guard (200..<300).contains(move.status) else { throw webdavProblem(move, doing: "MOVE", url: url + ".part") }
        // The size as the server lists it (PROPFIND, which every WebDAV server answers; some
        // answer a HEAD that must be signed in to with a body, which breaks the connection).
        let listing = try perform(
            CurlRequest(
                url: url, method: .other("PROPFIND"),
                headers: ["Depth: 0", "Content-Type: application/xml"], login: login))
        let size = Self.contentLength(inPropfind: listing.body)
        guard listing.status == 207, size == body.size else {
            throw .failed(
                "\(url) is \(listing.status == 207 ? "\(size.map(String.init) ?? "of no size") bytes" : "not there (HTTP \(listing.status))") on the server after the upload, not \(body.size) bytes"
            )
        }
        if readBack {
            try self.readBack(
                CurlRequest(url: url, method: .other("GET"), login: login), url: url, md5: try digest(body),
                size: body.size)
        }
        return url
    }

    /// The `getcontentlength` property of a PROPFIND answer (whatever its namespace prefix).
    static func contentLength(inPropfind body: [UInt8]) -> Int64? {
        let text = String(decoding: body, as: UTF8.self)
        guard let property = text.firstRange(of: "getcontentlength"),
            let open = text[property.upperBound...].firstIndex(of: ">")
        else { return nil }
        let digits = text[text.index(after: open)...].drop { $0 == " " || $0 == "\n" }.prefix { $0.isNumber }
        return Int64(digits)
    }

    private static func webdavUser(_ destination: UploadDestination) -> String? {
        if case .webdav(_, let user) = destination { user } else { nil }
    }

    private func webdavProblem(_ response: CurlResponse, doing: String, url: String) -> UploadProblem {
        let what = "\(doing) \(url): HTTP \(response.status)"
        switch response.status {
        case 401, 403:
            return .refused(
                "\(what) — the server refuses this user: check the user in upload.url and upload.password_file")
        case 404, 409:
            return .refused("\(what) — the server has no such directory: check the path in upload.url")
        default:
            return .failed(what)
        }
    }

    // MARK: Common

    private func perform(_ request: CurlRequest) throws(UploadProblem) -> CurlResponse {
        do { return try transfer.perform(request) } catch {
            if error.stopped { throw .stopped }
            if error.abandoned { throw .fileGone("it was deleted on the board while it was sent") }
            if let fileError = error.fileError { throw .failed("the clip cannot be read: \(fileError)") }
            if error.tooLong {
                throw .failed(
                    "\(request.url) read back from the server is longer than the clip's \(request.digestUpTo ?? 0) bytes — the server keeps a copy that differs"
                )
            }
            if let ssh = request.ssh, error.isPeerRefused {
                throw .refused(
                    "\(request.url): the server's host key is not the one \(ssh.knownHosts) (upload.known_hosts_file) has for it — if it is the right server, add its key: ssh-keyscan -p PORT HOST >> \(ssh.knownHosts)"
                )
            }
            if let ssh = request.ssh, error.isLoginDenied {
                throw .refused(
                    "\(request.url): the server refused the key \(ssh.keyFile) (upload.ssh_key_file) for \(ssh.user) — put its public key in that user's ~/.ssh/authorized_keys on the server"
                )
            }
            if error.isPeerRefused {
                throw .refused(
                    "\(request.url): \(error.message) — "
                        + (credentials.caFile.map {
                            "the server's certificate is not signed by a CA in \($0) (upload.tls_ca_file), or does not name this host: check the file and the host in the URL"
                        }
                            ?? "the server's certificate is not trusted by this machine: give its CA in upload.tls_ca_file (or install it in /usr/local/share/ca-certificates and run update-ca-certificates)")
                )
            }
            throw .failed("\(request.url): \(error.message)")
        }
    }

    static func contentType(_ name: String) -> String {
        name.hasSuffix(".jpg") ? "image/jpeg" : name.hasSuffix(".mov") ? "video/quicktime" : "application/octet-stream"
    }
}
