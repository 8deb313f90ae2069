internal import CLinux

/// Linux calls glibc declares only for _GNU_SOURCE (accept4, pipe2, sendmmsg), or that glibc's
/// Swift overlay cannot reach (IP_PKTINFO's control messages), through CLinux's shim. In a file of their own that names no socket type: a file that imports CLinux
/// and uses socket declarations can make them CLinux's for the module's other files, which
/// import Glibc alone and then do not find them (a clean build with Swift 6.0.3 failed so).
enum LinuxCalls {
    /// accept4: `address` a sockaddr_storage, `length` its size; -1 with errno on failure.
    static func accept(
        _ fd: Int32, _ address: UnsafeMutableRawPointer, _ length: UnsafeMutablePointer<UInt32>, flags: Int32
    ) -> Int32 {
        vigil_accept4(fd, address, length, flags)
    }

    /// One datagram without waiting, with where it came from (a sockaddr_in) and the local
    /// address it reached (an in_addr; IP_PKTINFO): its whole length, or -1 with errno.
    static func receiveDatagram(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, from: UnsafeMutableRawPointer,
        local: UnsafeMutableRawPointer
    ) -> Int {
        vigil_udp_receive(fd, buffer.baseAddress, buffer.count, from, local)
    }

    /// This machine's IPv4 addresses that take multicast, 4 bytes each, at most `capacity`:
    /// how many, or -1 with errno.
    static func multicastInterfaces(into addresses: UnsafeMutablePointer<UInt8>?, capacity: Int32) -> Int32 {
        vigil_multicast_interfaces(addresses, capacity)
    }

    /// pipe2: the two ends into `ends`; -1 with errno on failure.
    static func pipe(_ ends: UnsafeMutablePointer<Int32>, flags: Int32) -> Int32 {
        vigil_pipe2(ends, flags)
    }

    /// sendmmsg, without waiting: each range of `base` a datagram to `address` (a sockaddr of
    /// `length` bytes); those the socket cannot take now are dropped. How many were sent.
    @discardableResult
    static func sendDatagrams(
        _ fd: Int32, _ base: UnsafeRawPointer, starts: [Int], ends: [Int], to address: UnsafeRawPointer, length: UInt32
    ) -> Int {
        Int(
            vigil_send_datagrams(
                fd, base.assumingMemoryBound(to: UInt8.self), starts, ends, Int32(starts.count), address, length))
    }
}
