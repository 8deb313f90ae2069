internal import CLinux
internal import Glibc
import Synchronization

/// A UDP socket (IPv4) that takes a multicast group's datagrams on every interface that can
/// (WS-Discovery's probes), says for each where it came from and which of this machine's
/// addresses it reached, and sends datagrams out, to one peer or to the group on each
/// interface. `receive` waits on one thread; `stop` (any thread) wakes it through a pipe.
///
/// `@unchecked Sendable`: `receive` runs on one thread; `stop` only writes to the wake pipe;
/// `send` is `sendto`, which the kernel serializes, and the interface it sends from (a socket
/// option) is set only by the thread that sends to the group; what it joined is under a lock.
public final class MulticastSocket: @unchecked Sendable {
    /// A datagram taken.
    public struct Datagram: Sendable, Equatable {
        public var bytes: [UInt8]
        /// The sender's address (4 bytes) and port.
        public var from: [UInt8]
        public var port: Int
        /// The local address it reached: for a multicast datagram, the address of the
        /// interface it came in on.
        public var local: [UInt8]
    }

    /// What `receive` took.
    public enum Received: Sendable, Equatable {
        case datagram(Datagram)
        /// A datagram longer than the limit, dropped unread: its length.
        case tooLong(Int)
        /// Nothing came in the time given.
        case quiet
        /// `stop` was called.
        case stopped
    }

    /// This machine's IPv4 addresses that can take multicast (up, not loopback), asked of an
    /// AF_INET socket (no netlink: the packaged service's sandbox refuses it).
    public static func interfaceAddresses() -> [[UInt8]] {
        var bytes = [UInt8](repeating: 0, count: 4 * 64)
        let count = bytes.withUnsafeMutableBufferPointer { vigil_multicast_interfaces($0.baseAddress, 64) }
        guard count > 0 else { return [] }
        var addresses: [[UInt8]] = []
        for i in 0..<Int(count) {
            let address = Array(bytes[(4 * i)..<(4 * i + 4)])
            if !addresses.contains(address) { addresses.append(address) }
        }
        return addresses
    }

    private let socket: FileDescriptor
    private let wakeRead: FileDescriptor
    private let wakeWrite: FileDescriptor
    private let group: [UInt8]?
    private let membership = Mutex<[[UInt8]]>([])
    /// The interfaces whose addresses joined the group.
    public var joined: [[UInt8]] { membership.withLock { $0 } }

    /// A socket on `address` (4 bytes: 0.0.0.0 for every interface, 127.0.0.1 for this machine
    /// alone) and `port`, with SO_REUSEADDR (other WS-Discovery listeners share the port), in
    /// `group` on each of `interfaces` (none: unicast only). Multicast it sends goes one hop
    /// (TTL 1) and is looped back to this machine's listeners.
    public init(address: [UInt8], port: Int, group: [UInt8]?, interfaces: [[UInt8]]) throws(SystemError) {
        socket = FileDescriptor(
            adopting: try retryOnInterrupt {
                Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            })
        let fd = socket.rawValue
        var one: Int32 = 1
        let intSize = socklen_t(MemoryLayout<Int32>.size)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, intSize)
        try retryOnInterrupt { setsockopt(fd, Int32(IPPROTO_IP), IP_PKTINFO, &one, intSize) }
        var ttl: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_TTL, &ttl, intSize)
        setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, &one, intSize)
        var bound = Self.socketAddress(address, port: port)
        try retryOnInterrupt { withGenericAddress(&bound) { Glibc.bind(fd, $0, $1) } }
        self.group = group
        var ends: [Int32] = [-1, -1]
        try retryOnInterrupt { pipe(&ends) }
        wakeRead = FileDescriptor(adopting: ends[0])
        wakeWrite = FileDescriptor(adopting: ends[1])
        for end in ends { try LineServer.setNonBlockingAndCloseOnExec(end) }
        _ = join(interfaces)
    }

    /// Joins the group on those of `interfaces` (their addresses) it has not joined yet, and
    /// says which it joined now: an interface that came up since (a network that was not up
    /// when the agent started). Nothing without a group.
    public func join(_ interfaces: [[UInt8]]) -> [[UInt8]] {
        guard let group else { return [] }
        var joinedNow: [[UInt8]] = []
        for interface in interfaces where !joined.contains(interface) {
            var request = ip_mreq()
            withUnsafeMutableBytes(of: &request.imr_multiaddr) { $0.copyBytes(from: group) }
            withUnsafeMutableBytes(of: &request.imr_interface) { $0.copyBytes(from: interface) }
            let size = socklen_t(MemoryLayout<ip_mreq>.size)
            if setsockopt(socket.rawValue, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &request, size) == 0 {
                joinedNow.append(interface)
            }
        }
        membership.withLock { $0 += joinedNow }
        return joinedNow
    }

    /// The port it is bound to.
    public func localPort() throws(SystemError) -> Int { try socket.localPort() }

    /// The next datagram of at most `limit` bytes (a longer one is dropped, and said), waiting
    /// for it `seconds` at most (`.quiet` then); `.stopped` once `stop` is called.
    public func receive(limit: Int, seconds: Double) -> Received {
        var buffer = [UInt8](repeating: 0, count: limit)
        while true {
            var entries = [
                pollfd(fd: wakeRead.rawValue, events: Int16(POLLIN), revents: 0),
                pollfd(fd: socket.rawValue, events: Int16(POLLIN), revents: 0),
            ]
            let timeout = Int32(min(max(seconds, 0) * 1000, 3_600_000))
            let ready: Int32
            do { ready = try retryOnInterrupt { poll(&entries, 2, timeout) } } catch { continue }
            if entries[0].revents != 0 { return .stopped }
            if ready == 0 { return .quiet }
            var from = sockaddr_in()
            var local = in_addr()
            let received = buffer.withUnsafeMutableBytes {
                vigil_udp_receive(socket.rawValue, $0.baseAddress, $0.count, &from, &local)
            }
            // EAGAIN (taken by another), an ICMP error of an earlier send: the next one.
            guard received >= 0 else { continue }
            guard received <= limit else { return .tooLong(received) }
            let sender = withUnsafeBytes(of: &from.sin_addr) { Array($0) }
            let reached = withUnsafeBytes(of: &local) { Array($0) }
            return .datagram(
                Datagram(
                    bytes: Array(buffer.prefix(received)), from: sender, port: Int(UInt16(bigEndian: from.sin_port)),
                    local: reached))
        }
    }

    /// Sends `bytes` to `address` (4 bytes) and `port`; to a multicast group, out of the
    /// interface whose address is `interface` when given.
    public func send(_ bytes: [UInt8], to address: [UInt8], port: Int, interface: [UInt8]? = nil) throws(SystemError) {
        let fd = socket.rawValue
        if let interface {
            var chosen = in_addr()
            withUnsafeMutableBytes(of: &chosen) { $0.copyBytes(from: interface) }
            try retryOnInterrupt {
                setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &chosen, socklen_t(MemoryLayout<in_addr>.size))
            }
        }
        var target = Self.socketAddress(address, port: port)
        _ = try retryOnInterrupt {
            bytes.withUnsafeBytes { raw in
                withGenericAddress(&target) { Glibc.sendto(fd, raw.baseAddress, raw.count, 0, $0, $1) }
            }
        }
    }

    /// Makes `receive` return `.stopped`, now or at its next call (any thread).
    public func stop() {
        var byte: UInt8 = 1
        _ = Glibc.write(wakeWrite.rawValue, &byte, 1)
    }

    private static func socketAddress(_ address: [UInt8], port: Int) -> sockaddr_in {
        var v4 = sockaddr_in()
        v4.sin_family = sa_family_t(AF_INET)
        v4.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
        withUnsafeMutableBytes(of: &v4.sin_addr) { $0.copyBytes(from: address.prefix(4)) }
        return v4
    }
}
