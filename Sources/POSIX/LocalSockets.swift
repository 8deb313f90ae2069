internal import Glibc

/// Unix stream sockets named by a path: the agent's side listens, `vigil trigger` connects.
/// Every descriptor is close-on-exec (a hook never inherits one).
public enum LocalSocket {
    /// The longest path a socket may be bound or reached at (`sun_path` less its NUL).
    public static var longestPath: Int { MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1 }

    /// A socket listening at `path` with `permissions`, non-blocking: for `LineServer`. Fails
    /// with EADDRINUSE when something has the name (the caller removes a stale socket first).
    ///
    /// The mode is set with `chmod` after `bind` and before `listen` — no client can connect
    /// before it listens, so none gets in under the mode `bind` gave. Not through the umask: that
    /// is the whole process's, and a thread creating a file (a clip) or starting a program (a
    /// hook) meanwhile would take the socket's narrow umask with it.
    public static func listen(
        at path: String, backlog: Int32 = 16, permissions: UInt32
    ) throws(SystemError)
        -> FileDescriptor
    {
        guard path.utf8.count <= longestPath else { throw SystemError(ENAMETOOLONG) }
        let socket = FileDescriptor(adopting: try retryOnInterrupt { streamSocket(nonBlocking: true) })
        try retryOnInterrupt { withAddress(path) { Glibc.bind(socket.rawValue, $0, $1) } }
        do { try retryOnInterrupt { chmod(path, mode_t(permissions)) } } catch {
            unlink(path)
            throw error
        }
        try retryOnInterrupt { Glibc.listen(socket.rawValue, backlog) }
        return socket
    }

    /// A blocking connection to the socket at `path`; reads and writes on it give up after
    /// `timeout` seconds (EAGAIN). ECONNREFUSED: nothing listens there (a socket left by a
    /// process that is gone); EACCES: this user may not use it.
    public static func connect(to path: String, timeout: Double) throws(SystemError) -> FileDescriptor {
        guard path.utf8.count <= longestPath else { throw SystemError(ENAMETOOLONG) }
        let socket = FileDescriptor(adopting: try retryOnInterrupt { streamSocket(nonBlocking: false) })
        try retryOnInterrupt { withAddress(path) { Glibc.connect(socket.rawValue, $0, $1) } }
        var time = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        for option in [SO_RCVTIMEO, SO_SNDTIMEO] {
            try retryOnInterrupt {
                setsockopt(socket.rawValue, SOL_SOCKET, option, &time, socklen_t(MemoryLayout<timeval>.size))
            }
        }
        return socket
    }

    private static func streamSocket(nonBlocking: Bool) -> Int32 {
        let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        return socket(AF_UNIX, flags | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0), 0)
    }

    private static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withGenericAddress(&address, body)
    }
}

extension FileDescriptor {
    /// Sends all of `text` on a connected socket without raising SIGPIPE (EPIPE instead).
    public func send(_ text: String) throws(SystemError) {
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = try bytes.withUnsafeBytes { raw in
                Result { () throws(SystemError) in
                    try retryOnInterrupt {
                        Glibc.send(rawValue, raw.baseAddress! + done, raw.count - done, Int32(MSG_NOSIGNAL))
                    }
                }
            }.get()
            if n == 0 { throw SystemError(EPIPE) }
            done += n
        }
    }

    /// One line from a connected socket, without its newline: what came before the end of the
    /// stream when it has no newline, nil when nothing came. At most `limit` bytes are read.
    /// A read timeout (`LocalSocket.connect`'s) throws EAGAIN.
    public func receiveLine(limit: Int) throws(SystemError) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < limit {
            let n = try retryOnInterrupt { recv(rawValue, &byte, 1, 0) }
            guard n == 1 else { break }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }
}

/// A server of one-line requests on a listening Unix socket: each client writes a line, gets
/// one line back, and is let go. One thread serves every client at once — a `poll` loop over
/// non-blocking sockets — so a client that is slow or says nothing holds up nobody:
///
/// - each client has `readDeadline` seconds from its connection to send its whole line; then
///   it is answered as `.silent` and let go;
/// - at most `maximumClients` are read at once; one more is answered `.busy` at once;
/// - a line longer than `lineLimit` bytes is answered `.tooLong`;
/// - `stop` wakes the loop through a pipe (no polling with a sleep): `serve` returns at once,
///   letting go of the clients still connected.
///
/// `@unchecked Sendable`: `serve` runs on one thread; `stop` only writes to the wake pipe.
public final class LineServer: @unchecked Sendable {
    /// What a client sent, for the answer.
    public enum Request: Sendable, Equatable {
        /// A whole line (without its newline), or what came before the client shut its side.
        case line(String)
        /// No whole line within the read deadline.
        case silent
        /// More than `lineLimit` bytes and no newline.
        case tooLong
        /// `maximumClients` are being read already.
        case busy
    }

    public let maximumClients: Int
    public let readDeadline: Double
    public let lineLimit: Int
    private let listening: FileDescriptor
    private let wakeRead: FileDescriptor
    private let wakeWrite: FileDescriptor

    private final class Client {
        let socket: FileDescriptor
        let deadline: Double
        var bytes: [UInt8] = []
        init(socket: consuming FileDescriptor, deadline: Double) {
            self.socket = socket
            self.deadline = deadline
        }
    }

    /// Serves the non-blocking listening socket `listening` (`LocalSocket.listen`).
    public init(
        listening: consuming FileDescriptor, maximumClients: Int = 16, readDeadline: Double = 2, lineLimit: Int = 256
    ) throws(SystemError) {
        var ends: [Int32] = [-1, -1]
        try retryOnInterrupt { pipe(&ends) }
        wakeRead = FileDescriptor(adopting: ends[0])
        wakeWrite = FileDescriptor(adopting: ends[1])
        for end in ends { try LineServer.setNonBlockingAndCloseOnExec(end) }
        self.listening = listening
        self.maximumClients = maximumClients
        self.readDeadline = readDeadline
        self.lineLimit = lineLimit
    }

    /// Makes `serve` return (from any thread); it returns at once if called before.
    public func stop() {
        var byte: UInt8 = 1
        _ = Glibc.write(wakeWrite.rawValue, &byte, 1)
    }

    /// Answers clients until `stop`: `answer` turns each request into the reply line (sent with
    /// a newline). Runs on the calling thread; `answer` must return at once.
    public func serve(_ answer: (Request) -> String) {
        var clients: [Client] = []
        while true {
            let now = LineServer.now()
            // Clients past their deadline first, so a full house makes room.
            for client in clients where client.deadline <= now { reply(client, answer(.silent)) }
            clients.removeAll { $0.deadline <= now }
            var entries = [
                pollfd(fd: wakeRead.rawValue, events: Int16(POLLIN), revents: 0),
                pollfd(fd: listening.rawValue, events: Int16(POLLIN), revents: 0),
            ]
            entries += clients.map { pollfd(fd: $0.socket.rawValue, events: Int16(POLLIN), revents: 0) }
            let soonest = clients.map(\.deadline).min().map { max(0, $0 - now) }
            let timeout = soonest.map { Int32(min(($0 * 1000).rounded(.up), 60_000)) } ?? -1
            guard (try? retryOnInterrupt { poll(&entries, nfds_t(entries.count), timeout) }) != nil else { continue }
            if entries[0].revents != 0 { return }
            var done = Set<ObjectIdentifier>()
            for (client, entry) in zip(clients, entries.dropFirst(2)) where entry.revents != 0 {
                switch read(client) {
                case .waiting: continue
                case .gone: break
                case .request(let request): reply(client, answer(request))
                }
                done.insert(ObjectIdentifier(client))
            }
            clients.removeAll { done.contains(ObjectIdentifier($0)) }
            if entries[1].revents != 0 { accept(into: &clients, answer) }
        }
    }

    /// Takes every waiting connection: read from, or answered `.busy` when the house is full.
    private func accept(into clients: inout [Client], _ answer: (Request) -> String) {
        while true {
            let fd: Int32
            do { fd = try retryOnInterrupt { Glibc.accept(listening.rawValue, nil, nil) } } catch {
                if error.code == ECONNABORTED { continue }
                return  // EAGAIN: no more waiting; EMFILE and the like: tried again at the next wake-up
            }
            let socket = FileDescriptor(adopting: fd)
            guard (try? LineServer.setNonBlockingAndCloseOnExec(fd)) != nil else { continue }
            let client = Client(socket: socket, deadline: LineServer.now() + readDeadline)
            if clients.count >= maximumClients {
                reply(client, answer(.busy))
            } else {
                clients.append(client)
            }
        }
    }

    private enum Reading {
        /// The request is whole.
        case request(Request)
        /// Not yet: more is to come.
        case waiting
        /// The client left without a word, or its socket failed.
        case gone
    }

    /// Reads what `client` sent so far.
    private func read(_ client: Client) -> Reading {
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let received = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) in
                    try retryOnInterrupt { Glibc.recv(client.socket.rawValue, raw.baseAddress, raw.count, 0) }
                }
            }
            let n: Int
            switch received {
            case .success(let count): n = count
            case .failure(let error): return error.code == EAGAIN || error.code == EWOULDBLOCK ? .waiting : .gone
            }
            if n == 0 {
                // The client shut its side: what it sent is its request.
                return client.bytes.isEmpty ? .gone : .request(.line(String(decoding: client.bytes, as: UTF8.self)))
            }
            for byte in buffer[..<n] {
                if byte == UInt8(ascii: "\n") { return .request(.line(String(decoding: client.bytes, as: UTF8.self))) }
                client.bytes.append(byte)
                if client.bytes.count > lineLimit { return .request(.tooLong) }
            }
        }
    }

    /// Sends `line` without waiting (a short reply fits the socket's buffer) and lets go.
    private func reply(_ client: Client, _ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes {
            Glibc.send(client.socket.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
    }

    /// Reads and writes on `fd` return EAGAIN instead of waiting; exec closes it.
    static func setNonBlockingAndCloseOnExec(_ fd: Int32) throws(SystemError) {
        let flags = try retryOnInterrupt { fcntl(fd, F_GETFL) }
        try retryOnInterrupt { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
        try retryOnInterrupt { fcntl(fd, F_SETFD, FD_CLOEXEC) }
    }

    /// Seconds on the monotonic clock (a client's deadline: a wait, never an injected clock's).
    private static func now() -> Double { Clock.monotonic.now().seconds }
}
