internal import CMicroHTTPD
import Configuration
import Logging
import Media
import POSIX
import Synchronization

/// Why the web server did not start: the address, what went wrong, what to do.
public struct HTTPServerError: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String
}

/// An HTTP server on libmicrohttpd, on threads of its own: one internal thread polls every
/// connection (epoll), so a slow or stalled client costs a socket and a few kilobytes, never a
/// thread of the agent's, and files go out with sendfile without passing through memory.
///
/// Bounded: `Limits.connections` connections are kept (`connectionsPerAddress` from one
/// address), and a new one always gets in: beyond them it pushes out the one that has waited
/// longest for a whole request, else the one idle longest, else the slowest answer
/// (`ConnectionRoom`), so slow clients never lock the others out. At most `streams` of them are
/// streams (live viewers); one more is answered 503 at once. Each is closed after `idleSeconds`
/// without traffic, with `requestMemory` bytes for its request line and headers (a longer one
/// gets 431 or 414 from the library) and at most `bodyBytes` of body (413 beyond). The handler
/// runs on the polling thread, answering from memory, except for the requests `needsWork` picks
/// (an answer that reads the disk): those are built on `workThreads` threads of the server's own
/// (HTTPWork.swift) while their connections wait, `workQueue` of them waiting at most (503
/// beyond). No answer waits on the agent.
public final class HTTPServer: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Connections kept: a new one beyond them pushes one out.
        public var connections = 128
        /// Over `connections`, what the library may hold for a moment: it takes up to 10 new
        /// connections in a round before it closes those they pushed out. The library's own
        /// limit (`connections` + this) is a ceiling it never reaches while one can be pushed
        /// out: at it, it would take no one until a connection closes.
        public var spareConnections = 16
        public var connectionsPerAddress = 64
        /// Streamed responses (live viewers) at once; at most a quarter of `connections`, so the
        /// page, the API and the clips always have room, and a connection to push out is never
        /// lacking.
        public var streams = 32
        public var idleSeconds = 30
        public var requestMemory = 32 * 1024
        public var bodyBytes = 16 * 1024
        /// Threads that build the answers needing work (pages read from the disk): a Pi's
        /// storage reads one thing at a time, so more would wait on it together.
        public var workThreads = 2
        /// Requests waiting for a work thread; one more is answered 503 at once.
        public var workQueue = 32
        public init() {}
    }

    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
    /// Whether a request's answer needs work beyond memory (reading the disk): it is then built
    /// on a work thread. Asked on the polling thread: it must only look at the request.
    public typealias WorkPicker = @Sendable (HTTPRequest) -> Bool

    /// The port it listens on (the one the kernel chose when asked for port 0).
    public let port: Int
    /// The address it listens on, as given.
    public let address: String
    /// The limits it keeps: those asked, fitted (`Limits.fitted`).
    public let limits: Limits
    /// The process's open-file limit, when it made the server lower its connections (say so:
    /// raise it); nil when the limits asked fit.
    public let openFileLimit: Int?
    private let daemon: Mutex<Daemon?>
    private let context: Context

    /// Listens on `address` (a numeric IPv4 or IPv6 address: 127.0.0.1, 0.0.0.0, ::1, ::) and
    /// `port` (0: any free one) and serves each request with `handler`.
    ///
    /// A request is served only when its `Host` is one of this machine's names (`HostCheck`,
    /// with `names`: web.url's host) or an address; else 421. With `passwords`, every request
    /// must sign in as one of its users (HTTP Digest, MD5, as every browser speaks it):
    /// without, or with a wrong password, the answer is 401, and an address that fails too
    /// often waits (429; said once in `log`); `metricsToken` (`Authorization: Bearer`) reads
    /// `/metrics` alone. With `tls`, it speaks HTTPS only, with that certificate and key. The
    /// requests `needsWork` picks are answered on the work threads (none by default).
    public convenience init(
        address: String, port: Int, limits: Limits = Limits(), passwords: WebPasswords? = nil,
        tls: Settings.Web.TLS? = nil, names: [String] = [], metricsToken: String? = nil, log: Logger? = nil,
        signInInBody: Set<String> = [], needsWork: @escaping WorkPicker = { _ in false }, handler: @escaping Handler
    ) throws(HTTPServerError) {
        try self.init(
            address: address, port: port, limits: limits, passwords: passwords, tls: tls, names: names,
            metricsToken: metricsToken, log: log, clock: .monotonic, signInInBody: signInInBody, needsWork: needsWork,
            handler: handler)
    }

    /// The same, on `clock` (the monotonic clock for the agent; a test's), which the sign-in
    /// throttle counts its waits on.
    init(
        address: String, port: Int, limits: Limits = Limits(), passwords: WebPasswords? = nil,
        tls: Settings.Web.TLS? = nil, names: [String] = [], metricsToken: String? = nil, log: Logger? = nil,
        clock: Clock, signInInBody: Set<String> = [], needsWork: @escaping WorkPicker = { _ in false },
        handler: @escaping Handler
    ) throws(HTTPServerError) {
        if tls != nil && vigil_mhd_has_tls() == 0 {
            throw HTTPServerError(
                description:
                    "this libmicrohttpd cannot speak HTTPS (built without GnuTLS) — install Debian's libmicrohttpd12, or leave web.tls_cert_file and web.tls_key_file unset"
            )
        }
        let socket = try Self.listen(address: address, port: port)
        self.address = address
        self.port = (try? socket.localPort()) ?? port
        let openFiles = ProcessID.openFileLimit
        let fitted = limits.fitted(openFiles: openFiles)
        let limits = fitted.limits
        self.limits = limits
        openFileLimit = fitted.lowered ? openFiles : nil
        context = Context(
            handler: handler, needsWork: needsWork, bodyLimit: limits.bodyBytes, passwords: passwords, tls: tls,
            hosts: HostCheck(machine: HostName.current, extra: names), metricsToken: metricsToken, log: log,
            clock: clock, signInInBody: signInInBody, keep: limits.connections, streamLimit: limits.streams,
            work: WorkThreads(threads: limits.workThreads, capacity: limits.workQueue, handler: handler))
        do { try context.work.start() } catch {
            throw HTTPServerError(
                description: "the web server on \(Self.endpoint(address, self.port)) could not start: \(error)")
        }
        let opaque = Unmanaged.passUnretained(context).toOpaque()
        guard
            let started = vigil_mhd_start(
                socket.rawValue, accessHandler, opaque, requestCompleted, opaque, connectionNotified, opaque,
                UInt32(limits.connections + limits.spareConnections), UInt32(limits.connectionsPerAddress),
                UInt32(limits.idleSeconds), limits.requestMemory, Context.randomSize, context.random,
                context.tlsCertificate?.pointer, context.tlsKey?.pointer)
        else {
            _ = context.work.stop()
            throw HTTPServerError(
                description: tls == nil
                    ? "the web server on \(Self.endpoint(address, self.port)) could not start its thread (libmicrohttpd refused: out of memory or threads?)"
                    : "the web server on \(Self.endpoint(address, self.port)) could not start: GnuTLS refused its certificate and key (web.tls_cert_file, web.tls_key_file) — is the key the certificate's own? (openssl x509 -noout -pubkey -in CERT and openssl pkey -pubout -in KEY print the same)"
            )
        }
        // The daemon closes the listening socket when it stops.
        _ = socket.release()
        daemon = Mutex(Daemon(pointer: started))
    }

    /// The library's daemon: used from one thread at a time (started here, stopped once).
    private struct Daemon: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    deinit { stop() }

    /// Ends every streamed response (a viewer gets the end of its stream, within
    /// `graceSeconds` if it reads; one that does not is cut off then), answers 503 to every
    /// request waiting for a work thread or being built on one (a build under way is not waited
    /// for: its answer is dropped), closes the listening socket and every connection, and waits
    /// for the polling thread to end: `graceSeconds` and a few milliseconds at most, however
    /// many clients are slow or stalled and however long a page takes. Once is enough; again
    /// does nothing.
    public func stop(graceSeconds: Double = 1) {
        let stopping = daemon.withLock { d -> Daemon? in
            defer { d = nil }
            return d
        }
        guard let stopping else { return }
        // The library must not stop with a connection suspended: every request handed to the
        // work threads is answered (its connection resumed), and every stream is woken, to
        // find it is over.
        for pending in context.work.stop() { pending.answer(.serverStopping) }
        let ending = context.streams.withLock { s in
            s.stopping = true
            return Array(s.open.values)
        }
        for stream in ending { stream.end() }
        // Each ends at its next read, with the last chunk; one that does not read is cut off
        // when the grace is over, on the monotonic clock (however late a busy machine wakes us).
        if !ending.isEmpty { _ = context.streamsEnded.wait(seconds: graceSeconds) }
        MHD_stop_daemon(stopping.pointer)
    }

    /// How many streamed responses are being sent now (live viewers).
    public var streamsOpen: Int { context.streams.withLock { $0.open.count } }

    /// How many connections the library holds now (those pushed out, until it closes them, too).
    public var connectionsOpen: Int { context.room.withLock { $0.connections.count } }

    /// Requests waiting for a work thread, and answers being built on one.
    var work: (waiting: Int, building: Int) { context.work.counts }

    /// `address:port`, with brackets around an IPv6 address.
    static func endpoint(_ address: String, _ port: Int) -> String { TCPListener.endpoint(address, port) }

    /// A listening TCP socket on `address` and `port`, close-on-exec, with SO_REUSEADDR (a
    /// restarted agent takes its port back at once) and, for IPv6, IPv6 only. Its queue holds
    /// `backlog` connections the server has yet to take: a burst (many viewers at once, a flood)
    /// waits there a moment, rather than being dropped and tried again by each client a second
    /// later, then 3 s, 7 s… (which, with its request held back meanwhile, would make it look
    /// like a slow client, the first to be pushed out).
    static let backlog: Int32 = 1024

    /// A listening TCP socket (`backlog` above) on `address` and `port`, or why not in the
    /// settings' words.
    static func listen(address: String, port: Int) throws(HTTPServerError) -> FileDescriptor {
        do { return try TCPListener.listen(address: address, port: port, backlog: backlog) } catch {
            let said = error.endpoint
            let description =
                switch error.step {
                case .notAPort: "web.port \(port) is not a port: give one from 1 to 65535"
                case .notAnAddress:
                    "web.listen \"\(address)\" is not an IP address: give one such as 127.0.0.1 (this machine only), 0.0.0.0 (every IPv4 address) or :: (every address)"
                case .socket(let error): "the web server cannot make a socket for \(said): \(error)"
                case .bind(let error) where error.isAddressInUse:
                    "the web server cannot listen on \(said): \(error) — another program (or another agent) listens there: give web.port another number"
                case .bind(let error) where error.isAddressNotAvailable:
                    "the web server cannot listen on \(said): \(error) — the address is not one of this machine's: check web.listen"
                case .bind(let error) where error.isPermissionDenied:
                    "the web server cannot listen on \(said): \(error) — ports below 1024 need privileges the agent does not have: give web.port 1024 or more"
                case .bind(let error), .listen(let error): "the web server cannot listen on \(said): \(error)"
                }
            throw HTTPServerError(description: description)
        }
    }
}

/// What the C callbacks reach through their context pointer: the handler, the body limit, who
/// may sign in, and the streamed responses being sent (woken when the server stops).
final class Context: @unchecked Sendable {
    let handler: HTTPServer.Handler
    let needsWork: HTTPServer.WorkPicker
    /// The threads that build what `needsWork` picks.
    let work: WorkThreads
    let bodyLimit: Int
    let passwords: WebPasswords?
    /// The paths whose requests may sign in inside their body (`HTTPRequest.signInPending`).
    let signInInBody: Set<String>
    /// The names served (`Host`).
    let hosts: HostCheck
    /// The metrics token's MD5 (compared with the MD5 of what is sent); nil without one.
    let metricsToken: [UInt8]?
    let log: Logger?
    /// What the throttle reads the time from.
    let clock: Clock
    /// Failed sign-ins per address (used on the server's polling thread only; locked all the
    /// same).
    let throttle = Mutex(SignInThrottle())
    /// What an unknown user's response is checked against, random: the answer to a user who
    /// does not exist is made as for one who does.
    let unknownUserHash: [UInt8]
    /// What Digest authentication's nonces are made from: random, written once here and only
    /// read by the library afterwards (hence `@unchecked`), freed after the daemon stops.
    static let randomSize = 32
    let random: UnsafeMutableRawPointer
    /// Sent with every challenge, and back by the browser.
    let opaque: String
    fileprivate struct Streams {
        var open: [ObjectIdentifier: StreamResponse] = [:]
        var stopping = false
    }
    fileprivate let streams = Mutex(Streams())
    /// Rung when the server stops and its last stream has gone.
    let streamsEnded = Event()
    /// How many streams may be open at once.
    let streamLimit: Int
    /// The connections, for keeping room for new ones (changed on the library's thread).
    let room: Mutex<ConnectionRoom>
    /// The certificate and key as C strings for the library, wiped and freed after the daemon
    /// stops; nil for plain HTTP.
    let tlsCertificate: CStringCopy?
    let tlsKey: CStringCopy?
    init(
        handler: @escaping HTTPServer.Handler, needsWork: @escaping HTTPServer.WorkPicker, bodyLimit: Int,
        passwords: WebPasswords?, tls: Settings.Web.TLS?, hosts: HostCheck, metricsToken: String?, log: Logger?,
        clock: Clock, signInInBody: Set<String>, keep: Int, streamLimit: Int, work: WorkThreads
    ) {
        self.handler = handler
        self.signInInBody = signInInBody
        self.needsWork = needsWork
        self.work = work
        self.streamLimit = streamLimit
        room = Mutex(ConnectionRoom(keep: keep))
        self.bodyLimit = bodyLimit
        self.passwords = passwords
        self.hosts = hosts
        self.metricsToken = metricsToken.map { MD5.digest(Array($0.utf8)) }
        self.log = log
        self.clock = clock
        tlsCertificate = tls.map { CStringCopy($0.certificate) }
        tlsKey = tls.map { CStringCopy($0.key) }
        random = UnsafeMutableRawPointer.allocate(byteCount: Context.randomSize, alignment: 8)
        // The system's generator: getrandom(2), as unpredictable as the kernel makes it.
        var generator = SystemRandomNumberGenerator()
        for i in 0..<Context.randomSize {
            random.storeBytes(of: generator.next() as UInt8, toByteOffset: i, as: UInt8.self)
        }
        opaque = (0..<16).map { _ in generator.next() as UInt8 }.lowercaseHex
        unknownUserHash = (0..<16).map { _ in generator.next() as UInt8 }
    }
    deinit {
        random.deallocate()
    }
}

/// A connection's library pointer, used only under the lock of the `StreamResponse` or
/// `PendingAnswer` that holds it.
struct ConnectionPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// A streamed body being sent on one connection: it asks the stream for bytes when the
/// library asks it, suspends the connection while the stream has none, and resumes it when the
/// stream wakes it. The lock orders the two: a wake never resumes a connection before (or
/// after) its suspension, nor one that is gone.
private final class StreamResponse: Sendable {
    struct State {
        var suspended = false
        var over = false
    }
    let stream: any HTTPStream
    let connection: ConnectionPointer
    let state = Mutex(State())
    /// The server's (it outlives its responses: the library ends them all before it stops).
    let context: Context

    init(stream: any HTTPStream, connection: OpaquePointer, context: Context) {
        self.stream = stream
        self.connection = ConnectionPointer(pointer: connection)
        self.context = context
    }

    /// The library asks for up to `max` bytes (on its thread).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        state.withLock { s -> Int in
            if s.over { return vigil_mhd_end_of_stream }
            var slept = false
            let read = stream.read(
                into: buffer,
                sleep: {
                    MHD_suspend_connection(connection.pointer)
                    slept = true
                },
                wake: { [weak self] in self?.wake() })
            switch read {
            case .bytes(let count) where count > 0: return count
            case .waiting where slept:
                s.suspended = true
                return 0
            default:
                if slept { MHD_resume_connection(connection.pointer) }
                s.over = true
                return vigil_mhd_end_of_stream
            }
        }
    }

    /// The stream has more (any thread).
    func wake() {
        state.withLock { s in
            guard s.suspended else { return }
            s.suspended = false
            MHD_resume_connection(connection.pointer)
        }
    }

    /// The server stops: the body ends at the next read.
    func end() {
        state.withLock { s in
            s.over = true
            if s.suspended {
                s.suspended = false
                MHD_resume_connection(connection.pointer)
            }
        }
    }

    /// The library is done with the response (the connection is closing).
    func gone() {
        state.withLock { $0.over = true }
        let last = context.streams.withLock { s in
            s.open.removeValue(forKey: ObjectIdentifier(self))
            return s.stopping && s.open.isEmpty
        }
        if last { context.streamsEnded.signal() }
        stream.close()
    }
}

private let streamReader: MHD_ContentReaderCallback = { context, _, buffer, max in
    guard let context, let buffer else { return vigil_mhd_end_of_stream }
    let response = Unmanaged<StreamResponse>.fromOpaque(context).takeUnretainedValue()
    return response.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: max))
}

private let streamDone: MHD_ContentReaderFreeCallback = { context in
    guard let context else { return }
    let response = Unmanaged<StreamResponse>.fromOpaque(context).takeRetainedValue()
    response.gone()
}

/// One request's body while it arrives (the library calls the handler once per piece), and its
/// answer while a work thread builds it (used on the polling thread only).
final class RequestBody {
    var bytes: [UInt8] = []
    var tooLarge = false
    /// Who signed in (Digest), when the server has passwords.
    var user: String?
    var signInPending = false
    /// Handed to the work threads: the handler is called again once its answer is built.
    var pending: PendingAnswer?
}

/// The pairs of one kind of a connection's values (headers, query arguments).
private final class Pairs {
    var values: [String: String] = [:]
    let lowercased: Bool
    init(lowercased: Bool) { self.lowercased = lowercased }
}

private func values(of connection: OpaquePointer?, kind: MHD_ValueKind, lowercased: Bool) -> [String: String] {
    let pairs = Pairs(lowercased: lowercased)
    let opaque = Unmanaged.passUnretained(pairs).toOpaque()
    _ = MHD_get_connection_values(
        connection, kind,
        { context, _, key, value in
            guard let context, let key else { return MHD_Result.YES }
            let pairs = Unmanaged<Pairs>.fromOpaque(context).takeUnretainedValue()
            let name = String(cString: key)
            pairs.values[pairs.lowercased ? name.lowercased() : name] = value.map { String(cString: $0) } ?? ""
            return MHD_Result.YES
        }, opaque)
    return withExtendedLifetime(pairs) { pairs.values }
}

/// The library's access handler: called when a request's headers are in (the body state is
/// made), once per piece of its body, and once more when it is whole (then answered, or handed
/// to the work threads: then once more when its answer is built).
private let accessHandler: MHD_AccessHandlerCallback = {
    context, connection, url, method, _, uploadData, uploadSize, requestContext in
    guard let context, let requestContext, let uploadSize else { return MHD_Result.NO }
    let server = Unmanaged<Context>.fromOpaque(context).takeUnretainedValue()
    guard let state = requestContext.pointee else {
        // The headers are in: a request for another name, or one that has not signed in, is
        // answered now (its body, if any, is never read).
        let body = RequestBody()
        switch admit(
            connection, path: url.map { String(cString: $0) } ?? "/",
            method: method.map { String(cString: $0) } ?? "GET",
            server: server)
        {
        case .admitted(let user): body.user = user
        case .signInInBody: body.signInPending = true
        case .refused(let refused): return refused
        }
        requestContext.pointee = Unmanaged.passRetained(body).toOpaque()
        return MHD_Result.YES
    }
    let body = Unmanaged<RequestBody>.fromOpaque(state).takeUnretainedValue()
    if let pending = body.pending {
        let built = pending.answered ?? .error(500, "The answer was lost: please ask again.")
        return queue(built, on: connection, server: server)
    }
    if uploadSize.pointee > 0 {
        if !body.tooLarge, let uploadData {
            if body.bytes.count + uploadSize.pointee > server.bodyLimit {
                body.tooLarge = true
                body.bytes = []
            } else {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: uploadSize.pointee) {
                    body.bytes.append(contentsOf: UnsafeBufferPointer(start: $0, count: uploadSize.pointee))
                }
            }
        }
        uploadSize.pointee = 0
        return MHD_Result.YES
    }
    let response: HTTPResponse
    if body.tooLarge {
        response = .error(413, "The request's body is larger than \(server.bodyLimit) bytes.")
    } else {
        var request = HTTPRequest(
            method: method.map { String(cString: $0) } ?? "GET", path: url.map { String(cString: $0) } ?? "/",
            query: values(of: connection, kind: MHD_ValueKind.GET_ARGUMENT_KIND, lowercased: false),
            headers: values(of: connection, kind: MHD_ValueKind.HEADER_KIND, lowercased: true), body: body.bytes,
            user: body.user, client: clientAddress(connection)?.bytes)
        request.signInPending = body.signInPending
        if server.needsWork(request) { return handToWork(request, on: connection, body: body, server: server) }
        response = server.handler(request)
        if body.signInPending, response.signIn != nil { return settle(response, on: connection, server: server) }
    }
    return queue(response, on: connection, server: server)
}

/// The send buffer a streamed response's socket is given (the kernel doubles it): a second of a
/// 1 Mbit/s stream, a few hundred milliseconds of the default 4 Mbit/s — what a viewer that
/// stopped reading gets late before the stream's own skip to the newest keyframe.
let streamSendBuffer = 64 * 1024

/// Hands `response` to the library for `connection`, with `commonHeaders`.
func queue(_ response: HTTPResponse, on connection: OpaquePointer?, server: Context) -> MHD_Result {
    let made: OpaquePointer?
    switch response.body {
    case .bytes(let bytes):
        made = bytes.withUnsafeBytes {
            MHD_create_response_from_buffer(
                bytes.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY
            )
        }
    case .file(let file, let offset, let length):
        // The library closes what it is given: a duplicate, so the shared file stays open.
        guard let copy = try? file.descriptor.duplicate() else {
            return queue(
                .error(503, "The server is out of file descriptors; try again."), on: connection, server: server)
        }
        made = fileResponse(copy, offset: offset, length: length)
    case .stream(let stream):
        guard let connection else { return MHD_Result.NO }
        let streamed = StreamResponse(stream: stream, connection: connection, context: server)
        let refused = server.streams.withLock { s -> HTTPResponse? in
            if s.stopping { return .serverStopping }
            if s.open.count >= server.streamLimit { return .tooManyStreams(server.streamLimit) }
            s.open[ObjectIdentifier(streamed)] = streamed
            return nil
        }
        if let refused {
            stream.close()
            return queue(refused, on: connection, server: server)
        }
        // A live stream is sent as it is made: what the kernel holds for a client that stopped
        // reading is what it would see late (`streamSendBuffer`).
        vigil_mhd_limit_send_buffer(connection, Int32(streamSendBuffer))
        let retained = Unmanaged.passRetained(streamed)
        made = vigil_mhd_stream_response(16 * 1024, streamReader, retained.toOpaque(), streamDone)
        if made == nil {
            retained.release()
            streamed.gone()
        }
    }
    guard let made else { return MHD_Result.NO }
    defer { MHD_destroy_response(made) }
    for (name, value) in response.headers { _ = MHD_add_response_header(made, name, value) }
    for (name, value) in commonHeaders where MHD_get_response_header(made, name) == nil {
        _ = MHD_add_response_header(made, name, value)
    }
    let streaming = if case .stream = response.body { true } else { false }
    server.room.withLock { $0.answering(UInt(bitPattern: connection), streaming: streaming) }
    return MHD_queue_response(connection, UInt32(response.status), made)
}

/// A response of `length` bytes of `descriptor` from `offset`. Once made, the response owns the
/// descriptor; else it is closed here. (The descriptor is consumed on every path: Swift 6.0.3's
/// optimizer crashes on a noncopyable value consumed on one path only.)
private func fileResponse(_ descriptor: consuming FileDescriptor, offset: UInt64, length: UInt64) -> OpaquePointer? {
    let raw = descriptor.release()
    let made = MHD_create_response_from_fd_at_offset64(length, raw, offset)
    if made == nil { _ = FileDescriptor(adopting: raw) }
    return made
}

/// The library's word that a connection began or closed (on its thread). A newcomer beyond the
/// connections kept pushes one out: its socket is shut down here, on the library's thread, so
/// it cannot have been closed and its number reused meanwhile; the library then finds it ended
/// and closes it.
private let connectionNotified: MHD_NotifyConnectionCallback = { context, connection, _, code in
    guard let context, let connection else { return }
    let server = Unmanaged<Context>.fromOpaque(context).takeUnretainedValue()
    let key = UInt(bitPattern: connection)
    if code == vigil_mhd_connection_started {
        let descriptor = vigil_mhd_connection_fd(connection)
        if let out = server.room.withLock({ $0.started(key, descriptor: descriptor) }), out >= 0 {
            try? FileDescriptor(unowned: out).shutdownConnection()
        }
    } else {
        server.room.withLock { $0.closed(key) }
    }
}

/// The library says a request is over (answered, or its connection gone): its body state goes,
/// and the connection waits for the next.
private let requestCompleted: MHD_RequestCompletedCallback = { context, connection, requestContext, _ in
    if let context {
        let server = Unmanaged<Context>.fromOpaque(context).takeUnretainedValue()
        server.room.withLock { $0.completed(UInt(bitPattern: connection)) }
    }
    guard let requestContext, let state = requestContext.pointee else { return }
    Unmanaged<RequestBody>.fromOpaque(state).release()
    requestContext.pointee = nil
}
