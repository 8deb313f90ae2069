internal import Glibc

/// A connected TCP socket that never blocks (the RTSP server's clients): reads and writes
/// say `wouldBlock` instead of waiting, and a write to a peer that left raises no SIGPIPE.
/// Owned: closed when the value goes away.
public final class StreamConnection: @unchecked Sendable {
    // `@unchecked Sendable`: used by one thread at a time (its server's loop).
    public let socket: FileDescriptor
    /// The peer's address, 4 or 16 bytes in network order, and port.
    public let peerAddress: [UInt8]
    public let peerPort: Int

    init(socket: consuming FileDescriptor, peerAddress: [UInt8], peerPort: Int) {
        self.socket = socket
        self.peerAddress = peerAddress
        self.peerPort = peerPort
    }

    /// What a read or a write did.
    public enum Transfer: Equatable, Sendable {
        /// This many bytes moved (a read of 0 bytes is `ended`).
        case moved(Int)
        /// Nothing can move now: wait until `poll` says it can.
        case wouldBlock
        /// The peer closed its side (a read), or the connection is gone.
        case ended
        case failed(SystemError)
    }

    /// Takes the next connection `listener` (made non-blocking: `TCPListener.makeNonBlocking`)
    /// has queued; nil when none is queued.
    public static func accept(from listener: borrowing FileDescriptor) throws(SystemError) -> StreamConnection? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = listener.rawValue
        // accept, then non-blocking and close-on-exec: glibc declares accept4 only for
        // _GNU_SOURCE, and calling it through CLinux's shim made the socket headers'
        // declarations the shim's for the module's other files (clean and release builds then
        // failed). A hook spawned in the microseconds between could inherit the socket.
        let accepted = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.accept(fd, $0, &length) }
        }
        guard accepted >= 0 else {
            let error = SystemError.current
            // Nothing queued, or a connection that went before it was taken.
            if error.code == EAGAIN || error.code == EWOULDBLOCK || error.code == EINTR
                || error.code == ECONNABORTED || error.code == EPROTO
            {
                return nil
            }
            throw error
        }
        let socket = FileDescriptor(adopting: accepted)
        try LineServer.setNonBlockingAndCloseOnExec(accepted)
        var one: Int32 = 1
        setsockopt(accepted, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let (address, port) = withUnsafeBytes(of: &storage) { raw -> ([UInt8], Int) in
            (
                NumericAddress.bytes(ofSocketAddress: raw.baseAddress!) ?? [],
                Int(raw[2]) << 8 | Int(raw[3])
            )
        }
        return StreamConnection(socket: socket, peerAddress: address, peerPort: port)
    }

    /// Reads what has come, up to `buffer`'s size.
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> Transfer {
        while true {
            let n = Glibc.recv(socket.rawValue, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            if n > 0 { return .moved(n) }
            if n == 0 { return .ended }
            let error = SystemError.current
            if error.code == EINTR { continue }
            if error.code == EAGAIN || error.code == EWOULDBLOCK { return .wouldBlock }
            if error.code == ECONNRESET || error.code == EPIPE { return .ended }
            return .failed(error)
        }
    }

    /// The most buffers `write` takes in one call.
    public static let mostBuffers = 64

    /// Writes `buffers` (`mostBuffers` at most) in one call (`sendmsg`): as much as the
    /// socket's buffer takes now.
    public func write(_ buffers: [UnsafeRawBufferPointer]) -> Transfer {
        var vectors = buffers.prefix(Self.mostBuffers).map {
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)
        }
        guard !vectors.isEmpty else { return .moved(0) }
        while true {
            let n = vectors.withUnsafeMutableBufferPointer { v -> Int in
                var message = msghdr()
                message.msg_iov = v.baseAddress
                message.msg_iovlen = v.count
                return sendmsg(socket.rawValue, &message, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n >= 0 { return .moved(n) }
            let error = SystemError.current
            if error.code == EINTR { continue }
            if error.code == EAGAIN || error.code == EWOULDBLOCK { return .wouldBlock }
            if error.code == ECONNRESET || error.code == EPIPE { return .ended }
            return .failed(error)
        }
    }

    /// Sets the socket's send buffer (`SO_SNDBUF`; the kernel doubles it for its bookkeeping):
    /// what a client that stopped reading holds in the kernel.
    public func setSendBuffer(_ bytes: Int) {
        var value = Int32(clamping: bytes)
        setsockopt(socket.rawValue, SOL_SOCKET, SO_SNDBUF, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Ends the sending side (`shutdown(SHUT_WR)`): the peer reads the end after what was sent.
    public func endSending() { Glibc.shutdown(socket.rawValue, Int32(SHUT_WR)) }
}

extension TCPListener {
    /// Makes a listening socket's `accept` return at once when nothing is queued.
    public static func makeNonBlocking(_ socket: borrowing FileDescriptor) throws(SystemError) {
        let fd = socket.rawValue
        let flags = try retryOnInterrupt { fcntl(fd, F_GETFL) }
        try retryOnInterrupt { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }
}

/// Waits on many descriptors at once (`poll`).
public struct PollSet: Sendable {
    /// What to wait for on one descriptor, and what came.
    public struct Entry: Sendable {
        public var descriptor: Int32
        public var wantsRead: Bool
        public var wantsWrite: Bool
        /// Set by `wait`: readable (or ended), writable, failed or hung up.
        public var canRead = false
        public var canWrite = false
        public var failed = false

        public init(descriptor: Int32, read: Bool, write: Bool) {
            self.descriptor = descriptor
            wantsRead = read
            wantsWrite = write
        }
    }

    public var entries: [Entry] = []
    private var raw: [pollfd] = []

    public init() {}

    /// Waits up to `milliseconds` for any entry's event; fills in each entry's results.
    public mutating func wait(milliseconds: Int32) {
        raw.removeAll(keepingCapacity: true)
        for entry in entries {
            var events: Int16 = 0
            if entry.wantsRead { events |= Int16(POLLIN) }
            if entry.wantsWrite { events |= Int16(POLLOUT) }
            raw.append(pollfd(fd: entry.descriptor, events: events, revents: 0))
        }
        let count = raw.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), milliseconds) }
        for index in entries.indices {
            let revents = count > 0 ? raw[index].revents : 0
            entries[index].canRead = revents & Int16(POLLIN | POLLHUP | POLLERR) != 0
            entries[index].canWrite = revents & Int16(POLLOUT) != 0
            entries[index].failed = revents & Int16(POLLERR | POLLNVAL) != 0
        }
    }
}

/// A pipe that wakes a thread waiting in `poll` (a stop asked from another thread): its read
/// end is polled; `wake` writes a byte, `drain` reads them all. Never blocks.
public final class WakePipe: @unchecked Sendable {
    // `@unchecked Sendable`: writing a byte to a pipe is safe from any thread.
    public let readEnd: FileDescriptor
    private let writeEnd: FileDescriptor

    public init() throws(SystemError) {
        var ends: [Int32] = [0, 0]
        try retryOnInterrupt { Glibc.pipe(&ends) }
        readEnd = FileDescriptor(adopting: ends[0])
        writeEnd = FileDescriptor(adopting: ends[1])
        try LineServer.setNonBlockingAndCloseOnExec(ends[0])
        try LineServer.setNonBlockingAndCloseOnExec(ends[1])
    }

    public func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(writeEnd.rawValue, &byte, 1)
    }

    public func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while Glibc.read(readEnd.rawValue, &bytes, 64) > 0 {}
    }
}

/// A UDP socket bound to a local address and a port the kernel picks (an RTP or RTCP sender):
/// datagrams go to any peer (`send`), and those that come are read and dropped (`discard`).
public final class DatagramSocket: @unchecked Sendable {
    // `@unchecked Sendable`: used by one thread at a time (its server's loop).
    public let socket: FileDescriptor
    public let port: Int
    private let family: Int32

    /// A socket on `address` (4 or 16 bytes) and `port` (0: any free one).
    public init(address: [UInt8], port: Int = 0) throws(SystemError) {
        let family = address.count == 4 ? AF_INET : AF_INET6
        self.family = family
        let fd = try retryOnInterrupt {
            Glibc.socket(
                family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        let socket = FileDescriptor(adopting: fd)
        var storage = Self.storage(address, port: port)
        let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
        try retryOnInterrupt {
            withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
            }
        }
        self.port = try socket.localPort()
        self.socket = socket
    }

    /// A peer's address and port as the socket calls take it.
    public struct Peer: @unchecked Sendable {
        fileprivate var storage: sockaddr_storage
        fileprivate var length: socklen_t
        public init(address: [UInt8], port: Int) {
            storage = DatagramSocket.storage(address, port: port)
            length = socklen_t(address.count == 4 ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
        }
    }

    /// Sends each of `datagrams` (ranges of `base`) to `peer`, one `sendto` each (glibc
    /// declares sendmmsg only for _GNU_SOURCE); what the socket's buffer cannot take now is
    /// dropped, as the network drops datagrams.
    public func send(_ base: UnsafeRawPointer, _ datagrams: [Range<Int>], to peer: Peer) {
        var peer = peer
        let fd = socket.rawValue
        let length = peer.length
        withUnsafePointer(to: &peer.storage) { storage in
            storage.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                for datagram in datagrams {
                    while Glibc.sendto(
                        fd, base + datagram.lowerBound, datagram.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), address,
                        length) < 0 && errno == EINTR
                    {}
                }
            }
        }
    }

    /// Reads every datagram that came and drops it; how many bytes they held.
    @discardableResult
    public func discard() -> Int {
        var bytes = [UInt8](repeating: 0, count: 2048)
        var total = 0
        while true {
            let n = Glibc.recv(socket.rawValue, &bytes, bytes.count, Int32(MSG_DONTWAIT))
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return total }
            total += n
        }
    }

    fileprivate static func storage(_ address: [UInt8], port: Int) -> sockaddr_storage {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            if address.count == 4 {
                var v4 = sockaddr_in()
                v4.sin_family = sa_family_t(AF_INET)
                v4.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
                withUnsafeMutableBytes(of: &v4.sin_addr) { $0.copyBytes(from: address) }
                withUnsafeBytes(of: v4) { raw.copyMemory(from: $0) }
            } else {
                var v6 = sockaddr_in6()
                v6.sin6_family = sa_family_t(AF_INET6)
                v6.sin6_port = UInt16(truncatingIfNeeded: port).bigEndian
                withUnsafeMutableBytes(of: &v6.sin6_addr) {
                    $0.copyBytes(from: address.count == 16 ? address : [UInt8](repeating: 0, count: 16))
                }
                withUnsafeBytes(of: v6) { raw.copyMemory(from: $0) }
            }
        }
        return storage
    }
}
