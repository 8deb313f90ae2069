import Foundation

/// The network between the board and a server: a TCP relay on a loopback port of its own to
/// the server's, which a test cuts (every connection dropped mid-stream, new ones closed as
/// they come) and mends, or makes flaky (each of the next connections dropped a few seconds
/// after it opens). `@unchecked Sendable`: its state is behind `lock`.
public final class NetworkRelay: @unchecked Sendable {
    public let port: Int
    private let target: Int
    private let listener: Int32
    /// Guards what follows.
    private let lock = NSLock()
    private var open: Set<Int32> = []
    private var isCut = false
    private var stopped = false
    private var relayed = 0
    /// Cut when this many bytes have gone towards the server (`cut(afterBytesToServer:)`).
    private var cutAt: Int?
    /// The connections open now, each by its two sockets (for the timed cuts).
    private var connections: [ObjectIdentifier: Ends] = [:]
    /// Connections still to be dropped `dropAfter` seconds after they open
    /// (`dropConnections(_:after:)`), and those dropped so far.
    private var drops = 0
    private var dropAfter: ClosedRange<Double> = 0...0
    private var dropped = 0

    public init(to target: Int) throws {
        self.target = target
        guard let (listener, port) = loopbackSocket(listening: true) else {
            throw RelayError(description: "the relay cannot listen: \(String(cString: strerror(errno)))")
        }
        self.listener = listener
        self.port = port
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Bytes relayed towards the server so far.
    public var bytesToServer: Int { lock.withLock { relayed } }

    /// Drops every connection (both ends see it closed) and closes new ones until `mend`.
    public func cut() { lock.withLock { cutLocked() } }

    /// Cuts (as `cut`) at the byte: once `count` bytes in all have gone towards the server.
    public func cut(afterBytesToServer count: Int) { lock.withLock { cutAt = count } }

    /// Whether the network is cut now.
    public var isCutNow: Bool { lock.withLock { isCut } }

    /// A flaky link: each of the next `count` connections is dropped (both ends see it
    /// closed) a time drawn from `seconds` after it opens; the ones after them are left alone.
    /// A connection that ends before its time passes its drop on to the next one.
    public func dropConnections(_ count: Int, after seconds: ClosedRange<Double>) {
        lock.withLock {
            drops = count
            dropAfter = seconds
        }
    }

    /// Connections dropped so far by `dropConnections`.
    public var connectionsDropped: Int { lock.withLock { dropped } }

    private func cutLocked() {
        isCut = true
        cutAt = nil
        for socket in open { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    public func mend() { lock.withLock { isCut = false } }

    /// Ends the relay: its connections and its port (the accepting thread keeps it alive
    /// until then).
    public func stop() {
        let already = lock.withLock {
            defer { stopped = true }
            return stopped
        }
        guard !already else { return }
        cut()
        // The accepting thread closes it when it sees `stopped` (not here, under its feet).
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if lock.withLock({ stopped }) {
                if client >= 0 { close(client) }
                close(listener)
                return
            }
            if client < 0 { continue }
            guard !lock.withLock({ isCut }), let server = connectToTarget() else {
                close(client)
                continue
            }
            // A cut while it connected: this one is dropped too.
            let ends = Ends(client: client, server: server)
            let admitted = lock.withLock { () -> (Bool, dropIn: Double?) in
                guard !isCut && !stopped else { return (false, nil) }
                open.insert(client)
                open.insert(server)
                connections[ObjectIdentifier(ends)] = ends
                guard drops > 0 else { return (true, nil) }
                drops -= 1
                return (true, Double.random(in: dropAfter))
            }
            guard admitted.0 else {
                close(client)
                close(server)
                continue
            }
            Thread.detachNewThread { [self] in pump(from: client, to: server, toServer: true, ends) }
            Thread.detachNewThread { [self] in pump(from: server, to: client, toServer: false, ends) }
            if let seconds = admitted.dropIn {
                Thread.detachNewThread { [self] in
                    usleep(UInt32(seconds * 1_000_000))
                    drop(ends)
                }
            }
        }
    }

    /// Drops one connection as its time comes (`dropConnections`), or passes the drop on when
    /// it has ended already.
    private func drop(_ ends: Ends) {
        lock.withLock {
            guard connections[ObjectIdentifier(ends)] != nil else {
                drops += 1
                return
            }
            shutdown(ends.client, Int32(SHUT_RDWR))
            shutdown(ends.server, Int32(SHUT_RDWR))
            dropped += 1
        }
    }

    /// A connection's two sockets, closed once both directions are done.
    private final class Ends: @unchecked Sendable {
        let client: Int32
        let server: Int32
        var done = 0
        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }
    }

    private func connectToTarget() -> Int32? { loopbackConnection(target) }

    private func pump(from source: Int32, to destination: Int32, toServer: Bool, _ ends: Ends) {
        var buffer = [UInt8](repeating: 0, count: 16384)
        relaying: while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            // Towards the server, at most up to where a cut is due.
            let passing = toServer ? lock.withLock { cutAt.map { min(count, max(0, $0 - relayed)) } ?? count } : count
            var offset = 0
            while offset < passing {
                let sent = buffer.withUnsafeBytes {
                    send(destination, $0.baseAddress! + offset, passing - offset, Int32(MSG_NOSIGNAL))
                }
                if sent <= 0 { break relaying }
                offset += sent
            }
            if toServer {
                let cutNow = lock.withLock {
                    relayed += passing
                    guard let at = cutAt, relayed >= at else { return false }
                    cutLocked()
                    return true
                }
                if cutNow { break }
            }
        }
        // One direction ended: the other is ended too (a relay passes a close on whole).
        shutdown(source, Int32(SHUT_RDWR))
        shutdown(destination, Int32(SHUT_RDWR))
        let last = lock.withLock {
            ends.done += 1
            guard ends.done == 2 else { return false }
            open.remove(ends.client)
            open.remove(ends.server)
            connections[ObjectIdentifier(ends)] = nil
            return true
        }
        if last {
            close(ends.client)
            close(ends.server)
        }
    }
}

public struct RelayError: Error, CustomStringConvertible {
    public var description: String
}
