import Foundation
import Synchronization

/// A TCP client of a loopback port, from a loopback address of its choosing (127.0.0.x: the
/// whole of 127/8 is this machine on Linux, so one test plays many machines), that never
/// blocks: a test holds hundreds of them on its own thread.
public final class LoopbackClient {
    public let descriptor: Int32
    /// The address it connects from.
    public let source: String
    /// What the server sent so far.
    public private(set) var received: [UInt8] = []
    /// Whether the server closed the connection (or reset it).
    public private(set) var ended = false

    /// Connects to `port` from `source`, without waiting for the connection to be taken.
    /// `receiveBuffer` makes the client's buffer small, so that a client that never reads is
    /// soon one the server cannot write to.
    public init(port: Int, from source: String = "127.0.0.1", receiveBuffer: Int32? = nil) throws {
        self.source = source
        descriptor = socket(
            AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw LoopbackClientError.socket(String(cString: strerror(errno))) }
        if var size = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = loopbackAddress(port)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let error = String(cString: strerror(errno))
            close(descriptor)
            throw LoopbackClientError.socket("bind \(source): \(error)")
        }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 || errno == EINPROGRESS else {
            let error = String(cString: strerror(errno))
            close(descriptor)
            throw LoopbackClientError.socket("connect from \(source): \(error)")
        }
    }

    deinit { close(descriptor) }

    /// What is still to be sent, as soon as the connection takes it.
    private var output: [UInt8] = []

    /// Sends `text` as soon as the connection takes it: now, or while `wait` waits.
    public func send(_ text: String) {
        output += Array(text.utf8)
        flush()
    }

    /// Sends `bytes` as soon as the connection takes it (a WebSocket's frames, which are no text).
    public func send(bytes: [UInt8]) {
        output += bytes
        flush()
    }

    /// Whether everything given to `send` went.
    public var sent: Bool { output.isEmpty }

    private func flush() {
        guard !output.isEmpty, !ended else { return }
        let n = output.withUnsafeBytes {
            Foundation.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        if n > 0 { output.removeFirst(n) }
    }

    /// Takes what the server sent, without waiting.
    public func receive() {
        var buffer = [UInt8](repeating: 0, count: 16384)
        while !ended {
            let n = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                received += buffer[..<n]
            } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                ended = true
            } else {
                return
            }
        }
    }

    /// The answer's status line, once it is in.
    public var statusLine: String? {
        guard let end = received.firstIndex(of: UInt8(ascii: "\r")) else { return nil }
        return String(decoding: received[..<end], as: UTF8.self)
    }

    /// Whether the answer's status line and headers are in.
    public var hasHeaders: Bool { received.firstRange(of: Array("\r\n\r\n".utf8)) != nil }

    /// The answer's header `name` (any case), once the headers are in.
    public func header(_ name: String) -> String? {
        let text = String(decoding: received, as: UTF8.self)
        guard let head = text.components(separatedBy: "\r\n\r\n").first, text.contains("\r\n\r\n") else { return nil }
        for line in head.split(separator: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == name.lowercased() {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    /// Waits until `done` holds for every one of `clients`, sending what they have to send and
    /// (when `reading`) taking what the server sends, for up to `timeout` seconds (a test's "gave
    /// up waiting"); returns those it does not hold for.
    public static func wait(
        for clients: [LoopbackClient], timeout: Double, reading: Bool = true, until done: (LoopbackClient) -> Bool
    ) -> [LoopbackClient] {
        let deadline = Date().addingTimeInterval(timeout)
        var waiting = clients.filter { !done($0) }
        while !waiting.isEmpty && Date() < deadline {
            var fds = waiting.map {
                pollfd(
                    fd: $0.descriptor, events: (reading ? Int16(POLLIN) : 0) | ($0.output.isEmpty ? 0 : Int16(POLLOUT)),
                    revents: 0)
            }
            _ = poll(&fds, nfds_t(fds.count), 100)
            for client in waiting {
                client.flush()
                if reading { client.receive() }
            }
            waiting = waiting.filter { !done($0) }
        }
        return waiting
    }
}

public enum LoopbackClientError: Error, CustomStringConvertible {
    case socket(String)
    public var description: String {
        switch self {
        case .socket(let why): "a loopback client cannot be made: \(why)"
        }
    }
}

/// Slowloris: connections that each send the start of a request line and then a byte now and
/// then (every `interval` seconds, from a thread of their own), so that no idle time-out ever
/// closes them and no request ever ends.
public final class SlowClients: Sendable {
    public let descriptors: [Int32]
    /// How many have begun their request line (their connection made).
    public var started: Int { startedCount.load(ordering: .relaxed) }
    private let startedCount = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)
    private let done = Atomic<Bool>(false)

    /// `count` connections to `port`, from `sources` in turn.
    public init(port: Int, count: Int, from sources: [String], interval: Double = 1) throws {
        var made: [Int32] = []
        for i in 0..<count {
            let client = try LoopbackClient(port: port, from: sources[i % sources.count])
            made.append(dup(client.descriptor))
        }
        descriptors = made
        Thread.detachNewThread { [self] in
            // Each starts its request line once its connection is made (some wait in the
            // server's backlog), then adds a byte every `interval`.
            var started = [Bool](repeating: false, count: descriptors.count)
            var ticks = 0
            while running.load(ordering: .relaxed) {
                let trickle = ticks % max(1, Int(interval * 20)) == 0
                for (i, fd) in descriptors.enumerated() where !started[i] || trickle {
                    let bytes: [UInt8] = started[i] ? [UInt8(ascii: "a")] : Array("GET /".utf8)
                    let sent = bytes.withUnsafeBytes {
                        Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                    }
                    if sent == bytes.count && !started[i] {
                        started[i] = true
                        startedCount.add(1, ordering: .relaxed)
                    }
                }
                ticks += 1
                usleep(50_000)
            }
            done.store(true, ordering: .releasing)
        }
    }

    /// Ends the trickle and closes every connection.
    public func close() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        while !done.load(ordering: .acquiring) { usleep(10_000) }
        for fd in descriptors { Foundation.close(fd) }
    }

    deinit { close() }
}

/// The server's side of this process's TCP connections on `port` (not its listening socket):
/// how many bytes each has not yet got to its client (a client that does not read keeps them
/// there), from /proc.
public func serverConnections(onPort port: Int) -> [Int] {
    var queues: [String: Int] = [:]
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        // Read to the end: a /proc file says it is empty, and is longer than one read.
        let text = String(
            decoding: (try? FileHandle(forReadingFrom: URL(fileURLWithPath: table)).readToEnd()) ?? Data(),
            as: UTF8.self)
        // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 9, fields[3] != "0A", let colon = fields[1].lastIndex(of: ":"),
                Int(fields[1][fields[1].index(after: colon)...], radix: 16) == port,
                let sendQueue = fields[4].split(separator: ":").first.flatMap({ Int($0, radix: 16) })
            else { continue }
            queues[String(fields[9])] = sendQueue
        }
    }
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return fds.compactMap { fd in
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"),
            target.hasPrefix("socket:[")
        else { return nil }
        return queues[String(target.dropFirst("socket:[".count).dropLast())]
    }
}
