import POSIX

// What the web server takes and gives: a request as the handler sees it, and a response made
// of bytes or of a part of an open file (served by the library with sendfile, never read into
// memory), with HTTP's byte ranges (RFC 9110 §14) for the clips a browser seeks in.

/// A request, as far as the handler needs it: the method, the path (percent-decoded, without
/// its query), the query, the headers (names in lower case) and the body.
public struct HTTPRequest: Sendable {
    public var method: String
    public var path: String
    public var query: [String: String]
    public var headers: [String: String]
    public var body: [UInt8]
    /// The user who signed in (HTTP Digest); nil when the server has no passwords.
    public var user: String?
    /// The address the request came from (4 or 16 bytes), when known.
    public var client: [UInt8]?
    /// The server has passwords and this request, to a path whose sign-in may be in its body
    /// (`HTTPServer`'s `signInInBody`: ONVIF's SOAP), came without `Authorization`: the
    /// handler decides who it is, and says so in its response (`HTTPResponse.signIn`).
    public var signInPending = false

    public init(
        method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:],
        body: [UInt8] = [], user: String? = nil, client: [UInt8]? = nil
    ) {
        self.client = client
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.user = user
    }

    /// The header `name` (any case).
    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The body's media type, from `Content-Type` without its parameters, in lower case
    /// (`application/json`); nil without the header.
    public var mediaType: String? {
        header("content-type").flatMap { $0.split(separator: ";").first }
            .map { String($0.filter { $0 != " " && $0 != "\t" }).lowercased() }
    }
}

/// An open file a response sends from: closed when the last response holding it is gone.
public final class SharedFile: Sendable {
    let descriptor: FileDescriptor
    /// Its length when it was opened.
    public let size: UInt64
    /// When its contents last changed, as it was opened: seconds since 1970.
    public let modified: Double

    public init(_ descriptor: consuming FileDescriptor) throws(SystemError) {
        let status = try descriptor.status()
        size = status.size
        modified = status.modified
        self.descriptor = descriptor
    }
}

/// A body made as it is sent (live video): the server asks it for bytes whenever the
/// connection can take more, on the server's thread, one call at a time.
public protocol HTTPStream: AnyObject, Sendable {
    /// Fills the start of `buffer` and says how much it filled; or, with nothing to send yet,
    /// calls `sleep` (the connection then waits, costing nothing) and hands `wake` to whatever
    /// will have more, which calls it once (from any thread) — or says the body is over.
    func read(
        into buffer: UnsafeMutableRawBufferPointer, sleep: () -> Void, wake: @escaping @Sendable () -> Void
    ) -> HTTPStreamRead
    /// The response is over: sent, or the client gone, or the server stopping.
    func close()
}

/// What an `HTTPStream` did when asked for bytes.
public enum HTTPStreamRead: Equatable, Sendable {
    case bytes(Int)
    /// Nothing now: it slept, and wakes when it has more.
    case waiting
    case end
}

/// A response: status, headers and body.
public struct HTTPResponse: Sendable {
    public enum Body: Sendable {
        case bytes([UInt8])
        /// `length` bytes of the file from `offset`.
        case file(SharedFile, offset: UInt64, length: UInt64)
        /// Bytes made as they are sent, of a length not known ahead (live video).
        case stream(any HTTPStream)
    }

    /// What the handler made of a pending sign-in (`HTTPRequest.signInPending`).
    public enum SignIn: Sendable, Equatable {
        /// Signed in: an address being slowed for failed sign-ins is served again.
        case succeeded
        /// Refused: sent as a 401 that asks for Digest, with this response's body;
        /// `failedUser` set counts a failed sign-in (a wrong password) toward the throttle.
        case refused(failedUser: String?)
    }

    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: Body
    /// Read only for a request whose sign-in was pending.
    public var signIn: SignIn?

    public init(status: Int, headers: [(name: String, value: String)] = [], body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response of text (`type` with its charset).
    public static func text(
        _ status: Int, _ text: String, type: String = "text/plain; charset=utf-8",
        headers: [(name: String, value: String)] = []
    ) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", type)] + headers, body: .bytes(Array(text.utf8)))
    }

    /// An error page: the status and a sentence a person reads.
    public static func error(_ status: Int, _ message: String) -> HTTPResponse {
        text(status, message + "\n", headers: [("Cache-Control", "no-store")])
    }

    /// 405: the method is not one `allowed` (the `Allow` header), with `message` saying how.
    public static func methodNotAllowed(_ message: String, allowed: String) -> HTTPResponse {
        var refused = error(405, message)
        refused.headers.append(("Allow", allowed))
        return refused
    }

    /// The file, whole or the byte range the request's `Range` header asks for: 200 with the
    /// whole file, 206 with the part (`Content-Range`), or 416 when the range lies past its
    /// end. A header this cannot read, or of several ranges, gets the whole file, as HTTP
    /// allows.
    public static func file(_ file: SharedFile, type: String, request: HTTPRequest) -> HTTPResponse {
        let size = file.size
        var headers: [(name: String, value: String)] = [("Content-Type", type), ("Accept-Ranges", "bytes")]
        switch ByteRange.parse(request.header("range"), size: size) {
        case .whole:
            return HTTPResponse(status: 200, headers: headers, body: .file(file, offset: 0, length: size))
        case .part(let first, let last):
            headers.append(("Content-Range", "bytes \(first)-\(last)/\(size)"))
            return HTTPResponse(
                status: 206, headers: headers, body: .file(file, offset: first, length: last - first + 1))
        case .unsatisfiable:
            headers.append(("Content-Range", "bytes */\(size)"))
            return HTTPResponse(status: 416, headers: headers)
        }
    }
}

/// One byte range of a `Range` header (RFC 9110 §14.1.2): `bytes=FIRST-LAST`, `bytes=FIRST-`
/// or `bytes=-SUFFIX`.
public enum ByteRange: Equatable, Sendable {
    case whole
    /// Bytes `first` through `last`, both included.
    case part(first: UInt64, last: UInt64)
    case unsatisfiable

    /// What `header` asks of a representation of `size` bytes.
    public static func parse(_ header: String?, size: UInt64) -> ByteRange {
        guard let header else { return .whole }
        let text = header.trimmingSpaces
        guard text.lowercased().hasPrefix("bytes=") else { return .whole }
        let spec = text.dropFirst("bytes=".count).trimmingSpaces
        // Several ranges would need a multipart answer: the whole file is a valid one.
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let from = spec[..<dash].trimmingSpaces, to = spec[spec.index(after: dash)...].trimmingSpaces
        if from.isEmpty {
            guard let suffix = UInt64(to) else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .part(first: size - min(suffix, size), last: size - 1)
        }
        guard let first = UInt64(from) else { return .whole }
        guard first < size else { return .unsatisfiable }
        if to.isEmpty { return .part(first: first, last: size - 1) }
        guard let last = UInt64(to), last >= first else { return .whole }
        return .part(first: first, last: min(last, size - 1))
    }
}

extension StringProtocol {
    /// Without the spaces and tabs around it (a header's value, a part of one).
    package var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return String(s)
    }
}
