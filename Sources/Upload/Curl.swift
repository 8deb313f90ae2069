internal import CCurl
import FoundationEssentials
import Media
import QuickTime
import Synchronization

/// One request through libcurl: what is sent, to where, signed or signed in how.
struct CurlRequest {
    var url: String
    var method: Method
    var headers: [String] = []
    /// S3: `aws:amz:REGION:s3` and `ACCESS:SECRET`; libcurl signs the request (SigV4).
    var awsSignature: (provider: String, credentials: String)? = nil
    /// HTTP: a user and password, by whatever scheme the server asks for (Basic, Digest).
    var login: (user: String, password: String)? = nil
    /// SFTP: the user, the private key, and the known host keys the server's must be among.
    var ssh: (user: String, keyFile: String, knownHosts: String)? = nil
    /// SFTP: commands run after the transfer (`rename "A" "B"`; a leading `*` ignores a failure).
    var afterTransfer: [String] = []
    /// SFTP: make the directories the path names when they are missing.
    var createDirectories = false
    /// A download read through MD5 as it comes (`CurlResponse.digest`), never kept: given up
    /// past this many bytes (the copy read back is the clip's size).
    var digestUpTo: Int64? = nil

    enum Method {
        /// Sends the body (a file, streamed as libcurl asks for it).
        case put(FileBody)
        /// The response's status and headers, no body (for SFTP: the file's size).
        case head
        /// GET, or a method of WebDAV (MKCOL, MOVE) with no body.
        case other(String)
    }
}

/// What came back.
struct CurlResponse {
    /// The HTTP status (0 for SFTP).
    var status: Int
    /// The headers, names in lower case.
    var headers: [String: String]
    /// The start of the body (error documents; at most `CurlTransfer.bodyLimit` bytes).
    var body: [UInt8]
    /// Bytes of the request's body sent.
    var sent: Int64
    /// The size the server reported (SFTP: of the file; HTTP: Content-Length), or -1.
    var contentLength: Int64
    /// With `CurlRequest.digestUpTo`: the MD5 of the whole body and its size.
    var digest: (md5: [UInt8], bytes: Int64)? = nil

    /// The `<Code>` of an S3 error document, when there is one.
    var s3ErrorCode: String? {
        let text = String(decoding: body, as: UTF8.self)
        guard let open = text.firstRange(of: "<Code>"), let close = text.firstRange(of: "</Code>"),
            open.upperBound <= close.lowerBound
        else { return nil }
        return String(text[open.upperBound..<close.lowerBound])
    }
}

/// libcurl failed before a response came: the network, a timeout, the server's key, a file.
struct CurlFailure: Error, CustomStringConvertible {
    var code: Int
    var message: String
    /// The local file could not be read while sent.
    var fileError: FileError?
    /// The transfer was stopped (the agent stops).
    var stopped = false
    /// The transfer was given up because its file was deleted on the board meanwhile.
    var abandoned = false
    /// A download read through MD5 was longer than `CurlRequest.digestUpTo`.
    var tooLong = false

    var description: String { fileError?.description ?? message }

    /// The server's certificate or SSH host key was not the one expected.
    var isPeerRefused: Bool { code == Int(CURLE_PEER_FAILED_VERIFICATION.rawValue) }
    /// The server refused to sign us in (SSH: the key).
    var isLoginDenied: Bool { code == Int(CURLE_LOGIN_DENIED.rawValue) }
}

/// A switch one thread turns on and another looks at.
final class StopSwitch: Sendable {
    private let on = Atomic(false)
    func turnOn() { on.store(true, ordering: .relaxed) }
    func turnOff() { on.store(false, ordering: .relaxed) }
    var isOn: Bool { on.load(ordering: .relaxed) }
}

/// A file sent as a request's body, read as libcurl asks for it: never whole in memory.
final class FileBody {
    let file: any MovieFile
    let size: Int64
    /// The file as people know it, for messages.
    let path: String
    var offset: Int64 = 0
    var failure: FileError?

    init(file: any MovieFile, size: Int64, path: String) {
        self.file = file
        self.size = size
        self.path = path
    }
}

/// libcurl's easy interface, one handle per uploader thread (reused: its connections are kept
/// between requests). Never shared between threads.
final class CurlTransfer {
    private let handle: UnsafeMutableRawPointer
    /// How long connecting may take, and how long a transfer may go slower than a byte a
    /// second before it is given up (a server that hangs).
    let connectTimeout: Int
    let stallTimeout: Int
    /// The most bytes a second sent, 0 for no limit.
    var maxSendRate: Int64 = 0
    /// HTTPS: the CA certificates the server's must be signed by (nil: the machine's).
    var caFile: String?
    /// Turned on from another thread to end a transfer under way.
    let stop = StopSwitch()
    /// Turned on from another thread to give up the transfer under way (its file was deleted:
    /// the file's room is freed only once it is closed); off again at the next upload.
    let abandon = StopSwitch()

    static let bodyLimit = 64 << 10
    /// The upload buffer with a send rate (libcurl's smallest).
    static let limitedBuffer = 16 << 10

    /// libcurl's global setup, once, before any handle.
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    init(connectTimeout: Int = 20, stallTimeout: Int = 60) throws(CurlFailure) {
        guard Self.initialized, let handle = curl_easy_init() else {
            throw CurlFailure(code: -1, message: "libcurl cannot be set up (curl_global_init or curl_easy_init failed)")
        }
        self.handle = handle
        self.connectTimeout = connectTimeout
        self.stallTimeout = stallTimeout
    }

    deinit { curl_easy_cleanup(handle) }

    /// libcurl's version line, for the log.
    static var version: String { String(cString: curl_version()) }

    /// What a transfer reads from and writes to while it goes: handed to libcurl's callbacks.
    private final class Exchange {
        var headers: [String: String] = [:]
        var body: [UInt8] = []
        var upload: FileBody?
        let stop: StopSwitch
        let abandon: StopSwitch
        /// A download read through MD5: the digest so far, the bytes, and the most there may be.
        var md5: MD5?
        var received: Int64 = 0
        var limit: Int64 = 0
        var tooLong = false

        init(stop: StopSwitch, abandon: StopSwitch, upload: FileBody?) {
            self.stop = stop
            self.abandon = abandon
            self.upload = upload
        }

        /// A header line as libcurl hands it (with its CRLF): its name (lower case) and value,
        /// parsed on bytes — in Swift "\r\n" is one Character, so dropping "\r" or "\n"
        /// Characters from a String leaves it.
        func header(_ line: UnsafeRawBufferPointer) {
            var bytes = line[...]
            // A new response (after 100 Continue, or a 401 before signing in) starts afresh.
            if bytes.starts(with: Array("HTTP/".utf8)) { headers = [:] }
            while let last = bytes.last, last == 0x0D || last == 0x0A || last == 0x20 || last == 0x09 {
                bytes = bytes.dropLast()
            }
            guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), headers.count < 200 else { return }
            var value = bytes[(colon + 1)...]
            while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
            headers[String(decoding: bytes[..<colon], as: UTF8.self).lowercased()] = String(
                decoding: value, as: UTF8.self)
        }

        /// What a header or write function does with the `count` bytes at `buffer` libcurl gives
        /// it: hands them to `take` with the exchange its `context` points to; the bytes taken
        /// (fewer than given: libcurl gives the transfer up).
        static func take(
            _ buffer: UnsafeMutablePointer<CChar>?, _ count: Int, _ context: UnsafeMutableRawPointer?,
            _ take: (Exchange, UnsafeRawBufferPointer) -> Bool
        ) -> Int {
            guard let buffer, let context else { return count }
            let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
            return take(exchange, UnsafeRawBufferPointer(start: buffer, count: count)) ? count : 0
        }

        /// Body bytes as they come: the start kept (an error document), the rest, when a digest
        /// is asked for, through MD5. False past the limit (the transfer is given up).
        func received(_ bytes: UnsafeRawBufferPointer) -> Bool {
            let room = max(0, CurlTransfer.bodyLimit - body.count)
            body += bytes.prefix(room)
            guard md5 != nil else { return true }
            received += Int64(bytes.count)
            guard received <= limit else {
                tooLong = true
                return false
            }
            md5?.update(bytes)
            return true
        }
    }

    func perform(_ request: CurlRequest) throws(CurlFailure) -> CurlResponse {
        curl_easy_reset(handle)
        var upload: FileBody?
        if case .put(let body) = request.method { upload = body }
        let exchange = Exchange(stop: stop, abandon: abandon, upload: upload)
        if let limit = request.digestUpTo {
            exchange.md5 = MD5()
            exchange.limit = limit
        }
        let context = Unmanaged.passUnretained(exchange).toOpaque()
        var list: UnsafeMutablePointer<curl_slist>?
        var quote: UnsafeMutablePointer<curl_slist>?
        defer {
            curl_slist_free_all(list)
            curl_slist_free_all(quote)
        }
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let handle = self.handle
        // The first option libcurl refused (one this libcurl does not know: a request it would
        // send unsigned, or unchecked, is not sent at all).
        var refused: (option: CURLoption, code: CURLcode)?
        let result: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errors in
            func check(_ option: CURLoption, _ code: CURLcode) {
                if code != CURLE_OK, refused == nil { refused = (option, code) }
            }
            func long(_ option: CURLoption, _ value: Int) { check(option, vigil_curl_set_long(handle, option, value)) }
            func text(_ option: CURLoption, _ value: String) {
                check(option, value.withCString { vigil_curl_set_pointer(handle, option, $0) })
            }
            func pointer(_ option: CURLoption, _ value: UnsafeRawPointer?) {
                check(option, vigil_curl_set_pointer(handle, option, value))
            }
            func offset(_ option: CURLoption, _ value: Int64) {
                check(option, vigil_curl_set_offset(handle, option, curl_off_t(value)))
            }
            pointer(CURLOPT_ERRORBUFFER, errors.baseAddress)
            text(CURLOPT_URL, request.url)
            long(CURLOPT_NOSIGNAL, 1)
            long(CURLOPT_CONNECTTIMEOUT, connectTimeout)
            long(CURLOPT_LOW_SPEED_LIMIT, 1)
            long(CURLOPT_LOW_SPEED_TIME, stallTimeout)
            // Redirects are not followed: a signed request is for one address.
            long(CURLOPT_FOLLOWLOCATION, 0)
            /// What libcurl receives, a header line or a piece of the body, handed to the exchange.
            func receiving(_ option: CURLoption, data: CURLoption, _ function: vigil_curl_data_function) {
                pointer(data, context)
                check(option, vigil_curl_set_function(handle, option, function))
            }
            receiving(CURLOPT_HEADERFUNCTION, data: CURLOPT_HEADERDATA) {
                Exchange.take($0, $1 * $2, $3) { exchange, line in
                    exchange.header(line)
                    return true
                }
            }
            // Past the limit, fewer bytes taken than given: libcurl gives the transfer up.
            receiving(CURLOPT_WRITEFUNCTION, data: CURLOPT_WRITEDATA) {
                Exchange.take($0, $1 * $2, $3) { exchange, piece in exchange.received(piece) }
            }
            // Progress: where a transfer under way is told to stop, or to give up its file.
            long(CURLOPT_NOPROGRESS, 0)
            pointer(CURLOPT_XFERINFODATA, context)
            check(
                CURLOPT_XFERINFOFUNCTION,
                vigil_curl_set_progress(handle) { context, _, _, _, _ in
                    guard let context else { return 0 }
                    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
                    return exchange.stop.isOn || exchange.abandon.isOn ? 1 : 0
                })
            switch request.method {
            case .put(let body):
                long(CURLOPT_UPLOAD, 1)
                offset(CURLOPT_INFILESIZE_LARGE, body.size)
                pointer(CURLOPT_READDATA, context)
                check(
                    CURLOPT_READFUNCTION,
                    vigil_curl_set_function(handle, CURLOPT_READFUNCTION) { buffer, size, count, context in
                        guard let buffer, let context,
                            let body = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue().upload
                        else { return Int(CURL_READFUNC_ABORT) }
                        return body.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
                    })
                pointer(CURLOPT_SEEKDATA, context)
                check(
                    CURLOPT_SEEKFUNCTION,
                    vigil_curl_set_seek(handle) { context, offset, origin in
                        guard let context, origin == SEEK_SET,
                            let body = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue().upload,
                            (0...body.size).contains(Int64(offset))
                        else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
                        body.offset = Int64(offset)
                        return Int32(CURL_SEEKFUNC_OK)
                    })
                if maxSendRate > 0 {
                    // libcurl keeps to the rate by pausing between buffers: small ones, and a
                    // stall allowed to outlast a pause.
                    offset(CURLOPT_MAX_SEND_SPEED_LARGE, maxSendRate)
                    long(CURLOPT_UPLOAD_BUFFERSIZE, Self.limitedBuffer)
                    long(
                        CURLOPT_LOW_SPEED_TIME,
                        max(stallTimeout, Int(2 * Int64(Self.limitedBuffer) / maxSendRate) + 2))
                }
            case .head:
                long(CURLOPT_NOBODY, 1)
            case .other(let method):
                if method != "GET" { text(CURLOPT_CUSTOMREQUEST, method) }
                // A copy read back takes no more of the network than uploads do.
                if request.digestUpTo != nil, maxSendRate > 0 { offset(CURLOPT_MAX_RECV_SPEED_LARGE, maxSendRate) }
            }
            for header in request.headers { list = curl_slist_append(list, header) }
            if let list { pointer(CURLOPT_HTTPHEADER, list) }
            if let (provider, credentials) = request.awsSignature {
                text(CURLOPT_AWS_SIGV4, provider)
                text(CURLOPT_USERPWD, credentials)
            }
            if let (user, password) = request.login {
                text(CURLOPT_USERNAME, user)
                text(CURLOPT_PASSWORD, password)
                long(CURLOPT_HTTPAUTH, Int(bitPattern: UInt(vigil_curl_auth_any)))
            }
            if let (user, key, knownHosts) = request.ssh {
                text(CURLOPT_USERNAME, user)
                text(CURLOPT_SSH_PRIVATE_KEYFILE, key)
                text(CURLOPT_SSH_KNOWNHOSTS, knownHosts)
                long(CURLOPT_SSH_AUTH_TYPES, Int(CURLSSH_AUTH_PUBLICKEY))
            }
            if request.createDirectories {
                long(CURLOPT_FTP_CREATE_MISSING_DIRS, Int(CURLFTP_CREATE_DIR_RETRY.rawValue))
            }
            for command in request.afterTransfer { quote = curl_slist_append(quote, command) }
            if let quote { pointer(CURLOPT_POSTQUOTE, quote) }
            if let caFile {
                // That CA alone: not the machine's store as well (libcurl's CA path).
                text(CURLOPT_CAINFO, caFile)
                pointer(CURLOPT_CAPATH, nil)
            }
            if let refused { return refused.code }
            return curl_easy_perform(handle)
        }
        var status = 0
        var sent: curl_off_t = 0
        var length: curl_off_t = -1
        _ = vigil_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        _ = vigil_curl_get_offset(handle, CURLINFO_SIZE_UPLOAD_T, &sent)
        _ = vigil_curl_get_offset(handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
        if let refused {
            let why = String(cString: curl_easy_strerror(refused.code))
            let need =
                refused.option == CURLOPT_AWS_SIGV4
                ? "S3 uploads need libcurl 7.75 or newer (Debian bookworm's libcurl4 is 7.88)"
                : "this libcurl was built without what the upload needs (Debian's libcurl4 has it)"
            throw CurlFailure(
                code: Int(refused.code.rawValue),
                message: "libcurl \(Self.version) refused option \(refused.option.rawValue) (\(why)): \(need)")
        }
        guard result == CURLE_OK else {
            let detail = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let message = detail.isEmpty ? String(cString: curl_easy_strerror(result)) : detail
            throw CurlFailure(
                code: Int(result.rawValue), message: message, fileError: upload?.failure,
                stopped: result == CURLE_ABORTED_BY_CALLBACK && stop.isOn,
                abandoned: result == CURLE_ABORTED_BY_CALLBACK && abandon.isOn, tooLong: exchange.tooLong)
        }
        return CurlResponse(
            status: status, headers: exchange.headers, body: exchange.body, sent: Int64(sent),
            contentLength: Int64(length),
            digest: exchange.md5.map {
                var md5 = $0
                return (md5.finish(), exchange.received)
            })
    }
}

extension FileBody {
    /// Fills `buffer` from the file where the body stands: the count read, 0 at the end, or
    /// libcurl's abort when the file cannot be read or is shorter than it was.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let want = min(buffer.count, Int(max(0, size - offset)))
        guard want > 0 else { return 0 }
        do {
            let bytes = try file.read(at: UInt64(offset), count: want)
            guard !bytes.isEmpty else {
                failure = FileError(
                    path: path, operation: "read", reason: "the file is shorter than when its upload began")
                return Int(CURL_READFUNC_ABORT)
            }
            bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            offset += Int64(bytes.count)
            return bytes.count
        } catch {
            failure = error
            return Int(CURL_READFUNC_ABORT)
        }
    }
}
