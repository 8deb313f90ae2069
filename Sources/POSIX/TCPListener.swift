internal import Glibc

/// A listening TCP socket on a numeric address (`127.0.0.1`, `0.0.0.0`, `::1`, `::`): the web
/// server's. Close-on-exec, with SO_REUSEADDR (a restarted agent takes its port back at once)
/// and, on an IPv6 address, IPv6 only.
public enum TCPListener {
    /// Why no socket listens: the endpoint asked, the step that failed and the system's error.
    /// The caller adds what to do in its own words (the setting to change).
    public struct Failure: Error, CustomStringConvertible, Sendable, Equatable {
        public enum Step: Sendable, Equatable {
            /// The port is not one from 0 to 65535.
            case notAPort
            /// The address is not an IPv4 address in dotted quads or an IPv6 address.
            case notAnAddress
            /// No socket could be made (`socket`: out of descriptors, say).
            case socket(SystemError)
            /// `bind` refused: `isAddressInUse`, `isAddressNotAvailable`, `isPermissionDenied`…
            case bind(SystemError)
            case listen(SystemError)
        }
        /// `address:port`, as `TCPListener.endpoint` writes it.
        public var endpoint: String
        public var step: Step

        public init(endpoint: String, step: Step) {
            self.endpoint = endpoint
            self.step = step
        }

        /// The system's error, when a call failed.
        public var error: SystemError? {
            switch step {
            case .notAPort, .notAnAddress: nil
            case .socket(let error), .bind(let error), .listen(let error): error
            }
        }

        public var description: String {
            switch step {
            case .notAPort: "cannot listen on \(endpoint): the port is not one from 0 to 65535"
            case .notAnAddress: "cannot listen on \(endpoint): the address is not a numeric IPv4 or IPv6 address"
            case .socket(let error): "cannot make a socket for \(endpoint): \(error)"
            case .bind(let error), .listen(let error): "cannot listen on \(endpoint): \(error)"
            }
        }
    }

    /// `address:port`, with brackets around an IPv6 address: `[::1]:8080`.
    public static func endpoint(_ address: String, _ port: Int) -> String {
        address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
    }

    /// A socket listening on `address` and `port` (0: any free one, which the kernel picks:
    /// `localPort()` says which), with `backlog` connections queued before they are taken.
    public static func listen(address: String, port: Int, backlog: Int32) throws(Failure) -> FileDescriptor {
        let endpoint = endpoint(address, port)
        guard (0...65535).contains(port) else { throw Failure(endpoint: endpoint, step: .notAPort) }
        guard let bytes = NumericAddress.parse(address) else { throw Failure(endpoint: endpoint, step: .notAnAddress) }
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let socket: FileDescriptor
        do {
            socket = FileDescriptor(
                adopting: try retryOnInterrupt {
                    Glibc.socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                })
        } catch { throw Failure(endpoint: endpoint, step: .socket(error)) }
        let fd = socket.rawValue
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 {
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        do { try retryOnInterrupt { withSocketAddress(bytes, port: port) { Glibc.bind(fd, $0, $1) } } } catch {
            throw Failure(endpoint: endpoint, step: .bind(error))
        }
        do { try retryOnInterrupt { Glibc.listen(fd, backlog) } } catch {
            throw Failure(endpoint: endpoint, step: .listen(error))
        }
        return socket
    }

    /// `bytes` (4 or 16, network order) and `port` as a `sockaddr_in` or `sockaddr_in6`, for `body`.
    private static func withSocketAddress<T>(
        _ bytes: [UInt8], port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T
    ) -> T {
        if bytes.count == 4 {
            var v4 = sockaddr_in()
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &v4.sin_addr) { $0.copyBytes(from: bytes) }
            return withGenericAddress(&v4, body)
        }
        var v6 = sockaddr_in6()
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = UInt16(port).bigEndian
        withUnsafeMutableBytes(of: &v6.sin6_addr) { $0.copyBytes(from: bytes) }
        return withGenericAddress(&v6, body)
    }
}

/// `address` (a `sockaddr_in`, `sockaddr_in6`, `sockaddr_un`…) as the `struct sockaddr *` and
/// length the socket calls take.
func withGenericAddress<Address, T>(
    _ address: inout Address, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T
) -> T {
    withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<Address>.size)) }
    }
}

extension FileDescriptor {
    /// The port a TCP socket is bound to (`getsockname`).
    public func localPort() throws(SystemError) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = rawValue
        try retryOnInterrupt {
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
        }
        return withUnsafeBytes(of: &storage) { raw in
            // sin_port and sin6_port both follow the two bytes of the family, in network order.
            Int(raw[2]) << 8 | Int(raw[3])
        }
    }

    /// Shuts a connected socket down both ways (`shutdown`): its peer sees the end, and whoever
    /// owns the descriptor finds it ended and closes it. For a socket a library holds (a
    /// connection libmicrohttpd or libmosquitto owns), reached with `FileDescriptor(unowned:)`.
    public func shutdownConnection() throws(SystemError) {
        try retryOnInterrupt { shutdown(rawValue, Int32(SHUT_RDWR)) }
    }
}

extension NumericAddress {
    /// The address of a socket address a library hands over (a `struct sockaddr *`: an IPv4 or
    /// IPv6 one), as `parse` gives it: 4 or 16 bytes in network order; nil for another family.
    public static func bytes(ofSocketAddress address: UnsafeRawPointer) -> [UInt8]? {
        switch Int32(address.load(as: sockaddr.self).sa_family) {
        case AF_INET:
            let v4 = address.load(as: sockaddr_in.self)
            return withUnsafeBytes(of: v4.sin_addr) { Array($0) }
        case AF_INET6:
            let v6 = address.load(as: sockaddr_in6.self)
            return withUnsafeBytes(of: v6.sin6_addr) { Array($0) }
        default:
            return nil
        }
    }
}
